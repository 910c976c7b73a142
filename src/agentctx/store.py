"""The store: the one async library API over the SQLite file.

``Store.open()`` applies pending migrations, then every adapter (CLI, MCP server, workers, dashboard)
awaits its methods. Writes run in ``BEGIN IMMEDIATE`` transactions serialized by a per-store lock, so a
failed write leaves nothing behind and concurrent processes queue on SQLite's busy timeout rather than
failing. Supersession and the keyed rules (one current handover per project, one current profile record
per key) happen inside the same transaction as the insert; partial unique indexes make them hold even
against a racing writer. Nothing here deletes a record except :meth:`Store.reset`.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio
import sqlean

from agentctx import clock, db, digest, home, retrieval, schema
from agentctx.errors import ConflictError, DatabaseError, NotFoundError, ValidationError
from agentctx.records import COLUMNS, NewRecord, Record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Sequence

    import aiosqlite

    from agentctx.project import ProjectIdentity

T = TypeVar("T")

_COLS = ", ".join(COLUMNS)
HISTORY_MAX_DEPTH = 1000
#: A current record whose score stays below LOW_SCORE for PRUNE_AFTER_DAYS is a prune candidate
#: (consolidation keeps ``records.low_score_since``; nothing is ever deleted for it).
LOW_SCORE = 0.1
PRUNE_AFTER_DAYS = 60
PRUNE_SHOWN = 5  # candidates listed by status (the count covers all of them)


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A keyword search: text plus filters (see :mod:`agentctx.retrieval` for the ranking)."""

    text: str
    project_id: str | None = None
    types: Sequence[str] = ()
    scope: str = "all"  # all (project + global) | project | global
    as_of: str | None = None
    include_superseded: bool = False
    exclude_ids: Sequence[str] = ()
    limit: int = 10


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the record and its reranked score."""

    record: Record
    score: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Search results; ``degraded`` names why the LIKE fallback ran instead of FTS5, if it did."""

    hits: list[SearchHit]
    degraded: str | None = None


@dataclass(frozen=True, slots=True)
class PruneCandidate:
    """A current record whose score has been below :data:`LOW_SCORE` since ``low_score_since``."""

    id: str
    project_id: str
    type: str
    title: str
    score: float
    low_score_since: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the ``status --json`` shape)."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class ImportReport:
    """What an import did: ``added`` new rows per table, ``skipped`` rows already present."""

    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    superseded_on_conflict: list[str] = field(default_factory=list)
    superseded_on_import: list[str] = field(default_factory=list)


