"""Secret redaction, re-exported: the rules live in :mod:`agentctx.core.redact`.

They moved into the core so that :mod:`agentctx.core.writes`, the one path every record write takes,
can redact what it stores (issue 16, finding 3). Import from either place.
"""

from __future__ import annotations

from agentctx.core.redact import MARKER_PATTERN, find_secrets, redact

__all__ = ["MARKER_PATTERN", "find_secrets", "redact"]
