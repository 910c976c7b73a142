"""Meaning at prompt time: the protocol of the warm-model socket and the hook's client (issue 25).

The session's MCP server (``agentctx mcp``, :mod:`agentctx.mcp.lend`) loads the embedding model in
the background and serves a Unix socket in the home, ``run/embed-<pid>.sock`` (folder 0700, socket
0600, one per server process, removed on exit). The UserPromptSubmit hook asks it for the prompt's
nearest current records:

* request, one JSON line of at most :data:`MAX_REQUEST` bytes:
  ``{"v": 1, "text": <prompt, at most MAX_TEXT characters>, "project": <project id>, "k": <n>}``
* answer, one JSON line of at most :data:`MAX_ANSWER` bytes: ``{"v": 1, "state": "ready",
  "model": <name>, "hits": [[<record id>, <cosine>], ...], "spread": [<mean>, <sd>]}`` (nearest
  first, the project's and the global current records only; ``spread``: the mean and standard
  deviation of the prompt's cosine to all those records, optional: a server of before sends
  none), or ``{"v": 1, "state": "loading" | "off" | "busy" | "error"}``.

The hook sends first (:func:`ask`), runs its keyword search while the server embeds, then reads
(:meth:`Pending.hits`) with a hard deadline. No socket, a refused or stale one, a server still
loading, an answer late or malformed: no meaning, the keyword path alone (fail-open). The connect is
non-blocking: a socket whose server died refuses at once, it never hangs the prompt. The prompt goes
to a local process of the same user only, and is never logged.

Standard library only, and the C ``_socket`` module rather than ``socket`` (which imports ``enum``
and ``selectors``: milliseconds on every prompt).
"""

from __future__ import annotations

import os

from agentctx.core import home, jsonio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

PROTOCOL = 1
RUN_DIR = "run"
SOCKET_PREFIX = "embed-"
SOCKET_SUFFIX = ".sock"
#: The prompt text sent (characters): the model reads ~256 tokens of it at most anyway.
MAX_TEXT = 2000
MAX_REQUEST = 16 * 1024
MAX_ANSWER = 64 * 1024
#: Neighbours asked for: the fusion reads a few more than it can inject.
NEIGHBOURS = 12
#: How long the hook waits for the answer, counted from the moment the request was sent (seconds):
#: the keyword search runs meanwhile, so most of it is hidden (benchmarks/results/hooks.md).
DEADLINE = 0.06
#: Sockets tried, newest first, before the hook gives up on meaning for this prompt.
MAX_TRIES = 3
#: Overrides :data:`DEADLINE` (milliseconds) for the benchmarks and tests.
DEADLINE_ENV = "AGENTCTX_MEANING_DEADLINE_MS"
#: Set to ``off`` to skip the socket (the keyword path alone, as without a server).
OFF_ENV = "AGENTCTX_MEANING"


def run_dir() -> str:
    """The folder of the servers' sockets."""
    return home.sub(RUN_DIR)


def socket_name(pid: int) -> str:
    """The socket file name of the server process ``pid``."""
    return f"{SOCKET_PREFIX}{pid}{SOCKET_SUFFIX}"


def socket_pid(name: str) -> int | None:
    """The server pid a socket file name carries, or None when it is not one of ours."""
    if not (name.startswith(SOCKET_PREFIX) and name.endswith(SOCKET_SUFFIX)):
        return None
    digits = name[len(SOCKET_PREFIX) : -len(SOCKET_SUFFIX)]
    return int(digits) if digits.isdigit() else None


def request_line(text: str, project_id: str, k: int = NEIGHBOURS) -> bytes:
    """The request as sent: one JSON line, bounded."""
    body = {"v": PROTOCOL, "text": text[:MAX_TEXT], "project": project_id, "k": k}
    line = jsonio.dumps(body).encode("utf-8", "replace") + b"\n"
    return line if len(line) <= MAX_REQUEST else request_line(text[: len(text) // 2], project_id, k)


def parse_request(line: bytes) -> tuple[str, str, int]:
    """``(text, project id, k)`` of a request line; ValueError when it is not one."""
    if len(line) > MAX_REQUEST:
        raise ValueError("request too long")
    data = jsonio.loads(line.decode("utf-8"))
    if not isinstance(data, dict) or data.get("v") != PROTOCOL:
        raise ValueError("not a version 1 request")
    text, project, k = data.get("text"), data.get("project"), data.get("k", NEIGHBOURS)
    if not isinstance(text, str) or not isinstance(project, str) or not project:
        raise ValueError("text and project must be strings")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 64:
        raise ValueError("k must be an integer from 1 to 64")
    return text[:MAX_TEXT], project, k


class Neighbours(list[tuple[str, float]]):
    """The server's ``(record id, cosine)`` pairs, nearest first, and ``spread``: the mean and the
    standard deviation of the prompt's cosine to every record in scope (None: not sent). The
    spread puts a cosine on the prompt's own scale (:func:`agentctx.core.tiers.signals`)."""

    spread: tuple[float, float] | None = None


def answer_line(
    state: str,
    model: str = "",
    hits: list[tuple[str, float]] | None = None,
    spread: tuple[float, float] | None = None,
) -> bytes:
    """An answer as sent: one JSON line."""
    body: dict[str, object] = {"v": PROTOCOL, "state": state}
    if state == "ready":
        body["model"] = model
        body["hits"] = [[rid, round(float(cos), 4)] for rid, cos in hits or ()]
        if spread is not None:
            body["spread"] = [round(float(spread[0]), 4), round(float(spread[1]), 4)]
    return jsonio.dumps(body).encode() + b"\n"


def parse_answer(line: bytes) -> tuple[str, Neighbours]:
    """``(state, hits)`` of an answer line (``hits.spread`` set when the server sent it; a
    malformed spread is dropped, not fatal); ValueError when it is garbage."""
    data = jsonio.loads(line.decode("utf-8"))
    if not isinstance(data, dict) or data.get("v") != PROTOCOL:
        raise ValueError("not a version 1 answer")
    state = data.get("state")
    if not isinstance(state, str):
        raise ValueError("no state")
    hits = Neighbours()
    if state == "ready":
        raw = data.get("hits")
        if not isinstance(raw, list):
            raise ValueError("no hits")
        for pair in raw:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not isinstance(pair[0], str)
                or not isinstance(pair[1], int | float)
                or isinstance(pair[1], bool)
                or not -1.001 <= pair[1] <= 1.001
            ):
                raise ValueError("a hit is not [id, cosine]")
            hits.append((pair[0], float(pair[1])))
        spread = data.get("spread")
        if (
            isinstance(spread, list)
            and len(spread) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in spread)
            and -1.001 <= spread[0] <= 1.001
            and 0.0 < spread[1] <= 2.0
        ):
            hits.spread = (float(spread[0]), float(spread[1]))
    return state, hits


