"""Observations: what the capture hooks learned, applied to the store in one transaction.

Capture handlers turn an event into a list of observation dicts (plain data, so that they can wait in
the spool when the database is busy or missing); :func:`apply` writes them. Kinds:

* ``file``: a file the session wrote → a ``file`` node with an ``observed_in`` edge to the session.
* ``branch``: a branch the session created or switched to → a ``branch`` node, same edge.
* ``stub``: an inferred ``bugfix`` record ("Test failure: <command>", "Error observed: <command>"),
  deduplicated by title against the project's current records, linked to the files it names.
* ``handover``: an inferred ``handover`` of the session's checkout (``checkout``: its worktree
  top-level, the record's ``key``) that supersedes that checkout's current one and the legacy (key
  NULL) one; other worktrees' handovers are left alone. An observation spooled without a checkout
  writes a legacy handover.
"""

from __future__ import annotations

from agentctx import clock, schema
from agentctx.core import digests as digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import sqlean


def apply(conn: sqlean.Connection, observations: list[dict[str, Any]]) -> None:
    """Write observations atomically (``BEGIN IMMEDIATE`` … ``COMMIT``)."""
    if not observations:
        return
    changed: set[str] = set()
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("PRAGMA defer_foreign_keys = ON")
        for obs in observations:
            _apply_one(conn, obs, changed)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    digest.invalidate(changed)


def _apply_one(conn: sqlean.Connection, obs: dict[str, Any], changed: set[str]) -> None:
    kind = obs.get("kind")
    project_id = str(obs["project_id"])
    session_id = obs.get("session_id") or None
    at = str(obs.get("at") or clock.now())
    if kind in ("file", "branch"):
        node_id = _node(conn, project_id, kind, str(obs["name"]), at)
        if session_id:
            _edge(conn, node_id, session_id, "observed_in", at)
    elif kind in ("stub", "handover"):
        record_id = _record(conn, obs, project_id, session_id, at)
        changed.add(project_id)
        for name in obs.get("files") or []:
            node_id = _node(conn, project_id, "file", str(name), at)
            conn.execute(
                "INSERT OR IGNORE INTO record_entities(record_id, entity_id) VALUES (?, ?)",
                (record_id, node_id),
            )
    else:
        raise ValueError(f"unknown observation kind {kind!r}")


def _record(
    conn: sqlean.Connection, obs: dict[str, Any], project_id: str, session_id: str | None, at: str
) -> str:
    title = " ".join(str(obs["title"]).split())[: schema.TITLE_MAX]
    body = str(obs["body"]).strip()[: schema.BODY_MAX] or title
    record_type = "handover" if obs["kind"] == "handover" else "bugfix"
    if record_type == "bugfix":
        row = conn.execute(
            "SELECT id FROM records WHERE project_id = ? AND type = 'bugfix' AND title = ? "
            "AND superseded_at IS NULL",
            (project_id, title),
        ).fetchone()
        if row is not None:  # stubs dedupe by title: the files still get linked
            return str(row[0])
    record_id = clock.ulid()
    key = None
    if record_type == "handover":
        key = obs.get("checkout") or None
        current = conn.execute(schema.CURRENT_HANDOVER_SQL, (project_id, key)).fetchall()
        for (old_id,) in current:
            conn.execute(schema.SUPERSEDE_SQL, (at, record_id, old_id))
            _edge(conn, record_id, str(old_id), "supersedes", at)
    values = {
        "id": record_id,
        "project_id": project_id,
        "type": record_type,
        "title": title,
        "body": body,
        "scope": "project",
        "confidence": "inferred",
        "source": "hook_observation",
        "valid_from": at,
        "recorded_at": clock.now(),
        "keywords": str(obs.get("keywords") or ""),
        "key": key,
        "rationale": None,
        "pinned": 0,
        "reinforce_count": 0,
        "superseded_at": None,
        "superseded_by": None,
        "access_count": 0,
        "last_accessed": None,
        "score": 1.0,
        "claudemd_drift_score": 0.0,
        "session_id": session_id,
        "pending_embedding": 1,
    }
    conn.execute(schema.INSERT_RECORD_SQL, [values[name] for name in schema.RECORD_COLUMNS])
    return record_id


def _node(conn: sqlean.Connection, project_id: str, kind: str, name: str, at: str) -> str:
    conn.execute(
        "INSERT OR IGNORE INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
        (clock.ulid(), project_id, kind, name, at),
    )
    row = conn.execute(
        "SELECT id FROM nodes WHERE project_id = ? AND kind = ? AND name = ?",
        (project_id, kind, name),
    ).fetchone()
    return str(row[0])


def _edge(conn: sqlean.Connection, from_id: str, to_id: str, rel_type: str, at: str) -> None:
    conn.execute(schema.INSERT_EDGE_SQL, (clock.ulid(), from_id, to_id, rel_type, at))
