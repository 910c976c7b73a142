"""The schema, as an ordered list of named migrations, and the objects that depend on capabilities.

The pending migrations run, each with its bookkeeping row, in one ``BEGIN IMMEDIATE`` transaction,
so concurrent openers apply them once and a crash leaves either all of them or none. ``PRAGMA user_version`` mirrors the
number of applied migrations: the hooks compare it with :data:`SCHEMA_VERSION` without reading the table,
and a database whose version is higher than ours was written by a newer agentctx and is refused.

Objects that need an optional capability live outside the numbered list and are ensured after it: the
FTS5 index (with its sync triggers) when FTS5 exists, and the sqlite-vec table when the extension loads.
A store first opened without them gains them, rebuilt from the records, the first time they are there.

``records`` has an ``INTEGER PRIMARY KEY`` (``seq``) besides its ULID ``id`` because the external-content
FTS index is keyed by rowid, and ``VACUUM`` may renumber the implicit rowids of a table without one.
"""

from __future__ import annotations

from agentctx.core.errors import UPGRADE_ADVICE, SchemaVersionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlean

    from agentctx.core.db import Capabilities

RECORD_TYPES = (
    "decision",
    "convention",
    "preference",
    "discovery",
    "bugfix",
    "handover",
    "profile",
)
SCOPES = ("project", "global")
CONFIDENCES = ("explicit", "inferred", "reinforced")
SOURCES = ("llm_extraction", "hook_observation", "mcp_tool", "cli", "import")
NODE_KINDS = ("file", "symbol", "package", "module", "branch")
REL_TYPES = ("supersedes", "applies_to", "observed_in", "derives_from", "scoped_to")
GLOBAL_PROJECT_ID = "global"
TITLE_MAX = 120
BODY_MAX = 2000
#: Retrieval cues of a record (:mod:`agentctx.core.writes`): at most this many, each this long.
CUES_MAX = 4
CUE_MAX = 120
#: The dimension of a new store's vector table (the default model's); once a model has stored
#: vectors, ``embedding_model.dims`` is the table's dimension (:mod:`agentctx.core.vectors`).
EMBEDDING_DIMS = 384
RECORD_COLUMNS = (
    "id", "project_id", "type", "title", "body", "scope", "confidence", "source", "valid_from",
    "recorded_at", "keywords", "key", "rationale", "pinned", "reinforce_count", "superseded_at",
    "superseded_by", "access_count", "last_accessed", "score", "claudemd_drift_score", "session_id",
    "pending_embedding", "cues",
)  # fmt: skip
#: Columns of ``records`` that consolidation keeps for itself; not part of a :class:`Record`.
BOOKKEEPING_COLUMNS = ("low_score_since", "digest_rank")


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


