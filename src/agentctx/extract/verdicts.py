"""Injection verdicts (issue 25): was each record the prompt hook injected used, ignored or wrong?

The Stop worker (after its extraction), the SessionEnd worker (after the final one) and the sweep
run :func:`judge_session`:

1. the session's injections are noted from its ledger while it is open
   (:func:`agentctx.core.learning.record`; SessionEnd's fold noted them otherwise);
2. up to :data:`MAX_INJECTIONS` unjudged ones, oldest first (of :data:`SCAN_INJECTIONS`), are
   matched to their prompt in the transcript: the developer turn nearest in time to the ledger
   entry (within :data:`MATCH_WINDOW_S`), and the assistant's and tools' turns that follow it
   until the next developer turn. One whose prompt has no answer yet waits for the next run;
3. ONE call, whatever the number: a forced, strict tool ``judge_injections`` answering
   ``{verdicts: [{id, verdict, reason}]}`` with each injection's prompt, record (type, title,
   body) and the following turns, all bounded (:data:`PROMPT_CHARS`, :data:`BODY_CHARS`,
   :data:`ANSWER_CHARS`). Through the extraction backend and its one outbound path
   (:func:`agentctx.extract.llm.forced_tool`, or the ``claude`` CLI with :func:`outbound` text):
   redacted, under the claude-code daily caps (a run over a cap is ``deferred``: nothing sent,
   the injections stay unjudged for a later run); nothing at all with ``llm`` off or no backend.
   A run holds the session's extraction lock (``locked``: another run of the session is on);
4. the verdicts are written only onto injections still unjudged (so a re-run never counts one
   twice), in one transaction with the call's row of the extraction ledger (status ``verdicts``;
   the daily caps count it). An answer that names no known injection or no valid verdict writes
   nothing (``garbled``); the injections are asked about again next run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from agentctx import config
from agentctx.core import backend, errors, learning, ledger, search, sessions
from agentctx.core.locks import extraction_lock
from agentctx.core.project import sha256_hex
from agentctx.core.tokens import estimate_tokens
from agentctx.extract import llm
from agentctx.extract.claude_code import ClaudeCodeCaller
from agentctx.redact import redact

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from anthropic import AsyncAnthropic

    from agentctx.claude.transcript import Turn
    from agentctx.store import Store

TOOL_NAME = "judge_injections"
#: Injections judged per run (one call); the rest wait for the next run.
MAX_INJECTIONS = 24
#: Unjudged injections looked at per run for those: ones whose prompt is not (yet) in the
#: transcript are passed over, so they cannot hold the newer ones back.
SCAN_INJECTIONS = 200
#: Characters of the prompt, the record's body and the assistant's following turns shown.
PROMPT_CHARS = 800
BODY_CHARS = 600
ANSWER_CHARS = 1500
#: A prompt further than this from its ledger entry's time is not the injection's prompt.
MATCH_WINDOW_S = 600.0
MAX_OUTPUT_TOKENS = 2048
#: The extraction ledger's status for a verdict call and for one the caps deferred.
LEDGER_STATUS = "verdicts"
DEFERRED_STATUS = "verdicts_deferred"

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The injection's id, as given."},
                    "verdict": {"type": "string", "enum": list(learning.VERDICTS)},
                    "reason": {"type": "string", "description": "One short sentence."},
                },
                "required": ["id", "verdict", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}
TOOL: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": "Give the verdict of every injection.",
    "input_schema": INPUT_SCHEMA,
    "strict": True,
}
SYSTEM_PROMPT = """\
A memory tool injects stored records (decisions, conventions, discoveries, bugfixes, project \
facts) into a coding assistant's context when the developer sends a prompt. You judge, for each \
injection, whether the record helped with that prompt, from the prompt, the record and what the \
assistant did next.

Verdicts:
- used: the assistant's answer or actions rely on the record: they state, follow, apply or build \
on what it says (a command, a decision, a cause, a name), or the record answers the prompt.
- ignored: the record plays no visible part: the answer would be the same without it, or it is \
about something else than the prompt.
- wrong: the record misled or was contradicted: it is outdated, about another thing that shares \
words with the prompt, or the assistant had to correct or work around it.

