"""The MCP server: the seven tools through the SDK's in-memory client and a real stdio subprocess.

The store is seeded through the library in the test's home; the graph (file nodes, entity links,
edges) is written with plain SQL in a store transaction, as the capture hooks write it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client, ClientSession, stdio_client
from mcp.types import CallToolResult, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentctx.claude.claudemd import SYNC_BEGIN, SYNC_END
from agentctx.core import clock, db, schema
from agentctx.core.project import identify
from agentctx.mcp.server import IMPORT_LOG_ENV, INSTRUCTIONS, create_server
from agentctx.mcp.tools import FILE_SEARCH_POOL
from tests.helpers import MCP_INITIALIZE, new_record, server_params

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from agentctx.store import Store

pytestmark = pytest.mark.anyio

TOOLS = {
    "ctx_search",
    "ctx_get",
    "ctx_record",
    "ctx_supersede",
    "ctx_project",
    "ctx_related",
    "ctx_sync_claudemd",
}
READ_ONLY = {"ctx_search", "ctx_get", "ctx_project", "ctx_related", "ctx_sync_claudemd"}
AUTH_FILE = "src/app/auth.py"
OTHER_PROJECT = "b" * 64
INDEX_FIELDS = {"id", "type", "title", "age", "confidence", "score", "match"}
DEADLINE = 20  # seconds; a stdio round trip takes well under one


@dataclass(frozen=True)
class Seed:
    """The ids of the seeded records (see :func:`seed`)."""

    project_id: str
    jwt_old: str  # linked to auth.py, superseded by jwt
    jwt: str  # 2 hops from auth.py, through the supersedes edge
    auth_convention: str  # applies_to edge to auth.py: 1 hop
    pytest_convention: str
    gateway: str  # matches "auth" but is linked to no file
    db_bugfix: str  # linked to db.py, written in the session that wrote auth.py: 3 hops
    deep: str  # derives from the bugfix: 4 hops, out of reach
    inferred: str
    preference: str  # global
    foreign: str  # another project's record linked to its own auth.py
    session_id: str


async def seed_store(store: Store, project_id: str) -> Seed:
    """Records, a supersession, profile facts, a session and a small graph around auth.py."""
    p = project_id
    jwt_old = await store.add(
        new_record(
            title="Use JWT for auth",
            body="Sessions use JWT access tokens signed with RS256.",
            project_id=p,
            valid_from="2020-01-01T00:00:00Z",
        )
    )
    _, jwt = await store.supersede(
        jwt_old.id,
        "Sessions use opaque tokens stored in Redis; JWT was dropped.",
        "tokens must be revocable",
        project_id=p,
    )
    auth = await store.add(
        new_record(
            type="convention",
            title="Auth handlers live in one module",
            body="Every auth handler lives in src/app/auth.py.",
            project_id=p,
        )
    )
    pytest_convention = await store.add(
        new_record(
            type="convention", title="Pytest for every test", body="See the title.", project_id=p
        )
    )
    gateway = await store.add(
        new_record(
            type="discovery",
            title="Auth rate limits sit in the gateway",
            body="See the title.",
            project_id=p,
        )
    )
    bugfix = await store.add(
        new_record(
            type="bugfix",
            title="Connection pool leak in db.py",
            body="See the title.",
            project_id=p,
        )
    )
    deep = await store.add(
        new_record(type="discovery", title="Pool sizing notes", body="See the title.", project_id=p)
    )
    inferred = await store.add(
        new_record(
            type="convention",
            title="Maybe tabs for indentation",
            body="See the title.",
            project_id=p,
            confidence="inferred",
        )
    )
    preference = await store.add(
        new_record(
            type="preference",
            title="Prefer short functions",
            body="See the title.",
            project_id=p,
            scope="global",
        )
    )
    foreign = await store.add(
        new_record(
            title="Use JWT for auth everywhere", body="See the title.", project_id=OTHER_PROJECT
        )
    )
    for key, body in (
        ("stack", "Python 3.11, anyio, SQLite"),
        ("languages", "Python"),
        ("test_command", "pytest -q (from pyproject.toml)"),
        ("lint_command", "ruff check . (from pyproject.toml)"),
        ("entry_points", "agentctx = agentctx._entry:main"),
        ("package_manager", "uv"),
    ):
        await store.add(
            new_record(type="profile", title=key, body=body, project_id=p, key=key, source="cli")
        )
    session = "session-1"
    now = clock.now()
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO sessions(session_id, project_id, cwd, started_at, ended_at, "
            "tokens_injected, injections) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session, p, "/somewhere", "2026-01-02T03:04:05.000000Z", None, 1234, 3),
        )
        nodes = {("auth", p): "N-AUTH", ("db", p): "N-DB", ("auth", OTHER_PROJECT): "N-AUTH-Q"}
        for (name, project), node_id in nodes.items():
            await tx.execute(
                "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
                (node_id, project, "file", f"src/app/{name}.py", now),
            )
        for record_id, node_id in (
            (jwt_old.id, "N-AUTH"),
            (bugfix.id, "N-DB"),
            (foreign.id, "N-AUTH-Q"),
        ):
            await tx.execute(
                "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)",
                (record_id, node_id),
            )
        for from_id, to_id, rel in (
            (auth.id, "N-AUTH", "applies_to"),
            ("N-AUTH", session, "observed_in"),
            ("N-DB", session, "observed_in"),
            (deep.id, bugfix.id, "derives_from"),
        ):
            await tx.execute(schema.INSERT_EDGE_SQL, (clock.ulid(), from_id, to_id, rel, now))
    return Seed(
        project_id=p,
        jwt_old=jwt_old.id,
        jwt=jwt.id,
        auth_convention=auth.id,
        pytest_convention=pytest_convention.id,
        gateway=gateway.id,
        db_bugfix=bugfix.id,
        deep=deep.id,
        inferred=inferred.id,
        preference=preference.id,
        foreign=foreign.id,
        session_id=session,
    )


@pytest.fixture
async def seed(store: Store, project_dir: Path) -> Seed:
    """The seeded store of ``project_dir``'s project."""
    return await seed_store(store, identify(str(project_dir)).project_id)


