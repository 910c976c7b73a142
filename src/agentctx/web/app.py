"""The dashboard's Starlette application: routes as thin adapters over the library (P-8).

Each handler reads its parameters, awaits the library through :mod:`agentctx.web.queries` (or a
library function directly for writes), and renders a view or JSON. Library errors become HTTP
statuses here and nowhere else: not found 404, conflict 409, invalid input 400. Every request
first passes :class:`agentctx.web.security.Guard`.

Writes are JSON ``POST``s under ``/api/``; the pages send them with ``app.js``, which adds the
per-start token from the page's ``<meta>`` tag. Only an authenticated browser (the session cookie
that ``agentctx ui``'s one-time link is exchanged for, :mod:`agentctx.web.security`) gets a page. Graph layouts are computed in a worker thread and
kept for the last few graphs, so reopening an unchanged graph costs no layout.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from agentctx import preferences
from agentctx.core import schema
from agentctx.core.errors import AgentctxError, ConflictError, NotFoundError, ValidationError
from agentctx.web import graph as graphs
from agentctx.web import queries
from agentctx.web.forcelayout import layout
from agentctx.web.security import Credentials, Guard
from agentctx.web.views import graph as graph_view
from agentctx.web.views import page as shell
from agentctx.web.views import profile as profile_view
from agentctx.web.views import projects as projects_view
from agentctx.web.views import records as records_view
from agentctx.web.views import sessions as sessions_view
from agentctx.web.views import sync as sync_view
from agentctx.web.views import team as team_view

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from starlette.requests import Request
    from starlette.types import ASGIApp

    from agentctx.records import Record
    from agentctx.store import Store

STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "graph.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
BODY_MAX_BYTES = 64 * 1024
LAYOUTS_KEPT = 8
SESSIONS_SHOWN = 100


class _Layouts:
    """The positions of the last few graphs drawn, keyed by what a layout depends on: the
    number of nodes and the edges between them (by index)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[int, tuple[tuple[int, int], ...]], NDArray[np.float64]]
        self._kept = OrderedDict()

    async def get(self, g: graphs.Graph) -> tuple[NDArray[np.float64], float]:
        """Positions for ``g`` and the seconds they took (0 when kept from before)."""
        index = {node.id: i for i, node in enumerate(g.nodes)}
        pairs = [(index[e.source], index[e.target]) for e in g.edges]
        key = (len(index), tuple(pairs))
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key], 0.0
        started = time.perf_counter()
        pos = await anyio.to_thread.run_sync(layout, len(g.nodes), pairs)
        self._kept[key] = pos
        while len(self._kept) > LAYOUTS_KEPT:
            self._kept.popitem(last=False)
        return pos, time.perf_counter() - started


def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def _token(request: Request) -> str:
    token: str = request.app.state.token
    return token


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def _status(exc: AgentctxError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, ValidationError):
        return 400
    return 500


# -- pages ------------------------------------------------------------------------------------------


async def projects_page(request: Request) -> Response:
    """Projects: every project, last activity, record counts by type."""
    summaries = await queries.project_summaries(_store(request))
    return _html(projects_view.render(summaries, token=_token(request)))


async def records_page(request: Request) -> Response:
    """Records: search and filters."""
    store = _store(request)
    f = queries.RecordFilter.parse(request.query_params)
    found = await queries.find_records(store, f)
    choices = await queries.project_choices(store)
    return _html(records_view.render_list(f, found, choices, token=_token(request)))


async def record_page(request: Request) -> Response:
    """One record: body, provenance, entities, history, actions."""
    store = _store(request)
    record = await store.get(request.path_params["record_id"])
    history = await store.history(record.id)
    entities = await graphs.entities(store, record.id)
    choices = await queries.project_choices(store)
    return _html(
        records_view.render_detail(record, history, entities, choices, token=_token(request))
    )


async def graph_page(request: Request) -> Response:
    """Graph of one project (default: the most recently seen one)."""
    store = _store(request)
    choices = await queries.project_choices(store)
    project = request.query_params.get("project")
    if project is None:
        project = choices[0][0] if len(choices) > 1 else ""
    g = await graphs.load(store, project or None)
    pos, seconds = await request.app.state.layouts.get(g)
    focus = request.query_params.get("focus", "")
    return _html(
        graph_view.render(
            g, pos, project, choices, focus=focus, seconds=seconds, token=_token(request)
        )
    )


async def profile_page(request: Request) -> Response:
    """Profile: the global preferences."""
    entries = await preferences.show(_store(request))
    return _html(profile_view.render(entries, token=_token(request)))