class Store:
    """The context store. Open with ``async with await Store.open() as store`` or ``Store.open()``."""

    def __init__(self, conn: aiosqlite.Connection, caps: db.Capabilities, path: str) -> None:
        self._conn = conn
        self.capabilities = caps
        self.path = path
        self._write_lock = anyio.Lock()
        self._changed: set[str] = set()  # projects whose records the open write transaction changes

    @classmethod
    async def open(cls, path: str | None = None, *, create: bool = True) -> Store:
        """Open (and by default create) the store at ``path`` (default: the home's database)."""
        target = path or home.db_path()
        await anyio.to_thread.run_sync(_prepare, target, create, path is None)
        conn, caps = await db.connect_async(target, create=False)
        return cls(conn, caps, target)

    async def close(self) -> None:
        """Close the connection."""
        await self._conn.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- plumbing -----------------------------------------------------------------------------

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._write_lock:
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
            except sqlean.OperationalError as exc:
                raise DatabaseError(f"the database is busy or unwritable: {exc}") from exc
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                self._changed.clear()
                raise
            try:
                await self._conn.execute("COMMIT")
            except BaseException:
                # A deferred foreign key that fails at COMMIT leaves the transaction open; end it,
                # or every later write on this connection fails ("transaction within a transaction").
                if self._conn.in_transaction:
                    await self._conn.execute("ROLLBACK")
                self._changed.clear()
                raise
            if self._changed:  # pre-computed digests of these projects are stale now
                digest.invalidate(self._changed)
                self._changed.clear()

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self._conn.execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        async with self._conn.execute(sql, params) as cursor:
            return await cursor.fetchone()

    async def read_sync(self, query: Callable[[Any], T]) -> T:
        """Run sync ``query(conn)`` on a short read-only connection to this store, in a worker thread.

        For code written against a plain SQLite connection (the digest, graph walks) that the hooks
        share: it never blocks the event loop nor the store's own connection.
        """

        def run() -> T:
            conn, _caps = db.connect(self.path, readonly=True, create=False, load_vec=False)
            try:
                return query(conn)
            finally:
                conn.close()

        return await anyio.to_thread.run_sync(run)

    @property
    def has_fts(self) -> bool:
        """True when the FTS5 index exists on this store."""
        return self.capabilities.fts5

    # -- projects -----------------------------------------------------------------------------

    async def touch_project(self, identity: ProjectIdentity) -> None:
        """Insert or refresh the row describing a project (name, root, remote, last seen)."""
        now = clock.now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO projects(project_id, name, root, remote, created_at, last_seen_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(project_id) DO UPDATE SET "
                "name = excluded.name, root = excluded.root, remote = excluded.remote, "
                "last_seen_at = excluded.last_seen_at",
                (identity.project_id, identity.name, identity.root, identity.remote, now, now),
            )

    async def projects(self) -> list[dict[str, Any]]:
        """Every project row, most recently seen first."""
        rows = await self._rows("SELECT * FROM projects ORDER BY last_seen_at DESC")
        return [dict(row) for row in rows]

    # -- records ------------------------------------------------------------------------------

    async def get(self, record_id: str) -> Record:
        """The record with this id (current, superseded or archived); :class:`NotFoundError` if none."""
        row = await self._row_by_id(record_id)
        if row is None:
            raise NotFoundError(f"no record with id {record_id!r}; find ids with `agentctx search`")
        return Record.from_row(row)

    async def _row_by_id(self, record_id: str, *, archive: bool = True) -> Any:
        # records first: a record moves to the archive in one transaction, so one of them has it.
        row = await self._one(f"SELECT {_COLS} FROM records WHERE id = ?", (record_id,))
        if row is None and archive:
            row = await self._one(f"SELECT {_COLS} FROM records_archive WHERE id = ?", (record_id,))
        return row

    async def get_many(
        self, ids: Sequence[str], project_id: str | None = None, *, touch: bool = True
    ) -> tuple[list[Record], list[str]]:
        """Records by id in the given order, and the ids missing (unknown or of another project).

        With ``touch`` each found record's ``access_count`` and ``last_accessed`` are bumped (not
        an archived one's: the archive is history, its rows are never scored again).
        """
        found: list[Record] = []
        missing: list[str] = []
        live: set[str] = set()
        allowed = retrieval.scope_projects(project_id, "all") if project_id else None
        for record_id in dict.fromkeys(ids):
            row = await self._row_by_id(record_id, archive=False)
            if row is not None:
                live.add(record_id)
            else:
                row = await self._row_by_id(record_id)
            if row is None or (allowed is not None and row["project_id"] not in allowed):
                missing.append(record_id)
            else:
                found.append(Record.from_row(row))
        touched = [r for r in found if r.id in live]
        if touch and touched:
            now = clock.now()
            async with self._write() as conn:
                await conn.executemany(
                    "UPDATE records SET access_count = access_count + 1, last_accessed = ? "
                    "WHERE id = ?",
                    [(now, r.id) for r in touched],
                )
            found = [
                replace(r, access_count=r.access_count + 1, last_accessed=now)
                if r.id in live
                else r
                for r in found
            ]
        return found, missing

    async def add(self, new: NewRecord) -> Record:
        """Validate and insert a record, applying supersession and the keyed rules atomically."""
        valid = new.validated()
        async with self._write() as conn:
            return await self._insert(conn, valid)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """Several changes in one write transaction: all of them, or none."""
        async with self._write() as conn:
            yield Transaction(self, conn)

    async def _insert(self, conn: aiosqlite.Connection, valid: NewRecord) -> Record:
        now = clock.now()
        record = valid.to_record(clock.ulid(), now)
        to_supersede: list[str] = []
        if valid.supersedes:
            old = await self._current_for_update(valid.supersedes, valid.project_id)
            if old.type != record.type:
                raise ValidationError(
                    f"record {old.id} is a {old.type}; a {record.type} cannot supersede it"
                )
            to_supersede.append(old.id)
        keyed = await self._keyed_current(record)
        if keyed is not None and keyed not in to_supersede:
            to_supersede.append(keyed)
        await conn.execute("PRAGMA defer_foreign_keys = ON")
        for old_id in to_supersede:
            cursor = await conn.execute(schema.SUPERSEDE_SQL, (now, record.id, old_id))
            if cursor.rowcount != 1:
                raise ConflictError(
                    f"record {old_id} was superseded meanwhile; nothing was written"
                )
            await _add_edge(conn, record.id, old_id, "supersedes", now)
        await conn.execute(schema.INSERT_RECORD_SQL, [getattr(record, n) for n in COLUMNS])
        if valid.supersedes:  # a new version is about the same files and symbols as the old one
            await conn.execute(
                "INSERT OR IGNORE INTO record_entities(record_id, entity_id) "
                "SELECT ?, entity_id FROM record_entities WHERE record_id = ?",
                (record.id, valid.supersedes),
            )
        self._changed.add(record.project_id)
        return record

    async def _current_for_update(self, record_id: str, project_id: str) -> Record:
        old = await self.get(record_id)
        if old.project_id != project_id:
            if old.project_id == schema.GLOBAL_PROJECT_ID:
                raise ValidationError(
                    f"record {record_id} is global: supersede it with a global record "
                    "(scope global), so that every project sees the new version"
                )
            raise NotFoundError(f"no record with id {record_id!r} in this project")
        if old.superseded_at is not None:
            raise ConflictError(
                f"record {record_id} is already superseded by {old.superseded_by}; "
                f"supersede the current version ({old.superseded_by}) instead"
            )
        return old

    async def _keyed_current(self, record: Record) -> str | None:
        if record.type == "handover":
            row = await self._one(schema.CURRENT_HANDOVER_SQL, (record.project_id,))
        elif record.type == "profile" and record.key:
            row = await self._one(schema.CURRENT_PROFILE_KEY_SQL, (record.project_id, record.key))
        else:
            return None
        return None if row is None else str(row["id"])

    async def supersede(
        self,
        old_id: str,
        new_body: str,
        rationale: str,
        *,
        project_id: str | None = None,
        title: str | None = None,
        source: str = "cli",
        confidence: str = "explicit",
        session_id: str | None = None,
    ) -> tuple[Record, Record]:
        """Replace a current record by a new version; return ``(old, new)`` as they are after it."""
        old = await self.get(old_id)
        if project_id and old.project_id not in (project_id, schema.GLOBAL_PROJECT_ID):
            raise NotFoundError(f"no record with id {old_id!r} in this project")
        if not rationale or not rationale.strip():
            raise ValidationError("a rationale is required to supersede a record")
        created = await self.add(
            NewRecord(
                type=old.type,
                title=title if title is not None else old.title,
                body=new_body,
                project_id=old.project_id,
                scope=old.scope,
                confidence=confidence,
                source=source,
                pinned=old.pinned,
                keywords=old.keywords,
                key=old.key,
                rationale=rationale,
                session_id=session_id,
                supersedes=old_id,
            )
        )
        return await self.get(old_id), created

    async def edit(
        self, record_id: str, *, title: str | None = None, body: str | None = None
    ) -> tuple[Record, Record]:
        """A new version of a record with a changed title and/or body (history kept)."""
        old = await self.get(record_id)
        new_title = old.title if title is None else title
        new_body = old.body if body is None else body
        if " ".join(new_title.split()) == old.title and new_body.strip() == old.body:
            raise ValidationError("nothing to change: the title and body are as they are")
        return await self.supersede(record_id, new_body, "edited", title=new_title)

    async def set_pinned(self, record_id: str, pinned: bool) -> Record:
        """Pin or unpin a record in place (pinning ranks, it does not change the fact)."""
        async with self._write() as conn:
            cursor = await conn.execute(
                "UPDATE records SET pinned = ? WHERE id = ?", (int(pinned), record_id)
            )
            if cursor.rowcount != 1:
                raise NotFoundError(f"no record with id {record_id!r}")
            await self._mark_changed(record_id)
        return await self.get(record_id)

    async def _mark_changed(self, record_id: str) -> None:
        """Note the project of a record changed in the open write (its digest goes stale)."""
        row = await self._one("SELECT project_id FROM records WHERE id = ?", (record_id,))
        if row is not None:
            self._changed.add(str(row[0]))

    async def history(self, record_id: str) -> list[Record]:
        """The supersession chain through a record, both ways, oldest first (archive included)."""
        await self.get(record_id)
        # One recursive step per table (not a UNION view) so each step uses that table's index.
        back = (
            "SELECT r.id, back.depth + 1 FROM {table} r JOIN back ON r.superseded_by = back.id "
            f"WHERE back.depth < {HISTORY_MAX_DEPTH}"
        )
        fwd = (
            "SELECT r.superseded_by, fwd.depth + 1 FROM {table} r JOIN fwd ON r.id = fwd.id "
            f"WHERE r.superseded_by IS NOT NULL AND fwd.depth < {HISTORY_MAX_DEPTH}"
        )
        chain = "id IN (SELECT id FROM back UNION SELECT id FROM fwd)"
        rows = await self._rows(
            f"""
            WITH RECURSIVE
              back(id, depth) AS (
                SELECT ?, 0
                UNION {back.format(table="records")}
                UNION {back.format(table="records_archive")}),
              fwd(id, depth) AS (
                SELECT ?, 0
                UNION {fwd.format(table="records")}
                UNION {fwd.format(table="records_archive")})
            SELECT {_COLS} FROM records WHERE {chain}
            UNION ALL SELECT {_COLS} FROM records_archive WHERE {chain}
            ORDER BY recorded_at, id
            """,
            (record_id, record_id),
        )
        return [Record.from_row(row) for row in rows]

    async def list_records(
        self,
        project_id: str | None = None,
        *,
        types: Sequence[str] = (),
        include_superseded: bool = True,
        as_of: str | None = None,
    ) -> list[Record]:
        """Records of one project (``None`` = all projects; global ones only as their own project).

        Superseded records include the archived ones; ``as_of`` keeps the records valid then.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if project_id is not None:
            clauses.append("project_id = ?")
            params.append(project_id)
        if types:
            clauses.append(f"type IN ({', '.join('?' * len(types))})")
            params.extend(types)
        if as_of is not None:
            clauses.append("valid_from <= ? AND (superseded_at IS NULL OR superseded_at > ?)")
            params.extend((as_of, as_of))
        elif not include_superseded:
            clauses.append("superseded_at IS NULL")
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT {_COLS} FROM records {where}"
        if include_superseded or as_of is not None:
            sql += f" UNION ALL SELECT {_COLS} FROM records_archive {where}"
            params = [*params, *params]
        rows = await self._rows(f"{sql} ORDER BY project_id, type, recorded_at, id", params)
        return [Record.from_row(row) for row in rows]

    # -- search -------------------------------------------------------------------------------

    async def search(self, query: SearchQuery) -> SearchResult:
        """Keyword search with BM25 and the reranking formula; LIKE fallback when FTS5 fails."""
        terms = retrieval.query_terms(query.text)
        if not terms or query.limit <= 0:
            return SearchResult([])
        for types_value in query.types:
            if types_value not in schema.RECORD_TYPES:
                raise ValidationError(
                    f"type {types_value!r} is not one of: {', '.join(schema.RECORD_TYPES)}"
                )
        if query.scope not in ("all", "project", "global"):
            raise ValidationError(f"scope {query.scope!r} is not one of: all, project, global")
        params: dict[str, Any] = {
            "project_ids": retrieval.scope_projects(query.project_id, query.scope),
            "types": tuple(query.types),
            "as_of": query.as_of,
            "include_superseded": query.include_superseded,
            "exclude_ids": tuple(query.exclude_ids),
            "candidates": max(50, query.limit * 5),
        }
        degraded: str | None = None
        rows: list[Any] | None = None
        if self.has_fts:
            try:
                sql, args = retrieval.term_counts_sql(terms)
                counts = list((await self._rows(sql, args))[0])
                chosen = retrieval.select_terms(terms, counts)
                if not chosen:
                    return SearchResult([])
                sql, args = retrieval.search_sql(chosen, fts=True, **params)
                rows = await self._rows(sql, args)
            except sqlean.OperationalError as exc:
                degraded = f"FTS5 query failed ({exc}); used LIKE search"
        else:
            degraded = "FTS5 is not available in this SQLite; used LIKE search"
        if rows is None:
            sql, args = retrieval.search_sql(terms, fts=False, **params)
            rows = await self._rows(sql, args)
        if query.as_of is not None or query.include_superseded:
            rows = [*rows, *await self._archive_rows(terms, params)]
        hits = [
            SearchHit(Record.from_row(row), score)
            for row, score in retrieval.rerank(rows, query.limit)
        ]
        return SearchResult(hits, degraded)

    async def _archive_rows(self, terms: Sequence[str], params: dict[str, Any]) -> list[Any]:
        """Search rows from the archive: the term-hit (LIKE) query, the cold table has no FTS index.

        Their relevance is the weighted count of term hits, the degraded search's scale, not BM25's.
        """
        sql, args = retrieval.search_sql(terms, fts=False, **params)
        hot = "FROM records AS r "
        if sql.count(hot) != 1:  # retrieval's SQL changed shape: fail loudly, not silently
            raise DatabaseError("cannot search the archive: unexpected search SQL")
        return await self._rows(sql.replace(hot, "FROM records_archive AS r "), args)

    async def prune_candidates(
        self, project_id: str | None = None, *, now: str | None = None, limit: int | None = None
    ) -> list[PruneCandidate]:
        """Current records scored below :data:`LOW_SCORE` for over :data:`PRUNE_AFTER_DAYS` days.

        A project's candidates include the global ones (as ``status`` counts them); ``None`` = all.
        """
        since = days_before(now, PRUNE_AFTER_DAYS)
        where = "superseded_at IS NULL AND pinned = 0 AND low_score_since < ?"
        params: list[Any] = [since]
        if project_id is not None:
            ids = retrieval.scope_projects(project_id, "all")
            where += f" AND project_id IN ({', '.join('?' * len(ids))})"
            params.extend(ids)
        sql = (
            "SELECT id, project_id, type, title, score, low_score_since FROM records "
            f"WHERE {where} ORDER BY low_score_since, id"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [PruneCandidate(**dict(row)) for row in await self._rows(sql, params)]

    # -- whole-store operations -----------------------------------------------------------------

    async def status(self, project_id: str | None = None) -> dict[str, Any]:
        """Counts by type (current records of the project and global), history and sessions."""
        ids = retrieval.scope_projects(project_id, "all")
        marks = ", ".join("?" * len(ids))
        counts = {t: 0 for t in schema.RECORD_TYPES}
        for row in await self._rows(
            f"SELECT type, count(*) AS n FROM records WHERE project_id IN ({marks}) "
            "AND superseded_at IS NULL GROUP BY type",
            ids,
        ):
            counts[row["type"]] = row["n"]
        superseded = await self._one(
            f"SELECT count(*) FROM records WHERE project_id IN ({marks}) "
            "AND superseded_at IS NOT NULL",
            ids,
        )
        sessions = await self.sessions(project_id, limit=None)
        all_sessions = await self.sessions(None, limit=None)
        totals = await self._one(
            "SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM projects)"
        )
        archived = await self._one(
            f"SELECT count(*) FROM records_archive WHERE project_id IN ({marks})", ids
        )
        candidates = await self.prune_candidates(project_id)
        return {
            "project_id": project_id,
            "counts": counts,
            "current": sum(counts.values()),
            "superseded": superseded[0],
            "archived": archived[0],
            "prune_candidates": {
                "count": len(candidates),
                "records": [c.to_dict() for c in candidates[:PRUNE_SHOWN]],
            },
            "sessions": len(sessions),
            "tokens_injected": sum(s["tokens_injected"] for s in sessions),
            "extraction_cost_usd": float(sum(s["extraction_cost_usd"] for s in sessions)),
            "recent_sessions": sessions[:10],
            "extraction_cost_by_month": _by_month(all_sessions),
            "store": {
                "path": self.path,
                "records": totals[0],
                "projects": totals[1],
                "sessions": len(all_sessions),
                "tokens_injected": sum(s["tokens_injected"] for s in all_sessions),
            },
        }

    async def session(self, session_id: str) -> dict[str, Any] | None:
        """The ``sessions`` row of one session, or None."""
        row = await self._one("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
        return None if row is None else dict(row)

    async def sessions(
        self, project_id: str | None = None, *, limit: int | None = 200
    ) -> list[dict[str, Any]]:
        """Sessions, newest first, with ``tokens_injected`` including still-open hook ledgers.

        A session's injections are written to its ledger file by the hooks and folded into the
        ``sessions`` row at SessionEnd; until then they are read from the ledger here.
        """
        from agentctx.hooks import ledger

        where = "" if project_id is None else "WHERE project_id = ?"
        params: list[Any] = [] if project_id is None else [project_id]
        rows = [
            dict(row)
            for row in await self._rows(
                "SELECT session_id, project_id, cwd, started_at, ended_at, tokens_injected, "
                f"injections, extraction_cost_usd FROM sessions {where} "
                "ORDER BY coalesce(started_at, '') DESC, session_id",
                params,
            )
        ]
        known = {row["session_id"] for row in rows}
        live = await anyio.to_thread.run_sync(ledger.open_sessions)
        for session_id, entries in live.items():
            tokens, count = ledger.totals(entries)
            first = entries[0] if entries else {}
            if session_id not in known:
                if project_id is not None and first.get("project_id") != project_id:
                    continue
                rows.append(
                    {
                        "session_id": session_id,
                        "project_id": first.get("project_id"),
                        "cwd": first.get("cwd"),
                        "started_at": None,
                        "ended_at": None,
                        "tokens_injected": 0,
                        "injections": 0,
                        "extraction_cost_usd": 0.0,
                    }
                )
            row = next(r for r in rows if r["session_id"] == session_id)
            row["tokens_injected"] += tokens
            row["injections"] += count
        return rows if limit is None else rows[:limit]

    async def reset(self, project_id: str) -> int:
        """Delete every record of one project (archived ones too, not global ones); how many."""
        if project_id == schema.GLOBAL_PROJECT_ID:
            raise ValidationError("reset works on a project; global records are kept")
        async with self._write() as conn:
            self._changed.add(project_id)
            await conn.execute("PRAGMA defer_foreign_keys = ON")
            ids = "SELECT id FROM records WHERE project_id = ?"
            every = f"{ids} UNION ALL SELECT id FROM records_archive WHERE project_id = ?"
            await conn.execute(
                f"DELETE FROM edges WHERE from_id IN ({every}) OR to_id IN ({every})",
                (project_id,) * 4,
            )
            if self.capabilities.vec_version:
                await conn.execute(
                    f"DELETE FROM records_vec WHERE record_id IN ({ids})", (project_id,)
                )
            await conn.execute("DELETE FROM nodes WHERE project_id = ?", (project_id,))
            cursor = await conn.execute("DELETE FROM records WHERE project_id = ?", (project_id,))
            deleted = int(cursor.rowcount)
            cursor = await conn.execute(
                "DELETE FROM records_archive WHERE project_id = ?", (project_id,)
            )
            return deleted + int(cursor.rowcount)

    async def export_data(self, project_id: str | None = None) -> dict[str, Any]:
        """Projects, records, edges, nodes and entity links as plain data (``None`` = everything).

        Archived records are exported with the rest (they are superseded records); imported, they
        land in ``records`` as superseded records, and a later consolidation archives them again.
        """
        records = await self.list_records(project_id)
        ids = {r.id for r in records}
        project_ids = {r.project_id for r in records}
        if project_id is not None:
            project_ids.add(project_id)
        projects = [p for p in await self.projects() if p["project_id"] in project_ids]
        edges = [
            dict(row)
            for row in await self._rows("SELECT * FROM edges ORDER BY created_at, id")
            if row["from_id"] in ids or row["to_id"] in ids
        ]
        links = [
            dict(row)
            for row in await self._rows(
                "SELECT * FROM record_entities ORDER BY record_id, entity_id"
            )
            if row["record_id"] in ids
        ]
        nodes = [
            dict(row)
            for row in await self._rows("SELECT * FROM nodes ORDER BY project_id, kind, name")
            if row["project_id"] in project_ids
        ]
        return {
            "format": "agentctx-export",
            "version": 1,
            "projects": sorted(projects, key=lambda p: str(p["project_id"])),
            "records": [r.to_dict() for r in records],
            "edges": edges,
            "nodes": nodes,
            "record_entities": links,
        }

    async def import_data(self, data: dict[str, Any]) -> ImportReport:
        """Merge an export (same shape as :meth:`export_data`); rows already present are kept.

        Idempotent by id. A current handover or keyed profile record that collides with a current
        one already here is resolved by time: the later ``valid_from`` stays current and the other is
        marked superseded by it, so the keyed rules still hold.
        """
        report = ImportReport()
        records = [_record_from_data(item) for item in data.get("records", [])]
        projects = {r.id: r.project_id for r in records}
        for record in records:
            successor = record.superseded_by
            if successor is None:
                continue
            if successor not in projects:
                row = await self._row_by_id(successor)
                projects[successor] = row[0] if row else record.project_id
            if projects[successor] != record.project_id:
                raise ValidationError(
                    f"import: record {record.id} is superseded by {successor} of another project "
                    "or scope; a record is only superseded within its own namespace"
                )
        try:
            async with self._write() as conn:
                await conn.execute("PRAGMA defer_foreign_keys = ON")
                await _insert_rows(conn, "projects", data.get("projects", []), report)
                for record in records:
                    await self._import_record(conn, record, report)
                await _insert_rows(conn, "nodes", data.get("nodes", []), report)
                await _insert_rows(conn, "edges", data.get("edges", []), report)
                await _insert_rows(conn, "record_entities", data.get("record_entities", []), report)
        except sqlean.IntegrityError as exc:
            raise ValidationError(
                f"import: the data is inconsistent ({exc}), e.g. a reference to a record that is "
                "neither in the file nor in the store; nothing was imported"
            ) from exc
        return report

    async def _import_record(
        self, conn: aiosqlite.Connection, record: Record, report: ImportReport
    ) -> None:
        stored = await self._row_by_id(record.id)
        if stored is not None:  # archived ones count as present
            if (
                stored["superseded_at"] is None
                and record.superseded_at is not None
                and stored["project_id"] == record.project_id
            ):
                # A supersession made after an earlier import travels with the next one. Like every
                # supersession it is set once (only on a current row), so the merge stays idempotent.
                await conn.execute(
                    schema.SUPERSEDE_SQL, (record.superseded_at, record.superseded_by, record.id)
                )
                self._changed.add(record.project_id)
                report.superseded_on_import.append(record.id)
            report.skipped["records"] = report.skipped.get("records", 0) + 1
            return
        if record.superseded_at is None:
            rival = await self._keyed_current(record)
            if rival is not None:
                other = await self.get(rival)
                newer, older = (
                    (record, other) if record.valid_from >= other.valid_from else (other, record)
                )
                if older is other:
                    await conn.execute(schema.SUPERSEDE_SQL, (newer.valid_from, newer.id, older.id))
                else:
                    record = replace(record, superseded_at=newer.valid_from, superseded_by=newer.id)
                await _add_edge(conn, newer.id, older.id, "supersedes", newer.valid_from)
                report.superseded_on_conflict.append(older.id)
        await conn.execute(schema.INSERT_RECORD_SQL, [getattr(record, n) for n in COLUMNS])
        self._changed.add(record.project_id)
        report.added["records"] = report.added.get("records", 0) + 1


def _by_month(sessions: list[dict[str, Any]]) -> dict[str, float]:
    """Extraction cost per calendar month (UTC) of the sessions' start, all projects."""
    months: dict[str, float] = {}
    for session in sessions:
        cost = float(session["extraction_cost_usd"] or 0.0)
        if not cost:
            continue
        month = (session.get("started_at") or "")[:7] or "unknown"
        months[month] = months.get(month, 0.0) + cost
    return dict(sorted(months.items()))