@pytest.fixture
async def client(project_dir: Path, seed: Seed) -> AsyncIterator[Client]:
    """The SDK's in-memory client connected to a server for ``project_dir``."""
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir)), raise_exceptions=True) as connected:
            yield connected


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful call (its text content carries the same JSON)."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    block = result.content[0]
    assert isinstance(block, TextContent)
    data: dict[str, Any] = result.structured_content
    assert json.loads(block.text) == data
    return data


def error(result: CallToolResult) -> str:
    """The message of a tool error."""
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def ids(data: dict[str, Any], key: str = "results") -> list[str]:
    return [item["id"] for item in data[key]]


# -- the tool list -------------------------------------------------------------------------------


async def test_lists_exactly_seven_tools_with_annotations_and_output_schemas(
    client: Client,
) -> None:
    listed = (await client.list_tools()).tools
    assert {tool.name for tool in listed} == TOOLS and len(listed) == 7
    for tool in listed:
        assert tool.description and tool.title
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (tool.name in READ_ONLY), tool.name
        assert tool.annotations.open_world_hint is False
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        if tool.name not in READ_ONLY:
            assert tool.annotations.destructive_hint is False
    schemas = {tool.name: tool for tool in listed}
    get_ids = schemas["ctx_get"].input_schema["properties"]["ids"]
    assert (get_ids["minItems"], get_ids["maxItems"]) == (1, 10)
    limit = schemas["ctx_search"].input_schema["properties"]["limit"]
    assert (limit["maximum"], limit["default"]) == (15, 10)
    index = schemas["ctx_search"].output_schema
    assert index is not None
    assert set(index["$defs"]["IndexEntry"]["properties"]) == INDEX_FIELDS
    assert index["properties"]["mode"]["enum"] == ["hybrid", "keyword"]
    assert client.instructions == INSTRUCTIONS
    assert "ctx_search" in INSTRUCTIONS and "ctx_get" in INSTRUCTIONS


# -- ctx_search ----------------------------------------------------------------------------------


