"""The shapes of the plain dicts the core passes around: for annotations only.

Import this module under ``if TYPE_CHECKING:`` only: a ``TypedDict`` needs :mod:`typing` at run
time, which the hook path does not import. Every shape is ``total=False`` where the data may have
been read back from a file (a ledger, a spool file): the readers still check each value's type.
"""

from __future__ import annotations

from typing import TypedDict


class LedgerEntry(TypedDict, total=False):
    """One line of a session ledger (:mod:`agentctx.core.ledger`).

    Injections carry ``ids`` and ``tokens``; SessionStart and directory changes also note ``cwd``,
    ``project_id`` (and ``transcript_path``). ``t`` (seconds since the epoch) is added on write.
    """

    t: float
    event: str
    ids: list[str]
    tokens: int
    project_id: str | None
    cwd: str | None
    transcript_path: str | None
    source: str | None


class Observation(TypedDict, total=False):
    """What a capture hook learned (:mod:`agentctx.core.observe`), as spooled and applied.

    Every kind has ``kind``, ``project_id``, ``session_id`` and ``at``; ``file`` and ``branch`` a
    ``name``; ``stub`` and ``handover`` a ``title``, ``body`` and ``files``; a stub its
    ``keywords``, a handover its ``checkout``.
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
