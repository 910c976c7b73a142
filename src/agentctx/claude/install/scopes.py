"""The user and project scopes: where their Claude Code files are, and what of ours they hold.

:func:`settings_paths` says which files ``init`` and ``uninstall`` edit (``CLAUDE_CONFIG_DIR``
moves the user-level ones); :func:`status` reports, for ``agentctx doctor``, which of our
registrations each scope holds and whether install would change them, without writing anything.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from agentctx.claude.install.hooks import (
    HOOK_EVENTS,
    PROGRAM,
    group_handlers,
    hooks_object,
    install_hooks_into,
    our_name,
    program_of,
)
from agentctx.claude.install.jsonfile import load, same
from agentctx.claude.install.mcp import MCP_SERVER_NAME, canonical_mcp_entry, servers_object
from agentctx.claude.install.plugin import active_plugin
from agentctx.core.errors import INSTALL_ADVICE, ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class ClaudePaths:
    """The Claude Code files agentctx edits, at user level and (optionally) for one project."""

    user_settings: Path
    user_mcp: Path
    project_settings: Path | None = None
    project_mcp: Path | None = None


def settings_paths(
    home: Path, project_dir: Path | None, *, environ: Mapping[str, str] | None = None
) -> ClaudePaths:
    """Where the hooks and MCP entries go; ``CLAUDE_CONFIG_DIR`` moves the user-level files."""
    env = os.environ if environ is None else environ
    config_dir = env.get("CLAUDE_CONFIG_DIR", "").strip()
    if config_dir:
        root = Path(os.path.expanduser(config_dir))
        user_settings, user_mcp = root / "settings.json", root / ".claude.json"
    else:
        user_settings, user_mcp = home / ".claude" / "settings.json", home / ".claude.json"
    if project_dir is None:
        return ClaudePaths(user_settings, user_mcp)
    return ClaudePaths(
        user_settings,
        user_mcp,
        project_settings=project_dir / ".claude" / "settings.json",
        project_mcp=project_dir / ".mcp.json",
    )


def path_advice() -> str:
    """How to put the running ``agentctx`` on PATH, as a line for ``~/.profile``.

    Run through its own command (a tool install's link in ``~/.local/bin``): that folder. Run
    as ``python -m agentctx`` where its installation made the command (:func:`console_script`):
    that command's folder. Otherwise: its interpreter's folder, and the advice to install it as a
    tool.
    """
    arg0 = sys.argv[0] if sys.argv else ""
    command = os.path.abspath(arg0) if os.path.basename(arg0) == "agentctx" else console_script()
    folder = os.path.dirname(command or sys.executable)
    line = f'add {folder} to PATH (`export PATH="{folder}:$PATH"` in ~/.profile, then a new shell)'
    return line if command else f"{line}, or {INSTALL_ADVICE}"


def which_agentctx() -> str | None:
    """The ``agentctx`` executable Claude Code will run, or None when it is not on PATH."""
    return shutil.which("agentctx")


def console_script() -> str | None:
    """The ``agentctx`` command that this agentctx's installation made, for ``python -m agentctx``:
    the one beside the interpreter (a virtual environment's or a tool install's ``bin/``), else,
    when agentctx is installed in the user's site-packages (``pip install --user``), the one in
    the user's scripts folder (``~/.local/bin``); None when neither is an executable file.
    """
    folders = [os.path.dirname(sys.executable)] if sys.executable else []
    if _in_user_site():
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    for folder in folders:
        path = os.path.join(folder, "agentctx")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _in_user_site() -> bool:
    import site

    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    return bool(user_site) and os.path.abspath(__file__).startswith(os.path.join(user_site, ""))


def launcher() -> str | None:
    """The ``agentctx`` console script of the agentctx running now, absolute with its links
    resolved: the one running (``agentctx …``), or, run as ``python -m agentctx``, the one its
    installation made (:func:`console_script`); None when there is none."""
    arg0 = sys.argv[0] if sys.argv else ""
    found = arg0 if os.path.basename(arg0) == "agentctx" else console_script()
    if found is None:
        return None
    path = os.path.realpath(found)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def program(*, project: bool = False) -> str:
    """What the hooks and the MCP server of a scope run: ``agentctx`` through PATH when PATH finds
    this same agentctx, else this console script's absolute path.

    A project's files (``.claude/settings.json``, ``.mcp.json``) are shared by a team, so they
    always name ``agentctx``: one machine's path would break everyone else's. Run as ``python -m
    agentctx``, the console script its installation made (:func:`console_script`) stands in for
    it; with none, agentctx knows no command to give: ``agentctx`` too (``init`` warns).
    """
    own = launcher()
    if project or own is None:
        return PROGRAM
    found = which_agentctx()
    if found is not None and os.path.realpath(found) == own:
        return PROGRAM
    return own


def runs(command: str) -> str | None:
    """Where a registered program is found (``agentctx`` through PATH, else the path itself when it
    is an executable file), or None: Claude Code could not run it."""
    if command == PROGRAM:
        return which_agentctx()
    return command if os.path.isfile(command) and os.access(command, os.X_OK) else None


class ScopeStatus(TypedDict):
    """Our registrations in one scope's settings and MCP files (see :func:`status`)."""

    settings: str
    hooks: dict[str, str]
    programs: list[str]
    hooks_disabled: bool
    mcp_config: str
    mcp: str
    errors: list[str]


class InstallStatus(TypedDict):
    """The ``agentctx`` on PATH, our registrations in the user and project scopes, the plugin."""

    agentctx: str | None
    program: str
    user: ScopeStatus
    project: ScopeStatus | None
    plugin: str | None


def status(paths: ClaudePaths) -> InstallStatus:
    """Which of our registrations exist, for ``agentctx doctor``; never raises on a bad file.

    Shape::

        {"agentctx": "/path/to/agentctx" | None, "program": "agentctx" | "/abs/agentctx",
         "user": {"settings": str, "hooks": {Event: state}, "programs": [str],
                  "hooks_disabled": bool, "mcp_config": str, "mcp": state, "errors": [str]},
         "project": {...same...} | None,
         "plugin": "agentctx@<marketplace> (user scope, enabled)" | None}

    ``state`` is ``"ok"`` (registered as install would leave it), ``"stale"`` (ours, but install
    would repair it), ``"missing"`` or ``"error"`` (the file could not be read; see ``errors``).
    ``plugin``: the enabled agentctx plugin that registers them too (:mod:`.plugin`), if any.
    ``program``: what ``init`` would register in the user's files now (:func:`program`); a
    registration naming another is ``stale``. ``programs``: what a scope's hooks run now.
    """
    project = None
    project_dir = None
    if paths.project_settings is not None and paths.project_mcp is not None:
        project_dir = paths.project_settings.parent.parent
        project = _scope_status(
            paths.project_settings, paths.project_mcp, root=project_dir, run=PROGRAM
        )
    plugin = active_plugin(paths, project_dir)
    user_program = program()
    return {
        "agentctx": which_agentctx(),
        "program": user_program,
        "user": _scope_status(paths.user_settings, paths.user_mcp, run=user_program),
        "project": project,
        "plugin": plugin.describe() if plugin else None,
    }


def _scope_status(
    settings_path: Path, mcp_path: Path, *, root: Path | None = None, run: str = PROGRAM
) -> ScopeStatus:
    """The state of one scope's files; ``root``: the project folder of a project scope; ``run``:
    the program install would register there."""
    errors: list[str] = []
    programs: list[str] = []
    hook_states = dict.fromkeys(HOOK_EVENTS, "error")
    disabled = False
    try:
        data = load(settings_path, root)[0] or {}
        disabled = data.get("disableAllHooks") is True
        hooks = hooks_object(data, settings_path) or {}
        repaired = copy.deepcopy(data)
        install_hooks_into(repaired, settings_path, program=run)
        for groups in hooks.values():
            for g in groups if isinstance(groups, list) else ():
                for h in group_handlers(g) or ():
                    found = program_of(h)
                    if found is not None and found not in programs:
                        programs.append(found)
        for event, reg in HOOK_EVENTS.items():
            groups = hooks.get(event)
            present = isinstance(groups, list) and any(
                our_name(h) == reg.name for g in groups for h in (group_handlers(g) or ())
            )
            if not present:
                hook_states[event] = "missing"
            else:
                hook_states[event] = "ok" if same(groups, repaired["hooks"][event]) else "stale"
    except ConfigError as exc:
        errors.append(str(exc))
    mcp_state = "error"
    try:
        data = load(mcp_path, root)[0] or {}
        servers = servers_object(data, mcp_path) or {}
        existing = servers.get(MCP_SERVER_NAME)
        if existing is None:
            mcp_state = "missing"
        else:
            canonical = canonical_mcp_entry(existing, project=root is not None, program=run)
            mcp_state = "ok" if same(existing, canonical) else "stale"
    except ConfigError as exc:
        errors.append(str(exc))
    return {
        "settings": str(settings_path),
        "hooks": hook_states,
        "programs": programs,
        "hooks_disabled": disabled,
        "mcp_config": str(mcp_path),
        "mcp": mcp_state,
        "errors": errors,
    }