class Transaction:
    """An open write transaction of a :class:`Store` (see :meth:`Store.transaction`)."""

    def __init__(self, store: Store, conn: aiosqlite.Connection) -> None:
        self._store = store
        self._conn = conn

    async def add(self, new: NewRecord) -> Record:
        """Validate and insert a record (supersession and keyed rules included)."""
        return await self._store._insert(self._conn, new.validated())

    async def find_current(self, project_id: str, record_type: str, title: str) -> Record | None:
        """The current record of this project, type and (whitespace-normalized) title, if any."""
        row = await self._store._one(
            f"SELECT {_COLS} FROM records WHERE project_id = ? AND type = ? AND title = ? "
            "AND superseded_at IS NULL ORDER BY valid_from DESC LIMIT 1",
            (project_id, record_type, " ".join(title.split())),
        )
        return None if row is None else Record.from_row(row)

    async def reinforce(self, record_id: str, *, explicit: bool, threshold: int) -> None:
        """Count one more session that showed this record; promote an inferred one when due.

        A record seen in ``threshold`` sessions becomes ``reinforced``; an explicit statement
        makes it ``explicit`` at once.
        """
        await self._conn.execute(
            "UPDATE records SET reinforce_count = reinforce_count + 1, confidence = CASE "
            "WHEN ? THEN 'explicit' "
            "WHEN confidence = 'inferred' AND reinforce_count + 2 >= ? THEN 'reinforced' "
            "ELSE confidence END WHERE id = ?",
            (int(explicit), threshold, record_id),
        )
        await self._store._mark_changed(record_id)

    async def mark_seen_in(self, record_id: str, session_id: str) -> bool:
        """Link a record to a session that showed it (``derives_from``); False if already linked."""
        cursor = await self._conn.execute(
            schema.INSERT_EDGE_SQL,
            (clock.ulid(), record_id, session_id, "derives_from", clock.now()),
        )
        return cursor.rowcount == 1

    async def update_body(self, record_id: str, body: str, keywords: str = "") -> None:
        """Enrich a stub in place (a hook observation the extraction explained)."""
        from agentctx.records import normalize_keywords

        text = body.replace("\x00", "").strip()[: schema.BODY_MAX]
        if not text:
            raise ValidationError("a record body cannot be empty")
        await self._conn.execute(
            "UPDATE records SET body = ?, keywords = ?, pending_embedding = 1 WHERE id = ?",
            (text, normalize_keywords(keywords), record_id),
        )
        await self._store._mark_changed(record_id)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement inside the transaction; return the affected row count."""
        cursor = await self._conn.execute(sql, params)
        return int(cursor.rowcount)

    async def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> int:
        """Run one statement for each parameter row (one call, not one round trip per row)."""
        cursor = await self._conn.executemany(sql, params)
        return int(cursor.rowcount)

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a query inside the transaction."""
        return await self._store._rows(sql, params)

    async def mark_changed(self, record_id: str) -> None:
        """Note that this record's project changed (its digest is dropped after the commit)."""
        await self._store._mark_changed(record_id)


