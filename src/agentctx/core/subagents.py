"""A subagent's task, as the parent session's transcript holds it when SubagentStart fires.

Claude Code's SubagentStart payload carries ``agent_id`` and ``agent_type`` but not the task: seen
with the real CLI (2.1.332, ``tests/e2e/test_claude_code.py``), the payload is ``session_id``,
``transcript_path`` (the parent's), ``cwd``, ``prompt_id``, ``agent_id``, ``agent_type``,
``hook_event_name``. The task is the ``prompt`` (and ``description``) of the parent's ``Agent`` (or,
before 2.1, ``Task``) tool call, which is in the parent's transcript by then:

1. the tool result line whose ``toolUseResult.agentId`` is this ``agent_id`` (a background agent's
   launch result, written before the agent starts) gives its ``prompt`` exactly;
2. otherwise the newest ``Agent``/``Task`` tool call of the tail that has no result yet and whose
   ``subagent_type`` is this ``agent_type`` (a foreground agent: the call waits for it).

The transcript is written asynchronously (Claude Code flushes it every 100 ms, later under load,
and creates the file on its first flush): the hook reads it again for up to :data:`WAIT_S` while
the file or the call is not there yet. Bounded: a regular file only, its last :data:`TAIL_BYTES`, only the lines that can hold either; an
unreadable or foreign transcript gives "" (the hook then falls back, :mod:`agentctx.hooks.prompt`).
Standard library only (the SubagentStart hook imports it).
"""

from __future__ import annotations

from agentctx.core import jsonio
from agentctx.core.files import read_tail

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: How much of the parent's transcript end is read (its snapshot lines can be ~100 KB each).
TAIL_BYTES = 2 * 1024 * 1024
#: The tool names Claude Code has used for starting a subagent.
AGENT_TOOLS = ("Agent", "Task")
#: The longest task text kept (the prompt search reads the start of a text anyway).
TASK_MAX_CHARS = 8000
#: How long SubagentStart waits for the agent call's line to reach the transcript (0.5 s missed
#: it once on a loaded CI machine; only a subagent whose task is never found waits this long).
WAIT_S = 2.0
#: ``subagent_type`` of a call that names none.
DEFAULT_TYPE = "general-purpose"


def task_of(transcript_path: str, agent_id: str, agent_type: str, wait: float = 0.0) -> str:
    """The task text the parent gave the subagent ``agent_id`` ('' when it cannot be found).

    Claude Code writes its transcript asynchronously: the agent call's line may land just after
    the hook starts, so the tail is read again every 50 ms for up to ``wait`` seconds.
    """
    if not transcript_path:
        return ""
    import time

    deadline = time.monotonic() + wait
    while True:
        found = _read_task(transcript_path, agent_id, agent_type)
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def _read_task(transcript_path: str, agent_id: str, agent_type: str) -> str:
    try:
        data, _cut = read_tail(transcript_path, TAIL_BYTES)
    except (OSError, ValueError):
        return ""
    calls: dict[str, dict[str, Any]] = {}  # tool_use_id -> input, in file order
    answered: set[str] = set()
    for raw in data.split(b"\n"):
        if not raw.startswith(b"{") or not _maybe(raw, agent_id, calls):
            continue
        try:
            entry = jsonio.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("isSidechain"):
            continue
        result = entry.get("toolUseResult")
        if isinstance(result, dict) and agent_id and result.get("agentId") == agent_id:
            found = _text(result)
            if found:
                return found
        for block in _blocks(entry):
            if block.get("type") == "tool_use" and block.get("name") in AGENT_TOOLS:
                args = block.get("input")
                if isinstance(args, dict) and isinstance(block.get("id"), str):
                    calls[block["id"]] = args
            elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                answered.add(block["tool_use_id"])
    for call_id, args in reversed(calls.items()):
        kind = args.get("subagent_type")
        kind = kind if isinstance(kind, str) and kind else DEFAULT_TYPE
        if call_id not in answered and (not agent_type or kind == agent_type):
            return _text(args)
    return ""


def _maybe(line: bytes, agent_id: str, calls: dict[str, Any]) -> bool:
    """Whether a line may hold an agent call or the result of one seen (before any parse)."""
    if agent_id and agent_id.encode("utf-8", "replace") in line:
        return True
    if b'"tool_use"' in line and (b'"Agent"' in line or b'"Task"' in line):
        return True
    return b'"tool_result"' in line and any(c.encode() in line for c in calls)


def _blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def _text(args: dict[str, Any]) -> str:
    """The description and the prompt of an agent call (or its launch result), one text."""
    parts = [args.get("description"), args.get("prompt")]
    text = "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    return text[:TASK_MAX_CHARS]
