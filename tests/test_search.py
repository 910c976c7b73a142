"""Keyword search: BM25 and the rerank formula, identifiers, the LIKE fallback, hostile input."""

from __future__ import annotations

import re
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentctx.core import clock, db, schema
from agentctx.core import search as keyword
from agentctx.store import SearchQuery, Store
from tests.helpers import new_record

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import sqlean

    from agentctx.records import Record
    from agentctx.store import SearchResult

P = "a" * 64
FILLER = [
    ("Release process", "Tag the commit and let CI publish the wheel."),
    ("Logging", "Use structlog with JSON output in production."),
    ("Formatting", "ruff format runs in pre-commit."),
    ("Secrets", "Secrets live in the vault, never in the repository."),
    ("Migrations", "Schema migrations are append-only."),
    ("Caching", "HTTP responses are cached for five minutes."),
    ("Testing", "Integration tests run against a real database file."),
    ("Branching", "Feature branches are rebased before merging."),
]


def days_ago(days: float) -> str:
    return clock.format_time(datetime.now(UTC) - timedelta(days=days))


async def add_filler(store: Store) -> None:
    """Records without the searched words, so BM25's IDF behaves as in a real store."""
    for title, body in FILLER:
        await store.add(new_record(type="convention", title=title, body=body))


async def search(store: Store, text: str, **options: Any) -> SearchResult:
    options.setdefault("project_id", P)
    return await store.search(SearchQuery(text, **options))


def by_id(result: SearchResult) -> dict[str, float]:
    return {hit.record.id: hit.score for hit in result.hits}


# -- ranking -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_title_match_ranks_above_body_only_match(store: Store) -> None:
    await add_filler(store)
    body_only = await store.add(
        new_record(title="Pipeline notes", body="The kafka consumer group settings live in config.")
    )
    in_title = await store.add(
        new_record(title="Kafka consumer group", body="The pipeline settings live in config.")
    )
    result = await search(store, "kafka")
    assert [hit.record.id for hit in result.hits] == [in_title.id, body_only.id]
    assert result.hits[0].score > result.hits[1].score > 0


@pytest.mark.anyio
async def test_keywords_rank_between_title_and_body(store: Store) -> None:
    await add_filler(store)
    body = await store.add(new_record(title="One", body="zookeeper ensemble notes here"))
    keyword = await store.add(
        new_record(title="Two", body="ensemble notes here", keywords="zookeeper")
    )
    title = await store.add(new_record(title="Zookeeper", body="ensemble notes here"))
    result = await search(store, "zookeeper")
    assert [hit.record.id for hit in result.hits] == [title.id, keyword.id, body.id]


