"""Hybrid ``ctx_search``: keyword and vector rankings fused with RRF, the model loaded lazily.

The real offline all-MiniLM-L6-v2 embeds a real store; the server is reached through the SDK's
in-memory client. A :class:`~agentctx.retrieval.hybrid.QueryModel` whose load waits on a gate lets the tests
see the server before and after the model is ready without sleeping.
"""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client

from agentctx import config
from agentctx.core import db
from agentctx.core.project import identify
from agentctx.embeddings import models, vecstore
from agentctx.mcp.server import create_server
from agentctx.retrieval import hybrid
from agentctx.store import SearchQuery, Store
from tests.helpers import new_record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from mcp.types import CallToolResult

pytestmark = pytest.mark.anyio

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
DEADLINE = 30  # seconds; a model load takes about one

#: The paraphrase: none of its words is in the Slow CI record; "pipeline" is in the decoy.
PARAPHRASE = "the continuous integration pipeline takes forever"

RECORDS: dict[str, tuple[str, str, str]] = {
    "login": (
        "bugfix",
        "Flaky login test",
        "The login test failed because of a race in the session cache.",
    ),
    "ci": (
        "discovery",
        "Slow CI",
        "CI is slow because the Docker layer cache is disabled on forks.",
    ),
    "decoy": (
        "discovery",
        "Nightly data exports",
        "The nightly data pipeline retries failed exports three times.",
    ),
    "analytics": (
        "decision",
        "Postgres for analytics",
        "Analytics events go to Postgres, not to Elasticsearch.",
    ),
    "format": (
        "convention",
        "Python formatting",
        "Format Python code with ruff format before every commit.",
    ),
    "grpc": (
        "decision",
        "gRPC for internal services",
        "We moved from REST to gRPC for internal services.",
    ),
    "reset": (
        "bugfix",
        "ConnectionResetError in the upload worker",
        "Uploads failed with ConnectionResetError: [Errno 104] Connection reset by peer when S3 "
        "closed idle sockets; fixed by retrying with backoff.",
    ),
    "store": (
        "discovery",
        "useAuthStore keeps the token in memory",
        "The useAuthStore hook holds the access token in memory only, never in localStorage.",
    ),
}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model download, ever: every load in these tests is from the local folder."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


async def fill(store: Store, project_id: str, embedder: models.Embedder | None) -> dict[str, str]:
    """The records of RECORDS in ``project_id`` (embedded when an embedder is given): name -> id."""
    made = {}
    for name, (record_type, title, body) in RECORDS.items():
        record = await store.add(
            new_record(type=record_type, title=title, body=body, project_id=project_id)
        )
        made[name] = record.id
    if embedder is not None:
        assert await vecstore.embed_pending(store, embedder) == len(RECORDS)
    return made


@pytest.fixture
async def seeded(store: Store, project_dir: Path, embedder: models.Embedder) -> dict[str, str]:
    """RECORDS in ``project_dir``'s project, embedded."""
    return await fill(store, identify(str(project_dir)).project_id, embedder)


def ready_model(embedder: models.Embedder, settings: Mapping[str, Any]) -> hybrid.QueryModel:
    """A query model whose load returns the session's model (the load itself is tested apart)."""
    return hybrid.QueryModel(settings, load=lambda _settings: embedder)


@asynccontextmanager
async def ready_client(
    project_dir: Path, embedder: models.Embedder, settings: Mapping[str, Any]
) -> AsyncIterator[Client]:
    """A client of a server whose model is ready before the first call."""
    model = ready_model(embedder, settings)
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir), model=model)) as connected:
            assert await model.wait() is embedder
            yield connected


@pytest.fixture
async def hybrid_client(
    project_dir: Path,
    seeded: dict[str, str],
    embedder: models.Embedder,
    minilm_settings: dict[str, Any],
) -> AsyncIterator[Client]:
    """A server whose model is ready before the first call."""
    async with ready_client(project_dir, embedder, minilm_settings) as connected:
        yield connected


@pytest.fixture
async def unfloored_client(
    project_dir: Path,
    seeded: dict[str, str],
    embedder: models.Embedder,
    minilm_settings: dict[str, Any],
) -> AsyncIterator[Client]:
    """A ready server without a relevance floor: every ranked hit, for the filters' tests."""
    settings = {**minilm_settings, "retrieval.min_relevance": 0.0}
    async with ready_client(project_dir, embedder, settings) as connected:
        yield connected


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    data: dict[str, Any] = result.structured_content
    return data


