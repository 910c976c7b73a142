"""The schema after migration, the connection policy, and refusing databases we must not touch."""

from __future__ import annotations

import hashlib
import os
from contextlib import closing
from typing import TYPE_CHECKING

import pytest
import sqlean

from agentctx.core import db, schema, writes
from agentctx.core.errors import DatabaseError, SchemaVersionError
from agentctx.store import SearchQuery, Store
from tests.helpers import COLUMNS_BEFORE_0008, INSERT_BEFORE_0008, new_record

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

# (name, declared type, notnull, default as PRAGMA table_info reports it, pk position)
Column = tuple[str, str, int, str | None, int]

#: A record's columns, ``id`` to ``low_score_since``, as ``records`` declares them.
RECORD: list[Column] = [
    ("id", "TEXT", 1, None, 0),
    ("project_id", "TEXT", 1, None, 0),
    ("type", "TEXT", 1, None, 0),
    ("title", "TEXT", 1, None, 0),
    ("body", "TEXT", 1, None, 0),
    ("keywords", "TEXT", 1, "''", 0),
    ("key", "TEXT", 0, None, 0),
    ("rationale", "TEXT", 0, None, 0),
    ("scope", "TEXT", 1, "'project'", 0),
    ("pinned", "INTEGER", 1, "0", 0),
    ("confidence", "TEXT", 1, "'inferred'", 0),
    ("reinforce_count", "INTEGER", 1, "0", 0),
    ("valid_from", "TEXT", 1, None, 0),
    ("recorded_at", "TEXT", 1, None, 0),
    ("superseded_at", "TEXT", 0, None, 0),
    ("superseded_by", "TEXT", 0, None, 0),
    ("access_count", "INTEGER", 1, "0", 0),
    ("last_accessed", "TEXT", 0, None, 0),
    ("score", "REAL", 1, "1.0", 0),
    ("claudemd_drift_score", "REAL", 1, "0.0", 0),
    ("source", "TEXT", 1, None, 0),
    ("session_id", "TEXT", 0, None, 0),
    ("pending_embedding", "INTEGER", 1, "1", 0),
    ("low_score_since", "TEXT", 0, None, 0),
]
#: Added by 0008 to both ``records`` and ``records_archive`` (so after their other columns).
CUES: Column = ("cues", "TEXT", 1, "''", 0)
#: The columns ``records_archive`` declares otherwise, the rest as in :data:`RECORD`: the id is its
#: key (no seq), an archived version is always superseded, and it is written whole (no defaults
#: meant for new records).
ARCHIVED: dict[str, Column] = {
    "id": ("id", "TEXT", 0, None, 1),
    "scope": ("scope", "TEXT", 1, None, 0),
    "confidence": ("confidence", "TEXT", 1, None, 0),
    "superseded_at": ("superseded_at", "TEXT", 1, None, 0),
    "score": ("score", "REAL", 1, "0.0", 0),
    "pending_embedding": ("pending_embedding", "INTEGER", 1, "0", 0),
}

