"""``agentctx team``: the team hub on PostgreSQL (docs/team-hub.md).

The admin's commands (``hub-init``, ``member add``, ``project add``) and the member's (``link``,
``sync``, ``status``, ``conflicts``, ``erase``, ``unlink``), thin over :mod:`agentctx.team.hub`.
Without psycopg (the ``agentctx-cc[team]`` extra) each says in one line how to add it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import anyio
from cyclopts import App, Parameter

from agentctx.cli import Json, _json, _out, _project, _with_store, app
from agentctx.core.errors import ValidationError

if TYPE_CHECKING:
    from agentctx.store import Store

team_app = App(
    name="team",
    help="Share this project's records with a team through a PostgreSQL hub.\n\n"
    "Example: agentctx team link --service team-hub --team platform; agentctx team sync",
)
member_app = App(
    name="member",
    help="The team's members (the team admin's command).\n\n"
    "Example: agentctx team member add alice --role writer",
)
project_app = App(
    name="project",
    help="The projects the team shares (the team admin's command).\n\n"
    "Example: agentctx team project add --service team-hub --team platform",
)
team_app.command(member_app)
team_app.command(project_app)
app.command(team_app)

Dsn = Annotated[
    str | None,
    Parameter(
        help="The hub as a libpq connection string, without a password (~/.pgpass holds it)."
    ),
]
Service = Annotated[str | None, Parameter(help="The hub as a service of libpq's service file.")]
Team = Annotated[str | None, Parameter(help="The team's name at the hub.")]


def _hub() -> None:
    from agentctx.team.hub import require

    require()


async def _target(
    store: Store | None, dsn: str | None, service: str | None, team: str | None
) -> tuple[str, str]:
    """The connection string and team: the options, else this checkout's link."""
    from agentctx.team.hub import HubError, connect, local

    if dsn or service:
        if not team:
            raise ValidationError("give the team: --team NAME")
        return connect.conninfo(dsn, service), team
    link = await local.link_of(store, _project().project_id) if store is not None else None
    if link is None:
        raise HubError(
            "give the hub (--dsn DSN or --service NAME) and --team, or run this in a "
            "linked checkout"
        )
    return str(link["conninfo"]), team or str(link["team"])


@team_app.command(name="hub-init")
async def hub_init(
    *, dsn: Dsn = None, service: Service = None, team: str, json: Json = False
) -> int:
    """Create or upgrade the hub's schema in a PostgreSQL database, and create a team (admin).

    Runs as a role that may create roles and schemas; it becomes the team's first admin. Safe to
    run again: it upgrades the schema in place and leaves the data.

    Example: ``agentctx team hub-init --service team-hub --team platform``
    """
    _hub()
    from agentctx.team.hub import admin, connect

    done = await admin.hub_init(connect.conninfo(dsn, service), team)
    if json:
        _json(done)
    else:
        was = "created" if done["was"] is None else f"upgraded from {done['was']}"
        _out(f"hub schema {done['schema']} ({was}); team {done['team']}, admin {done['admin']}")
    return 0


@member_app.command(name="add")
async def member_add(
    role_name: str,
    /,
    *,
    role: Annotated[str, Parameter(help="reader, writer, maintainer or admin")] = "writer",
    dsn: Dsn = None,
    service: Service = None,
    team: Team = None,
    json: Json = False,
) -> int:
    """Make a PostgreSQL login role a member of the team (the team admin's command).

    Example: ``agentctx team member add alice --role writer``
    """
    _hub()
    from agentctx.team.hub import admin

    async def action(store: Store) -> int:
        info, name = await _target(store, dsn, service, team)
        done = await admin.member_add(info, name, role_name, role)
        _json(done) if json else _out(f"{done['role_name']} is a {done['role']} of {done['team']}")
        return 0

    return await _with_store(action)


@member_app.command(name="remove")
async def member_remove(
    role_name: str, /, *, dsn: Dsn = None, service: Service = None, team: Team = None
) -> int:
    """Remove a member from the team (what they pulled stays in their own store).

    Example: ``agentctx team member remove alice``
    """
    _hub()
    from agentctx.team.hub import admin

    async def action(store: Store) -> int:
        info, name = await _target(store, dsn, service, team)
        done = await admin.member_remove(info, name, role_name)
        _out(f"{role_name} {'removed from' if done['removed'] else 'was not in'} {name}")
        return 0

    return await _with_store(action)


@project_app.command(name="add")
async def project_add(
    *, dsn: Dsn = None, service: Service = None, team: Team = None, json: Json = False
) -> int:
    """List this checkout's project in the team: only listed projects are shared (admin).

    Example: ``agentctx team project add --service team-hub --team platform``
    """
    _hub()
    from agentctx.team.hub import admin

    async def action(store: Store) -> int:
        info, name = await _target(store, dsn, service, team)
        project = _project()
        done = await admin.project_add(info, name, project.project_id, project.name)
        if json:
            _json(done)
        else:
            _out(f"project {project.name} ({project.project_id[:12]}) is shared in {name}")
        return 0

    return await _with_store(action)