async def test_search_returns_a_compact_index_without_bodies(client: Client, seed: Seed) -> None:
    data = ok(await client.call_tool("ctx_search", {"query": "auth"}))
    assert set(ids(data)) == {seed.jwt, seed.auth_convention, seed.gateway}
    assert data["degraded"] is None
    assert data["mode"] == "keyword"  # nothing embedded: keyword ranking (tests/test_hybrid.py)
    for entry in data["results"]:
        assert set(entry) == INDEX_FIELDS  # progressive disclosure: no body
        assert entry["age"][-1] in "mhd" and entry["score"] > 0
    jwt = next(e for e in data["results"] if e["id"] == seed.jwt)
    assert (jwt["type"], jwt["title"], jwt["confidence"]) == (
        "decision",
        "Use JWT for auth",
        "explicit",
    )
    scores = [e["score"] for e in data["results"]]
    assert scores == sorted(scores, reverse=True)


async def test_search_filters(client: Client, seed: Seed, project_dir: Path) -> None:
    async def found(**args: Any) -> list[str]:
        return ids(ok(await client.call_tool("ctx_search", args)))

    assert await found(query="auth", type="convention") == [seed.auth_convention]
    assert len(await found(query="auth", limit=1)) == 1
    # scope project (the default) covers the project and the global records
    assert await found(query="short functions") == [seed.preference]
    assert await found(query="short functions", scope="global") == [seed.preference]
    assert await found(query="pytest", scope="global") == []
    # as_of: what was true then, the superseded version included
    assert await found(query="JWT", as_of="2020-06-01") == [seed.jwt_old]
    assert await found(query="JWT") == [seed.jwt]
    assert await found(query="JWT", as_of="2019-12-31") == []
    # file: only records linked to it (directly, any version); relative or absolute
    expected = {seed.jwt, seed.auth_convention}
    assert set(await found(query="auth", file=AUTH_FILE)) == expected
    assert set(await found(query="auth", file=str(project_dir / AUTH_FILE))) == expected
    assert set(await found(query="auth", file="./src/app/../app/auth.py")) == expected
    assert await found(query="JWT", file=AUTH_FILE, as_of="2020-06-01") == [seed.jwt_old]
    empty = ok(await client.call_tool("ctx_search", {"query": "auth", "file": "src/none.py"}))
    assert empty["results"] == [] and "src/none.py" in empty["note"]


async def test_search_for_what_the_store_does_not_hold_says_so(client: Client, seed: Seed) -> None:
    """Keyword mode: one shared word ("pool") among many unknown ones is not an answer: the hits
    that share it are labelled weak and a note says so; too far a query gets nothing at all."""
    query = "What Kubernetes namespace and helm values does the billing service use for its pool?"
    data = ok(await client.call_tool("ctx_search", {"query": query}))
    assert data["mode"] == "keyword"
    assert {e["id"]: e["match"] for e in data["results"]} == {
        seed.db_bugfix: "weak",
        seed.deep: "weak",
    }
    assert data["note"].startswith("no strong match: ")
    query = "What Kubernetes namespace and helm values does the billing service use?"
    data = ok(await client.call_tool("ctx_search", {"query": query}))
    assert data["results"] == [] and data["note"] is not None
    data = ok(await client.call_tool("ctx_search", {"query": "connection pool leak"}))
    first = data["results"][0]
    assert (first["id"], first["match"]) == (seed.db_bugfix, "strong")  # every distinctive word
    assert seed.deep in ids(data)  # "pool": one of the three words, and the most specific
    assert {e["match"] for e in data["results"][1:]} == {"weak"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"query": "auth", "type": "nonsense"}, "Input should be 'decision'"),
        ({"query": "auth", "scope": "all"}, "Input should be 'project' or 'global'"),
        ({"query": "auth", "limit": 0}, "greater than or equal to 1"),
        ({"query": "auth", "as_of": "yesterday"}, "as_of 'yesterday' is not an ISO date"),
        ({"query": "the a of"}, "no searchable words"),
        ({"query": "auth", "file": "  "}, "file is empty"),
        ({}, "query"),
    ],
)
async def test_search_errors(client: Client, args: dict[str, Any], message: str) -> None:
    assert message in error(await client.call_tool("ctx_search", args))


