"""Tests for agentctx.detection: rule-based detection on small repositories in tmp folders."""

from __future__ import annotations

import json
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.core import schema
from agentctx.detection import BODY_MAX, FACT_TITLES, TITLE_MAX, ProfileFact, detect


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> text, dedented, or raw bytes) under ``root``."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


def bodies(root: Path) -> dict[str, str]:
    facts = detect(root)
    assert [f.key for f in facts] == [k for k in FACT_TITLES if k in {f.key for f in facts}]
    for fact in facts:
        assert fact.title == FACT_TITLES[fact.key]
        assert 0 < len(fact.title) <= TITLE_MAX
        assert 0 < len(fact.body) <= BODY_MAX
    return {f.key: f.body for f in facts}


UV_PYPROJECT = """
    [build-system]
    requires = ["hatchling"]
    build-backend = "hatchling.build"

    [project]
    name = "shop-api"
    version = "1.2.0"
    requires-python = ">=3.12"
    dependencies = ["fastapi>=0.110", "sqlalchemy[asyncio]~=2.0", "httpx ; python_version>'3'"]

    [project.scripts]
    shop = "shop_api.cli:main"

    [dependency-groups]
    dev = ["pytest>=8", "ruff"]

    [tool.uv]
    dev-dependencies = []

    [tool.pytest.ini_options]
    addopts = "-q"

    [tool.ruff]
    line-length = 100

    [tool.mypy]
    strict = true
    files = ["src"]
"""

NOXFILE = """
    import nox

    @nox.session(python="3.12")
    def tests(session):
        session.run("pytest")

    @nox.session
    def lint(session):
        session.run("ruff", "check")

    @nox.session(name="typecheck")
    def types_(session):
        session.run("mypy")

    def helper():
        pass
"""


def test_empty_or_missing_root_gives_nothing(tmp_path: Path) -> None:
    assert detect(tmp_path) == []
    assert detect(tmp_path / "does-not-exist") == []
    (tmp_path / "README.md").write_text("# hi\n")
    assert detect(tmp_path) == []


def test_limits_match_the_record_schema() -> None:
    assert TITLE_MAX == schema.TITLE_MAX
    assert BODY_MAX == schema.BODY_MAX


def test_python_uv_project_with_nox(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": UV_PYPROJECT,
            "uv.lock": "version = 1\n",
            "noxfile.py": NOXFILE,
            "src/shop_api/__init__.py": "",
            "src/shop_api/__main__.py": "",
        },
    )
    assert detect(tmp_path) == [
        ProfileFact("languages", "Languages", "Python (from pyproject.toml)"),
        ProfileFact(
            "stack",
            "Stack",
            "Python package shop-api 1.2.0, requires Python >=3.12, built with hatchling;"
            " dependencies: fastapi, sqlalchemy, httpx (from pyproject.toml)",
        ),
        ProfileFact("package_manager", "Package manager", "uv (from uv.lock)"),
        ProfileFact(
            "test_command",
            "Test command",
            "nox -s tests (from noxfile.py session 'tests');"
            " uv run pytest (from pyproject.toml [tool.pytest.ini_options])",
        ),
        ProfileFact(
            "build_command", "Build command", "uv build (from pyproject.toml [build-system])"
        ),
        ProfileFact(
            "lint_command",
            "Lint command",
            "nox -s lint (from noxfile.py session 'lint');"
            " uv run ruff check . (from pyproject.toml [tool.ruff])",
        ),
        ProfileFact(
            "format_command",
            "Format command",
            "uv run ruff format . (from pyproject.toml [tool.ruff])",
        ),
        ProfileFact(
            "typecheck_command",
            "Type-check command",
            "nox -s typecheck (from noxfile.py session 'typecheck');"
            " uv run mypy (from pyproject.toml [tool.mypy])",
        ),
        ProfileFact(
            "entry_points",
            "Entry points",
            "shop = shop_api.cli:main (from pyproject.toml [project.scripts]);"
            " python -m shop_api (from src/shop_api/__main__.py)",
        ),
    ]


