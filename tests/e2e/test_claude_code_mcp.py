"""The MCP server under the real Claude Code CLI, offline: ctx_search, then ctx_get, in one turn.

``agentctx init --project`` registers ``agentctx mcp`` in the project's ``.mcp.json``; ``claude -p``
(the version pinned in conftest) spawns it, with an isolated HOME and TMPDIR and
``ANTHROPIC_BASE_URL`` pointing at :mod:`tests.messages_server`. The scripted model calls
``mcp__agentctx__ctx_search``, reads a record id from the compact index Claude Code hands back
(no bodies there: progressive disclosure), calls ``mcp__agentctx__ctx_get`` with it, and answers
once the record's body has come back. The assertions read what Claude Code sent to the model.

What CLI 2.1.332 does here (checked while writing this test):

- A project ``.mcp.json`` needs no approval in ``-p`` mode: plain ``claude -p`` spawns the server
  and its tools can be called. But it gets only about 2 s to connect before the first model request:
  with ``agentctx mcp`` delayed by 3 s, the first request went out without the agentctx tools
  (they came from the second request on). The server connects in about 0.8 s on an idle machine,
  too close for a test that must not flake, so the test passes the same file with ``--mcp-config
  <project>/.mcp.json --strict-mcp-config``, which waits for the server (checked with the 3 s
  delay too) and loads no other MCP configuration; it asserts that the first request already
  carries the tools.
- Without ``ENABLE_TOOL_SEARCH`` the MCP tools are deferred: ``tools[]`` has only ``ToolSearch`` and
  a system message lists their names. A direct call worked all the same, so the setting is not
  needed for the calls; the test sets ``ENABLE_TOOL_SEARCH=false`` so that the tools arrive in
  ``tools[]`` with their input schemas, as a model that calls them would see them, and asserts that.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.harness import Machine, blocks
from tests.messages_server import MessagesServer, Recorded, Reply, TextReply, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.e2e

DECISION = (
    "Use gRPC for internal services",
    "We moved from REST to gRPC between internal services for streaming.",
)
PROMPT = "Look up in the project memory which protocol our internal services use."
ANSWER = "done"
SEARCH = "mcp__agentctx__ctx_search"
GET = "mcp__agentctx__ctx_get"
ALLOWED = f"{SEARCH} {GET}"
CLAUDE_TIMEOUT_S = 90


# -- reading the requests ---------------------------------------------------------------------------


def _result_text(block: dict[str, Any]) -> str:
    """The text of a ``tool_result`` block (a string, or text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        b["text"] for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str)
    )


def tool_results(request: Recorded) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks after the last assistant message (Claude Code may add system
    messages after them)."""
    messages: list[dict[str, Any]] = request.body["messages"]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [
        b
        for m in messages[last + 1 :]
        if m.get("role") == "user"
        for b in blocks(m)
        if b.get("type") == "tool_result"
    ]


def tools(request: Recorded) -> dict[str, dict[str, Any]]:
    """The tool definitions of a request, by name."""
    return {t["name"]: t for t in request.body.get("tools") or [] if isinstance(t, dict)}


def tool_uses(request: Recorded) -> dict[str, dict[str, Any]]:
    """Every ``tool_use`` block the request's history holds, by id."""
    return {
        b["id"]: b
        for m in request.body["messages"]
        for b in blocks(m)
        if b.get("type") == "tool_use"
    }


