"""Graph reads for the dashboard: records, files and branches as nodes, and the links between them.

ADR-014 keeps relationships in adjacency tables: ``nodes`` (files, branches, ...), ``edges`` (typed,
either end a record, a node or a session id) and ``record_entities`` (a record linked to the nodes
it is about). :func:`load` reads one project's slice of them as plain data for a drawing:

* **nodes** — the project's records (current and superseded; the cold archive is left out), its
  ``file``, ``module``, ``package``, ``symbol`` and ``branch`` nodes, and the sessions that
  ``observed_in`` edges point at (a file or branch is observed *in* a session, so the session is
  the other end of the edge);
* **edges** — ``supersedes`` (new record → old), ``applies_to`` (record → file, module or symbol;
  a ``record_entities`` link is drawn as one, as are stored ``applies_to`` edges), ``scoped_to``
  (record → package) and ``observed_in`` (file or branch → session). Edges whose other end is not
  in the graph are dropped.

The newest records come first when the graph is cut at ``limit`` nodes, then the nodes they link to.
Reads only, through the store's connection (P-8: the MCP server's graph reads are the precedent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentctx.store import Store

#: The edge kinds drawn; ``derives_from`` is bookkeeping, not shown.
REL_TYPES = ("supersedes", "applies_to", "scoped_to", "observed_in")
#: The graph node kinds of the store drawn (every one), then records and sessions.
ENTITY_KINDS = ("file", "module", "package", "symbol", "branch")
NODE_KINDS = ("record", *ENTITY_KINDS, "session")
LIMIT = 2000


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One node: ``kind`` is one of :data:`NODE_KINDS`; ``type`` is a record's type."""

    id: str
    kind: str
    label: str
    project_id: str | None = None
    type: str | None = None
    current: bool = True


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """A directed link between two nodes of the graph."""

    source: str
    target: str
    rel: str


@dataclass(slots=True)
class Graph:
    """Nodes and edges of one project (or every project); ``total`` counts nodes before the cut."""

    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    total: int = 0

    @property
    def truncated(self) -> bool:
        """True when the graph was cut at its node limit."""
        return self.total > len(self.nodes)


def _where(column: str, project_id: str | None) -> tuple[str, list[Any]]:
    return ("", []) if project_id is None else (f"WHERE {column} = ?", [project_id])


async def load(store: Store, project_id: str | None = None, *, limit: int = LIMIT) -> Graph:
    """The graph of one project (``None``: every project), at most ``limit`` nodes."""
    where, params = _where("project_id", project_id)
    records = await store.rows(
        f"SELECT id, project_id, type, title, superseded_at FROM records {where} "
        "ORDER BY recorded_at DESC, id DESC",
        params,
    )
    kinds = ", ".join(f"'{k}'" for k in ENTITY_KINDS)
    entities = await store.rows(
        f"SELECT id, project_id, kind, name FROM nodes WHERE kind IN ({kinds}) "
        + ("" if project_id is None else "AND project_id = ? ")
        + "ORDER BY kind, name",
        params,
    )
    nwhere, nparams = _where("n.project_id", project_id)
    links = await store.rows(
        "SELECT l.record_id, l.entity_id FROM record_entities l "
        f"JOIN nodes n ON n.id = l.entity_id {nwhere}",
        nparams,
    )
    rels = ", ".join(f"'{r}'" for r in REL_TYPES)
    scope = (
        ""
        if project_id is None
        else "AND (e.from_id IN (SELECT id FROM records WHERE project_id = ?) "
        "OR e.from_id IN (SELECT id FROM nodes WHERE project_id = ?))"
    )
    stored = await store.rows(
        f"SELECT e.from_id, e.to_id, e.rel_type FROM edges e WHERE e.rel_type IN ({rels}) {scope}",
        [] if project_id is None else [project_id, project_id],
    )
    swhere, sparams = _where("project_id", project_id)
    sessions = {
        row["session_id"]: row["started_at"]
        for row in await store.rows(
            f"SELECT session_id, started_at FROM sessions {swhere}", sparams
        )
    }
    edges = [GraphEdge(row["record_id"], row["entity_id"], "applies_to") for row in links]
    edges += [GraphEdge(row["from_id"], row["to_id"], row["rel_type"]) for row in stored]
    nodes: dict[str, GraphNode] = {}
    for row in records:
        nodes[row["id"]] = GraphNode(
            id=row["id"],
            kind="record",
            label=row["title"],
            project_id=row["project_id"],
            type=row["type"],
            current=row["superseded_at"] is None,
        )
    for row in entities:
        nodes[row["id"]] = GraphNode(
            id=row["id"], kind=row["kind"], label=row["name"], project_id=row["project_id"]
        )
    for edge in edges:
        if edge.rel == "observed_in" and edge.source in nodes and edge.target not in nodes:
            started = sessions.get(edge.target)
            label = f"session {started[:10] if started else edge.target[:8]}"
            nodes[edge.target] = GraphNode(id=edge.target, kind="session", label=label)
    return _cut(nodes, edges, limit)


def _cut(nodes: dict[str, GraphNode], edges: list[GraphEdge], limit: int) -> Graph:
    """Keep ``limit`` nodes (newest records, then what links to them); drop dangling edges."""
    total = len(nodes)
    if total > limit:
        records = [n for n in nodes.values() if n.kind == "record"][:limit]
        kept = {n.id for n in records}
        for edge in edges:  # the entities and sessions linked to the kept records, in link order
            if len(kept) >= limit:
                break
            if edge.source not in kept and edge.target not in kept:
                continue
            for end in (edge.source, edge.target):
                if end in nodes and end not in kept and len(kept) < limit:
                    kept.add(end)
        nodes = {key: node for key, node in nodes.items() if key in kept}
    seen: set[tuple[str, str, str]] = set()
    drawn: list[GraphEdge] = []
    for edge in edges:
        key = (edge.source, edge.target, edge.rel)
        if edge.source in nodes and edge.target in nodes and key not in seen:
            seen.add(key)
            drawn.append(edge)
    return Graph(nodes=list(nodes.values()), edges=drawn, total=total)


async def entities(store: Store, record_id: str) -> list[dict[str, str]]:
    """The nodes a record is linked to (``record_entities``, and its ``applies_to``/``scoped_to``
    edges): id, kind and name, sorted."""
    rows = await store.rows(
        "SELECT n.id, n.kind, n.name, n.project_id FROM nodes n WHERE n.id IN ("
        "SELECT entity_id FROM record_entities WHERE record_id = ? UNION "
        "SELECT to_id FROM edges WHERE from_id = ? AND rel_type IN ('applies_to', 'scoped_to')) "
        "ORDER BY n.kind, n.name",
        (record_id, record_id),
    )
    return [dict(row) for row in rows]
