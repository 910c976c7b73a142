"""The record model: seven types of typed, bi-temporal context records and their validation.

A record is one atomic fact about what is being built (a decision, a convention, ...). It is never edited
in place: a change is a new record that supersedes the old one (``superseded_at``/``superseded_by`` on
the old row, a ``supersedes`` edge from the new one), so history stays answerable. Validation happens
here, before any SQL runs, so a failed write writes nothing and says exactly which field is wrong.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, cast, get_args

from agentctx import clock
from agentctx.errors import ValidationError
from agentctx.schema import (
    BODY_MAX,
    CONFIDENCES,
    GLOBAL_PROJECT_ID,
    RECORD_COLUMNS,
    RECORD_TYPES,
    SCOPES,
    SOURCES,
    TITLE_MAX,
)

RecordType = Literal[
    "decision", "convention", "preference", "discovery", "bugfix", "handover", "profile"
]
Scope = Literal["project", "global"]
Confidence = Literal["explicit", "inferred", "reinforced"]
Source = Literal["llm_extraction", "hook_observation", "mcp_tool", "cli", "import"]

assert get_args(RecordType) == RECORD_TYPES and get_args(Scope) == SCOPES
assert get_args(Confidence) == CONFIDENCES and get_args(Source) == SOURCES

KEYWORDS_MAX = 8


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record: every column of the ``records`` table."""

    id: str
    project_id: str
    type: RecordType
    title: str
    body: str
    scope: Scope
    confidence: Confidence
    source: Source
    valid_from: str
    recorded_at: str
    keywords: str = ""
    key: str | None = None
    rationale: str | None = None
    pinned: bool = False
    reinforce_count: int = 0
    superseded_at: str | None = None
    superseded_by: str | None = None
    access_count: int = 0
    last_accessed: str | None = None
    score: float = 1.0
    claudemd_drift_score: float = 0.0
    session_id: str | None = None
    pending_embedding: bool = True

    @property
    def is_current(self) -> bool:
        """True while no record supersedes this one."""
        return self.superseded_at is None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data keyed by column name (the ``--json`` and export shape)."""
        return asdict(self)

    @classmethod
    def from_row(cls, row: Any) -> Record:
        """Build a record from a ``records`` row (any mapping with the column names)."""
        data = {name: row[name] for name in COLUMNS}
        data["pinned"] = bool(data["pinned"])
        data["pending_embedding"] = bool(data["pending_embedding"])
        return cls(**data)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Record))
assert COLUMNS == RECORD_COLUMNS, (
    "Record fields and schema.RECORD_COLUMNS must list the same columns"
)


@dataclass(slots=True)
class NewRecord:
    """What a caller gives to create a record; :meth:`validated` normalizes and checks it."""

    type: str
    title: str
    body: str
    project_id: str
    scope: str = "project"
    confidence: str = "explicit"
    source: str = "cli"
    pinned: bool = False
    keywords: list[str] | str = field(default_factory=list)
    key: str | None = None
    rationale: str | None = None
    session_id: str | None = None
    valid_from: str | None = None
    supersedes: str | None = None

    def validated(self) -> NewRecord:
        """A normalized copy, or :class:`ValidationError` naming every bad field."""
        problems: list[str] = []
        title = " ".join(self.title.split()) if isinstance(self.title, str) else ""
        body = self.body.strip() if isinstance(self.body, str) else ""
        _check_choice("type", self.type, RECORD_TYPES, problems)
        _check_choice("scope", self.scope, SCOPES, problems)
        _check_choice("confidence", self.confidence, CONFIDENCES, problems)
        _check_choice("source", self.source, SOURCES, problems)
        if not title:
            problems.append("title is empty")
        elif len(title) > TITLE_MAX:
            problems.append(f"title is {len(title)} characters, over the limit of {TITLE_MAX}")
        elif "\x00" in title:  # SQLite's length() stops at NUL: the CHECK would refuse it
            problems.append("title contains a NUL character")
        if not body:
            problems.append("body is empty")
        elif len(body) > BODY_MAX:
            problems.append(f"body is {len(body)} characters, over the limit of {BODY_MAX}")
        elif "\x00" in body:
            problems.append("body contains a NUL character")
        project_id = GLOBAL_PROJECT_ID if self.scope == "global" else self.project_id
        if self.scope == "project" and (not project_id or project_id == GLOBAL_PROJECT_ID):
            problems.append("a project-scoped record needs a project id")
        valid_from = self.valid_from
        if valid_from is not None:
            try:
                valid_from = clock.parse_time(valid_from)
            except ValueError:
                problems.append(f"valid_from {self.valid_from!r} is not an ISO-8601 time")
        if self.type in ("profile", "handover") and self.key is not None and not self.key.strip():
            problems.append(f"a {self.type} key, when given, must not be blank")
        if problems:
            raise ValidationError("invalid record: " + "; ".join(problems))
        return NewRecord(
            type=self.type,
            title=title,
            body=body,
            project_id=project_id,
            scope=self.scope,
            confidence=self.confidence,
            source=self.source,
            pinned=bool(self.pinned),
            keywords=normalize_keywords(self.keywords),
            # a handover's key is a checkout path, kept exactly (a folder name may end in a space)
            key=(self.key if self.type == "handover" else self.key.strip()) if self.key else None,
            rationale=(self.rationale or "").strip() or None,
            session_id=self.session_id,
            valid_from=valid_from,
            supersedes=self.supersedes,
        )

    def to_record(self, record_id: str, recorded_at: str) -> Record:
        """The row to insert for this (validated) input."""
        keywords = self.keywords if isinstance(self.keywords, str) else " ".join(self.keywords)
        return Record(
            id=record_id,
            project_id=self.project_id,
            type=cast("RecordType", self.type),
            title=self.title,
            body=self.body,
            scope=cast("Scope", self.scope),
            confidence=cast("Confidence", self.confidence),
            source=cast("Source", self.source),
            valid_from=self.valid_from or recorded_at,
            recorded_at=recorded_at,
            keywords=keywords,
            key=self.key,
            rationale=self.rationale,
            pinned=self.pinned,
            session_id=self.session_id,
        )


def normalize_keywords(keywords: list[str] | str) -> str:
    """Up to eight distinct search keywords as one space-separated, lower-case string."""
    items = (
        keywords.split() if isinstance(keywords, str) else [w for k in keywords for w in k.split()]
    )
    seen: list[str] = []
    for word in items:
        word = word.strip().lower()
        if word and word not in seen:
            seen.append(word)
    return " ".join(seen[:KEYWORDS_MAX])


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Raise :class:`ValidationError` unless ``value`` is one of ``allowed``."""
    problems: list[str] = []
    _check_choice(name, value, allowed, problems)
    if problems:
        raise ValidationError(problems[0])


def _check_choice(name: str, value: object, allowed: tuple[str, ...], problems: list[str]) -> None:
    if value not in allowed:
        problems.append(f"{name} {value!r} is not one of: {', '.join(allowed)}")