def test_python_poetry_project_with_tox(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [tool.poetry]
                name = "legacy"
                version = "0.3.1"

                [tool.poetry.dependencies]
                python = "^3.10"
                requests = "^2.31"

                [tool.poetry.group.dev.dependencies]
                pytest = "^8"

                [tool.poetry.scripts]
                legacy = "legacy.main:run"
                legacy-admin = { reference = "legacy.admin:run", type = "console" }

                [tool.black]
                line-length = 88

                [build-system]
                requires = ["poetry-core"]
                build-backend = "poetry.core.masonry.api"
            """,
            "poetry.lock": "",
            "tox.ini": """
                [tox]
                envlist = py310, lint

                [testenv]
                commands = pytest

                [testenv:lint]
                commands = flake8
            """,
            "setup.cfg": "[flake8]\nmax-line-length = 88\n",
        },
    )
    found = bodies(tmp_path)
    assert found["package_manager"] == "poetry (from poetry.lock)"
    assert found["stack"] == (
        "Python package legacy 0.3.1, requires Python ^3.10, built with poetry-core;"
        " dependencies: requests (from pyproject.toml)"
    )
    assert found["test_command"] == (
        "tox (from tox.ini); poetry run pytest (from pyproject.toml dependencies)"
    )
    assert found["lint_command"] == (
        "tox -e lint (from tox.ini env 'lint'); poetry run flake8 (from setup.cfg [flake8])"
    )
    assert found["format_command"] == "poetry run black . (from pyproject.toml [tool.black])"
    assert found["build_command"] == "poetry build (from pyproject.toml [build-system])"
    assert found["entry_points"] == (
        "legacy = legacy.main:run (from pyproject.toml [tool.poetry.scripts]);"
        " legacy-admin = legacy.admin:run (from pyproject.toml [tool.poetry.scripts])"
    )


def test_python_setup_py_and_requirements(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "setup.py": "from setuptools import setup\nsetup()\n",
            "requirements.txt": "flask\n",
            "requirements-dev.txt": "pytest\n",
            "tests/conftest.py": "",
            "mypy.ini": "[mypy]\n",
        },
    )
    assert bodies(tmp_path) == {
        "languages": "Python (from setup.py)",
        "package_manager": "pip (from requirements-dev.txt)",
        "test_command": "pytest (from tests/conftest.py)",
        "build_command": "python -m build (from setup.py)",
        "typecheck_command": "mypy . (from mypy.ini)",
    }


@pytest.mark.parametrize(
    ("files", "manager", "source"),
    [
        ({"uv.lock": ""}, "uv", "uv.lock"),
        ({"pdm.lock": ""}, "pdm", "pdm.lock"),
        ({"Pipfile": "", "Pipfile.lock": "{}"}, "pipenv", "Pipfile.lock"),
        ({"Pipfile": ""}, "pipenv", "Pipfile"),
        ({"pyproject.toml": "[tool.pdm]\n"}, "pdm", "pyproject.toml [tool.pdm]"),
        (
            {"pyproject.toml": "[tool.hatch.envs.default]\n"},
            "hatch",
            "pyproject.toml [tool.hatch.envs]",
        ),
    ],
)
def test_python_package_managers(
    files: dict[str, str | bytes], manager: str, source: str, tmp_path: Path
) -> None:
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n", **files})
    assert bodies(tmp_path)["package_manager"] == f"{manager} (from {source})"


def test_hatch_build_config_alone_is_not_a_package_manager(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                name = "x"
                [tool.hatch.build.targets.wheel]
                packages = ["src/x"]
            """
        },
    )
    assert "package_manager" not in bodies(tmp_path)


NODE_PACKAGE = {
    "name": "@acme/web",
    "version": "2.0.0",
    "type": "module",
    "packageManager": "pnpm@9.1.0",
    "engines": {"node": ">=20"},
    "main": "dist/index.js",
    "bin": "./bin/acme.js",
    "workspaces": ["packages/*"],
    "scripts": {
        "dev": "vite",
        "build": "tsc -b && vite build",
        "test": "vitest run",
        "lint": "eslint .",
        "typecheck": "tsc --noEmit",
        "start": "node dist/server.js",
        "release": "changeset publish",
    },
    "dependencies": {"react": "^18.3.0", "react-dom": "^18.3.0"},
    "devDependencies": {"typescript": "^5.4.0", "vitest": "^1.6.0"},
}


