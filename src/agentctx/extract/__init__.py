"""LLM extraction: a session transcript becomes typed records, with Claude Haiku 4.5.

``extract_session`` is what ``agentctx extract`` and the background workers run:

1. one extraction per session at a time (:func:`agentctx.core.locks.extraction_lock`, which a
   killed worker cannot leave held); the SessionEnd worker ``wait``s for a running one (started by
   Stop) to finish, so the session's last turns are still extracted;
2. incremental: only transcript lines after the last one already extracted
   (``sessions.extracted_uuid``), so Stop after every turn never re-sends old text;
3. the transcript is read, rendered, and REDACTED before anything else looks at it;
4. no ``ANTHROPIC_API_KEY`` or ``llm`` off: nothing is sent (the deterministic capture stays);
5. the size tier decides the calls (whole, head + tail, or map-reduce in parallel with a
   :class:`anyio.CapacityLimiter`, then one synthesis call);
6. the output is parsed defensively and written in ONE transaction, together with the session's
   new position, its cost and counters; on an API failure nothing is written but the cost and the
   error, and the session stays queued for the next run.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from agentctx import config
from agentctx.core import sessions
from agentctx.core.locks import extraction_lock
from agentctx.core.tokens import estimate_tokens
from agentctx.extract import apply, llm, prompt
from agentctx.redact import redact
from agentctx.store import inventory

if TYPE_CHECKING:
    from collections.abc import Callable

    from anthropic import AsyncAnthropic

    from agentctx.store import Store

DEFAULT_CONCURRENCY = 4
#: How often a waiting run tries the session's lock again.
LOCK_POLL_S = 0.1


@dataclass(slots=True)
class Report:
    """What one extraction run did (the ``--json`` output of ``agentctx extract``)."""

    session_id: str
    status: str = "pending"  # extracted | nothing_new | flush_ok | no_api_key | llm_off | locked | dry_run | failed | no_transcript
    transcript: str | None = None
    tier: str | None = None
    tokens_estimated: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    written: dict[str, int] = field(default_factory=dict)
    reinforced: int = 0
    duplicates: int = 0
    enriched: int = 0
    superseded: int = 0
    dropped: int = 0
    lines_skipped: dict[str, int] = field(default_factory=dict)
    unknown_supersedes: list[str] = field(default_factory=list)
    closed_handover: str | None = None
    error: str | None = None
    prompt: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {name: getattr(self, name) for name in self.__slots__}


async def extract_session(
    store: Store,
    session_id: str,
    *,
    transcript: str | None = None,
    dry_run: bool = False,
    client: AsyncAnthropic | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    log: Callable[[str], None] | None = None,
    wait: float = 0.0,
) -> Report:
    """Extract records from one session's transcript (see the module docstring).

    ``wait``: seconds to wait for a running extraction of the session before reporting ``locked``.
    """
    say = log or (lambda message: None)
    report = Report(session_id)
    settings = config.load()
    if not dry_run and not settings["llm"]:
        report.status = "llm_off"
        say("llm is off in config: no extraction")
        return report
    if not dry_run and not os.environ.get("ANTHROPIC_API_KEY", "").strip():
        report.status = "no_api_key"
        say("ANTHROPIC_API_KEY is not set: no extraction (deterministic capture only)")
        return report
    deadline = time.monotonic() + wait
    waiting = False
    while True:
        with extraction_lock(session_id) as locked:
            if locked:
                return await _run(
                    store, report, transcript, dry_run, client, concurrency, settings, say
                )
        if time.monotonic() >= deadline:
            report.status = "locked"
            say(f"an extraction of session {session_id} is already running")
            return report
        if not waiting:
            waiting = True
            say(f"waiting for the running extraction of session {session_id}")
        await anyio.sleep(LOCK_POLL_S)


async def _run(
    store: Store,
    report: Report,
    transcript: str | None,
    dry_run: bool,
    client: AsyncAnthropic | None,
    concurrency: int,
    settings: dict[str, Any],
    say: Callable[[str], None],
) -> Report:
    from agentctx.claude.transcript import read_transcript, render

    session = await inventory.session(store, report.session_id)
    path = (
        transcript or (session or {}).get("transcript_path") or find_transcript(report.session_id)
    )
    if not path or not await anyio.Path(path).exists():
        report.status = "no_transcript"
        report.error = f"no transcript found for session {report.session_id}"
        say(report.error)
        return report
    report.transcript = path
    after = (session or {}).get("extracted_uuid")
    parsed = await anyio.to_thread.run_sync(lambda: read_transcript(path, after_uuid=after))
    report.lines_skipped = dict(parsed.skipped)
    project_id, project_name, checkout = await _project_of(store, session, path)
    if not any(turn.role == "developer" for turn in parsed.turns):
        report.status = "nothing_new"
        if not dry_run and parsed.last_uuid:
            await _advance(store, report, project_id, parsed.last_uuid, None, 0.0)
        return report
    text = await anyio.to_thread.run_sync(lambda: redact(render(parsed.turns)))
    report.tokens_estimated = estimate_tokens(text)
    tier, parts = prompt.plan(text)
    report.tier = tier
    current = await _current_ids(store, project_id)
    handover = await _open_handover(store, project_id, checkout)
    context = prompt.context_block(project_name, current, handover)
    messages = [f"{context}\n\nTranscript:\n{part}" for part in parts]
    if dry_run:
        report.status = "dry_run"
        report.prompt = messages
        return report
    usage = llm.Usage()
    model = str(settings["llm.model"])
    own_client = client is None
    api = client or llm.make_client()
    try:
        output = await _call_all(api, model, messages, context, usage, concurrency)
    except Exception as exc:  # the SDK's errors after its retries, or a task group of them
        report.status = "failed"
        report.error = _describe(exc)
        report.calls, report.cost_usd = usage.calls, usage.cost_usd
        say(f"extraction failed, the session stays queued: {report.error}")
        await _advance(store, report, project_id, None, report.error, usage.cost_usd)
        return report
    finally:
        if own_client:
            await api.close()
    report.calls, report.cost_usd = usage.calls, usage.cost_usd
    if not isinstance(output, dict):  # no tool call, or not an object: try again next time
        report.status = "failed"
        report.error = "the model returned no extraction (no tool call with an object)"
        say(report.error)
        await _advance(store, report, project_id, None, report.error, usage.cost_usd)
        return report
    result = apply.parse(output)
    report.dropped = result.dropped
    threshold = int(settings["reinforcement_threshold"])
    async with store.transaction() as tx:
        applied = await apply.write(
            tx,
            result,
            project_id=project_id,
            session_id=report.session_id,
            threshold=threshold,
            open_handover=None if handover is None else handover[0],
            checkout=checkout,
        )
        await tx.run(
            sessions.advance(
                report.session_id,
                project_id,
                path,
                parsed.last_uuid,
                applied.written,
                usage.cost_usd,
            )
        )
    report.status = "flush_ok" if result.flush_ok else "extracted"
    report.written = applied.added
    report.reinforced, report.duplicates = applied.reinforced, applied.duplicates
    report.enriched, report.superseded = applied.enriched, applied.superseded
    report.closed_handover = applied.closed_handover
    report.unknown_supersedes = applied.unknown_supersedes
    for unknown in applied.unknown_supersedes:
        say(f"the model named an unknown record to supersede ({unknown}); added plainly")
    return report


async def _call_all(
    client: AsyncAnthropic,
    model: str,
    messages: list[str],
    context: str,
    usage: llm.Usage,
    concurrency: int,
) -> Any:
    if len(messages) == 1:
        return (await llm.call(client, model, messages[0], usage)).output
    results: list[Any] = [None] * len(messages)
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def one(index: int) -> None:
        async with limiter:
            results[index] = (await llm.call(client, model, messages[index], usage)).output

    async with anyio.create_task_group() as group:
        for index in range(len(messages)):
            group.start_soon(one, index)
    merged = orjson.dumps(
        [{"part": i + 1, "entries": r} for i, r in enumerate(results) if isinstance(r, dict)]
    ).decode()
    synthesis = f"{context}\n\n{prompt.SYNTHESIS_NOTE}\n\n{merged}"
    return (await llm.call(client, model, synthesis, usage)).output


def find_transcript(session_id: str) -> str | None:
    """``~/.claude/projects/*/<session_id>.jsonl`` (``CLAUDE_CONFIG_DIR`` moves the root)."""
    root = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    pattern = os.path.join(glob.escape(root), "projects", "*", f"{glob.escape(session_id)}.jsonl")
    found = sorted(glob.glob(pattern))
    return found[0] if found else None


async def _project_of(
    store: Store, session: dict[str, Any] | None, path: str
) -> tuple[str, str, str | None]:
    """(project id, name, checkout): the checkout keys the session's handover (None: unknown)."""
    from agentctx.core.project import identify

    cwd = (session or {}).get("cwd") or await anyio.to_thread.run_sync(_cwd_in_transcript, path)
    identity = identify(cwd or os.getcwd())
    project_id = str((session or {}).get("project_id") or identity.project_id)
    # A cwd of another project says nothing about where in this one the session ran.
    checkout = identity.checkout if identity.project_id == project_id else None
    return project_id, identity.name, checkout


def _cwd_in_transcript(path: str) -> str | None:
    with open(path, "rb") as fh:
        for _ in range(50):
            line = fh.readline()
            if not line:
                break
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict) and isinstance(value.get("cwd"), str):
                return str(value["cwd"])
    return None


async def _open_handover(
    store: Store, project_id: str, checkout: str | None
) -> tuple[str, str, str] | None:
    """The checkout's current handover, else the legacy one: (id, title, body), unless it says
    nothing is open. Another worktree's handover is its own session's business."""
    record = await store.current_handover(project_id, checkout)
    if record is None or record.title == apply.CLOSED_HANDOVER_TITLE:
        return None
    return record.id, record.title, record.body


async def _current_ids(store: Store, project_id: str) -> list[tuple[str, str, str]]:
    records = await store.list_records(
        project_id, types=("decision", "convention"), include_superseded=False
    )
    return [(r.id, str(r.type), r.title) for r in records][-200:]


async def _advance(
    store: Store,
    report: Report,
    project_id: str,
    last_uuid: str | None,
    error: str | None,
    cost: float,
) -> None:
    async with store.transaction() as tx:
        await tx.run(
            sessions.advance(
                report.session_id, project_id, report.transcript, last_uuid, 0, cost, error
            )
        )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"[:500]
