"""Stop, SessionEnd and CwdChanged: session bookkeeping and the detached background workers.

* **Stop** fires after every assistant turn. It records the session and starts a detached extraction
  only when the conversation grew by :data:`EXTRACT_GROWTH_BYTES` since the last one was requested
  and none is running for the session; it never calls an LLM itself. Growth counts the bytes of the
  transcript's user and assistant lines only: Claude Code writes far more of its own
  bookkeeping per turn (prompt snapshots, skill listings, request shapes), so raw file growth would
  start an extraction after every turn.
* **SessionEnd** (1.5 s budget shared by all SessionEnd hooks) marks the session ended, folds the
  session ledger (tokens injected) into the ``sessions`` row in one transaction (one wait for the
  write lock), removes the ledger once that committed, and starts one detached worker that runs the
  final extraction (if anything is left) and then consolidation.
* **CwdChanged** moves the session's active project to the new directory, and starts the profile
  detection there when its manifests changed (:func:`agentctx.hooks.session_start.maybe_profile`).

A store that stays busy past the hook's write timeout skips the bookkeeping with a log line: Stop
and CwdChanged redo it at the next event, and a ledger left unfolded is folded a day later as stale.

Workers are started with a double fork and ``setsid`` so that they outlive the hook and Claude Code
never waits for them, at a lower CPU priority than the hooks (:data:`WORKER_NICENESS`); their output
goes to ``logs/workers.log``. With ``llm`` off in config or no extraction backend (no
``ANTHROPIC_API_KEY`` and no ``claude`` CLI, see :mod:`agentctx.core.backend`), no extraction is
started; consolidation still runs.
"""

from __future__ import annotations

import os
import sys

from agentctx import config
from agentctx.core import home, jsonio, nofollow, sessions, spool
from agentctx.core.connect import busy_or, open_db
from agentctx.core.locks import extraction_running
from agentctx.core.plan import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    import sqlean

    from agentctx.hooks.runner import HookContext

#: About 8K tokens of transcript: extraction per turn would cost a call per turn for little new text.
EXTRACT_GROWTH_BYTES = 32 * 1024
#: Workers run below the hooks: under load a hook waits less for a CPU (see docs/reliability.md).
WORKER_NICENESS = 10
#: What Stop reads of a transcript's growth at most, in bytes and seconds, and the longest line it
#: looks at (docs/security.md, "Bounded inputs"): past either bound the growth counts as enough
#: and the (time-boxed) extraction worker decides.
SCAN_MAX_BYTES = 8 * 1024 * 1024
SCAN_MAX_S = 1.0
LINE_MAX_BYTES = 4 * 1024 * 1024
_CHUNK = 1024 * 1024


def handle(ctx: HookContext) -> None:
    """Dispatch on the event; prints nothing."""
    if ctx.event == "CwdChanged":
        try:  # the new directory's project may have no profile yet, or changed manifests
            from agentctx.hooks.session_start import maybe_profile

            maybe_profile(ctx, ctx.text("new_cwd") or ctx.cwd)
        except Exception as exc:
            ctx.log(f"profile detection not started: {type(exc).__name__}: {exc}")
    conn = open_db(ctx.log, write=True)
    if conn is None:
        if ctx.event == "SessionEnd" and os.path.exists(home.db_path()):
            # An older schema (after an upgrade) or a busy store: the worker opens the store
            # itself, migrating it, so the session's work is not skipped.
            start_worker(ctx, _session_end_args(ctx))
        return
    from agentctx.core.driver import sqlite

    try:
        spool.drain(conn, ctx.log)
        if ctx.event == "Stop":
            _stop(ctx, conn)
        elif ctx.event == "SessionEnd":
            _session_end(ctx, conn)
        elif ctx.event == "CwdChanged":
            _cwd_changed(ctx, conn)
    except sqlite.OperationalError as exc:
        if not _busy(exc):
            raise
        # Stop and CwdChanged redo it at the next event; SessionEnd's ledger is folded later
        ctx.log(f"{busy_or(exc)}; {ctx.event} bookkeeping skipped, nothing lost")
    finally:
        conn.close()


