"""Writing records: validation and the insert rule, once, for the hooks and the library.

A new record is a plain dict of fields (those of :class:`agentctx.records.NewRecord`).
:func:`validate` normalizes and checks it; :func:`new_row` makes the row to insert; :func:`insert` is
the plan that writes it with supersession: an explicit ``supersedes`` (same type, same project, still
current; a global record only by a global one), then the keyed rules (one current handover per checkout
of a project, a keyed one replacing the legacy key NULL one too; one current profile record per key),
a ``supersedes`` edge to each record replaced, the row, and the replaced record's files and symbols.
:func:`add_stub` is the capture hooks' variant: a stub whose title a current record already has is not
written again.

A record's links to code entities (graph nodes), one table per way of knowing (docs/spec.md, the
graph): what capture *saw* is a ``record_entities`` row (:func:`link_entity`,
:func:`link_session_files`: a stub's failing file, the files its session edited before it); what
extraction *states* a record is about is an edge record → node (:func:`relate`: ``applies_to`` a
file, module or symbol, ``scoped_to`` a package).

Every record text written goes through here and is redacted here (:func:`scrub`): :func:`store_row`
(the only ``INSERT INTO records``: new records, captures, supersessions, edits, imports),
:func:`update_body` and :func:`absorb` (the only updates of a record's text). A new entry point
cannot forget redaction; tests/security/test_redaction_kinds.py checks that no other module writes
record text. The store runs these plans with :func:`agentctx.core.plan.run_async`, the hooks
(:mod:`agentctx.core.observe`) with :func:`agentctx.core.plan.run`; callers own the transaction.
"""

from __future__ import annotations

from agentctx.core import clock, schema
from agentctx.core.errors import ConflictError, NotFoundError, ValidationError
from agentctx.core.plan import execute, one, rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from agentctx.core.plan import Plan
    from agentctx.core.shapes import RecordRow

#: A record's search keywords: at most this many distinct words, each at most this long (a longer
#: one is cut). Every write path keeps the same (:func:`store_row` normalizes what it is handed):
#: the CLI, extraction, MCP tools, capture and both imports (issue 24, #5).
KEYWORDS_MAX = 8
KEYWORD_MAX = 64
#: The optional fields of a new record and their defaults.
DEFAULTS: dict[str, Any] = {
    "scope": "project",
    "confidence": "explicit",
    "source": "cli",
    "pinned": False,
    "keywords": "",
    "key": None,
    "rationale": None,
    "session_id": None,
    "valid_from": None,
    "supersedes": None,
    "cues": (),
}
_COLS = ", ".join(schema.RECORD_COLUMNS)
#: The free-text columns of a record: redacted on every write.
TEXT_COLUMNS = ("title", "body", "rationale", "keywords", "cues")
_LIMITS = {"title": schema.TITLE_MAX, "body": schema.BODY_MAX}
#: A record's retrieval cues: at most this many phrasings, each at most this long (longer ones
#: are cut at a word), one per line in the ``cues`` column.
CUES_MAX = schema.CUES_MAX
CUE_MAX = schema.CUE_MAX


def scrub(row: dict[str, Any]) -> dict[str, Any]:
    """Redact the secrets in a row's (or new record's) text columns, in place; the row.

    The columns are redacted as one unit: a value found secret in one (a password in the title's
    command) is masked in the others too (the output quoted in the body). The rules
    (:mod:`agentctx.core.redact`) compile on the first call, so a hook that writes nothing pays
    nothing. A marker longer than the secret it replaced may push a title or body over its limit:
    the text is then cut at the limit.
    """
    from agentctx.core.redact import redact_all

    names = [n for n in TEXT_COLUMNS if n != "cues" and isinstance(row.get(n), str) and row[n]]
    cues = normalize_cues(row["cues"]) if row.get("cues") else []
    if not names and not cues:
        return row
    clean = redact_all([row[n] for n in names] + cues)  # each cue on its own: no rule spans two
    for name, value in zip(names, clean, strict=False):
        limit = _LIMITS.get(name)
        row[name] = value[:limit] if limit else value
    if cues:
        row["cues"] = cues_text(normalize_cues(clean[len(names) :]))
    return row


