"""The own eval: scripted sessions of a seeded project through the real pipeline, scored on a key.

Usage, from the repository root (``python3 -m nox -s eval`` installs what it needs and runs it)::

    python benchmarks/own_eval/run.py [--out-dir benchmarks/results] [--sessions N]
    AGENTCTX_EVAL_LIVE=1 ANTHROPIC_API_KEY=sk-ant-… python benchmarks/own_eval/run.py

**Offline (default).** The model answers are the hand-written stand-ins of ``answers.json``, served by
``tests/messages_server.py`` (a real HTTP server on 127.0.0.1) to the real ``anthropic`` client,
matched by the SHA-256 of the transcript each request carries (:mod:`replay`): the run is offline
and deterministic. Writes ``own_eval.md`` and ``own_eval.json``.

**Live** (``AGENTCTX_EVAL_LIVE=1`` and ``ANTHROPIC_API_KEY``): the same run against the real API
(``ANTHROPIC_BASE_URL`` if set) with the configured model (``llm.model``, Claude Haiku 4.5 by
default), merge checks included. Writes ``own_eval_live.md``/``.json`` and
``own_eval_live.answers.json``: what the model answered, in the shape of ``answers.json``, so it can
be replayed offline (``--answers``).

**Pipeline**, in a temporary ``AGENTCTX_HOME`` with the seeded repository written to
``<tmp>/shortlink`` (``seed_repo.txt``) and the transcripts (``transcripts/``, written by
:mod:`author` from ``sessions/``) copied beside it with their ``cwd`` moved there. For each session
in order: (1) what agentctx injects at its start: the SessionStart hook's digest and the
UserPromptSubmit hook for each prompt the developer typed in it (the hook functions of
``agentctx.hooks``, with the session's ledger, so a record is shown once per session); (2) the
questions labelled as asked at that point (``questions.json``); (3) ``extract_session`` on the
transcript; (4) ``consolidate`` of the project (embeddings from the offline all-MiniLM-L6-v2 of
``benchmarks/minilm.py``, merge checks through the same client, no time box); (5) the session's
records are matched to the key (``key.json``; rule in :mod:`scoring`). After the last session the
remaining questions are asked and the store is audited.

**Measured:** extraction precision and recall; supersession correctness; stale records in the
store; recall@3 of the UserPromptSubmit hook (what it injects: at most 3 records) and of
``ctx_search`` (:func:`agentctx.retrieval.hybrid.hybrid_search`, hybrid and keyword-only, with the server's
relevance floor), and whether the answer was in context at all (digest or hook); injected tokens
per session (agentctx's conservative estimate, :mod:`agentctx.core.tokens`). The hook and hybrid
``ctx_search`` are also asked without the relevance floor (as before it existed), each prompt of a
session is also answered without it (what the floor removed), and every question's unfloored
candidates go through the floor rules of :mod:`own_eval.floors` (the calibration tables). Baselines: no memory (nothing injected, recall 0) and recency
(the N newest current records injected at each session start, formatted as the hook formats a
record; N is the largest whose mean cost per session fits agentctx's mean).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import tempfile
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

# appended, not prepended: importing this module (the tests do) must not shadow anything
sys.path.append(str(Path(__file__).resolve().parents[2]))  # tests.messages_server
sys.path.append(str(Path(__file__).resolve().parents[1]))  # minilm, own_eval

from tests.messages_server import MessagesServer

import minilm
from agentctx import config, workers
from agentctx.claude.transcript import read_transcript
from agentctx.consolidate import consolidate
from agentctx.core import clock, ledger, search
from agentctx.core import inject as injection
from agentctx.core.connect import open_db
from agentctx.core.project import identify
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.core.tokens import estimate_tokens
from agentctx.embeddings import models, vecstore
from agentctx.extract import extract_session, llm
from agentctx.hooks import lifecycle, session_start
from agentctx.hooks import prompt as prompt_hook
from agentctx.hooks.runner import HookContext
from agentctx.records import Record
from agentctx.retrieval import digest, hybrid
from agentctx.store import SearchQuery, Store
from own_eval import author, floors, replay, report, scoring

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Sequence

    from anthropic import AsyncAnthropic

    from agentctx.core.shapes import RecordRow

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "own_eval"
K = 3
LIVE_ENV = "AGENTCTX_EVAL_LIVE"
STAND_IN_KEY = "recorded-stand-in"
ID_EPOCH_MS = 1_772_323_200_000  # 2026-03-01, the month of the scripted sessions
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@dataclass(slots=True)
class Options:
    """What to run."""

    live: bool = False
    sessions: int | None = None  #: only the first N sessions (and the questions asked by then)
    model_dir: Path | None = None  #: an assembled MiniLM folder (default: assembled in the tmp dir)
    answers: Path = HERE / "answers.json"


@dataclass(slots=True)
class Asked:
    """One question's answers from every retriever (record ids, best first)."""

    question: scoring.Question
    hook: list[str]
    hook_tokens: int
    hybrid: list[str]
    keyword: list[str]
    digest: list[str]
    newest: list[str]
    answers: dict[str, frozenset[str]]
    hook_unfloored: list[str] = field(default_factory=list)
    hybrid_unfloored: list[str] = field(default_factory=list)
    hybrid_strong: list[str] = field(default_factory=list)
    hook_candidates: list[floors.HookCandidate] = field(default_factory=list)
    search_candidates: list[floors.SearchCandidate] = field(default_factory=list)


