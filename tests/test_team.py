"""Team export: ``.agentctx/context.md`` is stable, shares the right records and imports cleanly.

Library tests use the real store of the test's home and a second store file; the round trips through
the command line run ``agentctx`` in subprocesses against two homes (``AGENTCTX_HOME``), as two
teammates' machines would.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from agentctx import config, team
from agentctx.core.project import identify
from agentctx.store import Store, transfer
from tests.helpers import new_record, run_cli

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from pathlib import Path

    from agentctx.records import Record

P = "d" * 64
Q = "e" * 64
ON = {"team_export": True}
VOLATILE = (
    "access_count",
    "last_accessed",
    "score",
    "claudemd_drift_score",
    "pending_embedding",
    "reinforce_count",
    "session_id",
    "project_id",
    "exported_at",
)
STUB_BODY = (
    "A test run failed in this session: `pytest tests/test_api.py`.\n"
    "Failing: tests/test_api.py.\n"
    "(Captured by the PostToolUse hook; extraction may add the cause and fix.)"
)


@pytest.fixture
async def other(tmp_path: Path) -> AsyncIterator[Store]:
    """A teammate's store: another database file."""
    async with await Store.open(str(tmp_path / "teammate" / "agentctx.db")) as opened:
        yield opened


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


async def populate(store: Store) -> dict[str, Record]:
    """One project with every kind of record, shared or not, plus global and foreign ones."""
    made: dict[str, Record] = {}
    made["queue_v1"] = await store.add(
        new_record(
            type="decision", title="Queue", body="Use RabbitMQ.", project_id=P, session_id="s1"
        )
    )
    _, made["queue_v2"] = await store.supersede(made["queue_v1"].id, "Use Kafka.", "throughput")
    made["naming"] = await store.add(
        new_record(
            type="convention",
            title="Snake case",
            body="Modules are snake_case.",
            project_id=P,
            keywords="naming style",
        )
    )
    made["local_pref"] = await store.add(
        new_record(type="preference", title="Small PRs", body="Keep PRs small.", project_id=P)
    )
    made["discovery"] = await store.add(
        new_record(
            type="discovery",
            title="Slow CI",
            body="CI caches nothing.",
            project_id=P,
            confidence="inferred",
        )
    )
    made["bugfix"] = await store.add(
        new_record(
            type="bugfix",
            title="Fix leak",
            body="Closed handles.",
            project_id=P,
            source="llm_extraction",
            session_id="s2",
        )
    )
    made["raw_stub"] = await store.add(
        new_record(
            type="bugfix",
            title="Test failure: pytest tests/test_api.py",
            body=STUB_BODY,
            project_id=P,
            confidence="inferred",
            source="hook_observation",
            session_id="s3",
        )
    )
    made["explained"] = await store.add(
        new_record(
            type="bugfix",
            title="Test failure: pytest tests/test_db.py",
            body=STUB_BODY.replace("test_api", "test_db"),
            project_id=P,
            confidence="inferred",
            source="hook_observation",
            session_id="s3",
        )
    )
    async with store.transaction() as tx:  # extraction explains the second stub in place
        await tx.update_body(
            made["explained"].id,
            f"The fixture leaked a connection.\n\nObserved: {made['explained'].body}",
        )
    made["profile"] = await store.add(
        new_record(
            type="profile", title="Tests", body="pytest -q", project_id=P, key="test_command"
        )
    )
    made["handover"] = await store.add(
        new_record(type="handover", title="Handover", body="Next: the importer.", project_id=P)
    )
    made["global"] = await store.add(
        new_record(
            type="preference", title="Tabs", body="Indent with tabs.", project_id=P, scope="global"
        )
    )
    made["foreign"] = await store.add(
        new_record(type="decision", title="Other", body="Elsewhere.", project_id=Q)
    )
    return made


SHARED = ("queue_v1", "queue_v2", "naming", "local_pref", "discovery", "bugfix", "explained")


