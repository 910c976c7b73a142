"""SubagentStart under the real Claude Code CLI: the subagent is given records for its task.

Claude Code (the pinned CLI, offline against tests/messages_server.py) runs the project's hooks as
``agentctx init --project`` registers them. The scripted model starts a subagent with the ``Agent``
tool; the hook finds the task in the parent's transcript (the payload has only ``agent_id`` and
``agent_type``) and its context must reach the subagent's own first request. Issue 27, item 16.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.e2e.harness import Machine, blocks, hook_contexts, texts
from tests.messages_server import MessagesServer, Recorded, Reply, TextReply, ToolUseReply

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e

TASK = "Find where useAuthStore refreshes the token and why a stale token survives a 401."
ASK = "Look into the stale auth token with a subagent."
BUGFIX = (
    "useAuthStore returned stale tokens",
    "useAuthStore cached the token after refresh; clear the cache on a 401 response.",
)
OTHER = ("Invoices are rendered with WeasyPrint", "PDF invoices use WeasyPrint templates.")


def _script(request: Recorded) -> Reply | None:
    said = "\n".join(t for m in request.body["messages"] if m["role"] == "user" for t in texts(m))
    if TASK in said:
        return TextReply("The refresh happens in useAuthStore.refresh().")  # the subagent
    answered = any(
        b.get("type") == "tool_result" for m in request.body["messages"] for b in blocks(m)
    )
    if ASK in said and not answered:
        return ToolUseReply(
            "Agent",
            {"description": "Auth token refresh", "prompt": TASK, "subagent_type": "Explore"},
        )
    return TextReply("done")


def test_a_subagent_gets_records_for_its_task(tmp_path_factory: pytest.TempPathFactory,
                                              claude_code: Path) -> None:  # fmt: skip
    root = tmp_path_factory.mktemp("cc")
    with MessagesServer(_script) as server:
        machine = Machine(root, claude_code, server)
        (machine.project / "package.json").write_text(
            '{"name": "web", "scripts": {"test": "vitest"}}'
        )
        machine.commit_project()
        machine.agentctx("init", "--project", "--no-mcp", "--no-llm", "--no-embeddings")
        for kind, (title, body) in (("bugfix", BUGFIX), ("convention", OTHER)):
            machine.agentctx("record", "--type", kind, "--title", title, "--body", body)
        machine.claude_p(ASK, "--allowedTools", "Agent")
        requests = server.messages_requests()
    subagent = [r for r in requests if any(TASK in t for m in r.body["messages"] for t in texts(m))
                and not any(ASK in t for m in r.body["messages"] for t in texts(m))]  # fmt: skip
    assert subagent, machine.diagnostics()
    contexts = hook_contexts(subagent[0], "SubagentStart")
    assert contexts, machine.diagnostics()
    assert BUGFIX[0] in contexts[0] and OTHER[0] not in contexts[0], machine.diagnostics()
    assert not [line for line in machine.hooks_log() if "SubagentStart" in line]
