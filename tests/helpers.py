"""Helpers to run agentctx as users and Claude Code do (real subprocesses), and what they find there:
a store seeded for a project, the fixtures folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentctx.core.project import identify
from agentctx.core.schema import RECORD_COLUMNS
from agentctx.records import NewRecord
from agentctx.store import Store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import pytest
    from mcp import StdioServerParameters

#: The JSON-RPC ``initialize`` request a raw MCP client sends first.
MCP_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
FORBIDDEN = ("cyclopts", "anthropic", "mcp", "fastembed", "numpy", "pydantic")
#: The project of :func:`new_record` when a test names none.
PROJECT = "a" * 64


def new_record(
    type: str = "decision",
    title: str = "t",
    body: str = "b",
    project_id: str = PROJECT,
    **fields: Any,
) -> NewRecord:
    """The tests' one record factory: a :class:`NewRecord` of these defaults, any field overridden.

    The defaults are short words no search or test looks for; a test that cares about a field
    names it.
    """
    return NewRecord(type=type, title=title, body=body, project_id=project_id, **fields)


def run_hook(
    event: str,
    payload: dict[str, Any] | bytes | str | None,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m agentctx hook <event>`` with ``payload`` on stdin (dicts are JSON-encoded)."""
    if isinstance(payload, dict):
        data = json.dumps(payload).encode()
    elif isinstance(payload, str):
        data = payload.encode()
    else:
        data = payload or b""
    return subprocess.run(
        [sys.executable, "-m", "agentctx", "hook", event],
        input=data,
        capture_output=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def contract(result: subprocess.CompletedProcess[bytes], event: str) -> str | None:
    """The additionalContext of a hook's stdout, asserting the exact contract shape (None if empty)."""
    assert result.returncode == 0, result.stderr
    if not result.stdout:
        return None
    data = json.loads(result.stdout)
    assert set(data) == {"hookSpecificOutput"}
    inner = data["hookSpecificOutput"]
    assert set(inner) == {"hookEventName", "additionalContext"}
    assert inner["hookEventName"] == event
    assert isinstance(inner["additionalContext"], str)
    return str(inner["additionalContext"])


def payload(event: str, session_id: str, cwd: Path, **extra: Any) -> dict[str, Any]:
    """A payload with the common fields Claude Code sends."""
    return {
        "session_id": session_id,
        "transcript_path": str(cwd / ".transcript.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


#: Commands that end the process they run in or never return (the hook fast path, the MCP
#: server, the dashboard) and the entry's own fast path (``--version``): always a subprocess.
PROCESS_COMMANDS = frozenset({"hook", "mcp", "ui", "--version", "-V"})


#: Set (to anything), every :func:`run_cli` is a subprocess, as before the in-process runner:
#: to check that running the CLI in the test process hides nothing.
CLI_PROCESS_ENV = "AGENTCTX_TESTS_CLI_PROCESS"


def run_cli(
    *args: str,
    cwd: Path | str | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``agentctx`` command line on ``args``; its exit code, stdout and stderr.

    In this process by default (:func:`run_cli_here`): the CLI's own ``run`` with this ``cwd``,
    environment and stdin, as ``python -m agentctx`` runs it, without paying a Python start and
    the CLI's imports (~0.4 s of CPU) and, for a command that embeds, a model load (~1 s) per
    call: the embedding model is loaded once per test process (``one_load_per_model``). In a
    subprocess (``python -m agentctx``) when ``process`` is set (a test about the process
    boundary: exit, signals, what it imports), for :data:`PROCESS_COMMANDS`, with ``PYTHON*``
    variables in ``env`` (they act on a new interpreter's start), and when called
    where this process's working folder and environment cannot be lent (a running event loop,
    a thread other than the main one); every call when :data:`CLI_PROCESS_ENV` is set.
    """
    if not process and not _must_spawn(args, env) and not os.environ.get(CLI_PROCESS_ENV):
        return run_cli_here(*args, cwd=cwd, input=input, env=env)
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agentctx", *args],
        cwd=cwd,
        input=input,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _must_spawn(args: tuple[str, ...], env: dict[str, str] | None) -> bool:
    import asyncio
    import threading

    import sniffio

    if (
        not args
        or args[0] in PROCESS_COMMANDS
        or threading.current_thread() is not threading.main_thread()
        or any(name.startswith("PYTHON") for name in env or {})  # read by a new interpreter
    ):
        return True
    try:  # what anyio.run asks: an event loop running here, or anyio's test runner holding one
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return False
    return True


def run_cli_here(
    *args: str,
    cwd: Path | str | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``agentctx.cli.run(args)`` in this process, as ``python -m agentctx`` would run it: in
    ``cwd``, with ``env`` added to the environment, ``input`` (or nothing) on a stdin that is not
    a terminal, stdout and stderr captured (with a ``buffer``, as a pipe's), warnings logged to
    stderr (logging's last resort, as in a new process); the working folder, environment,
    ``sys.argv``, standard streams and the root logger's handlers are restored after."""
    import io
    import logging

    from agentctx import cli

    main = str(Path(cli.__file__).resolve().parent.parent / "__main__.py")
    saved = (os.getcwd(), dict(os.environ), sys.argv, sys.stdin, sys.stdout, sys.stderr)
    # no handler on the root logger, as in a new process: warnings reach stderr through
    # logging's last resort (pytest's capture handlers are put back after)
    handlers = logging.root.handlers[:]
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", newline="\n", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", newline="\n", write_through=True)
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8")
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.environ.update(env or {})
        sys.argv = [main, *args]
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        logging.root.handlers = []
        code = cli.run(list(args))
        stdout.flush()
        stderr.flush()
    finally:
        logging.root.handlers = handlers
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved[2:]
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "agentctx", *args],
        code,
        out.getvalue().decode("utf-8", "replace"),
        err.getvalue().decode("utf-8", "replace"),
    )


def seed(project_dir: Path, records: Iterable[dict[str, Any]]) -> list[str]:
    """Create the store and add records for the project in ``project_dir``; return their ids."""
    project = identify(str(project_dir))

    async def go() -> list[str]:
        async with await Store.open() as store:
            await store.touch_project(project)
            ids = []
            for spec in records:
                record = await store.add(NewRecord(project_id=project.project_id, **spec))
                ids.append(record.id)
            return ids

    return anyio.run(go)


def use_model(name: str, folder: Path, cwd: Path) -> None:
    """Configure the embedding model ``name`` loaded from ``folder`` through the real CLI."""
    for key, value in (("embedding.path", str(folder)), ("embedding.model", name)):
        assert run_cli("config", "set", key, value, cwd=cwd).returncode == 0


def vectors_check(cwd: Path) -> dict[str, Any]:
    """``doctor --json``'s vectors check, its ``vectors`` details merged in."""
    result = run_cli("doctor", "--json", cwd=cwd)
    (check,) = [c for c in json.loads(result.stdout) if c["name"] == "vectors"]
    return {**check, **check.pop("vectors")}


def reembed_when_pending(
    cwd: Path, stored_model: str, count: int
) -> subprocess.CompletedProcess[str]:
    """While a re-embed is pending, search is keyword-only and says why; ``agentctx model
    reembed`` then drops the ``stored_model`` vectors and embeds the ``count`` records again. The
    store holds "gRPC for internal services" (the re-embed tests' texts); the reembed's result."""
    search = run_cli("search", "gRPC internal services", cwd=cwd)
    assert search.returncode == 0 and "gRPC for internal services" in search.stdout
    assert "re-embed pending" in search.stderr  # keyword-only, and why
    result = run_cli("model", "reembed", cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert f"vectors of {stored_model} (384 dimensions) dropped" in result.stderr
    assert f"embedded {count}/{count} records" in result.stderr
    return result


def fixtures_dir() -> Path:
    """The repository's test fixtures (``tests/fixtures``: real transcripts, with their provenance)."""
    return Path(__file__).resolve().parent / "fixtures"


def query(sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Every row of a read query on the store of the test's home (a plain connection)."""
    import sqlean

    from agentctx.core import home

    conn = sqlean.connect(home.db_path())
    try:
        return list(conn.execute(sql, params).fetchall())
    finally:
        conn.close()


def server_params(project_dir: Path, agentctx_home: Path) -> StdioServerParameters:
    """The real MCP server over stdio (``python -m agentctx mcp``) for a project and home."""
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentctx", "mcp"],
        env={
            "AGENTCTX_HOME": str(agentctx_home),
            "CLAUDE_PROJECT_DIR": str(project_dir),
            "HOME": os.environ["HOME"],
            "PATH": os.environ.get("PATH", ""),
        },
    )


#: The record columns of a store before ``0008_record_cues`` (tests build such stores), and the
#: insert of a row into one (values in that order).
COLUMNS_BEFORE_0008 = tuple(c for c in RECORD_COLUMNS if c != "cues")
INSERT_BEFORE_0008 = (
    f"INSERT INTO records({', '.join(COLUMNS_BEFORE_0008)}) "
    f"VALUES ({', '.join('?' * len(COLUMNS_BEFORE_0008))})"
)


async def add_texts(
    store: Store, texts: Iterable[tuple[str, str, str]], project_id: str = "p1"
) -> list[str]:
    """Add a record per ``(type, title, body)``; their ids, in order."""
    ids = []
    for record_type, title, body in texts:
        record = await store.add(
            new_record(type=record_type, title=title, body=body, project_id=project_id)
        )
        ids.append(record.id)
    return ids


def shared_folder(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]
) -> Path:
    """A folder that ``make`` fills once per test run, shared by every xdist worker.

    For the models derived from MiniLM (seconds of CPU each): under xdist the workers' temporary
    folders share a parent, where the first worker to ask makes the folder under a lock and the
    others wait for it and reuse it; in one process it is made in the run's own temporary folder.
    A folder is used only once ``make`` returned (its ``.done`` marker).
    """
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died while making it
            folder.mkdir()
            make(folder)
            (folder / ".done").touch()
    return folder
