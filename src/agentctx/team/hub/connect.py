"""Connecting to the hub and calling its functions, with short timeouts.

A link names the hub as libpq does: a connection string without a password, or ``service=NAME``
(libpq's service file). Passwords stay in libpq's own files (``~/.pgpass``, the service file,
``PGPASSFILE``); a DSN that carries one is refused, so none lands in the store or config.json.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from agentctx import __version__
from agentctx.team.hub import HubError, HubUnreachable

#: Seconds to wait for the hub to answer a connection (libpq's connect_timeout).
CONNECT_TIMEOUT_S = 5
#: Milliseconds a statement may run at the hub before it is cancelled.
STATEMENT_TIMEOUT_MS = 20_000
#: The errors the hub's functions raise on purpose (0002_hub_v1.sql): their message is the line.
HUB_STATES = {"AX001", "AX002", "AX003", "AX004"}
CLIENT = __version__


def conninfo(dsn: str | None = None, service: str | None = None) -> str:
    """The connection string of a link (``service=NAME`` or the DSN), refused with a password."""
    if bool(dsn) == bool(service):
        raise HubError("give the hub as --dsn DSN or as --service NAME (libpq's service file)")
    if service:
        return make_conninfo(service=service)
    try:
        parts = conninfo_to_dict(dsn or "")
    except psycopg.ProgrammingError as exc:
        raise HubError(f"not a PostgreSQL connection string: {one_line(exc)}") from None
    if "password" in parts:
        raise HubError(
            "the DSN holds a password: put it in ~/.pgpass (mode 0600) or a service file "
            "instead, so that it never lands in agentctx's files"
        )
    return make_conninfo(**{k: str(v) for k, v in parts.items()})


def one_line(exc: BaseException) -> str:
    """An error's first line, without libpq's CONTEXT and hints."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    text = primary or str(exc) or type(exc).__name__
    return " ".join(text.split("\n")[0].split())


async def connect(info: str) -> psycopg.AsyncConnection[Any]:
    """An autocommit connection (each function call is its own transaction at the hub)."""
    try:
        return await psycopg.AsyncConnection.connect(
            info,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name=f"agentctx {CLIENT}",
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
        )
    except psycopg.OperationalError as exc:
        raise HubUnreachable(f"the hub cannot be reached: {one_line(exc)}") from None


async def call(conn: psycopg.AsyncConnection[Any], function: str, *args: Any) -> Any:
    """``SELECT hub_v1.<function>(args…)``: its JSON value; a hub refusal as :class:`HubError`."""
    params = [Jsonb(a) if isinstance(a, (dict, list)) else a for a in args]
    holes = ", ".join(["%s"] * len(params))
    try:
        cur = await conn.execute(f"SELECT hub_v1.{function}({holes})", params)
        row = await cur.fetchone()
    except psycopg.errors.UndefinedFunction:
        raise HubError(
            f"the hub has no function hub_v1.{function}: was `agentctx team hub-init` run on it, "
            "and does it know this agentctx version?"
        ) from None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise HubError(f"the hub refused: {one_line(exc)} (not a member of any team?)") from None
    except psycopg.OperationalError as exc:
        raise HubUnreachable(f"the hub connection failed: {one_line(exc)}") from None
    except psycopg.Error as exc:
        if exc.sqlstate in HUB_STATES:
            raise HubError(one_line(exc)) from None
        raise HubError(f"the hub failed: {one_line(exc)}") from None
    return row[0] if row else None


class Session:
    """``async with Session(info) as hub:`` one connection, closed on the way out."""

    def __init__(self, info: str) -> None:
        self.info = info
        self.conn: psycopg.AsyncConnection[Any] | None = None

    async def __aenter__(self) -> Session:
        self.conn = await connect(self.info)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.conn is not None:
            await self.conn.close()

    async def call(self, function: str, *args: Any) -> Any:
        """:func:`call` on this session's connection."""
        assert self.conn is not None
        return await call(self.conn, function, *args)

    def ssl_in_use(self) -> bool:
        """True when the connection is encrypted (TLS)."""
        assert self.conn is not None
        return bool(self.conn.pgconn.ssl_in_use)
