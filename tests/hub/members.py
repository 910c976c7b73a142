"""Team members for the hub tests: each one an agentctx home, a checkout and a login role.

A member drives the real library in this process (the store of its own home: ``AGENTCTX_HOME``
is pointed at it for the length of each call) or the real CLI and hooks in subprocesses.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctx.core import hubstamp
from agentctx.core.project import ProjectIdentity, identify
from agentctx.records import NewRecord, Record
from agentctx.store import Store
from agentctx.team.hub import admin, connect, local
from agentctx.team.hub import sync as hub_sync
from tests import helpers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from tests.hub.conftest import Server

REMOTE = "https://git.example.com/acme/payments.git"


def make_checkout(folder: Path, remote: str = REMOTE) -> Path:
    """A git repository whose origin is ``remote`` (so every member's project id is the same)."""
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", remote], check=True)
    return folder


@dataclass
class Member:
    """One teammate: a home, a checkout of the shared project, a login role at the hub."""

    name: str
    home: Path
    checkout: Path
    dsn: str

    @property
    def project(self) -> ProjectIdentity:
        """The project of the checkout."""
        return identify(str(self.checkout))

    @property
    def env(self) -> dict[str, str]:
        """The environment of this member's processes."""
        return {"AGENTCTX_HOME": str(self.home)}

    @contextmanager
    def active(self) -> Iterator[None]:
        """``AGENTCTX_HOME`` points at this member's home meanwhile."""
        before = os.environ.get("AGENTCTX_HOME")
        os.environ["AGENTCTX_HOME"] = str(self.home)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("AGENTCTX_HOME", None)
            else:
                os.environ["AGENTCTX_HOME"] = before

    @asynccontextmanager
    async def store(self) -> AsyncIterator[Store]:
        """This member's store, open (and its home active)."""
        with self.active():
            store = await Store.open(str(self.home / "agentctx.db"))
            try:
                yield store
            finally:
                await store.close()

    async def link(self, team: str = "acme") -> None:
        """``team link`` through the library's pieces (the CLI test runs the command itself)."""
        async with self.store() as store:
            async with connect.Session(self.dsn) as hub:
                who = await hub.call("whoami", team, connect.CLIENT)
            await store.touch_project(self.project)
            await local.save_link(
                store,
                self.project.project_id,
                team=team,
                info=self.dsn,
                name=self.project.name,
                role_name=who["role_name"],
                role=who["role"],
                epoch=who["epoch"],
            )
            hubstamp.touch()  # as `team link` does

    async def record(self, title: str, body: str, **fields: Any) -> Record:
        """A record written by this member (source cli unless given)."""
        async with self.store() as store:
            return await store.add(
                NewRecord(
                    project_id=self.project.project_id,
                    title=title,
                    body=body,
                    **{"type": "decision", **fields},
                )
            )

    async def supersede(self, old_id: str, body: str) -> Record:
        """A new version of ``old_id`` written by this member."""
        async with self.store() as store:
            _old, new = await store.supersede(
                old_id, body, "changed", project_id=self.project.project_id
            )
            return new

    async def sync(self, deadline: float | None = None) -> hub_sync.Report:
        """One sync of the project; the report."""
        async with self.store() as store:
            reports = await hub_sync.sync_all(store, [self.project.project_id], deadline=deadline)
        assert len(reports) == 1
        return reports[0]

    async def records(self, *, current: bool | None = None) -> dict[str, Record]:
        """This member's records of the project by id."""
        async with self.store() as store:
            found = await store.list_records(self.project.project_id)
        if current is not None:
            found = [r for r in found if r.is_current == current]
        return {r.id: r for r in found}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The real ``agentctx`` in the checkout, with this member's home."""
        return helpers.run_cli(*args, cwd=self.checkout, env=self.env)

    def prompt(self, text: str, session: str = "s-1") -> str | None:
        """What the UserPromptSubmit hook injects for ``text`` in this member's checkout."""
        event = "UserPromptSubmit"
        result = helpers.run_hook(
            "user-prompt-submit",
            helpers.payload(event, session, self.checkout, prompt=text),
            env=self.env,
            cwd=self.checkout,
        )
        return helpers.contract(result, event)


async def make_team(
    server: Server,
    db: str,
    tmp: Path,
    names: tuple[str, ...] = ("alice", "bob", "carol"),
    roles: dict[str, str] | None = None,
    team: str = "acme",
) -> list[Member]:
    """hub-init as hubadmin, the project listed, members added, each linked."""
    admin_dsn = server.dsn("hubadmin", db)
    await admin.hub_init(admin_dsn, team)
    members = []
    for name in names:
        member = Member(
            name, tmp / f"{name}-home", make_checkout(tmp / f"{name}-src"), server.dsn(name, db)
        )
        members.append(member)
    project = members[0].project
    await admin.project_add(admin_dsn, team, project.project_id, project.name)
    for member in members:
        role = (roles or {}).get(member.name, "writer")
        await admin.member_add(admin_dsn, team, member.name, role)
        await member.link(team)
    return members
