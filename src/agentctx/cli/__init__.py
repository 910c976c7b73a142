"""The ``agentctx`` command line: a thin adapter over the library.

Each command opens the store, awaits one library call and renders the result as text or, with
``--json``, as objects keyed by the record fields. Every error is one line on stderr, never a
traceback: library errors (:class:`AgentctxError`), database and file errors exit with 1, usage
errors (cyclopts') with 2, and anything unexpected with 1, its traceback written to
``logs/cli.log`` in the home (the line says so); an interrupt exits with 130.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import orjson
import sqlean
from cyclopts import App, CycloptsError, Parameter

from agentctx import __version__
from agentctx.core import clock, db, home
from agentctx.core.errors import AgentctxError
from agentctx.core.project import ProjectIdentity, identify
from agentctx.core.text import reveal
from agentctx.store import Store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agentctx.records import Record

app = App(
    name="agentctx",
    help="A structured, versioned context layer for Claude Code.\n\n"
    'Example: agentctx init (once, in your project); agentctx search "retry backoff"',
    version=__version__,
    # docstrings render as Markdown: paragraphs reflow to the terminal
    help_format="markdown",
    version_format="plaintext",  # Markdown costs its import; a version needs none
    # a list option is not also given an ``--empty-<name>`` flag
    default_parameter=Parameter(negative_iterable=()),
)

Json = Annotated[bool, Parameter(name="--json", negative="", help="Print JSON.")]


#: Commands that run whatever state the home is in: doctor reports an untrusted home as a failed
#: check; help and the version read nothing from it.
_WITHOUT_HOME = frozenset({"doctor", "--help", "-h", "--version", "help"})


def run(argv: list[str]) -> int:
    """Run the CLI on ``argv``; return the process exit code."""
    try:
        if argv and argv[0] not in _WITHOUT_HOME and not {"--help", "-h"} & set(argv):
            home.require()  # another account's (or a world-writable) home: one line, exit 1
        result = _call(argv)
    except AgentctxError as exc:
        return _error(str(exc))
    except sqlean.Error as exc:  # a damaged, full or unwritable store surfacing mid-query
        return _error(db.explain(exc, home.db_path()))
    except OSError as exc:  # a file of ours or the user's: unwritable, a full disk, missing
        return _error(_os_error(exc))
    except CycloptsError as exc:  # a usage error
        command = " ".join(exc.command_chain or ())
        hint = f"agentctx {command} --help" if command else "agentctx --help"
        _error(f"{_one_line(str(exc))} (see `{hint}`)")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("agentctx: interrupted\n")
        return 130
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # a bug: one line here, the traceback in the log
        where = _log_traceback(argv)
        return _error(
            f"unexpected {type(exc).__name__}: {_one_line(str(exc))[:300]} (a bug in agentctx"
            + (f"; the traceback is in {where})" if where else ")")
        )
    return result if isinstance(result, int) else 0


def _call(argv: list[str]) -> Any:
    """Parse ``argv`` and run its command: an async one under ``anyio.run`` (cyclopts would run it
    with ``asyncio.run`` itself; every entry of agentctx uses anyio's runner)."""
    command, bound, _ = app.parse_args(argv, exit_on_error=False, print_error=False)
    if inspect.iscoroutinefunction(command):
        return anyio.run(functools.partial(command, *bound.args, **bound.kwargs))
    return command(*bound.args, **bound.kwargs)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _log_traceback(argv: list[str]) -> str | None:
    """Append the current exception's traceback to ``logs/cli.log``; its path, or None."""
    import time
    import traceback

    from agentctx.core import nofollow

    try:
        path = os.path.join(home.ensure_sub("logs"), "cli.log")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        text = f"{stamp} agentctx {' '.join(argv)}\n{traceback.format_exc()}\n"
        fd = nofollow.append_fd(path)
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except (OSError, AgentctxError):  # unwritable, or a home that is not the user's alone
        return None
    return path


def _error(message: str) -> int:
    _err(f"agentctx: error: {message}")
    return 1


_OS_HINTS = {
    errno.ENOSPC: "the disk is full: free some space on it, then retry",
    getattr(errno, "EDQUOT", -1): "the disk quota is used up: free some space, then retry",
    errno.EFBIG: "the file size limit (ulimit -f) was reached",
    errno.EROFS: "the file system is read-only: remount it read-write, or point AGENTCTX_HOME "
    "at a writable folder",
    errno.EACCES: "permission denied: fix the permissions (`agentctx doctor` shows the home's)",
    errno.EPERM: "not permitted (an immutable file or folder? see lsattr): fix it, then retry",
}


def _os_error(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    where = f"{exc.filename}: " if exc.filename else ""
    hint = _OS_HINTS.get(exc.errno or 0, "")
    return f"{where}{reason}" + (f"; {hint}" if hint else "")


# -- helpers ---------------------------------------------------------------------------------------


def _out(text: str = "") -> None:
    """A line of text for a person: invisible characters and odd line breaks shown as
    ``<U+XXXX>`` (:func:`agentctx.core.text.reveal`; ``--json`` and ``export`` stay lossless)."""
    sys.stdout.write(reveal(text) + "\n")


def _err(text: str) -> None:
    """:func:`_out` on stderr."""
    sys.stderr.write(reveal(text) + "\n")


def _json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _project() -> ProjectIdentity:
    return identify(os.getcwd())


async def _with_store(
    action: Callable[[Store], Awaitable[int | None]], *, read_only: bool = False
) -> int:
    """Open the store, run ``action``, close it. ``read_only``: a command that only reads, which
    must not create the store before ``agentctx init`` (it says so in one line instead)."""
    if read_only and not await anyio.Path(home.db_path()).exists():
        raise AgentctxError(
            f"no agentctx store at {home.db_path()} yet: run `agentctx init` first "
            "(nothing was created)"
        )
    store = await Store.open()
    try:
        return (await action(store)) or 0
    finally:
        await store.close()


#: What the columns of :func:`_line` mean: printed once above a listing of them.
LINE_LEGEND = "id  type  title  [scope, confidence, age, rank score; * pinned]"


def _line(record: Record, score: float | None = None) -> str:
    flags = ("*" if record.pinned else "") + ("" if record.is_current else " superseded")
    extra = f" {score:.2f}" if score is not None else ""
    return (
        f"{record.id}  {record.type:<10} {record.title}  "
        f"[{record.scope}, {record.confidence}, {clock.age_label(record.valid_from)}{extra}{flags}]"
    )


def _worded(record: Record) -> tuple[str, str]:
    """Source and confidence as the digest's label words them (one place: ``core.inject``)."""
    from agentctx.core import inject

    return inject.described(record)


def _show(record: Record) -> None:
    _out(f"{record.title}")
    _out(f"  id          {record.id}")
    source, confidence = _worded(record)
    _out(f"  type        {record.type} ({record.scope})")
    _out(f"  confidence  {confidence}")
    session = f", session {record.session_id}" if record.session_id else ""
    _out(f"  source      {source}{session}")
    _out(f"  valid from  {record.valid_from}   recorded {record.recorded_at}")
    if record.pinned:
        _out("  pinned      yes")
    if record.key:
        _out(f"  key         {record.key}")
    if record.keywords:
        _out(f"  keywords    {record.keywords}")
    for n, cue in enumerate(record.cues):  # search text: asked for by these, never injected
        _out(f"  {'cues' if n == 0 else '':<12}{cue}")
    if record.rationale:
        _out(f"  rationale   {record.rationale}")
    if record.superseded_by:
        successor = record.superseded_by
        _out(f"  SUPERSEDED  at {record.superseded_at} by {successor} (agentctx show {successor})")
    _out()
    _out(record.body)


# Command modules register themselves on ``app`` when imported.
from agentctx.cli import (  # noqa: E402, F401
    admin,
    consolidate,
    demo,
    mcp,
    model,
    profile,
    records,
    setup,
    sync,
    team,
    ui,
    workers,
)