_INITIAL = f"""
CREATE TABLE projects (
  project_id   TEXT PRIMARY KEY,
  name         TEXT NOT NULL,
  root         TEXT,
  remote       TEXT,
  created_at   TEXT NOT NULL,
  last_seen_at TEXT NOT NULL
);

CREATE TABLE records (
  seq                  INTEGER PRIMARY KEY,
  id                   TEXT NOT NULL UNIQUE,
  project_id           TEXT NOT NULL,
  type                 TEXT NOT NULL CHECK (type IN {_in(RECORD_TYPES)}),
  title                TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND {TITLE_MAX}),
  body                 TEXT NOT NULL CHECK (length(body) BETWEEN 1 AND {BODY_MAX}),
  keywords             TEXT NOT NULL DEFAULT '',
  key                  TEXT,
  rationale            TEXT,
  scope                TEXT NOT NULL DEFAULT 'project' CHECK (scope IN {_in(SCOPES)}),
  pinned               INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
  confidence           TEXT NOT NULL DEFAULT 'inferred' CHECK (confidence IN {_in(CONFIDENCES)}),
  reinforce_count      INTEGER NOT NULL DEFAULT 0,
  valid_from           TEXT NOT NULL,
  recorded_at          TEXT NOT NULL,
  superseded_at        TEXT,
  superseded_by        TEXT REFERENCES records(id),
  access_count         INTEGER NOT NULL DEFAULT 0,
  last_accessed        TEXT,
  score                REAL NOT NULL DEFAULT 1.0,
  claudemd_drift_score REAL NOT NULL DEFAULT 0.0,
  source               TEXT NOT NULL CHECK (source IN {_in(SOURCES)}),
  session_id           TEXT,
  pending_embedding    INTEGER NOT NULL DEFAULT 1 CHECK (pending_embedding IN (0, 1)),
  CHECK ((scope = 'global') = (project_id = '{GLOBAL_PROJECT_ID}'))
);
CREATE INDEX records_current ON records(project_id, type) WHERE superseded_at IS NULL;
CREATE INDEX records_project_valid ON records(project_id, valid_from);
CREATE INDEX records_superseded_by ON records(superseded_by);
CREATE INDEX records_session ON records(session_id);
CREATE INDEX records_pending_embedding ON records(pending_embedding) WHERE pending_embedding = 1;
CREATE UNIQUE INDEX records_one_current_handover
  ON records(project_id) WHERE type = 'handover' AND superseded_at IS NULL;
CREATE UNIQUE INDEX records_one_current_profile_key
  ON records(project_id, key) WHERE type = 'profile' AND key IS NOT NULL AND superseded_at IS NULL;

CREATE TABLE nodes (
  id         TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN {_in(NODE_KINDS)}),
  name       TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (project_id, kind, name)
);

CREATE TABLE edges (
  id         TEXT PRIMARY KEY,
  from_id    TEXT NOT NULL,
  to_id      TEXT NOT NULL,
  rel_type   TEXT NOT NULL CHECK (rel_type IN {_in(REL_TYPES)}),
  weight     REAL NOT NULL DEFAULT 1.0,
  created_at TEXT NOT NULL,
  UNIQUE (from_id, to_id, rel_type)
);
CREATE INDEX edges_from ON edges(from_id);
CREATE INDEX edges_to ON edges(to_id);

CREATE TABLE record_entities (
  record_id TEXT NOT NULL REFERENCES records(id) ON DELETE CASCADE,
  entity_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
  PRIMARY KEY (record_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX record_entities_entity ON record_entities(entity_id);

CREATE TABLE sessions (
  session_id          TEXT PRIMARY KEY,
  project_id          TEXT,
  cwd                 TEXT,
  transcript_path     TEXT,
  started_at          TEXT,
  ended_at            TEXT,
  tokens_injected     INTEGER NOT NULL DEFAULT 0,
  injections          INTEGER NOT NULL DEFAULT 0,
  extraction_cost_usd REAL NOT NULL DEFAULT 0,
  extract_requested_size INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_project ON sessions(project_id, started_at);
"""

_COLUMN_LIST = ", ".join(RECORD_COLUMNS)
INSERT_RECORD_SQL = (
    f"INSERT INTO records({_COLUMN_LIST}) VALUES ({', '.join('?' * len(RECORD_COLUMNS))})"
)
SUPERSEDE_SQL = (
    "UPDATE records SET superseded_at = ?, superseded_by = ? WHERE id = ? AND superseded_at IS NULL"
)
INSERT_EDGE_SQL = (
    "INSERT OR IGNORE INTO edges(id, from_id, to_id, rel_type, created_at) VALUES (?, ?, ?, ?, ?)"
)
#: The current handovers a new one with key ``?`` (a checkout, or NULL) replaces: the one of the same
#: checkout and the legacy one (key NULL, written before handovers were per checkout).
#: The first row is the handover a session in that checkout is handed.
CHECKOUT_HANDOVERS = (
    "FROM records WHERE project_id = ? AND type = 'handover' AND superseded_at IS NULL "
    "AND (key IS NULL OR key = ?) ORDER BY key IS NULL, valid_from DESC"
)
CURRENT_HANDOVER_SQL = f"SELECT id {CHECKOUT_HANDOVERS}"
CURRENT_PROFILE_KEY_SQL = (
    "SELECT id FROM records WHERE project_id = ? AND type = 'profile' AND key = ? "
    "AND superseded_at IS NULL"
)

