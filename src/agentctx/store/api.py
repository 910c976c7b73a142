"""The Store class: the one async library API over the SQLite file.

``Store.open()`` applies pending migrations, then every adapter (CLI, MCP server, workers, dashboard)
awaits its methods. Writes run in ``BEGIN IMMEDIATE`` transactions serialized by a per-store lock, so a
failed write leaves nothing behind and concurrent processes queue on SQLite's busy timeout rather than
failing. Supersession and the keyed rules (one current handover per checkout of a project, one current
profile record per key) happen inside the same transaction as the insert; partial unique indexes make
them hold even against a racing writer. Nothing here deletes a record. Whole-store operations are
free functions over a ``Store`` in the modules beside this one: ``inventory`` (status, sessions),
``transfer`` (export, import) and ``deletion`` (reset, the one deletion).
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

import anyio
import sqlean

from agentctx.core import clock, db, digests, home, plan, schema, search, writes
from agentctx.core.errors import DatabaseError, NotFoundError, ValidationError
from agentctx.records import COLUMNS, NewRecord, Record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Sequence

    import aiosqlite

    from agentctx.core.plan import Plan
    from agentctx.core.project import ProjectIdentity
    from agentctx.core.shapes import ProjectRow

T = TypeVar("T")

_COLS = ", ".join(COLUMNS)
HISTORY_MAX_DEPTH = 1000
#: Consolidation stamps ``records.low_score_since`` when a score falls below this; a record that
#: stays below it long enough is a prune candidate (:mod:`.inventory`), never deleted for it.
LOW_SCORE = 0.1


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A keyword search: text plus filters (see :mod:`agentctx.core.search` for the ranking)."""

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
                await anyio.to_thread.run_sync(digests.invalidate, set(self._changed))
                self._changed.clear()

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self._conn.execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        async with self._conn.execute(sql, params) as cursor:
            return await cursor.fetchone()

    # -- the public surface for other modules -------------------------------------------------

    async def run(self, rule: Plan[T]) -> T:
        """Run a read plan of :mod:`agentctx.core` on the store's connection (outside a write)."""
        return await plan.run_async(self._conn, rule)

    async def write(self, rule: Plan[T], *, changed: Iterable[str] = ()) -> T:
        """Run a plan in one write transaction; ``changed``: projects whose digests go stale."""
        async with self._write() as conn:
            result = await plan.run_async(conn, rule)
            self._changed.update(changed)
            return result

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of a read-only query (``sqlean.Row``: by index or by column name)."""
        return await self._rows(sql, params)

    async def row(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of a read-only query, or None."""
        return await self._one(sql, params)

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

    async def write_sync(self, work: Callable[[Any], T]) -> T:
        """Run sync ``work(conn)`` on a short writable connection to this store, in a worker thread.

        For rules written against a plain SQLite connection that manage their own transaction
        (capture's observations, :func:`agentctx.core.observe.apply`), shared with the hooks.
        """

        def run() -> T:
            conn, _caps = db.connect(self.path, create=False, load_vec=False)
            try:
                return work(conn)
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

    async def projects(self) -> list[ProjectRow]:
        """Every project row, most recently seen first."""
        rows = await self._rows("SELECT * FROM projects ORDER BY last_seen_at DESC")
        return [cast("ProjectRow", dict(row)) for row in rows]

    # -- records ------------------------------------------------------------------------------

    async def get(self, record_id: str) -> Record:
        """The record with this id (current, superseded or archived); :class:`NotFoundError` if none."""
        record = await self.find(record_id)
        if record is None:
            raise NotFoundError(f"no record with id {record_id!r}; find ids with `agentctx search`")
        return record

    async def find(self, record_id: str) -> Record | None:
        """The record with this id or handle (current, superseded or archived), or None.

        A handle is a unique prefix or suffix of the id, 6 characters or more, any case
        (:func:`agentctx.core.handles.resolve`); one that matches several records is a
        :class:`ValidationError` that says so.
        """
        row = await self._row_by_id(record_id)
        if row is None:
            full = await self.resolve(record_id)
            row = None if full is None else await self._row_by_id(full)
        return None if row is None else Record.from_row(row)

    async def resolve(self, handle: str) -> str | None:
        """The full id a record id or handle names, or None when none does (several: an error)."""
        from agentctx.core import handles

        if len(handle.strip()) < handles.MIN_HANDLE:
            return None
        try:
            return await self.run(handles.resolve(handle))
        except NotFoundError:
            return None

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
        allowed = search.scope_projects(project_id, "all") if project_id else None
        for asked in dict.fromkeys(ids):
            record_id = asked
            row = await self._row_by_id(record_id, archive=False)
            if row is None and (full := await self.resolve(asked)) is not None:
                record_id = full  # a handle (issue 25: the prompt's one-line entries carry one)
                row = await self._row_by_id(record_id, archive=False)
            if row is not None:
                live.add(record_id)
            else:
                row = await self._row_by_id(record_id)
            if row is None or (allowed is not None and row["project_id"] not in allowed):
                missing.append(asked)
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
        row = writes.new_row(valid.to_dict())
        await plan.run_async(conn, writes.insert(row, supersedes=valid.supersedes))
        self._changed.add(row["project_id"])
        return Record.from_row(row)

    async def current_handover(self, project_id: str, checkout: str | None) -> Record | None:
        """The handover a session in ``checkout`` is handed: its own current one, else the legacy.

        ``checkout`` is :attr:`ProjectIdentity.checkout` (None: only the legacy, key NULL, one).
        """
        row = await self._one(
            f"SELECT {_COLS} {schema.CHECKOUT_HANDOVERS} LIMIT 1",
            (project_id, checkout),
        )
        return None if row is None else Record.from_row(row)

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
                supersedes=old.id,  # old_id may be a handle (injected text names records by one)
            )
        )
        return await self.get(old.id), created

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
        record_id = (await self.get(record_id)).id  # an id or a handle
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
        record_id = (await self.get(record_id)).id  # an id, or a handle of one
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
        projects = () if project_id is None else (project_id,)
        clause, params = search.filters(projects, types, as_of, include_superseded, ())
        where = f" WHERE {clause}" if clause else ""
        sql = f"SELECT {_COLS} FROM records AS r{where}"
        if include_superseded or as_of is not None:
            sql += f" UNION ALL SELECT {_COLS} FROM records_archive AS r{where}"
            params = [*params, *params]
        rows = await self._rows(f"{sql} ORDER BY project_id, type, recorded_at, id", params)
        return [Record.from_row(row) for row in rows]

    # -- search -------------------------------------------------------------------------------

    async def search(self, query: SearchQuery) -> SearchResult:
        """Keyword search (:func:`agentctx.core.search.keyword_search`, no relevance floor)."""
        terms = search.query_terms(query.text)
        if not terms or query.limit <= 0:
            return SearchResult([])
        for types_value in query.types:
            if types_value not in schema.RECORD_TYPES:
                raise ValidationError(
                    f"type {types_value!r} is not one of: {', '.join(schema.RECORD_TYPES)}"
                )
        if query.scope not in ("all", "project", "global"):
            raise ValidationError(f"scope {query.scope!r} is not one of: all, project, global")
        found = await plan.run_async(
            self._conn,
            search.keyword_search(
                terms,
                project_ids=search.scope_projects(query.project_id, query.scope),
                types=query.types,
                as_of=query.as_of,
                include_superseded=query.include_superseded,
                exclude_ids=query.exclude_ids,
                candidates=max(50, query.limit * 5),
                limit=query.limit,
                fts=self.has_fts,
            ),
        )
        hits = [SearchHit(Record.from_row(row), score) for row, score in found.hits]
        return SearchResult(hits, found.degraded)

    async def scan(
        self, sql: str, params: Sequence[Any] = (), *, batch: int = 1024
    ) -> AsyncIterator[list[Any]]:
        """The rows of a read-only query, streamed in lists of up to ``batch`` rows.

        For a table too big to hold whole (every stored vector): the caller keeps what it needs.
        """
        async with self._conn.execute(sql, params) as cursor:
            while rows := await cursor.fetchmany(batch):
                yield list(rows)


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
        row = await self.run(writes.current_by_title(project_id, record_type, title))
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
        return await self.run(writes.edge(record_id, session_id, "derives_from", clock.now()))

    async def update_body(self, record_id: str, body: str, keywords: str = "") -> None:
        """Enrich a stub in place (a hook observation the extraction explained)."""
        await self.run(writes.update_body(record_id, body, keywords))
        await self._store._mark_changed(record_id)

    async def update_cues(self, record_id: str, cues: Sequence[str]) -> None:
        """Set a record's retrieval cues (search text only: its vector stays as it is)."""
        await self.run(writes.update_cues(record_id, cues))

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

    async def run(self, rule: Plan[T]) -> T:
        """Run a plan of :mod:`agentctx.core` inside the transaction."""
        return await plan.run_async(self._conn, rule)

    async def mark_changed(self, record_id: str) -> None:
        """Note that this record's project changed (its digest is dropped after the commit)."""
        await self._store._mark_changed(record_id)

    def mark_project_changed(self, project_id: str) -> None:
        """Note that this project's records changed (its digest is dropped after the commit)."""
        self._store._changed.add(project_id)

    async def keyed_current(self, record: Record) -> list[str]:
        """The ids of the current records a keyed rule makes ``record`` replace (maybe none)."""
        return await self.run(writes.keyed_current(record.type, record.project_id, record.key))


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
    except sqlean.DatabaseError as exc:  # damaged, full, read-only...: said as every path says it
        if db.fault(exc, path) == "other":
            raise DatabaseError(f"cannot prepare the database at {path}: {exc}") from exc
        raise DatabaseError(db.explain(exc, path)) from exc
    finally:
        conn.close()
