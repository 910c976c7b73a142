"""The MCP server: seven tools that give Claude the store's depth on demand (ADR-008).

``agentctx mcp`` serves it on stdio; Claude Code starts it with the session. A typed lifespan opens one
:class:`~agentctx.store.Store` for the server's life and identifies the project once, from
``CLAUDE_PROJECT_DIR`` or else the working directory. Each tool is a thin adapter over library calls
(P-8) whose return type is a pydantic model, so the SDK publishes an output schema and sends structured
content. Progressive disclosure: ``ctx_search`` answers with a compact index without bodies, and
``ctx_get`` with the full records of the few ids Claude picks from it.

Errors: an :class:`~agentctx.errors.AgentctxError` (or a driver error) becomes a tool error that
carries its message (P-5); the SDK validates arguments against the input schema and reports a
mismatch the same way, so a bad call never takes the server down. Nothing but the protocol reaches
stdout: the SDK moves stdio onto private descriptors, and logging goes to stderr.

``ctx_search`` ranks through :mod:`agentctx.hybrid`: keyword and vector rankings fused with RRF once
the query model, loaded lazily in the background by the lifespan's :class:`~agentctx.hybrid.QueryModel`,
is ready and the store has vectors; keywords alone until then (the result's ``mode`` says which).

The results are the pydantic models of :mod:`agentctx.mcp.models`; the graph reads (``ctx_related``
and the ``file`` filter of ``ctx_search``) are the SQL of :mod:`agentctx.mcp.graph`, run on a short
read-only connection in a worker thread.

No ``from __future__ import annotations`` here: the SDK evaluates the tools' signatures and pydantic
the models' fields at run time, so every name they mention is a run-time import.
"""

import functools
import inspect
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import sqlean
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from agentctx import __version__, claudemd, clock, config, hybrid, inventory, retrieval
from agentctx.claudemd import SYNC_BEGIN as SYNC_BEGIN
from agentctx.claudemd import SYNC_END as SYNC_END
from agentctx.claudemd import SYNC_MAX as SYNC_MAX
from agentctx.errors import AgentctxError, NotFoundError, ValidationError
from agentctx.mcp import graph as mcp_graph
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
    record_detail,
)
from agentctx.project import ProjectIdentity, identify
from agentctx.records import NewRecord, Record, RecordType
from agentctx.store import SearchHit, SearchQuery, Store

SEARCH_MAX = 15
GET_MAX = 10
RELATED_MAX = 20
#: ``ctx_search`` with ``file`` filters ranked hits: it ranks this many first, four times more
#: while too few are linked to the file and the search is not exhausted, up to the maximum.
FILE_SEARCH_POOL = 250
FILE_SEARCH_POOL_MAX = 64_000

INSTRUCTIONS = (
    "agentctx is this project's memory: typed, versioned records of decisions, conventions, "
    "preferences, discoveries, bugfixes, handovers and the project profile, from earlier sessions. "
    "Before you make or change a design choice, work in unfamiliar code, or when the user refers to "
    "earlier work or asks how something is done here, call ctx_search with a few keywords: it returns "
    "a compact index (ids and titles, no bodies); then call ctx_get with only the few ids you need "
    "(at most 10) to read them in full. Before editing a file, ctx_related shows the records linked "
    "to it; ctx_project gives the stack, commands and entry points. When the user states a decision, "
    "convention or preference worth keeping, save it with ctx_record; when a recorded fact changes, "
    "use ctx_supersede rather than recording a contradiction. ctx_sync_claudemd reports what "
    "CLAUDE.md lacks and proposes a diff; it never writes."
)

log = logging.getLogger("agentctx.mcp")
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# -- state and plumbing ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerState:
    """What the lifespan opens once: the project, the store (None if it could not be opened) and
    the query model for hybrid search."""

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


ServerContext = Context[ServerState, Any]


