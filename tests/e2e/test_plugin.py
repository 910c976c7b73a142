"""The agentctx Claude Code plugin under the real CLI, offline: validated, installed from this
repository as a local marketplace, then one session fires its hooks and reaches its MCP server.

``claude plugin validate --strict`` checks ``plugin/`` and ``.claude-plugin/marketplace.json``;
``claude plugin marketplace add <repository>`` and ``claude plugin install agentctx@agentctx-local``
install it into the isolated HOME (nothing is fetched: a directory marketplace). ``agentctx init``
then sees the plugin and registers nothing itself. In ``claude -p``, the SessionStart digest and the
UserPromptSubmit records must reach the model request (the plugin's hooks ran ``agentctx hook …``
through PATH), and the plugin's MCP server must list its tools (``tools/list``: they reach the
model with their schemas as ``mcp__plugin_agentctx_agentctx__…``) and answer a ``ctx_search``.

What CLI 2.1.332 does here: a plugin's MCP server is started with the session, and the first model
request may go out before it has connected (about 2 s; see test_claude_code_mcp.py). The scripted
model therefore waits, running ``sleep 1`` through Bash, until a request carries the plugin's
tools (at most :data:`WAITS` times), then calls ``ctx_search`` and answers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.core.handles import handle
from tests.e2e.harness import Machine, blocks, wait_until
from tests.messages_server import MessagesServer, Recorded, Reply, TextReply, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_ID = "agentctx@agentctx-local"
SEARCH = "mcp__plugin_agentctx_agentctx__ctx_search"
DECISION = (
    "Use gRPC for internal services",
    "We moved from REST to gRPC between internal services for streaming.",
)
DISCOVERY = (
    "gRPC deadlines are mandatory",
    "Every gRPC call needs a deadline; the mesh drops calls without one after 30 s.",
)
PROMPT = "Do our gRPC calls need a deadline? Check the project memory."
ANSWER = "Yes: every gRPC call needs a deadline."
WAITS = 20


def tool_names(request: Recorded) -> set[str]:
    return {t["name"] for t in request.body.get("tools") or [] if isinstance(t, dict)}


def last_results(request: Recorded) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the request's last message."""
    messages = request.body["messages"]
    return [b for b in blocks(messages[-1]) if b.get("type") == "tool_result"] if messages else []


class Model:
    """Wait (Bash ``sleep 1``) until the plugin's tools arrive, call ctx_search, then answer."""

    def __init__(self) -> None:
        self.waits = 0
        self.searched = False

    def __call__(self, request: Recorded) -> Reply | None:
        if self.searched:
            return TextReply(ANSWER)
        if SEARCH in tool_names(request):
            self.searched = True
            return ToolUseReply(SEARCH, {"query": "gRPC deadline"})
        if self.waits >= WAITS:
            return TextReply("the plugin's MCP tools never arrived")  # the test fails on it
        self.waits += 1
        return ToolUseReply("Bash", {"command": "sleep 1", "description": "wait"})


