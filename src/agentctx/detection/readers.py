"""Lenient readers of a repository's manifest files, shared by the profile detectors.

Nothing here raises on a malformed, unreadable or oversized file (it reads as None) or on values of
the wrong kind (:func:`table_at`, :func:`string`, :func:`strings`), and every value taken from a
file is one bounded line (:func:`clean`): the files are not ours.
"""

from __future__ import annotations

import configparser
import json
import os
import stat
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agentctx.core import files
from agentctx.core.errors import AgentctxError

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

MAX_FILE_BYTES: Final = 1_000_000
_VALUE_MAX = 160
_LIST_MAX = 10

JSONObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Finding:
    """What one detector found: a fact ``key``, its ``value`` and the ``source`` that says so."""

    key: str
    value: str
    source: str
    rank: int = 1  # 0: a task runner wrapping the ecosystem's own tools, listed first


def read_text(root: Path, name: str | Path) -> str | None:
    """The text of the file ``name`` of the repository ``root``, or None when it is missing,
    unreadable, not UTF-8, too large, or not a regular file inside the repository (a FIFO:
    :func:`agentctx.core.files.read_inside`), or reached through a symlink, even one that stays
    inside (:func:`_direct`)."""
    try:
        if not _direct(root, name):
            return None
        raw = files.read_inside(root, root / name, MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            return None
        return raw.decode("utf-8")
    except (OSError, ValueError, AgentctxError):  # UnicodeDecodeError is a ValueError
        return None


def read_toml(root: Path, name: str | Path) -> JSONObject | None:
    """The file parsed as TOML, or None (see :func:`read_text`) when it does not parse."""
    text = read_text(root, name)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError):  # TOMLDecodeError is a ValueError
        return None


def read_json(root: Path, name: str | Path) -> JSONObject | None:
    """The file's top-level JSON object, or None (see :func:`read_text`)."""
    text = read_text(root, name)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def read_ini(root: Path, name: str | Path) -> configparser.ConfigParser | None:
    """The file parsed as INI (no interpolation), or None (see :func:`read_text`)."""
    text = read_text(root, name)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text, source=str(root / name))
    except configparser.Error:
        return None
    return parser


def _direct(root: Path, name: str | Path) -> bool:
    """Whether ``root/name`` is a regular file reached without any symlink on the way."""
    try:
        real_root = os.path.realpath(root)
        named = os.path.normpath(os.path.join(real_root, name))
        return os.path.realpath(named) == named and stat.S_ISREG(os.lstat(named).st_mode)
    except (OSError, ValueError):
        return False


def exists(root: Path, *names: str) -> str | None:
    """The first of ``names`` that is a regular file under ``root`` (no symlink on the way)."""
    for name in names:
        if _direct(root, name):
            return name
    return None


def glob(root: Path, pattern: str) -> list[str]:
    """The regular files under ``root`` matching ``pattern`` (no symlink), relative and sorted."""
    try:
        found = [p.relative_to(root).as_posix() for p in root.glob(pattern)]
    except (OSError, ValueError):
        return []
    return sorted(name for name in found if _direct(root, name))


def table_at(data: object, *keys: str) -> JSONObject:
    """The nested table at ``keys``, or ``{}`` when any level is missing or not a table."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def string(data: JSONObject, key: str) -> str | None:
    """``data[key]`` as a clean one-line string, or None when it is not a non-blank string."""
    value = data.get(key)
    if isinstance(value, str) and value.strip():
        return clean(value)
    return None


def strings(value: object) -> list[str]:
    """The non-blank strings of a list, cleaned; ``[]`` when ``value`` is not a list."""
    if not isinstance(value, list):
        return []
    return [clean(v) for v in value if isinstance(v, str) and v.strip()]


def clean(text: str, limit: int = _VALUE_MAX) -> str:
    """One line, bounded: values come from files we do not control."""
    return clip(" ".join(text.split()), limit)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def listing(names: Iterable[str]) -> str:
    """The first names, comma-separated, and how many more there are."""
    names = list(dict.fromkeys(names))
    shown = ", ".join(names[:_LIST_MAX])
    return shown + (f" and {len(names) - _LIST_MAX} more" if len(names) > _LIST_MAX else "")
