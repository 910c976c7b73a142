"""Registering agentctx with Claude Code: hook handlers in ``settings.json``, the MCP server entry.

ADR-016: setup is one explicit, reversible step. This module is the library behind
``agentctx init``, ``agentctx uninstall`` and the checks of ``agentctx doctor``; it edits JSON files
and nothing else (standard library only, no database).

What is "ours", and the only thing ever touched:

- a hook handler (an object inside ``hooks.<Event>[i].hooks``) whose ``command``, stripped of
  surrounding whitespace, is ``agentctx hook <name>`` or ends with ``/agentctx hook <name>`` (the
  absolute-path form of older installs), ``<name>`` being one of :data:`KNOWN_HOOK_NAMES`;
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
- **Atomic.** A temporary file in the same folder, fsynced, then ``os.replace``. The file mode is
  kept, and a symlinked settings file keeps its link (the target is replaced). If the file changed
  on disk while we edited it (Claude Code rewrites ``~/.claude.json`` often), the edit starts over.
- **Refusing.** A file that is not valid JSON, whose top level is not an object, or whose
  ``hooks`` / ``mcpServers`` / our event's value has the wrong kind raises :class:`ConfigError`
  naming the path and the problem, and the file is left untouched. An empty (or blank) file counts
  as ``{}``.
- **Repairing.** Install brings ours to exactly the registrations of :data:`HOOK_EVENTS`: a handler
  of ours is rewritten in place to the canonical form (command without a path, timeout, async);
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
dropped), while an existing ``mcpServers.agentctx`` keeps the user's ``env`` and ``timeout`` keys.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import stat
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from agentctx.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "HOOK_EVENTS",
    "KNOWN_HOOK_NAMES",
    "MCP_ENTRY",
    "MCP_SERVER_NAME",
    "Change",
    "ClaudePaths",
    "HookRegistration",
    "install_hooks",
    "install_mcp",
    "settings_paths",
    "status",
    "uninstall_hooks",
    "uninstall_mcp",
    "which_agentctx",
]

Action = Literal["created", "updated", "unchanged", "removed"]
JSONObject = dict[str, Any]

_EDIT_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class HookRegistration:
    """One Claude Code event we register: the ``agentctx hook <name>`` it runs and how."""

    event: str
    name: str
    timeout: int
    matcher: str | None = None
    is_async: bool = False

    @property
    def command(self) -> str:
        """The version-independent command, resolved through PATH (ADR-016)."""
        return f"agentctx hook {self.name}"

    def handler(self) -> JSONObject:
        """The canonical handler object."""
        handler: JSONObject = {"type": "command", "command": self.command, "timeout": self.timeout}
        if self.is_async:
            handler["async"] = True
        return handler

    def group(self) -> JSONObject:
        """The canonical matcher group holding only our handler."""
        group: JSONObject = {} if self.matcher is None else {"matcher": self.matcher}
        group["hooks"] = [self.handler()]
        return group


def _registrations(*regs: HookRegistration) -> dict[str, HookRegistration]:
    return {reg.event: reg for reg in regs}


#: Claude Code event -> our registration, in the order new events are added to ``hooks``.
HOOK_EVENTS: Final[Mapping[str, HookRegistration]] = _registrations(
    HookRegistration("SessionStart", "session-start", 10, matcher="startup|resume|clear|compact"),
    HookRegistration("UserPromptSubmit", "user-prompt-submit", 10),
    HookRegistration(
        "PostToolUse",
        "post-tool-use",
        30,
        matcher="Write|Edit|MultiEdit|NotebookEdit|Bash",
        is_async=True,
    ),
    HookRegistration("PostToolUseFailure", "post-tool-use", 30, matcher="Bash", is_async=True),
    HookRegistration("PreCompact", "pre-compact", 30),
    HookRegistration("Stop", "stop", 30),
    # SessionEnd hooks share a 1.5 s budget; a per-hook timeout in a settings file raises it.
    HookRegistration("SessionEnd", "session-end", 5),
    HookRegistration("CwdChanged", "cwd-changed", 10),
    HookRegistration("SubagentStart", "subagent-start", 10),
)

#: The ``<name>`` part of every ``agentctx hook <name>`` command we ever registered.
KNOWN_HOOK_NAMES: Final[frozenset[str]] = frozenset(reg.name for reg in HOOK_EVENTS.values())

MCP_SERVER_NAME: Final = "agentctx"
#: The keys of ``mcpServers.agentctx`` we own; others found there (``env``, ``timeout``) are kept.
MCP_ENTRY: Final[Mapping[str, Any]] = {"type": "stdio", "command": "agentctx", "args": ["mcp"]}
_MCP_KEPT_KEYS = ("env", "timeout")


@dataclass(frozen=True, slots=True)
class Change:
    """What one install/uninstall step did to one file."""

    path: Path
    action: Action
    description: str

    def __str__(self) -> str:
        return f"{self.action}: {self.path} ({self.description})"


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


def mcp_available() -> bool:
    """True when this agentctx has the MCP server (``agentctx mcp``); init registers it only then."""
    from agentctx import features

    return features.available(features.MCP_SERVER)


def which_agentctx() -> str | None:
    """The ``agentctx`` executable Claude Code will run, or None when it is not on PATH."""
    return shutil.which("agentctx")


# --------------------------------------------------------------------------- hooks


def install_hooks(settings_path: Path) -> Change:
    """Add or repair our hook registrations in a Claude Code settings file (created if missing)."""
    return _edit(settings_path, _install_hooks_into, create=True)


def uninstall_hooks(settings_path: Path) -> Change:
    """Remove exactly our hook handlers from a settings file (a missing file is left missing)."""
    return _edit(settings_path, _uninstall_hooks_from, create=False)


def _our_name(handler: object) -> str | None:
    """The ``<name>`` of an ``agentctx hook <name>`` handler, or None when it is not ours."""
    if not isinstance(handler, dict):
        return None
    command = handler.get("command")
    if not isinstance(command, str):
        return None
    command = command.strip()
    head, sep, name = command.rpartition(" hook ")
    if not sep or name not in KNOWN_HOOK_NAMES:
        return None
    if head == "agentctx" or head.endswith("/agentctx"):
        return name
    return None


def _handlers(group: object) -> list[Any] | None:
    """The handler list of a matcher group, or None for a malformed group (left alone)."""
    if isinstance(group, dict):
        handlers = group.get("hooks")
        if isinstance(handlers, list):
            return handlers
    return None


def _same(a: object, b: object) -> bool:
    """JSON equality that tells ``true`` from ``1`` and sees key order."""
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


def _hooks_object(data: JSONObject, path: Path) -> JSONObject | None:
    hooks = data.get("hooks")
    if "hooks" in data and not isinstance(hooks, dict):
        raise ConfigError(
            f"{path}: 'hooks' is a JSON {_kind(hooks)}, not an object; fix it, then run again"
        )
    return hooks


def _install_hooks_into(data: JSONObject, path: Path) -> list[str]:
    hooks = _hooks_object(data, path)
    for event in HOOK_EVENTS:
        if hooks is not None and event in hooks and not isinstance(hooks[event], list):
            raise ConfigError(
                f"{path}: 'hooks.{event}' is a JSON {_kind(hooks[event])}, not a list;"
                " fix it, then run again"
            )
    if hooks is None:
        hooks = data["hooks"] = {}
    added = repaired = removed = 0
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue  # a foreign event in a shape we do not understand: not ours to judge
        reg = HOOK_EVENTS.get(event)
        keeper_group: JSONObject | None = None
        keeper: JSONObject | None = None
        removals: dict[int, list[int]] = {}  # id(group) -> ids of our handlers to drop
        for group in groups:
            handlers = _handlers(group)
            for handler in handlers or ():
                name = _our_name(handler)
                if name is None:
                    continue
                if reg is not None and name == reg.name and keeper is None:
                    keeper_group, keeper = group, handler
                else:
                    removals.setdefault(id(group), []).append(id(handler))
        if removals:
            removed += sum(len(ids) for ids in removals.values())
            _drop_handlers(groups, removals)
            if not groups and reg is None:
                del hooks[event]
                continue
        if reg is None:
            continue
        if keeper_group is None or keeper is None:
            groups.append(reg.group())
            added += 1
        elif _repair(groups, keeper_group, keeper, reg):
            repaired += 1
    for event, reg in HOOK_EVENTS.items():
        if event not in hooks:
            hooks[event] = [reg.group()]
            added += 1
    notes = []
    if added:
        notes.append(f"added {added} hook registration{_s(added)}")
    if repaired:
        notes.append(f"repaired {repaired}")
    if removed:
        notes.append(f"removed {removed} duplicate or stale handler{_s(removed)}")
    return notes


def _drop_handlers(groups: list[Any], removals: dict[int, list[int]]) -> None:
    """Remove handlers by identity; a group our removal empties goes too."""
    kept_groups = []
    for group in groups:
        drop = removals.get(id(group))
        handlers = _handlers(group)
        if drop and handlers is not None:
            handlers[:] = [h for h in handlers if id(h) not in drop]
            if not handlers:
                continue
        kept_groups.append(group)
    groups[:] = kept_groups


def _repair(
    groups: list[Any], group: JSONObject, handler: JSONObject, reg: HookRegistration
) -> bool:
    """Bring our surviving handler and its group to the canonical form; True if anything changed."""
    handlers = group["hooks"]
    changed = False
    current: JSONObject = handler
    canonical = reg.handler()
    if not _same(handler, canonical):
        handlers[next(i for i, h in enumerate(handlers) if h is handler)] = current = canonical
        changed = True
    if len(handlers) == 1:  # the group is ours alone: fix its matcher in place
        if reg.matcher is None:
            if "matcher" in group:
                del group["matcher"]
                changed = True
        elif group.get("matcher") != reg.matcher:
            if "matcher" in group:
                group["matcher"] = reg.matcher
            else:
                rest = dict(group)
                group.clear()
                group.update({"matcher": reg.matcher, **rest})
            changed = True
    elif not _matcher_equivalent(group.get("matcher"), reg.matcher):
        # shared with foreign handlers: their matcher is theirs, so ours moves out
        handlers[:] = [h for h in handlers if h is not current]
        groups.append(reg.group())
        changed = True
    return changed


def _matcher_equivalent(found: object, wanted: str | None) -> bool:
    if wanted is None:
        return found is None or found in ("", "*")
    return found == wanted


def _uninstall_hooks_from(data: JSONObject, path: Path) -> list[str]:
    hooks = _hooks_object(data, path)
    if not hooks:
        return []
    removed = 0
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue
        removals: dict[int, list[int]] = {}
        for group in groups:
            for handler in _handlers(group) or ():
                if _our_name(handler) is not None:
                    removals.setdefault(id(group), []).append(id(handler))
        if removals:
            removed += sum(len(ids) for ids in removals.values())
            _drop_handlers(groups, removals)
            if not groups:
                del hooks[event]
    if removed and not hooks:
        del data["hooks"]
    return [f"removed {removed} agentctx hook handler{_s(removed)}"] if removed else []


# --------------------------------------------------------------------------- MCP


def install_mcp(path: Path, *, project: bool) -> Change:
    """Register the MCP server: user scope in ``~/.claude.json``, project scope in ``.mcp.json``."""
    # ~/.claude.json also holds Claude Code's account state, so a new one is private to the user
    return _edit(path, _install_mcp_into, create=True, new_mode=None if project else 0o600)


def uninstall_mcp(path: Path, *, project: bool) -> Change:
    """Remove ``mcpServers.agentctx``; a project ``.mcp.json`` left as ``{}`` is deleted."""
    return _edit(path, _uninstall_mcp_from, create=False, delete_if_empty=project)


def _servers_object(data: JSONObject, path: Path) -> JSONObject | None:
    servers = data.get("mcpServers")
    if "mcpServers" in data and not isinstance(servers, dict):
        raise ConfigError(
            f"{path}: 'mcpServers' is a JSON {_kind(servers)}, not an object;"
            " fix it, then run again"
        )
    return servers


def _canonical_mcp_entry(existing: object) -> JSONObject:
    entry: JSONObject = copy.deepcopy(dict(MCP_ENTRY))
    if isinstance(existing, dict):
        entry.update({k: existing[k] for k in _MCP_KEPT_KEYS if k in existing})
    return entry


def _install_mcp_into(data: JSONObject, path: Path) -> list[str]:
    servers = _servers_object(data, path)
    if servers is None:
        servers = data["mcpServers"] = {}
    existing = servers.get(MCP_SERVER_NAME)
    entry = _canonical_mcp_entry(existing)
    if existing is None:
        servers[MCP_SERVER_NAME] = entry
        return [f"registered MCP server {MCP_SERVER_NAME!r}"]
    if not _same(existing, entry):
        servers[MCP_SERVER_NAME] = entry
        return [f"repaired MCP server {MCP_SERVER_NAME!r}"]
    return []


def _uninstall_mcp_from(data: JSONObject, path: Path) -> list[str]:
    servers = _servers_object(data, path)
    if not servers or MCP_SERVER_NAME not in servers:
        return []
    del servers[MCP_SERVER_NAME]
    if not servers:
        del data["mcpServers"]
    return [f"removed MCP server {MCP_SERVER_NAME!r}"]


# --------------------------------------------------------------------------- status


def status(paths: ClaudePaths) -> dict[str, Any]:
    """Which of our registrations exist, for ``agentctx doctor``; never raises on a bad file.

    Shape::

        {"agentctx": "/path/to/agentctx" | None,
         "user": {"settings": str, "hooks": {Event: state}, "hooks_disabled": bool,
                  "mcp_config": str, "mcp": state, "errors": [str]},
         "project": {...same...} | None}

    ``state`` is ``"ok"`` (registered as install would leave it), ``"stale"`` (ours, but install
    would repair it), ``"missing"`` or ``"error"`` (the file could not be read; see ``errors``).
    """
    project = None
    if paths.project_settings is not None and paths.project_mcp is not None:
        project = _scope_status(paths.project_settings, paths.project_mcp)
    return {
        "agentctx": which_agentctx(),
        "user": _scope_status(paths.user_settings, paths.user_mcp),
        "project": project,
    }


def _scope_status(settings_path: Path, mcp_path: Path) -> dict[str, Any]:
    errors: list[str] = []
    hook_states = dict.fromkeys(HOOK_EVENTS, "error")
    disabled = False
    try:
        data = _load(settings_path)[0] or {}
        disabled = data.get("disableAllHooks") is True
        hooks = _hooks_object(data, settings_path) or {}
        repaired = copy.deepcopy(data)
        _install_hooks_into(repaired, settings_path)
        for event, reg in HOOK_EVENTS.items():
            groups = hooks.get(event)
            present = isinstance(groups, list) and any(
                _our_name(h) == reg.name for g in groups for h in (_handlers(g) or ())
            )
            if not present:
                hook_states[event] = "missing"
            else:
                hook_states[event] = "ok" if _same(groups, repaired["hooks"][event]) else "stale"
    except ConfigError as exc:
        errors.append(str(exc))
    mcp_state = "error"
    try:
        data = _load(mcp_path)[0] or {}
        servers = _servers_object(data, mcp_path) or {}
        existing = servers.get(MCP_SERVER_NAME)
        if existing is None:
            mcp_state = "missing"
        else:
            mcp_state = "ok" if _same(existing, _canonical_mcp_entry(existing)) else "stale"
    except ConfigError as exc:
        errors.append(str(exc))
    return {
        "settings": str(settings_path),
        "hooks": hook_states,
        "hooks_disabled": disabled,
        "mcp_config": str(mcp_path),
        "mcp": mcp_state,
        "errors": errors,
    }


# --------------------------------------------------------------------------- JSON file editing


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _reject_constant(name: str) -> Any:
    # json accepts NaN/Infinity, which Claude Code's JSON.parse would not read back
    raise ValueError(f"{name} is not valid JSON")


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from exc
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _load(path: Path) -> tuple[JSONObject | None, tuple[int, int, int] | None]:
    """The parsed top-level object (None when the file is missing) and the file's signature."""
    signature = _signature(path)
    if signature is None:
        return None, None
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from exc
    try:
        text = raw.decode("utf-8-sig")
        data = json.loads(text, parse_constant=_reject_constant) if text.strip() else {}
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise ConfigError(
            f"{path}: not valid JSON ({exc}); fix or move the file aside, then run again"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level is a JSON {_kind(data)}, not an object; fix it, then run again"
        )
    return data, signature


