"""The store: the async library over the SQLite file, and its whole-store operations.

:mod:`.api` holds :class:`Store` (open, read, write in transactions, search), re-exported here so
``from agentctx.store import Store`` is the way in. The operations over a whole store are free
functions that take an open ``Store`` first, each in its own module: :mod:`.inventory` (status,
sessions, prune candidates), :mod:`.transfer` (export, import, the team file) and :mod:`.deletion`
(reset, the one operation that deletes records). The rules they run live in :mod:`agentctx.core`.
"""

from __future__ import annotations

from agentctx.store.api import (
    HISTORY_MAX_DEPTH,
    LOW_SCORE,
    SearchHit,
    SearchQuery,
    SearchResult,
    Store,
    Transaction,
)

__all__ = [
    "HISTORY_MAX_DEPTH",
    "LOW_SCORE",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "Store",
    "Transaction",
]
