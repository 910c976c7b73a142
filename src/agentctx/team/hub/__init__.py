"""The team hub client: a linked project's shareable records to and from a PostgreSQL hub.

The hub (docs/team-hub.md) is the team's server of record: per team an append-only log of
immutable record versions and the events that change which version is current (supersede, retire,
erase, cues), with sequence numbers a pull cursor cannot skip. Its schema is the SQL in ``sql/``
(:mod:`.admin` applies it); members call only the functions of the versioned schema ``hub_v1``.

- :mod:`.connect`: the connection (libpq conventions: a DSN without a password, or a service
  name; credentials in ``~/.pgpass`` or the service file), short timeouts, the hub's errors;
- :mod:`.admin`: ``hub-init``, members, projects (the team admin's side);
- :mod:`.local`: what this home knows of the hub (links, cursors, acks), tables in the store;
- :mod:`.sync`: push, then pull through the import confinement, one sync at a time per home.

The client needs psycopg (the ``agentctx-cc[team]`` extra); hooks and the MCP server never import
this package (pyproject's import contracts): the hook path only looks at a stamp file.
"""

from __future__ import annotations

from agentctx.core.errors import AgentctxError

#: The one line a member without the extra gets.
MISSING = (
    "the team hub needs psycopg, which is not installed: "
    "pip install 'agentctx-cc[team]' (or uv tool install 'agentctx-cc[team]')"
)


class HubError(AgentctxError):
    """Raised by the hub client: the hub refused a call (not a member, a reader pushing, a project
    not listed, a client older than the hub's minimum) or cannot be reached."""


class HubUnreachable(HubError):
    """Raised by :func:`agentctx.team.hub.connect.connect` when the hub does not answer in time."""


def require() -> None:
    """:class:`HubError` with :data:`MISSING` when psycopg cannot be imported."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise HubError(MISSING) from None