async def search(client: Client, **args: Any) -> tuple[str, list[str]]:
    """(mode, ids) of one ctx_search call."""
    data = ok(await client.call_tool("ctx_search", args))
    scores = [entry["score"] for entry in data["results"]]
    assert scores == sorted(scores, reverse=True)
    return data["mode"], [entry["id"] for entry in data["results"]]


async def strong(client: Client, **args: Any) -> tuple[str, list[str]]:
    """(mode, ids of the hits labelled strong) of one ctx_search call; every hit is labelled."""
    data = ok(await client.call_tool("ctx_search", args))
    assert all(entry["match"] in ("strong", "weak") for entry in data["results"])
    return data["mode"], [e["id"] for e in data["results"] if e["match"] == "strong"]


# -- ranking -------------------------------------------------------------------------------------


async def test_a_paraphrase_is_found_only_in_hybrid_mode(
    hybrid_client: Client, seeded: dict[str, str], store: Store, project_dir: Path
) -> None:
    project_id = identify(str(project_dir)).project_id
    keyword = await store.search(SearchQuery(PARAPHRASE, project_id))
    assert [hit.record.id for hit in keyword.hits] == [seeded["decoy"]]  # "pipeline" only
    mode, found = await search(hybrid_client, query=PARAPHRASE)
    assert mode == "hybrid"
    # the decoy is first in both lists' sum; Slow CI is the vector list's first
    assert found[:2] == [seeded["decoy"], seeded["ci"]]
    data = ok(await hybrid_client.call_tool("ctx_search", {"query": PARAPHRASE, "limit": 2}))
    first, second = data["results"]
    assert first["score"] == pytest.approx(1 / 61 + 1 / 62, rel=1e-3) or first["score"] > 1 / 61
    assert second["score"] == pytest.approx(1 / 61, rel=1e-3)  # vector rank 1, no keyword rank
    assert all("body" not in entry for entry in data["results"])


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("ConnectionResetError", "reset"),
        ("Connection reset by peer Errno 104", "reset"),
        ("useAuthStore", "store"),
        ("ruff format", "format"),
    ],
)
async def test_keyword_shaped_queries_still_rank_the_exact_match_first(
    hybrid_client: Client, seeded: dict[str, str], query: str, name: str
) -> None:
    mode, found = await search(hybrid_client, query=query)
    assert mode == "hybrid"
    # the vector list's other neighbours are below MiniLM's cosine floor and share no word
    assert found == [seeded[name]]


async def test_filters_hold_for_vector_candidates(
    unfloored_client: Client,
    seeded: dict[str, str],
    store: Store,
    project_dir: Path,
    embedder: models.Embedder,
) -> None:
    project_id = identify(str(project_dir)).project_id
    # type: the paraphrase's vector neighbour is a discovery
    mode, found = await search(unfloored_client, query=PARAPHRASE, type="bugfix")
    assert mode == "hybrid" and found
    assert set(found) == {seeded["login"], seeded["reset"]}
    assert len((await search(unfloored_client, query=PARAPHRASE, limit=3))[1]) == 3
    # scope: another project's record and a global one, both near the query
    other = await store.add(
        new_record(
            type="discovery",
            title="CI is slow in the other repository",
            body="Its CI takes forever too.",
            project_id="c" * 64,
        )
    )
    shared = await store.add(
        new_record(
            type="preference",
            title="Keep CI fast",
            body="Continuous integration should finish in five minutes.",
            project_id=project_id,
            scope="global",
        )
    )
    assert await vecstore.embed_pending(store, embedder) == 2
    _, found = await search(unfloored_client, query="slow builds", limit=15)
    assert other.id not in found and shared.id in found and seeded["ci"] in found
    _, found = await search(unfloored_client, query="slow builds", scope="global")
    assert found == [shared.id]
    # current records only, unless as_of
    old, new = await store.supersede(
        seeded["ci"],
        "CI is fast again: the Docker layer cache is on for forks too.",
        "the cache was enabled",
        project_id=project_id,
    )
    assert await vecstore.embed_pending(store, embedder) == 1
    _, found = await search(unfloored_client, query="slow builds", limit=15)
    assert old.id not in found and new.id in found
    _, found = await search(unfloored_client, query="slow builds", as_of=old.recorded_at, limit=15)
    assert old.id in found and new.id not in found
    # file: only records linked to it; here a vector hit with no keyword in common
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
            ("N-CI", project_id, "file", ".github/workflows/ci.yml", new.recorded_at),
        )
        await tx.execute("INSERT INTO record_entities VALUES (?, ?)", (new.id, "N-CI"))
    mode, found = await search(unfloored_client, query=PARAPHRASE, file=".github/workflows/ci.yml")
    assert (mode, found) == ("hybrid", [new.id])


