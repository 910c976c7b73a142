"""The event loop stays free: every async entry runs on anyio's runner, and no coroutine blocks.

Read from the source (the AST of every module of ``src/agentctx``), so a regression fails here
whether or not a test happens to run the code path:

* no coroutine calls a blocking file or process function itself (:data:`DIRECT`: ``open``,
  ``os.stat``/``os.replace``/..., ``subprocess``, ``shutil``, ``time.sleep``, a path's
  ``read_text``/``write_text``/...): it awaits ``anyio.Path``, ``anyio.run_process`` or hands a
  function to ``anyio.to_thread.run_sync``;
* no coroutine reaches, through the package's own synchronous functions, a subprocess, a durable
  write (:func:`agentctx.core.files.write_atomic` and what it is made of: ``os.replace``,
  ``os.fsync``), ``shutil.rmtree`` or ``time.sleep`` (:data:`THROUGH`): the slow ones, which a
  helper would hide.

The synchronous hook path (:mod:`agentctx.hooks`, stdlib only) has no coroutine and is not read.
"""

from __future__ import annotations

import ast
import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

import agentctx
from agentctx import cli

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pytest

SRC = Path(agentctx.__file__).parent
#: ``os`` functions that touch the file system.
OS_FILES = frozenset(
    [
        "open",
        "read",
        "write",
        "stat",
        "lstat",
        "fstat",
        "unlink",
        "remove",
        "replace",
        "rename",
        "makedirs",
        "mkdir",
        "listdir",
        "scandir",
        "walk",
        "fsync",
        "chmod",
        "rmdir",
        "utime",
        "symlink",
        "readlink",
        "truncate",
    ]
)
OS_PATH = frozenset(
    ["exists", "lexists", "isfile", "isdir", "islink", "getsize", "getmtime", "realpath"]
)
#: Methods of ``pathlib.Path`` (and importlib resources) that read or write files.
PATH_METHODS = frozenset(
    [
        "read_text",
        "write_text",
        "read_bytes",
        "write_bytes",
        "iterdir",
        "rglob",
        "glob",
        "mkdir",
        "touch",
        "unlink",
        "symlink_to",
    ]
)
#: The slow calls no coroutine may reach even through the package's synchronous helpers.
THROUGH = ("subprocess.", "shutil.rmtree", "os.replace", "os.fsync", "os.system", "time.sleep")


def direct(call: ast.Call) -> str | None:
    """The blocking function ``call`` calls, by name, or None."""
    func = call.func
    if isinstance(func, ast.Name):
        return "open" if func.id == "open" else None
    if not isinstance(func, ast.Attribute):
        return None
    base = ast.unparse(func.value)
    if base == "os" and (func.attr in OS_FILES or func.attr in ("system", "popen")):
        return f"os.{func.attr}"
    if base == "os.path" and func.attr in OS_PATH:
        return f"os.path.{func.attr}"
    if base == "subprocess" or (base == "shutil" and func.attr != "which"):
        return f"{base}.{func.attr}"
    if base == "time" and func.attr == "sleep":
        return "time.sleep"
    if func.attr in PATH_METHODS and not base.startswith("anyio"):
        return f"{base}.{func.attr}"
    return None


def calls_in(function: ast.AST) -> Iterator[ast.Call]:
    """The calls ``function``'s own body makes when it runs, awaited ones left out (an awaited
    call is a coroutine's, or ``anyio.Path``'s); nested functions and lambdas are not entered (a
    function handed to ``to_thread.run_sync`` runs in a worker thread)."""
    awaited: set[int] = set()
    found: list[ast.Call] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Await):
            awaited.add(id(node.value))
        if isinstance(node, ast.Call):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    yield from (call for call in found if id(call) not in awaited)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    names: dict[str, str] = field(default_factory=dict)  # a local name -> what it imports


@dataclass
class Package:
    """The package's modules and synchronous functions, and which of those reach a slow call."""

    modules: dict[str, Module]
    functions: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, Module, str | None]]
    slow: dict[str, str] = field(default_factory=dict)  # function -> the slow call it reaches

    def target(self, name: str, hops: int = 4) -> str | None:
        """The function ``name`` (a dotted path) is, following re-exports."""
        if name in self.functions:
            return name
        owner, _, attr = name.rpartition(".")
        if hops and owner in self.modules and attr in self.modules[owner].names:
            return self.target(self.modules[owner].names[attr], hops - 1)
        return None

    def resolve(self, call: ast.Call, module: Module, cls: str | None) -> str | None:
        """The package function ``call`` calls, when the source says which."""
        func = call.func
        if isinstance(func, ast.Name):
            local = f"{module.name}.{func.id}"
            if local in self.functions:
                return local
            imported = module.names.get(func.id)
            return self.target(imported) if imported else None
        if not isinstance(func, ast.Attribute):
            return None
        if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") and cls:
            return self.target(f"{module.name}.{cls}.{func.attr}")
        head, _, rest = ast.unparse(func.value).partition(".")
        if head in module.names:
            return self.target(".".join(filter(None, (module.names[head], rest, func.attr))))
        return None