def _prepare(path: str, create: bool, in_home: bool) -> None:
    """Create or migrate the database file (sync; run in a worker thread by ``Store.open``)."""
    if create and in_home:
        home.ensure_home()
    elif create:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # The version is checked before the connection policy writes anything (WAL switch).
    conn, caps = db.connect(
        path, create=create, check_version=lambda version: schema.check_not_newer(version, path)
    )
    try:
        schema.migrate(conn, caps, path)
    except sqlean.DatabaseError as exc:
        raise DatabaseError(f"cannot prepare the database at {path}: {exc}") from exc
    finally:
        conn.close()


def days_before(now: str | None, days: float) -> str:
    """The stored time ``days`` before ``now`` (default: the current time)."""
    moment = datetime.fromisoformat(now or clock.now()).astimezone(UTC)
    return clock.format_time(moment - timedelta(days=days))


async def _add_edge(
    conn: aiosqlite.Connection, from_id: str, to_id: str, rel_type: str, created_at: str
) -> None:
    await conn.execute(schema.INSERT_EDGE_SQL, (clock.ulid(), from_id, to_id, rel_type, created_at))


_TABLE_COLUMNS = {
    "projects": ("project_id", "name", "root", "remote", "created_at", "last_seen_at"),
    "nodes": ("id", "project_id", "kind", "name", "created_at"),
    "edges": ("id", "from_id", "to_id", "rel_type", "weight", "created_at"),
    "record_entities": ("record_id", "entity_id"),
}