def test_node_pnpm_typescript_project(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "package.json": json.dumps(NODE_PACKAGE),
            "yarn.lock": "",  # stale; the packageManager field wins
            "tsconfig.json": "{}",
        },
    )
    assert bodies(tmp_path) == {
        "languages": "TypeScript (from tsconfig.json)",
        "stack": "Node package @acme/web 2.0.0, Node >=20, ES modules, workspaces packages/*;"
        " dependencies: react, react-dom; dev dependencies: typescript, vitest (from package.json)",
        "package_manager": 'pnpm (from package.json "packageManager": pnpm@9.1.0)',
        "test_command": "pnpm test (from package.json scripts.test: vitest run)",
        "build_command": "pnpm run build (from package.json scripts.build: tsc -b && vite build)",
        "lint_command": "pnpm run lint (from package.json scripts.lint: eslint .)",
        "typecheck_command": "pnpm run typecheck"
        " (from package.json scripts.typecheck: tsc --noEmit)",
        "run_command": "pnpm run dev (from package.json scripts.dev: vite);"
        " pnpm run start (from package.json scripts.start: node dist/server.js)",
        "entry_points": "main dist/index.js (from package.json main);"
        " bin @acme/web = ./bin/acme.js (from package.json bin)",
    }


@pytest.mark.parametrize(
    ("lockfile", "manager", "test", "build"),
    [
        ("package-lock.json", "npm", "npm test", "npm run build"),
        ("npm-shrinkwrap.json", "npm", "npm test", "npm run build"),
        ("pnpm-lock.yaml", "pnpm", "pnpm test", "pnpm run build"),
        ("yarn.lock", "yarn", "yarn test", "yarn build"),
        ("bun.lockb", "bun", "bun run test", "bun run build"),
        ("bun.lock", "bun", "bun run test", "bun run build"),
    ],
)
def test_node_lockfiles(lockfile: str, manager: str, test: str, build: str, tmp_path: Path) -> None:
    package = {"name": "app", "scripts": {"test": "jest", "build": "webpack"}}
    write(tmp_path, {"package.json": json.dumps(package), lockfile: ""})
    found = bodies(tmp_path)
    assert found["package_manager"] == f"{manager} (from {lockfile})"
    assert found["test_command"] == f"{test} (from package.json scripts.test: jest)"
    assert found["build_command"] == f"{build} (from package.json scripts.build: webpack)"
    assert found["languages"] == "JavaScript (from package.json)"


def test_node_defaults_and_placeholders(tmp_path: Path) -> None:
    package = {
        "name": "tool",
        "bin": {"tool": "cli.js", "tool-admin": "admin.js", "bad": 5},
        "scripts": {"test": 'echo "Error: no test specified" && exit 1', "start": "node ."},
        "devDependencies": {"typescript": "5"},
    }
    write(tmp_path, {"package.json": json.dumps(package)})
    found = bodies(tmp_path)
    assert found["package_manager"] == "npm (from package.json, no lock file)"
    assert "test_command" not in found
    assert found["run_command"] == "npm start (from package.json scripts.start: node .)"
    assert found["languages"] == "TypeScript (from package.json dependencies)"
    assert found["entry_points"] == (
        "bin tool = cli.js (from package.json bin);"
        " bin tool-admin = admin.js (from package.json bin)"
    )


