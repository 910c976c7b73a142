"""The shapes of the plain dicts the core passes around: for annotations only.

Import this module under ``if TYPE_CHECKING:`` only: a ``TypedDict`` needs :mod:`typing` at run
time, which the hook path does not import. Every shape is ``total=False`` where the data may have
been read back from a file (a ledger, a spool file): the readers still check each value's type.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class LedgerEntry(TypedDict, total=False):
    """One line of a session ledger (:mod:`agentctx.core.ledger`).

    Injections carry ``ids`` and ``tokens``; SessionStart and directory changes also note ``cwd``,
    ``project_id`` (and ``transcript_path``). ``t`` (seconds since the epoch) is added on write.
    """

    t: float
    event: str
    ids: list[str]
    #: records offered as a one-line possible match (issue 25): mentioned, not shown
    lines: list[str]
    #: records a subagent was shown (SubagentStart): its own context, not the session's dedup
    subagent_ids: list[str]
    tokens: int
    project_id: str | None
    cwd: str | None
    transcript_path: str | None
    source: str | None


class Observation(TypedDict, total=False):
    """What a capture hook learned (:mod:`agentctx.core.observe`), as spooled and applied.

    Every kind has ``kind``, ``project_id``, ``session_id`` and ``at``; ``file`` and ``branch`` a
    ``name``; ``stub`` and ``handover`` a ``title``, ``body`` and ``files``; a stub its
    ``keywords``, a handover its ``checkout``. A ``test_pass`` has the ``command`` and its
    ``summary`` line; a ``git`` operation its ``op``, ``item``, ``ref``, ``branch``, ``files``,
    ``session_files`` and, for a pull request, ``title`` (:mod:`agentctx.core.activity`).
    ``call``: the tool call's ``tool_use_id``, when the event had one (each call is applied once).
    """

    kind: str
    project_id: str
    session_id: str | None
    at: str
    name: str
    title: str
    body: str
    files: list[str]
    keywords: str
    checkout: str | None
    command: str
    summary: str
    op: str
    item: str
    ref: str
    branch: str | None
    session_files: bool
    call: str


class NewFields(TypedDict, total=False):
    """The fields of a new record, as :func:`agentctx.core.writes.validate` takes and returns them.

    ``type``, ``title``, ``body`` and ``project_id`` are needed; the others have defaults
    (:data:`agentctx.core.writes.DEFAULTS`). ``keywords`` is a string or a list of words.
    """

    type: str
    title: str
    body: str
    project_id: str
    scope: str
    confidence: str
    source: str
    pinned: bool
    keywords: str | list[str]
    key: str | None
    rationale: str | None
    session_id: str | None
    valid_from: str | None
    supersedes: str | None
    cues: str | list[str]


class RecordRow(TypedDict):
    """Every column of a ``records`` row as written (:data:`agentctx.core.schema.RECORD_COLUMNS`)."""

    id: str
    project_id: str
    type: str
    title: str
    body: str
    scope: str
    confidence: str
    source: str
    valid_from: str
    recorded_at: str
    keywords: str
    key: str | None
    rationale: str | None
    pinned: bool
    reinforce_count: int
    superseded_at: str | None
    superseded_by: str | None
    access_count: int
    last_accessed: str | None
    score: float
    claudemd_drift_score: float
    session_id: str | None
    pending_embedding: bool
    #: one cue per line ('' for none) as stored; a list in ``Record.to_dict`` (the JSON shape)
    cues: str | list[str]


class DigestParts(TypedDict, total=False):
    """The parts of a digest that :func:`agentctx.core.digests.assemble` joins for a checkout.

    ``handovers`` maps a checkout ("" for the legacy handover) to ``[section text, record id]``;
    ``head_ids`` is how many of ``ids`` come before the handover's. A project with nothing to show
    has ``empty`` set and no handovers.
    """

    head: str
    tail: str
    ids: list[str]
    head_ids: int
    empty: bool
    handovers: dict[str, list[str]]


class Digest(TypedDict):
    """A project's digest (:func:`agentctx.retrieval.digest.build`), as its file holds it.

    ``text``, ``ids`` and ``tokens`` are the digest as a session in the checkout it was built for
    sees it; ``parts`` serve every checkout. The file adds ``generated_at``.
    """

    version: int
    project_id: str
    text: str
    ids: list[str]
    tokens: int
    parts: DigestParts
    generated_at: NotRequired[str]
    #: The pinned records (:mod:`agentctx.core.pinned`): saved to their own file, not the digest's.
    pinned: NotRequired[list[dict[str, Any]]]


class SessionSummary(TypedDict):
    """A session as listed (:func:`agentctx.store.inventory.sessions`): its ``sessions`` row's
    columns, with the injections of a still-open session's ledger added."""

    session_id: str
    project_id: str | None
    cwd: str | None
    started_at: str | None
    ended_at: str | None
    tokens_injected: int
    injections: int
    extraction_cost_usd: float
    extraction_backend: str | None  #: the backend that last extracted it (api, claude-code)


class SessionListing(SessionSummary):
    """A session on the dashboard's Sessions page (:func:`agentctx.web.queries.session_rows`).

    The listed session, what extraction made of it and how long it ran.
    """

    records_extracted: int
    extraction_error: str | None
    duration_s: float | None
    #: The project's name; for a project with no row (only its hooks ran there), its folder's.
    project_name: str


class ProjectRow(TypedDict):
    """A ``projects`` row."""

    project_id: str
    name: str
    root: str | None
    remote: str | None
    created_at: str
    last_seen_at: str


class NodeRow(TypedDict):
    """A ``nodes`` row: a file, symbol or branch of a project."""

    id: str
    project_id: str
    kind: str
    name: str
    created_at: str


class EdgeRow(TypedDict):
    """An ``edges`` row."""

    id: str
    from_id: str
    to_id: str
    rel_type: str
    weight: float
    created_at: str


class LinkRow(TypedDict):
    """A ``record_entities`` row: a record is about a node."""

    record_id: str
    entity_id: str


class CapabilitiesData(TypedDict):
    """What a connection's SQLite can do (:meth:`agentctx.core.db.Capabilities.as_dict`)."""

    sqlite_version: str
    fts5: bool
    sqlite_vec: str | None
    sqlite_vec_error: str | None