async def test_file_filter_finds_a_linked_record_ranked_below_the_first_pool(
    client: Client, store: Store, seed: Seed
) -> None:
    """The filter ranks a pool and widens it: a weak linked hit is still found."""
    async with store.transaction() as tx:
        for n in range(FILE_SEARCH_POOL + 50):
            await tx.add(
                new_record(
                    type="discovery",
                    title=f"Cache note {n}",
                    body="See the title.",
                    project_id=seed.project_id,
                )
            )
        weak = await tx.add(
            new_record(
                type="bugfix",
                title="Stale cache entry",
                body="An old, inferred cache observation.",
                project_id=seed.project_id,
                confidence="inferred",
                valid_from="2020-01-01T00:00:00Z",
            )
        )
        await tx.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
            ("N-CACHE", seed.project_id, "file", "src/cache.py", clock.now()),
        )
        await tx.execute("INSERT INTO record_entities VALUES (?, ?)", (weak.id, "N-CACHE"))
    unfiltered = ok(await client.call_tool("ctx_search", {"query": "cache", "limit": 15}))
    assert weak.id not in ids(unfiltered)
    filtered = ok(await client.call_tool("ctx_search", {"query": "cache", "file": "src/cache.py"}))
    assert ids(filtered) == [weak.id]


# -- ctx_get -------------------------------------------------------------------------------------


async def test_get_returns_full_records_with_links_and_missing_ids(
    client: Client, seed: Seed, store: Store
) -> None:
    asked = [seed.jwt, seed.jwt_old, "01NOTANID0000000000000000", seed.foreign, seed.preference]
    data = ok(await client.call_tool("ctx_get", {"ids": asked}))
    assert ids(data, "records") == [seed.jwt, seed.jwt_old, seed.preference]
    assert data["missing"] == ["01NOTANID0000000000000000", seed.foreign]
    new, old, preference = data["records"]
    assert new["body"] == "Sessions use opaque tokens stored in Redis; JWT was dropped."
    assert new["rationale"] == "tokens must be revocable"
    assert (new["current"], new["supersedes"], new["superseded_by"]) == (True, [seed.jwt_old], None)
    assert (old["current"], old["supersedes"], old["superseded_by"]) == (False, [], seed.jwt)
    assert old["superseded_at"] is not None
    assert preference["scope"] == "global"
    assert new["access_count"] == 1 and new["last_accessed"] is not None
    ok(await client.call_tool("ctx_get", {"ids": [seed.jwt]}))
    stored = await store.get(seed.jwt)
    assert stored.access_count == 2 and stored.last_accessed is not None
    assert (await store.get(seed.foreign)).access_count == 0  # not this project's: not touched


async def test_get_errors(client: Client, seed: Seed) -> None:
    eleven = [seed.jwt] * 11
    too_many = error(await client.call_tool("ctx_get", {"ids": eleven}))  # the schema's bound
    assert "ids: List should have at most 10 items" in too_many and "\n" not in too_many
    unknown = error(await client.call_tool("ctx_get", {"ids": ["01NOTANID0000000000000000"]}))
    assert "no record with id 01NOTANID0000000000000000" in unknown and "ctx_search" in unknown
    assert "no record with id" in error(await client.call_tool("ctx_get", {"ids": [seed.foreign]}))
    assert "ids: List should have at least 1 item" in error(
        await client.call_tool("ctx_get", {"ids": []})
    )
    assert "at least one" in error(await client.call_tool("ctx_get", {"ids": ["  "]}))
    assert "ids" in error(await client.call_tool("ctx_get", {"ids": "not a list"}))


# -- ctx_record and ctx_supersede ----------------------------------------------------------------


async def test_record_writes_an_explicit_mcp_record(
    client: Client, seed: Seed, store: Store, project_dir: Path
) -> None:
    data = ok(
        await client.call_tool(
            "ctx_record",
            {"type": "decision", "title": "  Use   anyio  ", "body": "Structured concurrency."},
        )
    )
    assert (data["title"], data["confidence"], data["source"], data["scope"]) == (
        "Use anyio",
        "explicit",
        "mcp_tool",
        "project",
    )
    stored = await store.get(data["id"])
    assert (stored.project_id, stored.source) == (seed.project_id, "mcp_tool")
    project = identify(str(project_dir))
    assert [p["name"] for p in await store.projects()] == [project.name]
    newer = ok(
        await client.call_tool(
            "ctx_record",
            {
                "type": "decision",
                "title": "Use anyio and trio",
                "body": "Both backends.",
                "supersedes": data["id"],
            },
        )
    )
    assert newer["supersedes"] == [data["id"]]
    assert (await store.get(data["id"])).superseded_by == newer["id"]
    global_pref = ok(
        await client.call_tool(
            "ctx_record",
            {"type": "preference", "title": "Dark mode", "body": "Always.", "scope": "global"},
        )
    )
    assert (await store.get(global_pref["id"])).project_id == schema.GLOBAL_PROJECT_ID