@team_app.command(name="link")
async def link(*, dsn: Dsn = None, service: Service = None, team: str, json: Json = False) -> int:
    """Link this checkout's project to a team hub: its shareable records go there from now on.

    The hub is named as libpq names it; the password stays in ~/.pgpass or the service file,
    never in agentctx's files. The project must be listed by the team admin.

    Example: ``agentctx team link --service team-hub --team platform``
    """
    _hub()
    from agentctx.core import hubstamp
    from agentctx.team.hub import HubError, connect, local
    from agentctx.team.hub.connect import CLIENT, Session

    info = connect.conninfo(dsn, service)
    project = _project()
    async with Session(info) as hub:
        who = await hub.call("whoami", team, CLIENT)
    if project.project_id not in {p["project"] for p in who.get("projects", [])}:
        raise HubError(
            f"project {project.name} is not listed in team {team}: its admin runs "
            "`agentctx team project add` in a checkout of it first"
        )

    async def action(store: Store) -> int:
        await store.touch_project(project)
        await local.save_link(
            store,
            project.project_id,
            team=team,
            info=info,
            name=project.name,
            role_name=str(who["role_name"]),
            role=str(who["role"]),
            epoch=str(who["epoch"]),
        )
        await anyio.to_thread.run_sync(hubstamp.touch)
        if json:
            _json({"project_id": project.project_id, "team": team, "role": who["role"]})
        else:
            _out(
                f"{project.name} linked to team {team} as {who['role_name']} ({who['role']}); "
                "run `agentctx team sync` now, or let the session workers do it"
            )
        return 0

    return await _with_store(action)


@team_app.command(name="unlink")
async def unlink(*, json: Json = False) -> int:
    """Stop sharing this checkout's project with its hub (records already pulled stay).

    Example: ``agentctx team unlink``
    """
    _hub()
    from agentctx.core import hubstamp
    from agentctx.team.hub import local

    async def action(store: Store) -> int:
        project = _project()
        gone = await local.unlink(store, project.project_id)
        if not await local.links(store):
            await anyio.to_thread.run_sync(hubstamp.remove)
        _json({"unlinked": gone}) if json else _out(
            f"{project.name} unlinked" if gone else f"{project.name} was not linked"
        )
        return 0

    return await _with_store(action)


@team_app.command(name="sync")
async def sync(
    *,
    all_projects: Annotated[bool, Parameter(name="--all", negative="")] = False,
    json: Json = False,
) -> int:
    """Push this project's waiting records to the hub, then pull the teammates' (``--all``: every
    linked project). Exits 1 when a hub could not be reached or refused.

    Example: ``agentctx team sync``
    """
    _hub()
    from agentctx.team.hub import HubError, local
    from agentctx.team.hub import sync as hub_sync

    async def action(store: Store) -> int:
        project = _project()
        if not all_projects and await local.link_of(store, project.project_id) is None:
            raise HubError(f"{project.name} is not linked to a team hub: run `agentctx team link`")
        only = None if all_projects else [project.project_id]
        reports = await hub_sync.sync_all(store, only)
        if json:
            _json([r.to_dict() for r in reports])
        else:
            for report in reports:
                _out(report.line())
                for refused in report.refused:
                    _out(f"  refused {refused['kind']} {refused['id']}: {refused['reason']}")
        return 1 if any(r.error for r in reports) else 0

    return await _with_store(action)


@team_app.command(name="status")
async def status(*, json: Json = False) -> int:
    """The linked projects: team, role, cursor, last sync and its error, what waits, conflicts.

    Example: ``agentctx team status``
    """
    _hub()
    from agentctx.team.hub import local

    async def action(store: Store) -> int:
        rows: list[dict[str, Any]] = []
        for link in await local.links(store):
            waiting = await local.waiting(store, link["project_id"])
            conflicts = len(await local.conflicts(store, link["project_id"]))
            shown = {k: v for k, v in link.items() if k != "conninfo"}
            rows.append(
                {
                    **shown,
                    "hub": local.shown(link["conninfo"]),
                    "waiting": waiting,
                    "conflicts": conflicts,
                }
            )
        if json:
            _json(rows)
            return 0
        if not rows:
            _out("no project of this store is linked to a team hub (`agentctx team link`)")
        for row in rows:
            _out(
                f"{row['project_name']}: team {row['team']} at {row['hub']} as "
                f"{row['role_name']} ({row['role']})"
            )
            _out(
                f"  last sync   {row['last_sync'] or 'never'}"
                + (f"  (failed: {row['last_error']})" if row["last_error"] else "")
            )
            _out(f"  cursor      {row['cursor']}")
            _out(
                f"  waiting     {row['waiting']['versions']} version(s), "
                f"{row['waiting']['events']} event(s)"
            )
            _out(f"  conflicts   {row['conflicts']} (agentctx team conflicts)")
        return 0

    return await _with_store(action, read_only=True)


@team_app.command(name="conflicts")
async def conflicts(*, json: Json = False) -> int:
    """Where two members superseded the same version: the hub kept the first and rebased the
    second onto it (one chain). Lists each rebase: the contested version, the winner, the rebased one.

    Example: ``agentctx team conflicts``
    """
    _hub()
    from agentctx.team.hub import local

    async def action(store: Store) -> int:
        rows = await local.conflicts(store)
        if json:
            _json(rows)
            return 0
        if not rows:
            _out("no conflicts")
        for row in rows:
            _out(
                f"{row['record_id']} was superseded twice: {row['onto']} came first at the hub; "
                f"{row['successor']} (by {row['author']}) now supersedes it (hub #{row['seq']})"
            )
        return 0

    return await _with_store(action, read_only=True)


@team_app.command(name="erase")
async def erase(record_id: str, *, json: Json = False) -> int:
    """Erase a record at the hub and here: teammates delete it at their next sync, and it never
    comes back (its author or a maintainer).

    Example: ``agentctx team erase 01J…``
    """
    _hub()
    from agentctx.team.hub import sync as hub_sync

    async def action(store: Store) -> int:
        ack = await hub_sync.erase(store, _project().project_id, record_id)
        _json(ack) if json else _out(f"{record_id} erased at the hub (#{ack.get('seq')}) and here")
        return 0

    return await _with_store(action)