# -- the relevance floor -------------------------------------------------------------------------

#: Shares one word with the decoy ("pipeline") and is about nothing the store knows.
UNANSWERED = "How does the billing service handle payments in the pipeline?"
#: Shares no word with any record and is near none in meaning.
FAR = "kubernetes helm charts for grafana dashboards"


async def test_a_query_nothing_answers_gets_weak_hits_and_says_so(
    hybrid_client: Client, seeded: dict[str, str]
) -> None:
    data = ok(await hybrid_client.call_tool("ctx_search", {"query": UNANSWERED}))
    assert data["mode"] == "hybrid" and data["results"]
    assert {entry["match"] for entry in data["results"]} == {"weak"}
    assert data["note"].startswith("no strong match: ")
    # a paraphrase without a shared word is found, and honestly labelled weak at cosine 0.45
    data = ok(await hybrid_client.call_tool("ctx_search", {"query": PARAPHRASE}))
    labels = {entry["id"]: entry["match"] for entry in data["results"]}
    assert labels == {seeded["decoy"]: "weak", seeded["ci"]: "weak"}
    # close in meaning, or holding every distinctive word: strong, and no note
    for query, name in (("slow CI builds", "ci"), ("ConnectionResetError", "reset")):
        data = ok(await hybrid_client.call_tool("ctx_search", {"query": query}))
        assert [(e["id"], e["match"]) for e in data["results"]] == [(seeded[name], "strong")]
        assert data["note"] is None


async def test_a_query_with_too_little_content_is_weak_and_says_why(
    hybrid_client: Client, seeded: dict[str, str]
) -> None:
    """ "the cache" matches the login bugfix and Slow CI by word, but "cache" alone is too common
    in code to tell what is asked (content 0.63 < 1.0): weak hits, and a note that says why."""
    data = ok(await hybrid_client.call_tool("ctx_search", {"query": "the cache"}))
    assert {seeded["login"], seeded["ci"]} <= {entry["id"] for entry in data["results"]}
    assert {entry["match"] for entry in data["results"]} == {"weak"}
    assert data["note"].startswith("no strong match: the query has too few distinctive words")


async def test_a_query_far_from_every_record_gets_nothing(hybrid_client: Client) -> None:
    data = ok(await hybrid_client.call_tool("ctx_search", {"query": FAR}))
    assert data["results"] == []
    assert data["note"].startswith("nothing relevant found: ")


async def test_without_a_floor_every_query_fills_its_page(unfloored_client: Client) -> None:
    data = ok(await unfloored_client.call_tool("ctx_search", {"query": UNANSWERED, "limit": 5}))
    assert len(data["results"]) == 5
    assert {entry["match"] for entry in data["results"]} == {"weak"}
    assert data["note"].startswith("no strong match: ")


async def test_a_model_without_a_measured_floor_gets_none(
    store: Store, seeded: dict[str, str], project_dir: Path, embedder: models.Embedder
) -> None:
    query = SearchQuery(UNANSWERED, identify(str(project_dir)).project_id, limit=5)
    floor = hybrid.floor_for({}, "BAAI/bge-small-en-v1.5")
    assert floor.similarity is None and floor.strong_similarity is None
    ranked = await hybrid.hybrid_search(store, query, embedder, floor=floor)
    assert len(ranked.hits) == 5 and ranked.dropped == 0
    assert len(ranked.match) == 5 and ranked.strong == []  # labelled by keywords alone
    measured = await hybrid.hybrid_search(
        store, query, embedder, floor=hybrid.floor_for({}, MINILM)
    )
    assert 0 < len(measured.hits) < 5 and measured.strong == []


def test_floor_settings() -> None:
    assert hybrid.floor_for({}, MINILM) == hybrid.Floor(0.2, 0.3, 0.2, 0.55)
    assert hybrid.floor_for({}, None) == hybrid.Floor(0.2, None, 0.2, None)
    assert hybrid.floor_for({"retrieval.min_similarity": 0.5}, None).similarity == 0.5
    assert hybrid.floor_for({"retrieval.min_similarity": 0.5}, MINILM).similarity == 0.5
    # ctx_search labels what it keeps: the hook's floor setting can lower its floor, not raise it
    assert hybrid.floor_for({"retrieval.min_relevance": 0.6}, MINILM).keyword_alone == 0.2
    assert hybrid.floor_for({"retrieval.min_relevance": 0.1}, MINILM).keyword_alone == 0.1
    assert hybrid.floor_for({"retrieval.min_relevance": 0.0}, MINILM).relevance == 0.0