async def sessions_page(request: Request) -> Response:
    """Sessions: charts per day and the newest sessions."""
    store = _store(request)
    project = request.query_params.get("project", "")
    rows = await queries.session_rows(store, None, limit=None)
    choices = await queries.project_choices(store)
    known = {pid for pid, _ in choices}
    for row in rows:  # projects only the hooks saw (no project row) can be picked too
        if row["project_id"] and row["project_id"] not in known:
            known.add(row["project_id"])
            choices.insert(len(choices) - 1, (row["project_id"], row["project_name"]))
    if project:
        rows = [row for row in rows if row["project_id"] == project]
    view = queries.sessions_view(rows, shell.today())
    from agentctx.store import precision  # issue 25: the store's own precision

    found = await precision.summary(store)
    return _html(
        sessions_view.render(
            view, project, choices, token=_token(request), precision=found, shown=SESSIONS_SHOWN
        )
    )


async def sync_page(request: Request) -> Response:
    """Sync: the CLAUDE.md drift report of one project."""
    store = _store(request)
    choices = [c for c in await queries.project_choices(store) if c[0] != schema.GLOBAL_PROJECT_ID]
    project = request.query_params.get("project") or (choices[0][0] if choices else "")
    view = await queries.sync_report(store, project) if project else None
    return _html(sync_view.render(view, project, choices, token=_token(request)))


async def team_page(request: Request) -> Response:
    """Team: the linked team hubs, what waits, the conflicts (from the store; no connection)."""
    from agentctx.team.hub import local

    store = _store(request)
    links = []
    for link in await local.links(store):
        links.append(
            {
                **{k: v for k, v in link.items() if k != "conninfo"},
                "hub": local.shown(str(link["conninfo"])),
                "waiting": await local.waiting(store, link["project_id"]),
                "conflicts": await local.conflicts(store, link["project_id"]),
            }
        )
    return _html(team_view.render(links, token=_token(request)))


async def static_file(request: Request) -> Response:
    """The dashboard's own scripts and stylesheet (package data)."""
    name = request.path_params["name"]
    media = STATIC.get(name)
    if media is None:
        return Response("not found", status_code=404, media_type="text/plain")
    data = await anyio.to_thread.run_sync(
        (resources.files("agentctx.web") / "static" / name).read_bytes
    )
    return Response(data, media_type=media)


# -- JSON reads -------------------------------------------------------------------------------------


async def api_records(request: Request) -> Response:
    """GET /api/records: the Records view's query as JSON."""
    found = await queries.find_records(
        _store(request), queries.RecordFilter.parse(request.query_params)
    )
    return _json(
        {
            "total": found.total,
            "degraded": found.degraded,
            "records": [{**r.to_dict(), "search_score": s} for r, s in found.records],
        }
    )


async def api_record(request: Request) -> Response:
    """GET /api/records/{id}: a record, its history and its entities."""
    store = _store(request)
    record = await store.get(request.path_params["record_id"])
    history = await store.history(record.id)
    return _json(
        {
            "record": record.to_dict(),
            "history": [r.to_dict() for r in history],
            "entities": await graphs.entities(store, record.id),
        }
    )


async def api_graph(request: Request) -> Response:
    """GET /api/graph: nodes with positions, and edges."""
    project = request.query_params.get("project", "")
    g = await graphs.load(_store(request), project or None)
    pos, seconds = await request.app.state.layouts.get(g)
    return _json(
        {
            "nodes": [
                {
                    "id": n.id,
                    "kind": n.kind,
                    "label": n.label,
                    "type": n.type,
                    "current": n.current,
                    "x": round(float(pos[i, 0]), 1),
                    "y": round(float(pos[i, 1]), 1),
                }
                for i, n in enumerate(g.nodes)
            ],
            "edges": [{"source": e.source, "target": e.target, "rel": e.rel} for e in g.edges],
            "total": g.total,
            "layout_seconds": seconds,
        }
    )


# -- writes (JSON, with the token: see security.Guard) ---------------------------------------------


async def _payload(request: Request) -> dict[str, Any]:
    body = await request.body()
    if len(body) > BODY_MAX_BYTES:
        raise ValidationError(f"the request is over {BODY_MAX_BYTES:,} bytes")
    try:
        data = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"the request is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValidationError("the request must be a JSON object")
    return data


def _text(data: dict[str, Any], name: str) -> str | None:
    """A text field; missing or blank is None (the field is left as it is)."""
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"{name} must be text")
    return value if value and value.strip() else None


def _required(data: dict[str, Any], name: str) -> str:
    """A text field that must be there and not blank."""
    value = _text(data, name)
    if value is None:
        raise ValidationError(f"{name} is required")
    return value


def _changed(old: Record, new: Record) -> Response:
    return _json({"old": old.to_dict(), "new": new.to_dict(), "url": f"/records/{new.id}"})