@pytest.mark.anyio
async def test_rerank_factors(store: Store) -> None:
    """Identical text has identical BM25, so score ratios are exactly the documented factors."""
    await add_filler(store)
    for n in range(20):  # keep the searched word in fewer than half of the rows (BM25's IDF)
        await store.add(
            new_record(type="convention", title=f"Rule {n}", body=f"Something else, {n}.")
        )
    text = {"title": "Flaky websocket reconnects", "body": "Backoff resets after a clean close."}
    base = await store.add(new_record(type="discovery", **text))
    pinned = await store.add(new_record(type="discovery", pinned=True, **text))
    inferred = await store.add(new_record(type="discovery", confidence="inferred", **text))
    reinforced = await store.add(new_record(type="discovery", confidence="reinforced", **text))
    half = await store.add(new_record(type="discovery", valid_from=days_ago(90), **text))
    ancient = await store.add(new_record(type="discovery", valid_from=days_ago(3650), **text))
    bugfix = await store.add(new_record(type="bugfix", valid_from=days_ago(60), **text))
    future = await store.add(new_record(type="discovery", valid_from=days_ago(-30), **text))
    decision = await store.add(new_record(type="decision", **text))
    old_decision = await store.add(
        new_record(type="decision", valid_from=days_ago(3 * 365), **text)
    )
    convention = await store.add(new_record(type="convention", valid_from=days_ago(1000), **text))
    profile = await store.add(new_record(type="profile", valid_from=days_ago(1000), **text))
    handover = await store.add(new_record(type="handover", valid_from=days_ago(14), **text))

    scores = by_id(await search(store, "websocket", limit=50))
    assert len(scores) == 13
    unit = scores[base.id]
    assert unit > 0

    def ratio(record: Record) -> float:
        return scores[record.id] / unit

    assert ratio(pinned) == pytest.approx(keyword.PIN_BOOST)
    assert ratio(inferred) == pytest.approx(0.7)
    assert ratio(reinforced) == pytest.approx(1.0)
    assert ratio(half) == pytest.approx(0.5, rel=1e-4)  # discovery half-life: 90 days
    assert ratio(ancient) == pytest.approx(keyword.RECENCY_FLOOR)
    assert ratio(bugfix) == pytest.approx(0.5, rel=1e-4)  # bugfix half-life: 60 days
    assert ratio(future) == pytest.approx(1.0)  # age is never negative
    assert ratio(decision) == pytest.approx(1.3)
    assert ratio(old_decision) == pytest.approx(1.3)  # decisions never decay
    assert ratio(convention) == pytest.approx(1.2)
    assert ratio(profile) == pytest.approx(0.9)
    assert ratio(handover) == pytest.approx(0.8 * 0.5, rel=1e-4)

    # And the order follows the scores, ties broken by id.
    result = await search(store, "websocket", limit=50)
    keys = [(-hit.score, hit.record.id) for hit in result.hits]
    assert keys == sorted(keys)
    top = await search(store, "websocket", limit=3)
    assert [h.record.id for h in top.hits] == [h.record.id for h in result.hits[:3]]


def test_rank_score_formula() -> None:
    reference = datetime(2026, 6, 1, tzinfo=UTC).timestamp()

    def row(**changes: Any) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rank": -2.0,
            "type": "discovery",
            "confidence": "explicit",
            "pinned": 0,
            "valid_from": clock.format_time(datetime(2026, 6, 1, tzinfo=UTC)),
            "id": "A",
        }
        data.update(changes)
        return data

    old = clock.format_time(datetime(2026, 6, 1, tzinfo=UTC) - timedelta(days=180))
    assert keyword.rank_score(row(), reference) == pytest.approx(2.0)
    assert keyword.rank_score(row(valid_from=old), reference) == pytest.approx(0.5)
    assert keyword.rank_score(
        row(valid_from=old, confidence="inferred", pinned=1), reference
    ) == pytest.approx(2.0 * 0.25 * 0.7 * 1.5)
    assert keyword.rank_score(row(type="decision", valid_from=old), reference) == pytest.approx(2.6)
    assert keyword.rank_score(row(rank=0.5), reference) == pytest.approx(1e-6)
    ranked = keyword.rerank([row(id="B"), row(id="A"), row(id="C", rank=-3.0)], 2, reference)
    assert [r["id"] for r, _ in ranked] == ["C", "A"]


# -- what finds what ---------------------------------------------------------------------------

IDENTIFIERS = [
    ("useAuthStore", "State", "Session state lives in useAuthStore; never read the cookie."),
    ("foo.bar()", "Entry point", "Call foo.bar() once at startup before anything else."),
    ("--flag", "CLI switch", "Pass --flag to skip the slow integration step."),
    ("TypeError: x is undefined", "Crash", "TypeError: x is undefined when the cache is cold."),
    ("ERR_SSL_PROTOCOL", "TLS", "Node fails with ERR_SSL_PROTOCOL behind the proxy."),
    ("snake_case_name", "Naming", "Modules use snake_case_name throughout."),
]


@pytest.mark.anyio
@pytest.mark.parametrize("fts", [True, False], ids=["fts5", "like"])
async def test_identifiers_find_their_records(store: Store, fts: bool) -> None:
    await add_filler(store)
    made = {}
    for needle, title, body in IDENTIFIERS:
        made[needle] = await store.add(new_record(type="bugfix", title=title, body=body))
    store.capabilities.fts5 = fts
    for needle, _, _ in IDENTIFIERS:
        result = await search(store, needle)
        assert result.hits, needle
        assert result.hits[0].record.id == made[needle].id, needle
        assert (result.degraded is None) == fts


