"""What ``agentctx doctor`` says about the team hubs: reachable, TLS, ~/.pgpass, last sync, waiting."""

from __future__ import annotations

import os
import stat

from psycopg.conninfo import conninfo_to_dict

from agentctx.store import Store
from agentctx.team.hub import HubError, local
from agentctx.team.hub.connect import CLIENT, Session

#: ``(name, ok, detail, fix)``: a :class:`agentctx.doctor.Check`'s fields.
Found = tuple[str, bool | None, str, str]


async def checks() -> list[Found]:
    """One finding per linked project, and one for ~/.pgpass (the store exists: doctor checked)."""
    found: list[Found] = []
    store = await Store.open(create=False)
    try:
        for link in await local.links(store):
            found.append(await _check_link(store, link))
    finally:
        await store.close()
    found.extend(_check_pgpass())
    return found


async def _check_link(store: Store, link: dict[str, object]) -> Found:
    name = f"team hub {link['team']}"
    info = str(link["conninfo"])
    mode = conninfo_to_dict(info).get("sslmode") or os.environ.get("PGSSLMODE") or "prefer"
    waiting = await local.waiting(store, str(link["project_id"]))
    tail = (
        f"last sync {link['last_sync'] or 'never'}; waiting {waiting['versions']} version(s), "
        f"{waiting['events']} event(s)"
    )
    try:
        async with Session(info) as hub:
            who = await hub.call("whoami", link["team"], CLIENT)
            tls = hub.ssl_in_use()
    except HubError as exc:
        return (
            name,
            False,
            f"{exc}; {tail}",
            "check the host, port and ~/.pgpass, then run `agentctx team sync`",
        )
    detail = f"{link['project_name']}: reachable as {who['role_name']} ({who['role']}); {tail}"
    if not tls:
        return (
            name,
            None,
            f"{detail}; the connection is not encrypted",
            "use TLS: sslmode=verify-full in the DSN or the service file",
        )
    if mode != "verify-full":
        return (
            name,
            None,
            f"{detail}; TLS on, but the certificate is not verified (sslmode={mode})",
            "set sslmode=verify-full (and sslrootcert)",
        )
    if link["last_error"]:
        return (
            name,
            None,
            f"{detail}; the last sync failed: {link['last_error']}",
            "run `agentctx team sync` to see it again",
        )
    return (name, True, f"{detail}; TLS on, certificate verified", "")


def _check_pgpass() -> list[Found]:
    path = os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return []
    if mode & 0o077:
        return [
            ("pgpass", False, f"{path} is mode {mode:o}: libpq ignores it", f"chmod 600 {path}")
        ]
    return [("pgpass", True, f"{path} is mode {mode:o}", "")]