async def api_edit(request: Request) -> Response:
    """POST /api/records/{id}/edit: a new version with this title and/or body."""
    store = _store(request)
    data = await _payload(request)
    record = await store.get(request.path_params["record_id"])
    title, body = _text(data, "title"), _text(data, "body")
    if record.project_id == schema.GLOBAL_PROJECT_ID and record.type == "preference":
        # the profile keeps its Markdown mirror in step with the store
        new = await preferences.edit(store, record.id, title=title, body=body)
        return _changed(await store.get(record.id), new)
    old, new = await store.edit(record.id, title=title, body=body)
    return _changed(old, new)


async def api_supersede(request: Request) -> Response:
    """POST /api/records/{id}/supersede: replace a record by a new body (and title), with why."""
    data = await _payload(request)
    body, rationale = _required(data, "body"), _required(data, "rationale")
    old, new = await _store(request).supersede(
        request.path_params["record_id"], body, rationale, title=_text(data, "title")
    )
    return _changed(old, new)


async def api_pin(request: Request) -> Response:
    """POST /api/records/{id}/pin: ``{"pinned": true|false}``."""
    data = await _payload(request)
    value = data.get("pinned")
    if isinstance(value, str) and value in ("true", "false"):
        value = value == "true"
    if not isinstance(value, bool):
        raise ValidationError("pinned must be true or false")
    record = await _store(request).set_pinned(request.path_params["record_id"], value)
    return _json({"record": record.to_dict(), "url": f"/records/{record.id}"})


async def api_profile_edit(request: Request) -> Response:
    """POST /api/profile/{id}/edit: correct a global preference."""
    store = _store(request)
    data = await _payload(request)
    old_id = request.path_params["record_id"]
    new = await preferences.edit(
        store, old_id, title=_text(data, "title"), body=_text(data, "body")
    )
    old = await store.get(old_id)
    return _json({"old": old.to_dict(), "new": new.to_dict(), "url": "/profile"})


async def api_profile_clear(request: Request) -> Response:
    """POST /api/profile/{id}/clear: retire a global preference (history keeps it)."""
    await _payload(request)
    cleared = await preferences.clear(_store(request), request.path_params["record_id"])
    return _json({"record": cleared.to_dict(), "url": "/profile"})


# -- the application --------------------------------------------------------------------------------


def _page_errors(handler: Any) -> Any:
    """Render a library error on a page as an error page with its HTTP status."""

    async def wrapped(request: Request) -> Response:
        try:
            response: Response = await handler(request)
        except AgentctxError as exc:
            status = _status(exc)
            return _html(shell.error_page(status, str(exc), token=_token(request)), status)
        return response

    wrapped.__doc__ = handler.__doc__
    return wrapped


def _api_errors(handler: Any) -> Any:
    """Return a library error as ``{"error": message}`` with its HTTP status."""

    async def wrapped(request: Request) -> Response:
        try:
            response: Response = await handler(request)
        except AgentctxError as exc:
            return _json({"error": str(exc)}, _status(exc))
        return response

    wrapped.__doc__ = handler.__doc__
    return wrapped


def create_app(store: Store, *, port: int, credentials: Credentials) -> ASGIApp:
    """The dashboard for ``store``, answering on ``port`` only, behind the request guard (which
    lets in only the session that ``credentials``' one-time login secret was exchanged for)."""
    token = credentials.token
    pages = [
        ("/", projects_page),
        ("/projects", projects_page),
        ("/records", records_page),
        ("/records/{record_id}", record_page),
        ("/graph", graph_page),
        ("/profile", profile_page),
        ("/sessions", sessions_page),
        ("/sync", sync_page),
        ("/team", team_page),
    ]
    reads = [
        ("/api/records", api_records),
        ("/api/records/{record_id}", api_record),
        ("/api/graph", api_graph),
    ]
    writes = [
        ("/api/records/{record_id}/edit", api_edit),
        ("/api/records/{record_id}/supersede", api_supersede),
        ("/api/records/{record_id}/pin", api_pin),
        ("/api/profile/{record_id}/edit", api_profile_edit),
        ("/api/profile/{record_id}/clear", api_profile_clear),
    ]
    routes = [Route(path, _page_errors(h), methods=["GET"]) for path, h in pages]
    routes += [Route(path, _api_errors(h), methods=["GET"]) for path, h in reads]
    routes += [Route(path, _api_errors(h), methods=["POST"]) for path, h in writes]
    routes.append(Route("/static/{name}", static_file, methods=["GET"]))
    app = Starlette(routes=routes)
    app.state.store = store
    app.state.token = token
    app.state.layouts = _Layouts()
    return Guard(app, port=port, credentials=credentials)
