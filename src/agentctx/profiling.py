"""Project profile detection: the stack, package manager and commands of a repository, by rule.

``agentctx init`` (and a CwdChanged refresh) stores what :func:`detect` finds as keyed ``profile``
records, one per :class:`ProfileFact` key, so a newer detection supersedes the older one by key.

Design notes:

- Rules only, no model and no subprocess: the manifest files at the repository root are parsed
  (``Makefile``, ``pyproject.toml`` with the nox/tox/pytest/ruff/mypy files beside it,
  ``package.json`` with its lock files, ``Cargo.toml``, ``go.mod``), nothing is executed.
- A repository may hold several ecosystems; every candidate is kept and each fact lists them, task
  runners that wrap the others (``make``, ``nox``, ``tox``) first, each with where it came from.
- Never raises on a malformed, unreadable or oversized file (it is skipped) or on values of the
  wrong kind. The same tree always gives the same facts in the same order.
- Standard library only (``tomllib``, ``json``, ``ast`` for the noxfile, ``configparser``).
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

__all__ = ["FACT_TITLES", "ProfileFact", "detect"]

#: fact key -> title, in the order :func:`detect` returns facts
FACT_TITLES: Final[dict[str, str]] = {
    "languages": "Languages",
    "stack": "Stack",
    "package_manager": "Package manager",
    "test_command": "Test command",
    "build_command": "Build command",
    "lint_command": "Lint command",
    "format_command": "Format command",
    "typecheck_command": "Type-check command",
    "run_command": "Run command",
    "entry_points": "Entry points",
}

TITLE_MAX: Final = 120  # the record limits of schema.py, repeated to keep this module stdlib-only
BODY_MAX: Final = 2000
MAX_FILE_BYTES: Final = 1_000_000
_VALUE_MAX = 160
_LIST_MAX = 10

JSONObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProfileFact:
    """One keyed fact about a project: ``key`` (e.g. ``test_command``), a title and a body."""

    key: str
    title: str
    body: str


@dataclass(frozen=True, slots=True)
class _Finding:
    key: str
    value: str
    source: str
    rank: int = 1  # 0: a task runner wrapping the ecosystem's own tools, listed first


def detect(root: Path) -> list[ProfileFact]:
    """The profile facts of the repository at ``root`` (empty when nothing is recognized)."""
    findings: list[_Finding] = []
    for detector in (_make, _python, _node, _rust, _go):
        findings.extend(detector(root))
    return _combine(findings)


def _combine(findings: list[_Finding]) -> list[ProfileFact]:
    facts = []
    for key, title in FACT_TITLES.items():
        merged: dict[str, list[str]] = {}  # value -> sources, first-seen order after ranking
        for finding in sorted((f for f in findings if f.key == key), key=lambda f: f.rank):
            sources = merged.setdefault(finding.value, [])
            if finding.source not in sources:
                sources.append(finding.source)
        if merged:
            body = "; ".join(f"{value} (from {' / '.join(src)})" for value, src in merged.items())
            facts.append(ProfileFact(key, title[:TITLE_MAX], _clip(body, BODY_MAX)))
    return facts


# --------------------------------------------------------------------------- reading, leniently


def _read_text(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def _read_toml(path: Path) -> JSONObject | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError):  # TOMLDecodeError is a ValueError
        return None


def _read_json(path: Path) -> JSONObject | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _read_ini(path: Path) -> configparser.ConfigParser | None:
    text = _read_text(path)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        return None
    return parser


def _exists(root: Path, *names: str) -> str | None:
    """The first of ``names`` that is a file under ``root``."""
    for name in names:
        try:
            if (root / name).is_file():
                return name
        except OSError:
            continue
    return None


def _glob(root: Path, pattern: str) -> list[str]:
    try:
        return sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file())
    except OSError:
        return []


def _table(data: object, *keys: str) -> JSONObject:
    """The nested table at ``keys``, or ``{}`` when any level is missing or not a table."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _string(data: JSONObject, key: str) -> str | None:
    value = data.get(key)
    if isinstance(value, str) and value.strip():
        return _clean(value)
    return None


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [_clean(v) for v in value if isinstance(v, str) and v.strip()]


