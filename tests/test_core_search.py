"""One keyword search for the hook and the library: the plans of :mod:`agentctx.core.search` run on
the hook's sync connection and on the Store's async one, and give the same answer.

The UserPromptSubmit hook, :meth:`Store.search` and ``ctx_search``'s keyword judge all run these
plans; these tests guard that they rank and judge alike, on the FTS5 path, the LIKE fallback and
the archive (searches of the past).
"""

from __future__ import annotations

from contextlib import closing
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.consolidate.archive import ARCHIVE_AFTER_DAYS, archive
from agentctx.core import clock, db, plan, search
from agentctx.core.connect import open_db
from agentctx.core.project import identify
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.hooks import prompt
from agentctx.hooks.runner import HookContext
from agentctx.records import NewRecord
from agentctx.retrieval import hybrid
from agentctx.store import SearchQuery, Store
from tests.test_search import drop_fts

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.core.plan import Plan

pytestmark = pytest.mark.anyio

PROMPT = (
    "Before I touch the client again: how should the retry backoff handle a flaky grpc gateway "
    "timeout, and does the handler log it?"
)
#: (type, title, body): a plausible project memory; some records answer the prompt, some share
#: only a common word with it, most share nothing.
MEMORY = [
    (
        "decision",
        "gRPC gateway timeouts",
        "The gRPC gateway times out after 5 s; the client retries.",
    ),
    (
        "decision",
        "Retry backoff",
        "Retries back off exponentially with jitter (backoff caps at 30 s).",
    ),
    ("convention", "Error handler", "Every handler returns a typed error; no bare except."),
    ("convention", "Signal handler", "The worker's signal handler drains the queue first."),
    ("convention", "Request handler", "A request handler validates input with pydantic."),
    ("convention", "Event handler", "Event handler names end in _handler."),
    ("decision", "Logging", "Use structlog with JSON output in production."),
    ("decision", "Release process", "Tag the commit and let CI publish the wheel."),
    ("convention", "Formatting", "ruff format runs in pre-commit."),
    ("decision", "Secrets", "Secrets live in the vault, never in the repository."),
    ("decision", "Migrations", "Schema migrations are append-only."),
    ("convention", "Testing", "Integration tests run against a real database file."),
]


async def remember(store: Store, project_id: str) -> None:
    for index, (kind, title, body) in enumerate(MEMORY):
        owner = GLOBAL_PROJECT_ID if index == 3 else project_id  # one global record
        scope = "global" if owner == GLOBAL_PROJECT_ID else "project"
        await store.add(NewRecord(type=kind, title=title, body=body, project_id=owner, scope=scope))


def run_sync(path: str, rule: Plan[Any]) -> Any:
    """``rule`` on a sync read-only connection, as the hooks run plans."""
    conn, _caps = db.connect(path, readonly=True, create=False, load_vec=False)
    with closing(conn):
        return plan.run(conn, rule)


def hits(found: search.Found) -> list[tuple[str, float]]:
    return [(row["id"], score) for row, score in found.hits]


def hook_search(project_dir: Path, text: str, *, floor: float | None) -> list[str]:
    """The ids the UserPromptSubmit hook's search keeps for ``text`` (no session: no dedup)."""
    ctx = HookContext("UserPromptSubmit", {"prompt": text, "cwd": str(project_dir)})
    conn = open_db(ctx.log)
    assert conn is not None
    with closing(conn):
        rows = prompt._search(ctx, conn, search.query_terms(text), (), floor=floor)
    return [row["id"] for row in rows]


async def test_the_hook_and_the_store_rank_and_judge_alike(store: Store, project_dir: Path) -> None:
    pid = identify(str(project_dir)).project_id
    await remember(store, pid)
    terms = search.query_terms(PROMPT)

    # the ranking: the hook's candidates (no floor) are Store.search's hits, with the same scores
    hooked = run_sync(store.path, search.for_prompt(terms, pid))
    result = await store.search(SearchQuery(PROMPT, pid, limit=search.PROMPT_LIMIT))
    assert hits(hooked) == [(hit.record.id, hit.score) for hit in result.hits]
    ranked = [record_id for record_id, _score in hits(hooked)]
    assert hook_search(project_dir, PROMPT, floor=0.0) == ranked
    assert len(ranked) >= 6  # the gateway, the backoff and every handler

    # the relevance: the hook's measure is ctx_search's keyword judge
    exact = run_sync(store.path, search.relevances(terms, ranked))
    assert await hybrid.KeywordJudge(store, PROMPT).relevance(ranked) == exact
    assert await store.run(search.relevances(terms, ranked)) == exact

    # the floor: the hook keeps what the judge passes, relevance first; ctx_search keeps what
    # reaches the floor, in rank order
    kept = passing(ranked, exact, search.MIN_RELEVANCE)
    assert 0 < len(kept) < len(ranked), exact  # the floor decides something here
    assert hook_search(project_dir, PROMPT, floor=None) == kept
    floored = run_sync(store.path, search.for_prompt(terms, pid, floor=search.MIN_RELEVANCE))
    assert [row["id"] for row, _score in floored.hits] == kept
    assert floored.considered == len(ranked)
    assert floored.relevance is not None
    assert all(floored.relevance[i] >= search.MIN_RELEVANCE for i in kept)
    keyword = await hybrid.hybrid_search(
        store,
        SearchQuery(PROMPT, pid, limit=search.PROMPT_LIMIT),
        None,
        floor=hybrid.Floor(search.MIN_RELEVANCE),
    )
    assert [hit.record.id for hit in keyword.hits] == [
        i for i in ranked if exact[i] >= search.MIN_RELEVANCE
    ]


