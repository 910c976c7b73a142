"""The MCP server: seven tools that give Claude the store's depth on demand (ADR-008).

``agentctx mcp`` serves it on stdio. Claude Code starts it with the session and sends its first
model request as soon as the server has listed its tools or its wait ran out, so this module holds
only what ``initialize`` and ``tools/list`` need: the tools' names, descriptions, argument schemas
(their signatures) and result schemas (:mod:`agentctx.mcp.models`). Their bodies, the store, the
rankings and the project's identity live in :mod:`agentctx.mcp.tools`, which the lifespan's
:class:`ServerState` imports in a worker thread and opens once the tools are listed (or at the first
tool call): one :class:`~agentctx.store.Store` and one query model for the server's life. The SDK's
own import is the floor of the start-up (benchmarks/results/mcp.md,
docs/upstream/mcp-sdk-import-time.md).

Progressive disclosure: ``ctx_search`` answers with a compact index without bodies, and ``ctx_get``
with the full records of the few ids Claude picks from it. Errors: an
:class:`~agentctx.core.errors.AgentctxError` (or a driver error) becomes a tool error that carries
its message (P-5); the SDK validates arguments against the input schema and reports a mismatch the
same way (one line: :meth:`AgentctxServer.call_tool`), so a bad call never takes the server down.
Every string and list argument declares its bound (``max_length``: :data:`FILE_MAX` and the rest),
so an oversized one is refused before any work; the tools' blocking work (the file system, the
project's identity, SQLite) runs in worker threads, so one slow call never stalls the others. Nothing but the protocol reaches stdout: the
SDK moves stdio onto private descriptors, and logging goes to stderr.

No ``from __future__ import annotations`` here: the SDK evaluates the tools' signatures and pydantic
the models' fields at run time, so every name they mention is a run-time import.
"""

import inspect
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import Tool, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from agentctx import __version__
from agentctx.mcp.models import (
    ClaudeMdReport,
    ProjectOverview,
    RecordDetail,
    Records,
    RelatedRecords,
    SearchResults,
    Superseded,
)
from agentctx.records import RecordType

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from agentctx.mcp.tools import Backend
    from agentctx.retrieval.hybrid import QueryModel

SEARCH_MAX = 15
GET_MAX = 10
#: Every argument's bound, declared in its schema (issue 24, #10): the SDK refuses a longer string
#: or list before the tool runs, and :meth:`AgentctxServer.call_tool` says so in one line.
QUERY_MAX = 1_000  # a search is a few keywords; the prompt hook cuts prompts far shorter
FILE_MAX = 4_096  # PATH_MAX: no longer path names a file
ID_MAX = 100  # a record id (a ULID is 26 characters; an imported one may be longer)
AS_OF_MAX = 64
CUES_MAX = 4  # core.schema.CUES_MAX (not imported here: the handshake loads no store module)
CUE_MAX = 1_000  # a cue is cut at 120 characters on a word; this only bounds what is sent
TITLE_MAX = 120  # core.schema.TITLE_MAX
BODY_MAX = 2_000  # core.schema.BODY_MAX, and the longest rationale
#: When set, the first ``tools/list`` writes the names of the modules loaded by then to this file,
#: one per line, before the tools' backend starts loading (the test of the lazy start reads it).
IMPORT_LOG_ENV = "AGENTCTX_MCP_IMPORT_LOG"

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

# -- state ------------------------------------------------------------------------------------------


class ServerState:
    """The lifespan's state: the project folder and the tools' backend, opened once, in the
    background, after the handshake (:func:`agentctx.mcp.tools.opened`)."""

    def __init__(self, folder: str, model: "QueryModel | None", tasks: "TaskGroup") -> None:
        self.folder = folder
        self._model = model
        self._tasks = tasks
        self._backend: Backend | None = None
        self._failure = ""
        self._started = False
        self._ready = anyio.Event()
        self._closing = anyio.Event()

    def open_soon(self) -> None:
        """Start opening the backend in the background, once; never waits for it."""
        if not self._started:
            self._started = True
            self._tasks.start_soon(self._open)

    async def backend(self) -> "Backend":
        """The open backend (opening it now if nothing asked before), or a tool error."""
        self.open_soon()
        await self._ready.wait()
        if self._backend is None:
            raise ToolError(f"the agentctx tools could not start: {self._failure}")
        return self._backend

    def close(self) -> None:
        """Let the backend close (its task ends once it is open)."""
        self._closing.set()

    async def _open(self) -> None:
        try:
            # the store's modules load in a worker thread: the loop stays free to answer meanwhile
            opened = await anyio.to_thread.run_sync(_import_opened)
            if self._closing.is_set():  # the client left meanwhile: no store to open
                return
            async with opened(self.folder, self._model) as backend:
                self._backend = backend
                self._ready.set()
                if backend.model is None or backend.store is None:
                    await self._closing.wait()
                    return
                async with anyio.create_task_group() as lending:
                    # the prompt hook borrows the warm model (issue 25): loaded now, in the background
                    lending.start_soon(_lend, backend.model, backend.store.path)
                    await self._closing.wait()
                    lending.cancel_scope.cancel()
        except Exception as exc:  # a bug here must not end the session: the tools report it
            log.exception("agentctx: the MCP tools could not start")
            self._failure = f"{type(exc).__name__}: {exc}"
        finally:
            self._ready.set()