@dataclass(slots=True)
class Run:
    """Everything a run observed, before scoring."""

    key: scoring.Key
    scripts: list[author.Script]
    sessions: list[dict[str, Any]] = field(default_factory=list)
    matchings: list[scoring.Matching] = field(default_factory=list)
    assigned: dict[str, str] = field(default_factory=dict)  #: record id -> key item id
    asked: list[Asked] = field(default_factory=list)
    injected: list[dict[str, int]] = field(default_factory=list)
    #: prompts whose injection the relevance floor changed: session, prompt, kept and removed ids
    floor_changes: list[dict[str, Any]] = field(default_factory=list)
    recency_costs: list[list[int]] = field(default_factory=list)
    records: dict[str, Record] = field(default_factory=dict)  #: every record at the end
    session_of: dict[str, int] = field(default_factory=dict)  #: record id -> scripted session
    final_answers: dict[str, frozenset[str]] = field(default_factory=dict)
    #: (duplicate record id, record of the item it repeats, cosine of their stored vectors)
    duplicate_similarity: list[tuple[str, str, float]] = field(default_factory=list)
    final_digest: str = ""  #: the SessionStart digest after the last session, ids masked


def write_repo(folder: Path) -> Path:
    """The seeded repository (``seed_repo.txt``) written into ``folder``."""
    text = (HERE / "seed_repo.txt").read_text()
    current: Path | None = None
    lines: list[str] = []
    for line in [*text.splitlines(), "=== (end) ==="]:
        if line.startswith("=== ") and line.endswith(" ==="):
            if current is not None:
                current.parent.mkdir(parents=True, exist_ok=True)
                current.write_text("\n".join(lines).strip("\n") + ("\n" if lines else ""))
            name = line[4:-4].strip()
            current = None if name == "(end)" else folder / name
            lines = []
        elif current is not None:
            lines.append(line)
    return folder


def place_transcripts(scripts: list[author.Script], folder: Path, cwd: Path) -> dict[str, Path]:
    """Each transcript copied into ``folder`` with every line's ``cwd`` moved to ``cwd``."""
    folder.mkdir(parents=True, exist_ok=True)
    placed = {}
    for script in scripts:
        source = author.transcript_path(script)
        out = []
        for raw in source.read_text().splitlines():
            line = json.loads(raw)
            if "cwd" in line:
                line["cwd"] = str(cwd)
            out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
        target = folder / source.name
        target.write_text("\n".join(out) + "\n")
        placed[script.session_id] = target
    return placed


@contextmanager
def counted_ids() -> Iterator[None]:
    """Record and edge ids from a counter instead of the clock and ``os.urandom``, for the run.

    ULID-shaped and in creation order like the real ones, so every ordering the library breaks by id
    (RRF ties, equal scores) and the token count of the ids that injected text shows repeat from
    run to run; nothing else changes.
    """
    count = itertools.count(1)

    def ulid() -> str:
        n = next(count)
        noise = int.from_bytes(hashlib.sha256(n.to_bytes(8, "big")).digest()[:10], "big")
        value = ((ID_EPOCH_MS + n) << 80) | noise
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))

    real = clock.ulid
    clock.ulid = ulid
    try:
        yield
    finally:
        clock.ulid = real


