"""The MCP tools' results: pydantic models whose fields are the output schema Claude sees.

Each tool of :mod:`agentctx.mcp.server` returns one of these, so the SDK publishes an output schema
and sends structured content; field descriptions are part of what Claude reads. The handshake
needs them (``tools/list`` carries the output schemas), so this module imports pydantic and the
record literals only, never the store.

No ``from __future__ import annotations``: pydantic evaluates the fields at run time.
"""

from typing import Literal

from pydantic import BaseModel, Field

from agentctx.records import Confidence, RecordType, Scope, Source


class IndexEntry(BaseModel):
    """One search hit, without its body (``ctx_get`` returns the body)."""

    id: str
    type: RecordType
    title: str
    age: str = Field(description="Time since the fact became valid: 5m, 3h, 12d.")
    confidence: Confidence
    score: float = Field(
        description="Higher is better; comparable within one result only (see mode)."
    )
    match: Literal["strong", "weak"] | None = Field(
        default=None,
        description="strong: about what the query asks (close in meaning, or holds all its "
        "distinctive words); weak: only shares words or a topic with it. None: not judged "
        "(fallback search).",
    )


class SearchResults(BaseModel):
    """The compact index ``ctx_search`` returns, best first."""

    results: list[IndexEntry]
    mode: Literal["hybrid", "keyword"] = Field(
        default="keyword",
        description="hybrid: keyword and vector rankings fused (RRF), score is the fused score; "
        "keyword: keyword ranking alone (no vectors, or the model is loading or off).",
    )
    note: str | None = Field(
        default=None,
        description="Why there are no results, when there are none: no record linked to the "
        "file, or nothing relevant (records share a word with the query, none is close to it); "
        "'no strong match' when every hit is weak (the store may not answer the query); and why "
        "the search ran keyword-only, when it did (embeddings off, model not available or still "
        "loading, no vectors yet).",
    )
    degraded: str | None = Field(default=None, description="Why a fallback search ran, if any.")


class RecordDetail(BaseModel):
    """A full record with its supersession links."""

    id: str
    type: RecordType
    title: str
    body: str
    scope: Scope
    confidence: Confidence
    source: Source
    current: bool
    valid_from: str
    recorded_at: str
    superseded_at: str | None
    superseded_by: str | None = Field(description="The id of the version that replaced this one.")
    supersedes: list[str] = Field(description="Ids of the versions this record replaced.")
    rationale: str | None
    key: str | None
    keywords: str
    cues: list[str] = Field(
        description="Requests a developer would type when this record is what they need "
        "(search text only)."
    )
    pinned: bool
    access_count: int
    last_accessed: str | None
    session_id: str | None


class Records(BaseModel):
    """Full records in the order asked for, and the ids not found in this project or globally."""

    records: list[RecordDetail]
    missing: list[str]


class Superseded(BaseModel):
    """The record that was replaced and its new version."""

    old_id: str
    new_id: str
    type: RecordType
    title: str


class SessionSummary(BaseModel):
    """One Claude Code session as the hooks recorded it."""

    session_id: str
    started_at: str | None
    ended_at: str | None
    tokens_injected: int
    injections: int


class ProjectOverview(BaseModel):
    """The project as the store knows it: identity, profile facts, record counts."""

    name: str
    project_id: str
    root: str
    remote: str | None
    stack: str | None
    languages: str | None
    package_manager: str | None
    commands: dict[str, str] = Field(description="test, build, lint, format, typecheck, run.")
    entry_points: str | None
    other_facts: dict[str, str]
    counts: dict[str, int] = Field(description="Current records by type, project and global.")
    superseded: int
    last_session: SessionSummary | None


class RelatedEntry(BaseModel):
    """A current record reached from the file, with the number of links walked."""

    id: str
    type: RecordType
    title: str
    age: str
    confidence: Confidence
    hops: int


class RelatedRecords(BaseModel):
    """Records linked to a file through entities and edges, nearest first."""

    file: str
    known: bool = Field(description="False when the store has never seen this file.")
    results: list[RelatedEntry]


class MissingRecord(BaseModel):
    """A current decision or convention whose title words CLAUDE.md does not contain."""

    id: str
    type: RecordType
    title: str
    coverage: float = Field(description="Share of the title's keywords found in CLAUDE.md.")
    missing_words: list[str]


class StaleText(BaseModel):
    """Text of a superseded record that CLAUDE.md still contains."""

    id: str
    title: str
    superseded_by: str
    current_title: str
    file: str
    line: int
    text: str


class ClaudeMdReport(BaseModel):
    """A read-only drift report between the store and CLAUDE.md."""

    files: list[str] = Field(description="The CLAUDE.md files read.")
    checked: int
    missing: list[MissingRecord]
    missing_total: int
    contradictions: list[StaleText]
    proposed_diff: str = Field(description="A unified diff appending the missing records.")
    method: str