def passing(ranked: list[str], exact: dict[str, float], floor: float) -> list[str]:
    """What a floored keyword search keeps of ``ranked`` (score order), written out: the hits
    reaching the floor and RELATIVE_FLOOR of the best, relevance first in RELEVANCE_BAND bands."""
    level = max(floor, search.RELATIVE_FLOOR * max(exact.values()))
    kept = [i for i in ranked if exact[i] >= level]
    return sorted(kept, key=lambda i: -int(exact[i] / search.RELEVANCE_BAND))


async def test_every_floor_keeps_what_the_exact_relevance_passes(store: Store) -> None:
    """Floors the query's bounds settle (no per-record lookups) and floors they do not: each keeps
    exactly the hits whose exact relevance reaches it."""
    projects = ["p" * 64, GLOBAL_PROJECT_ID]
    await remember(store, projects[0])
    terms = search.query_terms("gateway handler zebra")  # zebra: in no record, it still weighs

    def rule(floor: float) -> Plan[search.Found]:
        return search.keyword_search(terms, project_ids=projects, floor=floor)

    ids = [record_id for record_id, _score in hits(run_sync(store.path, rule(0.0)))]
    exact = run_sync(store.path, search.relevances(terms, ids))
    assert len(set(exact.values())) > 1
    # the same relevance whether each term's matches are read once or looked up per record
    chosen, weights, denominator, matches = await store.run(search.weigh(terms))
    assert matches <= search.MATCH_BUDGET
    per_record = await store.run(search.judge(chosen, weights, denominator, [*ids, "0" * 26]))
    assert per_record == {**exact, "0" * 26: 0.0}
    assert per_record == await store.run(
        search.judge(chosen, weights, denominator, [*ids, "0" * 26], matches=matches)
    )
    for floor in (0.01, 0.2, 0.4, 0.999):
        kept = [i for i, _score in hits(await store.run(rule(floor)))]
        assert kept == passing(ids, exact, floor), floor
        assert [i for i, _score in hits(run_sync(store.path, rule(floor)))] == kept


async def test_the_like_fallback_is_the_same_through_both_executors(
    store: Store, project_dir: Path
) -> None:
    pid = identify(str(project_dir)).project_id
    await remember(store, pid)
    terms = search.query_terms(PROMPT)
    before = run_sync(store.path, search.for_prompt(terms, pid))
    drop_fts(store.path)  # under the open store: every FTS5 query now fails

    def rule() -> Plan[search.Found]:
        return search.for_prompt(terms, pid, floor=search.MIN_RELEVANCE)

    synced, awaited = run_sync(store.path, rule()), await store.run(rule())
    for found in (synced, awaited):
        assert found.degraded is not None
        assert found.degraded.startswith("FTS5 query failed (")
        assert found.relevance is None  # the LIKE search applies no floor
    assert hits(synced) == hits(awaited)
    assert {i for i, _ in hits(synced)} == {i for i, _ in hits(before)}  # every word matches
    result = await store.search(SearchQuery(PROMPT, pid, limit=search.PROMPT_LIMIT))
    assert result.degraded == synced.degraded
    assert [(hit.record.id, hit.score) for hit in result.hits] == hits(synced)
    assert hook_search(project_dir, PROMPT, floor=None) == [i for i, _ in hits(synced)]
    missing = search.keyword_search(terms, project_ids=[pid], fts=False)
    assert (await store.run(missing)).degraded == search.FTS_MISSING


def days(n: float) -> str:
    return clock.format_time(datetime.fromisoformat(clock.now()) + timedelta(days=n))