MINILM_FLOOR = hybrid.floor_for({}, MINILM)


@pytest.mark.parametrize(
    ("similarity", "relevance", "content", "is_hybrid", "expected"),
    [
        (0.60, 0.0, 3.0, True, "strong"),  # close in meaning, no word in common
        (0.54, 0.9, 3.0, True, "weak"),  # neither close enough nor every word
        (0.31, 1.0, 3.0, True, "strong"),  # every distinctive word, not far in meaning
        (0.29, 1.0, 3.0, True, "weak"),  # every word, but in another sense
        (None, 1.0, 3.0, True, "weak"),  # not even among the nearest vectors
        (0.90, 1.0, 0.8, True, "weak"),  # "run it again": too little content to tell
        (None, 1.0, 3.0, False, "strong"),  # keyword mode: every distinctive word
        (None, 0.98, 3.0, False, "weak"),
        (None, 1.0, 0.99, False, "weak"),
    ],
)
def test_the_strength_rule(
    similarity: float | None, relevance: float, content: float, is_hybrid: bool, expected: str
) -> None:
    got = hybrid.strength(MINILM_FLOOR, similarity, relevance, content, hybrid=is_hybrid)
    assert got == expected


def test_a_model_without_measured_values_is_labelled_by_keywords() -> None:
    floor = hybrid.floor_for({}, "BAAI/bge-small-en-v1.5")
    assert hybrid.strength(floor, 0.95, 0.5, 3.0, hybrid=True) == "weak"
    assert hybrid.strength(floor, 0.10, 1.0, 3.0, hybrid=True) == "strong"


async def test_the_past_and_the_fallback_are_not_floored(
    store: Store, seeded: dict[str, str], project_dir: Path, embedder: models.Embedder
) -> None:
    project_id = identify(str(project_dir)).project_id
    floor = hybrid.floor_for({}, MINILM)
    past = SearchQuery(UNANSWERED, project_id, as_of="2999-01-01", limit=5)
    assert len((await hybrid.hybrid_search(store, past, embedder, floor=floor)).hits) == 5
    # the LIKE fallback: no term counts to weigh the words with
    store.capabilities.fts5 = False
    query = SearchQuery(UNANSWERED, project_id)
    ranked = await hybrid.hybrid_search(store, query, None, floor=floor)
    assert ranked.degraded is not None and ranked.hits


# -- the lazy model ------------------------------------------------------------------------------


async def test_keyword_results_until_the_model_is_ready_then_hybrid(
    project_dir: Path,
    seeded: dict[str, str],
    embedder: models.Embedder,
    minilm_settings: dict[str, Any],
) -> None:
    gate = threading.Event()
    loads: list[str] = []

    def gated_load(settings: Mapping[str, Any]) -> models.Embedder | None:
        loads.append(threading.current_thread().name)
        if not gate.wait(DEADLINE):  # the test opens it; never a hang
            return None
        return models.load_model(settings)

    model = hybrid.QueryModel(minilm_settings, load=gated_load)
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir), model=model)) as client:
            states = [model.state]  # nothing loads at start-up
            for _ in range(3):  # the calls never wait for the load
                mode, found = await strong(client, query=PARAPHRASE)
                assert (mode, found) == ("keyword", [])  # one shared word: weak at most
                states.append(model.state)
            gate.set()
            assert await model.wait() is not None
            states.append(model.state)
            assert states == ["idle", "loading", "loading", "loading", "ready"]
            mode, found = await search(client, query=PARAPHRASE)
            assert mode == "hybrid" and seeded["ci"] in found
        async with Client(create_server(str(project_dir), model=model)) as client:
            assert await model.wait() is not None  # a second server reuses the loaded model
            assert (await search(client, query=PARAPHRASE))[0] == "hybrid"
    assert len(loads) == 1  # loaded once, in a worker thread
    assert loads[0] != threading.current_thread().name