@contextmanager
def held_workers() -> Iterator[list[list[str]]]:
    """The workers the hooks would start detached, held in a list instead (their ``agentctx`` args).

    A detached worker would race the run: its writes could land in the next session or while the
    temporary home is removed. :func:`pipeline` runs the held ones in-process (:func:`run_held`)
    before the session goes on, as a worker started at a session's start finishes during it.
    """
    held: list[list[str]] = []
    real = lifecycle.spawn_detached

    def hold(argv: Sequence[str], log_path: str) -> None:
        args = list(argv)
        held.append(args[args.index("agentctx") + 1 :] if "agentctx" in args else args)

    lifecycle.spawn_detached = hold
    try:
        yield held
    finally:
        lifecycle.spawn_detached = real


async def run_held(held: list[list[str]]) -> None:
    """The held workers, in order, in-process (with the run's counted ids); an unknown one stops the run."""
    while held:
        args = held.pop(0)
        if args[:2] == ["worker", "profile"] and args[2] == "--cwd":
            await workers.profile(args[3])
        else:
            raise SystemExit(f"the eval does not know how to run the worker {args}")


@asynccontextmanager
async def model_client(
    options: Options, scripts: list[author.Script]
) -> AsyncIterator[tuple[AsyncAnthropic, replay.Replay | None, replay.Capture | None]]:
    """The client extraction and consolidation use: the recorded server's, or the live API's."""
    from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

    if options.live:
        if not os.environ.get("ANTHROPIC_API_KEY", "").strip():
            raise SystemExit(f"{LIVE_ENV}=1 needs ANTHROPIC_API_KEY")
        answers = replay.Answers.load(options.answers)
        capture = replay.Capture({a.anchor: a.script for a in answers.extractions})
        http = DefaultAsyncHttpxClient(event_hooks={"response": [capture]})
        async with AsyncAnthropic(max_retries=llm.MAX_RETRIES, http_client=http) as client:
            yield client, None, capture
        return
    script = replay.Replay(replay.Answers.load(options.answers))
    os.environ["ANTHROPIC_API_KEY"] = STAND_IN_KEY  # extraction runs only when a key is set
    with MessagesServer(script) as server:
        async with AsyncAnthropic(
            base_url=server.url, api_key=STAND_IN_KEY, max_retries=0
        ) as client:
            yield client, script, None


async def evaluate(options: Options) -> tuple[Run, dict[str, Any]]:
    """Run the eval in a temporary home; the observations and the run's metadata."""
    key = scoring.load_key(HERE / "key.json")
    scripts = author.load_scripts()[: options.sessions]
    saved = {name: os.environ.get(name) for name in ("AGENTCTX_HOME", "ANTHROPIC_API_KEY")}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentctx-own-eval-") as tmp:
        base = Path(tmp)
        os.environ["AGENTCTX_HOME"] = str(base / "home")
        try:
            project_dir = write_repo(base / key.project)
            transcripts = place_transcripts(scripts, base / "transcripts", project_dir)
            model_dir = options.model_dir or minilm.assemble_int8(base / "minilm")
            settings = {**config.load(), **minilm.settings(model_dir)}
            with counted_ids(), held_workers() as held:
                async with model_client(options, scripts) as (client, served, capture):
                    run = await pipeline(
                        key, scripts, transcripts, project_dir, settings, client, held
                    )
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    meta: dict[str, Any] = {
        "mode": "live" if options.live else "recorded",
        "model": str(settings.get("llm.model")),
        "seconds": round(time.monotonic() - started, 1),
        "sessions": len(scripts),
    }
    if served is not None:
        meta["served"] = scoring.as_dict(served.served)
        meta["planted"] = {a.script: list(a.mistakes) for a in served.answers.extractions}
    if capture is not None:
        meta["captured"] = {"extractions": capture.extractions, "merge_checks": capture.merges}
    return run, meta


