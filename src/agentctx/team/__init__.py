"""How context travels between people: the team file in git and the team hub on PostgreSQL.

- :mod:`.file`: the team file, ``.agentctx/context.md``, a deterministic export of a project's
  shareable records that teammates commit and import (its public names are re-exported here);
- :mod:`.hub`: the team hub client (the ``agentctx-cc[team]`` extra: psycopg), which pushes a
  linked project's shareable records to a PostgreSQL hub and pulls the teammates' ones through
  the import confinement; its server side is the SQL in ``hub/sql/`` (docs/team-hub.md).

Both tiers share the same record ids, so a record that arrives both ways is one record. The hub
client is never imported by the hooks or the MCP server (pyproject's import contracts).
"""

from __future__ import annotations

from agentctx.team.file import (
    SHARED_TYPES,
    TEAM_DIR,
    TEAM_FILE,
    export_team,
    render,
    shared,
    team_path,
    write_if_changed,
)

__all__ = [
    "SHARED_TYPES",
    "TEAM_DIR",
    "TEAM_FILE",
    "export_team",
    "render",
    "shared",
    "team_path",
    "write_if_changed",
]