async def _lend(model: "QueryModel", db_path: str) -> None:
    import importlib

    # numpy loads here, in a worker thread, after the handshake: the loop stays free meanwhile
    lend = await anyio.to_thread.run_sync(importlib.import_module, "agentctx.mcp.lend")
    await lend.serve(model, db_path)


def _import_opened() -> "Callable[[str, QueryModel | None], AbstractAsyncContextManager[Backend]]":
    from agentctx.mcp.tools import opened

    return opened


ServerContext = Context[ServerState, Any]


async def _backend(ctx: ServerContext) -> "Backend":
    return await ctx.request_context.lifespan_context.backend()


# -- the tools: what tools/list publishes; each body is one call of the backend -------------------

TypeArg = Annotated[RecordType | None, Field(description="Only records of this type.")]
FileArg = Annotated[
    str | None,
    Field(
        max_length=FILE_MAX,
        description="Only records linked to this file: a path relative to the project root.",
    ),
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
        max_length=AS_OF_MAX,
        description="ISO date or date-time: what was true then, superseded records included "
        "(a bare date means the end of that day).",
    ),
]


async def ctx_search(
    ctx: ServerContext,
    query: Annotated[
        str,
        Field(
            max_length=QUERY_MAX,
            description="A few distinctive keywords: names, terms, libraries.",
        ),
    ],
    type: TypeArg = None,
    file: FileArg = None,
    scope: ScopeArg = "project",
    as_of: AsOfArg = None,
    limit: Annotated[
        int,
        Field(
            ge=1,
            description="At most 15; a larger limit is read as 15.",
            json_schema_extra={"maximum": SEARCH_MAX},  # advertised; clamped, not refused
        ),
    ] = 10,
) -> SearchResults:
    """Search the project's memory by keywords (and by meaning once the embedding model is
    loaded); returns a compact index (id, type, title, age, confidence, score, match), no bodies.
    match is strong when a hit is about what was asked, weak when it only shares words or a topic;
    a note says "no strong match" when every hit is weak (the store may not know). Call ctx_get
    with the ids you need to read them in full."""
    limit = min(limit, SEARCH_MAX)
    return await (await _backend(ctx)).search(query, type, file, scope, as_of, limit)


async def ctx_get(
    ctx: ServerContext,
    ids: Annotated[
        list[Annotated[str, Field(max_length=ID_MAX)]],
        Field(
            description="1 to 10 record ids (or the handles injected text shows), from ctx_search, ctx_related or the injected context.",
            min_length=1,
            max_length=GET_MAX,
        ),
    ],
) -> Records:
    """Read full records by id (1-10 per call), with their supersession links; ids not found in
    this project or the global records are listed as missing (an error when none is found)."""
    return await (await _backend(ctx)).get(ids)


async def ctx_record(
    ctx: ServerContext,
    type: RecordType,
    title: Annotated[
        str, Field(max_length=TITLE_MAX, description="One line, at most 120 characters.")
    ],
    body: Annotated[
        str,
        Field(
            max_length=BODY_MAX, description="The fact and its reason, at most 2,000 characters."
        ),
    ],
    supersedes: Annotated[
        str | None,
        Field(max_length=ID_MAX, description="Id of the current record this one replaces."),
    ] = None,
    scope: Annotated[
        Literal["project", "global"],
        Field(
            description="project (default), or global for the user's own cross-project preferences."
        ),
    ] = "project",
    cues: Annotated[
        list[Annotated[str, Field(max_length=CUE_MAX)]] | None,
        Field(
            max_length=CUES_MAX,
            description="Up to 4 short requests a developer would type later when this record is "
            "what they need (search text only, never shown); leave out to have them written later.",
        ),
    ] = None,
) -> RecordDetail:
    """Record a fact the user stated or agreed to (a decision, convention, preference, ...) as an
    explicit record; returns it. To change a recorded fact, prefer ctx_supersede."""
    return await (await _backend(ctx)).record(type, title, body, supersedes, scope, cues or ())


async def ctx_supersede(
    ctx: ServerContext,
    old_id: Annotated[
        str,
        Field(
            max_length=ID_MAX,
            description="Id (or handle) of the current record that is no longer true.",
        ),
    ],
    new_body: Annotated[str, Field(max_length=BODY_MAX, description="What is true now.")],
    rationale: Annotated[str, Field(max_length=BODY_MAX, description="Why it changed.")],
    new_title: Annotated[
        str | None,
        Field(
            max_length=TITLE_MAX,
            description="The new version's title when the old one no longer holds; else kept.",
        ),
    ] = None,
) -> Superseded:
    """Replace a recorded fact that changed: the old record is kept as history and marked
    superseded by a new version with the new body (and title, when given); returns both ids."""
    return await (await _backend(ctx)).supersede(old_id, new_body, rationale, new_title)


