"""What this home knows of the hub: links, cursors and acks, in tables of the store itself.

The tables live in the store (not a file beside it) so that a pull applies its records and moves
its cursor in one SQLite transaction, and a push stamps its acks in one: a crash between the hub's
commit and the local stamp only causes an idempotent re-push. They are created when a project is
first linked (``CREATE TABLE IF NOT EXISTS``), so a store that never links pays nothing and the
store's own migrations stay the store's (docs/team-hub.md, "Departures").

- ``hub_links``: one row per linked project: the team, the connection string (never a password),
  the pull cursor and the hub's epoch, the last sync and its error, failures for the backoff;
- ``hub_items``: every record version the hub knows of, pushed from here (``origin`` local) or
  pulled (``origin`` hub), with its hub sequence, hash, author and the cues last sent;
- ``hub_ends``: the versions whose end (supersede or retire) the hub knows: never pushed again;
- ``hub_erased``: ids erased at the hub: never written or pushed again;
- ``hub_conflicts``: the rebases (two members superseded the same version), for ``team conflicts``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from agentctx.core import clock, writes
from agentctx.team.file import SHARED_TYPES, raw_stub

if TYPE_CHECKING:
    from agentctx.store import Store

TABLES = """
CREATE TABLE IF NOT EXISTS hub_links (
  project_id   TEXT PRIMARY KEY,
  team         TEXT NOT NULL,
  conninfo     TEXT NOT NULL,
  project_name TEXT NOT NULL,
  cursor       INTEGER NOT NULL DEFAULT 0,
  epoch        TEXT,
  role_name    TEXT,
  role         TEXT,
  linked_at    TEXT NOT NULL,
  last_sync    TEXT,
  last_error   TEXT,
  failures     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS hub_items (
  record_id  TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  seq        INTEGER,
  hash       TEXT,
  author     TEXT,
  origin     TEXT NOT NULL CHECK (origin IN ('local', 'hub')),
  status     TEXT NOT NULL DEFAULT 'ok',
  reason     TEXT,
  cues       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS hub_items_project ON hub_items(project_id, status);
CREATE TABLE IF NOT EXISTS hub_ends (
  record_id  TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  kind       TEXT NOT NULL,
  successor  TEXT,
  seq        INTEGER
);
CREATE TABLE IF NOT EXISTS hub_erased (
  record_id  TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  seq        INTEGER
);
CREATE TABLE IF NOT EXISTS hub_conflicts (
  project_id TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  record_id  TEXT NOT NULL,
  onto       TEXT NOT NULL,
  successor  TEXT NOT NULL,
  author     TEXT NOT NULL,
  at         TEXT NOT NULL,
  PRIMARY KEY (project_id, seq)
);
"""


async def ensure(store: Store) -> None:
    """Create the hub tables when missing."""
    async with store.transaction() as tx:
        for statement in TABLES.split(";"):
            if statement.strip():
                await tx.execute(statement)


async def has_tables(store: Store) -> bool:
    """True once a project of this store was linked."""
    row = await store.row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hub_links'")
    return row is not None


async def links(store: Store) -> list[dict[str, Any]]:
    """Every linked project's row (none when nothing was ever linked)."""
    if not await has_tables(store):
        return []
    return [dict(r) for r in await store.rows("SELECT * FROM hub_links ORDER BY project_id")]


async def link_of(store: Store, project_id: str) -> dict[str, Any] | None:
    """The link of one project, or None."""
    if not await has_tables(store):
        return None
    row = await store.row("SELECT * FROM hub_links WHERE project_id = ?", (project_id,))
    return None if row is None else dict(row)


async def save_link(
    store: Store,
    project_id: str,
    *,
    team: str,
    info: str,
    name: str,
    role_name: str,
    role: str,
    epoch: str,
) -> None:
    """Link (or re-link) a project; a link to another team or hub starts its cursor again."""
    await ensure(store)
    async with store.transaction() as tx:
        old = await tx.rows(
            "SELECT team, conninfo FROM hub_links WHERE project_id = ?", (project_id,)
        )
        same = bool(old) and old[0]["team"] == team and old[0]["conninfo"] == info
        if same:
            await tx.execute(
                "UPDATE hub_links SET role_name = ?, role = ?, project_name = ? "
                "WHERE project_id = ?",
                (role_name, role, name, project_id),
            )
            return
        await tx.execute("DELETE FROM hub_links WHERE project_id = ?", (project_id,))
        await _forget(tx, project_id)
        await tx.execute(
            "INSERT INTO hub_links(project_id, team, conninfo, project_name, cursor, epoch, "
            "role_name, role, linked_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)",
            (project_id, team, info, name, epoch, role_name, role, clock.now()),
        )


async def _forget(tx: Any, project_id: str) -> None:
    """Drop what this home knew of a hub for a project (its records stay)."""
    for table in ("hub_items", "hub_ends", "hub_erased", "hub_conflicts"):
        await tx.execute(f"DELETE FROM {table} WHERE project_id = ?", (project_id,))


async def unlink(store: Store, project_id: str) -> bool:
    """Stop syncing a project (its records, pulled ones included, stay); False when not linked."""
    if not await has_tables(store):
        return False
    async with store.transaction() as tx:
        gone = await tx.execute("DELETE FROM hub_links WHERE project_id = ?", (project_id,))
        await _forget(tx, project_id)
    return gone == 1


async def waiting(store: Store, project_id: str) -> dict[str, int]:
    """What waits to be pushed: ``{"versions": n, "events": n}``."""
    versions = await pending_versions(store, project_id)
    events = await pending_events(store, project_id, set())
    return {"versions": len(versions), "events": len(events)}


async def pending_versions(store: Store, project_id: str) -> list[dict[str, Any]]:
    """This project's shareable records written here that the hub does not know, in write order."""
    if not await has_tables(store):
        return []
    types = ", ".join("?" * len(SHARED_TYPES))
    rows = await store.rows(
        f"SELECT * FROM records WHERE project_id = ? AND scope = 'project' AND type IN ({types}) "
        "AND source <> 'import' "
        "AND id NOT IN (SELECT record_id FROM hub_items) "
        "AND id NOT IN (SELECT record_id FROM hub_erased) ORDER BY recorded_at, seq",
        (project_id, *SHARED_TYPES),
    )
    return [dict(r) for r in rows if not raw_stub(r)]


async def pending_events(store: Store, project_id: str, pushing: set[str]) -> list[dict[str, Any]]:
    """Supersessions and retirements of hub-known versions, and our versions' new cues."""
    if not await has_tables(store):
        return []
    known = {
        r["record_id"]
        for r in await store.rows(
            "SELECT record_id FROM hub_items WHERE project_id = ? AND status = 'ok'", (project_id,)
        )
    } | pushing
    ended = await store.rows(
        "SELECT r.id, r.superseded_by, r.superseded_at, s.recorded_at AS successor_at "
        "FROM records r JOIN hub_items h ON h.record_id = r.id "
        "LEFT JOIN records s ON s.id = r.superseded_by "
        "WHERE r.project_id = ? AND h.status = 'ok' AND r.superseded_at IS NOT NULL "
        "AND r.id NOT IN (SELECT record_id FROM hub_ends) ORDER BY r.superseded_at, r.seq",
        (project_id,),
    )
    events: list[dict[str, Any]] = []
    for row in ended:
        if row["superseded_by"] is None:
            events.append({"kind": "retire", "id": row["id"]})
        elif row["successor_at"] != row["superseded_at"]:
            # a consolidation merge (the survivor existed before it ended this one), not a new
            # version: merges stay local in v1 (docs/team-hub.md)
            continue
        elif row["superseded_by"] in known:
            events.append({"kind": "supersede", "id": row["id"], "successor": row["superseded_by"]})
    cued = await store.rows(
        "SELECT r.id, r.cues FROM records r JOIN hub_items h ON h.record_id = r.id "
        "WHERE r.project_id = ? AND h.origin = 'local' AND h.status = 'ok' AND r.cues <> h.cues",
        (project_id,),
    )
    for row in cued:
        events.append({"kind": "cues", "id": row["id"], "cues": _cues(row["cues"])})
    return events


def _cues(text: str) -> list[str]:
    return writes.normalize_cues(text)


_PAIR = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def shown(info: str) -> str:
    """A link's connection string as shown: service, host, port, database, user (never more)."""
    parts = {k: v.strip("'") for k, v in _PAIR.findall(info)}
    keys = ("service", "host", "port", "dbname", "user")
    return " ".join(f"{k}={parts[k]}" for k in keys if parts.get(k))


async def conflicts(store: Store, project_id: str | None = None) -> list[dict[str, Any]]:
    """The rebases the hub made, oldest first (all linked projects, or one)."""
    if not await has_tables(store):
        return []
    sql = "SELECT * FROM hub_conflicts"
    params: tuple[str, ...] = ()
    if project_id is not None:
        sql += " WHERE project_id = ?"
        params = (project_id,)
    return [dict(r) for r in await store.rows(sql + " ORDER BY project_id, seq", params)]