async def test_the_archive_is_searched_alike_through_both_executors(store: Store) -> None:
    pid = "a" * 64
    first = await store.add(
        NewRecord(
            type="decision",
            title="Database",
            body="We use postgres, version 0.",
            project_id=pid,
            valid_from="2025-01-01T00:00:00.000000Z",
        )
    )
    _, second = await store.supersede(first.id, "We use postgres, version 1.", "moved on")
    _, current = await store.supersede(second.id, "We use postgres, version 2.", "moved on")
    assert (await archive(store, pid, now=days(ARCHIVE_AFTER_DAYS + 1))).moved == 2

    def rule(options: dict[str, Any]) -> Plan[search.Found]:
        return search.keyword_search(["postgres"], project_ids=[pid], **options)

    for options in ({"include_superseded": True}, {"as_of": first.valid_from}, {}):
        synced, awaited = run_sync(store.path, rule(options)), await store.run(rule(options))
        assert synced.degraded is None
        assert hits(synced) == hits(awaited), options
        result = await store.search(SearchQuery("postgres", pid, **options))
        assert [(hit.record.id, hit.score) for hit in result.hits] == hits(synced)
    every = run_sync(store.path, rule({"include_superseded": True}))
    assert {i for i, _ in hits(every)} == {first.id, second.id, current.id}  # two archived
    then = run_sync(store.path, rule({"as_of": first.valid_from}))
    assert [i for i, _ in hits(then)] == [first.id]


def _full_ranking(
    terms: list[str], project_ids: tuple[str, ...], candidates: int
) -> Plan[list[str]]:
    """The ranking as before the pool and the capped counts: every match filtered, then reranked."""
    counts_sql, counts_params = search.term_counts_sql(terms)
    counts = [int(n) for n in (yield plan.one(counts_sql, counts_params))]
    chosen = search.select_terms(terms, counts)
    sql, params = search.search_sql(
        chosen, fts=True, project_ids=project_ids, candidates=candidates
    )
    rows = yield plan.rows(sql, params)
    return [str(row["id"]) for row, _score in search.rerank(rows, candidates)]


@pytest.mark.parametrize("ours", [5, 150, 400])
async def test_pool_and_capped_counts_rank_as_every_match_would(
    store: Store, monkeypatch: pytest.MonkeyPatch, ours: int
) -> None:
    """The index's best ``pool`` matches are filtered first; when the filters leave too few of them
    (another project's records rank above ours) every match is ranked, as before the pool; common
    terms are counted only up to the budget (in a large store: here, any). The result is the same
    either way."""
    monkeypatch.setattr(search, "MATCH_BUDGET", 300)  # so that common terms are capped here
    monkeypatch.setattr(search, "CAPPED_FROM", 0)
    other, mine = "b" * 64, "a" * 64
    rows = [
        *(("decision", f"Queue worker retry {i}", "retry retry queue worker", other) for i in range(600)),
        *(("decision", f"Queue note {i}", "retry once when the queue stalls", mine) for i in range(ours)),
    ]  # fmt: skip
    async with store.transaction() as tx:
        for kind, title, body, owner in rows:
            await tx.add(NewRecord(type=kind, title=title, body=body, project_id=owner))
    terms = ["retry", "queue", "stalls"]
    scope = search.scope_projects(mine, "all")
    found = await store.run(
        search.keyword_search(terms, project_ids=scope, candidates=40, limit=40)
    )
    counts = await store.run(search.term_counts(terms, 600 + ours))
    # capped above the budget, unless every term is that common: then the rarest must be known
    assert counts == ([301, 301, ours] if ours <= 300 else [600 + ours, 600 + ours, ours])
    assert [str(row["id"]) for row, _score in found.hits] == await store.run(
        _full_ranking(terms, scope, 40)
    )
    assert len(found.hits) == min(40, ours)


def test_specificity_is_remembered_with_the_tables_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt asks for its terms' specificity several times: the second answer comes from the
    process's memory, equal to the table's (ADR-017), and the memory stays bounded."""
    monkeypatch.setattr(search, "_specificity", {})
    first = {term: search.specificity(term) for term in ("run", "the", "useauthstore")}
    assert first["useauthstore"] == 1.0 and 0 < first["run"] < 1 and first["the"] < first["run"]
    assert search._specificity == first
    monkeypatch.setattr(search, "_specificity", {"run": 0.25})  # read from memory first
    assert search.specificity("run") == 0.25
    monkeypatch.setattr(search, "_specificity", {})
    monkeypatch.setattr(search, "_SPECIFICITY_MAX", 1)
    assert [search.specificity(t) for t in ("run", "the")] == [first["run"], first["the"]]
    assert list(search._specificity) == ["run"]