EXPECTED_COLUMNS: dict[str, list[Column]] = {
    "records": [
        ("seq", "INTEGER", 0, None, 1),
        *RECORD,
        ("digest_rank", "INTEGER", 0, None, 0),
        CUES,
    ],
    "records_archive": [
        *(ARCHIVED.get(column[0], column) for column in RECORD),
        ("archived_at", "TEXT", 1, None, 0),
        CUES,
    ],
    "merge_checks": [
        ("record_a", "TEXT", 1, None, 1),
        ("record_b", "TEXT", 1, None, 2),
        ("verdict", "TEXT", 1, None, 0),
        ("similarity", "REAL", 1, None, 0),
        ("checked_at", "TEXT", 1, None, 0),
    ],
    "nodes": [
        ("id", "TEXT", 0, None, 1),
        ("project_id", "TEXT", 1, None, 0),
        ("kind", "TEXT", 1, None, 0),
        ("name", "TEXT", 1, None, 0),
        ("created_at", "TEXT", 1, None, 0),
    ],
    "edges": [
        ("id", "TEXT", 0, None, 1),
        ("from_id", "TEXT", 1, None, 0),
        ("to_id", "TEXT", 1, None, 0),
        ("rel_type", "TEXT", 1, None, 0),
        ("weight", "REAL", 1, "1.0", 0),
        ("created_at", "TEXT", 1, None, 0),
    ],
    "record_entities": [
        ("record_id", "TEXT", 1, None, 1),
        ("entity_id", "TEXT", 1, None, 2),
    ],
    "sessions": [
        ("session_id", "TEXT", 0, None, 1),
        ("project_id", "TEXT", 0, None, 0),
        ("cwd", "TEXT", 0, None, 0),
        ("transcript_path", "TEXT", 0, None, 0),
        ("started_at", "TEXT", 0, None, 0),
        ("ended_at", "TEXT", 0, None, 0),
        ("tokens_injected", "INTEGER", 1, "0", 0),
        ("injections", "INTEGER", 1, "0", 0),
        ("extraction_cost_usd", "REAL", 1, "0", 0),
        ("extract_requested_size", "INTEGER", 1, "0", 0),
        ("extracted_uuid", "TEXT", 0, None, 0),
        ("extractions", "INTEGER", 1, "0", 0),
        ("records_extracted", "INTEGER", 1, "0", 0),
        ("extraction_error", "TEXT", 0, None, 0),
        ("extraction_backend", "TEXT", 0, None, 0),
        ("extracted_size", "INTEGER", 1, "0", 0),
    ],
    "projects": [
        ("project_id", "TEXT", 0, None, 1),
        ("name", "TEXT", 1, None, 0),
        ("root", "TEXT", 0, None, 0),
        ("remote", "TEXT", 0, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("last_seen_at", "TEXT", 1, None, 0),
    ],
    "extraction_ledger": [
        ("id", "INTEGER", 0, None, 1),
        ("at", "TEXT", 1, None, 0),
        ("day", "TEXT", 1, None, 0),
        ("session_id", "TEXT", 1, None, 0),
        ("project_id", "TEXT", 0, None, 0),
        ("backend", "TEXT", 1, None, 0),
        ("status", "TEXT", 1, None, 0),
        ("calls", "INTEGER", 1, "0", 0),
        ("input_tokens", "INTEGER", 1, "0", 0),
        ("output_tokens", "INTEGER", 1, "0", 0),
        ("cache_creation_tokens", "INTEGER", 1, "0", 0),
        ("cache_read_tokens", "INTEGER", 1, "0", 0),
        ("cost_usd", "REAL", 1, "0", 0),
        ("error", "TEXT", 0, None, 0),
    ],
    "embedding_model": [
        ("id", "INTEGER", 0, None, 1),
        ("model", "TEXT", 0, None, 0),
        ("dims", "INTEGER", 1, None, 0),
        ("reembed_total", "INTEGER", 1, "0", 0),
        ("switched_at", "TEXT", 0, None, 0),
    ],
    "schema_migrations": [
        ("name", "TEXT", 0, None, 1),
        ("applied_at", "TEXT", 1, None, 0),
    ],
}

EXPECTED_INDEXES = {
    "records_current",
    "records_drift",
    "records_project_valid",
    "records_superseded_by",
    "records_session",
    "records_pending_embedding",
    "records_one_current_handover",
    "records_one_current_profile_key",
    "edges_from",
    "edges_to",
    "record_entities_entity",
    "sessions_project",
    "extraction_ledger_day",
    "records_archive_project_valid",
    "records_archive_superseded_by",
}
# The automatic indexes of PRIMARY KEY / UNIQUE constraints on our own (non-virtual) tables.
EXPECTED_AUTOINDEXES = {
    "sqlite_autoindex_records_1",
    "sqlite_autoindex_nodes_1",
    "sqlite_autoindex_nodes_2",
    "sqlite_autoindex_edges_1",
    "sqlite_autoindex_edges_2",
    "sqlite_autoindex_projects_1",
    "sqlite_autoindex_sessions_1",
    "sqlite_autoindex_schema_migrations_1",
    "sqlite_autoindex_records_archive_1",
}
EXPECTED_TRIGGERS = {"records_fts_insert", "records_fts_delete", "records_fts_update"}
OUR_TABLES = set(EXPECTED_COLUMNS)


@pytest.fixture
def db_path(agentctx_home: Path) -> str:
    agentctx_home.mkdir()
    return str(agentctx_home / "agentctx.db")


@pytest.fixture
def conn(db_path: str) -> Iterator[sqlean.Connection]:
    """A connection to a store just created at ``db_path``, closed after the test."""
    migrated(db_path)
    connection, _ = db.connect(db_path)
    with closing(connection):
        yield connection


def migrated(path: str) -> list[str]:
    """Create or migrate ``path`` through the same functions ``Store.open`` uses."""
    conn, caps = db.connect(path)
    with closing(conn):
        return schema.migrate(conn, caps, path)


def names(conn: sqlean.Connection, kind: str) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,)).fetchall()
    return {str(row[0]) for row in rows}


