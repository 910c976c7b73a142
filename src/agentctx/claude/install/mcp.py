"""Our MCP server entry: ``mcpServers.agentctx`` in ``~/.claude.json`` or a project ``.mcp.json``.

Only the ``agentctx`` key of the top-level ``mcpServers`` object is ours; its ``env`` and
``timeout`` keys stay the user's. A project ``.mcp.json`` left as exactly ``{}`` by uninstall is
deleted (we most likely created it); ``~/.claude.json`` never is.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Final

from agentctx.claude.install.jsonfile import Change, JSONObject, edit, member_object, same

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

MCP_SERVER_NAME: Final = "agentctx"
#: The keys of ``mcpServers.agentctx`` we own; others found there (``env``, ``timeout``) are kept.
MCP_ENTRY: Final[Mapping[str, Any]] = {"type": "stdio", "command": "agentctx", "args": ["mcp"]}
_MCP_KEPT_KEYS = ("env", "timeout")


def install_mcp(path: Path, *, project: bool, root: Path | None = None) -> Change:
    """Register the MCP server: user scope in ``~/.claude.json``, project scope in ``.mcp.json``.

    ``root``: the project folder of a project-scope file (no symlink is followed inside it).
    """
    # ~/.claude.json also holds Claude Code's account state, so a new one is private to the user
    return edit(
        path, _install_mcp_into, create=True, new_mode=None if project else 0o600, root=root
    )


def uninstall_mcp(path: Path, *, project: bool, root: Path | None = None) -> Change:
    """Remove ``mcpServers.agentctx``; a project ``.mcp.json`` left as ``{}`` is deleted."""
    return edit(path, _uninstall_mcp_from, create=False, delete_if_empty=project, root=root)


def servers_object(data: JSONObject, path: Path) -> JSONObject | None:
    """The ``mcpServers`` object, None when absent; ConfigError when not an object."""
    return member_object(data, "mcpServers", path)


def canonical_mcp_entry(existing: object) -> JSONObject:
    """Our entry, with the ``env`` and ``timeout`` the user set on the existing one."""
    entry: JSONObject = copy.deepcopy(dict(MCP_ENTRY))
    if isinstance(existing, dict):
        entry.update({k: existing[k] for k in _MCP_KEPT_KEYS if k in existing})
    return entry


def _install_mcp_into(data: JSONObject, path: Path) -> list[str]:
    servers = servers_object(data, path)
    if servers is None:
        servers = data["mcpServers"] = {}
    existing = servers.get(MCP_SERVER_NAME)
    entry = canonical_mcp_entry(existing)
    if existing is None:
        servers[MCP_SERVER_NAME] = entry
        return [f"registered MCP server {MCP_SERVER_NAME!r}"]
    if not same(existing, entry):
        servers[MCP_SERVER_NAME] = entry
        return [f"repaired MCP server {MCP_SERVER_NAME!r}"]
    return []


def _uninstall_mcp_from(data: JSONObject, path: Path) -> list[str]:
    servers = servers_object(data, path)
    if not servers or MCP_SERVER_NAME not in servers:
        return []
    del servers[MCP_SERVER_NAME]
    if not servers:
        del data["mcpServers"]
    return [f"removed MCP server {MCP_SERVER_NAME!r}"]
