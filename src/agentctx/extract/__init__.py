"""LLM extraction: a session transcript becomes typed records, with Claude Haiku 4.5.

``extract_session`` is what ``agentctx extract`` and the background workers run:

1. one extraction per session at a time (:func:`agentctx.core.locks.extraction_lock`, which a
   killed worker cannot leave held); the SessionEnd worker ``wait``s for a running one (started by
   Stop) to finish, so the session's last turns are still extracted;
2. incremental: only transcript lines after the last one already extracted
   (``sessions.extracted_uuid``), so Stop after every turn never re-sends old text;
3. the transcript is read, rendered, and REDACTED before anything else looks at it;
4. the backend (:mod:`agentctx.core.backend`): ``api`` (:mod:`agentctx.extract.llm`) or
   ``claude-code``, the user's own ``claude`` CLI (:mod:`agentctx.extract.claude_code`); none
   (``llm`` off, ``extraction.backend`` off, no API key and no logged-in CLI): nothing is sent
   (the deterministic capture stays);
5. the size tier decides the calls (whole, head + tail, or map-reduce in parallel with a
   :class:`anyio.CapacityLimiter`, then one synthesis call); through ``claude-code`` the run
   must fit the daily caps (``extraction.daily_calls``, ``.daily_tokens``, ``.session_calls``),
   else it is ``deferred``: nothing is sent and the session stays queued;
6. the output is parsed defensively and written in ONE transaction, together with the session's
   new position, its cost and counters and a row of the extraction ledger (backend, calls,
   tokens, cache reads); on a failure nothing is written but the spend and the error, and the
   session stays queued for the next run.
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
from agentctx.core import backend, sessions
from agentctx.core.locks import extraction_lock
from agentctx.core.tokens import estimate_tokens
from agentctx.extract import apply, claude_code, llm, prompt
from agentctx.redact import redact
from agentctx.store import inventory

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from anthropic import AsyncAnthropic

    class Caller(Protocol):
        """One extraction call (:class:`llm.ApiCaller`, :class:`claude_code.ClaudeCodeCaller`)."""

        name: str
        concurrency: int

        async def __call__(
            self, model: str, user_text: str, usage: llm.Usage
        ) -> llm.CallResult: ...

        async def aclose(self) -> None: ...

    from agentctx.store import Store

DEFAULT_CONCURRENCY = 4
#: How often a waiting run tries the session's lock again.
LOCK_POLL_S = 0.1


@dataclass(slots=True)
class Report:
    """What one extraction run did (the ``--json`` output of ``agentctx extract``)."""

    session_id: str
    # extracted | nothing_new | flush_ok | no_api_key | no_backend | backend_off | llm_off | locked
    # | dry_run | deferred | failed | no_transcript
    status: str = "pending"
    backend: str | None = None
    transcript: str | None = None
    tier: str | None = None
    tokens_estimated: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    reinforced: int = 0
    duplicates: int = 0
    enriched: int = 0
    superseded: int = 0
    dropped: int = 0
    linked: int = 0
    entities_dropped: int = 0
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
    caller: Caller | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    log: Callable[[str], None] | None = None,
    wait: float = 0.0,
) -> Report:
    """Extract records from one session's transcript (see the module docstring).

    ``caller``: the backend's calls (default: the one :func:`agentctx.core.backend.resolve` picks;
    ``client``: the API backend's client, when it is the one). ``wait``: seconds to wait for a
    running extraction of the session before reporting ``locked``.
    """
    say = log or (lambda message: None)
    report = Report(session_id)
    settings = config.load()
    if not dry_run and not settings["llm"]:
        report.status = "llm_off"
        say("llm is off in config: no extraction")
        return report
    if not dry_run and caller is None:
        setting = str(settings["extraction.backend"])
        choice = await anyio.to_thread.run_sync(lambda: backend.resolve(setting))
        for warning in choice.warnings:
            say(warning)
        if choice.backend is None:
            report.status = (
                "backend_off"
                if choice.configured == backend.OFF
                else "no_api_key"
                if choice.configured == backend.API
                else "no_backend"
            )
            say(f"no extraction ({choice.reason}); deterministic capture only")
            return report
        if choice.backend == backend.API:
            caller = llm.ApiCaller(client)
        else:
            assert choice.binary is not None
            caller = claude_code.ClaudeCodeCaller(choice.binary, auth_method=choice.auth_method)
    deadline = time.monotonic() + wait
    waiting = False
    try:
        while True:
            with extraction_lock(session_id) as locked:
                if locked:
                    return await _run(
                        store, report, transcript, dry_run, caller, concurrency, settings, say
                    )
            if time.monotonic() >= deadline:
                report.status = "locked"
                say(f"an extraction of session {session_id} is already running")
                return report
            if not waiting:
                waiting = True
                say(f"waiting for the running extraction of session {session_id}")
            await anyio.sleep(LOCK_POLL_S)
    finally:
        if caller is not None:
            await caller.aclose()


async def _run(
    store: Store,
    report: Report,
    transcript: str | None,
    dry_run: bool,
    caller: Caller | None,
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
    size = (await anyio.Path(path).stat()).st_size  # read before the lines: never past them
    after = (session or {}).get("extracted_uuid")
    parsed = await anyio.to_thread.run_sync(lambda: read_transcript(path, after_uuid=after))
    report.lines_skipped = dict(parsed.skipped)
    project_id, project_name, checkout, root = await _project_of(store, session, path)
    if not any(turn.role == "developer" for turn in parsed.turns):
        report.status = "nothing_new"
        if not dry_run:
            await _advance(store, report, project_id, parsed.last_uuid, None, size=size)
        return report
    text = await anyio.to_thread.run_sync(lambda: redact(render(parsed.turns)))
    # the developer's own words, the only evidence for an explicit or global entry (apply.ground)
    said = [t.text for t in parsed.turns if t.role == "developer" and not t.sidechain]
    user_text = await anyio.to_thread.run_sync(lambda: redact("\n".join(said)))
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
    assert caller is not None
    report.backend = caller.name
    calls = len(messages) + (1 if len(messages) > 1 else 0)
    if caller.name == backend.CLAUDE_CODE:
        over = await _over_cap(store, report.session_id, settings, calls, messages)
        if over is not None:
            report.status = "deferred"
            report.error = f"deferred: {over}; the session is extracted once the cap allows"
            say(f"extraction of {report.session_id} {report.error}")
            await _advance(store, report, project_id, None, report.error)
            return report
    usage = llm.Usage()
    model = str(settings["llm.model"])
    try:
        output = await _call_all(
            caller, model, messages, context, usage, min(concurrency, caller.concurrency)
        )
    except Exception as exc:  # the backend's errors after its retries, or a task group of them
        report.status = "failed"
        report.error = _describe(exc)
        _count(report, usage)
        say(f"extraction failed ({caller.name}), the session stays queued: {report.error}")
        await _advance(store, report, project_id, None, report.error, usage)
        return report
    _count(report, usage)
    if not isinstance(output, dict):  # no tool call, or not an object: try again next time
        report.status = "failed"
        report.error = "the model returned no extraction (no tool call with an object)"
        say(report.error)
        await _advance(store, report, project_id, None, report.error, usage)
        return report
    result = apply.parse(output)
    report.dropped, report.entities_dropped = result.dropped, result.entities_dropped
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
            root=root,
            user_text=user_text,
        )
        await tx.run(
            sessions.advance(
                report.session_id,
                project_id,
                path,
                parsed.last_uuid,
                applied.written,
                usage.cost_usd,
                backend=caller.name,
                size=size,
            )
        )
        status = "flush_ok" if result.flush_ok else "extracted"
        await tx.run(_ledger_row(report, project_id, status, usage, None))
    report.status = status
    report.written = applied.added
    report.reinforced, report.duplicates = applied.reinforced, applied.duplicates
    report.enriched, report.superseded = applied.enriched, applied.superseded
    report.linked = applied.linked
    report.closed_handover = applied.closed_handover
    report.unknown_supersedes = applied.unknown_supersedes
    for unknown in applied.unknown_supersedes:
        say(f"the model named an unknown record to supersede ({unknown}); added plainly")
    return report


async def _call_all(
    caller: Caller,
    model: str,
    messages: list[str],
    context: str,
    usage: llm.Usage,
    concurrency: int,
) -> Any:
    if len(messages) == 1:
        return (await caller(model, messages[0], usage)).output
    results: list[Any] = [None] * len(messages)
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def one(index: int) -> None:
        async with limiter:
            results[index] = (await caller(model, messages[index], usage)).output

    async with anyio.create_task_group() as group:
        for index in range(len(messages)):
            group.start_soon(one, index)
    merged = orjson.dumps(
        [{"part": i + 1, "entries": r} for i, r in enumerate(results) if isinstance(r, dict)]
    ).decode()
    synthesis = f"{context}\n\n{prompt.SYNTHESIS_NOTE}\n\n{merged}"
    return (await caller(model, synthesis, usage)).output


#: Tokens one claude-code call adds to its prompt: the schema, our system prompt, the CLI's own
#: ~350, and the answer.
CALL_OVERHEAD_TOKENS = llm.CACHE_PREFIX + 350 + 1_000


async def _over_cap(
    store: Store, session_id: str, settings: dict[str, Any], calls: int, messages: list[str]
) -> str | None:
    """Which daily cap the run would break (None: none). A run larger than a whole cap is let
    through when nothing was spent against that cap today, so no session waits for ever."""
    spent_calls, spent_tokens, spent_session = await store.run(
        sessions.spent_today(backend.CLAUDE_CODE, session_id)
    )
    tokens = sum(estimate_tokens(m) for m in messages) + calls * CALL_OVERHEAD_TOKENS
    caps = (
        ("extraction.daily_calls", spent_calls, calls, "calls today"),
        ("extraction.daily_tokens", spent_tokens, tokens, "tokens today"),
        ("extraction.session_calls", spent_session, calls, "calls today for this session"),
    )
    for key, spent, wanted, what in caps:
        cap = int(settings[key])
        if spent + wanted > cap and spent > 0:
            return f"{key} is {cap} {what} ({spent} spent, this run needs ~{wanted})"
    return None


def _count(report: Report, usage: llm.Usage) -> None:
    report.calls, report.cost_usd = usage.calls, usage.cost_usd
    report.usage = usage.counts()


def _ledger_row(
    report: Report, project_id: str, status: str, usage: llm.Usage | None, error: str | None
) -> Any:
    counts = usage.counts() if usage is not None else {}
    cost = usage.cost_usd if usage is not None else 0.0
    return sessions.spend(
        report.session_id, project_id, report.backend or "none", status, counts, cost, error
    )


def find_transcript(session_id: str) -> str | None:
    """``~/.claude/projects/*/<session_id>.jsonl`` (``CLAUDE_CONFIG_DIR`` moves the root)."""
    root = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    pattern = os.path.join(glob.escape(root), "projects", "*", f"{glob.escape(session_id)}.jsonl")
    found = sorted(glob.glob(pattern))
    return found[0] if found else None


async def _project_of(
    store: Store, session: dict[str, Any] | None, path: str
) -> tuple[str, str, str | None, str | None]:
    """(project id, name, checkout, root): the checkout keys the session's handover, the root
    makes the files the model names relative, as capture stores them (None: unknown)."""
    from agentctx.core.project import identify

    cwd = (session or {}).get("cwd") or await anyio.to_thread.run_sync(_cwd_in_transcript, path)
    identity = identify(cwd or os.getcwd())
    project_id = str((session or {}).get("project_id") or identity.project_id)
    # A cwd of another project says nothing about where in this one the session ran.
    if identity.project_id != project_id:
        return project_id, identity.name, None, None
    return project_id, identity.name, identity.checkout, identity.root


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
    usage: llm.Usage | None = None,
    *,
    size: int = 0,
) -> None:
    """Count a run that wrote no records: its new offset (None: unchanged), spend and error; a run
    that made calls or was deferred also gets its row in the extraction ledger."""
    cost = usage.cost_usd if usage is not None else 0.0
    async with store.transaction() as tx:
        await tx.run(
            sessions.advance(
                report.session_id, project_id, report.transcript, last_uuid, 0, cost, error,
                backend=report.backend, size=size,
            )
        )  # fmt: skip
        if report.backend is not None and (report.status == "deferred" or usage is not None):
            await tx.run(_ledger_row(report, project_id, report.status, usage, error))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"[:500]