def search_ids(text: str) -> list[str]:
    """The record ids in a ctx_search result (structured JSON: ``{"results": [{"id": …}]}``)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    results = data.get("results") if isinstance(data, dict) else None
    return [r["id"] for r in results or [] if isinstance(r, dict) and isinstance(r.get("id"), str)]


class Model:
    """Search, then get the first id the search returned, then answer."""

    def __call__(self, request: Recorded) -> Reply | None:
        results = tool_results(request)
        if not results:
            return ToolUseReply(SEARCH, {"query": "gRPC"})
        uses = tool_uses(request)
        called = uses.get(str(results[0].get("tool_use_id")), {}).get("name")
        if called == SEARCH:
            ids = search_ids(_result_text(results[0]))
            if not ids:
                return TextReply("no id in the ctx_search result")  # the test fails on it
            return ToolUseReply(GET, {"ids": [ids[0]]})
        return TextReply(ANSWER)


# -- the scenario ----------------------------------------------------------------------------------


class Scenario(Machine):
    """The isolated machine; MCP tools in ``tools[]`` with their schemas (see the module doc)."""

    claude_timeout_s = CLAUDE_TIMEOUT_S

    def diagnostics(self) -> str:
        """What to read when a step fails: the claude run, MCP and agentctx logs, the requests."""
        parts = self.last_run()
        logs = sorted((self.home / ".cache" / "claude-cli-nodejs").glob("*/mcp-logs-agentctx/*"))
        logs += sorted((self.agentctx_home / "logs").glob("*"))
        for log in logs:
            parts.append(f"{log}:\n{log.read_text(errors='replace')[-3000:]}")
        for request in self.server.messages_requests():
            last = request.body["messages"][-1] if request.body["messages"] else {}
            tools = [t.get("name") for t in request.body.get("tools") or []]
            parts.append(f"request: tools={tools}\n  last message: {json.dumps(last)[:1500]}")
        return "\n".join(parts)


@pytest.fixture
def scenario(tmp_path_factory: pytest.TempPathFactory, claude_code: Path) -> Iterator[Scenario]:
    """A git project with an origin remote, and the model server; agentctx not yet set up."""
    root = tmp_path_factory.mktemp("ccmcp")  # short: Claude Code puts sockets under TMPDIR
    with MessagesServer(Model()) as server:
        scenario = Scenario(root, claude_code, server, {"ENABLE_TOOL_SEARCH": "false"})
        (scenario.project / "README.md").write_text("# shop\n")
        scenario.commit_project()
        yield scenario


# -- the test -------------------------------------------------------------------------------------


def test_mcp_tools_under_real_claude_code(scenario: Scenario) -> None:
    setup = scenario.agentctx("init", "--project", "--no-llm", "--no-embeddings")
    mcp_json = scenario.project / ".mcp.json"
    changed = {c["path"]: c["action"] for c in setup["changes"]}
    assert changed.get(str(mcp_json)) == "created", setup
    entry = json.loads(mcp_json.read_text())["mcpServers"]["agentctx"]
    assert (entry["command"], entry["args"]) == ("agentctx", ["mcp"]), entry
    decision = scenario.agentctx(
        "record", "--type", "decision", "--title", DECISION[0], "--body", DECISION[1]
    )

    # the file init wrote, passed so that Claude Code waits for the server (see the module doc)
    mcp_args = ("--mcp-config", str(mcp_json), "--strict-mcp-config")
    output = scenario.claude_p(PROMPT, "--allowedTools", ALLOWED, *mcp_args)
    assert output["result"] == ANSWER, scenario.diagnostics()
    assert output["permission_denials"] == [], output["permission_denials"]
    requests = scenario.server.messages_requests()
    assert len(requests) == 3, scenario.diagnostics()
    first, second, third = requests

    # 1. the tools reach the model in the first request, with their schemas; it calls ctx_search
    assert not tool_results(first)
    offered = tools(first)
    assert {SEARCH, GET} <= set(offered), scenario.diagnostics()
    assert "query" in offered[SEARCH]["input_schema"]["properties"], offered[SEARCH]
    assert "ids" in offered[GET]["input_schema"]["properties"], offered[GET]

    # 2. the ctx_search result: the compact index with the record's id, without its body
    (searched,) = tool_results(second)
    assert tool_uses(second)[searched["tool_use_id"]]["name"] == SEARCH
    assert not searched.get("is_error"), searched
    text = _result_text(searched)
    assert search_ids(text)[:1] == [decision["id"]], text
    assert DECISION[0] in text and DECISION[1] not in text, text

    # 3. the ctx_get result: the full record, body included
    (got,) = tool_results(third)
    use = tool_uses(third)[got["tool_use_id"]]
    assert (use["name"], use["input"]) == (GET, {"ids": [decision["id"]]})
    assert not got.get("is_error"), got
    record = json.loads(_result_text(got))["records"][0]
    assert (record["id"], record["title"], record["body"]) == (
        decision["id"],
        DECISION[0],
        DECISION[1],
    )

    # agentctx's hooks ran in the session too; they log any problem there
    assert scenario.hooks_log() == [], scenario.diagnostics()
