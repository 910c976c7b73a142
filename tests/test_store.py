"""The store's bi-temporal semantics: supersession, keyed rules, history, scopes, reset."""

from __future__ import annotations

from contextlib import closing
from typing import TYPE_CHECKING, Any

import anyio
import pytest
import sqlean

from agentctx.core import clock, db
from agentctx.core.errors import ConflictError, NotFoundError, ValidationError
from agentctx.core.handles import handle
from agentctx.store import SearchQuery, Store, deletion, inventory
from tests.helpers import new_record

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.records import NewRecord

pytestmark = pytest.mark.anyio

P = "a" * 64
#: The text of a record when a test names none.
TITLE = "Database choice"
BODY = "We use postgres for storage."
Q = "b" * 64
PAST = "2025-01-01T00:00:00Z"


def query(path: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows read through a separate connection: what is committed, not what the store caches."""
    conn, _ = db.connect(path, load_vec=False)
    with closing(conn):
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]


def edges(path: str) -> list[tuple[Any, ...]]:
    return query(path, "SELECT from_id, to_id, rel_type FROM edges ORDER BY created_at, id")


def counts(path: str) -> tuple[Any, ...]:
    return query(
        path,
        "SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM edges), "
        "(SELECT count(*) FROM records WHERE superseded_at IS NULL)",
    )[0]


async def ids(store: Store, text: str, **options: Any) -> list[str]:
    result = await store.search(SearchQuery(text, **options))
    assert result.degraded is None
    return [hit.record.id for hit in result.hits]


# -- supersession ------------------------------------------------------------------------------


async def test_supersede_marks_old_adds_new_and_edge(store: Store) -> None:
    old = await store.add(
        new_record(
            title=TITLE,
            body=BODY,
            valid_from=PAST,
            keywords="db sql",
            key="k",
            pinned=True,
            rationale="first",
        )
    )
    before, created = await store.supersede(old.id, "We use sqlite now.", "  simpler ops  ")
    assert before.id == old.id
    assert before.superseded_at == created.recorded_at == created.valid_from
    assert before.superseded_by == created.id
    assert not before.is_current
    assert created.is_current
    assert created.body == "We use sqlite now."
    assert created.rationale == "simpler ops"
    copied = ("type", "title", "scope", "project_id", "pinned", "keywords", "key")
    assert all(getattr(created, name) == getattr(old, name) for name in copied)
    assert (created.confidence, created.source) == ("explicit", "cli")
    assert edges(store.path) == [(created.id, old.id, "supersedes")]
    assert counts(store.path) == (2, 1, 1)
    # The old fact itself is untouched.
    assert (before.body, before.valid_from, before.rationale) == (old.body, old.valid_from, "first")


async def test_a_new_version_keeps_the_file_links_of_the_old(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY))
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        conn.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) "
            "VALUES ('n1', ?, 'file', 'src/app.py', ?)",
            (old.project_id, old.recorded_at),
        )
        conn.execute("INSERT INTO record_entities VALUES (?, 'n1')", (old.id,))
    _, created = await store.supersede(old.id, "A new body.", "why")
    links = query(store.path, "SELECT record_id FROM record_entities ORDER BY record_id")
    assert sorted(r[0] for r in links) == sorted([old.id, created.id])


async def test_supersession_is_one_transaction(store: Store) -> None:
    """If the insert fails after the UPDATE and the edge, neither survives."""
    old = await store.add(new_record(title=TITLE, body=BODY))
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        conn.execute(
            "CREATE TRIGGER fail_insert BEFORE INSERT ON records WHEN new.body = 'boom' "
            "BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
    with pytest.raises(sqlean.IntegrityError, match="boom"):
        await store.supersede(old.id, "boom", "why")
    assert counts(store.path) == (1, 0, 1)
    assert (await store.get(old.id)).is_current
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        conn.execute("DROP TRIGGER fail_insert")
    _, created = await store.supersede(old.id, "fine", "why")
    assert edges(store.path) == [(created.id, old.id, "supersedes")]


async def test_superseding_a_superseded_record_conflicts(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY))
    _, current = await store.supersede(old.id, "v2", "why")
    before = counts(store.path)
    with pytest.raises(ConflictError, match=f"already superseded by {current.id}"):
        await store.supersede(old.id, "v3", "why")
    with pytest.raises(ConflictError):
        await store.add(new_record(title=TITLE, body="v3", supersedes=old.id))
    with pytest.raises(ConflictError):
        await store.edit(old.id, body="v3")
    assert counts(store.path) == before == (2, 1, 1)


async def test_superseding_an_unknown_or_foreign_record_is_not_found(store: Store) -> None:
    other = await store.add(new_record(title=TITLE, body=BODY, project_id=Q))
    before = counts(store.path)
    with pytest.raises(NotFoundError, match="no record with id 'nope'"):
        await store.supersede("nope", "v2", "why")
    with pytest.raises(NotFoundError):
        await store.add(new_record(title=TITLE, body=BODY, supersedes="nope"))
    with pytest.raises(NotFoundError, match="in this project"):
        # a record of project Q, from project P
        await store.add(new_record(title=TITLE, body=BODY, supersedes=other.id))
    with pytest.raises(NotFoundError, match="in this project"):
        await store.supersede(other.id, "v2", "why", project_id=P)
    with pytest.raises(NotFoundError):
        await store.get("nope")
    assert counts(store.path) == before == (1, 0, 1)


async def test_supersede_needs_a_rationale(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY))
    with pytest.raises(ValidationError, match="rationale"):
        await store.supersede(old.id, "v2", "   ")
    assert counts(store.path) == (1, 0, 1)


async def test_supersedes_of_another_type_is_refused(store: Store) -> None:
    old = await store.add(new_record(type="convention", title=TITLE, body=BODY))
    with pytest.raises(ValidationError, match="a decision cannot supersede it"):
        await store.add(new_record(title=TITLE, body=BODY, supersedes=old.id))
    assert counts(store.path) == (1, 0, 1)
    assert (await store.get(old.id)).is_current


async def test_add_with_supersedes(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY))
    created = await store.add(
        new_record(title=TITLE, body="We use sqlite.", supersedes=old.id, rationale="ops")
    )
    assert (await store.get(old.id)).superseded_by == created.id
    assert edges(store.path) == [(created.id, old.id, "supersedes")]


# -- reading history ---------------------------------------------------------------------------


async def test_search_hides_superseded_unless_asked(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY, valid_from=PAST))
    _, current = await store.supersede(old.id, "We use sqlite for storage.", "ops")
    assert await ids(store, "storage", project_id=P) == [current.id]
    both = await ids(store, "storage", project_id=P, include_superseded=True)
    assert sorted(both) == sorted([old.id, current.id])
    assert await ids(store, "postgres", project_id=P) == []
    assert await ids(store, "postgres", project_id=P, include_superseded=True) == [old.id]


async def test_as_of_returns_what_was_true_then(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY, valid_from=PAST))
    _, current = await store.supersede(old.id, "We use sqlite for storage.", "ops")
    assert await ids(store, "storage", project_id=P, as_of="2024-12-31T23:59:59.999999Z") == []
    assert await ids(store, "storage", project_id=P, as_of=clock.parse_time("2025-06-01")) == [
        old.id
    ]
    # The boundary: the old fact is true up to (not at) its superseded_at.
    assert current.valid_from == (await store.get(old.id)).superseded_at
    assert await ids(store, "storage", project_id=P, as_of=current.valid_from) == [current.id]
    assert await ids(store, "storage", project_id=P, as_of=clock.now()) == [current.id]
    # as_of overrides include_superseded.
    assert await ids(
        store, "storage", project_id=P, as_of=clock.now(), include_superseded=True
    ) == [current.id]


async def test_list_records_as_of(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY, valid_from=PAST))
    _, current = await store.supersede(old.id, "We use sqlite for storage.", "ops")
    other = await store.add(new_record(title="Other", body=BODY, project_id=Q, valid_from=PAST))
    assert await store.list_records(P, as_of="2024-12-31T23:59:59.999999Z") == []
    assert [r.id for r in await store.list_records(P, as_of=clock.parse_time(PAST))] == [old.id]
    assert [r.id for r in await store.list_records(P, as_of=current.valid_from)] == [current.id]
    everywhere = await store.list_records(None, as_of=clock.parse_time("2025-06-01"))
    assert sorted(r.id for r in everywhere) == sorted([old.id, other.id])
    # as_of overrides include_superseded, as in search.
    latest = await store.list_records(P, as_of=clock.now(), include_superseded=False)
    assert [r.id for r in latest] == [current.id]


async def test_history_is_the_same_chain_from_every_member(store: Store) -> None:
    first = await store.add(new_record(title=TITLE, body=BODY, valid_from=PAST))
    _, second = await store.supersede(first.id, "v2", "why")
    assert [r.id for r in await store.history(first.id)] == [first.id, second.id]
    assert [r.id for r in await store.history(second.id)] == [first.id, second.id]
    _, third = await store.supersede(second.id, "v3", "why")
    unrelated = await store.add(new_record(title="Other", body=BODY))
    chain = [first.id, second.id, third.id]
    for member in chain:
        history = await store.history(member)
        assert [r.id for r in history] == chain
        assert [r.is_current for r in history] == [False, False, True]
    assert [r.id for r in await store.history(unrelated.id)] == [unrelated.id]
    with pytest.raises(NotFoundError):
        await store.history("nope")


# -- keyed rules -------------------------------------------------------------------------------


async def test_one_current_handover_per_project(store: Store) -> None:
    first = await store.add(new_record(type="handover", title="Handover", body="Was doing X"))
    theirs = await store.add(
        new_record(type="handover", title="Handover", body="Q work", project_id=Q)
    )
    second = await store.add(new_record(type="handover", title="Handover", body="Now doing Y"))
    assert (await store.get(first.id)).superseded_by == second.id
    assert (await store.get(theirs.id)).is_current
    current = await store.list_records(P, types=["handover"], include_superseded=False)
    assert [r.id for r in current] == [second.id]
    assert edges(store.path) == [(second.id, first.id, "supersedes")]
    # Naming the same handover in supersedes supersedes it once.
    third = await store.add(new_record(type="handover", title="H", body="Z", supersedes=second.id))
    assert (await store.get(second.id)).superseded_by == third.id
    assert len(edges(store.path)) == 2


async def test_one_current_handover_per_checkout(store: Store) -> None:
    legacy = await store.add(new_record(type="handover", title="H", body="before worktrees"))
    assert (await store.current_handover(P, "/wt/a")) == legacy  # shown to every checkout
    a = await store.add(new_record(type="handover", title="H", body="A's task", key="/wt/a"))
    b = await store.add(new_record(type="handover", title="H", body="B's task", key="/wt/b"))
    assert (await store.get(legacy.id)).superseded_by == a.id  # the first keyed one replaced it
    assert (await store.get(a.id)).is_current and (await store.get(b.id)).is_current
    a2 = await store.add(new_record(type="handover", title="H", body="A's next task", key="/wt/a"))
    assert (await store.get(a.id)).superseded_by == a2.id
    assert (await store.get(b.id)).is_current  # another worktree's handover is left alone
    assert (await store.current_handover(P, "/wt/a")) == a2
    assert (await store.current_handover(P, "/wt/c")) is None  # no own one and no legacy one
    # A handover of an unknown checkout is a legacy one: it replaces only the legacy one.
    unknown = await store.add(new_record(type="handover", title="H", body="somewhere"))
    assert (await store.current_handover(P, "/wt/c")) == unknown
    assert (await store.current_handover(P, "/wt/b")).id == b.id  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="handover key"):
        await store.add(new_record(type="handover", title="H", body="x", key="  "))


async def test_profile_records_with_the_same_key_supersede(store: Store) -> None:
    def profile(key: str, body: str) -> NewRecord:
        return new_record(
            type="profile", title=f"profile {key}", body=body, key=key, scope="global"
        )

    editor = await store.add(profile("editor", "vim"))
    shell = await store.add(profile("shell", "zsh"))
    unkeyed = await store.add(new_record(type="profile", title="no key", body="x", scope="global"))
    editor2 = await store.add(profile("editor", "helix"))
    assert (await store.get(editor.id)).superseded_by == editor2.id
    assert (await store.get(shell.id)).is_current
    assert (await store.get(unkeyed.id)).is_current
    current = await store.list_records("global", types=["profile"], include_superseded=False)
    assert sorted(r.id for r in current) == sorted([shell.id, unkeyed.id, editor2.id])
    # The same key in a project is another namespace.
    local = await store.add(new_record(type="profile", title="editor", body="code", key="editor"))
    assert local.is_current
    assert (await store.get(editor2.id)).is_current


async def test_unique_indexes_hold_against_a_raw_writer(store: Store) -> None:
    record = await store.add(new_record(type="handover", title="H", body="b"))
    row = {**record.to_row(), "id": clock.ulid()}
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn), pytest.raises(sqlean.IntegrityError, match="UNIQUE"):
        conn.execute(
            f"INSERT INTO records({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )


async def test_racing_supersessions_one_wins(agentctx_home: Path) -> None:
    first = await Store.open()
    second = await Store.open()
    try:
        old = await first.add(new_record(title=TITLE, body=BODY))
        outcomes: list[str] = []

        async def supersede(store: Store, body: str) -> None:
            try:
                await store.supersede(old.id, body, "race")
            except ConflictError:
                outcomes.append("conflict")
            else:
                outcomes.append("won")

        async with anyio.create_task_group() as group:
            group.start_soon(supersede, first, "from the first")
            group.start_soon(supersede, second, "from the second")
        assert sorted(outcomes) == ["conflict", "won"]
        assert counts(first.path) == (2, 1, 1)
    finally:
        await first.close()
        await second.close()


# -- scopes ------------------------------------------------------------------------------------


async def test_global_records_are_visible_from_every_project(store: Store) -> None:
    shared = await store.add(new_record(title="Tabs", body="indent with tabs", scope="global"))
    assert (shared.scope, shared.project_id) == ("global", "global")
    mine = await store.add(new_record(title="Tabs here", body="indent with tabs in P"))
    theirs = await store.add(
        new_record(title="Tabs there", body="indent with tabs in Q", project_id=Q)
    )
    assert sorted(await ids(store, "indent tabs", project_id=P)) == sorted([shared.id, mine.id])
    assert sorted(await ids(store, "indent tabs", project_id=Q)) == sorted([shared.id, theirs.id])
    other = "c" * 64
    assert await ids(store, "indent tabs", project_id=other) == [shared.id]
    assert await ids(store, "indent tabs", project_id=P, scope="project") == [mine.id]
    assert await ids(store, "indent tabs", project_id=P, scope="global") == [shared.id]
    assert await ids(store, "indent tabs") == [shared.id]


async def test_get_many(store: Store) -> None:
    mine = await store.add(new_record(title=TITLE, body=BODY))
    shared = await store.add(new_record(title="Shared", body=BODY, scope="global"))
    theirs = await store.add(new_record(title=TITLE, body=BODY, project_id=Q))
    wanted = [mine.id, "unknown", theirs.id, mine.id, shared.id]
    found, missing = await store.get_many(wanted, P)
    assert [r.id for r in found] == [mine.id, shared.id]
    assert missing == ["unknown", theirs.id]
    assert [r.access_count for r in found] == [1, 1]
    stored = await store.get(mine.id)
    assert stored.access_count == 1
    assert stored.last_accessed == found[0].last_accessed is not None
    assert (await store.get(theirs.id)).access_count == 0
    await store.get_many([mine.id], P)
    assert (await store.get(mine.id)).access_count == 2
    found, missing = await store.get_many([mine.id, theirs.id], touch=False)
    assert [r.access_count for r in found] == [2, 0]
    assert missing == []
    assert (await store.get(mine.id)).access_count == 2


async def test_set_pinned(store: Store) -> None:
    record = await store.add(new_record(title=TITLE, body=BODY))
    pinned = await store.set_pinned(record.id, True)
    assert pinned.pinned is True
    assert query(store.path, "SELECT pinned FROM records")[0] == (1,)
    assert (await store.set_pinned(record.id, False)).pinned is False
    assert (await store.get(record.id)).pinned is False
    with pytest.raises(NotFoundError):
        await store.set_pinned("nope", True)
    assert counts(store.path) == (1, 0, 1)


async def test_a_handle_names_the_record_to_supersede_edit_and_pin(store: Store) -> None:
    """Injected text names records by handle (core/handles.py): what Claude or the user copies from
    it must work wherever an id does, and the new version points at the full id."""
    record = await store.add(new_record(title=TITLE, body=BODY))
    short = handle(record.id)
    assert short != record.id and (await store.get(short)).id == record.id
    assert (await store.set_pinned(short.upper(), True)).pinned is True
    old, created = await store.supersede(short, "We use sqlite now.", "simpler ops")
    assert old.id == record.id and old.superseded_by == created.id
    assert edges(store.path) == [(created.id, record.id, "supersedes")]
    _, edited = await store.edit(handle(created.id), title="Database decision")
    assert [r.id for r in await store.history(short)] == [record.id, created.id, edited.id]


async def test_edit_makes_a_new_version(store: Store) -> None:
    record = await store.add(new_record(title=TITLE, body=BODY))
    old, edited = await store.edit(record.id, title="  Database   decision ")
    assert edited.title == "Database decision"
    assert edited.body == record.body
    assert edited.rationale == "edited"
    assert old.superseded_by == edited.id
    _, body_only = await store.edit(edited.id, body="We use sqlite.")
    assert (body_only.title, body_only.body) == ("Database decision", "We use sqlite.")
    with pytest.raises(ValidationError, match="nothing to change"):
        await store.edit(body_only.id, title="Database  decision", body=" We use sqlite. ")
    assert [r.id for r in await store.history(record.id)] == [record.id, edited.id, body_only.id]


# -- reset -------------------------------------------------------------------------------------


async def test_a_project_record_cannot_supersede_a_global_one(store: Store) -> None:
    shared = await store.add(new_record(title="Style", body="global style", scope="global"))
    before = await store.list_records()
    with pytest.raises(ValidationError, match="is global"):
        await store.add(new_record(title="Style", body="P style", supersedes=shared.id))
    assert await store.list_records() == before
    assert (await store.get(shared.id)).is_current
    _, newer = await store.supersede(shared.id, "global style v2", "why")
    assert newer.scope == "global"


async def test_reset_deletes_only_that_projects_records(store: Store) -> None:
    kept_global = await store.add(new_record(title="Global", body="global fact", scope="global"))
    theirs = await store.add(new_record(title=TITLE, body="Q fact", project_id=Q))
    _, theirs2 = await store.supersede(theirs.id, "Q fact v2", "why")
    mine = await store.add(new_record(title=TITLE, body="P fact"))
    _, mine2 = await store.supersede(mine.id, "P fact v2", "why")
    await store.add(new_record(type="handover", title="H", body="P handover"))
    overridden = await store.add(new_record(title="Style", body="global style", scope="global"))
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        for node, project in (("nP", P), ("nQ", Q)):
            conn.execute(
                "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
                (node, project, "file", "src/app.py", clock.now()),
            )
        conn.execute(
            "INSERT INTO record_entities VALUES (?, 'nP'), (?, 'nQ')", (mine2.id, theirs2.id)
        )

    assert await deletion.reset(store, P) == 3

    left = {r.id for r in await store.list_records()}
    assert left == {kept_global.id, theirs.id, theirs2.id, overridden.id}
    assert (await store.get(overridden.id)).is_current
    assert (await store.get(theirs.id)).superseded_by == theirs2.id
    assert edges(store.path) == [(theirs2.id, theirs.id, "supersedes")]
    assert query(store.path, "SELECT id FROM nodes") == [("nQ",)]
    assert query(store.path, "SELECT * FROM record_entities") == [(theirs2.id, "nQ")]
    assert sorted(await ids(store, "fact style", project_id=P)) == sorted(
        [kept_global.id, overridden.id]
    )
    assert await ids(store, "fact", project_id=Q, scope="project") == [theirs2.id]
    # The FTS index lost exactly the deleted rows.
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
        assert conn.execute("SELECT count(*) FROM records_fts_docsize").fetchone()[0] == 4
    # The store is still writable, and the project can start again.
    again = await store.add(new_record(title=TITLE, body="fresh start"))
    assert await ids(store, "fresh", project_id=P) == [again.id]
    assert await deletion.reset(store, Q) == 2
    assert await deletion.reset(store, Q) == 0


async def test_reset_refuses_global(store: Store) -> None:
    await store.add(new_record(title=TITLE, body=BODY, scope="global"))
    with pytest.raises(ValidationError, match="global"):
        await deletion.reset(store, "global")
    assert counts(store.path) == (1, 0, 1)


async def test_status_counts(store: Store) -> None:
    old = await store.add(new_record(title=TITLE, body=BODY))
    await store.supersede(old.id, "v2", "why")
    await store.add(new_record(type="bugfix", title="Crash", body="fixed", scope="global"))
    await store.add(new_record(title=TITLE, body=BODY, project_id=Q))
    status = await inventory.status(store, P)
    assert status["counts"]["decision"] == 1
    assert status["counts"]["bugfix"] == 1
    assert (status["current"], status["superseded"]) == (2, 1)
    assert status["store"]["records"] == 4
    assert status["archived"] == 0
    assert status["prune_candidates"] == {"count": 0, "records": []}
