"""The one exception family of agentctx.

Every error the library raises on purpose derives from :class:`AgentctxError` and carries a message a
person can act on. Adapters translate at their edge only: the CLI prints the message and exits non-zero,
the MCP server returns a tool error, the hooks write a log line and exit 0.
"""

from __future__ import annotations


class AgentctxError(Exception):
    """Root of every deliberate agentctx error; its message says what to do next."""


class ValidationError(AgentctxError):
    """Raised by record validation when a field is empty, too long or not one of its allowed values."""


class NotFoundError(AgentctxError):
    """Raised by the store when an id names no record (or a record of another project)."""


class ConflictError(AgentctxError):
    """Raised by the store when a write contradicts the current state, e.g. superseding a superseded record."""


class SchemaVersionError(AgentctxError):
    """Raised when opening a database written by a newer agentctx; it is never downgraded."""


class DatabaseError(AgentctxError):
    """Raised when the database file cannot be opened or read (corrupt, locked too long, not SQLite)."""


class ConfigError(AgentctxError):
    """Raised by the config module for an unknown key, a value of the wrong kind or an unreadable file."""


class TransferError(AgentctxError):
    """Raised by export/import when a file is not an agentctx export or cannot be parsed."""


class UnsafePathError(AgentctxError):
    """Raised when a write would go through a symlink or leave the folder it belongs in."""


class UnsafeHomeError(AgentctxError):
    """Raised by :func:`agentctx.core.home.require` when the home, its database or its config is
    owned by another account or writable by others (as ssh and gpg refuse theirs)."""


#: How to install agentctx as a command on PATH. The PyPI name ``agentctx-cc`` is not published
#: yet, so the source is a clone of the repository or a wheel built from it (``uv build``).
INSTALL_ADVICE = (
    "install it from a clone or a built wheel: `uv tool install <clone-or-wheel>` "
    "or `pipx install <clone-or-wheel>` (installed so already: `uv tool update-shell` or "
    "`pipx ensurepath` puts it on PATH)"
)
#: How to replace an installed agentctx with a newer one (same sources as :data:`INSTALL_ADVICE`).
UPGRADE_ADVICE = (
    "upgrade agentctx from a newer clone or wheel: `uv tool install --reinstall <clone-or-wheel>` "
    "or `pipx install --force <clone-or-wheel>`"
)


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``Type: message`` of ``exc`` on one line, at most ``limit`` characters (for a log or report)."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:limit]