async def test_a_recorded_handover_belongs_to_the_servers_checkout(
    client: Client, store: Store, project_dir: Path
) -> None:
    args = {"type": "handover", "title": "Handover: the importer", "body": "Next: dates."}
    data = ok(await client.call_tool("ctx_record", args))
    project = identify(str(project_dir))
    assert (await store.get(data["id"])).key == project.checkout is not None
    current = await store.current_handover(project.project_id, project.checkout)
    assert current is not None and current.id == data["id"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"type": "nonsense", "title": "t", "body": "b"}, "Input should be 'decision'"),
        ({"type": "decision", "title": " ", "body": "b"}, "title is empty"),
        (
            {"type": "decision", "title": "x" * 121, "body": "b"},
            "title: String should have at most 120",
        ),
        ({"type": "decision", "title": "t"}, "body"),
        ({"type": "decision", "title": "t", "body": "b", "supersedes": "01NOPE"}, "no record"),
        ({"type": "convention", "title": "t", "body": "b", "supersedes": "{jwt}"}, "a convention"),
        ({"type": "decision", "title": "t", "body": "b", "supersedes": "{jwt_old}"}, "already"),
    ],
)
async def test_record_errors(
    client: Client, seed: Seed, store: Store, args: dict[str, Any], message: str
) -> None:
    before = len(await store.list_records())
    if "supersedes" in args:
        args = {**args, "supersedes": args["supersedes"].format(jwt=seed.jwt, jwt_old=seed.jwt_old)}
    assert message in error(await client.call_tool("ctx_record", args))
    assert len(await store.list_records()) == before


async def test_supersede(client: Client, seed: Seed, store: Store) -> None:
    args = {
        "old_id": seed.pytest_convention,
        "new_body": "Pytest with anyio for async tests.",
        "rationale": "async code",
    }
    data = ok(await client.call_tool("ctx_supersede", args))
    assert data["old_id"] == seed.pytest_convention
    assert (data["type"], data["title"]) == ("convention", "Pytest for every test")
    new = await store.get(data["new_id"])
    assert (new.body, new.source, new.confidence) == (args["new_body"], "mcp_tool", "explicit")
    assert (await store.get(seed.pytest_convention)).superseded_by == data["new_id"]
    # superseding twice: the old record is no longer current
    twice = error(await client.call_tool("ctx_supersede", args))
    assert f"already superseded by {data['new_id']}" in twice
    unknown = {**args, "old_id": "01NOTANID0000000000000000"}
    assert "no record with id" in error(await client.call_tool("ctx_supersede", unknown))
    foreign = {**args, "old_id": seed.foreign}
    assert "in this project" in error(await client.call_tool("ctx_supersede", foreign))
    no_reason = {**args, "old_id": data["new_id"], "rationale": " "}
    assert "rationale is required" in error(await client.call_tool("ctx_supersede", no_reason))


async def test_supersede_with_a_new_title(client: Client, seed: Seed, store: Store) -> None:
    """A fact whose title no longer holds gets the new version's own title (blank: kept)."""
    args = {
        "old_id": seed.pytest_convention,
        "new_body": "Tests use unittest now.",
        "rationale": "fewer dependencies",
        "new_title": "unittest for every test",
    }
    data = ok(await client.call_tool("ctx_supersede", args))
    assert data["title"] == "unittest for every test"
    assert (await store.get(data["new_id"])).title == "unittest for every test"
    assert (await store.get(seed.pytest_convention)).title == "Pytest for every test"
    kept = {**args, "old_id": data["new_id"], "new_title": "  ", "new_body": "Still unittest."}
    again = ok(await client.call_tool("ctx_supersede", kept))
    assert again["title"] == "unittest for every test"


# -- ctx_project, ctx_related, ctx_sync_claudemd --------------------------------------------------