def table_sql(conn: sqlean.Connection, name: str) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    assert row is not None, f"{name} is missing"
    return " ".join(str(row[0]).split())


def snapshot(path: str) -> tuple[str, int, list[str]]:
    """Content hash, mtime and the folder listing (a -wal or -shm file would show there)."""
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return digest, os.stat(path).st_mtime_ns, sorted(os.listdir(os.path.dirname(path)))


def write_file(path: str, content: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(content)


def snapshot_dir(path: str) -> list[str]:
    return sorted(os.listdir(os.path.dirname(path)))


# -- exact shape -------------------------------------------------------------------------------


@pytest.mark.parametrize("table", sorted(EXPECTED_COLUMNS))
def test_exact_columns(conn: sqlean.Connection, table: str) -> None:
    rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    got = [(r["name"], r["type"], r["notnull"], r["dflt_value"], r["pk"]) for r in rows]
    assert got == EXPECTED_COLUMNS[table]


def test_record_columns_constant_matches_table(conn: sqlean.Connection) -> None:
    table = [str(r["name"]) for r in conn.execute("PRAGMA table_info(records)")]
    # seq is the storage rowid (stable FTS keys); it and consolidation's bookkeeping are not part
    # of a record
    assert sorted(table) == sorted(["seq", *schema.RECORD_COLUMNS, *schema.BOOKKEEPING_COLUMNS])
    assert len(schema.RECORD_COLUMNS) == len(set(schema.RECORD_COLUMNS))


def test_exact_indexes_and_triggers(conn: sqlean.Connection) -> None:
    indexes = names(conn, "index")
    triggers = names(conn, "trigger")
    index_tables = {
        str(r[0]): str(r[1])
        for r in conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'")
    }
    ours = {name for name in indexes if index_tables[name] in OUR_TABLES}
    assert ours == EXPECTED_INDEXES | EXPECTED_AUTOINDEXES
    # Whatever else exists belongs to the virtual tables' shadow tables, never to ours.
    assert all(
        index_tables[name].startswith(("records_fts_", "records_vec_")) for name in indexes - ours
    )
    assert triggers == EXPECTED_TRIGGERS


def test_unique_partial_indexes_are_declared_as_such(conn: sqlean.Connection) -> None:
    handover = table_sql(conn, "records_one_current_handover")
    profile = table_sql(conn, "records_one_current_profile_key")
    unique = {str(r["name"]): r["unique"] for r in conn.execute("PRAGMA index_list(records)")}
    assert "WHERE type = 'handover' AND superseded_at IS NULL" in handover
    assert "WHERE type = 'profile' AND key IS NOT NULL AND superseded_at IS NULL" in profile
    assert unique["records_one_current_handover"] == 1
    assert unique["records_one_current_profile_key"] == 1
    assert unique["records_current"] == 0


def test_records_fts_is_external_content_fts5(db_path: str) -> None:
    migrated(db_path)
    conn, caps = db.connect(db_path)
    with closing(conn):
        assert caps.fts5
        sql = table_sql(conn, "records_fts")
        columns = [r["name"] for r in conn.execute("PRAGMA table_info(records_fts)")]
        tables = names(conn, "table")
        # FTS5 accepts the 'integrity-check' command only on a healthy index.
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
    assert sql.startswith("CREATE VIRTUAL TABLE records_fts USING fts5(")
    assert "content='records'" in sql
    assert "content_rowid='seq'" in sql
    assert "tokenize='porter unicode61 remove_diacritics 2'" in sql
    assert columns == ["title", "body", "keywords", "cues"]
    # External content: FTS5 keeps no copy of the text (no records_fts_content shadow table).
    assert "records_fts_content" not in tables
    assert {"records_fts_data", "records_fts_idx", "records_fts_docsize"} <= tables


@pytest.mark.anyio
async def test_records_vec_is_vec0(db_path: str) -> None:
    async with await Store.open(db_path) as store:
        vec_version = store.capabilities.vec_version
    if vec_version is None:
        pytest.skip("sqlite-vec does not load here")
    conn, _ = db.connect(db_path)
    with closing(conn):
        sql = table_sql(conn, "records_vec")
    assert sql.startswith("CREATE VIRTUAL TABLE records_vec USING vec0(")
    assert f"embedding float[{schema.EMBEDDING_DIMS}] distance_metric=cosine" in sql
    assert "record_id TEXT PRIMARY KEY" in sql


@pytest.mark.anyio
async def test_version_and_connection_policy(db_path: str) -> None:
    async with await Store.open(db_path):
        pass
    conn, _ = db.connect(db_path)
    with closing(conn):
        assert schema.schema_version(conn) == schema.SCHEMA_VERSION
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.in_transaction is False  # autocommit: writers BEGIN IMMEDIATE themselves
        applied = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert applied == [name for name, _ in schema.MIGRATIONS]


def test_hook_busy_timeout_is_applied(db_path: str) -> None:
    from agentctx.core import connect

    migrated(db_path)
    conn, _ = db.connect(db_path, busy_timeout_ms=connect.WRITE_BUSY_MS, load_vec=False)
    with closing(conn):
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == connect.WRITE_BUSY_MS


# -- migrating ---------------------------------------------------------------------------------


def test_migrating_twice_applies_nothing(db_path: str) -> None:
    first = migrated(db_path)
    conn, caps = db.connect(db_path)
    expected = [name for name, _ in schema.MIGRATIONS]
    if caps.fts5:
        expected.append("records_fts")
    if caps.vec_version:
        expected.append("records_vec")
    with closing(conn):
        second = schema.migrate(conn, caps, db_path)
        rows = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert first == expected
    assert second == []
    assert rows == len(schema.MIGRATIONS)


@pytest.mark.anyio
async def test_reopening_a_store_migrates_nothing(db_path: str) -> None:
    async with await Store.open(db_path) as store:
        await store.add(new_record(type="decision", title="t", body="b", project_id="p"))
    async with await Store.open(db_path) as store:
        assert len(await store.list_records()) == 1
    assert migrated(db_path) == []
    conn, _ = db.connect(db_path)
    with closing(conn):
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
        assert count == len(schema.MIGRATIONS)


@pytest.mark.anyio
async def test_capability_objects_are_added_later_and_rebuilt(db_path: str) -> None:
    """A store created without FTS5 and sqlite-vec gains them, the existing records indexed."""
    conn, caps = db.connect(db_path, load_vec=False)
    caps.fts5 = False
    with closing(conn):
        assert schema.migrate(conn, caps, db_path) == [name for name, _ in schema.MIGRATIONS]
        record = (
            new_record(type="decision", title="Use gRPC", body="internal calls", project_id="p")
            .validated()
            .to_record("01ARZ3NDEKTSV4RRFFQ69G5FAV", "2026-01-01T00:00:00.000000Z")
        )
        conn.execute(schema.INSERT_RECORD_SQL, record.to_values())
        assert "records_fts" not in names(conn, "table")
    async with await Store.open(db_path) as store:
        assert store.has_fts
        result = await store.search(SearchQuery("grpc", project_id="p"))
        vec_version = store.capabilities.vec_version
    assert result.degraded is None
    assert [hit.record.id for hit in result.hits] == [record.id]
    conn, _ = db.connect(db_path)
    with closing(conn):
        tables = names(conn, "table")
    assert "records_fts" in tables
    assert ("records_vec" in tables) == (vec_version is not None)


# -- refusing ----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("journal", ["delete", "wal"])
async def test_newer_schema_is_refused_and_left_untouched(db_path: str, journal: str) -> None:
    conn, _ = db.connect(db_path, load_vec=False)
    with closing(conn):
        conn.execute(f"PRAGMA journal_mode = {journal}")
        conn.execute("CREATE TABLE from_the_future (x)")
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    before = snapshot(db_path)
    with pytest.raises(SchemaVersionError) as caught:
        await Store.open(db_path)
    message = str(caught.value)
    assert f"schema version {schema.SCHEMA_VERSION + 1}" in message
    assert "newer" in message
    assert "upgrade agentctx" in message
    assert db_path in message
    assert snapshot(db_path) == before


def test_migrate_refuses_newer_schema(db_path: str) -> None:
    conn, caps = db.connect(db_path)
    with closing(conn):
        conn.execute("PRAGMA user_version = 99")
        with pytest.raises(SchemaVersionError, match="schema version 99"):
            schema.migrate(conn, caps, db_path)
        tables = names(conn, "table")
    assert "records" not in tables
    assert "schema_migrations" not in tables


@pytest.mark.parametrize(
    "content",
    [b"this is not a database, just some text\n" * 200, bytes(range(256)) * 64],
    ids=["text", "binary"],
)
@pytest.mark.anyio
async def test_non_sqlite_file_is_a_database_error(db_path: str, content: bytes) -> None:
    write_file(db_path, content)
    before = snapshot(db_path)
    with pytest.raises(DatabaseError, match="not a database"):
        await Store.open(db_path)
    with pytest.raises(DatabaseError, match="not a database"):
        db.connect(db_path)
    assert snapshot(db_path) == before


@pytest.mark.anyio
async def test_open_without_create_needs_an_existing_file(db_path: str) -> None:
    with pytest.raises(DatabaseError, match="no database at"):
        await Store.open(db_path, create=False)
    assert snapshot_dir(db_path) == []


def test_sql_statement_splitter_keeps_trigger_bodies_whole() -> None:
    statements = list(db.iter_sql_statements(schema.fts_objects()))
    assert len(statements) == 5
    assert statements[1].startswith("CREATE TRIGGER records_fts_insert")
    assert statements[1].endswith("END;")
    assert statements[3].count("INSERT INTO records_fts") == 2


# -- 0004: handovers per checkout --------------------------------------------------------------------


def _legacy_handover(conn: sqlean.Connection, record_id: str, superseded: bool = False) -> None:
    values = {name: None for name in schema.RECORD_COLUMNS} | {
        "id": record_id, "project_id": "p" * 64, "type": "handover", "title": f"Handover {record_id}",
        "body": "old work", "scope": "project", "confidence": "inferred", "source": "hook_observation",
        "valid_from": f"2026-01-0{record_id[-1]}T00:00:00Z", "recorded_at": "2026-01-01T00:00:00Z",
        "keywords": "", "pinned": 0, "reinforce_count": 0, "access_count": 0, "score": 1.0,
        "claudemd_drift_score": 0.0, "pending_embedding": 1,
        "superseded_at": "2026-01-05T00:00:00Z" if superseded else None,
    }  # fmt: skip
    insert_before_0008(conn, values)


def insert_before_0008(conn: sqlean.Connection, values: Mapping[str, object]) -> None:
    """Insert a record row into a store migrated to 0007 or earlier (no ``cues`` column)."""
    conn.execute(INSERT_BEFORE_0008, [values[n] for n in COLUMNS_BEFORE_0008])


@pytest.mark.anyio
async def test_0004_keeps_legacy_handovers_until_a_keyed_one_supersedes_them(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # a store as 0.1 left it: three migrations
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:3])
        assert migrated(db_path)[:3] == [name for name, _ in schema.MIGRATIONS[:3]]
    conn, _ = db.connect(db_path)
    with closing(conn):
        assert schema.schema_version(conn) == 3
        _legacy_handover(conn, "H1", superseded=True)
        _legacy_handover(conn, "H2")

    # 0008 drops the FTS index for one with the cues column: it is made again after the migrations
    assert migrated(db_path) == [*(name for name, _ in schema.MIGRATIONS[3:]), "records_fts"]
    conn, _ = db.connect(db_path)
    with closing(conn):
        assert schema.schema_version(conn) == schema.SCHEMA_VERSION
        rows = conn.execute("SELECT id, key, superseded_at FROM records ORDER BY id").fetchall()
        assert [(r[0], r[1], r[2] is None) for r in rows] == [
            ("H1", None, False),
            ("H2", None, True),
        ]
        assert "coalesce(key, '')" in table_sql(conn, "records_one_current_handover")
    async with await Store.open(db_path) as store:
        assert (await store.current_handover("p" * 64, "/wt/a")).id == "H2"  # type: ignore[union-attr]
        a = await store.add(
            new_record(
                type="handover", title="A's task", body="a", project_id="p" * 64, key="/wt/a"
            )
        )
        b = await store.add(
            new_record(
                type="handover", title="B's task", body="b", project_id="p" * 64, key="/wt/b"
            )
        )
        legacy = await store.get("H2")
        assert legacy.superseded_by == a.id  # the first keyed handover replaced the legacy one
        current = await store.list_records("p" * 64, types=("handover",), include_superseded=False)
        assert {(r.id, r.key) for r in current} == {(a.id, "/wt/a"), (b.id, "/wt/b")}
    conn, _ = db.connect(db_path)
    with closing(conn), pytest.raises(sqlean.IntegrityError):  # one current per checkout, enforced
        conn.execute(
            "UPDATE records SET superseded_at = NULL, superseded_by = NULL, key = '/wt/a' "
            "WHERE id = 'H2'"
        )


