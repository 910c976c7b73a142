"""Hybrid ranking for ``ctx_search`` (ADR-005): the keyword and vector rankings fused with RRF.

The hooks rank by keywords alone (a model costs seconds to load and they live for milliseconds); a
long-lived process such as the MCP server can afford to embed each query. :func:`hybrid_search` ranks
the keyword candidates (:meth:`Store.search`, BM25 and the rerank of :mod:`agentctx.core.search`)
and the nearest stored vectors, each list up to :data:`DEPTH` deep, and fuses them with reciprocal
rank fusion (``keyword.rrf``, k = 60). Vector candidates pass the very filters of the keyword search
(``keyword.filters``: scope, type, current or ``as_of``, excluded ids), so a filter never lets a
vector-only hit through. The vector list is ranked by cosine similarity alone; type, confidence,
recency and pins reach the fused order through the keyword list. The fused score (at most
``2 / 61``) replaces the rerank score: RRF ranks, it does not calibrate, so a score compares hits
of one result only. Records not embedded yet (``pending_embedding``) are found by keywords only.

The relevance floor (:class:`Floor`, from the settings by :func:`floor_for`) is loose on purpose:
an agent is better served by the top hits with an honest label than by a floor that hides a true
answer (issue 14, docs/retrieval.md). In keyword mode a hit is kept when its keyword relevance
(:func:`agentctx.core.search.judge`, the prompt hook's measure) reaches :data:`SEARCH_RELEVANCE`
(or a lower ``retrieval.min_relevance``; 0 keeps every hit). In hybrid mode a hit is kept when its
cosine similarity to the query reaches the model's floor (:func:`agentctx.embeddings.thresholds.similarity_floor`, or
``retrieval.min_similarity``), or its keyword relevance reaches that same keyword floor (exact words
that vectors blur: identifiers, error strings). A cosine scale is the model's own: a model
without a measured floor gets the one calibrated for it (:mod:`agentctx.embeddings.calibrate`,
read through :mod:`agentctx.embeddings.thresholds`), and none in hybrid mode while it has no
calibration. Searches of the past (``as_of``, superseded versions) and the LIKE fallback apply no
floor.

Every kept hit is labelled (:func:`strength`): ``strong`` when the signals say it is about what was
asked, else ``weak`` (it shares words or a topic with the query). Strong: a query with enough
content (:func:`agentctx.core.search.content` ≥ ``MIN_CONTENT``, the hook's own rule) and a hit
whose cosine reaches the model's strong cosine (:func:`~agentctx.embeddings.thresholds.strong_similarity`), or that holds all the query's
distinctive words (keyword relevance ≥ :data:`STRONG_RELEVANCE`; a rare identifier carries most
of that weight) without being far from it in meaning (cosine at the floor). A model without
measured or calibrated values is judged by keywords alone, as keyword mode is. The LIKE fallback
labels nothing (no term weights). How MiniLM's values were measured:
benchmarks/results/precision_eval.md (tuning part), eval.md.

:class:`QueryModel` is the server's lazily loaded model: nothing loads at start-up (the server must
answer ``tools/list`` fast, and imports no numpy or fastembed); the first search that could use
vectors starts the load in a worker thread of the model's own task group and gets keyword results,
as does every search until the model is ready. A model that cannot load (off, missing, offline)
leaves the process keyword-only for good, with the one log line of :func:`agentctx.embeddings.models.load_model`.
"""

from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import sqlean

from agentctx.core import search as keyword
from agentctx.embeddings import thresholds
from agentctx.records import COLUMNS, Record
from agentctx.store import SearchHit

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence

    from anyio.abc import TaskGroup

    from agentctx.embeddings.models import Embedder
    from agentctx.store import SearchQuery, Store

log = logging.getLogger("agentctx.hybrid")

Mode = Literal["hybrid", "keyword"]
ModelState = Literal["idle", "loading", "ready", "off"]

#: How deep each ranking goes into the fusion (deeper when a caller asks for more hits).
DEPTH = 50
#: The largest ``k`` sqlite-vec accepts in a KNN query; the vector pool never grows past it.
VECTOR_MAX = 4096
#: :data:`agentctx.embeddings.vecstore.BLOB_TABLE`, named here because importing embed imports numpy.
BLOB_TABLE = "records_vec_blob"
_COLUMNS_SQL = ", ".join(f"r.{name}" for name in COLUMNS)