async def test_project(client: Client, seed: Seed, project_dir: Path) -> None:
    data = ok(await client.call_tool("ctx_project", {}))
    identity = identify(str(project_dir))
    assert (data["name"], data["project_id"], data["root"]) == (
        identity.name,
        seed.project_id,
        identity.root,
    )
    assert data["stack"] == "Python 3.11, anyio, SQLite"
    assert (data["languages"], data["package_manager"]) == ("Python", "uv")
    assert data["commands"] == {
        "test": "pytest -q (from pyproject.toml)",
        "lint": "ruff check . (from pyproject.toml)",
    }
    assert data["entry_points"] == "agentctx = agentctx._entry:main"
    assert data["other_facts"] == {}
    assert data["counts"] == {
        "decision": 1,
        "convention": 3,
        "preference": 1,
        "discovery": 2,
        "bugfix": 1,
        "handover": 0,
        "profile": 6,
    }
    assert data["superseded"] == 1
    assert data["last_session"] == {
        "session_id": seed.session_id,
        "started_at": "2026-01-02T03:04:05.000000Z",
        "ended_at": None,
        "tokens_injected": 1234,
        "injections": 3,
    }


async def test_related_walks_entities_and_edges_up_to_three_hops(
    client: Client, seed: Seed, project_dir: Path
) -> None:
    data = ok(await client.call_tool("ctx_related", {"file": AUTH_FILE}))
    assert (data["file"], data["known"]) == (AUTH_FILE, True)
    hops = {entry["id"]: entry["hops"] for entry in data["results"]}
    # superseded jwt_old (1 hop) is walked through, not shown; deep (4 hops) and the other
    # project's record on its own auth.py are out of reach
    assert hops == {seed.auth_convention: 1, seed.jwt: 2, seed.db_bugfix: 3}
    assert ids(data) == [seed.auth_convention, seed.jwt, seed.db_bugfix]
    assert set(data["results"][0]) == {"id", "type", "title", "age", "confidence", "hops"}
    absolute = ok(await client.call_tool("ctx_related", {"file": str(project_dir / AUTH_FILE)}))
    assert absolute == data
    unknown = ok(await client.call_tool("ctx_related", {"file": "src/none.py"}))
    assert unknown == {"file": "src/none.py", "known": False, "results": []}
    assert "file is empty" in error(await client.call_tool("ctx_related", {"file": ""}))


async def test_sync_claudemd_reports_drift_and_writes_nothing(
    client: Client, seed: Seed, project_dir: Path
) -> None:
    claude_md = project_dir / "CLAUDE.md"
    text = (
        "# Project\n\n"
        "- Pytest for every test: run `pytest -q`.\n"
        "- Sessions use **JWT access tokens** signed with RS256.\n"
    )
    claude_md.write_text(text)
    data = ok(await client.call_tool("ctx_sync_claudemd", {}))
    assert data["files"] == [str(claude_md)]
    # current explicit decisions and conventions: jwt, auth, pytest (inferred ones are not checked)
    assert data["checked"] == 3
    missing = {item["id"]: item for item in data["missing"]}
    assert set(missing) == {seed.jwt, seed.auth_convention} and data["missing_total"] == 2
    assert missing[seed.jwt]["missing_words"] == ["auth"] and missing[seed.jwt]["coverage"] == 0.5
    [stale] = data["contradictions"]
    assert (stale["id"], stale["superseded_by"], stale["line"]) == (seed.jwt_old, seed.jwt, 4)
    assert stale["file"] == str(claude_md) and "JWT access tokens" in stale["text"]
    diff = data["proposed_diff"]
    assert diff.startswith("--- a/CLAUDE.md\n+++ b/CLAUDE.md\n@@ ")
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]
    assert added[0] == "" and added[1] == SYNC_BEGIN and added[-1] == SYNC_END
    assert any(seed.jwt in line and "Use JWT for auth" in line for line in added)
    assert any(seed.auth_convention in line for line in added)
    assert not any(
        line.startswith("-") and not line.startswith("---") for line in diff.splitlines()
    )
    assert claude_md.read_text() == text  # read-only


async def test_sync_claudemd_without_a_claude_md(
    client: Client, seed: Seed, project_dir: Path
) -> None:
    data = ok(await client.call_tool("ctx_sync_claudemd", {}))
    assert data["files"] == [] and data["missing_total"] == 3 and data["contradictions"] == []
    assert data["proposed_diff"].startswith("--- /dev/null\n+++ b/CLAUDE.md\n@@ -0,0 +1,")
    assert not (project_dir / "CLAUDE.md").exists()
    (project_dir / ".claude").mkdir()
    nested = project_dir / ".claude" / "CLAUDE.md"
    nested.write_text("Auth handlers live in one module. Pytest for every test. JWT auth.\n")
    data = ok(await client.call_tool("ctx_sync_claudemd", {}))
    assert data["files"] == [str(nested)] and data["missing"] == []
    assert data["proposed_diff"] == ""


