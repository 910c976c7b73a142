"""Task runners that wrap an ecosystem's own tools: ``make``, ``nox`` and ``tox``.

Their commands are ranked first in each fact. A Makefile's rule names are read line by line, a
noxfile's sessions from its syntax tree (``ast``, nothing is run), tox environments from
``tox.ini``, ``tox.toml`` or ``pyproject.toml``.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Final

from agentctx.detection.readers import (
    Finding,
    JSONObject,
    exists,
    read_ini,
    read_text,
    read_toml,
    table_at,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_MAKE_TARGETS: Final = {
    "test": "test_command",
    "check": "test_command",  # GNU convention: "make check" runs the self-tests
    "build": "build_command",
    "lint": "lint_command",
    "fmt": "format_command",
    "format": "format_command",
    "typecheck": "typecheck_command",
    "run": "run_command",
    "dev": "run_command",
}
_RULE = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?![:=])")


def make(root: Path) -> Iterator[Finding]:
    """``make <target>`` for the conventional targets the Makefile defines."""
    name = exists(root, "GNUmakefile", "makefile", "Makefile")
    text = read_text(root, name) if name else None
    if name is None or text is None:
        return
    targets: set[str] = set()
    for line in text.splitlines():
        match = _RULE.match(line)
        if match and "$" not in match.group(1):
            targets.update(match.group(1).split())
    for target, key in _MAKE_TARGETS.items():
        if target in targets:
            yield Finding(key, f"make {target}", f"{name} target {target!r}", rank=0)


_NOX_SESSIONS: Final = (
    ("test_command", ("tests", "test", "pytest", "unit")),
    ("lint_command", ("lint", "linters", "ruff", "style")),
    ("typecheck_command", ("typecheck", "type_check", "mypy", "pyright", "types")),
    ("format_command", ("format", "fmt", "black")),
    ("build_command", ("build",)),
)


def nox(root: Path) -> Iterator[Finding]:
    """``nox -s <session>`` for the noxfile's test, lint, typecheck, format, build sessions."""
    text = read_text(root, "noxfile.py")
    if text is None:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    sessions: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            sessions += [name for d in node.decorator_list if (name := _nox_session(d, node.name))]
    for key, candidates in _NOX_SESSIONS:
        for candidate in candidates:
            if candidate in sessions:
                yield Finding(key, f"nox -s {candidate}", f"noxfile.py session {candidate!r}", 0)
                break


def _nox_session(decorator: ast.expr, function: str) -> str | None:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    is_session = (
        isinstance(target, ast.Attribute)
        and target.attr == "session"
        and isinstance(target.value, ast.Name)
        and target.value.id == "nox"
    ) or (isinstance(target, ast.Name) and target.id == "session")
    if not is_session:
        return None
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            value = keyword.value
            if keyword.arg == "name" and isinstance(value, ast.Constant):
                return value.value if isinstance(value.value, str) else None
    return function


def tox(root: Path, data: JSONObject) -> Iterator[Finding]:
    """``tox``, and its lint and type-check environments (tox.ini, pyproject or tox.toml)."""
    ini = read_ini(root, "tox.ini")
    if ini is not None and (ini.has_section("tox") or ini.has_section("testenv")):
        source, envs = "tox.ini", [s.removeprefix("testenv:") for s in ini.sections()]
    elif table_at(data, "tool", "tox"):
        source, envs = "pyproject.toml [tool.tox]", list(table_at(data, "tool", "tox", "env"))
    elif (toml := read_toml(root, "tox.toml")) is not None:
        source, envs = "tox.toml", list(table_at(toml, "env"))
    else:
        return
    yield Finding("test_command", "tox", source, rank=0)
    for key, names in (("lint_command", ("lint", "ruff")), ("typecheck_command", ("type", "mypy"))):
        for name in names:
            if name in envs:
                yield Finding(key, f"tox -e {name}", f"{source} env {name!r}", rank=0)
                break
