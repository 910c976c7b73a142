"""The agentctx Claude Code plugin, the second way to register (ADR-016): is it installed here?

The repository ships a plugin (``plugin/``: ``.claude-plugin/plugin.json``, ``hooks/hooks.json``,
``.mcp.json``) and a marketplace for it (``.claude-plugin/marketplace.json``); Claude Code copies an
installed plugin under ``<config dir>/plugins/`` and lists it in ``installed_plugins.json``::

    {"version": 2, "plugins": {"agentctx@agentctx-local": [
        {"scope": "user" | "project" | "local", "installPath": "...", "projectPath": "..."}]}}

``enabledPlugins`` of a settings file turns it on or off (``.claude/settings.local.json`` over the
project's ``.claude/settings.json`` over the user's). The plugin registers the same hooks and MCP
server as ``agentctx init``, so ``init`` registers nothing while it is enabled, and ``doctor`` counts
its registrations. Reading only; a file that cannot be read counts as no plugin (never raises).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentctx.claude.install.jsonfile import load
from agentctx.core.errors import ConfigError

if TYPE_CHECKING:
    from agentctx.claude.install.scopes import ClaudePaths

#: The plugin's name in ``plugin/.claude-plugin/plugin.json`` (its id is ``agentctx@<marketplace>``).
PLUGIN_NAME: Final = "agentctx"


@dataclass(frozen=True, slots=True)
class PluginInstall:
    """One installation of the agentctx plugin that applies to a project."""

    id: str
    scope: str
    enabled: bool
    install_path: str

    def describe(self) -> str:
        """``agentctx@agentctx-local (user scope, enabled)``."""
        return f"{self.id} ({self.scope} scope, {'enabled' if self.enabled else 'disabled'})"


def plugin_installs(paths: ClaudePaths, project_dir: Path | None) -> list[PluginInstall]:
    """The agentctx plugin's installations that apply here: user scope, or this project's."""
    listing = _read(paths.user_settings.parent / "plugins" / "installed_plugins.json")
    plugins = listing.get("plugins")
    if not isinstance(plugins, dict):
        return []
    switches = _enabled_switches(paths, project_dir)
    here = _resolved(project_dir) if project_dir is not None else None
    found: list[PluginInstall] = []
    for plugin_id, entries in plugins.items():
        if not isinstance(plugin_id, str) or plugin_id.split("@", 1)[0] != PLUGIN_NAME:
            continue
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            scope = entry.get("scope")
            if scope != "user":
                where = entry.get("projectPath")
                if here is None or not isinstance(where, str) or _resolved(Path(where)) != here:
                    continue
            found.append(
                PluginInstall(
                    id=plugin_id,
                    scope=str(scope),
                    enabled=_enabled(plugin_id, switches),
                    install_path=str(entry.get("installPath", "")),
                )
            )
    return found


def active_plugin(paths: ClaudePaths, project_dir: Path | None) -> PluginInstall | None:
    """The enabled agentctx plugin that registers the hooks and MCP server here, if any."""
    return next((p for p in plugin_installs(paths, project_dir) if p.enabled), None)


def _enabled_switches(paths: ClaudePaths, project_dir: Path | None) -> list[dict[str, Any]]:
    """``enabledPlugins`` of each settings file, the one that wins first."""
    files: list[tuple[Path, Path | None]] = [(paths.user_settings, None)]
    if project_dir is not None:
        claude = project_dir / ".claude"
        files = [
            (claude / "settings.local.json", project_dir),
            (claude / "settings.json", project_dir),
            *files,
        ]
    switches = []
    for path, root in files:
        value = _read(path, root).get("enabledPlugins")
        if isinstance(value, dict):
            switches.append(value)
    return switches


def _enabled(plugin_id: str, switches: list[dict[str, Any]]) -> bool:
    for switch in switches:
        if plugin_id in switch:
            return switch[plugin_id] is True
    return False


def _read(path: Path, root: Path | None = None) -> dict[str, Any]:
    try:
        data = load(path, root)[0]
    except ConfigError:
        return {}
    return data if isinstance(data, dict) else {}


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