# -- the project and the store the server opens -------------------------------------------------


async def test_project_from_env_then_cwd(
    project_dir: Path, seed: Seed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project_dir))
    with anyio.fail_after(DEADLINE):
        async with Client(create_server()) as connected:
            data = ok(await connected.call_tool("ctx_project", {}))
    assert data["project_id"] == seed.project_id
    monkeypatch.delenv("CLAUDE_PROJECT_DIR")
    monkeypatch.chdir(project_dir)
    with anyio.fail_after(DEADLINE):
        async with Client(create_server()) as connected:
            data = ok(await connected.call_tool("ctx_project", {}))
    assert data["project_id"] == seed.project_id


async def test_a_store_that_cannot_open_gives_tool_errors(project_dir: Path, store: Store) -> None:
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir))) as connected:
            assert len((await connected.list_tools()).tools) == 7
            message = error(await connected.call_tool("ctx_search", {"query": "auth"}))
    assert "could not be opened" in message and "upgrade agentctx" in message


# -- a real stdio subprocess, as Claude Code starts it ---------------------------------------------


async def test_stdio_legacy_handshake(
    project_dir: Path, agentctx_home: Path, seed: Seed, store: Store, tmp_path: Path
) -> None:
    """``initialize`` first: the handshake Claude Code falls back to."""
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(DEADLINE):
        async with (
            stdio_client(server_params(project_dir, agentctx_home), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "agentctx" and init.instructions == INSTRUCTIONS
            listed = (await session.list_tools()).tools
            assert {tool.name for tool in listed} == TOOLS
            found = ok(await session.call_tool("ctx_search", {"query": "auth", "file": AUTH_FILE}))
            assert set(ids(found)) == {seed.jwt, seed.auth_convention}
            # every hit carries its strength label over the wire
            found = ok(await session.call_tool("ctx_search", {"query": "connection pool leak"}))
            labels = [(e["id"], e["match"]) for e in found["results"]]
            assert labels[0] == (seed.db_bugfix, "strong")
            assert {match for _, match in labels[1:]} == {"weak"}
            got = ok(await session.call_tool("ctx_get", {"ids": [seed.jwt]}))
            assert got["records"][0]["supersedes"] == [seed.jwt_old]
            assert "at most 10" in error(await session.call_tool("ctx_get", {"ids": ["x"] * 11}))
            created = ok(
                await session.call_tool(
                    "ctx_record", {"type": "discovery", "title": "Over stdio", "body": "Works."}
                )
            )
            related = ok(await session.call_tool("ctx_related", {"file": AUTH_FILE}))
            assert ids(related) == [seed.auth_convention, seed.jwt, seed.db_bugfix]
    assert (await store.get(created["id"])).source == "mcp_tool"


async def test_stdio_auto_mode(project_dir: Path, agentctx_home: Path, seed: Seed) -> None:
    """``Client(params)`` probes ``server/discover`` first, as Claude Code does."""
    with anyio.fail_after(DEADLINE):
        async with Client(server_params(project_dir, agentctx_home)) as connected:
            assert connected.protocol_version in MODERN_PROTOCOL_VERSIONS
            assert {tool.name for tool in (await connected.list_tools()).tools} == TOOLS
            data = ok(await connected.call_tool("ctx_project", {}))
            assert data["project_id"] == seed.project_id
            twice = {"old_id": seed.jwt_old, "new_body": "again", "rationale": "why"}
            assert "already superseded" in error(await connected.call_tool("ctx_supersede", twice))


async def test_stdout_carries_only_protocol(
    project_dir: Path, agentctx_home: Path, seed: Seed
) -> None:
    """Raw JSON-RPC over the pipes: every stdout line is a JSON-RPC message, errors included."""
    requests: list[dict[str, Any]] = [
        MCP_INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "ctx_get", "arguments": {"ids": ["01NOTANID0000000000000000"]}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "ctx_search", "arguments": {"query": "auth"}},
        },
    ]
    params = server_params(project_dir, agentctx_home)
    assert params.env is not None
    with anyio.fail_after(DEADLINE):
        async with await anyio.open_process(
            [params.command, *params.args], env=params.env
        ) as process:
            assert process.stdin and process.stdout and process.stderr
            responses: dict[int, dict[str, Any]] = {}
            buffer = b""
            for request in requests:
                await process.stdin.send(json.dumps(request).encode() + b"\n")
                if "id" not in request:
                    continue
                while request["id"] not in responses:
                    while b"\n" not in buffer:
                        buffer += await process.stdout.receive()
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    assert message["jsonrpc"] == "2.0"
                    responses[message["id"]] = message
            await process.stdin.aclose()
            rest = b"".join([chunk async for chunk in process.stdout])
            assert (buffer + rest).strip() == b""
            assert await process.wait() == 0
    assert responses[1]["result"]["serverInfo"]["name"] == "agentctx"
    assert len(responses[2]["result"]["tools"]) == 7
    assert responses[3]["result"]["isError"] is True
    assert "no record with id" in responses[3]["result"]["content"][0]["text"]
    assert responses[4]["result"]["isError"] is False
    assert {e["id"] for e in responses[4]["result"]["structuredContent"]["results"]} == {
        seed.jwt,
        seed.auth_convention,
        seed.gateway,
    }


