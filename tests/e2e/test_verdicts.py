"""Injection verdicts under the real Claude Code CLI, offline (issue 25): the Stop worker judges.

``agentctx init`` with LLM extraction on (the ``api`` backend: ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL`` at the loopback server), a recorded discovery, then one ``claude -p`` process
with two prompts (one session). The first prompt is about a recorded discovery: UserPromptSubmit injects
it; the scripted main model answers at length (over the Stop hook's 32 KiB of conversation), so the
Stop hook starts the real detached ``worker extract``, which extracts (the stand-in answers
``flush_ok``) and then makes the one verdict call of the run (the stand-in answers ``used`` for
every injection it is asked about). The second prompt is held back until that verdict is in the
store: the session is still open, so it was the Stop worker's, not SessionEnd's. ``agentctx status
--json`` then shows it in the store's precision.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.consolidate import cues
from agentctx.core.handles import handle
from agentctx.extract import verdicts
from agentctx.extract.prompt import TOOL_NAME
from tests.e2e.harness import Machine, hook_contexts, wait_until
from tests.messages_server import MessagesServer, Recorded, TextReply, ToolUseReply, forced_tool

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.e2e

EXTRACTION = forced_tool(TOOL_NAME)
VERDICTS = forced_tool(verdicts.TOOL_NAME)
CUES = forced_tool(cues.TOOL_NAME)
#: A discovery: the SessionStart digest shows decisions and conventions, and a record it showed is
#: not injected again in the session.
DISCOVERY = (
    "The orders service speaks gRPC on port 7443 with buf-generated stubs",
    "The billing service calls the orders service over gRPC on port 7443; stubs come from buf.",
)
ASK = "Which port and stubs does the billing service use to call the orders service over gRPC?"
#: The main model's first answer: over 32 KiB, so that Stop starts an extraction.
LONG_ANSWER = "Use gRPC, as decided, with buf-generated stubs.\n" + "\n".join(
    f"Step {n}: wire the billing client for orders call {n} over gRPC with the buf stub."
    for n in range(520)
)
THANKS = "Thanks, that is all."
#: A detached worker: extraction and the verdict call against the loopback server.
WORKER_DEADLINE_S = 90.0
INJECTION = re.compile(r'<injection id="(i\d+)"')


def main_model(request: Recorded) -> TextReply:
    text = "\n".join(request.texts())
    return TextReply("Glad to help." if THANKS in text.split(ASK)[-1] else LONG_ANSWER)


class Judge:
    """The stand-in Haiku for verdict calls: ``used`` for every injection asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, request: Recorded) -> ToolUseReply:
        text = "\n".join(request.texts())
        self.asked.append(text)
        found = INJECTION.findall(text)
        return ToolUseReply(
            verdicts.TOOL_NAME,
            {"verdicts": [{"id": k, "verdict": "used", "reason": "the answer follows it"}
                          for k in found]},
        )  # fmt: skip


def test_the_stop_worker_judges_an_injection(tmp_path_factory: pytest.TempPathFactory,
                                             claude_code: Path) -> None:  # fmt: skip
    root = tmp_path_factory.mktemp("vd")  # short: Claude Code puts sockets under TMPDIR
    judge = Judge()
    routes: list[Any] = [
        (EXTRACTION, lambda _r: ToolUseReply(TOOL_NAME, {"flush_ok": True})),
        (VERDICTS, judge),
        (CUES, lambda _r: ToolUseReply(cues.TOOL_NAME, {"records": []})),
    ]
    with MessagesServer(main_model, routes=routes) as server:
        machine = Machine(root, claude_code, server)
        (machine.project / "README.md").write_text("# shop\n")
        machine.commit_project()
        machine.run("agentctx", "config", "set", "embeddings", "off")
        machine.agentctx("init", "--no-mcp")
        record = machine.agentctx(
            "record", "--type", "discovery", "--title", DISCOVERY[0], "--body", DISCOVERY[1]
        )

        def verdict_in_store() -> bool:
            return bool(machine.query("SELECT 1 FROM injection_verdicts WHERE verdict IS NOT NULL"))

        def hold_until_judged(_index: int) -> None:
            assert wait_until(verdict_in_store, WORKER_DEADLINE_S), diagnostics(machine)

        machine.claude_turns([ASK, THANKS], between=hold_until_judged)
        # the first turn's request carried the injected discovery
        first = next(r for r in server.messages_requests() if ASK in "\n".join(r.texts()))
        injected = "\n".join(hook_contexts(first, "UserPromptSubmit"))
        assert handle(record["id"]) in injected, diagnostics(machine)
        # one verdict call, made while the session was open (before the second prompt): Stop's
        assert len(server.messages_requests(VERDICTS)) >= 1
        assert ASK in judge.asked[0] and DISCOVERY[0] in judge.asked[0]
        assert "Use gRPC, as decided" in judge.asked[0]
        ((verdict, backend, tier),) = machine.query(
            "SELECT verdict, backend, tier FROM injection_verdicts WHERE record_id = ?",
            (record["id"],),
        )
        assert (verdict, backend, tier) == ("used", "api", "whole")
        lines = machine.log("workers.log")
        assert any(re.search(r"verdicts \S+: 1 of 1 judged", line) for line in lines), lines
        status = machine.agentctx("status")
        week = status["precision"]["7d"]
        assert (week["injections"], week["judged"], week["used"], week["useful_share"]) == (
            1, 1, 1, 1.0,
        )  # fmt: skip
        assert status["precision"]["judging"] == "on"


def diagnostics(machine: Machine) -> str:
    parts = machine.last_run()
    for name in ("hooks.log", "workers.log"):
        parts.append(f"{name}:\n" + "\n".join(machine.log(name)[-40:]))
    return "\n".join(parts)
