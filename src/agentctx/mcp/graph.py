"""The MCP server's graph reads: a file path to its node names, the records around a file.

``ctx_related`` walks the store's graph (``record_entities`` and ``edges``) from a file's node, or
from a module, package or symbol named as extraction stored it, and the ``file`` filter of
``ctx_search`` keeps the records linked to a file. No public ``Store`` method runs this SQL, and the
store's connection is private, so the functions here take a plain read-only connection
(``Store.read_sync`` runs them in a worker thread; a WAL reader never blocks the writer).
"""

from __future__ import annotations

import os
from typing import Any

from agentctx.core.errors import ValidationError
from agentctx.mcp.server import FILE_MAX
from agentctx.records import COLUMNS
from agentctx.store import HISTORY_MAX_DEPTH

#: How many links ``ctx_related`` walks from a file.
RELATED_HOPS = 3


def file_names(project_dir: str, root: str, path: str) -> list[str]:
    """The node names a path may be stored under: relative to the project root, as capture stores it.

    A relative path is read against the project folder and against the root (they differ when
    Claude Code runs in a subfolder of the repository); an absolute one outside the root keeps its
    absolute form, as capture keeps it. Blocking (it asks the file system): the tools run it in a
    worker thread. Bounded: a path over :data:`FILE_MAX` characters or with a NUL is refused
    before any work, and the resolution (:func:`resolve`) stops at the first missing folder.
    """
    raw = path.strip()
    if not raw:
        raise ValidationError("file is empty: give a path relative to the project root")
    if len(raw) > FILE_MAX:
        raise ValidationError(f"file is {len(raw)} characters, over the limit of {FILE_MAX}")
    if "\x00" in raw:
        raise ValidationError("file contains a NUL character")
    if os.path.isabs(raw):
        fulls = [raw]
    else:
        fulls = [os.path.join(project_dir, raw), os.path.join(root, raw)]
    names: list[str] = []
    for full in fulls:
        for variant in (os.path.normpath(full), resolve(full)):
            try:
                rel = os.path.relpath(variant, root)
            except ValueError:  # another drive on Windows
                rel = variant
            name = variant if rel.startswith("..") else rel
            if name not in names:
                names.append(name)
    return names


def resolve(path: str) -> str:
    """``os.path.realpath(path)`` without its cost on a path that does not exist.

    ``realpath`` looks up every prefix of the path, each a system call over a longer string:
    quadratic in the path's length even when its first folder is missing (issue 24, #10: a 1 MB
    path froze the MCP server). A path's prefixes exist up to some depth and no further, so a
    binary search over the normalized components finds the longest existing one in a logarithmic
    number of lookups; only that part is resolved (links can only be there), the rest is kept.
    """
    if os.path.lexists(path):
        return os.path.realpath(path)
    parts = os.path.abspath(path).split(os.sep)  # parts[0] is "" (the root), which exists
    low, high = 1, len(parts)  # the first ``low`` parts exist, the first ``high`` do not
    while high - low > 1:
        middle = (low + high) // 2
        if os.path.lexists(os.sep.join(parts[:middle])):
            low = middle
        else:
            high = middle
    return os.path.join(os.path.realpath(os.sep.join(parts[:low]) or os.sep), *parts[low:])


def _anchor_sql(names: list[str], entity: bool = False) -> str:
    """The node ids of a file (one of its ``names``); with ``entity``, or of the module, package
    or symbol named by the last parameter."""
    marks = ", ".join("?" * len(names))
    files = f"kind = 'file' AND name IN ({marks})"
    if entity:
        files = f"({files} OR kind IN ('module', 'package', 'symbol') AND name = ?)"
    return f"SELECT id FROM nodes WHERE project_id = ? AND {files}"


def anchor_kinds(conn: Any, project_id: str, names: list[str], entity: str) -> list[str]:
    """The kinds of the nodes ``ctx_related`` starts from (files first; empty: unknown)."""
    found = conn.execute(
        f"SELECT DISTINCT kind FROM nodes WHERE id IN ({_anchor_sql(names, True)})",
        (project_id, *names, entity),
    ).fetchall()
    return sorted((str(row[0]) for row in found), key=lambda kind: kind != "file")


def related_rows(
    conn: Any, project_id: str, allowed: tuple[str, ...], names: list[str], entity: str = ""
) -> tuple[bool, list[Any]]:
    """Whether the start is known, and the current records within RELATED_HOPS links (``hops``).

    The start is the file stored under one of ``names``, and the module, package or symbol named
    ``entity`` (the name as given) when there is one. The walk goes both ways along
    ``record_entities`` and ``edges`` (so through sessions, through superseded versions, and along
    the ``applies_to``/``scoped_to`` edges extraction writes); ``UNION`` drops repeated (id, hops)
    pairs and the depth guard ends it.
    """
    anchor = _anchor_sql(names, True)
    start = (project_id, *names, entity)
    if conn.execute(anchor, start).fetchone() is None:
        return False, []
    step = "SELECT {col}, w.hops + 1 FROM walk w JOIN {table} ON {on} = w.id WHERE w.hops < ?"
    sql = f"""
        WITH RECURSIVE walk(id, hops) AS (
          SELECT id, 0 FROM ({anchor})
          UNION {step.format(col="e.to_id", table="edges e", on="e.from_id")}
          UNION {step.format(col="e.from_id", table="edges e", on="e.to_id")}
          UNION {step.format(col="l.record_id", table="record_entities l", on="l.entity_id")}
          UNION {step.format(col="l.entity_id", table="record_entities l", on="l.record_id")}
        )
        SELECT {", ".join(f"r.{c}" for c in COLUMNS)}, min(w.hops) AS hops
        FROM walk w JOIN records r ON r.id = w.id
        WHERE r.superseded_at IS NULL AND r.project_id IN ({", ".join("?" * len(allowed))})
        GROUP BY r.id
    """
    params = (*start, *[RELATED_HOPS] * 4, *allowed)
    return True, list(conn.execute(sql, params).fetchall())


def linked_ids(conn: Any, project_id: str, names: list[str]) -> set[str]:
    """Ids of records linked directly to the file, with every version of each (for ``as_of``)."""
    anchor = _anchor_sql(names)
    sql = f"""
        WITH RECURSIVE
          anchor(id) AS ({anchor}),
          linked(id, depth) AS (
            SELECT l.record_id, 0 FROM record_entities l JOIN anchor a ON l.entity_id = a.id
            UNION SELECT e.from_id, 0 FROM edges e JOIN anchor a ON e.to_id = a.id
            UNION SELECT e.to_id, 0 FROM edges e JOIN anchor a ON e.from_id = a.id
            UNION SELECT e.from_id, k.depth + 1 FROM linked k JOIN edges e
              ON e.to_id = k.id AND e.rel_type = 'supersedes' WHERE k.depth < {HISTORY_MAX_DEPTH}
            UNION SELECT e.to_id, k.depth + 1 FROM linked k JOIN edges e
              ON e.from_id = k.id AND e.rel_type = 'supersedes' WHERE k.depth < {HISTORY_MAX_DEPTH}
          )
        SELECT DISTINCT r.id FROM linked k JOIN records r ON r.id = k.id
    """
    return {str(row[0]) for row in conn.execute(sql, (project_id, *names)).fetchall()}