def normalize_keywords(keywords: Iterable[object] | str | None) -> str:
    """Up to :data:`KEYWORDS_MAX` distinct search keywords as one space-separated, lower-case
    string, each cut at :data:`KEYWORD_MAX` characters; idempotent.

    ``keywords`` is a string of words or a list of strings (each may hold several words); items
    that are not strings are skipped. Reading stops once the cap is reached, so a stuffed value
    costs no more than its first words.
    """
    if keywords is None:
        return ""
    items: Iterable[object] = [keywords] if isinstance(keywords, str) else keywords
    seen: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        for word in item.split():
            word = word.replace("\x00", "").lower()[:KEYWORD_MAX]
            if word and word not in seen:
                seen.append(word)
                if len(seen) == KEYWORDS_MAX:
                    return " ".join(seen)
    return " ".join(seen)


def normalize_cues(cues: Iterable[str] | str | None) -> list[str]:
    """Up to :data:`CUES_MAX` distinct retrieval cues, each one line of at most :data:`CUE_MAX`.

    ``cues`` is a list of phrasings or their stored form (one per line). Whitespace is collapsed
    (a cue is one line), empty ones are dropped, a repeat (ignoring case) is dropped, a long one
    is cut at a word. :class:`ValidationError` when a cue is not a string.
    """
    if cues is None:
        return []
    items = cues.split("\n") if isinstance(cues, str) else list(cues)
    kept: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise ValidationError(f"a cue must be a string, not {type(item).__name__}")
        cue = " ".join(item.replace("\x00", " ").split())
        if len(cue) > CUE_MAX:
            cut = cue[: CUE_MAX + 1].rsplit(" ", 1)[0] if " " in cue[:CUE_MAX] else cue
            cue = cut[:CUE_MAX].rstrip()
        if cue and cue.casefold() not in seen:
            seen.add(cue.casefold())
            kept.append(cue)
        if len(kept) == CUES_MAX:
            break
    return kept


def cues_text(cues: Iterable[str]) -> str:
    """The stored form of (normalized) cues: one per line, '' for none."""
    return "\n".join(cues)


def validate(new: Mapping[str, Any]) -> dict[str, Any]:
    """The normalized fields of a new record, or :class:`ValidationError` naming every bad one."""
    fields = {**DEFAULTS, **new}
    problems: list[str] = []
    title = " ".join(fields["title"].split()) if isinstance(fields["title"], str) else ""
    body = fields["body"].strip() if isinstance(fields["body"], str) else ""
    record_type, scope, key = fields["type"], fields["scope"], fields["key"]
    _check_choice("type", record_type, schema.RECORD_TYPES, problems)
    _check_choice("scope", scope, schema.SCOPES, problems)
    _check_choice("confidence", fields["confidence"], schema.CONFIDENCES, problems)
    _check_choice("source", fields["source"], schema.SOURCES, problems)
    _check_text("title", title, schema.TITLE_MAX, problems)
    _check_text("body", body, schema.BODY_MAX, problems)
    project_id = schema.GLOBAL_PROJECT_ID if scope == "global" else fields["project_id"]
    if scope == "project" and (not project_id or project_id == schema.GLOBAL_PROJECT_ID):
        problems.append("a project-scoped record needs a project id")
    valid_from = fields["valid_from"]
    if valid_from is not None:
        try:
            valid_from = clock.parse_time(valid_from)
        except ValueError:
            problems.append(f"valid_from {fields['valid_from']!r} is not an ISO-8601 time")
    if record_type in ("profile", "handover") and key is not None and not key.strip():
        problems.append(f"a {record_type} key, when given, must not be blank")
    cues: list[str] = []
    if isinstance(fields["cues"], str | list | tuple):
        try:
            cues = normalize_cues(fields["cues"])
        except ValidationError as exc:
            problems.append(str(exc))
    else:
        problems.append("cues must be a list of strings")
    if problems:
        raise ValidationError("invalid record: " + "; ".join(problems))
    return {
        **fields,
        "title": title,
        "body": body,
        "project_id": project_id,
        "pinned": bool(fields["pinned"]),
        "keywords": normalize_keywords(fields["keywords"]),
        # a handover's key is a checkout path, kept exactly (a folder name may end in a space)
        "key": (key if record_type == "handover" else key.strip()) if key else None,
        "rationale": (fields["rationale"] or "").strip() or None,
        "valid_from": valid_from,
        "cues": cues,
    }


def _check_text(name: str, text: str, limit: int, problems: list[str]) -> None:
    if not text:
        problems.append(f"{name} is empty")
    elif len(text) > limit:
        problems.append(f"{name} is {len(text)} characters, over the limit of {limit}")
    elif "\x00" in text:  # SQLite's length() stops at NUL: the CHECK would refuse it
        problems.append(f"{name} contains a NUL character")


