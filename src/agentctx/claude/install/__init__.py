"""Registering agentctx with Claude Code: hook handlers in ``settings.json``, the MCP server entry.

ADR-016: setup is one explicit, reversible step. This module is the library behind
``agentctx init``, ``agentctx uninstall`` and the checks of ``agentctx doctor``; it edits JSON files
and nothing else (standard library only, no database).

What is "ours", and the only thing ever touched:

- a hook handler (an object inside ``hooks.<Event>[i].hooks``) whose ``command``, stripped of
  surrounding whitespace, is ``agentctx hook <name>`` or ends with ``/agentctx hook <name>`` (the
  absolute-path form: ``init`` writes it in the user's own files when PATH does not find the
  agentctx that runs it, :func:`program`; shell-quoted when the path needs it), ``<name>`` being
  one of :data:`KNOWN_HOOK_NAMES`;
- the ``agentctx`` key of a top-level ``mcpServers`` object.

Guarantees of :func:`install_hooks`, :func:`uninstall_hooks`, :func:`install_mcp` and
:func:`uninstall_mcp`:

- **Surgical.** Every other key, every foreign handler and matcher group, and the order of all of
  them are kept. Containers are pruned only when our own removal empties them.
- **Idempotent.** When the parsed content would not change, the file is not written at all, not
  even reformatted: a second run changes no byte.
- **Normalized only when written.** A write uses ``json.dumps(data, indent=2, ensure_ascii=False)``
  plus a newline. A file kept in another layout (tabs, 4 spaces, one line) is reformatted by the
  first write that changes it; its content (keys, order, values) other than ours stays the same.
- **Atomic.** A temporary file in the same folder, fsynced, then renamed (``core.files``). The file
  mode is kept, and a symlinked user settings file keeps its link (the target is replaced); in a
  project folder a symlinked file, or a symlink on the way to it, is refused. If the file changed
  on disk while we edited it (Claude Code rewrites ``~/.claude.json`` often), the edit starts over.
- **Refusing.** A file that is not valid JSON, whose top level is not an object, or whose
  ``hooks`` / ``mcpServers`` / our event's value has the wrong kind raises :class:`ConfigError`
  naming the path and the problem, and the file is left untouched. An empty (or blank) file counts
  as ``{}``.
- **Repairing.** Install brings ours to exactly the registrations of :data:`HOOK_EVENTS`: a handler
  of ours is rewritten in place to the canonical form (the command of ``program``, timeout, async);
  the matcher of a group holding only our handler is fixed in place; our handler in a group shared
  with foreign handlers whose matcher differs moves to a group of its own; duplicates, and handlers
  of ours under events we do not register, are removed.
- **Reversible.** ``uninstall(install(x))`` parses equal to ``x`` without our handlers (so equal
  to ``x`` when ``x`` had none), except for containers already empty in ``x`` (``"hooks": {}``,
  ``"Stop": []``, ``"mcpServers": {}``): install fills them and uninstall prunes them. For a file
  without a ``hooks`` key (or ``mcpServers`` key) written in the normalized layout, install then
  uninstall gives back the original bytes exactly.
- A project ``.mcp.json`` that becomes exactly ``{}`` on uninstall is deleted (we most likely
  created it); ``~/.claude.json`` and settings files are never deleted.

Repairs canonicalize our hook handlers completely (extra keys such as ``statusMessage`` are
dropped). An existing ``mcpServers.agentctx`` keeps the user's ``env`` and ``timeout`` keys in
``~/.claude.json``; in a project's ``.mcp.json`` (a repository's file) only a whole-number
``timeout`` survives, and every key dropped is named (``mcp.py``).

Layout: ``hooks.py`` (our handlers in settings files), ``mcp.py`` (our MCP server entry),
``jsonfile.py`` (reading and atomically rewriting the JSON files), ``scopes.py`` (where the
user and project files are, and :func:`status`) and ``plugin.py`` (whether the agentctx Claude Code
plugin, which registers the same things, is installed: then ``init`` registers nothing).
"""

from __future__ import annotations

from agentctx.claude.install.hooks import (
    HOOK_EVENTS,
    KNOWN_HOOK_NAMES,
    HookRegistration,
    install_hooks,
    uninstall_hooks,
)
from agentctx.claude.install.jsonfile import Change
from agentctx.claude.install.mcp import (
    MCP_ENTRY,
    MCP_SERVER_NAME,
    install_mcp,
    uninstall_mcp,
)
from agentctx.claude.install.plugin import (
    PLUGIN_NAME,
    PluginInstall,
    active_plugin,
    plugin_installs,
)
from agentctx.claude.install.scopes import (
    ClaudePaths,
    launcher,
    path_advice,
    program,
    runs,
    settings_paths,
    status,
    which_agentctx,
)

__all__ = [
    "HOOK_EVENTS",
    "KNOWN_HOOK_NAMES",
    "MCP_ENTRY",
    "MCP_SERVER_NAME",
    "PLUGIN_NAME",
    "Change",
    "ClaudePaths",
    "HookRegistration",
    "PluginInstall",
    "active_plugin",
    "install_hooks",
    "install_mcp",
    "launcher",
    "path_advice",
    "plugin_installs",
    "program",
    "runs",
    "settings_paths",
    "status",
    "uninstall_hooks",
    "uninstall_mcp",
    "which_agentctx",
]