async def _insert_rows(
    conn: aiosqlite.Connection, table: str, rows: Iterable[dict[str, Any]], report: ImportReport
) -> None:
    columns = _TABLE_COLUMNS[table]
    sql = (
        f"INSERT OR IGNORE INTO {table}({', '.join(columns)}) "
        f"VALUES ({', '.join('?' * len(columns))})"
    )
    for row in rows:
        try:
            values = [row[name] for name in columns]
        except (KeyError, TypeError) as exc:
            raise ValidationError(f"import: a {table} row lacks a field ({exc})") from exc
        cursor = await conn.execute(sql, values)
        bucket = report.added if cursor.rowcount == 1 else report.skipped
        bucket[table] = bucket.get(table, 0) + 1


#: Fields every imported record must carry (docs/spec.md, 8.4); the rest take column defaults.
_REQUIRED = (
    "id",
    "project_id",
    "type",
    "title",
    "body",
    "scope",
    "confidence",
    "source",
    "valid_from",
    "recorded_at",
)


def _record_from_data(item: Any) -> Record:
    if not isinstance(item, dict):
        raise ValidationError("import: a record entry is not an object")
    missing = [name for name in _REQUIRED if not item.get(name)]
    if missing:
        raise ValidationError(f"import: a record lacks {', '.join(missing)}")
    draft = NewRecord(
        type=item.get("type", ""),
        title=item.get("title", ""),
        body=item.get("body", ""),
        project_id=item["project_id"],
        scope=item.get("scope", "project"),
        confidence=item.get("confidence", "inferred"),
        source=item.get("source", "import"),
    ).validated()
    data = {name: item[name] for name in COLUMNS if name in item}
    data.update(title=draft.title, body=draft.body, project_id=draft.project_id)
    try:
        return Record.from_row({name: data.get(name, _DEFAULTS.get(name)) for name in COLUMNS})
    except TypeError as exc:
        raise ValidationError(f"import: record {item.get('id')!r} is malformed ({exc})") from exc


_DEFAULTS: dict[str, Any] = {
    "keywords": "",
    "pinned": False,
    "reinforce_count": 0,
    "access_count": 0,
    "score": 1.0,
    "claudemd_drift_score": 0.0,
    "pending_embedding": True,
}