@pytest.mark.anyio
@pytest.mark.parametrize(
    "text", ["", "   ", "the and of is", "a", "?!", "I want to use it, thanks", "x y z", "---"]
)
async def test_trivial_queries_return_nothing(store: Store, text: str) -> None:
    await store.add(new_record(title="the and of is a", body="I want to use it, thanks x y z ?!"))
    result = await search(store, text)
    assert result.hits == []
    assert result.degraded is None


@pytest.mark.anyio
async def test_limit_and_filters(store: Store) -> None:
    await add_filler(store)
    made = [await store.add(new_record(title=f"Parser case {n}", body="parser")) for n in range(6)]
    bug = await store.add(new_record(type="bugfix", title="Parser crash", body="parser"))
    assert len((await search(store, "parser", limit=3)).hits) == 3
    assert (await search(store, "parser", limit=0)).hits == []
    only = await search(store, "parser", types=["bugfix"])
    assert [h.record.id for h in only.hits] == [bug.id]
    rest = await search(store, "parser", exclude_ids=[bug.id, made[0].id], limit=50)
    assert {h.record.id for h in rest.hits} == {r.id for r in made[1:]}


# -- the LIKE fallback -------------------------------------------------------------------------


def drop_fts(path: str) -> None:
    conn, _ = db.connect(path, load_vec=False)
    with closing(conn):
        for trigger in ("records_fts_insert", "records_fts_delete", "records_fts_update"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE records_fts")


async def fallback_corpus(store: Store) -> Record:
    await add_filler(store)
    await store.add(
        new_record(title="Retry policy", body="Retries use exponential backoff with jitter.")
    )
    await store.add(
        new_record(title="Timeouts", body="Every outbound call has a timeout and retries.")
    )
    return await store.add(
        new_record(title="Backoff and retries", body="Backoff caps at 30 seconds.")
    )


@pytest.mark.anyio
async def test_like_fallback_when_the_fts_query_fails(store: Store) -> None:
    top = await fallback_corpus(store)
    fts = await search(store, "backoff retries")
    assert fts.degraded is None
    assert fts.hits[0].record.id == top.id
    drop_fts(store.path)  # under the open store: its FTS5 query now fails
    like = await search(store, "backoff retries")
    assert like.degraded is not None
    assert like.degraded.startswith("FTS5 query failed (")
    assert like.degraded.endswith("); used LIKE search")
    assert "records_fts" in like.degraded
    assert like.hits[0].record.id == top.id
    assert {h.record.id for h in like.hits} == {h.record.id for h in fts.hits}


@pytest.mark.anyio
async def test_like_fallback_without_fts5(
    agentctx_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await Store.open() as store:
        top = await fallback_corpus(store)
        path = store.path
    drop_fts(path)
    with monkeypatch.context() as patch:
        patch.setattr(db, "_has_fts5", lambda conn: False)  # an SQLite built without FTS5
        async with await Store.open() as store:
            assert not store.has_fts
            later = await store.add(new_record(title="Quokka backoff", body="Added without FTS5."))
            like = await search(store, "backoff retries")
            assert like.degraded == "FTS5 is not available in this SQLite; used LIKE search"
            assert like.hits[0].record.id == top.id
            assert later.id in {h.record.id for h in like.hits}
    async with await Store.open() as store:  # FTS5 again: the index is rebuilt, later included
        assert store.has_fts
        fts = await search(store, "quokka")
        assert fts.degraded is None
        assert [h.record.id for h in fts.hits] == [later.id]
        assert (await search(store, "backoff retries")).hits[0].record.id == top.id


# -- hostile input -----------------------------------------------------------------------------

FTS_SYNTAX = [
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(",
    "near/2",
    "*",
    "^",
    ":",
    "(",
    ")",
    '"',
    "'",
    "-",
    "+",
    "{",
    "}",
    "[",
    "]",
    "title:",
    "body:",
    "keywords:",
    "records_fts",
    "rank",
    "bm25(",
    "\\",
    "%",
    "_",
    "__",
    "';--",
    "/*",
    "*/",
    "\x00",
    "\n",
    "\t",
    "é",
    "ß",
    "İ",
    "ﬁ",
    "\u200b",
    "\ufeff",
    "useAuthStore",
    "foo.bar()",
    "--flag",
    "TypeError: x is undefined",
    "backoff",
    "retries",
]
hostile = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(FTS_SYNTAX), st.text(max_size=6)), max_size=12).map(
        " ".join
    ),
    st.lists(st.sampled_from(FTS_SYNTAX), max_size=12).map("".join),
)
EXAMPLES = ['"', 'a" OR "b', "NEAR(a b, 2)", "title:foo", "foo*", "^bar", "NOT", "(((", "\x00x"]