def _edit(
    path: Path,
    mutate: Callable[[JSONObject, Path], list[str]],
    *,
    create: bool,
    delete_if_empty: bool = False,
    new_mode: int | None = None,
) -> Change:
    """Read, mutate in memory, and write back only if the content changed."""
    for _ in range(_EDIT_ATTEMPTS):
        data, signature = _load(path)
        existed = data is not None
        if data is None:
            if not create:
                return Change(path, "unchanged", "no such file; nothing to remove")
            data = {}
        before = json.dumps(data, ensure_ascii=False)
        notes = mutate(data, path)
        if json.dumps(data, ensure_ascii=False) == before:
            return Change(path, "unchanged", "already up to date" if create else "nothing of ours")
        try:
            if delete_if_empty and existed and not data:
                if _signature(path) != signature:
                    continue
                path.unlink()
                return Change(path, "removed", "; ".join([*notes, "deleted the file, now empty"]))
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
            if _write_atomic(path, text, expected=signature, new_mode=new_mode):
                return Change(path, "updated" if existed else "created", "; ".join(notes))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot write it ({exc.strerror or exc})") from exc
    raise ConfigError(
        f"{path}: the file kept changing while agentctx edited it; close Claude Code and run again"
    )


def _write_atomic(
    path: Path, text: str, *, expected: tuple[int, int, int] | None, new_mode: int | None
) -> bool:
    """Atomically replace the file (or its symlink target); False if it changed since read."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    tmp = target.parent / f".{target.name}.agentctx-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    # a new file gets the umask-filtered mode a plain open() would give it (or new_mode)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if new_mode is None else new_mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if _signature(target) != expected:
            tmp.unlink()
            return False
        os.replace(tmp, target)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)
    return True


def _fsync_dir(directory: Path) -> None:
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