async def pipeline(
    key: scoring.Key,
    scripts: list[author.Script],
    transcripts: dict[str, Path],
    project_dir: Path,
    settings: dict[str, Any],
    client: AsyncAnthropic,
    held: list[list[str]],
) -> Run:
    """The sessions in order through hooks, extraction and consolidation (module docstring)."""
    questions = scoring.load_questions(HERE / "questions.json")
    embedder = await models.load_model_async(settings)
    if embedder is None:
        raise SystemExit("the offline MiniLM model did not load: see benchmarks/minilm.py")
    identity = identify(str(project_dir))
    project_id = identity.project_id
    run = Run(key, scripts)
    items = key.by_id()
    async with await Store.open() as store:
        await store.touch_project(identity)
        for n, script in enumerate(scripts, start=1):
            path = transcripts[script.session_id]
            totals, changes = inject(script.session_id, path, project_dir)
            run.injected.append(totals)
            run.floor_changes += [{"session": n, **change} for change in changes]
            run.recency_costs.append(await newest_costs(store, project_id))
            for question in questions:
                if question.after == n - 1:
                    run.asked.append(await ask(store, run, question, project_dir, embedder))
            await run_held(held)  # the session start's workers end during the session
            extracted = await extract_session(
                store, script.session_id, transcript=str(path), client=client
            )
            produced = await produced_by(store, script.session_id, n)
            earlier = [item for item in key.items if item.session < n]
            matching = scoring.match(produced, key.of_session(n), earlier)
            run.matchings.append(matching)
            run.assigned.update(matching.assigned())
            run.session_of.update((p.id, n) for p in produced)
            reports = await consolidate(
                store, project_id, settings=settings, client=client, time_box=None
            )
            audit = await audit_store(store, run, project_id, n, items)
            run.sessions.append(
                {
                    "n": n,
                    "script": script.name,
                    "style": script.header.get("style", ""),
                    "extraction": {
                        "status": extracted.status,
                        "tier": extracted.tier,
                        "calls": extracted.calls,
                        "written": extracted.written,
                        "superseded": extracted.superseded,
                        "reinforced": extracted.reinforced,
                        "error": extracted.error,
                    },
                    "matching": scoring.as_dict(matching),
                    "consolidation": [
                        {
                            "project": r.project_id[:12],
                            "status": r.status,
                            "mode": r.mode,
                            "dedupe": (r.steps.get("dedupe") or {}).get("result"),
                            "errors": r.errors,
                        }
                        for r in reports
                    ],
                    "store": audit,
                }
            )
        last = len(scripts)
        for question in questions:
            if question.after == last:
                run.asked.append(await ask(store, run, question, project_dir, embedder))
        for record in await all_records(store, project_id, include_superseded=True):
            run.records[record.id] = record
        current = [r for r in run.records.values() if r.superseded_at is None]
        run.duplicate_similarity = await duplicate_similarity(store, run)
        run.final_digest = next_digest(project_dir)
        run.final_answers = scoring.answers_of(
            [as_produced(r, run.session_of.get(r.id, 0)) for r in current],
            run.assigned,
            [item for item in key.items if item.session <= last],
        )
    return run


# -- observing ------------------------------------------------------------------------------------


def as_produced(record: Record, session: int) -> scoring.Produced:
    """A record as the scoring sees it."""
    return scoring.Produced(
        id=record.id,
        session=session,
        type=str(record.type),
        title=record.title,
        text=f"{record.title}\n{record.body}\n{record.keywords}",
        superseded_by=record.superseded_by,
    )


async def all_records(store: Store, project_id: str, *, include_superseded: bool) -> list[Record]:
    """The project's and the global records."""
    found: list[Record] = []
    for pid in (project_id, GLOBAL_PROJECT_ID):
        found += await store.list_records(pid, include_superseded=include_superseded)
    return found


async def produced_by(store: Store, session_id: str, n: int) -> list[scoring.Produced]:
    """The records extraction wrote for one session (project and global)."""
    rows = await store.rows(
        "SELECT * FROM records WHERE session_id = ? AND source = 'llm_extraction' ORDER BY id",
        (session_id,),
    )
    return [as_produced(Record.from_row(row), n) for row in rows]