def _busy(exc: BaseException) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _upsert_session(ctx: HookContext, conn: sqlean.Connection) -> None:
    """Create or refresh the session row (project, cwd, transcript path)."""
    if ctx.session_id:
        sessions.refresh(
            conn, ctx.session_id, ctx.project.project_id, ctx.cwd, ctx.text("transcript_path")
        )


def _stop(ctx: HookContext, conn: sqlean.Connection) -> None:
    _upsert_session(ctx, conn)
    transcript = ctx.text("transcript_path")
    if not ctx.session_id or not transcript or not extraction_enabled(ctx, quiet=True):
        return
    try:
        info = os.stat(transcript)
    except (OSError, ValueError):
        return
    import stat

    if not stat.S_ISREG(info.st_mode):
        ctx.log("transcript_path is not a regular file; extraction not started")
        return
    size = info.st_size
    requested = run(conn, sessions.requested_size(ctx.session_id))
    # raw growth bounds the conversation's, so the cheap test comes first
    if size - requested < EXTRACT_GROWTH_BYTES or extraction_running(ctx.session_id):
        return
    try:
        grown = conversation_bytes(transcript, requested, EXTRACT_GROWTH_BYTES)
    except OSError:
        return
    if grown < EXTRACT_GROWTH_BYTES:
        return
    start_worker(
        ctx, ["worker", "extract", "--session-id", ctx.session_id, "--transcript", transcript]
    )
    run(conn, sessions.request_extraction(ctx.session_id, size))


#: How user and assistant lines look in a transcript (Claude Code writes compact JSON).
_MESSAGE_MARKERS = (
    b'"type":"user"',
    b'"type":"assistant"',
    b'"type": "user"',
    b'"type": "assistant"',
)


def conversation_bytes(path: str, start: int, enough: int) -> int:
    """Bytes of the user and assistant lines after byte ``start`` of a transcript.

    Counting stops once ``enough`` is reached. Only lines that mention such a type are parsed, to be
    sure it is the line's own; a line cut at ``start`` does not parse and is not counted. Bounded
    (a regular file only, :data:`SCAN_MAX_BYTES`, :data:`SCAN_MAX_S`, lines up to
    :data:`LINE_MAX_BYTES`): past a bound the growth is large or strange, and counts as ``enough``.
    """
    import time

    from agentctx.core.files import open_regular

    total = 0
    deadline = time.monotonic() + SCAN_MAX_S
    with open_regular(path) as fh:
        fh.seek(start)
        carry, skipping, scanned = b"", False, 0
        while True:
            if scanned >= SCAN_MAX_BYTES or time.monotonic() > deadline:
                return max(total, enough)
            chunk = fh.read(_CHUNK)
            if not chunk:
                return total
            scanned += len(chunk)
            data = carry + chunk
            end = data.rfind(b"\n")
            if end < 0:  # no line ends here: keep it, unless it is already too long to look at
                skipping = skipping or len(data) > LINE_MAX_BYTES
                carry = b"" if skipping else data
                continue
            if skipping:  # the rest of an overlong line
                data = data[data.find(b"\n") + 1 :]
                end = data.rfind(b"\n")
                skipping = False
            carry = data[end + 1 :]
            for line in _marked_lines(data[: end + 1]):
                try:
                    entry = jsonio.loads(line.decode("utf-8", "replace"))
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("type") in ("user", "assistant"):
                    total += len(line) + 1
                    if total >= enough:
                        return total