class Scenario(Machine):
    """The isolated machine, plus ``claude plugin …`` commands and the plugin's MCP logs."""

    claude_timeout_s = 120

    def claude_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A ``claude`` subcommand (not a session); the test fails unless it exits 0."""
        result = subprocess.run(
            [str(self.claude), *args], cwd=self.project, env=self.env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, (
            f"claude {args}: {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
        return result

    def diagnostics(self) -> str:
        parts = self.last_run()
        logs = sorted((self.home / ".cache" / "claude-cli-nodejs").glob("*/mcp-logs-*/*"))
        logs += sorted((self.agentctx_home / "logs").glob("*"))
        for log in logs:
            parts.append(f"{log}:\n{log.read_text(errors='replace')[-3000:]}")
        for request in self.server.messages_requests():
            last = request.body["messages"][-1] if request.body["messages"] else {}
            parts.append(
                f"request: tools={sorted(tool_names(request))}\n  last: {json.dumps(last)[:1500]}"
            )
        return "\n".join(parts)


@pytest.fixture
def scenario(tmp_path_factory: pytest.TempPathFactory, claude_code: Path) -> Iterator[Scenario]:
    root = tmp_path_factory.mktemp("ccplugin")  # short: Claude Code puts sockets under TMPDIR
    with MessagesServer(Model()) as server:
        scenario = Scenario(root, claude_code, server, {"ENABLE_TOOL_SEARCH": "false"})
        (scenario.project / "README.md").write_text("# shop\n")
        scenario.commit_project()
        yield scenario


def test_the_plugin_validates(scenario: Scenario) -> None:
    plugin = scenario.claude_cli("plugin", "validate", "--strict", str(ROOT / "plugin"))
    assert "Validation passed" in plugin.stdout, plugin.stdout
    for hook in ("SessionStart", "UserPromptSubmit", "SessionEnd"):
        assert hook in plugin.stdout, plugin.stdout
    assert 'mcpServers: agentctx stdio agentctx ["mcp"]' in plugin.stdout, plugin.stdout
    marketplace = scenario.claude_cli("plugin", "validate", "--strict", str(ROOT))
    assert "Validating marketplace manifest" in marketplace.stdout
    assert "Validation passed" in marketplace.stdout, marketplace.stdout


def test_the_plugin_installs_and_works_in_a_session(scenario: Scenario) -> None:
    scenario.claude_cli("plugin", "marketplace", "add", str(ROOT))
    scenario.claude_cli("plugin", "install", PLUGIN_ID)
    listed = json.loads(scenario.claude_cli("plugin", "list", "--json").stdout)
    (ours,) = [p for p in listed if p["id"] == PLUGIN_ID]
    assert ours["enabled"] is True and ours["scope"] == "user", ours

    # init sees the plugin and registers nothing of its own
    setup = scenario.agentctx("init", "--no-llm", "--no-embeddings")
    assert setup["plugin"] == f"{PLUGIN_ID} (user scope, enabled)", setup
    assert {c["action"] for c in setup["changes"]} == {"unchanged"}, setup
    settings = json.loads((scenario.home / ".claude" / "settings.json").read_text())
    assert "hooks" not in settings and settings["enabledPlugins"] == {PLUGIN_ID: True}
    claude_json = scenario.home / ".claude.json"
    if claude_json.exists():
        assert "agentctx" not in json.loads(claude_json.read_text()).get("mcpServers", {})
    decision = scenario.agentctx(
        "record", "--type", "decision", "--title", DECISION[0], "--body", DECISION[1]
    )
    discovery = scenario.agentctx(
        "record", "--type", "discovery", "--title", DISCOVERY[0], "--body", DISCOVERY[1]
    )

    output = scenario.claude_p(PROMPT, "--allowedTools", f"Bash {SEARCH}")
    assert output["result"] == ANSWER, scenario.diagnostics()
    requests = scenario.server.messages_requests()
    first = requests[0]

    # the plugin's hooks: SessionStart's digest and UserPromptSubmit's records reach the model
    system = "\n".join(
        b["text"]
        for m in first.body["messages"]
        for b in blocks(m)
        if isinstance(b.get("text"), str) and "hook additional context: " in b["text"]
    )
    assert "SessionStart hook additional context: # agentctx: context for shop" in system, (
        scenario.diagnostics()
    )
    assert f"{DECISION[0]}: {DECISION[1]} (id {handle(decision['id'])})" in system
    assert "UserPromptSubmit hook additional context: " in system
    assert f"id {handle(discovery['id'])}] {DISCOVERY[0]}" in system, system

    # the plugin's MCP server: its tools listed with their schemas, and ctx_search answered
    searching = next(r for r in requests if SEARCH in tool_names(r))
    schema = next(t for t in searching.body["tools"] if t["name"] == SEARCH)["input_schema"]
    assert "query" in schema["properties"], schema
    answered = [b for r in requests for b in last_results(r) if not b.get("is_error")]
    found = [
        b
        for b in answered
        if discovery["id"] in json.dumps(b.get("content"))
        and DISCOVERY[0] in json.dumps(b.get("content"))
    ]
    assert found, scenario.diagnostics()

    # SessionEnd, the plugin's last hook, marked the session ended; no hook logged a problem
    def ended() -> bool:
        rows = scenario.query(
            "SELECT ended_at FROM sessions WHERE session_id = ?", (output["session_id"],)
        )
        return bool(rows) and rows[0][0] is not None

    assert wait_until(ended, 10), scenario.diagnostics()
    assert scenario.hooks_log() == [], scenario.diagnostics()

    # uninstall leaves the plugin (init did not add it); once Claude Code removes it, init registers
    removed = scenario.agentctx("uninstall")
    assert removed["plugins_left"] == [PLUGIN_ID], removed
    scenario.claude_cli("plugin", "uninstall", PLUGIN_ID)
    again = scenario.agentctx("init", "--no-llm", "--no-embeddings")
    assert again["plugin"] is None, again
    settings = json.loads((scenario.home / ".claude" / "settings.json").read_text())
    assert set(settings["hooks"]) == {
        "SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "PreCompact",
        "Stop", "SessionEnd", "CwdChanged", "SubagentStart",
    }  # fmt: skip