#: ``ctx_search``'s keyword floor: the relevance that keeps a hit (keyword mode) or a hit below the
#: cosine floor (hybrid mode). Looser than the hook's ``retrieval.min_relevance`` (0.3): the
#: labels, not the floor, tell an answer from a hit that shares a word.
SEARCH_RELEVANCE = 0.2
#: The keyword relevance of a ``strong`` hit: every distinctive word of the query (the share of its
#: heaviest terms' weight, :func:`agentctx.core.search.relevance`, up to rounding).
STRONG_RELEVANCE = 0.99
#: Hits judged per lookup while a page is filled (the floor's term lookups cost per hit).
JUDGE_BATCH = 20

Match = Literal["strong", "weak"]


@dataclass(frozen=True, slots=True)
class Floor:
    """What a search keeps and how it labels what it keeps.

    Kept: keyword ``relevance`` (0: no floor at all) and, in hybrid mode, the model's cosine
    ``similarity`` (None: no floor) or ``keyword_alone`` relevance. Labelled ``strong``
    (:func:`strength`): cosine ≥ ``strong_similarity`` (None: the model has no measured value), or
    relevance ≥ ``strong_relevance`` with a cosine at the floor; a query whose terms' content is
    below ``min_content`` has weak hits only.
    """

    relevance: float
    similarity: float | None = None
    keyword_alone: float = SEARCH_RELEVANCE
    strong_similarity: float | None = None
    strong_relevance: float = STRONG_RELEVANCE
    min_content: float = keyword.MIN_CONTENT


def floor_for(settings: Mapping[str, Any], model: str | None) -> Floor:
    """The floor of the settings (``retrieval.min_relevance`` can only lower
    :data:`SEARCH_RELEVANCE`; ``retrieval.min_similarity`` replaces the model's cosine floor).

    The model's cosines are its measured values, else its stored calibration
    (:mod:`agentctx.embeddings.thresholds`), else none."""
    relevance = min(
        float(settings.get("retrieval.min_relevance", keyword.MIN_RELEVANCE)), SEARCH_RELEVANCE
    )
    similarity = float(settings.get("retrieval.min_similarity") or 0.0) or None
    if similarity is None:
        similarity = thresholds.similarity_floor(model)
    return Floor(relevance, similarity, relevance, thresholds.strong_similarity(model))


def strength(
    floor: Floor, similarity: float | None, relevance: float, content: float, *, hybrid: bool
) -> Match:
    """The label of one kept hit: ``strong`` when it is about what the query asks, else ``weak``.

    ``similarity``: the hit's cosine (None outside the vector ranking); ``relevance``: its keyword
    relevance; ``content``: the query's (:func:`agentctx.core.search.content`); ``hybrid``: the
    search ranked by vectors too. Without a measured strong cosine (keyword mode, or a model
    without one) a hit is strong by its keyword relevance alone.
    """
    if content < floor.min_content:
        return "weak"  # "run it again": too few distinctive words to be sure of anything
    if not hybrid or floor.strong_similarity is None:
        return "strong" if relevance >= floor.strong_relevance else "weak"
    if similarity is None:
        return "weak"  # not even among the nearest vectors
    if similarity >= floor.strong_similarity:
        return "strong"
    near = floor.similarity if floor.similarity is not None else 0.0
    return "strong" if relevance >= floor.strong_relevance and similarity >= near else "weak"


@dataclass(frozen=True, slots=True)
class Ranked:
    """Ranked hits, best first, and which ranking made them (``degraded`` as in SearchResult).

    ``dropped``: candidates the relevance floor removed; ``considered``: the candidates ranked
    before the floor and ``within`` (so a caller can tell an exhausted search from a short page).
    ``match``: each hit's label by id (:func:`strength`; empty when the search labels nothing: no
    floor given, or the LIKE fallback); ``thin``: the query had too little content to be sure.
    """

    hits: list[SearchHit]
    mode: Mode
    degraded: str | None = None
    dropped: int = 0
    considered: int = 0
    match: dict[str, Match] = field(default_factory=dict)
    thin: bool = False

    @property
    def strong(self) -> list[SearchHit]:
        """The hits labelled ``strong``."""
        return [hit for hit in self.hits if self.match.get(hit.record.id) == "strong"]