def read_package() -> Package:
    modules: dict[str, Module] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["agentctx", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        module = Module(".".join(parts), path, ast.parse(path.read_text(encoding="utf-8")))
        modules[module.name] = module
        package = module.name if path.name == "__init__.py" else module.name.rpartition(".")[0]
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("agentctx"):
                        local = alias.asname or alias.name.split(".")[0]
                        module.names[local] = alias.name if alias.asname else "agentctx"
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                if base.startswith("agentctx"):
                    for alias in node.names:
                        module.names[alias.asname or alias.name] = f"{base}.{alias.name}"
    functions: dict[str, tuple[Any, Module, str | None]] = {}
    for module in modules.values():
        for node in module.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[f"{module.name}.{node.name}"] = (node, module, None)
            elif isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        functions[f"{module.name}.{node.name}.{sub.name}"] = (
                            sub,
                            module,
                            node.name,
                        )
    found = Package(modules, functions)
    sync = {q: v for q, v in functions.items() if isinstance(v[0], ast.FunctionDef)}
    for name, (node, _, _) in sync.items():
        for call in calls_in(node):
            what = direct(call)
            if what and what.startswith(THROUGH):
                found.slow[name] = what
    changed = True
    while changed:  # a function that calls a slow function is slow
        changed = False
        for name, (node, module, cls) in sync.items():
            if name in found.slow:
                continue
            for call in calls_in(node):
                callee = found.resolve(call, module, cls)
                if callee in found.slow:
                    found.slow[name] = f"{callee.rpartition('.')[2]} -> {found.slow[callee]}"
                    changed = True
                    break
    return found


def coroutines(package: Package) -> Iterator[tuple[ast.AsyncFunctionDef, Module, str | None]]:
    """Every ``async def`` of the package, nested ones too, with its class (a method's)."""
    for module in package.modules.values():
        owners = {
            id(sub): node.name
            for node in module.tree.body
            if isinstance(node, ast.ClassDef)
            for sub in node.body
        }
        for node in ast.walk(module.tree):
            if isinstance(node, ast.AsyncFunctionDef):
                yield node, module, owners.get(id(node))


def offences() -> list[str]:
    package = read_package()
    found = []
    for function, module, cls in coroutines(package):
        where = f"{module.path.relative_to(SRC)}:{{}} {function.name}"
        for call in calls_in(function):
            callee = package.resolve(call, module, cls)
            what = direct(call) or (callee and package.slow.get(callee))
            if what:
                found.append(f"{where.format(call.lineno)}: {ast.unparse(call.func)} ({what})")
    return sorted(found)


def test_no_coroutine_blocks_the_event_loop() -> None:
    assert offences() == []


def test_the_check_sees_a_blocking_call_directly_and_through_a_helper(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The AST check finds what it exists for (a file write, a subprocess behind two helpers)."""
    package = tmp_path / "agentctx"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "helpers.py").write_text(
        "import subprocess\n\n"
        "def run_git():\n    subprocess.run(['git'])\n\n"
        "def outer():\n    run_git()\n"
    )
    (package / "command.py").write_text(
        "import anyio\nfrom agentctx.core import helpers\n\n"
        "async def main(path):\n"
        "    await anyio.to_thread.run_sync(helpers.outer)\n"  # fine: in a worker thread
        "    await anyio.Path(path).read_text()\n"  # fine: anyio's path
        "    open(path).read()\n"
        "    helpers.outer()\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", package)
    assert offences() == [
        "command.py:7 main: open (open)",
        "command.py:8 main: helpers.outer (run_git -> subprocess.run)",
    ]


def test_the_cli_runs_async_commands_with_anyio(monkeypatch: pytest.MonkeyPatch) -> None:
    """An async command (``agentctx config set``, as a detached ``agentctx worker …`` is) runs under
    ``anyio.run``, never ``asyncio.run`` (cyclopts' own default)."""
    runs: list[str] = []
    real_run = anyio.run

    def anyio_run(func: Any, *args: Any, **kwargs: Any) -> Any:
        runs.append(getattr(getattr(func, "func", func), "__name__", ""))
        return real_run(func, *args, **kwargs)

    def asyncio_run(main: Any, *_args: Any, **_kwargs: Any) -> Any:
        main.close()
        raise AssertionError("asyncio.run was called")

    monkeypatch.setattr(anyio, "run", anyio_run)
    monkeypatch.setattr(asyncio, "run", asyncio_run)
    assert cli.run(["config", "set", "llm", "off"]) == 0
    assert runs[:1] == ["config_set"]