#: What the handshake must not wait for: the tools' bodies and the store, rankings, CLAUDE.md report
#: and project identity they use, the SQLite driver, models, the LLM client, the CLI, rich.
BACKEND_MODULES = {
    "agentctx.mcp.tools",
    "agentctx.store",
    "agentctx.retrieval",
    "agentctx.retrieval.hybrid",
    "agentctx.retrieval.digest",
    "agentctx.core.search",
    "agentctx.claude.claudemd",
    "agentctx.store.inventory",
    "agentctx.core.project",
    "agentctx.config",
    "agentctx.core.db",
    "agentctx.mcp.graph",
    "sqlean",
    "sqlean._sqlite3",
    "aiosqlite",
    "sqlite_vec",
    "numpy",
    "fastembed",
    "onnxruntime",
    "anthropic",
    "cyclopts",
    "rich",
}


async def test_the_handshake_waits_for_no_backend(
    project_dir: Path, agentctx_home: Path, seed: Seed, tmp_path: Path
) -> None:
    """The real ``agentctx mcp`` answers ``initialize`` and ``tools/list`` with none of the
    backend's modules loaded (the server writes the loaded modules to IMPORT_LOG_ENV's file when it
    answers the first ``tools/list``), lists the tools as the server declares them, and opens the
    store for the first tool call."""
    import_log = tmp_path / "imports.txt"
    params = server_params(project_dir, agentctx_home)
    assert params.env is not None
    params.command = os.path.join(os.path.dirname(sys.executable), "agentctx")
    params.args = ["mcp"]
    params.env[IMPORT_LOG_ENV] = str(import_log)
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(DEADLINE):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "agentctx" and init.instructions == INSTRUCTIONS
            listed = (await session.list_tools()).tools
            loaded = set(import_log.read_text().split())
            found = ok(await session.call_tool("ctx_search", {"query": "auth"}))
    declared = await create_server(str(project_dir)).list_tools()
    assert [t.model_dump() for t in listed] == [t.model_dump() for t in declared]
    assert {"agentctx.mcp.server", "agentctx.mcp.models", "mcp.server.mcpserver"} <= loaded
    assert loaded & BACKEND_MODULES == set()
    assert set(ids(found)) == {seed.jwt, seed.auth_convention, seed.gateway}


def test_imports_stay_lazy() -> None:
    """The server loads no model or LLM client; the rest of the CLI never loads mcp or pydantic."""
    probe = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "print(' '.join(m for m in sys.argv[2:] if m in sys.modules))"
    )

    def loaded(module: str, *suspects: str) -> str:
        argv = [sys.executable, "-c", probe, module, *suspects]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    heavy = ("anthropic", "fastembed", "numpy", "onnxruntime", "cyclopts", "agentctx.extract")
    assert loaded("agentctx.mcp.server", *heavy) == ""
    assert loaded("agentctx.cli", "mcp", "pydantic", "agentctx.mcp.server") == ""
