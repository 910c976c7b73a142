"""The dashboard's request guard: one ASGI middleware in front of every route.

The server binds 127.0.0.1 only, but a page on any site the user visits can still make the browser
send requests to it. Each rule below closes one way in (seed ADR-015), and each is tested:

* **Host** must be ``127.0.0.1:<port>`` or ``localhost:<port>``. A DNS-rebinding attack points an
  attacker's name at 127.0.0.1, and the browser then sends that name as the Host: refused.
* **Cross-site requests** are refused: ``Sec-Fetch-Site`` must be ``same-origin`` or ``none`` (typed
  in the address bar, opened by ``agentctx ui``) when a browser sends it, and an ``Origin``, when
  sent, must be ours. ``same-site`` is refused too: another port on localhost is the same site.
* **Writes** (every method but GET and HEAD) carry the per-start token in ``X-Agentctx-Token``.
  The token is random per start and only reachable by reading our page, which the same-origin
  policy keeps from other sites; writes must also be JSON, which no cross-site form can send.
* **No cookies**: none is ever set (a ``Set-Cookie`` would be dropped here), none is read.
* **Headers** on every response: a strict Content-Security-Policy (scripts and styles from our own
  files only, no inline script, no framing), ``nosniff``, no referrer, ``no-store``.
"""

from __future__ import annotations

import hmac
import secrets
from typing import TYPE_CHECKING

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_HEADER = "x-agentctx-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "cache-control": "no-store",
}


def new_token() -> str:
    """A fresh random token for one run of the server (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def allowed_hosts(port: int) -> frozenset[str]:
    """The Host header values this server answers to."""
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


def refusal(method: str, headers: Headers, port: int, token: str) -> tuple[int, str] | None:
    """Why a request is refused, as (status, message), or None when it may go on."""
    host = headers.get("host", "").lower()
    if host not in allowed_hosts(port):
        return 400, (
            f"refused: Host {host!r} is not this dashboard's (127.0.0.1:{port} or localhost:{port})"
        )
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return 403, f"refused: a {site} request (open the dashboard from its own address)"
    origin = headers.get("origin")
    if origin is not None and origin.lower() not in {f"http://{h}" for h in allowed_hosts(port)}:
        return 403, f"refused: a request from origin {origin!r}"
    if method not in SAFE_METHODS:
        sent = headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return 403, "refused: a write without this dashboard's token (reload the page)"
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return 415, "refused: writes are JSON (Content-Type: application/json)"
    return None


class Guard:
    """ASGI middleware: refuse what :func:`refusal` refuses, add :data:`HEADERS` to the rest."""

    def __init__(self, app: ASGIApp, *, port: int, token: str) -> None:
        self.app = app
        self.port = port
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                del headers["set-cookie"]
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        problem = refusal(scope["method"], Headers(scope=scope), self.port, self.token)
        if problem is not None:
            status, text = problem
            await PlainTextResponse(text, status_code=status)(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)
