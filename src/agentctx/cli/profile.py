"""Profile commands: ``agentctx profile show|edit|clear``, over :mod:`agentctx.preferences`.

``edit`` needs ``--title`` and/or ``--body`` (``--body -`` reads the body from stdin); with neither it is
a usage error (exit 2), since an editor session is what ``agentctx edit`` is for. ``clear`` asks on a
terminal; off a terminal it needs ``--yes``, and without it refuses with exit 2 before touching anything.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import anyio
from cyclopts import App, Parameter

from agentctx import preferences
from agentctx.cli import Json, _json, _out, _with_store, app

if TYPE_CHECKING:
    from agentctx.store import Store

profile_app = App(
    name="profile",
    help="Your developer profile: the global preferences injected into every project.\n\n"
    "Example: agentctx profile show",
)
app.command(profile_app)

_USAGE = 2


def _usage(message: str) -> int:
    """A usage error of ours: one line, exit 2 (as cyclopts' own usage errors)."""
    sys.stderr.write(f"agentctx: error: {message}\n")
    return _USAGE


@profile_app.command(name="show")
async def profile_show(*, json: Json = False) -> int:
    """List the current global preferences with confidence and evidence (sessions that showed it).

    Example: ``agentctx profile show``.
    """

    async def action(store: Store) -> int:
        entries = await preferences.show(store)
        if json:
            _json([entry.to_dict() for entry in entries])
            return 0
        if not entries:
            _out("no global preferences yet")
        for entry in entries:
            where = "every digest" if entry.in_digest else "on match only"
            sessions = "1 session" if entry.evidence == 1 else f"{entry.evidence} sessions"
            _out(f"{entry.id}  {entry.title}  [{entry.confidence}, {sessions}, {where}]")
            _out(f"    {' '.join(entry.body.split())[:160]}")
        return 0

    return await _with_store(action)


@profile_app.command(name="edit")
async def profile_edit(
    record_id: str,
    /,
    *,
    title: str | None = None,
    body: Annotated[
        str | None,
        Parameter(allow_leading_hyphen=True, help="The new body; '-' reads it from stdin."),
    ] = None,
    json: Json = False,
) -> int:
    """Correct a global preference: a new version supersedes it (source cli, explicit).

    Example: ``agentctx profile edit 01J… --title "Prefers small functions"``.
    """
    if title is None and body is None:
        return _usage("give --title and/or --body (--body - reads the body from stdin)")
    if body == "-":
        body = sys.stdin.read()

    async def action(store: Store) -> int:
        old_id = record_id.strip()
        new = await preferences.edit(store, old_id, title=title, body=body)
        if json:
            _json({"old": (await store.get(old_id)).to_dict(), "new": new.to_dict()})
        else:
            _out(f"{new.id} supersedes {old_id}  {new.title}")
        return 0

    return await _with_store(action)


@profile_app.command(name="clear")
def profile_clear(
    record_id: str,
    /,
    *,
    yes: Annotated[bool, Parameter(negative="", help="Do not ask for confirmation.")] = False,
    json: Json = False,
) -> int:
    """Remove a preference from the profile (it is retired, not deleted: history keeps it).

    Example: ``agentctx profile clear 01J…``.
    """
    if not yes and not sys.stdin.isatty():
        return _usage(
            "profile clear asks for confirmation on a terminal; pass --yes to clear without asking"
        )

    async def look(store: Store) -> int:
        found = await preferences.preference(store, record_id)  # refuse a bad id before asking
        titles.append(found.title)
        return 0

    titles: list[str] = []
    if not yes:
        anyio.run(_with_store, look)
        try:  # asked outside the event loop, so Ctrl-C interrupts the question at once
            answer = input(f"Remove {titles[0]!r} ({record_id}) from your profile? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            _out("nothing changed")
            return 1

    async def action(store: Store) -> int:
        cleared = await preferences.clear(store, record_id)
        if json:
            _json(cleared.to_dict())
        else:
            _out(f"cleared {cleared.id}  {cleared.title}")
        return 0

    return anyio.run(_with_store, action)
