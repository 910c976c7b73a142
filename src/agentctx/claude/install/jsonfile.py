"""Editing Claude Code's JSON files: read, change in memory, write back only what changed.

:func:`edit` reads a file (an empty one counts as ``{}``; invalid JSON, a non-object top level or
an unreadable file raise :class:`~agentctx.core.errors.ConfigError` and leave it untouched), lets a
mutation change the parsed object, and writes only when the content changed: atomically (a
temporary file in the same folder, fsynced, then renamed: :func:`agentctx.core.files.write_atomic`),
keeping the file's mode, and starting over when the file changed on disk meanwhile. A user file
(``root`` None) that is a symlink keeps its link and its target is written (dotfiles repositories);
a file inside a project (``root`` given) is refused when it or a folder on the way is a symlink.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentctx.core import files
from agentctx.core.errors import ConfigError, UnsafePathError

if TYPE_CHECKING:
    from collections.abc import Callable

Action = Literal["created", "updated", "unchanged", "removed"]
JSONObject = dict[str, Any]

_EDIT_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Change:
    """What one install/uninstall step did to one file."""

    path: Path
    action: Action
    description: str
    #: One line each: what a repair dropped or replaced (a repository's hostile MCP entry, say).
    details: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.action}: {self.path} ({self.description})", *self.details]
        return "\n  ".join(lines)


def kind(value: object) -> str:
    """The JSON name of a parsed value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def member_object(data: JSONObject, name: str, path: Path) -> JSONObject | None:
    """The object ``data[name]``, None when absent; ConfigError when it is not an object."""
    value = data.get(name)
    if name in data and not isinstance(value, dict):
        raise ConfigError(
            f"{path}: '{name}' is a JSON {kind(value)}, not an object; fix it, then run again"
        )
    return value


def plural_s(n: int) -> str:
    """The plural suffix: "s" unless ``n`` is 1."""
    return "" if n == 1 else "s"


def same(a: object, b: object) -> bool:
    """JSON equality that tells ``true`` from ``1`` and sees key order."""
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


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


#: Claude Code's JSON files are kilobytes (``~/.claude.json`` can reach megabytes with history).
MAX_FILE_BYTES = 256 * 1024 * 1024


def load(
    path: Path, root: Path | None = None
) -> tuple[JSONObject | None, tuple[int, int, int] | None]:
    """The parsed top-level object (None when the file is missing) and the file's signature.

    ``root``: the repository the file belongs to (a project's ``.mcp.json`` or settings): only a
    regular file inside it is read (:func:`agentctx.core.files.read_inside`), else ConfigError.
    """
    signature = _signature(path)
    if signature is None:
        return None, None
    try:
        if root is not None:
            raw = files.read_inside(root, path, MAX_FILE_BYTES)
        else:
            with files.open_regular(path) as fh:  # a user file: its symlink is followed
                raw = fh.read(MAX_FILE_BYTES)
    except FileNotFoundError:
        return None, None
    except UnsafePathError as exc:
        raise ConfigError(f"{exc}; move it aside, then run again") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    try:
        text = raw.decode("utf-8-sig")
        data = json.loads(text, parse_constant=_reject_constant) if text.strip() else {}
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise ConfigError(
            f"{path}: not valid JSON ({exc}); fix or move the file aside, then run again"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level is a JSON {kind(data)}, not an object; fix it, then run again"
        )
    return data, signature


def edit(
    path: Path,
    mutate: Callable[[JSONObject, Path], list[str]],
    *,
    create: bool,
    delete_if_empty: bool = False,
    new_mode: int | None = None,
    root: Path | None = None,
) -> Change:
    """Read, mutate in memory, and write back only if the content changed.

    ``root``: the project folder when the file lives in a repository (no symlink is followed there).
    """
    if root is not None:
        files.check_inside(root, path)
    for _ in range(_EDIT_ATTEMPTS):
        data, signature = load(path, root)
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
            if _write_atomic(path, text, expected=signature, new_mode=new_mode, root=root):
                return Change(path, "updated" if existed else "created", "; ".join(notes))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot write it ({exc.strerror or exc})") from exc
    raise ConfigError(
        f"{path}: the file kept changing while agentctx edited it; close Claude Code and run again"
    )


def _write_atomic(
    path: Path,
    text: str,
    *,
    expected: tuple[int, int, int] | None,
    new_mode: int | None,
    root: Path | None,
) -> bool:
    """Atomically replace the file (a user file's symlink target); False if it changed since read."""
    target = path if root is not None else Path(os.path.realpath(path))
    return files.write_atomic(
        target,
        text.encode("utf-8"),
        mode=new_mode,
        keep_mode=True,
        root=root,
        before_replace=lambda: _signature(target) == expected,
    )