# -- what is shared ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_off_or_without_a_root_nothing_is_written(store: Store, root: Path) -> None:
    await populate(store)
    assert config.get("team_export") is False

    assert await team.export_team(store, P, str(root)) is None
    assert await team.export_team(store, P, None, settings=ON) is None
    assert await team.export_team(store, P, str(root / "moved-away"), settings=ON) is None
    assert await team.export_team(store, "global", str(root), settings=ON) is None
    assert await team.export_team(store, "f" * 64, str(root), settings=ON) is None  # nothing yet
    assert not (root / ".agentctx").exists()

    config.set_value("team_export", "on")
    written = await team.export_team(store, P, str(root))
    assert written == str(root / ".agentctx" / "context.md")


@pytest.mark.anyio
async def test_the_file_shares_project_knowledge_only(store: Store, root: Path) -> None:
    made = await populate(store)

    path = await team.export_team(store, P, str(root), settings=ON)

    assert path is not None
    text = (root / ".agentctx" / "context.md").read_text()
    data = transfer.parse(text, project_id=P)
    expected = {made[name].id for name in (*SHARED, "profile")}
    assert {r["id"] for r in data["records"]} == expected
    assert data["projects"] == [] and data["nodes"] == [] and data["record_entities"] == []
    (edge,) = data["edges"]
    assert (edge["from_id"], edge["to_id"], edge["rel_type"]) == (
        made["queue_v2"].id,
        made["queue_v1"].id,
        "supersedes",
    )
    for field in VOLATILE:
        assert f'"{field}"' not in text, field
    assert "s1" not in text and "s2" not in text  # session ids stay on this machine
    assert text.startswith(transfer.TEAM_TITLE + "\n")
    lines = text.splitlines()
    assert "## Decisions" in lines and "### Queue (superseded)" in lines and "### Queue" in lines
    assert lines.index("## Decisions") < lines.index("## Conventions") < lines.index("## Profile")
    assert "## Handovers" not in lines


@pytest.mark.anyio
async def test_a_superseded_record_whose_successor_is_not_shared_is_left_out(
    store: Store,
) -> None:
    first = await store.add(
        new_record(type="bugfix", title="Flaky login", body="Retry the login test.", project_id=P)
    )
    _, second = await store.supersede(first.id, "Seed the clock.", "root cause")
    _, third = await store.supersede(second.id, "Freeze time in the fixture.", "simpler")
    other = await store.add(
        new_record(type="bugfix", title="Fix leak", body="Closed handles.", project_id=P)
    )
    async with store.transaction() as tx:  # the newest version becomes a stub the file leaves out
        await tx.execute("UPDATE records SET source = 'hook_observation' WHERE id = ?", (third.id,))

    records, edges = await team.shared(store, P)

    # Without its successor the second version would dangle, and then so would the first.
    assert [r["id"] for r in records] == [other.id]
    assert edges == []


# -- stability ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_unchanged_store_re_exports_byte_identical(store: Store, root: Path) -> None:
    made = await populate(store)
    path = await team.export_team(store, P, str(root), settings=ON)
    assert path is not None
    before = (root / ".agentctx" / "context.md").read_bytes()
    stamp = os.stat(path).st_mtime_ns

    # Everything that moves without changing a fact: reads, reinforcement, scores, drift, vectors.
    await store.get_many([made["naming"].id, made["queue_v2"].id])
    async with store.transaction() as tx:
        await tx.reinforce(made["naming"].id, explicit=True, threshold=3)
        await tx.mark_seen_in(made["naming"].id, "s9")
        await tx.execute(
            "UPDATE records SET score = 0.25, claudemd_drift_score = 0.75, pending_embedding = 0, "
            "low_score_since = '2026-01-01T00:00:00.000000Z'"
        )

    assert await team.export_team(store, P, str(root), settings=ON) == path
    assert (root / ".agentctx" / "context.md").read_bytes() == before
    assert os.stat(path).st_mtime_ns == stamp  # not even rewritten
    assert [p.name for p in (root / ".agentctx").iterdir()] == ["context.md"]