async def has_vectors(store: Store) -> bool:
    """True when the store holds at least one vector that :func:`agentctx.embeddings.vecstore.nearest` searches."""
    if store.capabilities.vec_version:
        row = await store.row("SELECT EXISTS (SELECT 1 FROM records_vec)")
        return bool(row[0])
    table = await store.row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (BLOB_TABLE,)
    )
    if table is None:
        return False
    row = await store.row(f"SELECT EXISTS (SELECT 1 FROM {BLOB_TABLE})")
    return bool(row[0])


async def vector_ranking(
    store: Store, vector: Any, query: SearchQuery, depth: int, *, model: str | None = None
) -> list[tuple[Record, float]]:
    """Up to ``depth`` records nearest to ``vector`` that pass ``query``'s filters, with similarity.

    The nearest neighbours come unfiltered, so the pool grows fourfold while too few of them pass
    and more vectors are left (up to :data:`VECTOR_MAX`). ``model`` (the one that made ``vector``)
    must own the stored vectors, else a ``ValueError`` (:func:`agentctx.embeddings.vecstore.nearest`).
    """
    from agentctx.embeddings import vecstore

    where, params = keyword.filters(
        keyword.scope_projects(query.project_id, query.scope),
        tuple(query.types),
        query.as_of,
        query.include_superseded,
        tuple(query.exclude_ids),
    )
    # CROSS JOIN: the ids drive the lookups (by primary key); left to itself, the planner scans
    # the project's records instead (many times slower in a large store)
    sql = (
        f"SELECT {_COLUMNS_SQL} FROM json_each(?) AS j CROSS JOIN records AS r ON r.id = j.value "
        f"WHERE {where}"
    )
    pool = min(max(2 * depth, DEPTH), VECTOR_MAX)
    while True:
        near = await vecstore.nearest(store, vector, pool, model=model)
        if not near:
            return []
        ids = [record_id for record_id, _ in near]
        rows = await store.rows(sql, [json.dumps(ids), *params])
        passing = {row["id"]: Record.from_row(row) for row in rows}
        found = [(passing[i], sim) for i, sim in near if i in passing]
        if len(found) >= depth or len(near) < pool or pool >= VECTOR_MAX:
            return found[:depth]
        pool = min(pool * 4, VECTOR_MAX)


async def hybrid_search(
    store: Store,
    query: SearchQuery,
    embedder: Embedder | None,
    *,
    floor: Floor | None = None,
    within: Collection[str] | None = None,
) -> Ranked:
    """``query`` ranked by keywords and, with an embedder, by vectors too, fused with RRF.

    Without an embedder this is :meth:`Store.search` (mode ``keyword``, rerank scores). A failing
    vector search (e.g. stored vectors of another size) falls back to keywords, saying so in
    ``degraded`` (the caller decides whether to log it). ``floor`` None keeps every hit;
    ``within`` keeps only those ids (before the floor judges them).
    """
    depth = max(DEPTH, query.limit)
    found = await store.search(replace(query, limit=depth))
    labels = floor if found.degraded is None else None  # no term weights in the LIKE fallback
    if found.degraded is not None or query.as_of is not None or query.include_superseded:
        floor = None  # the past is searched on purpose: every hit, labelled
    similarity: dict[str, float] | None = None
    judge = KeywordJudge(store, query.text)  # one weighing of the query for the floor and labels
    if embedder is None:
        hits: list[SearchHit] = found.hits
        mode: Mode = "keyword"
        degraded = found.degraded
    else:
        try:
            vector = await embedder.embed_query(query.text)
            nearest = await vector_ranking(
                store, vector, query, min(depth, VECTOR_MAX), model=embedder.name
            )
        except (sqlean.Error, ValueError) as exc:
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            note = f"vector search failed ({reason}); keyword ranking only"
            degraded = "; ".join(filter(None, [found.degraded, note]))
            ranked = await _judged(query, found.hits, floor, within, None, "keyword", judge)
            ranked = await _labelled(ranked, labels, None, judge)
            return replace(ranked, degraded=degraded)
        records = {hit.record.id: hit.record for hit in found.hits}
        similarity = {}
        for record, sim in nearest:
            records.setdefault(record.id, record)
            similarity[record.id] = sim
        fused = keyword.rrf(
            [[hit.record.id for hit in found.hits], [record.id for record, _ in nearest]]
        )
        hits = [SearchHit(records[i], score) for i, score in fused]
        mode = "hybrid"
        degraded = found.degraded
    ranked = await _judged(query, hits, floor, within, similarity, mode, judge)
    ranked = await _labelled(ranked, labels, similarity, judge)
    return replace(ranked, degraded=degraded)