def test_rust_crate_with_bins_and_lib(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Cargo.toml": """
                [package]
                name = "ripper"
                version = "0.4.0"
                edition = "2021"

                [dependencies]
                clap = "4"
                serde = { version = "1", features = ["derive"] }

                [[bin]]
                name = "rip"
                path = "src/main.rs"

                [[bin]]
                name = "rip-daemon"
            """,
            "src/main.rs": "fn main() {}\n",
            "src/lib.rs": "",
        },
    )
    assert bodies(tmp_path) == {
        "languages": "Rust (from Cargo.toml)",
        "stack": "Rust crate ripper 0.4.0, edition 2021;"
        " dependencies: clap, serde (from Cargo.toml)",
        "package_manager": "cargo (from Cargo.toml)",
        "test_command": "cargo test (from Cargo.toml)",
        "build_command": "cargo build (from Cargo.toml)",
        "lint_command": "cargo clippy (from Cargo.toml)",
        "format_command": "cargo fmt (from Cargo.toml)",
        "run_command": "cargo run --bin rip (from Cargo.toml [[bin]]);"
        " cargo run --bin rip-daemon (from Cargo.toml [[bin]])",
        "entry_points": "bin rip (src/main.rs) (from Cargo.toml [[bin]]);"
        " bin rip-daemon (src/bin/rip-daemon.rs) (from Cargo.toml [[bin]]);"
        " lib ripper (src/lib.rs) (from src/lib.rs)",
    }


def test_rust_default_binary(tmp_path: Path) -> None:
    write(tmp_path, {"Cargo.toml": '[package]\nname = "hello"\n', "src/main.rs": ""})
    found = bodies(tmp_path)
    assert found["entry_points"] == "bin hello (src/main.rs) (from src/main.rs)"
    assert found["run_command"] == "cargo run (from src/main.rs)"


def test_rust_virtual_workspace(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Cargo.toml": """
                [workspace]
                members = ["crates/core", "crates/cli"]
                resolver = "2"

                [workspace.dependencies]
                tokio = "1"
            """
        },
    )
    found = bodies(tmp_path)
    assert found["stack"] == (
        "Rust workspace, workspace members crates/core, crates/cli; dependencies: tokio"
        " (from Cargo.toml)"
    )
    assert found["test_command"] == "cargo test --workspace (from Cargo.toml [workspace])"
    assert found["build_command"] == "cargo build --workspace (from Cargo.toml [workspace])"
    assert found["lint_command"] == "cargo clippy --workspace (from Cargo.toml [workspace])"
    assert found["format_command"] == "cargo fmt --all (from Cargo.toml [workspace])"
    assert "entry_points" not in found


def test_go_module(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "go.mod": """
                module github.com/acme/ledger // the ledger service

                go 1.22

                toolchain go1.22.3

                require (
                    github.com/spf13/cobra v1.8.0
                    golang.org/x/sys v0.20.0 // indirect
                )

                require github.com/stretchr/testify v1.9.0
            """,
            "cmd/ledgerd/main.go": "package main\n\nfunc main() {}\n",
            "cmd/notmain/main.go": "package notmain\n",
            ".golangci.yml": "linters: {}\n",
        },
    )
    assert bodies(tmp_path) == {
        "languages": "Go (from go.mod)",
        "stack": "Go module github.com/acme/ledger, go 1.22;"
        " dependencies: github.com/spf13/cobra, github.com/stretchr/testify (from go.mod)",
        "package_manager": "Go modules (from go.mod)",
        "test_command": "go test ./... (from go.mod)",
        "build_command": "go build ./... (from go.mod)",
        "lint_command": "golangci-lint run (from .golangci.yml); go vet ./... (from go.mod)",
        "format_command": "gofmt -l -w . (from go.mod)",
        "run_command": "go run ./cmd/ledgerd (from cmd/ledgerd/main.go)",
        "entry_points": "main package ./cmd/ledgerd (from cmd/ledgerd/main.go)",
    }


def test_makefile_targets(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Makefile": """
                PY := python3
                SRC ?= src
                OUT ::= build
                .PHONY: test build lint check fmt release

                all: build

                test:
                \t$(PY) -m pytest

                build lint: deps
                \t@echo building

                check:: test lint

                test-unit:
                \tpytest tests/unit

                fmt: ; ruff format .

                $(OUT)/x: ; touch $@
            """
        },
    )
    assert bodies(tmp_path) == {
        "test_command": "make test (from Makefile target 'test');"
        " make check (from Makefile target 'check')",
        "build_command": "make build (from Makefile target 'build')",
        "lint_command": "make lint (from Makefile target 'lint')",
        "format_command": "make fmt (from Makefile target 'fmt')",
    }


def test_phony_declaration_alone_is_not_a_target(tmp_path: Path) -> None:
    write(tmp_path, {"GNUmakefile": ".PHONY: test\nall:\n\techo\n"})
    assert detect(tmp_path) == []


def test_ecosystems_combine_task_runners_first(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Makefile": "test:\n\tpytest && npm test\n",
            "pyproject.toml": '[project]\nname = "full"\n[tool.pytest.ini_options]\n',
            "package.json": json.dumps({"name": "full-ui", "scripts": {"test": "vitest"}}),
            "package-lock.json": "{}",
            "go.mod": "module example.com/full\n",
        },
    )
    found = bodies(tmp_path)
    assert found["languages"] == (
        "Python (from pyproject.toml); JavaScript (from package.json); Go (from go.mod)"
    )
    assert found["test_command"] == (
        "make test (from Makefile target 'test');"
        " pytest (from pyproject.toml [tool.pytest.ini_options]);"
        " npm test (from package.json scripts.test: vitest); go test ./... (from go.mod)"
    )
    assert found["package_manager"] == "npm (from package-lock.json); Go modules (from go.mod)"


def test_detection_is_deterministic(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": UV_PYPROJECT,
            "noxfile.py": NOXFILE,
            "package.json": json.dumps(NODE_PACKAGE),
            "Cargo.toml": '[package]\nname = "x"\n',
            "go.mod": "module x\n",
            "Makefile": "test:\n",
        },
    )
    first = detect(tmp_path)
    assert detect(tmp_path) == first
    assert [f.key for f in first] == list(FACT_TITLES)


MALFORMED: dict[str, str | bytes] = {
    "pyproject.toml": "[project\nname = ",
    "package.json": "{'name': 'single quotes'}",
    "Cargo.toml": "[package]\nname = \n",
    "go.mod": "// no module line\ngo 1.22\n",
    "Makefile": b"\xff\xfe\x00test:\n",
    "noxfile.py": "def broken(:\n",
    "tox.ini": "no section header\n",
    "setup.cfg": "[flake8\n",
}


def test_malformed_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, MALFORMED)
    # setup.cfg, the noxfile and tox.ini still say "Python"; nothing else is readable
    assert bodies(tmp_path) == {"languages": "Python (from setup.cfg)"}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_each_malformed_file_alone(name: str, tmp_path: Path) -> None:
    write(tmp_path, {name: MALFORMED[name]})
    assert set(bodies(tmp_path)) <= {"languages"}


def test_values_of_the_wrong_kind_are_ignored(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": """
                project = "not a table"
                build-system = ["nope"]
                dependency-groups = 3
                [tool]
                poetry = { scripts = [1, 2], dependencies = "x", group = { dev = 5 } }
                pytest = 7
                mypy = "strict"
            """,
            "noxfile.py": "import nox\n@nox.session(name=3)\ndef t(s): pass\n",
            "package.json": json.dumps(
                {
                    "name": ["x"],
                    "scripts": ["test"],
                    "bin": 5,
                    "main": {"x": 1},
                    "packageManager": 9,
                    "workspaces": {"packages": "nope"},
                    "engines": "node",
                    "dependencies": [],
                }
            ),
            "Cargo.toml": """
                bin = "x"
                workspace = 3
                [package]
                name = 4
                edition = { workspace = true }
            """,
        },
    )
    found = bodies(tmp_path)
    assert found["languages"] == (
        "Python (from pyproject.toml); JavaScript (from package.json); Rust (from Cargo.toml)"
    )
    assert "entry_points" not in found


def test_package_json_that_is_not_an_object(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": "[1, 2]"})
    assert detect(tmp_path) == []


def test_oversized_and_long_values_are_bounded(tmp_path: Path) -> None:
    deps = [f"package-with-a-rather-long-name-number-{i}" for i in range(3000)]
    scripts = {"test": "x" * 10_000 + "\n" + "y"}
    write(
        tmp_path,
        {
            "pyproject.toml": f'[project]\nname = "{"n" * 5000}"\n'
            f"dependencies = {json.dumps(deps)}\n",
            "package.json": json.dumps({"name": "big", "scripts": scripts}),
        },
    )
    found = bodies(tmp_path)  # asserts every body <= BODY_MAX
    assert "and 2990 more" in found["stack"]
    assert "\n" not in found["test_command"]
    big = tmp_path / "big"
    big.mkdir()
    (big / "go.mod").write_text("module big\n" + "// pad\n" * 200_000)
    assert detect(big) == []  # over MAX_FILE_BYTES: skipped, not read


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
PACKAGE_KEYS = [
    "name",
    "version",
    "type",
    "main",
    "bin",
    "scripts",
    "workspaces",
    "engines",
    "packageManager",
    "dependencies",
    "devDependencies",
]
MANIFESTS = [
    "pyproject.toml",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "Makefile",
    "noxfile.py",
    "tox.ini",
    "setup.cfg",
    "tox.toml",
]


@settings(
    max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    package=st.dictionaries(st.sampled_from(PACKAGE_KEYS), json_values),
    garbage=st.dictionaries(st.sampled_from(MANIFESTS), st.binary(max_size=200), max_size=4),
)
def test_property_detect_never_raises(
    package: dict[str, object], garbage: dict[str, bytes]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "package.json").write_text(json.dumps(package), encoding="utf-8")
        for name, content in garbage.items():
            (root / name).write_bytes(content)
        facts = detect(root)
        assert detect(root) == facts
        for fact in facts:
            assert len(fact.title) <= TITLE_MAX
            assert len(fact.body) <= BODY_MAX
