"""Observations: what the capture hooks learned, applied to the store in one transaction.

Capture handlers turn an event into a list of observation dicts (plain data, so that they can wait in
the spool when the database is busy or missing); :func:`apply` writes them. Kinds:

* ``file``: a file the session wrote → a ``file`` node with an ``observed_in`` edge to the session.
* ``branch``: a branch the session created or switched to → a ``branch`` node, same edge.
* ``stub``: an inferred ``bugfix`` record ("Test failure: <command>", "Error observed: <command>"),
  deduplicated by title against the project's current records, linked to the files it names; a
  test failure is linked to the files its session had edited before it too (the suspects).
* ``handover``: an inferred ``handover`` of the session's checkout (``checkout``: its worktree
  top-level, the record's ``key``) that supersedes that checkout's current one and the legacy (key
  NULL) one; other worktrees' handovers are left alone. An observation spooled without a checkout
  writes a legacy handover.
* ``test_pass`` and ``git``: a green test run and a git operation, folded so that repeats do not
  flood (:mod:`agentctx.core.activity`): :func:`_apply_activity`.
"""

from __future__ import annotations

from agentctx.core import clock, digests, schema, writes
from agentctx.core.plan import execute, run

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlean

    from agentctx.core.plan import Plan
    from agentctx.core.shapes import NewFields, Observation

#: The last line of a stub's body; extraction drops it when it explains the stub.
STUB_NOTE = "(Captured by the PostToolUse hook.)"
STUB_NOTE_FIX = "(Captured by the PostToolUse hook; extraction may add the cause and fix.)"
#: How the title of a test failure's stub begins.
TEST_FAILURE = "Test failure: "


def apply(conn: sqlean.Connection, observations: list[Observation]) -> int:
    """Write observations atomically (``BEGIN IMMEDIATE`` … ``COMMIT``); how many were written.

    Each tool call is applied once: the observations of a call (``call``, its ``tool_use_id``)
    that an earlier write already applied — the hook live, then ``extract --no-llm`` replaying the
    transcript, or a spooled copy — are skipped (:func:`first_time`).
    """
    if not observations:
        return 0
    changed: set[str] = set()
    written = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("PRAGMA defer_foreign_keys = ON")
        fresh: set[str] = set()
        for obs in observations:
            call = obs.get("call")
            if call and call not in fresh:
                if not run(conn, first_time(call, str(obs.get("session_id") or ""), obs)):
                    continue
                fresh.add(call)
            _apply_one(conn, obs, changed)
            written += 1
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    digests.invalidate(changed)
    return written


def first_time(call: str, session_id: str, obs: Observation) -> Plan[bool]:
    """Note a tool call as applied; False when it was already (``captured_calls``)."""
    count = yield execute(
        "INSERT INTO captured_calls(tool_use_id, session_id, at) VALUES (?, ?, ?) "
        "ON CONFLICT(tool_use_id) DO NOTHING",
        (call, session_id, str(obs.get("at") or clock.now())),
    )
    return bool(count)


def _apply_one(conn: sqlean.Connection, obs: Observation, changed: set[str]) -> None:
    kind = obs.get("kind")
    project_id = str(obs["project_id"])
    session_id = obs.get("session_id") or None
    at = str(obs.get("at") or clock.now())
    if kind in ("file", "branch"):
        node_id = run(conn, writes.node(project_id, kind, str(obs["name"]), at))
        if session_id:
            run(conn, writes.edge(node_id, session_id, "observed_in", at))
    elif kind in ("stub", "handover"):
        new = record_of(obs, project_id, session_id, at)
        if kind == "handover":
            record_id = str(run(conn, writes.add(new))["id"])
        else:  # stubs dedupe by title: the files still get linked
            record_id = run(conn, writes.add_stub(new))
        changed.add(project_id)
        for name in obs.get("files") or []:
            node_id = run(conn, writes.node(project_id, "file", str(name), at))
            run(conn, writes.link_entity(record_id, node_id))
        if session_id and kind == "stub" and new["title"].startswith(TEST_FAILURE):
            run(conn, writes.link_session_files(record_id, project_id, session_id, at))
    elif kind in ("test_pass", "git"):
        _apply_activity(conn, obs, project_id, session_id, at)
        changed.add(project_id)
    else:
        raise ValueError(f"unknown observation kind {kind!r}")


def _apply_activity(
    conn: sqlean.Connection, obs: Observation, project_id: str, session_id: str | None, at: str
) -> None:
    """A green test run or a git operation (:mod:`agentctx.core.activity`, loaded when needed)."""
    from agentctx.core import activity

    if obs["kind"] == "test_pass":
        command, summary = str(obs["command"]), str(obs.get("summary") or "")
        run(conn, activity.test_pass(project_id, session_id, at, command, summary))
    else:
        run(conn, activity.git(project_id, session_id, at, obs))


def record_of(obs: Observation, project_id: str, session_id: str | None, at: str) -> NewFields:
    """The new record (fields for :func:`agentctx.core.writes.validate`) of a stub or handover.

    Captured text is cut to the schema's limits (and freed of NULs) rather than refused.
    """
    title = " ".join(_clean(obs["title"]).split())[: schema.TITLE_MAX]
    handover = obs["kind"] == "handover"
    return {
        "type": "handover" if handover else "bugfix",
        "title": title,
        "body": _clean(obs["body"]).strip()[: schema.BODY_MAX] or title,
        "project_id": project_id,
        "confidence": "inferred",
        "source": "hook_observation",
        "keywords": str(obs.get("keywords") or ""),
        "key": (obs.get("checkout") or None) if handover else None,
        "session_id": session_id,
        "valid_from": at,
    }


def _clean(value: object) -> str:
    return str(value).replace("\x00", "")
