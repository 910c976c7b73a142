"""Our MCP server entry: ``mcpServers.agentctx`` in ``~/.claude.json`` or a project ``.mcp.json``.

Only the ``agentctx`` key of the top-level ``mcpServers`` object is ours. What of an existing entry
survives a repair depends on whose file it is (an allowlist, never a denylist):

- ``~/.claude.json`` is the user's own: its ``env`` and ``timeout`` stay.
- a project ``.mcp.json`` is the repository's, and the repository is untrusted: a key there that
  changes how the server starts (``env`` such as ``PYTHONPATH=.`` runs the repository's
  ``sitecustomize.py``, ``cwd``, ``command``, ``args``, ``type``, ``envFile``, anything unknown) is
  never carried over. Only a positive whole-number ``timeout`` (how long Claude Code waits, not
  how the process starts) is kept. Every dropped or replaced key is reported, one line each
  (:attr:`Change.details`), with the value that was there.

A project ``.mcp.json`` left as exactly ``{}`` by uninstall is deleted (we most likely created it);
``~/.claude.json`` never is.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import TYPE_CHECKING, Any, Final

from agentctx.claude.install.jsonfile import Change, JSONObject, edit, member_object, same

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

MCP_SERVER_NAME: Final = "agentctx"
#: The keys of ``mcpServers.agentctx`` we own, and their values.
MCP_ENTRY: Final[Mapping[str, Any]] = {"type": "stdio", "command": "agentctx", "args": ["mcp"]}
#: Keys of an existing entry kept in the user's own ``~/.claude.json``.
_USER_KEPT_KEYS = ("env", "timeout")
#: The longest ``timeout`` (ms) kept from a project file: a day; anything else is dropped.
_MAX_TIMEOUT_MS = 86_400_000
_SHOWN_CHARS = 80


def install_mcp(
    path: Path, *, project: bool, root: Path | None = None, program: str = "agentctx"
) -> Change:
    """Register the MCP server: user scope in ``~/.claude.json``, project scope in ``.mcp.json``.

    ``root``: the project folder of a project-scope file (no symlink is followed inside it).
    ``program``: the server's ``command`` (``agentctx`` through PATH, or an absolute path).
    """
    dropped: list[str] = []

    def mutate(data: JSONObject, where: Path) -> list[str]:
        dropped.clear()  # the edit may start over when the file changed meanwhile
        return _install_mcp_into(data, where, project=project, dropped=dropped, program=program)

    # ~/.claude.json also holds Claude Code's account state, so a new one is private to the user
    change = edit(path, mutate, create=True, new_mode=None if project else 0o600, root=root)
    return dataclasses.replace(change, details=tuple(dropped)) if dropped else change


def uninstall_mcp(path: Path, *, project: bool, root: Path | None = None) -> Change:
    """Remove ``mcpServers.agentctx``; a project ``.mcp.json`` left as ``{}`` is deleted."""
    return edit(path, _uninstall_mcp_from, create=False, delete_if_empty=project, root=root)


def servers_object(data: JSONObject, path: Path) -> JSONObject | None:
    """The ``mcpServers`` object, None when absent; ConfigError when not an object."""
    return member_object(data, "mcpServers", path)


def canonical_mcp_entry(
    existing: object, *, project: bool = False, program: str = "agentctx"
) -> JSONObject:
    """Our entry, with what may be kept of the existing one (see the module's note)."""
    entry: JSONObject = copy.deepcopy(dict(MCP_ENTRY))
    entry["command"] = program
    if isinstance(existing, dict):
        entry.update({k: existing[k] for k in existing if _kept(k, existing[k], project=project)})
    return entry


def _kept(key: str, value: object, *, project: bool) -> bool:
    if key in MCP_ENTRY:
        return False  # ours: always our value
    if not project:
        return key in _USER_KEPT_KEYS
    return (
        key == "timeout"
        and type(value) is int  # not a bool, a float or a string
        and 0 < value <= _MAX_TIMEOUT_MS
    )


def dropped_keys(existing: object, *, project: bool, program: str = "agentctx") -> list[str]:
    """One line per key of ``existing`` that the canonical entry drops or replaces."""
    if not isinstance(existing, dict):
        return [f"replaced MCP server {MCP_SERVER_NAME!r}: it was a JSON value, not an object"]
    entry = canonical_mcp_entry(existing, project=project, program=program)
    lines = []
    for key, value in existing.items():
        if key in entry and same(entry[key], value):
            continue
        shown = _shown(value)
        if key in entry:
            lines.append(
                f"replaced {key!r} of MCP server {MCP_SERVER_NAME!r}: was {shown}, "
                f"now {_shown(entry[key])}"
            )
        else:
            lines.append(f"dropped {key!r} from MCP server {MCP_SERVER_NAME!r}: was {shown}")
    return lines


def _shown(value: object) -> str:
    text = json.dumps(
        value, ensure_ascii=True
    )  # no control or invisible character reaches a terminal
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _install_mcp_into(
    data: JSONObject,
    path: Path,
    *,
    project: bool = False,
    dropped: list[str] | None = None,
    program: str = "agentctx",
) -> list[str]:
    servers = servers_object(data, path)
    if servers is None:
        servers = data["mcpServers"] = {}
    existing = servers.get(MCP_SERVER_NAME)
    entry = canonical_mcp_entry(existing, project=project, program=program)
    if existing is None:
        servers[MCP_SERVER_NAME] = entry
        return [f"registered MCP server {MCP_SERVER_NAME!r}"]
    if not same(existing, entry):
        lost = dropped_keys(existing, project=project, program=program)
        if dropped is not None:
            dropped.extend(lost)
        servers[MCP_SERVER_NAME] = entry
        kept = sorted(set(entry) - set(MCP_ENTRY))
        note = f"repaired MCP server {MCP_SERVER_NAME!r}"
        if lost:
            note += f": {len(lost)} key{'' if len(lost) == 1 else 's'} dropped or replaced"
        if kept:
            note += f", kept {', '.join(kept)}"
        return [note]
    return []


def _uninstall_mcp_from(data: JSONObject, path: Path) -> list[str]:
    servers = servers_object(data, path)
    if not servers or MCP_SERVER_NAME not in servers:
        return []
    del servers[MCP_SERVER_NAME]
    if not servers:
        del data["mcpServers"]
    return [f"removed MCP server {MCP_SERVER_NAME!r}"]
