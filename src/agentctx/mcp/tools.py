"""The MCP tools' bodies: thin adapters over the library (P-8), loaded after the handshake.

:mod:`agentctx.mcp.server` declares the tools (names, descriptions, argument and result schemas:
what ``initialize`` and ``tools/list`` need) and imports this module only once it has answered
``tools/list``, or at the first tool call, in a worker thread: the store, the rankings, the
CLAUDE.md drift report and the project's identity never slow the handshake down.

:func:`opened` opens what the tools share for the server's life (:class:`Backend`): the project,
identified once from the folder, one :class:`~agentctx.store.Store` and the query model of hybrid
search (:class:`~agentctx.retrieval.hybrid.QueryModel`, loaded lazily in the background). Each method of
:class:`Backend` is one tool's body; library errors become tool errors carrying their message (P-5).

``ctx_search`` ranks through :mod:`agentctx.retrieval.hybrid`: keyword and vector rankings fused with RRF once
the query model is ready and the store has vectors; keywords alone until then (the result's ``mode``
says which). The graph reads (``ctx_related`` and the ``file`` filter of ``ctx_search``) are the SQL
of :mod:`agentctx.mcp.graph`, run on a short read-only connection in a worker thread.
"""

from __future__ import annotations

import functools
import logging
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, cast

import anyio
import sqlean
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from agentctx import config
from agentctx.claude import claudemd
from agentctx.core import clock
from agentctx.core.errors import AgentctxError, NotFoundError, ValidationError
from agentctx.core.project import ProjectIdentity, identify
from agentctx.core.search import TYPE_WEIGHT, query_terms, scope_projects
from agentctx.core.text import for_model
from agentctx.mcp import graph
from agentctx.mcp.models import (
    ClaudeMdReport,
    IndexEntry,
    MissingRecord,
    ProjectOverview,
    RecordDetail,
    Records,
    RelatedEntry,
    RelatedRecords,
    SearchResults,
    SessionSummary,
    StaleText,
    Superseded,
)
from agentctx.mcp.server import GET_MAX
from agentctx.records import NewRecord, Record, RecordType
from agentctx.retrieval import hybrid
from agentctx.store import SearchHit, SearchQuery, Store, inventory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

RELATED_MAX = 20
#: ``ctx_search`` with ``file`` filters ranked hits: it ranks this many first, four times more
#: while too few are linked to the file and the search is not exhausted, up to the maximum.
FILE_SEARCH_POOL = 250
FILE_SEARCH_POOL_MAX = 64_000

log = logging.getLogger("agentctx.mcp")
P = ParamSpec("P")
R = TypeVar("R")

#: ``ctx_search``'s note when every hit is labelled weak (hybrid.strength).
_NO_STRONG = (
    "no strong match: these hits only share words or a topic with the query; "
    "the store may not answer it"
)
_NO_STRONG_THIN = (
    "no strong match: the query has too few distinctive words to tell; "
    "name the thing you look for (a library, file, error or term)"
)

_COMMANDS = ("test", "build", "lint", "format", "typecheck", "run")
_NAMED_FACTS = ("stack", "languages", "package_manager", "entry_points")


