"""A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages API, for tests.

The model boundary is the one place tests fake: Claude Code (``ANTHROPIC_BASE_URL``) and the
``anthropic`` client (``base_url=``) talk to this server over loopback exactly as they would to the
API. It records every request, and a *script* decides each ``POST /v1/messages`` reply: text, a
``tool_use`` block, or an API error. The reply goes out as JSON, or as server-sent events when the
request asks for ``"stream": true`` (the event sequence and shapes of the Messages API).

    with MessagesServer(lambda request: TextReply("done")) as server:
        env["ANTHROPIC_BASE_URL"] = server.url
        ...
        assert server.messages_requests()[0].body["messages"]

One server can play several models at once: *routes* (a matcher and its own script, the first
matching route decides) send, say, the extraction calls of agentctx (``forced_tool(TOOL_NAME)``), or
the requests for one model (``lambda r: r.model.startswith("claude-haiku")``), to one script and
Claude Code's turns to another; a request no route matches goes to the main script.

``POST /v1/messages/count_tokens`` answers an estimate; any other path gets a 404 in the API's
error shape. (Claude Code 2.1.332 in ``-p`` mode sends nothing else here: one
``POST /v1/messages?beta=true`` with ``"stream": true`` per model turn.)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import TracebackType
    from typing import Self

__all__ = [
    "ErrorReply",
    "Matcher",
    "MessagesServer",
    "Recorded",
    "Reply",
    "Script",
    "TextReply",
    "ToolUseReply",
    "error_json",
    "forced_tool",
    "message_json",
    "sse_events",
]

#: The API's error ``type`` for each status it uses.
ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
DEFAULT_MODEL: Final = "claude-sonnet-4-5"
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request as the server received it."""

    method: str
    path: str  #: with the query string, e.g. ``/v1/messages?beta=true``
    headers: dict[str, str]  #: names lower-cased
    body: Any  #: the parsed JSON body (None when empty or not JSON)
    received: float = field(default_factory=time.monotonic)
    raw: bytes = b""  #: the body as sent, for byte-level checks (a secret must never be in it)

    @property
    def route(self) -> str:
        """The path without its query string."""
        return urlsplit(self.path).path

    @property
    def model(self) -> str:
        """The ``model`` the request names ('' when none)."""
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else ""

    @property
    def tool_choice(self) -> str:
        """The tool a ``tool_choice`` of type ``tool`` forces ('' when none is forced)."""
        choice = self.body.get("tool_choice") if isinstance(self.body, dict) else None
        if isinstance(choice, dict) and choice.get("type") == "tool":
            name = choice.get("name")
            return name if isinstance(name, str) else ""
        return ""

    @property
    def stream(self) -> bool:
        """Whether the request asked for server-sent events."""
        return isinstance(self.body, dict) and self.body.get("stream") is True

    def texts(self) -> list[str]:
        """Every text of the request's ``system`` and ``messages`` (string contents and text blocks)."""
        if not isinstance(self.body, dict):
            return []
        found: list[str] = []
        _collect_texts(self.body.get("system"), found)
        for message in self.body.get("messages") or []:
            if isinstance(message, dict):
                _collect_texts(message.get("content"), found)
        return found


@dataclass(frozen=True, slots=True)
class TextReply:
    """An assistant message with one text block (``stop_reason: end_turn``)."""

    text: str
    latency: float = 0.0  #: seconds to wait before answering, on top of the server's


