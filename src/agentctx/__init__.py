"""agentctx: a structured, versioned context layer for Claude Code.

The public API is small and loaded lazily (PEP 562), so ``import agentctx`` costs nothing: the hook
fast path imports submodules of this package and must not pay for the store's dependencies.

    from agentctx import Store, NewRecord, SearchQuery

No ``from __future__ import annotations`` (the hook's entry stands in for that module, see
:mod:`agentctx._entry`): this module's annotations evaluate as they are.
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.errors import (
        AgentctxError,
        ConfigError,
        ConflictError,
        DatabaseError,
        NotFoundError,
        SchemaVersionError,
        TransferError,
        ValidationError,
    )
    from agentctx.core.project import ProjectIdentity, identify
    from agentctx.records import NewRecord, Record
    from agentctx.store import SearchHit, SearchQuery, SearchResult, Store

__version__ = "0.1.0"

_EXPORTS = {
    "Store": "agentctx.store",
    "SearchQuery": "agentctx.store",
    "SearchHit": "agentctx.store",
    "SearchResult": "agentctx.store",
    "NewRecord": "agentctx.records",
    "Record": "agentctx.records",
    "ProjectIdentity": "agentctx.core.project",
    "identify": "agentctx.core.project",
    "AgentctxError": "agentctx.core.errors",
    "ValidationError": "agentctx.core.errors",
    "NotFoundError": "agentctx.core.errors",
    "ConflictError": "agentctx.core.errors",
    "SchemaVersionError": "agentctx.core.errors",
    "DatabaseError": "agentctx.core.errors",
    "ConfigError": "agentctx.core.errors",
    "TransferError": "agentctx.core.errors",
}

__all__ = [
    "AgentctxError",
    "ConfigError",
    "ConflictError",
    "DatabaseError",
    "NewRecord",
    "NotFoundError",
    "ProjectIdentity",
    "Record",
    "SchemaVersionError",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "Store",
    "TransferError",
    "ValidationError",
    "__version__",
    "identify",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentctx' has no attribute {name!r}")
    __import__(module)
    value = getattr(sys.modules[module], name)
    globals()[name] = value
    return value
