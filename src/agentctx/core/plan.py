"""Plans: a rule of the store written once, run by a sync executor (hooks) or an async one (library).

A plan is a generator that yields :class:`Step` objects (one SQL statement and how to read its
result) and receives each result back; what it returns is the rule's decision. It holds the SQL and
the logic and performs no I/O itself, so the hook path runs it with :func:`run` on a plain sqlean
connection and :class:`agentctx.store.Store` runs the very same generator with :func:`run_async` over
aiosqlite. An error raised by a statement is thrown into the plan at the ``yield`` that asked for it,
so a plan can fall back (e.g. from FTS5 to the LIKE search) in one place for both executors.

Plans never open or end transactions: the caller does (``BEGIN IMMEDIATE`` in the hook's write, the
store's ``_write``), so a plan composes with others inside one transaction (``yield from``).

Example::

    def count_records(project_id: str) -> Plan[int]:
        row = yield one("SELECT count(*) FROM records WHERE project_id = ?", (project_id,))
        return int(row[0])

    run(conn, count_records(pid))               # hooks
    await run_async(aconn, count_records(pid))  # the library
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds on the hook path; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Generator, Iterable, Sequence
    from typing import Any, TypeAlias, TypeVar

    import aiosqlite
    import sqlean

    T = TypeVar("T")
    #: A plan returning ``T``: it yields steps and receives their results.
    Plan: TypeAlias = Generator["Step", Any, T]

#: How a step's result is read: every row, the first row (or None), the affected row count.
ALL, ONE, COUNT, MANY = "all", "one", "count", "many"


class Step:
    """One SQL statement of a plan, and how its result is read (:data:`ALL`, :data:`ONE`, ...).

    ``MANY`` runs the statement once per parameter row (``executemany``) and reads the row count.
    """

    __slots__ = ("params", "read", "sql")

    def __init__(self, sql: str, params: Any = (), read: str = ALL) -> None:
        self.sql = sql
        self.params = params
        self.read = read

    def __repr__(self) -> str:
        return f"Step({self.sql[:60]!r}, read={self.read!r})"


def rows(sql: str, params: Sequence[Any] = ()) -> Step:
    """A step whose result is the list of rows."""
    return Step(sql, params, ALL)


def one(sql: str, params: Sequence[Any] = ()) -> Step:
    """A step whose result is the first row, or None."""
    return Step(sql, params, ONE)


def execute(sql: str, params: Sequence[Any] = ()) -> Step:
    """A step whose result is the number of rows the statement changed."""
    return Step(sql, params, COUNT)


def execute_many(sql: str, params: Iterable[Sequence[Any]]) -> Step:
    """A step that runs ``sql`` for each parameter row; its result is the changed row count."""
    return Step(sql, list(params), MANY)


class _Done:
    """A plan's decision, when it has returned."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _advance(rule: Plan[Any], result: Any, error: BaseException | None) -> Step | _Done:
    """Hand the plan its last step's result (or error): its next step, or its decision."""
    try:
        return rule.send(result) if error is None else rule.throw(error)
    except StopIteration as stop:
        return _Done(stop.value)


def run(conn: sqlean.Connection, plan: Plan[T]) -> T:
    """Run ``plan`` on a synchronous connection; return its decision."""
    step = _advance(plan, None, None)
    while isinstance(step, Step):
        try:
            if step.read == MANY:
                result: Any = conn.executemany(step.sql, step.params).rowcount
            else:
                cursor = conn.execute(step.sql, step.params)
                result = _read(cursor, step.read)
        except Exception as exc:
            step = _advance(plan, None, exc)
        else:
            step = _advance(plan, result, None)
    return step.value  # type: ignore[no-any-return]


def _read(cursor: sqlean.Cursor, read: str) -> Any:
    if read == ALL:
        return cursor.fetchall()
    return cursor.fetchone() if read == ONE else cursor.rowcount


async def run_async(conn: aiosqlite.Connection, plan: Plan[T]) -> T:
    """Run ``plan`` on an aiosqlite connection; return its decision."""
    step = _advance(plan, None, None)
    while isinstance(step, Step):
        try:
            if step.read == MANY:
                result: Any = (await conn.executemany(step.sql, step.params)).rowcount
            else:
                async with conn.execute(step.sql, step.params) as cursor:
                    result = await _read_async(cursor, step.read)
        except Exception as exc:
            step = _advance(plan, None, exc)
        else:
            step = _advance(plan, result, None)
    return step.value  # type: ignore[no-any-return]


async def _read_async(cursor: aiosqlite.Cursor, read: str) -> Any:
    if read == ALL:
        return list(await cursor.fetchall())
    return await cursor.fetchone() if read == ONE else cursor.rowcount