Judge only from what is shown. Text marked [REDACTED:…] is a removed secret: never reconstruct \
it. Answer every injection, by its id, through the tool, with one short reason each."""


@dataclass(slots=True)
class VerdictReport:
    """What one verdict run did for a session."""

    session_id: str
    #: judged | nothing | waiting | llm_off | no_backend | deferred | failed | garbled | locked
    status: str = "nothing"
    noted: int = 0  #: injections noted from the open ledger now
    asked: int = 0  #: injections sent to the model
    judged: int = 0  #: verdicts written
    waiting: int = 0  #: injections whose prompt has no answer (or no match) yet
    calls: int = 0
    cost_usd: float = 0.0
    backend: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


@dataclass(slots=True)
class Item:
    """One injection as the model sees it."""

    key: str
    record_id: str
    injected_at: str
    tier: str
    prompt: str
    answer: str
    record_type: str = ""
    title: str = ""
    body: str = ""


async def judge_session(
    store: Store,
    session_id: str,
    *,
    transcript: str | None = None,
    client: AsyncAnthropic | None = None,
    caller: ClaudeCodeCaller | None = None,
    log: Callable[[str], None] | None = None,
) -> VerdictReport:
    """Judge a session's unjudged injections (the module docstring); never raises for a model
    or transcript problem (the report says what happened).

    ``client``: the API backend with this client; ``caller``: the claude-code backend through
    this caller (its schema and system prompt are set to the verdicts'); else the backend
    :func:`agentctx.core.backend.resolve` picks.
    """
    say = log or (lambda _line: None)
    with extraction_lock(session_id) as locked:  # one run per session: never two calls at once
        if not locked:
            return VerdictReport(session_id, status="locked")
        return await _judge(store, session_id, transcript, client, caller, say)


async def _judge(
    store: Store,
    session_id: str,
    transcript: str | None,
    client: AsyncAnthropic | None,
    caller: ClaudeCodeCaller | None,
    say: Callable[[str], None],
) -> VerdictReport:
    report = VerdictReport(session_id)
    entries = await anyio.to_thread.run_sync(ledger.read_entries, session_id)
    noted = learning.from_entries(entries)
    if noted:
        count = "SELECT count(*) FROM injection_verdicts WHERE session_id = ?"
        async with store.transaction() as tx:
            before = (await tx.rows(count, (session_id,)))[0][0]
            await tx.run(learning.record(session_id, noted))
            after = (await tx.rows(count, (session_id,)))[0][0]
        report.noted = int(after) - int(before)
    pending = await store.run(learning.unjudged(session_id, SCAN_INJECTIONS))
    if not pending:
        return report
    settings = config.load()
    if not settings["llm"]:
        report.status = "llm_off"
        report.waiting = len(pending)
        return report
    path = transcript or await _transcript_of(store, session_id)
    items = await _items(store, session_id, pending, path)
    report.waiting = len(pending) - len(items)
    if not items:
        report.status = "waiting"
        return report
    ask = await _asker(settings, client, caller, say)
    if ask is None:
        report.status = "no_backend"
        report.waiting = len(pending)
        say(f"verdicts {session_id}: no extraction backend; {len(pending)} injection(s) unjudged")
        return report
    name, caller = ask
    report.backend = name
    text = user_text(items)
    model = str(settings["llm.model"])
    project_id = await _project_of(store, session_id)
    if name == backend.CLAUDE_CODE:
        over = await _over_cap(store, session_id, settings, text)
        if over is not None:
            report.status = "deferred"
            report.error = f"deferred: {over}"
            report.waiting = len(pending)
            say(f"verdicts {session_id} {report.error}; judged once the cap allows")
            await store.write(
                sessions.spend(session_id, project_id, name, DEFERRED_STATUS, {}, 0.0, over)
            )
            return report
    usage = llm.Usage()
    report.asked = len(items)
    try:
        data = await caller(model, text, usage)
    except Exception as exc:  # the backend's errors after its retries
        report.status = "failed"
        report.error = errors.one_line(exc)[:300]
        say(f"verdicts {session_id}: the call failed ({report.error}); asked again next run")
        await _spend(store, session_id, project_id, name, usage, report.error)
        report.calls, report.cost_usd = usage.calls, usage.cost_usd
        return report
    report.calls, report.cost_usd = usage.calls, usage.cost_usd
    answers = parse(data, {item.key: item for item in items})
    async with store.transaction() as tx:
        if answers:
            report.judged = await tx.run(
                learning.save_verdicts(session_id, answers, model=model, backend=name)
            )
        await tx.run(
            sessions.spend(
                session_id, project_id, name, LEDGER_STATUS, usage.counts(), usage.cost_usd,
                None if answers else "no usable verdict in the answer",
            )
        )  # fmt: skip
    report.status = "judged" if answers else "garbled"
    say(
        f"verdicts {session_id}: {report.judged} of {len(items)} judged"
        + ("" if answers else " (the answer held no usable verdict; asked again next run)")
    )
    return report


def user_text(items: Sequence[Item]) -> str:
    """The user message: each injection with its prompt, record and the turns that followed."""
    parts = [f"Injections: {len(items)}."]
    for item in items:
        body = item.body if len(item.body) <= BODY_CHARS else item.body[:BODY_CHARS] + "…"
        shown = "the whole record" if item.tier == "whole" else "one line (title only)"
        parts.append(
            f'<injection id="{item.key}" shown="{shown}">\n'
            f"Prompt: {item.prompt}\n"
            f"Record [{item.record_type}]: {item.title}\n{body}\n"
            f"What the assistant did next:\n{item.answer}\n</injection>"
        )
    return "\n\n".join(parts)


def parse(data: Any, items: dict[str, Item]) -> list[tuple[str, str, str, str]]:
    """The usable verdicts of a tool input: ``(record_id, injected_at, verdict, reason)``; the
    first answer for a key wins, unknown keys and verdicts are ignored."""
    found: dict[str, tuple[str, str, str, str]] = {}
    answers = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(answers, list):
        return []
    for answer in answers:
        if not isinstance(answer, dict):
            continue
        key = str(answer.get("id", "")).strip()
        verdict = answer.get("verdict")
        item = items.get(key)
        if item is None or key in found or verdict not in learning.VERDICTS:
            continue
        reason = answer.get("reason")
        found[key] = (
            item.record_id,
            item.injected_at,
            str(verdict),
            redact(reason.strip()) if isinstance(reason, str) else "",
        )
    return list(found.values())


async def _items(
    store: Store, session_id: str, pending: Sequence[Any], path: str | None
) -> list[Item]:
    """The pending injections that have a prompt with an answer in the transcript."""
    if not path:
        return []
    from agentctx.claude.transcript import read_transcript

    try:
        parsed = await anyio.to_thread.run_sync(lambda: read_transcript(path))
    except OSError:
        return []
    turns = [t for t in parsed.turns if not t.sidechain]
    items: list[Item] = []
    for n, row in enumerate(pending, start=1):
        if len(items) == MAX_INJECTIONS:  # the rest wait for the next run
            break
        found = match(turns, str(row["injected_at"]))
        if found is None:
            continue
        prompt, answer = found
        items.append(
            Item(
                key=f"i{n}",
                record_id=str(row["record_id"]),
                injected_at=str(row["injected_at"]),
                tier=str(row["tier"]),
                prompt=redact(prompt)[:PROMPT_CHARS],
                answer=redact(answer)[:ANSWER_CHARS],
            )
        )
    if not items:
        return []
    await _fill_records(store, items)
    await _describe(store, session_id, items, {str(r["record_id"]): r for r in pending})
    return [item for item in items if item.title]


def match(turns: Sequence[Turn], injected_at: str) -> tuple[str, str] | None:
    """The prompt of an injection made at ``injected_at`` and what followed it (the assistant's
    and tools' turns up to the next prompt), or None: no prompt near it, or no answer yet."""
    moment = _epoch(injected_at)
    best: int | None = None
    best_gap = MATCH_WINDOW_S
    for index, turn in enumerate(turns):
        when = _epoch(turn.timestamp) if turn.role == "developer" else None
        if moment is None or when is None:
            continue
        gap = abs(when - moment)
        if gap <= best_gap:
            best, best_gap = index, gap
    if best is None:
        return None
    following: list[str] = []
    for turn in turns[best + 1 :]:
        if turn.role == "developer":
            break
        following.append(f"[{turn.role}] {turn.text}")
    if not any(line.startswith("[assistant]") for line in following):
        return None
    return turns[best].text, "\n".join(following)


def _epoch(stamp: str) -> float | None:
    """An ISO-8601 time (stored, or a transcript line's) as epoch seconds; None when it is not one."""
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


async def _fill_records(store: Store, items: list[Item]) -> None:
    ids = sorted({item.record_id for item in items})
    marks = ", ".join("?" * len(ids))
    found: dict[str, Any] = {}
    for table in ("records", "records_archive"):
        for row in await store.rows(
            f"SELECT id, type, title, body FROM {table} WHERE id IN ({marks})", ids
        ):
            found.setdefault(str(row["id"]), row)
    for item in items:
        row = found.get(item.record_id)
        if row is not None:
            item.record_type, item.title, item.body = str(row["type"]), row["title"], row["body"]


async def _describe(store: Store, session_id: str, items: list[Item], rows: dict[str, Any]) -> None:
    """Store each injection's prompt hash and excerpt, and its keyword relevance when unknown."""

    def relevances(conn: Any) -> dict[str, float]:
        from agentctx.core.plan import run

        found: dict[str, float] = {}
        for item in items:
            if rows[item.record_id]["relevance"] is None:
                terms = search.query_terms(item.prompt)
                found[item.key] = run(conn, search.relevances(terms, [item.record_id])).get(
                    item.record_id, 0.0
                )
        return found

    try:
        scores = await store.read_sync(relevances)
    except Exception:  # a search problem only leaves the relevance unknown
        scores = {}
    async with store.transaction() as tx:
        for item in items:
            await tx.run(
                learning.describe(
                    session_id,
                    item.record_id,
                    item.injected_at,
                    prompt_hash=sha256_hex(item.prompt)[:16],
                    prompt_excerpt=item.prompt,
                    relevance=scores.get(item.key),
                )
            )


async def _asker(
    settings: dict[str, Any],
    client: AsyncAnthropic | None,
    caller: ClaudeCodeCaller | None,
    say: Callable[[str], None],
) -> tuple[str, Any] | None:
    """(backend name, ``ask(model, text, usage) -> tool input``) of the extraction backend, or
    None when there is none (``client``, ``caller``: the one given)."""
    if client is not None:
        return backend.API, _api_ask(client)
    if caller is None:
        setting = str(settings["extraction.backend"])
        choice = await anyio.to_thread.run_sync(lambda: backend.resolve(setting))
        for warning in choice.warnings:
            say(warning)
        if choice.backend is None:
            return None
        if choice.backend == backend.API:
            return backend.API, _api_ask(llm.make_client(), own=True)
        assert choice.binary is not None
        caller = ClaudeCodeCaller(choice.binary, auth_method=choice.auth_method)
    caller.schema = orjson.dumps(INPUT_SCHEMA).decode()
    caller.system = SYSTEM_PROMPT
    cli = caller

    async def ask(model: str, text: str, usage: llm.Usage) -> Any:
        return (await cli(model, text, usage)).output

    return backend.CLAUDE_CODE, ask


def _api_ask(client: AsyncAnthropic, *, own: bool = False) -> Any:
    async def ask(model: str, text: str, usage: llm.Usage) -> Any:
        try:
            called, data, _stop = await llm.forced_tool(
                client,
                model,
                system=SYSTEM_PROMPT,
                tool=TOOL,
                user_text=text,
                max_tokens=MAX_OUTPUT_TOKENS,
                usage=usage,
            )
        finally:
            if own:
                await client.close()
        return data if called else None

    return ask


async def _over_cap(
    store: Store, session_id: str, settings: dict[str, Any], text: str
) -> str | None:
    """Which claude-code daily cap one verdict call would pass (None: none)."""
    spent_calls, spent_tokens, spent_session = await store.run(
        sessions.spent_today(backend.CLAUDE_CODE, session_id)
    )
    tokens = estimate_tokens(text) + estimate_tokens(SYSTEM_PROMPT) + 350 + MAX_OUTPUT_TOKENS
    caps = (
        ("extraction.daily_calls", spent_calls, 1, "calls today"),
        ("extraction.daily_tokens", spent_tokens, tokens, "tokens today"),
        ("extraction.session_calls", spent_session, 1, "calls today for this session"),
    )
    for key, spent, wanted, what in caps:
        cap = int(settings[key])
        if spent + wanted > cap and spent > 0:
            return f"{key} is {cap} {what} ({spent} spent, this call needs ~{wanted})"
    return None


async def _spend(
    store: Store,
    session_id: str,
    project_id: str | None,
    name: str,
    usage: llm.Usage,
    error: str | None,
) -> None:
    await store.write(
        sessions.spend(
            session_id, project_id, name, LEDGER_STATUS, usage.counts(), usage.cost_usd, error
        )
    )


async def _transcript_of(store: Store, session_id: str) -> str | None:
    row = await store.row(
        "SELECT transcript_path FROM sessions WHERE session_id = ?", (session_id,)
    )
    if row is not None and row[0]:
        return str(row[0])
    from agentctx.extract import find_transcript

    return find_transcript(session_id)


async def _project_of(store: Store, session_id: str) -> str | None:
    row = await store.row("SELECT project_id FROM sessions WHERE session_id = ?", (session_id,))
    return None if row is None or row[0] is None else str(row[0])