async def test_the_configured_model_loads_in_the_background(
    project_dir: Path, seeded: dict[str, str], minilm_dir: Path
) -> None:
    """The default path: settings from config.json, the load started by the first search."""
    config.set_value("embedding.model", MINILM)
    config.set_value("embedding.path", str(minilm_dir))
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir))) as client:
            mode, found = await strong(client, query=PARAPHRASE)
            assert (mode, found) == ("keyword", [])  # one shared word: weak at most
            while mode == "keyword":  # polled until the load ends (within the deadline)
                mode, found = await search(client, query=PARAPHRASE)
            assert mode == "hybrid" and seeded["ci"] in found


async def test_embeddings_off_means_keyword_only(
    project_dir: Path, seeded: dict[str, str], minilm_dir: Path
) -> None:
    config.set_value("embedding.model", MINILM)
    config.set_value("embedding.path", str(minilm_dir))
    config.set_value("embeddings", "off")
    model = hybrid.QueryModel(config.load())
    assert model.state == "off"
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir), model=model)) as client:
            for _ in range(2):
                assert await strong(client, query=PARAPHRASE) == (
                    "keyword",
                    [],
                )  # one shared word: weak at most
            assert await model.wait() is None and model.state == "off"


async def test_a_model_that_cannot_load_means_keyword_only_and_one_log_line(
    project_dir: Path,
    seeded: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    missing = {"embeddings": True, "embedding.model": MINILM, "embedding.path": str(tmp_path / "x")}
    model = hybrid.QueryModel(missing)
    with caplog.at_level(logging.INFO), anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir), model=model)) as client:
            assert (await search(client, query=PARAPHRASE))[0] == "keyword"
            assert await model.wait() is None and model.state == "off"
            for _ in range(3):
                assert await strong(client, query=PARAPHRASE) == (
                    "keyword",
                    [],
                )  # one shared word: weak at most
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("agentctx")]
    assert len(lines) == 1 and "embeddings off" in lines[0], lines


async def test_no_vectors_no_model_load(
    project_dir: Path, store: Store, minilm_settings: dict[str, Any]
) -> None:
    """A store nobody embedded yet: keyword results, even once the model is loaded.

    The server loads the model at start for the prompt hook's socket (issue 25), so the model's
    state at the end says nothing of ctx_search (it read ``idle`` only while the load was slower
    than the test, then abandoned): the search waits for the load here, and still finds no vector
    to compare."""
    made = await fill(store, identify(str(project_dir)).project_id, None)
    model = hybrid.QueryModel(minilm_settings)
    with anyio.fail_after(DEADLINE):
        async with Client(create_server(str(project_dir), model=model)) as client:
            assert await search(client, query="ConnectionResetError") == (
                "keyword",
                [made["reset"]],
            )
            assert await model.wait() is not None
            assert await search(client, query="ConnectionResetError") == (
                "keyword",
                [made["reset"]],
            )


# -- the library function ------------------------------------------------------------------------


async def test_hybrid_search_ranks_alike_with_sqlite_vec_and_numpy(
    tmp_path: Path, embedder: models.Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hybrid.BLOB_TABLE == vecstore.BLOB_TABLE
    queries = [PARAPHRASE, "useAuthStore", "which datastore for tracking metrics"]
    rankings: list[list[list[str]]] = []
    for name in ("vec", "blob"):
        if name == "blob":

            def refuse(conn: Any, caps: db.Capabilities) -> None:
                caps.vec_error = "sqlite-vec disabled by the test"

            monkeypatch.setattr(db, "_load_vec", refuse)
        async with await Store.open(str(tmp_path / f"{name}.db")) as opened:
            assert vecstore.uses_vec(opened) is (name == "vec")
            assert not await hybrid.has_vectors(opened)
            made = await fill(opened, "p1", embedder)
            assert await hybrid.has_vectors(opened)
            by_id = {record_id: key for key, record_id in made.items()}
            ranking = []
            for text in queries:
                ranked = await hybrid.hybrid_search(opened, SearchQuery(text, "p1"), embedder)
                assert ranked.mode == "hybrid" and ranked.degraded is None
                ranking.append([by_id[hit.record.id] for hit in ranked.hits])
            keyword = await hybrid.hybrid_search(opened, SearchQuery(PARAPHRASE, "p1"), None)
            assert keyword.mode == "keyword"
            assert [by_id[h.record.id] for h in keyword.hits] == ["decoy"]
            nothing = await opened.search(SearchQuery(queries[2], "p1"))
            assert nothing.hits == []
            rankings.append(ranking)
    assert rankings[0] == rankings[1]
    assert rankings[0][2][0] == "analytics"  # no keyword at all: the vector list alone