@pytest.fixture
async def corpus(store: Store) -> Store:
    await fallback_corpus(store)
    for _, title, body in IDENTIFIERS:
        await store.add(new_record(type="bugfix", title=title, body=body, scope="global"))
    return store


@pytest.mark.anyio
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=hostile, fts=st.booleans())
@example(text='"', fts=True)
@example(text="NEAR(backoff retries, 2) AND title:*", fts=True)
async def test_store_search_never_raises(corpus: Store, text: str, fts: bool) -> None:
    corpus.capabilities.fts5 = fts
    result = await corpus.search(SearchQuery(text, project_id=P))
    if not keyword.query_terms(text):
        assert (result.hits, result.degraded) == ([], None)
        return
    assert (result.degraded is None) == fts  # with FTS5 the query itself never fails
    for hit in result.hits:
        assert hit.score > 0
        assert hit.record.project_id in (P, schema.GLOBAL_PROJECT_ID)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlean.Connection]:
    """A migrated database with records, opened through the sync connection policy."""
    path = str(tmp_path_factory.mktemp("fts") / "agentctx.db")
    conn, caps = db.connect(path, load_vec=False)
    schema.migrate(conn, caps, path)
    texts = [(t, b) for t, b in FILLER] + [(t, b) for _, t, b in IDENTIFIERS]
    for n, (title, body) in enumerate(texts):
        record = new_record(title=title, body=body).validated().to_record(f"R{n:04d}", clock.now())
        conn.execute(schema.INSERT_RECORD_SQL, record.to_values())
    yield conn
    conn.close()


@settings(max_examples=300, deadline=None)
@given(text=hostile)
def test_fts_query_is_always_valid_fts5(prepared: sqlean.Connection, text: str) -> None:
    terms = keyword.query_terms(text)
    assert len(terms) <= keyword.MAX_TERMS
    assert len(set(terms)) == len(terms)
    for term in terms:
        assert re.fullmatch(r"\w{2,}", term)
        assert term not in keyword.STOPWORDS
        assert term == term.lower()
    match = keyword.fts_query(terms)
    if match is None:
        assert terms == []
        return
    prepared.execute(
        "SELECT r.id FROM records_fts JOIN records AS r ON r.rowid = records_fts.rowid "
        "WHERE records_fts MATCH ?",
        (match,),
    ).fetchall()
    for fts in (True, False):
        sql, params = keyword.search_sql(
            terms, fts=fts, project_ids=(P, schema.GLOBAL_PROJECT_ID), as_of=clock.now()
        )
        rows = prepared.execute(sql, params).fetchall()
        keyword.rerank(rows, 10)


@pytest.mark.parametrize("text", EXAMPLES)
def test_fts_syntax_examples_are_inert(prepared: sqlean.Connection, text: str) -> None:
    match = keyword.fts_query(keyword.query_terms(text))
    if match is not None:
        prepared.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH ?", (match,))


def test_query_terms() -> None:
    assert keyword.query_terms("useAuthStore foo.bar() --flag") == [
        "useauthstore",
        "foo",
        "bar",
        "flag",
    ]
    assert keyword.query_terms("TypeError: x is undefined") == ["typeerror", "undefined"]
    assert keyword.query_terms("the THE The a I") == []
    assert keyword.query_terms("alpha beta alpha") == ["alpha", "beta"]
    many = " ".join(f"w{n}" for n in range(100))
    assert keyword.query_terms(many) == [f"w{n}" for n in range(keyword.MAX_TERMS)]
    assert keyword.fts_query(["ab", 'c"d']) == '"ab" OR "c""d"'
    assert keyword.fts_query([]) is None