async def _labelled(
    ranked: Ranked, floor: Floor | None, similarity: Mapping[str, float] | None, judge: KeywordJudge
) -> Ranked:
    """``ranked`` with each hit's label (:func:`strength`); unchanged without a ``floor``."""
    if floor is None or not ranked.hits:
        return ranked
    content = keyword.content(judge.terms)
    scores = await judge.relevance([hit.record.id for hit in ranked.hits])
    sims = similarity or {}
    match = {
        hit.record.id: strength(
            floor,
            sims.get(hit.record.id),
            scores.get(hit.record.id, 0.0),
            content,
            hybrid=similarity is not None,
        )
        for hit in ranked.hits
    }
    return replace(ranked, match=match, thin=content < floor.min_content)


async def _judged(
    query: SearchQuery,
    hits: Sequence[SearchHit],
    floor: Floor | None,
    within: Collection[str] | None,
    similarity: Mapping[str, float] | None,
    mode: Mode,
    judge: KeywordJudge,
) -> Ranked:
    """The first ``query.limit`` hits (of ``within``) that pass ``floor``, judged in batches.

    Hybrid mode (``similarity`` given) with a cosine floor keeps a hit at or above it without a
    keyword lookup; a hit outside the vector ranking has no similarity and is judged by keywords.
    """
    pool = [hit for hit in hits if within is None or hit.record.id in within]
    considered = len(hits)
    if floor is None or floor.relevance <= 0 or (mode == "hybrid" and floor.similarity is None):
        return Ranked(pool[: query.limit], mode, considered=considered)
    needed = floor.relevance
    if similarity is not None:
        needed = floor.keyword_alone
    sims = similarity or {}
    vouched = floor.similarity if similarity is not None else None
    kept: list[SearchHit] = []
    dropped = 0
    for start in range(0, len(pool), JUDGE_BATCH):
        batch = pool[start : start + JUDGE_BATCH]
        unsure = [
            h.record.id for h in batch if vouched is None or sims.get(h.record.id, -1.0) < vouched
        ]
        scores = await judge.relevance(unsure)
        for hit in batch:
            if hit.record.id not in unsure or scores.get(hit.record.id, 0.0) >= needed:
                kept.append(hit)
            else:
                dropped += 1
        if len(kept) >= query.limit:
            break
    return Ranked(kept[: query.limit], mode, dropped=dropped, considered=considered)


class KeywordJudge:
    """The keyword relevance of records to one query text (:func:`agentctx.core.search.judge`, the
    hook's measure), with the query's term weights fetched once and each record judged once."""

    def __init__(self, store: Store, text: str) -> None:
        self.store = store
        self.terms = keyword.query_terms(text)
        self._weights: tuple[list[str], dict[str, float], float, int] | None = None
        self._known: dict[str, float] = {}

    async def relevance(self, ids: Sequence[str]) -> dict[str, float]:
        """Exact relevance by id (0 for a record that matches none of the searched terms)."""
        if not ids or not self.terms:
            return {}
        if self._weights is None:
            self._weights = await self.store.run(keyword.weigh(self.terms))
        chosen, weights, denominator, matches = self._weights
        unknown = [i for i in dict.fromkeys(ids) if i not in self._known]
        if unknown:
            self._known |= await self.store.run(
                keyword.judge(chosen, weights, denominator, unknown, matches=matches)
            )
        return {i: self._known[i] for i in ids}


