"""Python projects: ``pyproject.toml`` (PEP 621 and poetry), setup files, requirements, lock files.

The package manager comes from the lock file or the tool tables, and prefixes the commands
(``uv run pytest``); pytest, ruff, flake8, black, mypy and pyright are found by their
configuration; nox and tox sessions come from :mod:`agentctx.detection.runners`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from agentctx.detection.readers import (
    Finding,
    JSONObject,
    clean,
    exists,
    glob,
    listing,
    read_ini,
    read_toml,
    string,
    strings,
    table_at,
)
from agentctx.detection.runners import nox, tox

if TYPE_CHECKING:
    import configparser
    from collections.abc import Iterator
    from pathlib import Path

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
_DEP_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def detect(root: Path) -> Iterator[Finding]:
    """Facts from pyproject.toml, setup and requirements files, the tools' settings."""
    pyproject = read_toml(root, "pyproject.toml")
    signals = [
        n for n in ("setup.py", "setup.cfg", "Pipfile", "noxfile.py", "tox.ini") if exists(root, n)
    ]
    requirements = glob(root, "requirements*.txt")
    if pyproject is None and not signals and not requirements:
        return
    data = pyproject or {}
    project, tool = table_at(data, "project"), table_at(data, "tool")
    poetry = table_at(tool, "poetry")
    manifest = "pyproject.toml" if pyproject is not None else (signals or requirements)[0]
    yield Finding("languages", "Python", manifest)

    manager, manager_source = _python_manager(root, tool, requirements)
    if manager:
        yield Finding("package_manager", manager, manager_source)
    run = _PY_RUN.get(manager or "", "")

    yield from _python_stack(data, project, poetry)
    yield from nox(root)
    yield from tox(root, data)
    yield from _python_tools(root, data, tool, run)

    backend = string(table_at(data, "build-system"), "build-backend")
    if backend or exists(root, "setup.py"):
        source = "pyproject.toml [build-system]" if backend else "setup.py"
        yield Finding("build_command", _PY_BUILD.get(manager or "", "python -m build"), source)

    scripts = [("project.scripts", table_at(project, "scripts"))]
    scripts += [("project.gui-scripts", table_at(project, "gui-scripts"))]
    scripts += [("tool.poetry.scripts", table_at(poetry, "scripts"))]
    for section, table in scripts:
        for name, target in table.items():
            if isinstance(target, dict):  # poetry's {reference = "...", type = "console"}
                target = target.get("reference")
            if isinstance(target, str) and target.strip():
                value = f"{clean(name, 60)} = {clean(target)}"
                yield Finding("entry_points", value, f"pyproject.toml [{section}]")
    for main in [*glob(root, "src/*/__main__.py"), *glob(root, "*/__main__.py")]:
        package = main.split("/")[-2]
        yield Finding("entry_points", f"python -m {package}", main)


def _python_manager(
    root: Path, tool: JSONObject, requirements: list[str]
) -> tuple[str | None, str]:
    for lock, manager in _PY_LOCKS:
        if exists(root, lock):
            return manager, lock
    for section in ("poetry", "pdm", "uv"):
        if isinstance(tool.get(section), dict):
            return section, f"pyproject.toml [tool.{section}]"
    if isinstance(table_at(tool, "hatch").get("envs"), dict):
        return "hatch", "pyproject.toml [tool.hatch.envs]"
    if exists(root, "Pipfile"):
        return "pipenv", "Pipfile"
    if requirements:
        return "pip", requirements[0]
    return None, ""


def _dependency_names(project: JSONObject, poetry: JSONObject) -> list[str]:
    names = []
    for spec in strings(project.get("dependencies")):
        match = _DEP_NAME.match(spec)
        if match:
            names.append(match.group(1))
    names += [n for n in table_at(poetry, "dependencies") if n.lower() != "python"]
    return names


def _dev_dependency_names(data: JSONObject, project: JSONObject, poetry: JSONObject) -> set[str]:
    """Lower-cased names from dependency groups, optional dependencies and poetry groups."""
    specs: list[str] = []
    for table in (table_at(data, "dependency-groups"), table_at(project, "optional-dependencies")):
        for group in table.values():
            specs += strings(group)
    names = {m.group(1).lower() for s in specs if (m := _DEP_NAME.match(s))}
    for group in table_at(poetry, "group").values():
        names.update(n.lower() for n in table_at(group, "dependencies"))
    names.update(n.lower() for n in table_at(poetry, "dev-dependencies"))
    return names


def _python_stack(data: JSONObject, project: JSONObject, poetry: JSONObject) -> Iterator[Finding]:
    name = string(project, "name") or string(poetry, "name")
    version = string(project, "version") or string(poetry, "version")
    requires = string(project, "requires-python")
    poetry_python = table_at(poetry, "dependencies").get("python")
    if requires is None and isinstance(poetry_python, str):
        requires = clean(poetry_python)
    backend = string(table_at(data, "build-system"), "build-backend")
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
        stack += f"; dependencies: {listing(dependencies)}"
    yield Finding("stack", stack, "pyproject.toml")


def _python_tools(root: Path, data: JSONObject, tool: JSONObject, run: str) -> Iterator[Finding]:
    project, poetry = table_at(data, "project"), table_at(tool, "poetry")
    setup_cfg = read_ini(root, "setup.cfg")
    tox_ini = read_ini(root, "tox.ini")

    def ini_has(parser: configparser.ConfigParser | None, section: str) -> bool:
        return parser is not None and parser.has_section(section)

    pytest_source = None
    if "pytest" in tool:
        section = "ini_options" if "ini_options" in table_at(tool, "pytest") else None
        pytest_source = f"pyproject.toml [tool.pytest{'.' + section if section else ''}]"
    elif found := exists(root, "pytest.ini", "conftest.py", "tests/conftest.py"):
        pytest_source = found
    elif ini_has(setup_cfg, "tool:pytest"):
        pytest_source = "setup.cfg [tool:pytest]"
    elif ini_has(tox_ini, "pytest"):
        pytest_source = "tox.ini [pytest]"
    elif "pytest" in _dev_dependency_names(data, project, poetry):
        pytest_source = "pyproject.toml dependencies"
    if pytest_source:
        yield Finding("test_command", f"{run}pytest", pytest_source)

    ruff = (
        "pyproject.toml [tool.ruff]" if "ruff" in tool else exists(root, "ruff.toml", ".ruff.toml")
    )
    if ruff:
        yield Finding("lint_command", f"{run}ruff check .", ruff)
        yield Finding("format_command", f"{run}ruff format .", ruff)
    flake8 = exists(root, ".flake8") or (
        "setup.cfg [flake8]" if ini_has(setup_cfg, "flake8") else None
    )
    if flake8:
        yield Finding("lint_command", f"{run}flake8", flake8)
    if "black" in tool:
        yield Finding("format_command", f"{run}black .", "pyproject.toml [tool.black]")

    mypy_files = bool(table_at(tool, "mypy").get("files"))
    mypy = "pyproject.toml [tool.mypy]" if "mypy" in tool else exists(root, "mypy.ini", ".mypy.ini")
    if mypy is None and ini_has(setup_cfg, "mypy"):
        mypy = "setup.cfg [mypy]"
    if mypy:
        yield Finding("typecheck_command", f"{run}mypy" + ("" if mypy_files else " ."), mypy)
    pyright = (
        "pyproject.toml [tool.pyright]" if "pyright" in tool else exists(root, "pyrightconfig.json")
    )
    if pyright:
        yield Finding("typecheck_command", f"{run}pyright", pyright)