async def ctx_project(ctx: ServerContext) -> ProjectOverview:
    """The project: name, id, stack, commands (test, build, lint, ...), entry points, record counts
    by type and the last session."""
    return await (await _backend(ctx)).overview()


async def ctx_related(
    ctx: ServerContext,
    file: Annotated[
        str,
        Field(
            max_length=FILE_MAX,
            description="A path relative to the project root (or absolute), or the name of a "
            "module, package or symbol.",
        ),
    ],
) -> RelatedRecords:
    """Current records linked to a file (or a module, package or symbol) through the store's graph
    (its entities and edges, up to 3 links away), nearest first. Use before editing a file; read
    bodies with ctx_get."""
    return await (await _backend(ctx)).related(file)


async def ctx_sync_claudemd(ctx: ServerContext) -> ClaudeMdReport:
    """Compare CLAUDE.md with the store (read-only): current explicit or reinforced decisions and
    conventions it does not mention, superseded text it still contains, and a proposed diff that
    appends the missing ones. Show the diff to the user; never apply it without their consent."""
    return await (await _backend(ctx)).sync_claudemd()


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


class AgentctxServer(MCPServer[ServerState]):
    """The SDK's server with the seven tools, for the project in ``folder``.

    Its lifespan gives each connection a :class:`ServerState`; the backend starts opening once the
    tools are listed.
    """

    def __init__(self, folder: str, model: "QueryModel | None" = None) -> None:
        self.folder = folder
        self._model = model
        self._state: ServerState | None = None
        with _without_rich():
            super().__init__(
                "agentctx",
                title="agentctx",
                version=__version__,
                instructions=INSTRUCTIONS,
                lifespan=self._lifespan,
                log_level="WARNING",
            )
        for tool, title, annotations in TOOLS:
            self.add_tool(
                tool,
                name=tool.__name__,
                title=title,
                description=" ".join(inspect.cleandoc(tool.__doc__ or "").split()),
                annotations=annotations,
                structured_output=True,
            )

    @asynccontextmanager
    async def _lifespan(self, _server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        async with anyio.create_task_group() as tasks:
            self._state = state = ServerState(self.folder, self._model, tasks)
            try:
                yield state
            finally:
                self._state = None
                state.close()

    async def run_stdio_async(self) -> None:
        """Serve on stdio, every line it cannot read answered by a JSON-RPC error (guard.py)."""
        from mcp.server.stdio import stdio_server

        from agentctx.mcp import guard

        async with stdio_server() as (read_stream, write_stream):
            server_writer, server_reader = guard.guarded_streams()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(guard.guard, read_stream, write_stream, server_writer)
                await self._lowlevel_server.run(
                    server_reader,
                    write_stream,
                    self._lowlevel_server.create_initialization_options(),
                )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: ServerContext | None = None
    ) -> Any:
        """Call a tool; arguments its schema refuses (too long, too many, of the wrong type) give
        a one-line tool error naming each argument, never pydantic's multi-line report."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(
                    f"Error executing tool {name}: {argument_problems(cause)}"
                ) from cause
            raise

    async def list_tools(self) -> list[Tool]:
        """The tools, as ``tools/list`` publishes them; then the backend starts opening."""
        tools = await super().list_tools()
        if path := os.environ.pop(IMPORT_LOG_ENV, ""):
            _write_import_log(path)
        if self._state is not None:
            self._state.open_soon()
        return tools


def argument_problems(error: ValidationError) -> str:
    """The refused arguments of a call, one line: ``invalid arguments: file: String should have
    at most 4096 characters; ...`` (the values are the caller's, never repeated back)."""
    problems = []
    for item in error.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {' '.join(str(item['msg']).split())}")
    return "invalid arguments: " + "; ".join(problems[:5])


def _write_import_log(path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:  # a few KB, once: no thread for it
        out.write("".join(f"{name}\n" for name in sorted(sys.modules)))


@contextmanager
def _without_rich() -> Iterator[None]:
    """Hide rich from imports while the SDK's server is made.

    ``MCPServer()`` sets up logging with rich's handler whenever rich can be imported (rich comes
    with cyclopts here, not with the SDK): ~50 ms of imports on the path to ``tools/list``. Hidden,
    the SDK logs through a plain stderr handler, which suits a log file better anyway.
    """
    if "rich" in sys.modules:
        yield
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich...` raises ImportError
    try:
        yield
    finally:
        del sys.modules["rich"]


def create_server(
    project_dir: str | None = None, *, model: "QueryModel | None" = None
) -> AgentctxServer:
    """The agentctx MCP server; the project is ``project_dir``, else $CLAUDE_PROJECT_DIR, else cwd.

    ``model`` is the query model for hybrid search (default: one for the configured embedding
    settings, loaded on first need).
    """
    folder = project_dir or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    return AgentctxServer(os.path.abspath(folder), model)


async def serve(project_dir: str | None = None) -> None:
    """Serve the tools on stdio until the client closes the connection."""
    await create_server(project_dir).run_stdio_async()