#: The ordered, named migrations. Append only: never edit or reorder a released entry.
_EXTRACTION_STATE = """
ALTER TABLE sessions ADD COLUMN extracted_uuid TEXT;
ALTER TABLE sessions ADD COLUMN extractions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN records_extracted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN extraction_error TEXT;

CREATE INDEX records_drift ON records(project_id)
  WHERE superseded_at IS NULL AND claudemd_drift_score >= 0.5;

CREATE TABLE session_injections (
  session_id TEXT NOT NULL,
  record_id  TEXT NOT NULL,
  PRIMARY KEY (session_id, record_id)
) WITHOUT ROWID;
"""

#: Consolidation: the cold partition of long-superseded records (same columns as
#: ``records`` but ``seq``, plus when they moved), when a record's score first fell below the prune
#: bound, a decision's place in the digest's ranking, and the near-duplicate pairs already judged so
#: that no pair is asked about twice.
_CONSOLIDATION = """
ALTER TABLE records ADD COLUMN low_score_since TEXT;
ALTER TABLE records ADD COLUMN digest_rank INTEGER;

CREATE TABLE records_archive (
  id                   TEXT PRIMARY KEY,
  project_id           TEXT NOT NULL,
  type                 TEXT NOT NULL,
  title                TEXT NOT NULL,
  body                 TEXT NOT NULL,
  keywords             TEXT NOT NULL DEFAULT '',
  key                  TEXT,
  rationale            TEXT,
  scope                TEXT NOT NULL,
  pinned               INTEGER NOT NULL DEFAULT 0,
  confidence           TEXT NOT NULL,
  reinforce_count      INTEGER NOT NULL DEFAULT 0,
  valid_from           TEXT NOT NULL,
  recorded_at          TEXT NOT NULL,
  superseded_at        TEXT NOT NULL,
  superseded_by        TEXT,
  access_count         INTEGER NOT NULL DEFAULT 0,
  last_accessed        TEXT,
  score                REAL NOT NULL DEFAULT 0.0,
  claudemd_drift_score REAL NOT NULL DEFAULT 0.0,
  source               TEXT NOT NULL,
  session_id           TEXT,
  pending_embedding    INTEGER NOT NULL DEFAULT 0,
  low_score_since      TEXT,
  archived_at          TEXT NOT NULL
);
CREATE INDEX records_archive_project_valid ON records_archive(project_id, valid_from);
CREATE INDEX records_archive_superseded_by ON records_archive(superseded_by);

CREATE TABLE merge_checks (
  record_a   TEXT NOT NULL,
  record_b   TEXT NOT NULL,
  verdict    TEXT NOT NULL CHECK (verdict IN ('same', 'distinct')),
  similarity REAL NOT NULL,
  checked_at TEXT NOT NULL,
  PRIMARY KEY (record_a, record_b),
  CHECK (record_a < record_b)
) WITHOUT ROWID;
"""

#: Handovers per checkout (worktree): a handover's ``key`` names the checkout it belongs to, and
#: the one-current rule holds per (project, key). Existing handovers keep key NULL ("legacy"), which
#: counts as a key of its own here; the first keyed handover of the project supersedes it (store.py).
_HANDOVER_PER_CHECKOUT = """
DROP INDEX records_one_current_handover;
CREATE UNIQUE INDEX records_one_current_handover
  ON records(project_id, coalesce(key, '')) WHERE type = 'handover' AND superseded_at IS NULL;
"""

#: Extraction backends and spend: the backend that last extracted a session, the transcript size
#: its last successful extraction covered (the idle sweep's mark), and the extraction
#: ledger, one row per run that made calls (or was deferred by a cap): its backend, calls, tokens
#: (cache reads and writes apart), cost and outcome. ``day`` (UTC) keys the daily caps.
_EXTRACTION_LEDGER = """
ALTER TABLE sessions ADD COLUMN extraction_backend TEXT;
ALTER TABLE sessions ADD COLUMN extracted_size INTEGER NOT NULL DEFAULT 0;

CREATE TABLE extraction_ledger (
  id                    INTEGER PRIMARY KEY,
  at                    TEXT NOT NULL,
  day                   TEXT NOT NULL,
  session_id            TEXT NOT NULL,
  project_id            TEXT,
  backend               TEXT NOT NULL,
  status                TEXT NOT NULL,
  calls                 INTEGER NOT NULL DEFAULT 0,
  input_tokens          INTEGER NOT NULL DEFAULT 0,
  output_tokens         INTEGER NOT NULL DEFAULT 0,
  cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
  cost_usd              REAL NOT NULL DEFAULT 0,
  error                 TEXT
);
CREATE INDEX extraction_ledger_day ON extraction_ledger(day, backend, session_id);
"""

