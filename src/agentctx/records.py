"""The record model: seven types of typed, bi-temporal context records and their validation.

A record is one atomic fact about what is being built (a decision, a convention, ...). It is never edited
in place: a change is a new record that supersedes the old one (``superseded_at``/``superseded_by`` on
the old row, a ``supersedes`` edge from the new one), so history stays answerable. Validation happens
before any SQL runs (:func:`agentctx.core.writes.validate`), so a failed write writes nothing and says
exactly which field is wrong.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from agentctx.core import writes
from agentctx.core.schema import CONFIDENCES, RECORD_COLUMNS, RECORD_TYPES, SCOPES, SOURCES

if TYPE_CHECKING:
    from agentctx.core.shapes import NewFields, RecordRow

RecordType = Literal[
    "decision", "convention", "preference", "discovery", "bugfix", "handover", "profile"
]
Scope = Literal["project", "global"]
Confidence = Literal["explicit", "inferred", "reinforced"]
Source = Literal["llm_extraction", "hook_observation", "mcp_tool", "cli", "import"]

assert get_args(RecordType) == RECORD_TYPES and get_args(Scope) == SCOPES
assert get_args(Confidence) == CONFIDENCES and get_args(Source) == SOURCES


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
    #: Retrieval cues: phrasings a developer would use to ask for this record (search text only).
    cues: tuple[str, ...] = ()

    @property
    def is_current(self) -> bool:
        """True while no record supersedes this one."""
        return self.superseded_at is None

    def to_dict(self) -> RecordRow:
        """The record as plain data keyed by column name (the ``--json`` and export shape).

        ``cues`` is a list of strings here (JSON's array); :meth:`to_row` has the stored form.
        """
        data = asdict(self)
        data["cues"] = list(self.cues)
        return cast("RecordRow", data)

    def to_row(self) -> RecordRow:
        """The record as a ``records`` row: every column, the cues in their stored form."""
        row = self.to_dict()
        row["cues"] = writes.cues_text(self.cues)
        return row

    def to_values(self) -> list[Any]:
        """The row's values in column order (``schema.RECORD_COLUMNS``), as an insert binds them."""
        row: dict[str, Any] = dict(self.to_row())
        return [row[name] for name in COLUMNS]

    @classmethod
    def from_row(cls, row: Any) -> Record:
        """Build a record from a ``records`` row (any mapping with the column names)."""
        data = {name: row[name] for name in COLUMNS}
        data["pinned"] = bool(data["pinned"])
        data["pending_embedding"] = bool(data["pending_embedding"])
        data["cues"] = tuple(writes.normalize_cues(data["cues"]))
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
    #: Up to four phrasings a developer would use to ask for the record (normalized by validation).
    cues: list[str] | str = field(default_factory=list)

    def to_dict(self) -> NewFields:
        """The fields as plain data (what :mod:`agentctx.core.writes` takes)."""
        return cast("NewFields", {f.name: getattr(self, f.name) for f in fields(self)})

    def validated(self) -> NewRecord:
        """A normalized copy, or :class:`ValidationError` naming every bad field."""
        return NewRecord(**writes.validate(self.to_dict()))

    def to_record(self, record_id: str, recorded_at: str) -> Record:
        """The row to insert for this (validated) input."""
        return Record.from_row(writes.new_row(self.to_dict(), record_id, recorded_at))


def title_from(text: str) -> str:
    """A title stating ``text``: one line, clipped to the title limit with "…" (what extraction
    makes of a decision's *what* or a preference's rule, and ``supersede`` of a new body)."""
    from agentctx.core.schema import TITLE_MAX

    flat = " ".join(text.split())
    return flat if len(flat) <= TITLE_MAX else flat[: TITLE_MAX - 1].rstrip() + "…"


def title_from_body(body: str) -> str:
    """The title a new body states: its first sentence (before a ``Rationale:`` part), as
    :func:`title_from` words it."""
    first = body.strip().split("\n\n", 1)[0].split("Rationale:", 1)[0].strip()
    for end in (". ", ".\n", "? ", "! "):
        first = first.split(end, 1)[0]
    return title_from(first.rstrip(".").strip() or body)
