"""Handles: how injected text names a record, and how a handle names it back (issue 25).

A record's handle is the end of its id, lower case: short and cheap in Claude's context, where the
full id (26 capitals and digits) costs about 47 estimated tokens. The prompt's entries (whole and
one-line), the subagent's and the SessionStart digest name records by handle; ``ctx_get``,
``ctx_supersede``, ``agentctx show`` and the dashboard accept one (:func:`resolve`). Standard
library only: the SessionStart hook reads the digest's handles.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.plan import Plan

#: Characters of a record id a handle shows (the id's random end).
HANDLE_CHARS = 8
#: The fewest characters of an id that name a record (a prefix or a suffix).
MIN_HANDLE = 6


def handle(record_id: str) -> str:
    """A record's short handle: the last :data:`HANDLE_CHARS` characters of its id, lower case
    (ULIDs end in 80 random bits; lower case costs Claude fewer tokens, and handles match
    case-insensitively)."""
    return record_id[-HANDLE_CHARS:].lower()


def resolve(handle_text: str) -> Plan[str]:
    """The full id of a record named by its id or by a unique prefix or suffix of it (at least
    :data:`MIN_HANDLE` characters, any case); a one-line error when none or several match."""
    from agentctx.core import plan
    from agentctx.core.errors import NotFoundError, ValidationError

    text = handle_text.strip()
    exact = yield plan.one(
        "SELECT id FROM records WHERE id = ? UNION ALL SELECT id FROM records_archive WHERE id = ?",
        (text, text),
    )
    if exact is not None:
        return str(exact[0])
    if len(text) < MIN_HANDLE or not text.isalnum():
        raise NotFoundError(
            f"no record with id {text!r} (a handle needs at least {MIN_HANDLE} letters or digits "
            "of the id)"
        )
    upper = text.upper()
    found = yield plan.rows(
        "SELECT id FROM records WHERE id LIKE ? OR id LIKE ? UNION "
        "SELECT id FROM records_archive WHERE id LIKE ? OR id LIKE ? LIMIT 4",
        (upper + "%", "%" + upper) * 2,
    )
    ids = sorted(str(row[0]) for row in found)
    if not ids:
        raise NotFoundError(f"no record id starts or ends with {text!r}")
    if len(ids) > 1:
        listed = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
        raise ValidationError(
            f"the handle {text!r} matches several records ({listed}): give more characters or the full id"
        )
    return ids[0]