#: The embedding model the stored vectors belong to (one row): its name (NULL for vectors stored
#: before this was recorded) and dimension, which ``records_vec`` follows. ``reembed_total`` is the
#: number of records a model change flagged for a re-embed (0 when none runs), ``switched_at`` when.
#: The rules live in :mod:`agentctx.core.vectors`; hooks never read it.
_EMBEDDING_MODEL = f"""
CREATE TABLE embedding_model (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  model         TEXT,
  dims          INTEGER NOT NULL CHECK (dims > 0),
  reembed_total INTEGER NOT NULL DEFAULT 0,
  switched_at   TEXT
);
INSERT INTO embedding_model(id, model, dims) VALUES (1, NULL, {EMBEDDING_DIMS});
"""

#: Tool calls whose observations were applied (``tool_use_id``), so that each is applied once:
#: live by the hook, replayed by ``extract --no-llm``, or from the spool (``core.observe.apply``).
_CAPTURED_CALLS = """
CREATE TABLE captured_calls (
  tool_use_id TEXT PRIMARY KEY,
  session_id  TEXT NOT NULL,
  at          TEXT NOT NULL
) WITHOUT ROWID;
"""

#: Retrieval cues (issue 14): the phrasings a developer would use to ask for a record, written by
#: extraction and by consolidation, newline-separated in one column ('' when none). They are search
#: text only: indexed (the FTS index's 4th column), never embedded nor injected. The index is
#: dropped here and recreated with the new column, and rebuilt from the records, by
#: :func:`migrate` right after (:func:`fts_objects`); the archive keeps the column as it keeps the rest.
_RECORD_CUES = """
ALTER TABLE records ADD COLUMN cues TEXT NOT NULL DEFAULT '';
ALTER TABLE records_archive ADD COLUMN cues TEXT NOT NULL DEFAULT '';
DROP TRIGGER IF EXISTS records_fts_insert;
DROP TRIGGER IF EXISTS records_fts_delete;
DROP TRIGGER IF EXISTS records_fts_update;
DROP TABLE IF EXISTS records_fts;
"""

#: The static token-vector table (issue 25): for each wordpiece of the embedding model's vocabulary,
#: that model's vector for the token alone (int8, times ``scale``) and its SIF ``weight``, derived once
#: per model by :mod:`agentctx.embeddings.tokens`; ``token_table`` names the model (one row). The
#: prompt hook averages a prompt's token vectors (:mod:`agentctx.core.static_prompt`) only while that
#: model is the stored record vectors' (``embedding_model``).
_TOKEN_VECTORS = """
CREATE TABLE token_vectors (
  token  TEXT PRIMARY KEY,
  weight REAL NOT NULL,
  scale  REAL NOT NULL,
  vector BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE token_table (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  model     TEXT NOT NULL,
  dims      INTEGER NOT NULL,
  lowercase INTEGER NOT NULL,
  tokens    INTEGER NOT NULL,
  built_at  TEXT NOT NULL
);
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_initial", _INITIAL),
    ("0002_extraction_state", _EXTRACTION_STATE),
    ("0003_consolidation", _CONSOLIDATION),
    ("0004_handover_per_checkout", _HANDOVER_PER_CHECKOUT),
    ("0005_extraction_ledger", _EXTRACTION_LEDGER),
    ("0006_embedding_model", _EMBEDDING_MODEL),
    ("0007_captured_calls", _CAPTURED_CALLS),
    ("0008_record_cues", _RECORD_CUES),
    ("0010_token_vectors", _TOKEN_VECTORS),  # 0009 is another branch's: the lead orders them
)
SCHEMA_VERSION = len(MIGRATIONS)

#: The indexed columns of ``records_fts`` (a store migrated only up to 0007, as tests build one,
#: has no ``cues``: :func:`fts_objects` is told which columns the records table has).
FTS_COLUMNS = ("title", "body", "keywords", "cues")


def fts_objects(columns: tuple[str, ...] = FTS_COLUMNS) -> str:
    """The external-content FTS5 index of ``columns`` of ``records``, its sync triggers, a rebuild."""
    names = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return f"""
