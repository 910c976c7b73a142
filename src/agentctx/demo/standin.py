"""A local stand-in for the Messages API, for ``agentctx demo`` only: it is not Claude.

A stdlib HTTP server on 127.0.0.1 (an ephemeral port, a daemon thread) that the real ``anthropic``
client reaches through ``base_url``. ``POST /v1/messages`` that forces the extraction tool gets the
canned tool input written for the demo transcript; any other Messages request gets a text answer
saying so (callers then see "no tool call" and carry on); other paths get the API's 404 shape. It
reports zero tokens: nothing was billed. Each request body is kept so the demo can show what was
sent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

LABEL = "LOCAL STAND-IN for the Messages API (not Claude)"
MAX_BODY_BYTES = 16 * 1024 * 1024


class StandIn:
    """``with StandIn(tool_name, tool_input) as api:`` serves until the block ends; ``api.url``."""

    def __init__(self, tool_name: str, tool_input: dict[str, Any]) -> None:
        self.tool_name = tool_name
        self.tool_input = tool_input
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="agentctx-demo-api", daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL for the client."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._httpd.shutdown()
        self._thread.join()
        self._httpd.server_close()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The Messages API response to one request body."""
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
        choice = body.get("tool_choice")
        forced = choice.get("name") if isinstance(choice, dict) else None
        if forced == self.tool_name:
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_demo_{number}",
                    "name": self.tool_name,
                    "input": self.tool_input,
                }
            ]
            stop = "tool_use"
        else:
            text = f"The agentctx demo's stand-in only answers the {self.tool_name} call."
            content, stop = [{"type": "text", "text": text}], "end_turn"
        return {
            "id": f"msg_demo_{number}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model") or "stand-in"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }


def _handler(api: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(min(size, MAX_BODY_BYTES))
            if self.path.split("?")[0] != "/v1/messages":
                self._send(404, _error("not_found_error", f"the stand-in has no {self.path}"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                self._send(400, _error("invalid_request_error", "the body is not a JSON object"))
                return
            self._send(200, api.answer(body))

        def do_GET(self) -> None:
            self._send(404, _error("not_found_error", f"the stand-in has no {self.path}"))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the demo's output is its own; requests are kept in ``api.requests``

    return Handler


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