def _check_choice(name: str, value: object, allowed: tuple[str, ...], problems: list[str]) -> None:
    if value not in allowed:
        problems.append(f"{name} {value!r} is not one of: {', '.join(allowed)}")


def new_row(
    valid: Mapping[str, Any], record_id: str | None = None, recorded_at: str | None = None
) -> RecordRow:
    """Every column of the row of a validated new record (fresh id and times unless given)."""
    recorded_at = recorded_at or clock.now()
    keywords = valid["keywords"]
    return {
        "id": record_id or clock.ulid(),
        "project_id": valid["project_id"],
        "type": valid["type"],
        "title": valid["title"],
        "body": valid["body"],
        "scope": valid["scope"],
        "confidence": valid["confidence"],
        "source": valid["source"],
        "valid_from": valid["valid_from"] or recorded_at,
        "recorded_at": recorded_at,
        "keywords": keywords if isinstance(keywords, str) else " ".join(keywords),
        "key": valid["key"],
        "rationale": valid["rationale"],
        "pinned": bool(valid["pinned"]),
        "reinforce_count": 0,
        "superseded_at": None,
        "superseded_by": None,
        "access_count": 0,
        "last_accessed": None,
        "score": 1.0,
        "claudemd_drift_score": 0.0,
        "session_id": valid["session_id"],
        "pending_embedding": True,
        "cues": cues_text(normalize_cues(valid.get("cues"))),
    }


def add(new: Mapping[str, Any]) -> Plan[RecordRow]:
    """Validate and insert a new record (:func:`insert`); the row written."""
    valid = validate(new)
    return (yield from insert(new_row(valid), supersedes=valid["supersedes"]))


def insert(row: RecordRow, *, supersedes: str | None = None) -> Plan[RecordRow]:
    """Insert a new row with supersession and the keyed rules; the row written.

    :class:`NotFoundError`, :class:`ValidationError` or :class:`ConflictError` (raised before any
    write, or when a record to replace was superseded meanwhile) leave the caller to roll back.
    """
    replaced: list[str] = []
    if supersedes:
        yield from _check_supersedes(row, supersedes)
        replaced.append(supersedes)
    for old_id in (yield from keyed_current(row["type"], row["project_id"], row["key"])):
        if old_id not in replaced:
            replaced.append(old_id)
    now = row["recorded_at"]
    yield execute("PRAGMA defer_foreign_keys = ON")
    for old_id in replaced:
        changed = yield execute(schema.SUPERSEDE_SQL, (now, row["id"], old_id))
        if changed != 1:
            raise ConflictError(f"record {old_id} was superseded meanwhile; nothing was written")
        yield from edge(row["id"], old_id, "supersedes", now)
    yield from store_row(row)
    if supersedes:  # a new version is about the same files and symbols as the old one
        yield execute(
            "INSERT OR IGNORE INTO record_entities(record_id, entity_id) "
            "SELECT ?, entity_id FROM record_entities WHERE record_id = ?",
            (row["id"], supersedes),
        )
    return row


def store_row(row: Mapping[str, Any]) -> Plan[None]:
    """Write one record row as it is (ids, times, supersession kept), its text redacted.

    The only ``INSERT INTO records``: :func:`insert` and the imports (:mod:`agentctx.store.transfer`,
    :mod:`agentctx.store.confine`) write through it. Keywords and cues are normalized here (the
    caps of every write path). A ``dict`` row is normalized and redacted in place, so the caller
    sees what was stored.
    """
    columns = row if isinstance(row, dict) else dict(row)
    # the one normalization of search text, whoever wrote the row (an import too: issue 24, #5)
    columns["keywords"] = normalize_keywords(columns.get("keywords"))
    columns["cues"] = cues_text(normalize_cues(columns.get("cues")))  # a Record's tuple too
    scrub(columns)
    yield execute(schema.INSERT_RECORD_SQL, [columns[name] for name in schema.RECORD_COLUMNS])


