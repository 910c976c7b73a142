"""``agentctx hook <event>``: read the event JSON on stdin, run its handler, print the contract JSON.

Fail-open, always: whatever happens (bad input, a missing or locked or corrupt database, an unwritable
home, a bug) the process exits 0 and stdout holds nothing or exactly
``{"hookSpecificOutput":{"hookEventName":…,"additionalContext":…}}``. While a handler runs,
``sys.stdout`` points at stderr so a stray print cannot corrupt the contract; errors are appended to
``<home>/logs/hooks.log``.
"""

from __future__ import annotations

import os
import sys
import time

from agentctx.core import home, jsonio, nofollow
from agentctx.core.event import Event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_STDIN_BYTES = 32 * 1024 * 1024
#: How long a hook waits for its event JSON on stdin (Claude Code sends it at once).
STDIN_SECONDS = 2.0
LOG_MAX_BYTES = 1024 * 1024

#: CLI name -> (module with ``handle(ctx)``, the Claude Code events it serves; the first is default)
EVENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "session-start": ("agentctx.hooks.session_start", ("SessionStart",)),
    "user-prompt-submit": ("agentctx.hooks.prompt", ("UserPromptSubmit",)),
    "subagent-start": ("agentctx.hooks.subagent", ("SubagentStart",)),
    "post-tool-use": ("agentctx.hooks.capture", ("PostToolUse", "PostToolUseFailure")),
    "pre-compact": ("agentctx.hooks.capture", ("PreCompact",)),
    "stop": ("agentctx.hooks.lifecycle", ("Stop",)),
    "session-end": ("agentctx.hooks.lifecycle", ("SessionEnd",)),
    "cwd-changed": ("agentctx.hooks.lifecycle", ("CwdChanged",)),
}
#: Events whose additionalContext Claude Code reads (the others print nothing).
INJECTING = frozenset({"SessionStart", "UserPromptSubmit", "SubagentStart"})


class HookContext(Event):
    """What a handler gets: the event, its payload, lazily the project; notes go to the hooks log."""

    __slots__ = ("started",)

    def __init__(self, event: str, payload: dict[str, Any]) -> None:
        super().__init__(event, payload)
        self.started = time.monotonic()

    def log(self, message: str) -> None:
        """Append a line to the hooks log."""
        log(self.event, message, self.session_id)