def _clean(text: str, limit: int = _VALUE_MAX) -> str:
    """One line, bounded: values come from files we do not control."""
    return _clip(" ".join(text.split()), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _listing(names: Iterable[str]) -> str:
    names = list(dict.fromkeys(names))
    shown = ", ".join(names[:_LIST_MAX])
    return shown + (f" and {len(names) - _LIST_MAX} more" if len(names) > _LIST_MAX else "")


# --------------------------------------------------------------------------- Makefile

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


def _make(root: Path) -> Iterator[_Finding]:
    name = _exists(root, "GNUmakefile", "makefile", "Makefile")
    text = _read_text(root / name) if name else None
    if name is None or text is None:
        return
    targets: set[str] = set()
    for line in text.splitlines():
        match = _RULE.match(line)
        if match and "$" not in match.group(1):
            targets.update(match.group(1).split())
    for target, key in _MAKE_TARGETS.items():
        if target in targets:
            yield _Finding(key, f"make {target}", f"{name} target {target!r}", rank=0)


# --------------------------------------------------------------------------- Python

_BACKENDS: Final = {
    "hatchling.build": "hatchling",
    "poetry.core.masonry.api": "poetry-core",
    "setuptools.build_meta": "setuptools",
    "setuptools.build_meta:__legacy__": "setuptools",
    "pdm.backend": "pdm-backend",
    "flit_core.buildapi": "flit",
    "maturin": "maturin",
    "uv_build": "uv_build",
    "scikit_build_core.build": "scikit-build-core",
    "mesonpy": "meson-python",
}
_PY_LOCKS: Final = (
    ("uv.lock", "uv"),
    ("poetry.lock", "poetry"),
    ("pdm.lock", "pdm"),
    ("Pipfile.lock", "pipenv"),
)
_PY_RUN: Final = {
    "uv": "uv run ",
    "poetry": "poetry run ",
    "pdm": "pdm run ",
    "pipenv": "pipenv run ",
}
_PY_BUILD: Final = {
    "uv": "uv build",
    "poetry": "poetry build",
    "pdm": "pdm build",
    "hatch": "hatch build",
}
_NOX_SESSIONS: Final = (
    ("test_command", ("tests", "test", "pytest", "unit")),
    ("lint_command", ("lint", "linters", "ruff", "style")),
    ("typecheck_command", ("typecheck", "type_check", "mypy", "pyright", "types")),
    ("format_command", ("format", "fmt", "black")),
    ("build_command", ("build",)),
)
_DEP_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _python(root: Path) -> Iterator[_Finding]:
    pyproject = _read_toml(root / "pyproject.toml")
    signals = [
        n for n in ("setup.py", "setup.cfg", "Pipfile", "noxfile.py", "tox.ini") if _exists(root, n)
    ]
    requirements = _glob(root, "requirements*.txt")
    if pyproject is None and not signals and not requirements:
        return
    data = pyproject or {}
    project, tool = _table(data, "project"), _table(data, "tool")
    poetry = _table(tool, "poetry")
    manifest = "pyproject.toml" if pyproject is not None else (signals or requirements)[0]
    yield _Finding("languages", "Python", manifest)

    manager, manager_source = _python_manager(root, tool, requirements)
    if manager:
        yield _Finding("package_manager", manager, manager_source)
    run = _PY_RUN.get(manager or "", "")

    yield from _python_stack(data, project, poetry)
    yield from _nox(root)
    yield from _tox(root, data)
    yield from _python_tools(root, data, tool, run)

    backend = _string(_table(data, "build-system"), "build-backend")
    if backend or _exists(root, "setup.py"):
        source = "pyproject.toml [build-system]" if backend else "setup.py"
        yield _Finding("build_command", _PY_BUILD.get(manager or "", "python -m build"), source)

    scripts = [("project.scripts", _table(project, "scripts"))]
    scripts += [("project.gui-scripts", _table(project, "gui-scripts"))]
    scripts += [("tool.poetry.scripts", _table(poetry, "scripts"))]
    for section, table in scripts:
        for name, target in table.items():
            if isinstance(target, dict):  # poetry's {reference = "...", type = "console"}
                target = target.get("reference")
            if isinstance(target, str) and target.strip():
                value = f"{_clean(name, 60)} = {_clean(target)}"
                yield _Finding("entry_points", value, f"pyproject.toml [{section}]")
    for main in [*_glob(root, "src/*/__main__.py"), *_glob(root, "*/__main__.py")]:
        package = main.split("/")[-2]
        yield _Finding("entry_points", f"python -m {package}", main)


def _python_manager(
    root: Path, tool: JSONObject, requirements: list[str]
) -> tuple[str | None, str]:
    for lock, manager in _PY_LOCKS:
        if _exists(root, lock):
            return manager, lock
    for section in ("poetry", "pdm", "uv"):
        if isinstance(tool.get(section), dict):
            return section, f"pyproject.toml [tool.{section}]"
    if isinstance(_table(tool, "hatch").get("envs"), dict):
        return "hatch", "pyproject.toml [tool.hatch.envs]"
    if _exists(root, "Pipfile"):
        return "pipenv", "Pipfile"
    if requirements:
        return "pip", requirements[0]
    return None, ""


def _dependency_names(project: JSONObject, poetry: JSONObject) -> list[str]:
    names = []
    for spec in _strings(project.get("dependencies")):
        match = _DEP_NAME.match(spec)
        if match:
            names.append(match.group(1))
    names += [n for n in _table(poetry, "dependencies") if n.lower() != "python"]
    return names


def _dev_dependency_names(data: JSONObject, project: JSONObject, poetry: JSONObject) -> set[str]:
    """Lower-cased names from dependency groups, optional dependencies and poetry groups."""
    specs: list[str] = []
    for table in (_table(data, "dependency-groups"), _table(project, "optional-dependencies")):
        for group in table.values():
            specs += _strings(group)
    names = {m.group(1).lower() for s in specs if (m := _DEP_NAME.match(s))}
    for group in _table(poetry, "group").values():
        names.update(n.lower() for n in _table(group, "dependencies"))
    names.update(n.lower() for n in _table(poetry, "dev-dependencies"))
    return names


def _python_stack(data: JSONObject, project: JSONObject, poetry: JSONObject) -> Iterator[_Finding]:
    name = _string(project, "name") or _string(poetry, "name")
    version = _string(project, "version") or _string(poetry, "version")
    requires = _string(project, "requires-python")
    poetry_python = _table(poetry, "dependencies").get("python")
    if requires is None and isinstance(poetry_python, str):
        requires = _clean(poetry_python)
    backend = _string(_table(data, "build-system"), "build-backend")
    if not (name or requires or backend):
        return
    parts = [" ".join(filter(None, ["Python package", name, version]))]
    if requires:
        parts.append(f"requires Python {requires}")
    if backend:
        parts.append(f"built with {_BACKENDS.get(backend, backend)}")
    stack = ", ".join(parts)
    dependencies = _dependency_names(project, poetry)
    if dependencies:
        stack += f"; dependencies: {_listing(dependencies)}"
    yield _Finding("stack", stack, "pyproject.toml")


def _nox(root: Path) -> Iterator[_Finding]:
    text = _read_text(root / "noxfile.py")
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
                yield _Finding(key, f"nox -s {candidate}", f"noxfile.py session {candidate!r}", 0)
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


def _tox(root: Path, data: JSONObject) -> Iterator[_Finding]:
    ini = _read_ini(root / "tox.ini")
    if ini is not None and (ini.has_section("tox") or ini.has_section("testenv")):
        source, envs = "tox.ini", [s.removeprefix("testenv:") for s in ini.sections()]
    elif _table(data, "tool", "tox"):
        source, envs = "pyproject.toml [tool.tox]", list(_table(data, "tool", "tox", "env"))
    elif (toml := _read_toml(root / "tox.toml")) is not None:
        source, envs = "tox.toml", list(_table(toml, "env"))
    else:
        return
    yield _Finding("test_command", "tox", source, rank=0)
    for key, names in (("lint_command", ("lint", "ruff")), ("typecheck_command", ("type", "mypy"))):
        for name in names:
            if name in envs:
                yield _Finding(key, f"tox -e {name}", f"{source} env {name!r}", rank=0)
                break


def _python_tools(root: Path, data: JSONObject, tool: JSONObject, run: str) -> Iterator[_Finding]:
    project, poetry = _table(data, "project"), _table(tool, "poetry")
    setup_cfg = _read_ini(root / "setup.cfg")
    tox_ini = _read_ini(root / "tox.ini")

    def ini_has(parser: configparser.ConfigParser | None, section: str) -> bool:
        return parser is not None and parser.has_section(section)

    pytest_source = None
    if "pytest" in tool:
        section = "ini_options" if "ini_options" in _table(tool, "pytest") else None
        pytest_source = f"pyproject.toml [tool.pytest{'.' + section if section else ''}]"
    elif found := _exists(root, "pytest.ini", "conftest.py", "tests/conftest.py"):
        pytest_source = found
    elif ini_has(setup_cfg, "tool:pytest"):
        pytest_source = "setup.cfg [tool:pytest]"
    elif ini_has(tox_ini, "pytest"):
        pytest_source = "tox.ini [pytest]"
    elif "pytest" in _dev_dependency_names(data, project, poetry):
        pytest_source = "pyproject.toml dependencies"
    if pytest_source:
        yield _Finding("test_command", f"{run}pytest", pytest_source)

    ruff = (
        "pyproject.toml [tool.ruff]" if "ruff" in tool else _exists(root, "ruff.toml", ".ruff.toml")
    )
    if ruff:
        yield _Finding("lint_command", f"{run}ruff check .", ruff)
        yield _Finding("format_command", f"{run}ruff format .", ruff)
    flake8 = _exists(root, ".flake8") or (
        "setup.cfg [flake8]" if ini_has(setup_cfg, "flake8") else None
    )
    if flake8:
        yield _Finding("lint_command", f"{run}flake8", flake8)
    if "black" in tool:
        yield _Finding("format_command", f"{run}black .", "pyproject.toml [tool.black]")

    mypy_files = bool(_table(tool, "mypy").get("files"))
    mypy = (
        "pyproject.toml [tool.mypy]" if "mypy" in tool else _exists(root, "mypy.ini", ".mypy.ini")
    )
    if mypy is None and ini_has(setup_cfg, "mypy"):
        mypy = "setup.cfg [mypy]"
    if mypy:
        yield _Finding("typecheck_command", f"{run}mypy" + ("" if mypy_files else " ."), mypy)
    pyright = (
        "pyproject.toml [tool.pyright]"
        if "pyright" in tool
        else _exists(root, "pyrightconfig.json")
    )
    if pyright:
        yield _Finding("typecheck_command", f"{run}pyright", pyright)


# --------------------------------------------------------------------------- Node

_NODE_LOCKS: Final = (
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lock", "bun"),
    ("bun.lockb", "bun"),
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
)
_NODE_SCRIPTS: Final = {
    "test": "test_command",
    "build": "build_command",
    "lint": "lint_command",
    "format": "format_command",
    "fmt": "format_command",
    "typecheck": "typecheck_command",
    "type-check": "typecheck_command",
    "dev": "run_command",
    "start": "run_command",
}


def _node_run(manager: str, script: str) -> str:
    if manager == "npm":
        return f"npm {script}" if script in ("test", "start") else f"npm run {script}"
    if manager == "yarn":
        return f"yarn {script}"
    if manager == "pnpm" and script == "test":
        return "pnpm test"
    return f"{manager} run {script}"  # "bun test" would run bun's own runner, not the script


def _node(root: Path) -> Iterator[_Finding]:
    package = _read_json(root / "package.json")
    if package is None:
        return
    manager, source = "npm", "package.json, no lock file"
    declared = _string(package, "packageManager")
    lock = next(((f, m) for f, m in _NODE_LOCKS if _exists(root, f)), None)
    if declared and declared.split("@")[0] in ("npm", "pnpm", "yarn", "bun"):
        manager, source = declared.split("@")[0], f'package.json "packageManager": {declared}'
    elif lock:
        manager, source = lock[1], lock[0]
    yield _Finding("package_manager", manager, source)

    dependencies, dev = _table(package, "dependencies"), _table(package, "devDependencies")
    if _exists(root, "tsconfig.json"):
        yield _Finding("languages", "TypeScript", "tsconfig.json")
    elif "typescript" in dependencies or "typescript" in dev:
        yield _Finding("languages", "TypeScript", "package.json dependencies")
    else:
        yield _Finding("languages", "JavaScript", "package.json")

    name = _string(package, "name")
    parts = [" ".join(filter(None, ["Node package", name, _string(package, "version")]))]
    if node := _string(_table(package, "engines"), "node"):
        parts.append(f"Node {node}")
    if _string(package, "type") == "module":
        parts.append("ES modules")
    workspaces = package.get("workspaces")
    if isinstance(workspaces, dict):  # yarn's {"packages": [...], "nohoist": [...]}
        workspaces = workspaces.get("packages")
    if members := _strings(workspaces):
        parts.append(f"workspaces {_listing(members)}")
    stack = ", ".join(parts)
    if dependencies:
        stack += f"; dependencies: {_listing(dependencies)}"
    if dev:
        stack += f"; dev dependencies: {_listing(dev)}"
    yield _Finding("stack", stack, "package.json")

    scripts = _table(package, "scripts")
    for script, key in _NODE_SCRIPTS.items():
        body = scripts.get(script)
        if not isinstance(body, str) or not body.strip() or "no test specified" in body:
            continue
        command = _node_run(manager, script)
        yield _Finding(key, command, f"package.json scripts.{script}: {_clean(body, 100)}")

    if main := _string(package, "main"):
        yield _Finding("entry_points", f"main {main}", "package.json main")
    bins = package.get("bin")
    if isinstance(bins, str) and name:  # "bin": "./cli.js" names the command after the package
        bins = {name: bins}
    for command, target in (bins if isinstance(bins, dict) else {}).items():
        if isinstance(target, str) and target.strip():
            yield _Finding(
                "entry_points", f"bin {_clean(command, 60)} = {_clean(target)}", "package.json bin"
            )


# --------------------------------------------------------------------------- Rust


def _rust(root: Path) -> Iterator[_Finding]:
    cargo = _read_toml(root / "Cargo.toml")
    if cargo is None:
        return
    package, workspace = _table(cargo, "package"), _table(cargo, "workspace")
    is_workspace = isinstance(cargo.get("workspace"), dict)
    yield _Finding("languages", "Rust", "Cargo.toml")
    yield _Finding("package_manager", "cargo", "Cargo.toml")

    name = _string(package, "name")
    parts = []
    if package:
        parts.append(" ".join(filter(None, ["Rust crate", name, _string(package, "version")])))
    elif is_workspace:
        parts.append("Rust workspace")
    if edition := _string(package, "edition"):
        parts.append(f"edition {edition}")
    if members := _strings(workspace.get("members")):
        parts.append(f"workspace members {_listing(members)}")
    dependencies = list(_table(cargo, "dependencies")) or list(_table(workspace, "dependencies"))
    if parts:
        stack = ", ".join(parts) + (
            f"; dependencies: {_listing(dependencies)}" if dependencies else ""
        )
        yield _Finding("stack", stack, "Cargo.toml")

    source = "Cargo.toml [workspace]" if is_workspace else "Cargo.toml"
    scope = " --workspace" if is_workspace else ""
    yield _Finding("test_command", f"cargo test{scope}", source)
    yield _Finding("build_command", f"cargo build{scope}", source)
    yield _Finding("lint_command", f"cargo clippy{scope}", source)
    yield _Finding("format_command", "cargo fmt --all" if is_workspace else "cargo fmt", source)

    bins: list[tuple[str, str, str]] = []  # (name, path, source)
    raw_bins = cargo.get("bin")
    for entry in raw_bins if isinstance(raw_bins, list) else []:
        bin_name = _string(entry, "name") if isinstance(entry, dict) else None
        if bin_name and isinstance(entry, dict):
            path = _string(entry, "path") or f"src/bin/{bin_name}.rs"
            bins.append((bin_name, path, "Cargo.toml [[bin]]"))
    if not bins and name and _exists(root, "src/main.rs"):
        bins.append((name, "src/main.rs", "src/main.rs"))
    for bin_name, path, bin_source in bins:
        yield _Finding("entry_points", f"bin {bin_name} ({path})", bin_source)
    if package and name and _exists(root, "src/lib.rs"):
        yield _Finding("entry_points", f"lib {name} (src/lib.rs)", "src/lib.rs")
    if len(bins) == 1:
        yield _Finding("run_command", "cargo run", bins[0][2])
    for bin_name, _, bin_source in bins if len(bins) > 1 else []:
        yield _Finding("run_command", f"cargo run --bin {bin_name}", bin_source)


# --------------------------------------------------------------------------- Go

_GO_MAIN = re.compile(r"^package\s+main\b", re.MULTILINE)


def _go(root: Path) -> Iterator[_Finding]:
    text = _read_text(root / "go.mod")
    if text is None:
        return
    module = version = None
    requires: list[str] = []
    in_require = False
    for raw in text.splitlines():
        indirect = "// indirect" in raw
        words = raw.split("//", 1)[0].split()
        if not words:
            continue
        if in_require:
            if words[0] == ")":
                in_require = False
            elif not indirect:
                requires.append(words[0])
        elif words[0] == "module" and len(words) > 1:
            module = _clean(words[1].strip('"`'))
        elif words[0] == "go" and len(words) > 1:
            version = _clean(words[1])
        elif words[0] == "require" and len(words) > 1:
            if words[1] == "(":
                in_require = True
            elif not indirect:
                requires.append(words[1])
    if module is None:
        return  # not a go.mod we can read
    yield _Finding("languages", "Go", "go.mod")
    yield _Finding("package_manager", "Go modules", "go.mod")
    stack = f"Go module {module}" + (f", go {version}" if version else "")
    if requires:
        stack += f"; dependencies: {_listing(_clean(r) for r in requires)}"
    yield _Finding("stack", stack, "go.mod")
    yield _Finding("test_command", "go test ./...", "go.mod")
    yield _Finding("build_command", "go build ./...", "go.mod")
    linter = _exists(root, ".golangci.yml", ".golangci.yaml", ".golangci.toml", ".golangci.json")
    if linter:
        yield _Finding("lint_command", "golangci-lint run", linter)
    yield _Finding("lint_command", "go vet ./...", "go.mod")
    yield _Finding("format_command", "gofmt -l -w .", "go.mod")

    mains = []
    for path in ["main.go", *_glob(root, "cmd/*/main.go")]:
        source = _read_text(root / path)
        if source is not None and _GO_MAIN.search(source):
            mains.append(path)
    for path in mains:
        package_dir = "./" + path.rpartition("/")[0] if "/" in path else "."
        yield _Finding("entry_points", f"main package {package_dir}", path)
    if len(mains) == 1:
        package_dir = "./" + mains[0].rpartition("/")[0] if "/" in mains[0] else "."
        yield _Finding("run_command", f"go run {package_dir}", mains[0])