def _check_supersedes(row: Mapping[str, Any], old_id: str) -> Plan[None]:
    """The explicit supersession's rules: the old record is current, of this project and type."""
    sql = "SELECT project_id, type, superseded_at, superseded_by FROM {} WHERE id = ?"
    old = yield one(sql.format("records"), (old_id,))
    if old is None:
        old = yield one(sql.format("records_archive"), (old_id,))
    if old is None:
        raise NotFoundError(f"no record with id {old_id!r}; find ids with `agentctx search`")
    project_id, old_type, superseded_at, superseded_by = old
    if project_id != row["project_id"]:
        if project_id == schema.GLOBAL_PROJECT_ID:
            raise ValidationError(
                f"record {old_id} is global: supersede it with a global record "
                "(scope global), so that every project sees the new version"
            )
        raise NotFoundError(f"no record with id {old_id!r} in this project")
    if superseded_at is not None:
        raise ConflictError(
            f"record {old_id} is already superseded by {superseded_by}; "
            f"supersede the current version ({superseded_by}) instead"
        )
    if old_type != row["type"]:
        raise ValidationError(
            f"record {old_id} is a {old_type}; a {row['type']} cannot supersede it"
        )


def keyed_current(record_type: str, project_id: str, key: str | None) -> Plan[list[str]]:
    """The ids of the current records a keyed rule makes a new record replace (maybe none).

    A handover replaces its checkout's current one (``key``) and the legacy (key NULL) one; a
    profile record with a key replaces the current one of that key.
    """
    if record_type == "handover":
        found = yield rows(schema.CURRENT_HANDOVER_SQL, (project_id, key))
        return [str(r[0]) for r in found]
    if record_type == "profile" and key:
        current = yield one(schema.CURRENT_PROFILE_KEY_SQL, (project_id, key))
        return [] if current is None else [str(current[0])]
    return []


def current_by_title(project_id: str, record_type: str, title: str) -> Plan[Any]:
    """The current record (row) of this project, type and whitespace-normalized title, or None."""
    found = yield one(
        f"SELECT {_COLS} FROM records WHERE project_id = ? AND type = ? AND title = ? "
        "AND superseded_at IS NULL ORDER BY valid_from DESC LIMIT 1",
        (project_id, record_type, " ".join(title.split())),
    )
    return found


def add_stub(new: Mapping[str, Any]) -> Plan[str]:
    """A captured record, unless a current one has its type and title; the id, new or existing."""
    valid = scrub(validate(new))  # compare the title as it would be stored
    existing = yield from current_by_title(valid["project_id"], valid["type"], valid["title"])
    if existing is not None:
        return str(existing[0])
    row = yield from insert(new_row(valid), supersedes=valid["supersedes"])
    return str(row["id"])


def node(project_id: str, kind: str, name: str, at: str) -> Plan[str]:
    """The id of the graph node of this project, kind and name (created if new).

    The name (a file path, a branch, a symbol) is redacted like record text (:func:`node_name`).
    """
    name = node_name(name)
    yield execute(
        "INSERT OR IGNORE INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
        (clock.ulid(), project_id, kind, name, at),
    )
    found = yield one(
        "SELECT id FROM nodes WHERE project_id = ? AND kind = ? AND name = ?",
        (project_id, kind, name),
    )
    return str(found[0])


def node_name(name: str) -> str:
    """A node's name as stored: redacted (a token in a path or a branch name, issue 24).

    :func:`agentctx.core.redact.redact_name` compiles the rules only for a name that could hold a
    secret, so the edit hook's file nodes stay cheap.
    """
    from agentctx.core.redact import redact_name

    return redact_name(name)


def edge(from_id: str, to_id: str, rel_type: str, at: str) -> Plan[bool]:
    """Link two ids (records, nodes, sessions); False when that link already existed."""
    added = yield execute(schema.INSERT_EDGE_SQL, (clock.ulid(), from_id, to_id, rel_type, at))
    return bool(added == 1)


def link_entity(record_id: str, entity_id: str) -> Plan[None]:
    """Say that capture saw a record with a node (its failing file, a file edited before it)."""
    yield execute(
        "INSERT OR IGNORE INTO record_entities(record_id, entity_id) VALUES (?, ?)",
        (record_id, entity_id),
    )


def link_session_files(record_id: str, project_id: str, session_id: str, until: str) -> Plan[int]:
    """Link a record to the files its session had edited by ``until``; the links added.

    The files are the ``file`` nodes with an ``observed_in`` edge to the session created at or
    before ``until`` (the edge keeps the first edit's time).
    """
    added = yield execute(
        "INSERT OR IGNORE INTO record_entities(record_id, entity_id) "
        "SELECT ?, n.id FROM edges e JOIN nodes n ON n.id = e.from_id "
        "WHERE e.to_id = ? AND e.rel_type = 'observed_in' AND e.created_at <= ? "
        "AND n.kind = 'file' AND n.project_id = ?",
        (record_id, session_id, until, project_id),
    )
    return int(added)