def run_hook(argv: list[str]) -> int:
    """Run one hook; always returns 0."""
    name = argv[0] if argv else ""
    spec = EVENTS.get(name)
    if spec is None:
        log(name or "?", f"unknown hook event {name!r}; known: {', '.join(EVENTS)}")
        return 0
    module_name, events = spec
    try:
        home.require(remember=True)
    except Exception as exc:  # another account's home: read nothing from it, write nothing to it
        _refused(str(exc))
        return 0
    real_stdout = sys.stdout
    output = ""
    sys.stdout = sys.stderr
    try:
        payload = _read_payload(events[0])
        if payload is not None:
            event = payload.get("hook_event_name")
            if event not in events:
                event = events[0]
            __import__(module_name)
            handler = sys.modules[module_name].handle
            text = handler(HookContext(event, payload))
            if text and event in INJECTING:
                # the fence escaped each record's text; this removes what no one can see from
                # all of it (a hand-edited digest file, a note), issue 24
                from agentctx.core.text import for_model

                context = for_model(text)
                output = jsonio.dumps(
                    {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
                )
    except BaseException as exc:
        _log_exception(events[0], exc)
        output = ""
    finally:
        sys.stdout = real_stdout
    if output:
        try:
            real_stdout.write(output)
            real_stdout.flush()
        except (OSError, ValueError):
            pass
    return 0


def _refused(message: str) -> None:
    """Say why the hook did nothing, on stderr: the hooks log lives in the refused home."""
    try:
        sys.stderr.write(f"agentctx: {' '.join(message.split())}; the hook did nothing\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _read_payload(event: str) -> dict[str, Any] | None:
    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        log(event, "no event JSON on stdin (run by Claude Code, not by hand)")
        return None
    try:
        text, payload = _read_stdin(stdin.fileno())
    except (OSError, ValueError) as exc:  # no usable descriptor
        log(event, f"stdin unreadable ({type(exc).__name__}); event skipped")
        return None
    except _Skip as why:
        log(event, f"{why}; event skipped")
        return None
    if not isinstance(payload, dict):
        log(event, "stdin JSON is not an object; event skipped")
        return None
    found: dict[str, Any] = payload
    if "\\ud" in text or "\\uD" in text:  # maybe a lone surrogate escape: valid JSON, not text
        found = _without_lone_surrogates(found)
    return found


class _Skip(Exception):
    """Why the event's stdin is not read as a payload (the message goes to the log)."""


def _read_stdin(fd: int) -> tuple[str, Any]:
    """The event's text and parsed JSON, read within :data:`STDIN_SECONDS`.

    Claude Code writes the payload and closes stdin; a writer that holds it open must not hold
    the hook: reading stops at end of file, at :data:`MAX_STDIN_BYTES`, at a pause in the input
    once what arrived is a whole JSON document, or when the deadline passes. The usual case (the
    payload there and stdin closed by the time the hook runs) is read without waiting and without
    ``select``, a C module loaded on every prompt otherwise (ADR-017).
    """
    chunks, ended = _read_ready(fd)
    if not ended:
        _wait_and_read(fd, chunks)
    text = b"".join(chunks).decode("utf-8", "replace")
    try:
        return text, jsonio.loads(text)
    except ValueError as exc:
        raise _Skip(f"stdin is not JSON ({exc})") from None


def _read_ready(fd: int) -> tuple[list[bytes], bool]:
    """What stdin holds now, read without waiting, and whether its end was reached (False when
    more may come, or when the descriptor cannot be read without blocking: the caller waits)."""
    chunks: list[bytes] = []
    try:
        blocking = os.get_blocking(fd)
        if blocking:
            os.set_blocking(fd, False)
    except OSError:
        return chunks, False
    size = 0
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                return chunks, False
            if not chunk:
                return chunks, True
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_STDIN_BYTES:
                raise _Skip(f"stdin over {MAX_STDIN_BYTES} bytes")
    finally:
        if blocking:  # the descriptor is shared with the writer's side of the session: as it was
            os.set_blocking(fd, True)


def _wait_and_read(fd: int, chunks: list[bytes]) -> None:
    """Read the rest of stdin into ``chunks`` as :func:`_read_stdin` says, waiting for it."""
    import select

    deadline = time.monotonic() + STDIN_SECONDS
    size = sum(len(chunk) for chunk in chunks)
    while True:
        left = deadline - time.monotonic()
        if not select.select([fd], [], [], max(0.0, min(left, 0.05)))[0]:
            # A pause: what arrived may be whole already (its writer keeps stdin open).
            whole = chunks and chunks[-1].rstrip().endswith(b"}")
            if whole and _whole(b"".join(chunks)) is not None:
                return
            if left <= 0:
                raise _Skip(f"stdin not closed within {STDIN_SECONDS:g} s")
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_STDIN_BYTES:
            raise _Skip(f"stdin over {MAX_STDIN_BYTES} bytes")


def _whole(data: bytes) -> tuple[str, Any] | None:
    """``data`` as text and its JSON value, or None when it is not (yet) a whole document."""
    text = data.decode("utf-8", "replace")
    try:
        return text, jsonio.loads(text)
    except ValueError:
        return None


def _without_lone_surrogates(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with each lone surrogate (which no file, database or log can take) as U+FFFD.

    Iterative, as the payload may be nested as deep as the JSON parser goes.
    """

    def fix(value: str) -> str:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    root: list[Any] = [payload]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = fix(item)
        elif isinstance(item, list):
            stack.extend((item, index) for index in range(len(item)))
        elif isinstance(item, dict):
            fixed = {fix(k) if isinstance(k, str) else k: v for k, v in item.items()}
            container[key] = fixed
            stack.extend((fixed, k) for k in fixed)
    return root[0]  # type: ignore[no-any-return]


def log(event: str, message: str, session_id: str = "") -> None:
    """Append one line to ``<home>/logs/hooks.log``; never raises."""
    try:
        folder = home.ensure_sub("logs")
        path = os.path.join(folder, "hooks.log")
        try:
            if os.path.getsize(path) > LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except OSError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} {event} {session_id or '-'} {message}".replace("\n", " | ") + "\n"
        fd = nofollow.append_fd(path)  # a symlink planted at hooks.log is not followed
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:
        pass


def _log_exception(event: str, exc: BaseException) -> None:
    try:
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
    except Exception:
        at = ""
    log(event, f"{type(exc).__name__}: {exc}{at}")