async def audit_store(
    store: Store, run: Run, project_id: str, n: int, items: dict[str, scoring.KeyItem]
) -> dict[str, Any]:
    """The current records after session ``n``: how many, and how many are stale or noise."""
    current = await all_records(store, project_id, include_superseded=False)
    known = [item for item in run.key.items if item.session <= n]
    answers = scoring.answers_of(
        [as_produced(r, run.session_of.get(r.id, 0)) for r in current], run.assigned, known
    )
    stale = [r.id for r in current if answers[r.id] and not _holds_any(answers[r.id], items, n)]
    noise = [r.id for r in current if not answers[r.id]]
    by_item: dict[str, int] = {}
    for found in answers.values():
        for item_id in found:
            by_item[item_id] = by_item.get(item_id, 0) + 1
    return {
        "current": len(current),
        "stale": stale,
        "noise": noise,
        "repeated_items": sorted(i for i, count in by_item.items() if count > 1),
    }


def _holds_any(found: frozenset[str], items: dict[str, scoring.KeyItem], n: int) -> bool:
    return any(scoring.holds(items[i], n, items) for i in found)


async def duplicate_similarity(store: Store, run: Run) -> list[tuple[str, str, float]]:
    """For each duplicate record: the record of the item it repeats and their cosine similarity.

    Consolidation asks about pairs above ``dedupe.SIMILARITY_MIN``; this says how far each
    duplicate that extraction wrote was from that bound.
    """
    record_of = {item: record for record, item in run.assigned.items()}
    pairs = [
        (rid, record_of[item])
        for m in run.matchings
        for rid, item in m.duplicates.items()
        if item in record_of
    ]
    vectors = await vecstore.load_vectors(store, {rid for pair in pairs for rid in pair})
    return [
        (a, b, round(float(vectors[a] @ vectors[b]), 3))
        for a, b in pairs
        if a in vectors and b in vectors
    ]


def next_digest(project_dir: Path) -> str:
    """The digest the next session would be given (it names records by handle, and the run's ids
    come from a counter: :func:`counted_ids`, so the text repeats from run to run)."""
    ctx = HookContext("SessionStart", {"cwd": str(project_dir)})
    conn = open_db(ctx.log)
    if conn is None:
        return ""
    try:
        text = str(digest.build(conn, ctx.project.project_id, ctx.project.name)["text"])
    finally:
        conn.close()
    return text