#: The relation a record has to each kind of node an extraction names (:func:`relate`): a record
#: is ``scoped_to`` a package (it holds inside it) and ``applies_to`` a file, module or symbol.
ENTITY_RELS = {
    "file": "applies_to",
    "module": "applies_to",
    "package": "scoped_to",
    "symbol": "applies_to",
}
#: The longest node name an extraction may write (a path, a dotted module, a qualified symbol).
ENTITY_NAME_MAX = 200


def relate(record_id: str, project_id: str, kind: str, name: str, at: str) -> Plan[bool]:
    """Say what a record is about, as extraction states it: the node, and an edge record → node.

    The edge is ``applies_to`` or ``scoped_to`` by the node's kind (:data:`ENTITY_RELS`); False
    when it was there already. :class:`ValidationError` (:func:`entity_problem`) for a kind
    outside them or a name that is empty, longer than :data:`ENTITY_NAME_MAX` or not printable.
    """
    problem = entity_problem(kind, name)
    if problem is not None:
        raise ValidationError(problem)
    node_id = yield from node(project_id, kind, name, at)
    return (yield from edge(record_id, node_id, ENTITY_RELS[kind], at))


def entity_problem(kind: object, name: object) -> str | None:
    """Why an extracted entity cannot be written (None when it can): the rule :func:`relate` keeps."""
    if kind not in ENTITY_RELS:
        return f"entity kind {kind!r} is not one of: {', '.join(ENTITY_RELS)}"
    if not isinstance(name, str) or not name.strip():
        return "an entity needs a name"
    if len(name) > ENTITY_NAME_MAX:
        return f"entity name is {len(name)} characters, over the limit of {ENTITY_NAME_MAX}"
    if not name.isprintable():
        return "entity name holds a control character"
    return None


def update_body(record_id: str, body: str, keywords: Iterable[str] | str = "") -> Plan[None]:
    """Enrich a record in place (a captured stub that extraction explained); re-embedded later."""
    text = body.replace("\x00", "").strip()[: schema.BODY_MAX]
    if not text:
        raise ValidationError("a record body cannot be empty")
    clean = scrub({"body": text, "keywords": normalize_keywords(keywords)})
    yield execute(
        "UPDATE records SET body = ?, keywords = ?, pending_embedding = 1 WHERE id = ?",
        (clean["body"], clean["keywords"], record_id),
    )


def update_cues(
    record_id: str, cues: Iterable[str] | str, *, only_if_none: bool = False
) -> Plan[int]:
    """Set a record's retrieval cues (normalized, redacted); the rows changed (0 or 1).

    Cues are search text, not part of what is embedded (:func:`agentctx.embeddings.vecstore.record_text`):
    the record's vector, and the flag that asks for a new one, are left as they are.
    ``only_if_none``: only a current record that has no cues yet (consolidation's, which must
    not overwrite what extraction wrote meanwhile).
    """
    clean = scrub({"cues": cues_text(normalize_cues(cues))})
    guard = " AND cues = '' AND superseded_at IS NULL" if only_if_none else ""
    changed = yield execute(
        f"UPDATE records SET cues = ? WHERE id = ?{guard}", (clean["cues"], record_id)
    )
    return int(changed)


def absorb(survivor_id: str, fields: Mapping[str, Any], text_changed: bool) -> Plan[int]:
    """A merge: set a current survivor's text and counters (``fields``); the rows changed (0/1)."""
    values = dict(fields)
    if "keywords" in values:  # the same caps as every other write
        values["keywords"] = normalize_keywords(values["keywords"])
    if "cues" in values:
        values["cues"] = cues_text(normalize_cues(values["cues"]))
    scrub(values)
    names = tuple(values)
    assignments = ", ".join(f"{name} = ?" for name in names)
    changed = yield execute(
        f"UPDATE records SET {assignments}, "
        "pending_embedding = CASE WHEN ? THEN 1 ELSE pending_embedding END "
        "WHERE id = ? AND superseded_at IS NULL",
        (*(values[name] for name in names), int(text_changed), survivor_id),
    )
    return int(changed)
