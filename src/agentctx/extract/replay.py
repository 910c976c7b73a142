"""``agentctx extract --no-llm``: deterministic capture only, for one run.

The transcript's tool calls (:func:`agentctx.claude.transcript.tool_calls`) go through the rules the
PostToolUse hook runs (:mod:`agentctx.core.capture`), as the events Claude Code would have sent, and
their observations are written in one transaction (:func:`agentctx.core.observe.apply`). Nothing
is sent to a model and the session's extraction position does not move: a later extraction with a
model still reads the whole session. Each tool call is applied once, whoever saw it first (the
hook live, an earlier replay, the spool: ``captured_calls``), so a session the hooks captured
replays to nothing new and a replay can be run again.

What it is for: sessions the hooks did not see (run before ``agentctx init``, with the hooks off, on
another machine), and a run of extraction that must not call a model.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from agentctx.core import capture, clock, observe
from agentctx.core.event import Event

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctx.claude.transcript import ToolCall
    from agentctx.core.shapes import Observation
    from agentctx.store import Store


@dataclass(slots=True)
class ReplayReport:
    """What a replay did: ``status`` ``replayed`` | ``no_transcript``."""

    session_id: str
    status: str = "replayed"
    transcript: str | None = None
    tool_calls: int = 0
    observed: dict[str, int] = field(default_factory=dict)
    written: int = 0
    already_captured: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def replay_session(
    store: Store,
    session_id: str,
    *,
    transcript: str | None = None,
    log: Callable[[str], None] | None = None,
) -> ReplayReport:
    """Run the capture rules over a session's transcript and write what they observe."""
    from agentctx.claude.transcript import tool_calls
    from agentctx.extract import find_transcript
    from agentctx.store import inventory

    say = log or (lambda message: None)
    report = ReplayReport(session_id)
    session = await inventory.session(store, session_id)
    path = transcript or (session or {}).get("transcript_path") or find_transcript(session_id)
    if not path or not await anyio.Path(path).is_file():
        report.status = "no_transcript"
        report.error = f"no transcript found for session {session_id}"
        say(report.error)
        return report
    report.transcript = str(path)
    calls = await anyio.to_thread.run_sync(lambda: tool_calls(str(path)))
    report.tool_calls = len(calls)
    observations = [obs for call in calls for obs in observe_call(call, session_id, str(path), say)]
    report.observed = dict(Counter(str(obs.get("kind")) for obs in observations))
    report.written = await store.write_sync(lambda conn: observe.apply(conn, observations))
    report.already_captured = len(observations) - report.written
    return report


def observe_call(
    call: ToolCall, session_id: str, transcript: str, say: Callable[[str], None]
) -> list[Observation]:
    """The observations the PostToolUse hook would have made of one tool call, at its time."""
    payload: dict[str, Any] = {
        "session_id": session_id,
        "transcript_path": transcript,
        "cwd": call.cwd,
        "tool_name": call.name,
        "tool_input": call.input,
        "tool_use_id": call.id,
    }
    event = "PostToolUseFailure" if call.failed else "PostToolUse"
    if call.failed:  # PostToolUseFailure carries the failed call's output as its error text
        parts = (call.response.get(key) for key in ("stdout", "stderr"))
        payload["error"] = "\n".join(p for p in parts if isinstance(p, str) and p)
    else:
        payload["tool_response"] = call.response
    found = capture.tool_use(Event(event, payload, say))
    at = _stored_time(call.timestamp)
    if at is not None:
        for obs in found:
            obs["at"] = at
    return found


def _stored_time(stamp: str) -> str | None:
    try:
        return clock.parse_time(stamp) if stamp else None
    except ValueError:
        return None