@pytest.mark.anyio
async def test_a_change_touches_only_its_own_lines(store: Store, root: Path) -> None:
    made = await populate(store)
    before = await team.render(store, P)

    await store.add(
        new_record(type="decision", title="Cache", body="Redis for sessions.", project_id=P)
    )
    added = await team.render(store, P)
    ops = difflib.SequenceMatcher(
        None, before.splitlines(), added.splitlines(), autojunk=False
    ).get_opcodes()
    assert {op for op, *_ in ops} == {"equal", "insert"}

    _, naming_v2 = await store.supersede(made["naming"].id, "Modules are kebab-case.", "lint")
    after = await team.render(store, P)
    old, new_lines = added.splitlines(), after.splitlines()
    removed = [
        line
        for op, i1, i2, _, _ in difflib.SequenceMatcher(
            None, old, new_lines, autojunk=False
        ).get_opcodes()
        if op in ("replace", "delete")
        for line in old[i1:i2]
    ]
    # Only the old version's heading and metadata change (it is now marked superseded).
    assert removed == ["### Snake case", old[old.index("### Snake case") + 1]]
    assert "### Snake case (superseded)" in new_lines
    assert f"<!-- /agentctx:record {naming_v2.id} -->" in new_lines


# -- import --------------------------------------------------------------------------------------------