def deadline() -> float:
    """The wait for an answer (seconds), :data:`DEADLINE` unless the environment sets it."""
    raw = os.environ.get(DEADLINE_ENV, "")
    if raw.isdigit():
        return int(raw) / 1000
    return DEADLINE


class Pending:
    """A request sent to a server; :meth:`hits` reads its answer within the deadline."""

    __slots__ = ("_sock", "sent_at", "state", "why")

    def __init__(self, sock: object, sent_at: float) -> None:
        self._sock: object = sock
        self.sent_at = sent_at
        self.state = "sent"
        self.why = ""

    def close(self) -> None:
        """Give up on the answer."""
        sock: Any = self._sock
        sock.close()

    def hits(self, until: float) -> Neighbours | None:
        """The neighbours, or None (``why`` says it) when no usable answer came by ``until``
        (a ``time.monotonic`` moment; an answer already there is read even when ``until`` has
        passed). Closes the connection."""
        import time

        sock: Any = self._sock
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                # past the deadline, one look without waiting: an answer that came while the
                # keyword search ran is used, never thrown away for being read late
                sock.settimeout(max(0.0, until - time.monotonic()))
                try:
                    chunk = sock.recv(65536)
                except (TimeoutError, BlockingIOError):
                    self.state, self.why = "late", "no answer within the deadline"
                    return None
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if chunk.endswith(b"\n") or size > MAX_ANSWER:
                    break
            data = b"".join(chunks)
            if size > MAX_ANSWER or not data.endswith(b"\n"):
                raise ValueError("answer too long or cut short")
            state, found = parse_answer(data)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            self.state, self.why = "garbage", f"unusable answer ({type(exc).__name__})"
            return None
        finally:
            sock.close()
        self.state = state
        if state != "ready":
            self.why = f"server {state}"
            return None
        return found


def ask(
    text: str,
    project_id: str,
    log: Callable[[str], None] | None = None,
    k: int = NEIGHBOURS,
) -> Pending | None:
    """Send the prompt to a live server's socket (newest first), asking for ``k`` neighbours;
    None when none takes it.

    Never blocks: the connect is non-blocking (a stale socket refuses at once, a full backlog says
    EAGAIN) and the request is small enough for the socket's buffer.
    """
    if os.environ.get(OFF_ENV, "").lower() == "off":
        return None
    folder = run_dir()
    candidates = _sockets(folder)
    if not candidates:
        return None
    import _socket
    import time

    line = request_line(text, project_id, k)
    for path in candidates[:MAX_TRIES]:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.connect(path)
            sent = sock.send(line)
            if sent != len(line):
                raise BlockingIOError("request not taken whole")
        except OSError:
            sock.close()
            continue
        return Pending(sock, time.monotonic())
    if log is not None and os.environ.get("AGENTCTX_DEBUG"):
        log("meaning: no live embedding server answered")
    return None


def _sockets(folder: str) -> list[str]:
    """The server sockets in ``folder``, newest first: only sockets of this user, in a folder of
    this user that no one else may enter, none through a symlink."""
    import stat

    try:
        info = os.lstat(folder)
    except OSError:
        return []
    uid = os.getuid() if hasattr(os, "getuid") else -1
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        return []
    found: list[tuple[float, str]] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        if socket_pid(name) is None:
            continue
        path = os.path.join(folder, name)
        try:
            entry = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISSOCK(entry.st_mode) and entry.st_uid == uid:
            found.append((entry.st_mtime, path))
    found.sort(reverse=True)
    return [path for _mtime, path in found]
