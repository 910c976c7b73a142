"""Issue 24, finding 10: every MCP tool argument is bounded, and blocking work stays off the loop.

A 1 MB ``file`` argument froze the server (``ctx_related``, ``ctx_search``): resolving the path was
quadratic and ran on the event loop, so nothing else was answered meanwhile. Now every string and
list argument carries its bound in the tool's input schema, a call beyond it gets a one-line tool
error at once, and the file system work of a ``file`` runs in a worker thread, bounded.

Time bounds here are generous guards (``fail_after``, ``select`` timeouts), never measurements.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult, TextContent

from agentctx.core.errors import ValidationError
from agentctx.mcp import graph, server
from agentctx.mcp.server import create_server
from tests.helpers import MCP_INITIALIZE, seed

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

DEADLINE = 30
MEGABYTE = 1 << 20
#: Each string argument of each tool, its bound, and the other arguments a call needs.
STRINGS: list[tuple[str, str, int, dict[str, Any]]] = [
    ("ctx_search", "query", server.QUERY_MAX, {}),
    ("ctx_search", "file", server.FILE_MAX, {"query": "auth"}),
    ("ctx_search", "as_of", server.AS_OF_MAX, {"query": "auth"}),
    ("ctx_related", "file", server.FILE_MAX, {}),
    ("ctx_record", "title", server.TITLE_MAX, {"type": "decision", "body": "b"}),
    ("ctx_record", "body", server.BODY_MAX, {"type": "decision", "title": "t"}),
    ("ctx_record", "supersedes", server.ID_MAX, {"type": "decision", "title": "t", "body": "b"}),
    ("ctx_supersede", "old_id", server.ID_MAX, {"new_body": "b", "rationale": "r"}),
    ("ctx_supersede", "new_body", server.BODY_MAX, {"old_id": "x", "rationale": "r"}),
    ("ctx_supersede", "rationale", server.BODY_MAX, {"old_id": "x", "new_body": "b"}),
    ("ctx_supersede", "new_title", server.TITLE_MAX, {"old_id": "x", "new_body": "b",
                                                       "rationale": "r"}),
]  # fmt: skip
#: Each list argument, its bound on items, and a bound on each item's length.
LISTS: list[tuple[str, str, int, int, dict[str, Any]]] = [
    ("ctx_get", "ids", server.GET_MAX, server.ID_MAX, {}),
    ("ctx_record", "cues", server.CUES_MAX, server.CUE_MAX,
     {"type": "decision", "title": "t", "body": "b"}),
]  # fmt: skip


def error(result: CallToolResult) -> str:
    """The one-line message of a tool error."""
    assert result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert "\n" not in block.text, block.text
    return block.text


@pytest.fixture
def project(project_dir: Path) -> Path:
    seed(project_dir, [{"type": "decision", "title": "Auth uses JWT", "body": "auth tokens"}])
    return project_dir


# -- the schema: every argument declares its bound -------------------------------------------------


def _bounded(name: str, schema: dict[str, Any]) -> list[str]:
    """Why an argument's schema is unbounded (empty: it is bounded)."""
    options = schema.get("anyOf", [schema])
    problems = []
    for option in options:
        kind = option.get("type")
        if kind == "string" and "maxLength" not in option and "enum" not in option:
            problems.append(f"{name}: a string without maxLength")
        if kind == "array":
            if "maxItems" not in option:
                problems.append(f"{name}: a list without maxItems")
            problems += _bounded(f"{name}[]", option.get("items", {}))
        if kind == "object":
            problems.append(f"{name}: an object argument")
    return problems


@pytest.mark.anyio
async def test_every_tool_argument_declares_its_bound(project: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project)), raise_exceptions=True) as client:
            tools = (await client.list_tools()).tools
    problems = []
    for tool in tools:
        for name, schema in tool.input_schema.get("properties", {}).items():
            problems += [f"{tool.name}.{p}" for p in _bounded(name, schema)]
    assert problems == []
    declared = {(tool, name) for tool, name, *_ in STRINGS + LISTS}
    strings = {
        (tool.name, name)
        for tool in tools
        for name, schema in tool.input_schema.get("properties", {}).items()
        if any(o.get("type") in ("string", "array") and "enum" not in o
               for o in schema.get("anyOf", [schema]))
    }  # fmt: skip
    assert strings == declared  # every bounded argument is tried below


# -- calls beyond a bound: a one-line error, at once -----------------------------------------------


@pytest.mark.anyio
async def test_every_argument_beyond_its_bound_is_refused_in_one_line(
    project: Path, store: Store
) -> None:
    before = len(await store.list_records())
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project)), raise_exceptions=True) as client:
            for tool, name, limit, rest in STRINGS:
                for size in (limit + 1, 3 * limit + 7, MEGABYTE):
                    for unit in ("a", "a/", "é", " x"):
                        value = (unit * size)[:size]
                        if len(value.strip()) <= limit:
                            continue
                        message = error(await client.call_tool(tool, {**rest, name: value}))
                        assert f"{name}: String should have at most {limit}" in message, message
                        assert value[:50] not in message  # the value is not echoed back
            for tool, name, items, length, rest in LISTS:
                for values in (
                    [f"id{i}" for i in range(items + 1)],
                    ["x" * (length + 1)],
                    ["x"] * MEGABYTE,
                ):
                    message = error(await client.call_tool(tool, {**rest, name: values}))
                    assert f"{name}" in message and "at most" in message, message
            answered = await client.call_tool("ctx_search", {"query": "auth"})
    assert not answered.is_error  # still serving
    assert len(await store.list_records()) == before  # nothing written by a refused call