CREATE VIRTUAL TABLE records_fts USING fts5(
  {names},
  content='records', content_rowid='seq',
  tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
  INSERT INTO records_fts(rowid, {names})
  VALUES (new.seq, {new});
END;
CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
  INSERT INTO records_fts(records_fts, rowid, {names})
  VALUES ('delete', old.seq, {old});
END;
CREATE TRIGGER records_fts_update AFTER UPDATE OF {names} ON records BEGIN
  INSERT INTO records_fts(records_fts, rowid, {names})
  VALUES ('delete', old.seq, {old});
  INSERT INTO records_fts(rowid, {names})
  VALUES (new.seq, {new});
END;
INSERT INTO records_fts(records_fts) VALUES ('rebuild');
"""


def vec_objects(dims: int) -> str:
    """The sqlite-vec table of ``dims``-dimensional vectors (cosine distance)."""
    return f"""
CREATE VIRTUAL TABLE records_vec USING vec0(
  record_id TEXT PRIMARY KEY,
  embedding float[{int(dims)}] distance_metric=cosine
);
"""


VEC_OBJECTS = vec_objects(EMBEDDING_DIMS)


def schema_version(conn: sqlean.Connection) -> int:
    """The ``user_version`` of an open database (0 for a new file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_not_newer(version: int, path: str) -> None:
    """Refuse a database written by a newer agentctx."""
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the database at {path} has schema version {version}, newer than this agentctx "
            f"understands ({SCHEMA_VERSION}); {UPGRADE_ADVICE} rather than let an older version "
            "touch it"
        )


def migrate(conn: sqlean.Connection, caps: Capabilities, path: str) -> list[str]:
    """Apply pending migrations and capability objects; return the names applied now."""
    applied_now: list[str] = []
    from agentctx.core.db import iter_sql_statements

    check_not_newer(schema_version(conn), path)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    if schema_version(conn) < SCHEMA_VERSION:
        # All pending migrations in one transaction: a page several of them change (the schema,
        # page 1, the bookkeeping) goes to the WAL once, which keeps a new store's first WAL
        # about the size of the file (it matters on a nearly full disk).
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: a concurrent opener may have applied them meanwhile.
            version = schema_version(conn)
            check_not_newer(version, path)
            for index, (name, script) in enumerate(MIGRATIONS, start=1):
                if version >= index:
                    continue
                for statement in iter_sql_statements(script):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations(name, applied_at) "
                    "VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    (name,),
                )
                conn.execute(f"PRAGMA user_version = {index}")
                applied_now.append(name)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    if caps.fts5 and _ensure(conn, "records_fts", fts_objects(_fts_columns(conn))):
        applied_now.append("records_fts")
    if caps.vec_version and _ensure(conn, "records_vec", vec_objects(_vector_dims(conn))):
        applied_now.append("records_vec")
    return applied_now


def _ensure(conn: sqlean.Connection, table: str, script: str) -> bool:
    """Create a capability-dependent object set once, atomically; True when created now."""
    from agentctx.core.db import iter_sql_statements

    if _table_exists(conn, table):
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        if _table_exists(conn, table):
            conn.execute("COMMIT")
            return False
        for statement in iter_sql_statements(script):
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def _vector_dims(conn: sqlean.Connection) -> int:
    """The dimension ``records_vec`` must have: the stored vectors' model's."""
    if not _table_exists(conn, "embedding_model"):  # only while older migrations are tested
        return EMBEDDING_DIMS
    row = conn.execute("SELECT dims FROM embedding_model WHERE id = 1").fetchone()
    return int(row[0]) if row is not None else EMBEDDING_DIMS


def _fts_columns(conn: sqlean.Connection) -> tuple[str, ...]:
    """The columns ``records_fts`` indexes: :data:`FTS_COLUMNS` that ``records`` has."""
    present = {str(row[1]) for row in conn.execute("PRAGMA table_info(records)")}
    return tuple(c for c in FTS_COLUMNS if c in present)


def _table_exists(conn: sqlean.Connection, table: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    return row is not None