def _lifespan(
    project_dir: str | None, model: hybrid.QueryModel | None
) -> Callable[[MCPServer[ServerState]], AbstractAsyncContextManager[ServerState]]:
    folder = os.path.abspath(project_dir or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    project = identify(folder)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        try:
            store = await Store.open()
        except AgentctxError as exc:
            # Serve anyway: every tool then answers with this message, which says what to do,
            # where a server that dies at start-up shows Claude Code only "failed to connect".
            log.error("agentctx: %s", exc)
            yield ServerState(project, folder, error=str(exc))
            return
        try:
            async with (model or hybrid.QueryModel(_settings())).running() as running:
                yield ServerState(project, folder, store, model=running)
        finally:
            await store.close()

    return lifespan


def _settings() -> dict[str, Any]:
    """The embedding settings; an unreadable config means keyword-only (one log line)."""
    try:
        return config.load()
    except AgentctxError as exc:
        log.warning("agentctx: %s; hybrid search off", exc)
        return {"embeddings": False}


def _state(ctx: ServerContext) -> ServerState:
    return ctx.request_context.lifespan_context


def _translated(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Library errors become tool errors carrying their message (P-5)."""

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except AgentctxError as exc:
            raise ToolError(str(exc)) from exc
        except sqlean.Error as exc:
            raise ToolError(
                f"the database failed ({exc}); run `agentctx doctor` for a fix"
            ) from exc

    return call


async def _find(
    state: ServerState, query: SearchQuery, within: set[str] | None = None
) -> hybrid.Ranked:
    """Rank records for a query: hybrid (keywords and vectors, RRF) when the model is ready and the
    store has vectors, else keywords alone (FTS5 BM25 and the rerank of retrieval.py); hits below
    the relevance floor are left out (hybrid.Floor)."""
    store = state.require_store()
    if state.model is None:
        floor = hybrid.floor_for(_settings(), None)
        return await hybrid.hybrid_search(store, query, None, floor=floor, within=within)
    return await hybrid.search(store, query, state.model, within=within)


async def _read(store: Store, query: Callable[[Any], T]) -> T:
    """Run ``query(conn)`` on a short read-only connection to the store, in a worker thread."""
    return await store.read_sync(query)


# -- the tools -------------------------------------------------------------------------------------

TypeArg = Annotated[RecordType | None, Field(description="Only records of this type.")]
FileArg = Annotated[
    str | None,
    Field(description="Only records linked to this file: a path relative to the project root."),
]
ScopeArg = Annotated[
    Literal["project", "global"],
    Field(
        description="project (default): this project's records and the global ones; global: only global ones."
    ),
]
AsOfArg = Annotated[
    str | None,
    Field(
        description="ISO date or date-time: what was true then, superseded records included "
        "(a bare date means the end of that day)."
    ),
]


async def ctx_search(
    ctx: ServerContext,
    query: Annotated[
        str, Field(description="A few distinctive keywords: names, terms, libraries.")
    ],
    type: TypeArg = None,
    file: FileArg = None,
    scope: ScopeArg = "project",
    as_of: AsOfArg = None,
    limit: Annotated[int, Field(ge=1, le=SEARCH_MAX, description="At most 15.")] = 10,
) -> SearchResults:
    """Search the project's memory by keywords (and by meaning once the embedding model is
    loaded); returns a compact index (id, type, title, age, confidence, score), no bodies. Call
    ctx_get with the ids you need to read them in full."""
    state = _state(ctx)
    store = state.require_store()
    if not retrieval.query_terms(query):
        raise ValidationError(
            "the query has no searchable words (stop words and one-letter words are skipped): "
            "use a few distinctive keywords"
        )
    moment = _parse_as_of(as_of)
    linked: set[str] | None = None
    if file is not None:
        names = mcp_graph.file_names(state.project_dir, state.project.root, file)
        pid = state.project.project_id
        linked = await _read(store, lambda conn: mcp_graph.linked_ids(conn, pid, names))
        if not linked:
            return SearchResults(results=[], note=f"no records are linked to {names[0]}")
    search = SearchQuery(
        text=query,
        project_id=state.project.project_id,
        types=(type,) if type else (),
        scope="all" if scope == "project" else "global",
        as_of=moment,
        limit=limit,
    )
    if linked is None:
        result = await _find(state, search)
        hits = result.hits
    else:
        result, hits = await _find_linked(state, search, linked)
    note = None
    if not hits and result.dropped:
        note = (
            f"nothing relevant found: {result.dropped} record(s) share a word with the query but "
            "none is close enough to it; the store has no answer to this, or try other words"
        )
    return SearchResults(
        results=[
            IndexEntry(
                id=h.record.id,
                type=h.record.type,
                title=h.record.title,
                age=clock.age_label(h.record.valid_from),
                confidence=h.record.confidence,
                score=float(f"{h.score:.4g}"),
            )
            for h in hits
        ],
        mode=result.mode,
        note=note,
        degraded=result.degraded,
    )


async def _find_linked(
    state: ServerState, search: SearchQuery, linked: set[str]
) -> tuple[hybrid.Ranked, list[SearchHit]]:
    """The best ``search.limit`` hits among ``linked`` ids.

    SearchQuery cannot restrict the ids it ranks, so this ranks a pool and keeps the linked ids
    (before the relevance floor judges them), widening the pool until enough linked hits are in it
    or every matching record was ranked.
    """
    pool = FILE_SEARCH_POOL
    while True:
        result = await _find(state, replace(search, limit=pool), within=linked)
        hits = result.hits[: search.limit]
        if len(hits) >= search.limit or result.considered < pool or pool >= FILE_SEARCH_POOL_MAX:
            return result, hits
        pool *= 4


def _parse_as_of(text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    try:
        return clock.parse_time(text)
    except ValueError:
        raise ValidationError(
            f"as_of {text!r} is not an ISO date or date-time (e.g. 2026-04-01 or 2026-04-01T12:00Z)"
        ) from None


async def ctx_get(
    ctx: ServerContext,
    ids: Annotated[
        list[str],
        Field(
            description="1 to 10 record ids, from ctx_search or ctx_related.",
            json_schema_extra={"minItems": 1, "maxItems": GET_MAX},
        ),
    ],
) -> Records:
    """Read full records by id (1-10 per call), with their supersession links; ids not found in
    this project or the global records are listed as missing (an error when none is found)."""
    state = _state(ctx)
    store = state.require_store()
    if len(ids) > GET_MAX:
        raise ValidationError(
            f"ctx_get takes at most {GET_MAX} ids per call (got {len(ids)}): "
            "ask for the ones you need most, then call it again if you must"
        )
    wanted = [i.strip() for i in ids if i.strip()]
    if not wanted:
        raise ValidationError("ctx_get needs at least one record id: find ids with ctx_search")
    found, missing = await store.get_many(wanted, state.project.project_id)
    if not found:
        raise NotFoundError(
            f"no record with id {', '.join(missing)} in this project or the global records: "
            "find ids with ctx_search"
        )
    return Records(records=[await record_detail(store, r) for r in found], missing=missing)


async def ctx_record(
    ctx: ServerContext,
    type: RecordType,
    title: Annotated[str, Field(description="One line, at most 120 characters.")],
    body: Annotated[str, Field(description="The fact and its reason, at most 2,000 characters.")],
    supersedes: Annotated[
        str | None, Field(description="Id of the current record this one replaces.")
    ] = None,
    scope: Annotated[
        Literal["project", "global"],
        Field(
            description="project (default), or global for the user's own cross-project preferences."
        ),
    ] = "project",
) -> RecordDetail:
    """Record a fact the user stated or agreed to (a decision, convention, preference, ...) as an
    explicit record; returns it. To change a recorded fact, prefer ctx_supersede."""
    state = _state(ctx)
    store = state.require_store()
    created = await store.add(
        NewRecord(
            type=type,
            title=title,
            body=body,
            project_id=state.project.project_id,
            scope=scope,
            confidence="explicit",
            source="mcp_tool",
            supersedes=(supersedes or "").strip() or None,
            key=state.project.checkout if type == "handover" else None,
        )
    )
    await store.touch_project(state.project)
    return await record_detail(store, created)


async def ctx_supersede(
    ctx: ServerContext,
    old_id: Annotated[str, Field(description="Id of the current record that is no longer true.")],
    new_body: Annotated[str, Field(description="What is true now (the title is kept).")],
    rationale: Annotated[str, Field(description="Why it changed.")],
) -> Superseded:
    """Replace a recorded fact that changed: the old record is kept as history and marked
    superseded by a new version with the new body; returns both ids."""
    state = _state(ctx)
    store = state.require_store()
    old, new = await store.supersede(
        old_id.strip(),
        new_body,
        rationale,
        project_id=state.project.project_id,
        source="mcp_tool",
        confidence="explicit",
    )
    await store.touch_project(state.project)
    return Superseded(old_id=old.id, new_id=new.id, type=new.type, title=new.title)


_COMMANDS = ("test", "build", "lint", "format", "typecheck", "run")
_NAMED_FACTS = ("stack", "languages", "package_manager", "entry_points")


async def ctx_project(ctx: ServerContext) -> ProjectOverview:
    """The project: name, id, stack, commands (test, build, lint, ...), entry points, record counts
    by type and the last session."""
    state = _state(ctx)
    store = state.require_store()
    pid = state.project.project_id
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
        name=state.project.name,
        project_id=pid,
        root=state.project.root,
        remote=state.project.remote,
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


async def ctx_related(
    ctx: ServerContext,
    file: Annotated[str, Field(description="A path relative to the project root (or absolute).")],
) -> RelatedRecords:
    """Current records linked to a file through the store's graph (its entities and edges, up to
    3 links away), nearest first. Use before editing a file; read bodies with ctx_get."""
    state = _state(ctx)
    store = state.require_store()
    names = mcp_graph.file_names(state.project_dir, state.project.root, file)
    pid = state.project.project_id
    allowed = retrieval.scope_projects(pid, "all")
    known, rows = await _read(store, lambda conn: mcp_graph.related_rows(conn, pid, allowed, names))
    found = [(Record.from_row(row), int(row["hops"])) for row in rows]
    found.sort(key=lambda item: item[0].valid_from, reverse=True)
    found.sort(key=lambda item: (item[1], -retrieval.TYPE_WEIGHT.get(item[0].type, 1.0)))
    return RelatedRecords(
        file=names[0],
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


async def ctx_sync_claudemd(ctx: ServerContext) -> ClaudeMdReport:
    """Compare CLAUDE.md with the store (read-only): current explicit or reinforced decisions and
    conventions it does not mention, superseded text it still contains, and a proposed diff that
    appends the missing ones. Show the diff to the user; never apply it without their consent."""
    state = _state(ctx)
    store = state.require_store()
    files = await claudemd.discover(state.project_dir, state.project.root)
    target = files[0].path if files else os.path.join(state.project.root, "CLAUDE.md")
    # judged as consolidation judges (keywords and meaning), so the report and the digest's drift
    # note agree; without a model (off, offline) keywords alone, as the method field says
    embedder = await state.model.wait() if state.model is not None else None
    sync = await claudemd.report(
        store,
        state.project.project_id,
        files=files,
        target=target,
        root=state.project.root,
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


# -- the server ------------------------------------------------------------------------------------

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
#: (tool, title, annotations). ``ctx_get`` counts as read-only: it bumps access statistics but
#: changes no fact.
TOOLS: tuple[tuple[Callable[..., Awaitable[BaseModel]], str, ToolAnnotations], ...] = (
    (ctx_search, "Search project memory", _READ_ONLY),
    (ctx_get, "Get records", _READ_ONLY),
    (ctx_record, "Record a fact", _WRITE),
    (ctx_supersede, "Supersede a fact", _WRITE),
    (ctx_project, "Project overview", _READ_ONLY),
    (ctx_related, "Records related to a file", _READ_ONLY),
    (ctx_sync_claudemd, "CLAUDE.md drift report", _READ_ONLY),
)


def create_server(
    project_dir: str | None = None, *, model: hybrid.QueryModel | None = None
) -> MCPServer[ServerState]:
    """The agentctx MCP server; the project is ``project_dir``, else $CLAUDE_PROJECT_DIR, else cwd.

    ``model`` is the query model for hybrid search (default: one for the configured embedding
    settings, loaded on first need).
    """
    server = MCPServer(
        "agentctx",
        title="agentctx",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=_lifespan(project_dir, model),
        log_level="WARNING",
    )
    for tool, title, annotations in TOOLS:
        server.add_tool(
            _translated(tool),
            name=tool.__name__,
            title=title,
            description=" ".join(inspect.cleandoc(tool.__doc__ or "").split()),
            annotations=annotations,
            structured_output=True,
        )
    return server


async def serve(project_dir: str | None = None) -> None:
    """Serve the tools on stdio until the client closes the connection."""
    await create_server(project_dir).run_stdio_async()
