"""Our hook handlers in a Claude Code settings file: the registrations, install, repair, removal.

A handler is ours when its ``command``, stripped, is ``agentctx hook <name>`` or ends with
``/agentctx hook <name>`` (:func:`our_name`). Install brings ours to exactly the registrations of
:data:`HOOK_EVENTS`, in place where it can; uninstall removes exactly our handlers and prunes
only the containers that removal empties. The file itself is edited by
:func:`agentctx.claude.install.jsonfile.edit`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agentctx.claude.install.jsonfile import (
    Change,
    JSONObject,
    edit,
    kind,
    member_object,
    plural_s,
    same,
)
from agentctx.core.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


#: The program our registrations run by default: found through PATH. ``init`` registers an
#: absolute path instead in the user's own files when PATH does not find this agentctx
#: (:func:`agentctx.claude.install.scopes.program`).
PROGRAM: Final = "agentctx"


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
        return self.command_for(PROGRAM)

    def command_for(self, program: str) -> str:
        """The command running ``program`` (``agentctx``, or an absolute path: shell-quoted)."""
        return f"{shlex.quote(program)} hook {self.name}"

    def handler(self, program: str = PROGRAM) -> JSONObject:
        """The canonical handler object."""
        handler: JSONObject = {
            "type": "command",
            "command": self.command_for(program),
            "timeout": self.timeout,
        }
        if self.is_async:
            handler["async"] = True
        return handler

    def group(self, program: str = PROGRAM) -> JSONObject:
        """The canonical matcher group holding only our handler."""
        group: JSONObject = {} if self.matcher is None else {"matcher": self.matcher}
        group["hooks"] = [self.handler(program)]
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


def install_hooks(
    settings_path: Path, *, root: Path | None = None, program: str = PROGRAM
) -> Change:
    """Add or repair our hook registrations in a Claude Code settings file (created if missing).

    ``root``: the project folder, for a project's own settings (see :func:`edit`). ``program``:
    what the handlers run (``agentctx`` through PATH, or this machine's absolute path).
    """

    def mutate(data: JSONObject, where: Path) -> list[str]:
        return install_hooks_into(data, where, program=program)

    return edit(settings_path, mutate, create=True, root=root)


def uninstall_hooks(settings_path: Path, *, root: Path | None = None) -> Change:
    """Remove exactly our hook handlers from a settings file (a missing file is left missing)."""
    return edit(settings_path, _uninstall_hooks_from, create=False, root=root)


def our_name(handler: object) -> str | None:
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
    if _is_agentctx(head):
        return name
    if head[:1] not in ("'", '"'):
        return None
    try:  # a quoted absolute path: '/home/a b/.local/bin/agentctx'
        words = shlex.split(head)
    except ValueError:
        return None
    return name if len(words) == 1 and _is_agentctx(words[0]) else None


def program_of(handler: object) -> str | None:
    """The program an ``agentctx hook <name>`` handler of ours runs (unquoted), or None."""
    if our_name(handler) is None:
        return None
    assert isinstance(handler, dict)
    head = str(handler["command"]).strip().rpartition(" hook ")[0]
    if _is_agentctx(head):
        return head
    return shlex.split(head)[0]


def _is_agentctx(program: str) -> bool:
    return program == "agentctx" or program.endswith("/agentctx")


def group_handlers(group: object) -> list[Any] | None:
    """The handler list of a matcher group, or None for a malformed group (left alone)."""
    if isinstance(group, dict):
        handlers = group.get("hooks")
        if isinstance(handlers, list):
            return handlers
    return None


def hooks_object(data: JSONObject, path: Path) -> JSONObject | None:
    """The ``hooks`` object of a settings file, None when absent; ConfigError when not an object."""
    return member_object(data, "hooks", path)


def install_hooks_into(data: JSONObject, path: Path, *, program: str = PROGRAM) -> list[str]:
    """Add or repair our registrations in parsed settings; notes on what changed."""
    hooks = hooks_object(data, path)
    for event in HOOK_EVENTS:
        if hooks is not None and event in hooks and not isinstance(hooks[event], list):
            raise ConfigError(
                f"{path}: 'hooks.{event}' is a JSON {kind(hooks[event])}, not a list;"
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
            handlers = group_handlers(group)
            for handler in handlers or ():
                name = our_name(handler)
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
            groups.append(reg.group(program))
            added += 1
        elif _repair(groups, keeper_group, keeper, reg, program):
            repaired += 1
    for event, reg in HOOK_EVENTS.items():
        if event not in hooks:
            hooks[event] = [reg.group(program)]
            added += 1
    notes = []
    if added:
        notes.append(f"added {added} hook registration{plural_s(added)}")
    if repaired:
        notes.append(f"repaired {repaired}")
    if removed:
        notes.append(f"removed {removed} duplicate or stale handler{plural_s(removed)}")
    return notes


def _drop_handlers(groups: list[Any], removals: dict[int, list[int]]) -> None:
    """Remove handlers by identity; a group our removal empties goes too."""
    kept_groups = []
    for group in groups:
        drop = removals.get(id(group))
        handlers = group_handlers(group)
        if drop and handlers is not None:
            handlers[:] = [h for h in handlers if id(h) not in drop]
            if not handlers:
                continue
        kept_groups.append(group)
    groups[:] = kept_groups


def _repair(
    groups: list[Any], group: JSONObject, handler: JSONObject, reg: HookRegistration, program: str
) -> bool:
    """Bring our surviving handler and its group to the canonical form; True if anything changed."""
    handlers = group["hooks"]
    changed = False
    current: JSONObject = handler
    canonical = reg.handler(program)
    if not same(handler, canonical):
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
        groups.append(reg.group(program))
        changed = True
    return changed


def _matcher_equivalent(found: object, wanted: str | None) -> bool:
    if wanted is None:
        return found is None or found in ("", "*")
    return found == wanted


def _uninstall_hooks_from(data: JSONObject, path: Path) -> list[str]:
    hooks = hooks_object(data, path)
    if not hooks:
        return []
    removed = 0
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue
        removals: dict[int, list[int]] = {}
        for group in groups:
            for handler in group_handlers(group) or ():
                if our_name(handler) is not None:
                    removals.setdefault(id(group), []).append(id(handler))
        if removals:
            removed += sum(len(ids) for ids in removals.values())
            _drop_handlers(groups, removals)
            if not groups:
                del hooks[event]
    if removed and not hooks:
        del data["hooks"]
    return [f"removed {removed} agentctx hook handler{plural_s(removed)}"] if removed else []