@dataclass(frozen=True, slots=True)
class ToolUseReply:
    """An assistant message that calls a tool (``stop_reason: tool_use``), after optional text."""

    name: str
    input: dict[str, Any]
    text: str = ""
    id: str = ""  #: the ``toolu_…`` id; generated when empty
    latency: float = 0.0


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An API error: the status (429, 500, 529, …) with ``{"type":"error","error":{…}}``."""

    status: int
    message: str = "scripted error"
    retry_after: float | None = None  #: sent as the ``retry-after`` header when set
    latency: float = 0.0


Reply = TextReply | ToolUseReply | ErrorReply
#: Decides the reply to one ``POST /v1/messages``; None means "use the queue, then the default".
Script: TypeAlias = "Callable[[Recorded], Reply | None]"
#: Picks the requests a route answers.
Matcher: TypeAlias = "Callable[[Recorded], bool]"


def forced_tool(name: str) -> Matcher:
    """Requests whose ``tool_choice`` forces the tool ``name`` (agentctx's Haiku calls do)."""
    return lambda request: request.tool_choice == name


class MessagesServer:
    """A Messages API stand-in on an ephemeral loopback port, serving from a background thread."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        replies: Iterable[Reply] = (),
        default: Reply | None = None,
        latency: float = 0.0,
        routes: Iterable[tuple[Matcher, Script]] = (),
        hold: threading.Event | None = None,
    ) -> None:
        self._script = script
        self._routes: list[tuple[Matcher, Script]] = list(routes)
        self._queue: deque[Reply] = deque(replies)
        self.default: Reply = default if default is not None else TextReply("OK")
        self.latency = latency
        #: the latency each answer waited (seconds), in the order the answers went out
        self.delays: list[float] = []
        #: when given, every answer waits until the test sets it (at most a minute)
        self.hold = hold
        self._requests: list[Recorded] = []
        self._changed = threading.Condition()
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="messages-server", daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give a client (``ANTHROPIC_BASE_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    # -- script and records -------------------------------------------------------------------------

    def route(self, matcher: Matcher, script: Script) -> None:
        """Answer the requests ``matcher`` picks with ``script`` (after the routes added before)."""
        with self._changed:
            self._routes.append((matcher, script))

    def push(self, *replies: Reply) -> None:
        """Queue replies for the next ``/v1/messages`` requests the script leaves to the queue."""
        with self._changed:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[Recorded]:
        """A snapshot of every request received so far, in arrival order."""
        with self._changed:
            return list(self._requests)

    def messages_requests(self, matcher: Matcher | None = None) -> list[Recorded]:
        """The ``POST /v1/messages`` requests (any query string; only those ``matcher`` picks)."""
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.route == "/v1/messages" and (matcher is None or matcher(r))
        ]

    def wait_for(
        self, predicate: Callable[[list[Recorded]], bool], timeout: float = 10.0
    ) -> list[Recorded]:
        """Block until ``predicate(requests)`` holds; the requests then, or TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(list(self._requests)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching request within {timeout} s")
                self._changed.wait(left)
            return list(self._requests)

    def _record(self, request: Recorded) -> None:
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()

    def _decide(self, request: Recorded) -> Reply:
        with self._changed:
            routes = list(self._routes)
        script = next((s for matcher, s in routes if matcher(request)), self._script)
        reply = script(request) if script is not None else None
        if reply is not None:
            return reply
        with self._changed:
            return self._queue.popleft() if self._queue else self.default


# -- wire format -----------------------------------------------------------------------------------


def _collect_texts(content: Any, found: list[str]) -> None:
    if isinstance(content, str):
        found.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    found.append(block["text"])
                elif block.get("type") == "tool_result":
                    _collect_texts(block.get("content"), found)


def _message_id() -> str:
    return f"msg_test{next(_ids):08d}"


def _input_tokens(body: Any) -> int:
    """A rough count (4 characters a token) over the request; enough for usage fields."""
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def _blocks(reply: TextReply | ToolUseReply) -> list[dict[str, Any]]:
    if isinstance(reply, TextReply):
        return [{"type": "text", "text": reply.text}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    tool_id = reply.id or f"toolu_test{next(_ids):08d}"
    blocks.append({"type": "tool_use", "id": tool_id, "name": reply.name, "input": reply.input})
    return blocks


def message_json(reply: TextReply | ToolUseReply, request_body: Any) -> dict[str, Any]:
    """The complete ``message`` object of a non-streaming reply."""
    content = _blocks(reply)
    output = max(1, len(json.dumps(content)) // 4)
    return {
        "id": _message_id(),
        "type": "message",
        "role": "assistant",
        "model": _model(request_body),
        "content": content,
        "stop_reason": "tool_use" if isinstance(reply, ToolUseReply) else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": _input_tokens(request_body),
            "output_tokens": output,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def sse_events(
    reply: TextReply | ToolUseReply, request_body: Any
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` sequence of a streamed reply, as the Messages API sends it."""
    message = message_json(reply, request_body)
    content = message.pop("content")
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(content):
        if block["type"] == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"])]
        else:
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"], ensure_ascii=False)
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in _chunks(raw)]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": first},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _chunks(text: str, size: int = 24) -> list[str]:
    """Split like a stream does (an empty text still gets one delta)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _model(body: Any) -> str:
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and model else DEFAULT_MODEL


def error_json(status: int, message: str) -> dict[str, Any]:
    """The API's error body for ``status``."""
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- HTTP ------------------------------------------------------------------------------------------


def _handler_for(server: MessagesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as API clients expect
        server_version = "messages-server/1"

        def do_POST(self) -> None:
            self._serve()

        def do_GET(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def do_HEAD(self) -> None:
            self._send(404, b"", "application/json")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test reads server.requests instead

        def _serve(self) -> None:
            raw = self._read_body()
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = Recorded(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw=raw,
            )
            server._record(request)
            if self.command == "POST" and request.route == "/v1/messages":
                self._messages(request)
            elif self.command == "POST" and request.route == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": _input_tokens(body)})
            else:
                self._json(404, error_json(404, f"{self.command} {request.route}: not served here"))

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after each chunk
                while self.rfile.readline().strip():  # trailers, up to the empty line
                    pass
                return b"".join(chunks)
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _messages(self, request: Recorded) -> None:
            try:
                reply = server._decide(request)
            except Exception as exc:  # a broken script: make it visible to the client and test
                self._json(500, error_json(500, f"script failed: {exc!r}"))
                return
            if server.hold is not None:
                server.hold.wait(60)  # released by the test: an answer that cannot exist before
            delay = server.latency + reply.latency
            if delay > 0:
                time.sleep(delay)  # the configured latency of the stand-in API, not a wait
            with server._changed:
                server.delays.append(delay)
            if isinstance(reply, ErrorReply):
                extra = (
                    {} if reply.retry_after is None else {"retry-after": f"{reply.retry_after:g}"}
                )
                self._json(reply.status, error_json(reply.status, reply.message), extra)
            elif request.stream:
                stream = "".join(
                    f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
                    for name, data in sse_events(reply, request.body)
                )
                self._send(200, stream.encode(), "text/event-stream; charset=utf-8")
            else:
                self._json(200, message_json(reply, request.body))

        def _json(self, status: int, data: Any, extra: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(data).encode(), "application/json", extra)

        def _send(
            self,
            status: int,
            payload: bytes,
            content_type: str,
            extra: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(payload)))
            self.send_header("request-id", f"req_test{next(_ids):08d}")
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (a killed worker, a cancelled call) is not an error here."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return
        super().handle_error(request, client_address)
