"""The team admin's side: ``hub-init`` (the schema, idempotent), teams, members and projects.

``hub-init`` applies every SQL file of ``sql/`` in order, in one transaction under an advisory
lock, and records the newest file's number in ``agentctx_hub.meta``: each file can run again
(``IF NOT EXISTS``, ``CREATE OR REPLACE``), so running it again upgrades a hub in place and a
crash in the middle leaves the hub as it was. It must run as a role that may create roles and
schemas (the database's owner with CREATEROLE, or a superuser); that role becomes the hub's
operator and the first admin of the team it creates.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import psycopg

from agentctx.team.hub import HubError
from agentctx.team.hub.connect import CLIENT, Session, connect, one_line

#: hub-init's advisory lock key (two admins running it at once wait for each other)
_LOCK = 0x61676E74


def sql_files() -> list[tuple[int, str, str]]:
    """``(number, name, text)`` of the hub's SQL files, in order."""
    folder = resources.files("agentctx.team.hub") / "sql"
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def hub_init(info: str, team: str) -> dict[str, Any]:
    """Apply the schema (every file, idempotent) and create ``team``; what was done."""
    files = sql_files()
    conn = await connect(info)
    try:
        before: str | None = None
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                cur = await conn.execute("SELECT to_regclass('agentctx_hub.meta') IS NOT NULL")
                row = await cur.fetchone()
                if row and row[0]:
                    cur = await conn.execute(
                        "SELECT value FROM agentctx_hub.meta WHERE key = 'schema'"
                    )
                    got = await cur.fetchone()
                    before = got[0] if got else None
                if before is not None and int(before) > files[-1][0]:
                    raise HubError(
                        f"this hub's schema ({before}) is newer than this agentctx knows "
                        f"({files[-1][0]}): upgrade agentctx"
                    )
                for _number, _name, text in files:
                    await conn.execute(text)
                await conn.execute(
                    "INSERT INTO agentctx_hub.meta VALUES ('schema', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (str(files[-1][0]),),
                )
        except psycopg.errors.InsufficientPrivilege as exc:
            raise HubError(
                f"hub-init needs a role that may create roles and schemas here: {one_line(exc)}"
            ) from None
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise
            raise HubError(f"hub-init failed, nothing was changed: {one_line(exc)}") from None
    finally:
        await conn.close()
    async with Session(info) as hub:
        created = await hub.call("team_create", team, CLIENT)
    return {
        "schema": files[-1][0],
        "was": int(before) if before is not None else None,
        "team": created["team"],
        "admin": created["admin"],
    }


async def member_add(info: str, team: str, role_name: str, role: str) -> dict[str, Any]:
    """Make a login role a member of ``team`` with a role (reader, writer, maintainer, admin)."""
    async with Session(info) as hub:
        result: dict[str, Any] = await hub.call("member_add", team, role_name, role, CLIENT)
    return result


async def member_remove(info: str, team: str, role_name: str) -> dict[str, Any]:
    """Remove a member from ``team`` (what they pulled stays in their own store)."""
    async with Session(info) as hub:
        result: dict[str, Any] = await hub.call("member_remove", team, role_name, CLIENT)
    return result


async def project_add(info: str, team: str, project_id: str, name: str) -> dict[str, Any]:
    """List a project in ``team``: only listed projects are accepted by push and pull."""
    async with Session(info) as hub:
        result: dict[str, Any] = await hub.call("project_add", team, project_id, name, CLIENT)
    return result


async def set_min_client(info: str, version: str) -> None:
    """The oldest agentctx the hub accepts (operator only)."""
    async with Session(info) as hub:
        await hub.call("set_min_client", version)