def shared_view(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The fields a team file carries, plus title, body, scope and project: what must match."""
    keep = (*transfer.TEAM_FIELDS, "title", "body", "scope", "project_id")
    return sorted(({k: r[k] for k in keep} for r in records), key=lambda r: str(r["id"]))


@pytest.mark.anyio
async def test_import_twice_adds_nothing_and_reproduces_the_records(
    store: Store, other: Store
) -> None:
    await populate(store)
    text = await team.render(store, P)

    first = await transfer.import_data(other, transfer.parse(text, project_id=P))
    second = await transfer.import_data(other, transfer.parse(text, project_id=P))
    into_source = await transfer.import_data(store, transfer.parse(text, project_id=P))

    assert first.added == {"records": 8, "edges": 1}
    assert second.added == {} and second.skipped == {"records": 8, "edges": 1}
    assert into_source.added == {}
    assert await team.render(other, P) == text
    ours, _ = await team.shared(store, P)
    theirs = (await transfer.export_data(other, P))["records"]
    assert shared_view(theirs) == shared_view(ours)
    assert all(r["pending_embedding"] for r in theirs)  # the teammate's consolidation embeds them


@pytest.mark.anyio
async def test_import_maps_records_to_the_importing_project(
    store: Store, other: Store, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await populate(store)
    text = await team.render(store, P)

    mapped = transfer.parse(text, project_id=Q)
    monkeypatch.chdir(project_dir)
    from_cwd = transfer.parse(text)

    assert {r["project_id"] for r in mapped["records"]} == {Q}
    here = identify(str(project_dir)).project_id
    assert {r["project_id"] for r in from_cwd["records"]} == {here}
    await transfer.import_data(other, mapped)
    assert await team.render(other, Q) == text  # the same file, whatever the project id
    assert await other.list_records(P) == []


@pytest.mark.anyio
async def test_a_later_supersession_reaches_the_teammate(store: Store, other: Store) -> None:
    made = await populate(store)
    await transfer.import_data(other, transfer.parse(await team.render(store, P), project_id=P))
    await store.supersede(made["naming"].id, "Modules are kebab-case.", "lint")

    await transfer.import_data(other, transfer.parse(await team.render(store, P), project_id=P))

    assert await team.render(other, P) == await team.render(store, P)


# -- the command line: two homes, two clones --------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )


def clone(path: Path, remote: str | None) -> Path:
    """A repository folder (a fresh ``git init``; with ``remote``, an origin every clone shares)."""
    path.mkdir(parents=True)
    git("init", "-q", cwd=path)
    if remote:
        git("remote", "add", "origin", remote, cwd=path)
    return path


def ok(*args: str, cwd: Path, home: Path) -> str:
    result = run_cli(*args, cwd=cwd, env={"AGENTCTX_HOME": str(home)})
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def record(cwd: Path, home: Path, type_: str, title: str, body: str, *extra: str) -> str:
    created = json.loads(
        ok(
            "record",
            "--type",
            type_,
            "--title",
            title,
            "--body",
            body,
            *extra,
            "--json",
            cwd=cwd,
            home=home,
        )
    )
    return str(created["id"])


def seed(cwd: Path, home: Path) -> None:
    first = record(cwd, home, "decision", "Queue", "Use RabbitMQ.")
    record(cwd, home, "decision", "Queue", "Use Kafka.", "--supersedes", first)
    record(cwd, home, "convention", "Snake case", "Modules are snake_case.")
    record(cwd, home, "handover", "Where we stopped", "Half-way through the parser.")
    record(cwd, home, "preference", "Tabs", "Indent with tabs.", "--scope", "global")


@pytest.mark.parametrize(
    "remote",
    [pytest.param("git@github.com:acme/shop.git", id="remote"), pytest.param(None, id="no-remote")],
)
@pytest.mark.slow  # the CLI in two homes, a dozen subprocesses
def test_round_trip_between_two_homes(tmp_path: Path, remote: str | None) -> None:
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    mine = clone(tmp_path / "a" / "shop", remote)
    theirs = clone(tmp_path / "b" / "shop", remote)
    same_id = identify(str(mine)).project_id == identify(str(theirs)).project_id
    assert same_id is (remote is not None)
    seed(mine, home_a)

    setup = json.loads(ok("init", "--team", "--no-mcp", "--json", cwd=mine, home=home_a))

    team_file = mine / ".agentctx" / "context.md"
    assert (setup["team_export"], setup["team_file"]) == (True, str(team_file))
    assert ok("config", "get", "team_export", cwd=mine, home=home_a) == "team_export = on\n"
    first = ok("import", str(team_file), cwd=theirs, home=home_b)
    again = ok("import", str(team_file), cwd=theirs, home=home_b)
    assert first == (
        "imported 3 records (0 already present)\n"
        "  as team context of shop, unconfirmed, from .agentctx/context.md\n"
    )
    assert again == "imported 0 records (3 already present)\n"
    counted = json.loads(ok("status", "--json", cwd=theirs, home=home_b))["store"]
    assert (counted["records"], counted["projects"]) == (3, 1)  # the import's project counts

    exported_a = json.loads(ok("export", "--format", "json", "--project", cwd=mine, home=home_a))
    exported_b = json.loads(ok("export", "--format", "json", "--project", cwd=theirs, home=home_b))
    shared_a = [r for r in exported_a["records"] if r["type"] != "handover"]
    assert {r["project_id"] for r in exported_b["records"]} == {identify(str(theirs)).project_id}
    assert [{**r, "project_id": "-"} for r in shared_view(exported_b["records"])] == [
        {**r, "project_id": "-"} for r in shared_view(shared_a)
    ]
    text = ok("init", "--team", "--no-mcp", cwd=theirs, home=home_b)
    assert "team      team_export on: wrote " in text
    assert (theirs / ".agentctx" / "context.md").read_bytes() == team_file.read_bytes()


def test_team_export_can_be_switched_on_and_off_in_config(
    project_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    assert ok("config", "set", "team_export", "on", cwd=project_dir, home=home).startswith(
        "team_export = on  ("
    )
    assert json.loads(ok("config", "get", "team_export", "--json", cwd=project_dir, home=home)) == {
        "team_export": True
    }
    assert not (home / "agentctx.db").exists()  # no store made just to say there is nothing
    ok("config", "set", "team_export", "off", cwd=project_dir, home=home)
    setup = json.loads(ok("init", "--no-mcp", "--json", cwd=project_dir, home=home))
    assert (setup["team_export"], setup["team_file"]) == (False, None)
    assert not (project_dir / ".agentctx").exists()
    # turned on in a project with something to share, the file is written at once, and said so
    (project_dir / "pyproject.toml").write_text('[project]\nname = "shop"\n', encoding="utf-8")
    record(project_dir, home, "decision", "Use gRPC between services", "For streaming.")
    said = ok("config", "set", "team_export", "on", cwd=project_dir, home=home)
    team_file = project_dir / ".agentctx" / "context.md"
    assert f"team file wrote {team_file}" in said and "Use gRPC" in team_file.read_text()