def _marked_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` (whole lines) that hold a message marker, each once, in file order.

    Found from the markers, not by walking every line: a stretch of millions of empty lines costs
    one search per marker, in C.
    """
    starts: set[int] = set()
    for marker in _MESSAGE_MARKERS:
        at = data.find(marker)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            newline = data.find(b"\n", at)
            at = data.find(marker, newline + 1) if newline >= 0 else -1
    lines = []
    for begin in sorted(starts):
        stop = data.find(b"\n", begin)
        line = data[begin : stop if stop >= 0 else len(data)]
        if len(line) <= LINE_MAX_BYTES:
            lines.append(line)
    return lines


def _session_end(ctx: HookContext, conn: sqlean.Connection) -> None:
    try:
        folded = sessions.end(
            conn, ctx.session_id, ctx.project.project_id, ctx.cwd, ctx.text("transcript_path")
        )
        for session_id in folded:
            if session_id != ctx.session_id:
                ctx.log(f"folded the stale ledger of session {session_id}")
    finally:  # the worker runs whatever happened here: it opens the store itself
        start_worker(ctx, _session_end_args(ctx))


def _session_end_args(ctx: HookContext) -> list[str]:
    args = ["worker", "session-end", "--project", ctx.project.project_id]
    if ctx.session_id:
        args += ["--session-id", ctx.session_id, "--transcript", ctx.text("transcript_path")]
    if not extraction_enabled(ctx):
        args.append("--no-extract")
    return args


def _cwd_changed(ctx: HookContext, conn: sqlean.Connection) -> None:
    if not ctx.session_id:
        return
    from agentctx.core.project import identify

    new_cwd = ctx.text("new_cwd") or ctx.cwd
    project_id = identify(new_cwd).project_id
    sessions.change_cwd(
        conn, ctx.session_id, project_id, new_cwd, ctx.text("transcript_path"), ctx.event
    )


def extraction_enabled(ctx: HookContext, *, quiet: bool = False) -> bool:
    """Whether an extraction backend may run (:func:`agentctx.core.backend.quick`: no process)."""
    from agentctx.core import backend

    try:
        settings = config.load()
    except Exception as exc:
        ctx.log(f"config unreadable ({exc}); treating llm as off")
        return False
    chosen = backend.quick(str(settings["extraction.backend"]), bool(settings["llm"]))
    if chosen is None and settings["llm"] and not quiet:  # Stop runs every turn: once, at the end
        ctx.log(
            "no extraction backend (no ANTHROPIC_API_KEY, no claude CLI, or extraction.backend "
            "off): deterministic capture only"
        )
    return chosen is not None


def start_worker(ctx: HookContext, args: Sequence[str]) -> None:
    """Start ``agentctx <args>`` detached (its output goes to ``logs/workers.log``)."""
    spawn_detached(
        [sys.executable, "-m", "agentctx", *args],
        os.path.join(home.ensure_sub("logs"), "workers.log"),
    )


def spawn_detached(argv: Sequence[str], log_path: str) -> None:
    """Run ``argv`` in a new session, detached from us (double fork); returns at once."""
    os.makedirs(os.path.dirname(log_path), mode=0o700, exist_ok=True)
    if not hasattr(os, "fork"):  # pragma: no cover - Windows
        import subprocess

        flags = (
            getattr(subprocess, "DETACHED_PROCESS", 0)
            | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
            | getattr(subprocess, "BELOW_NORMAL_PRIORITY_CLASS", 0)
        )
        with os.fdopen(nofollow.append_fd(log_path), "ab") as log_file:
            subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                creationflags=flags,
                close_fds=True,
            )
        return
    pid = os.fork()
    if pid == 0:  # child: new session, fork again so the worker is not our child
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            try:  # background work: the hooks of every running session come first for the CPU
                os.nice(WORKER_NICENESS)
            except OSError:
                pass
            devnull = os.open(os.devnull, os.O_RDONLY)
            try:
                out = nofollow.append_fd(log_path)
            except OSError:  # a symlink planted at the log: run the worker without its log
                out = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.execv(argv[0], list(argv))
        except BaseException:
            os._exit(1)
    os.waitpid(pid, 0)