@pytest.mark.anyio
async def test_a_megabyte_file_gets_an_error_while_other_requests_are_answered(
    project: Path,
) -> None:
    huge = "a/" * (MEGABYTE // 2)
    results: dict[str, CallToolResult] = {}
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project)), raise_exceptions=True) as client:

            async def call(key: str, tool: str, arguments: dict[str, Any]) -> None:
                results[key] = await client.call_tool(tool, arguments)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, "related", "ctx_related", {"file": huge})
                tasks.start_soon(call, "search", "ctx_search", {"query": "auth", "file": huge})
                tasks.start_soon(call, "other", "ctx_search", {"query": "auth"})
                tasks.start_soon(call, "project", "ctx_project", {})
    for key in ("related", "search"):
        assert f"file: String should have at most {server.FILE_MAX}" in error(results[key])
    assert not results["other"].is_error and not results["project"].is_error


def test_the_real_server_answers_a_megabyte_file_and_keeps_serving(
    project: Path, agentctx_home: Path
) -> None:
    """Through stdio, as Claude Code talks to it: the 1 MB line, then a search, each answered."""

    def call(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
        message = {"name": name, "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": message}
        return json.dumps(body).encode() + b"\n"

    lines = [
        json.dumps(MCP_INITIALIZE).encode() + b"\n",
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        call(2, "ctx_related", {"file": "x/" * (MEGABYTE // 2)}),
        call(3, "ctx_search", {"query": "auth", "file": "../" * (MEGABYTE // 3)}),
        call(4, "ctx_search", {"query": "auth"}),
    ]
    env = {**os.environ, "AGENTCTX_HOME": str(agentctx_home), "CLAUDE_PROJECT_DIR": str(project)}
    process = subprocess.Popen(
        [sys.executable, "-m", "agentctx", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: dict[int, dict[str, Any]] = {}
    try:
        process.stdin.write(b"".join(lines))  # all at once: the search queues behind the files
        process.stdin.flush()
        while len(replies) < 4:
            ready, _, _ = select.select([process.stdout], [], [], DEADLINE)
            assert ready, f"no reply within {DEADLINE} s; replies so far: {sorted(replies)}"
            reply = json.loads(process.stdout.readline())
            replies[reply["id"]] = reply
    finally:
        process.stdin.close()
        process.wait(timeout=DEADLINE)
        process.stdout.close()
    for request_id in (2, 3):
        result = replies[request_id]["result"]
        assert result["isError"] is True
        assert "file: String should have at most" in result["content"][0]["text"]
    assert replies[4]["result"].get("isError") is not True


# -- the file system work: off the loop, and bounded -----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["ctx_related", "ctx_search"])
async def test_file_resolution_runs_off_the_event_loop(
    project: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """While a ``file`` is being resolved (held here until released), other calls are answered.

    Were the resolution on the event loop, nothing else could be answered until it returned, and
    it returns only when released or after its own wait ran out: the check below fails either way.
    """
    entered, released = threading.Event(), threading.Event()
    state = {"done": False}
    real = graph.file_names

    def held(project_dir: str, root: str, path: str) -> list[str]:
        entered.set()
        released.wait(DEADLINE / 3)
        state["done"] = True
        return real(project_dir, root, path)

    monkeypatch.setattr(graph, "file_names", held)
    arguments = {"file": "src/app.py"} | ({"query": "auth"} if tool == "ctx_search" else {})
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project)), raise_exceptions=True) as client:
            assert not (await client.call_tool("ctx_project", {})).is_error  # the backend is open
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, tool, arguments)
                await anyio.to_thread.run_sync(entered.wait, DEADLINE / 3)
                answered = await client.call_tool("ctx_search", {"query": "auth"})
                resolving = not state["done"]
                released.set()
    assert not answered.is_error
    assert resolving, "the other call was answered only after the file was resolved"


def test_file_names_refuses_what_it_cannot_resolve_cheaply(project_dir: Path) -> None:
    root = str(project_dir)
    for path in ("a/" * (MEGABYTE // 2), "../" * 2000, "x" * (server.FILE_MAX + 1)):
        with pytest.raises(ValidationError, match="over the limit of 4096"):
            graph.file_names(root, root, path)
    with pytest.raises(ValidationError, match="NUL"):
        graph.file_names(root, root, "src/a\x00.py")


def test_resolve_is_cheap_on_a_megabyte_of_missing_folders(tmp_path: Path) -> None:
    """Before: about a minute (every prefix looked up); a guard of a few seconds, no measurement.

    The guard counts this thread's CPU time (its lookups are system calls, counted), not the
    wall time, which a loaded machine stretches at will."""
    for path in (str(tmp_path) + "/a" * (MEGABYTE // 2), "/" + "b/" * (MEGABYTE // 2)):
        start = time.thread_time()
        resolved = graph.resolve(path)
        assert time.thread_time() - start < 5
        assert resolved.endswith(("/a/a", "/b/b"))


_SEGMENTS = st.sampled_from(["real", "link", "loop", "gone", "..", ".", "real/deep", "x y"])


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(_SEGMENTS, max_size=8))
def test_resolve_agrees_with_realpath(tmp_path: Path, parts: list[str]) -> None:
    """Generated paths through real folders, links, a link loop and missing names: the same answer
    as ``os.path.realpath`` wherever a link is not followed by ``..`` (normalized first)."""
    base = tmp_path / "tree"
    if not base.exists():
        (base / "real" / "deep").mkdir(parents=True)
        (base / "link").symlink_to(base / "real")
        (base / "loop").symlink_to(base / "loop")
    path = os.path.normpath(os.path.join(str(base), *parts))
    assert graph.resolve(path) == os.path.realpath(path)