def inject(
    session_id: str, path: Path, project_dir: Path
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """What the hooks inject into one session: its digest, then each typed prompt's records.

    Each prompt is also answered without the relevance floor, deduplicated the same way (against
    the digest and the earlier unfloored answers), for ``prompts_unfloored``; the prompts whose
    injection the floor changed are returned with the ids kept and removed.
    """
    common = {"session_id": session_id, "cwd": str(project_dir), "transcript_path": str(path)}
    session_start.handle(HookContext("SessionStart", {**common, "source": "startup"}))
    shown = ledger.injected_ids(ledger.read_entries(session_id))  # the digest's records
    prompts = [t.text for t in read_transcript(path).turns if t.role == "developer"]
    unfloored_tokens = 0
    changes = []
    for text in prompts:
        before = len(ledger.read_entries(session_id))
        ctx = HookContext("UserPromptSubmit", {**common, "prompt": text})
        prompt_hook.handle(ctx)
        new = ledger.read_entries(session_id)[before:]
        kept = [str(i) for entry in new for i in entry.get("ids") or []]
        unfloored = unfloored_injection(ctx, text, shown)
        shown |= set(unfloored[1])
        unfloored_tokens += estimate_tokens(unfloored[0]) if unfloored[0] else 0
        if kept != unfloored[1]:
            removed = [i for i in unfloored[1] if i not in kept]
            changes.append({"prompt": text, "kept": kept, "removed": removed})
    totals = {
        "session_start": 0,
        "prompts": 0,
        "records": 0,
        "prompt_count": len(prompts),
        "prompts_unfloored": unfloored_tokens,
    }
    for entry in ledger.read_entries(session_id):
        tokens = int(entry.get("tokens") or 0)
        totals["session_start" if entry.get("event") == "SessionStart" else "prompts"] += tokens
        totals["records"] += len(entry.get("ids") or [])
    return totals, changes


def unfloored_injection(ctx: HookContext, text: str, shown: set[str]) -> tuple[str, list[str]]:
    """What the prompt hook would inject for ``text`` without the relevance floor."""
    terms = search.query_terms(text)
    if not terms:
        return "", []
    conn = open_db(ctx.log)
    if conn is None:
        return "", []
    try:
        return injection.render(prompt_hook._search(ctx, conn, terms, shown, floor=0.0))
    finally:
        conn.close()


async def newest(store: Store, project_id: str) -> list[Record]:
    """The current records of the project and the global scope, newest first."""
    records = await all_records(store, project_id, include_superseded=False)
    return sorted(records, key=lambda r: (r.valid_from, r.id), reverse=True)


async def newest_costs(store: Store, project_id: str) -> list[int]:
    """The token cost of each record a recency-only tool would inject now, newest first."""
    return [
        estimate_tokens(injection.format_record(_row(r))) + 2
        for r in await newest(store, project_id)
    ]


def _row(record: Record) -> RecordRow:
    return record.to_dict()


async def ask(
    store: Store, run: Run, question: scoring.Question, project_dir: Path, embedder: models.Embedder
) -> Asked:
    """One question through every retriever, on the store as it is now."""
    ctx = HookContext("UserPromptSubmit", {"prompt": question.text, "cwd": str(project_dir)})
    project_id = ctx.project.project_id
    conn = open_db(ctx.log)
    if conn is None:
        raise SystemExit("the hook cannot open the eval store")
    try:
        terms = search.query_terms(question.text)
        rows = prompt_hook._search(ctx, conn, terms, ()) if terms else []
        text, hook_ids = injection.render(rows)
        unfloored = prompt_hook._search(ctx, conn, terms, (), floor=0.0) if terms else []
        hook_candidates = floors.hook_candidates(ctx, conn, question.text)
        shown = digest.build(conn, project_id, ctx.project.name)["ids"]
    finally:
        conn.close()
    settings = config.load()
    query = SearchQuery(question.text, project_id, limit=K)
    floor = hybrid.floor_for(settings, embedder.name)
    fused = await hybrid.hybrid_search(store, query, embedder, floor=floor)
    keyword = await hybrid.hybrid_search(store, query, None, floor=hybrid.floor_for(settings, None))
    search_candidates = await floors.search_candidates(store, query, embedder)
    current = await all_records(store, project_id, include_superseded=False)
    known = [item for item in run.key.items if item.session <= question.after]
    answers = scoring.answers_of(
        [as_produced(r, run.session_of.get(r.id, 0)) for r in current], run.assigned, known
    )
    return Asked(
        question=question,
        hook=list(hook_ids),
        hook_tokens=estimate_tokens(text) if text else 0,
        hybrid=[h.record.id for h in fused.hits],
        keyword=[h.record.id for h in keyword.hits],
        digest=[str(i) for i in shown],
        newest=[r.id for r in await newest(store, project_id)],
        answers=answers,
        hook_unfloored=injection.render(unfloored)[1],
        hybrid_unfloored=[c.id for c in search_candidates[:K]],
        hybrid_strong=[h.record.id for h in fused.strong],
        hook_candidates=hook_candidates,
        search_candidates=search_candidates,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--sessions", type=int, default=None, help="only the first N sessions")
    parser.add_argument("--answers", type=Path, default=HERE / "answers.json")
    parser.add_argument(
        "--rehash",
        action="store_true",
        help="write each served request's transcript hash into the answers file",
    )
    args = parser.parse_args()
    options = Options(
        live=os.environ.get(LIVE_ENV, "") not in ("", "0"),
        sessions=args.sessions,
        answers=args.answers,
    )
    run, meta = anyio.run(evaluate, options)
    if args.rehash and not options.live:
        rehash(args.answers, meta)
    text, payload = report.render(run, meta, k=K)
    name = "own_eval_live" if options.live else "own_eval"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{name}.md").write_text(text)
    (args.out_dir / f"{name}.json").write_text(
        json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )
    if options.live:
        (args.out_dir / f"{name}.answers.json").write_text(
            json.dumps(meta["captured"], indent=1, ensure_ascii=False) + "\n"
        )
    print(text)


def rehash(path: Path, meta: dict[str, Any]) -> None:
    """Store each served transcript's hash in the answers file, keeping its layout."""
    text = path.read_text()
    for served in meta["served"]["extractions"]:
        marker = f'"script": "{served["script"]}"'
        start = text.index(marker)
        field_at = text.index('"transcript_sha256": "', start) + len('"transcript_sha256": "')
        end = text.index('"', field_at)
        text = text[:field_at] + served["transcript_sha256"] + text[end:]
    path.write_text(text)


if __name__ == "__main__":
    main()