def _translated(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Library errors become tool errors carrying their message (P-5); every string of the
    answer goes to the model without invisible characters (:func:`_for_model`)."""

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return cast("R", _for_model(await fn(*args, **kwargs)))
        except AgentctxError as exc:
            raise ToolError(for_model(str(exc))) from exc
        except sqlean.Error as exc:
            raise ToolError(
                f"the database failed ({exc}); run `agentctx doctor` for a fix"
            ) from exc

    return call


def _for_model(value: Any) -> Any:
    """A tool's answer with every string through :func:`agentctx.core.text.for_model` (invisible
    characters removed, line boundaries ``\\n``; issue 24): the one way out of the tools."""
    if isinstance(value, str):
        return for_model(value)
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return value.model_copy(update={name: _for_model(getattr(value, name)) for name in fields})
    if isinstance(value, list | tuple):
        return [_for_model(item) for item in value]
    if isinstance(value, dict):
        return {_for_model(k): _for_model(v) for k, v in value.items()}
    return value


def settings() -> dict[str, Any]:
    """The embedding settings; an unreadable config means keyword-only (one log line)."""
    try:
        return config.load()
    except AgentctxError as exc:
        log.warning("agentctx: %s; hybrid search off", exc)
        return {"embeddings": False}


@asynccontextmanager
async def opened(folder: str, model: hybrid.QueryModel | None) -> AsyncIterator[Backend]:
    """The tools' backend for ``folder``'s project, open for the ``async with`` block.

    A store that cannot be opened still gives a backend: every tool then answers with the reason,
    which says what to do, where a server that dies shows Claude Code only "failed to connect".
    """
    project = await anyio.to_thread.run_sync(identify, folder)  # git and the file system
    try:
        store = await Store.open()
    except AgentctxError as exc:
        log.error("agentctx: %s", exc)
        yield Backend(project, folder, error=str(exc))
        return
    try:
        async with (model or hybrid.QueryModel(settings())).running() as running:
            yield Backend(project, folder, store, model=running)
    finally:
        await store.close()


@dataclass(frozen=True, slots=True)
class Backend:
    """What the tools share: the project, the store (None if it could not be opened) and the
    query model for hybrid search; one method per tool."""

    project: ProjectIdentity
    project_dir: str
    store: Store | None = None
    error: str | None = None
    model: hybrid.QueryModel | None = None

    def require_store(self) -> Store:
        """The open store, or a tool error saying why there is none."""
        if self.store is None:
            raise ToolError(f"the agentctx store could not be opened: {self.error}")
        return self.store

    # -- ctx_search ----------------------------------------------------------------------------

    @_translated
    async def search(
        self,
        query: str,
        type: RecordType | None,
        file: str | None,
        scope: Literal["project", "global"],
        as_of: str | None,
        limit: int,
    ) -> SearchResults:
        """``ctx_search``: a compact index of the best hits, best first."""
        store = self.require_store()
        if not query_terms(query):
            raise ValidationError(
                "the query has no searchable words (stop words and one-letter words are skipped): "
                "use a few distinctive keywords"
            )
        moment = _parse_as_of(as_of)
        linked: set[str] | None = None
        if file is not None:
            names = await self._file_names(file)
            pid = self.project.project_id
            linked = await store.read_sync(lambda conn: graph.linked_ids(conn, pid, names))
            if not linked:
                return SearchResults(results=[], note=f"no records are linked to {names[0]}")
        search = SearchQuery(
            text=query,
            project_id=self.project.project_id,
            types=(type,) if type else (),
            scope="all" if scope == "project" else "global",
            as_of=moment,
            limit=limit,
        )
        if linked is None:
            result = await self._find(search)
            hits = result.hits
        else:
            result, hits = await self._find_linked(search, linked)
        notes = []
        if not hits and result.dropped:
            notes.append(
                f"nothing relevant found: {result.dropped} record(s) share a word with the query "
                "but none is close enough to it; the store has no answer to this, or try other words"
            )
        elif (
            hits
            and result.match
            and not any(result.match.get(h.record.id) == "strong" for h in hits)
        ):
            notes.append(_NO_STRONG_THIN if result.thin else _NO_STRONG)
        if result.mode == "keyword":
            notes.append(f"keyword-only search: {self._keyword_only_reason()}")
        note = "; ".join(notes) or None
        return SearchResults(
            results=[
                IndexEntry(
                    id=h.record.id,
                    type=h.record.type,
                    title=h.record.title,
                    age=clock.age_label(h.record.valid_from),
                    confidence=h.record.confidence,
                    score=float(f"{h.score:.4g}"),
                    match=result.match.get(h.record.id),
                )
                for h in hits
            ],
            mode=result.mode,
            note=note,
            degraded=result.degraded,
        )

    def _keyword_only_reason(self) -> str:
        """Why a search just ranked by keywords alone (the model's state and the settings)."""
        model = self.model
        if model is None or not model.settings.get("embeddings", True):
            return "embeddings are off (`agentctx config set embeddings on`)"
        if model.state == "off":
            return (
                "the embedding model is not available (not downloaded, or it does not load: "
                "`agentctx doctor`, `agentctx model fetch`)"
            )
        if not model.vectors_seen:
            return "no record has a vector yet (consolidation embeds them)"
        return "the embedding model is still loading (hybrid from a later search on)"

    async def _find(self, query: SearchQuery, within: set[str] | None = None) -> hybrid.Ranked:
        """Rank records for a query: hybrid (keywords and vectors, RRF) when the model is ready
        and the store has vectors, else keywords alone (FTS5 BM25 and the rerank of core/search.py);
        hits below the relevance floor are left out (hybrid.Floor)."""
        store = self.require_store()
        if self.model is None:
            floor = hybrid.floor_for(settings(), None)
            return await hybrid.hybrid_search(store, query, None, floor=floor, within=within)
        return await hybrid.search(store, query, self.model, within=within)

    async def _find_linked(
        self, search: SearchQuery, linked: set[str]
    ) -> tuple[hybrid.Ranked, list[SearchHit]]:
        """The best ``search.limit`` hits among ``linked`` ids.

        SearchQuery cannot restrict the ids it ranks, so this ranks a pool and keeps the linked ids
        (before the relevance floor judges them), widening the pool until enough linked hits are in
        it or every matching record was ranked.
        """
        pool = FILE_SEARCH_POOL
        while True:
            result = await self._find(replace(search, limit=pool), within=linked)
            hits = result.hits[: search.limit]
            if (
                len(hits) >= search.limit
                or result.considered < pool
                or pool >= FILE_SEARCH_POOL_MAX
            ):
                return result, hits
            pool *= 4

    # -- ctx_get, ctx_record, ctx_supersede ----------------------------------------------------

    @_translated
    async def get(self, ids: list[str]) -> Records:
        """``ctx_get``: full records by id, and the ids not found."""
        store = self.require_store()
        if len(ids) > GET_MAX:
            raise ValidationError(
                f"ctx_get takes at most {GET_MAX} ids per call (got {len(ids)}): "
                "ask for the ones you need most, then call it again if you must"
            )
        wanted = [i.strip() for i in ids if i.strip()]
        if not wanted:
            raise ValidationError("ctx_get needs at least one record id: find ids with ctx_search")
        found, missing = await store.get_many(wanted, self.project.project_id)
        if not found:
            raise NotFoundError(
                f"no record with id {', '.join(missing)} in this project or the global records: "
                "find ids with ctx_search"
            )
        return Records(records=[await record_detail(store, r) for r in found], missing=missing)

    @_translated
    async def record(
        self,
        type: RecordType,
        title: str,
        body: str,
        supersedes: str | None,
        scope: Literal["project", "global"],
        cues: Sequence[str] = (),
    ) -> RecordDetail:
        """``ctx_record``: an explicit record of a stated fact (with its retrieval cues, if any)."""
        store = self.require_store()
        created = await store.add(
            NewRecord(
                type=type,
                title=title,
                body=body,
                project_id=self.project.project_id,
                scope=scope,
                confidence="explicit",
                source="mcp_tool",
                supersedes=(supersedes or "").strip() or None,
                key=self.project.checkout if type == "handover" else None,
                cues=list(cues),
            )
        )
        await store.touch_project(self.project)
        return await record_detail(store, created)

    @_translated
    async def supersede(
        self, old_id: str, new_body: str, rationale: str, new_title: str | None = None
    ) -> Superseded:
        """``ctx_supersede``: a new version of a recorded fact (a new title, when given)."""
        store = self.require_store()
        old, new = await store.supersede(
            old_id.strip(),
            new_body,
            rationale,
            title=new_title if new_title and new_title.strip() else None,
            project_id=self.project.project_id,
            source="mcp_tool",
            confidence="explicit",
        )
        await store.touch_project(self.project)
        return Superseded(old_id=old.id, new_id=new.id, type=new.type, title=new.title)

    # -- ctx_project, ctx_related, ctx_sync_claudemd --------------------------------------------

    @_translated
    async def overview(self) -> ProjectOverview:
        """``ctx_project``: the project's identity, profile facts, counts and last session."""
        store = self.require_store()
        pid = self.project.project_id
        facts: dict[str, str] = {}
        for record in await store.list_records(pid, types=("profile",), include_superseded=False):
            facts.setdefault(record.key or record.title, record.body)
        commands = {
            name: facts.pop(f"{name}_command") for name in _COMMANDS if f"{name}_command" in facts
        }
        named = {key: facts.pop(key, None) for key in _NAMED_FACTS}
        status = await inventory.status(store, pid)
        sessions = status["recent_sessions"]
        last = next((s for s in sessions if s["started_at"]), sessions[0] if sessions else None)
        return ProjectOverview(
            name=self.project.name,
            project_id=pid,
            root=self.project.root,
            remote=self.project.remote,
            stack=named["stack"],
            languages=named["languages"],
            package_manager=named["package_manager"],
            commands=commands,
            entry_points=named["entry_points"],
            other_facts=facts,
            counts=status["counts"],
            superseded=status["superseded"],
            last_session=None
            if last is None
            else SessionSummary(
                session_id=last["session_id"],
                started_at=last["started_at"],
                ended_at=last["ended_at"],
                tokens_injected=last["tokens_injected"],
                injections=last["injections"],
            ),
        )

    @_translated
    async def related(self, file: str) -> RelatedRecords:
        """``ctx_related``: current records within ``graph.RELATED_HOPS`` links of a file (or of a
        module, package or symbol of that name)."""
        store = self.require_store()
        names = await self._file_names(file)
        entity = file.strip()
        pid = self.project.project_id
        allowed = scope_projects(pid, "all")

        def read(conn: Any) -> tuple[list[str], bool, list[Any]]:
            kinds = graph.anchor_kinds(conn, pid, names, entity)
            return (kinds, *graph.related_rows(conn, pid, allowed, names, entity))

        kinds, known, rows = await store.read_sync(read)
        found = [(Record.from_row(row), int(row["hops"])) for row in rows]
        found.sort(key=lambda item: item[0].valid_from, reverse=True)
        found.sort(key=lambda item: (item[1], -TYPE_WEIGHT.get(item[0].type, 1.0)))
        return RelatedRecords(
            file=names[0] if not kinds or kinds[0] == "file" else entity,
            known=known,
            results=[
                RelatedEntry(
                    id=record.id,
                    type=record.type,
                    title=record.title,
                    age=clock.age_label(record.valid_from),
                    confidence=record.confidence,
                    hops=hops,
                )
                for record, hops in found[:RELATED_MAX]
            ],
        )

    async def _file_names(self, file: str) -> list[str]:
        """The node names of ``file`` (:func:`graph.file_names`): file system lookups, so in a
        worker thread; the loop keeps answering other requests meanwhile."""
        project_dir, root = self.project_dir, self.project.root
        return await anyio.to_thread.run_sync(lambda: graph.file_names(project_dir, root, file))

    @_translated
    async def sync_claudemd(self) -> ClaudeMdReport:
        """``ctx_sync_claudemd``: the read-only drift report between the store and CLAUDE.md."""
        store = self.require_store()
        files = await claudemd.discover(self.project_dir, self.project.root)
        target = files[0].path if files else os.path.join(self.project.root, "CLAUDE.md")
        # judged as consolidation judges (keywords and meaning), so the report and the digest's
        # drift note agree; without a model (off, offline) keywords alone, as the method field says
        embedder = await self.model.wait() if self.model is not None else None
        sync = await claudemd.report(
            store,
            self.project.project_id,
            files=files,
            target=target,
            root=self.project.root,
            embedder=embedder,
        )
        return ClaudeMdReport(
            files=sync.files,
            checked=sync.checked,
            missing=[
                MissingRecord(
                    id=m.id,
                    type=m.type,
                    title=m.title,
                    coverage=m.coverage,
                    missing_words=m.missing_words,
                )
                for m in sync.missing
            ],
            missing_total=sync.missing_total,
            contradictions=[
                StaleText(
                    id=c.id,
                    title=c.title,
                    superseded_by=c.superseded_by,
                    current_title=c.current_title,
                    file=c.file,
                    line=c.line,
                    text=c.text,
                )
                for c in sync.contradictions
            ],
            proposed_diff=sync.diff,
            method=sync.method,
        )


def _parse_as_of(text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    try:
        return clock.parse_time(text)
    except ValueError:
        raise ValidationError(
            f"as_of {text!r} is not an ISO date or date-time (e.g. 2026-04-01 or 2026-04-01T12:00Z)"
        ) from None


async def record_detail(store: Store, record: Record) -> RecordDetail:
    """A record as ``ctx_get`` and ``ctx_record`` return it, with the ids it superseded."""
    chain = await store.history(record.id)
    return RecordDetail(
        id=record.id,
        type=record.type,
        title=record.title,
        body=record.body,
        scope=record.scope,
        confidence=record.confidence,
        source=record.source,
        current=record.is_current,
        valid_from=record.valid_from,
        recorded_at=record.recorded_at,
        superseded_at=record.superseded_at,
        superseded_by=record.superseded_by,
        supersedes=[r.id for r in chain if r.superseded_by == record.id],
        rationale=record.rationale,
        key=record.key,
        keywords=record.keywords,
        cues=list(record.cues),
        pinned=record.pinned,
        access_count=record.access_count,
        last_accessed=record.last_accessed,
        session_id=record.session_id,
    )