class QueryModel:
    """A query embedding model for a long-lived process: loaded once, in the background, on demand.

    Use inside :meth:`running` (its task group runs the load; leaving it abandons a load still in
    progress). ``load`` maps the settings to a model or None; by default
    :func:`agentctx.embeddings.models.load_model` (imported in the worker thread, so the caller never pays for
    numpy and fastembed).
    """

    def __init__(
        self,
        settings: Mapping[str, Any],
        load: Callable[[Mapping[str, Any]], Embedder | None] | None = None,
    ) -> None:
        self.settings = dict(settings)
        self._load = load
        self._embedder: Embedder | None = None
        self._state: ModelState = "idle" if self.settings.get("embeddings", True) else "off"
        self._tasks: TaskGroup | None = None
        self._done: anyio.Event | None = None
        #: True once a search found vectors in the store (then never checked again: a full vec0
        #: table answers ``EXISTS`` in milliseconds, an empty one at once)
        self.vectors_seen = False

    @property
    def state(self) -> ModelState:
        """``idle`` (never asked for), ``loading``, ``ready`` or ``off`` (off or failed: for good)."""
        return self._state

    @asynccontextmanager
    async def running(self) -> AsyncIterator[QueryModel]:
        """A task group for the background load, cancelled on exit."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            self._done = anyio.Event()
            if self._state in ("ready", "off"):  # a load already ended (in an earlier run)
                self._done.set()
            try:
                yield self
            finally:
                self._tasks = None
                if self._state == "loading":  # abandoned: a later run may load it again
                    self._state = "idle"
                tasks.cancel_scope.cancel()

    def get(self) -> Embedder | None:
        """The model when it is ready, else None (use :meth:`request` to start loading it)."""
        return self._embedder

    def request(self) -> None:
        """Start loading the model in the background, once; never waits for it."""
        if self._state != "idle" or self._tasks is None:
            return
        self._state = "loading"
        self._tasks.start_soon(self._run)

    async def wait(self) -> Embedder | None:
        """Start the load if needed and wait for its end: the model, or None when it is off.

        Outside :meth:`running` the load runs in the calling task.
        """
        if self._tasks is None or self._done is None:
            if self._state == "idle":
                self._state = "loading"
                await self._run()
            return self._embedder
        self.request()
        await self._done.wait()
        return self._embedder

    async def _run(self) -> None:
        try:
            # abandoned on cancel: a server shutting down never waits for a model load
            model = await anyio.to_thread.run_sync(self._load_sync, abandon_on_cancel=True)
        except Exception as exc:  # a loader bug must not end the server: keyword-only
            log.warning("embeddings off: the model load failed (%s: %s)", type(exc).__name__, exc)
            model = None
        self._embedder = model
        self._state = "ready" if model is not None else "off"
        if self._done is not None:
            self._done.set()

    def _load_sync(self) -> Embedder | None:
        if self._load is not None:
            return self._load(self.settings)
        from agentctx.embeddings import models

        models.use_one_thread()  # one query at a time, beside the prompt hook (ADR-017)
        return models.load_model(self.settings)

    def disable(self, reason: str) -> None:
        """Keyword-only from now on (e.g. the stored vectors do not fit the model)."""
        if self._state != "off":
            log.warning("hybrid search off for this process: %s", reason)
        self._embedder = None
        self._state = "off"


async def search(
    store: Store, query: SearchQuery, model: QueryModel, *, within: Collection[str] | None = None
) -> Ranked:
    """The server's ranking: hybrid when the model is ready and the store has vectors, with the
    floor of the model's settings.

    The first search that finds vectors while the model is idle starts loading it; until it is
    ready, and for good when it cannot load, the ranking is keywords alone.
    """
    embedder = model.get()
    if model.state == "off" or (not model.vectors_seen and not await has_vectors(store)):
        embedder = None
    else:
        model.vectors_seen = True
        if embedder is None:
            model.request()
    floor = floor_for(model.settings, embedder.name if embedder is not None else None)
    ranked = await hybrid_search(store, query, embedder, floor=floor, within=within)
    if embedder is not None and ranked.mode == "keyword":
        model.disable(ranked.degraded or "the vector search failed")
    return ranked
