"""SubagentStart: the subagent's task, read from the parent's transcript, searched like a prompt.

The hook runs as Claude Code runs it (``agentctx hook subagent-start``, a subprocess, a real store).
The transcript lines are the shapes Claude Code 2.1.332 writes (seen offline with the real CLI,
tests/e2e/test_subagent.py): the parent's ``Agent`` tool call, then for a background agent the
launch result whose ``toolUseResult`` names the ``agentId``. Issue 27, item 16.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from agentctx.core import ledger
from agentctx.core.inject import FENCE_NOTE, FENCE_OPEN, RULES_HEADER
from agentctx.core.subagents import task_of
from tests.helpers import contract, payload, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

SID = "2d149678-a446-4517-83d7-0492f206d432"
AGENT_ID = "a292db35cf04a84b1"
RECORDS = [
    {
        "type": "decision",
        "title": "Use gRPC for internal services",
        "body": "We moved from REST to gRPC between internal services for streaming.",
    },
    {
        "type": "bugfix",
        "title": "useAuthStore returned stale tokens",
        "body": "useAuthStore cached the token after refresh; clear the cache on a 401 response.",
    },
    {
        "type": "convention",
        "title": "Invoices are rendered with WeasyPrint",
        "body": "PDF invoices go through WeasyPrint templates in billing/templates.",
    },
]
TASK = "Find where useAuthStore refreshes the token and why a stale token survives a 401."


def _line(**fields: Any) -> str:
    return json.dumps({"sessionId": SID, "version": "2.1.332", "isSidechain": False, **fields})


def _call(call_id: str, prompt: str, kind: str | None = "general-purpose") -> str:
    args: dict[str, Any] = {"description": "Look into auth", "prompt": prompt}
    if kind is not None:
        args["subagent_type"] = kind
    block = {"type": "tool_use", "id": call_id, "name": "Agent", "input": args}
    return _line(type="assistant", message={"role": "assistant", "content": [block]})


def _launched(call_id: str, agent_id: str, prompt: str) -> str:
    text = f"Async agent launched successfully.\nagentId: {agent_id} (internal ID)"
    block = {
        "tool_use_id": call_id,
        "type": "tool_result",
        "content": [{"type": "text", "text": text}],
    }
    result = {"isAsync": True, "status": "async_launched", "agentId": agent_id,
              "description": "Look into auth", "prompt": prompt}  # fmt: skip
    return _line(type="user", message={"role": "user", "content": [block]}, toolUseResult=result)


def _transcript(project_dir: Path, *lines: str) -> Path:
    path = project_dir / ".transcript.jsonl"
    noise = _line(type="attachment", attachment={"type": "prompt_snapshot", "x": "y" * 50_000})
    path.write_text("\n".join([_line(type="user", message={"role": "user", "content": "hi"}),
                               noise, *lines]) + "\n")  # fmt: skip
    return path


def _start(project_dir: Path, agent_id: str = AGENT_ID, agent_type: str = "general-purpose") -> str:
    data = payload("SubagentStart", SID, project_dir, agent_id=agent_id, agent_type=agent_type,
                   prompt_id="2951a9a8-6249-4d66-b3cf-e9263f810649")  # fmt: skip
    text = contract(run_hook("subagent-start", data, cwd=project_dir), "SubagentStart")
    return text or ""


def test_a_background_agent_gets_records_for_its_task(project_dir: Path) -> None:
    ids = seed(project_dir, RECORDS)
    other = "Summarize the billing module for the README."
    _transcript(project_dir, _call("toolu_1", other), _launched("toolu_1", "aother", other),
                _call("toolu_2", TASK), _launched("toolu_2", AGENT_ID, TASK))  # fmt: skip
    text = _start(project_dir)
    assert text.startswith(f"{FENCE_OPEN}\n{FENCE_NOTE}\n")  # no digest: the full note
    assert "useAuthStore returned stale tokens" in text
    assert "WeasyPrint" not in text and RULES_HEADER not in text
    (entry,) = ledger.read_entries(SID)
    assert entry["event"] == "SubagentStart" and entry["ids"] == []
    assert entry["subagent_ids"] == [ids[1]]


def test_a_foreground_agent_is_found_by_its_pending_call_and_type(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    done = "Explain how PDF invoices are rendered with WeasyPrint."
    answered = _line(type="user", message={"role": "user", "content": [
        {"tool_use_id": "toolu_1", "type": "tool_result", "content": "done"}]})  # fmt: skip
    _transcript(project_dir, _call("toolu_1", done, "Explore"), answered,
                _call("toolu_2", TASK, "Explore"), _call("toolu_3", done, "Plan"))  # fmt: skip
    text = _start(project_dir, agent_id="afg", agent_type="Explore")
    assert "useAuthStore returned stale tokens" in text and "WeasyPrint" not in text


def test_what_the_parent_was_shown_is_given_to_the_subagent_and_stays_the_parents(
    project_dir: Path,
) -> None:
    """Never twice a session holds per context: the parent's and each subagent's."""
    seed(project_dir, RECORDS)
    _transcript(project_dir, _call("toolu_2", TASK), _launched("toolu_2", AGENT_ID, TASK),
                _call("toolu_3", TASK), _launched("toolu_3", "a2nd", TASK))  # fmt: skip
    prompt = payload("UserPromptSubmit", SID, project_dir, prompt=TASK)
    first = contract(run_hook("user-prompt-submit", prompt, cwd=project_dir), "UserPromptSubmit")
    assert first and "useAuthStore returned stale tokens" in first
    assert "useAuthStore returned stale tokens" in _start(project_dir)
    assert "useAuthStore returned stale tokens" in _start(project_dir, agent_id="a2nd")
    # the parent's own dedup is unchanged by what its subagents were shown
    again = run_hook("user-prompt-submit", prompt, cwd=project_dir)
    assert again.returncode == 0 and again.stdout == b""


def test_no_task_found_gives_the_standing_rules(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    text = _start(project_dir)  # no transcript file at all
    assert text.startswith(RULES_HEADER) and "Use gRPC for internal services" in text
    assert "useAuthStore" not in text


def test_a_task_nothing_matches_gives_the_standing_rules(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    task = "Count the lines of the changelog."
    _transcript(project_dir, _call("toolu_2", task), _launched("toolu_2", AGENT_ID, task))
    text = _start(project_dir)
    assert text.startswith(RULES_HEADER) and "useAuthStore" not in text


def test_an_odd_transcript_is_no_task(project_dir: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert task_of(str(fifo), AGENT_ID, "general-purpose") == ""
    assert task_of(str(tmp_path), AGENT_ID, "general-purpose") == ""
    (tmp_path / "garbage.jsonl").write_bytes(b'{"toolUseResult": 3}\n\xff\xfe{{{\n[1]\n')
    assert task_of(str(tmp_path / "garbage.jsonl"), AGENT_ID, "") == ""
    seed(project_dir, RECORDS)
    data = payload("SubagentStart", SID, project_dir, agent_id=AGENT_ID, agent_type="x",
                   transcript_path=str(fifo))  # fmt: skip
    result = run_hook("subagent-start", data, cwd=project_dir)
    assert result.returncode == 0 and RULES_HEADER in (contract(result, "SubagentStart") or "")


def test_a_long_task_is_cut(project_dir: Path) -> None:
    path = _transcript(
        project_dir, _call("t", "word " * 10_000), _launched("t", AGENT_ID, "x" * 20_000)
    )
    assert len(task_of(str(path), AGENT_ID, "general-purpose")) == 8000


def test_a_call_written_just_after_the_hook_started_is_found(project_dir: Path) -> None:
    """Claude Code writes the transcript asynchronously: the hook reads it again for a moment."""
    import threading

    path = _transcript(project_dir)
    late = _call("toolu_9", TASK, "Explore") + "\n"

    def append() -> None:
        with path.open("a") as fh:
            fh.write(late)

    timer = threading.Timer(0.2, append)
    timer.start()
    try:
        assert task_of(str(path), "afg", "Explore", wait=0.0) == ""
        assert TASK in task_of(str(path), "afg", "Explore", wait=2.0)
    finally:
        timer.join()


def test_a_transcript_created_after_the_hook_started_is_waited_for(project_dir: Path) -> None:
    """Claude Code creates the transcript on its first flush, which under load can come late.

    Seen once in CI: the subagent got the standing rules because the call's line was not there
    within the old 0.5 s. The file here appears 0.6 s after the hook started.
    """
    import subprocess
    import sys
    import time

    seed(project_dir, RECORDS)
    data = payload("SubagentStart", SID, project_dir, agent_id="afg", agent_type="Explore")
    with subprocess.Popen([sys.executable, "-m", "agentctx", "hook", "subagent-start"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=project_dir) as hook:  # fmt: skip
        assert hook.stdin is not None and hook.stdout is not None
        hook.stdin.write(json.dumps(data).encode())
        hook.stdin.close()
        time.sleep(0.6)
        _transcript(project_dir, _call("toolu_9", TASK, "Explore"))
        out = hook.stdout.read()
        hook.wait(timeout=60)
    text = contract(
        subprocess.CompletedProcess(hook.args, hook.returncode, out, b""), "SubagentStart"
    )
    assert text and "useAuthStore returned stale tokens" in text and RULES_HEADER not in text