# -- 0008: retrieval cues ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_0008_adds_cues_keeps_every_record_and_indexes_the_cues(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # a store as 0007 left it
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:7])
        migrated(db_path)
    conn, _ = db.connect(db_path)
    with closing(conn):
        assert schema.schema_version(conn) == 7
        fts = [r["name"] for r in conn.execute("PRAGMA table_info(records_fts)")]
        assert fts == ["title", "body", "keywords"]
        for n, title in enumerate(("Queue names are kebab-case", "Billing talks gRPC"), start=1):
            values = {name: None for name in schema.RECORD_COLUMNS} | {
                "id": f"R{n}", "project_id": "p" * 64, "type": "convention", "title": title,
                "body": "as agreed", "scope": "project", "confidence": "explicit", "source": "cli",
                "valid_from": "2026-01-01T00:00:00Z", "recorded_at": "2026-01-01T00:00:00Z",
                "keywords": "", "pinned": 0, "reinforce_count": 0, "access_count": 0,
                "score": 1.0, "claudemd_drift_score": 0.0, "pending_embedding": 0,
            }  # fmt: skip
            insert_before_0008(conn, values)
        conn.execute(
            "INSERT INTO records_archive(id, project_id, type, title, body, scope, confidence, "
            "valid_from, recorded_at, superseded_at, source, archived_at) VALUES ('A1', ?, "
            "'decision', 'Old choice', 'gone', 'project', 'explicit', '2025-01-01T00:00:00Z', "
            "'2025-01-01T00:00:00Z', '2025-02-01T00:00:00Z', 'cli', '2025-06-01T00:00:00Z')",
            ("p" * 64,),
        )

    assert migrated(db_path) == ["0008_record_cues", "0010_token_vectors", "records_fts"]
    conn, _ = db.connect(db_path)
    with closing(conn):
        assert [r["name"] for r in conn.execute("PRAGMA table_info(records_fts)")] == [
            "title", "body", "keywords", "cues",
        ]  # fmt: skip
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
        rows = conn.execute("SELECT id, cues, pending_embedding FROM records ORDER BY id")
        assert [tuple(r) for r in rows] == [("R1", "", 0), ("R2", "", 0)]
        assert conn.execute("SELECT cues FROM records_archive").fetchall()[0][0] == ""
    async with await Store.open(db_path) as store:
        # the index was rebuilt from the records: they are found by their own words ...
        found = await store.search(SearchQuery("kebab", project_id="p" * 64))
        assert [hit.record.id for hit in found.hits] == ["R1"]
        # ... and by a cue word once they have cues; the vector's flag is left alone
        await store.write(writes.update_cues("R2", ["how do services call each other?"]))
        found = await store.search(SearchQuery("services call", project_id="p" * 64))
        assert [hit.record.id for hit in found.hits] == ["R2"]
        record = await store.get("R2")
        assert record.cues == ("how do services call each other?",)
        assert record.pending_embedding is False
        assert (await store.get("A1")).cues == ()
