"""The dashboard's request guard: one ASGI middleware in front of every route.

The server binds 127.0.0.1 only, but a page on any site the user visits can still make the browser
send requests to it. Each rule below closes one way in (seed ADR-015), and each is tested:

* **Host** must be ``127.0.0.1:<port>`` or ``localhost:<port>``. A DNS-rebinding attack points an
  attacker's name at 127.0.0.1, and the browser then sends that name as the Host: refused.
* **Cross-site requests** are refused: ``Sec-Fetch-Site`` must be ``same-origin`` or ``none`` (typed
  in the address bar, opened by ``agentctx ui``) when a browser sends it, and an ``Origin``, when
  sent, must be ours. ``same-site`` is refused too: another port on localhost is the same site.
* **Only the user gets in** (issue 16, finding 5). Any local account or process can connect to
  127.0.0.1, so a connection proves nothing. ``agentctx ui`` prints (and opens) a link carrying a
  one-time secret, ``/login?secret=…``; the server exchanges it, once, for a session cookie
  (``HttpOnly``, ``SameSite=Strict``, random per start) and redirects to the clean address. Every
  other request without that cookie gets a 401 that says to open the dashboard with
  ``agentctx ui``: no record content, no token, nothing the API accepts. Only the scripts and the
  stylesheet (``/static/``) are served without it. Another browser gets a link of its own from the
  running server (``agentctx ui --link``): a ``POST /link`` carrying the control secret of this
  start, which only the user's own account can read (:mod:`agentctx.web.link`), answers a new
  one-time secret.
* **Writes** (every method but GET and HEAD) carry the per-start token in ``X-Agentctx-Token``,
  which only an authenticated page carries; writes must also be JSON, which no cross-site form can
  send.
* **Cookies**: only our session cookie is set (by the login exchange; any other ``Set-Cookie`` is
  dropped here), and only it is read.
* **Headers** on every response: a strict Content-Security-Policy (scripts and styles from our own
  files only, no inline script, no framing), ``nosniff``, no referrer, ``no-store``.
"""

from __future__ import annotations

import hmac
import secrets
from typing import TYPE_CHECKING

from starlette.datastructures import Headers, MutableHeaders, QueryParams
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from agentctx.web import link

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_HEADER = "x-agentctx-token"
SESSION_COOKIE = "agentctx_session"
#: ``/login`` and ``/link`` (where ``agentctx ui --link`` asks the running server for a new link).
LOGIN_PATH, LINK_PATH, CONTROL_HEADER = link.LOGIN_PATH, link.LINK_PATH, link.CONTROL_HEADER
#: One-time secrets waiting for their browser; a new one beyond these drops the oldest.
LOGINS_KEPT = 8
OPEN_VIA_UI = (
    "This dashboard needs a one-time link: `agentctx ui` prints (and opens) one when it starts, "
    "and `agentctx ui --link` gets a new one from the running dashboard."
)
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


class Credentials:
    """One start's secrets: the write token, the one-time login secrets, the control secret that
    asks for another (``agentctx ui --link``) and the session cookie."""

    __slots__ = ("control", "logins", "session", "token")

    def __init__(self, token: str | None = None) -> None:
        self.token = token or new_token()
        self.control = new_token()
        self.logins: list[str] = []
        self.session = new_token()

    def new_login(self) -> str:
        """A new one-time login secret (at most :data:`LOGINS_KEPT` wait; the oldest goes)."""
        secret = new_token()
        self.logins = [*self.logins, secret][-LOGINS_KEPT:]
        return secret

    def exchange(self, secret: str) -> bool:
        """True, once, for a login secret; it is spent then (a replay gets False)."""
        found = None
        for expected in self.logins:  # every one compared, in constant time each
            if hmac.compare_digest(secret.encode(), expected.encode()):
                found = expected
        if found is None:
            return False
        self.logins = [s for s in self.logins if s != found]
        return True

    def controls(self, headers: Headers) -> bool:
        """The request carries this start's control secret (only ``agentctx ui --link`` has it)."""
        sent = headers.get(CONTROL_HEADER, "")
        return bool(sent) and hmac.compare_digest(sent.encode(), self.control.encode())

    def authenticated(self, headers: Headers) -> bool:
        """The request carries this start's session cookie."""
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == SESSION_COOKIE and hmac.compare_digest(
                value.encode(), self.session.encode()
            ):
                return True
        return False

    def session_cookie(self) -> str:
        """The ``Set-Cookie`` value of the session (no ``Max-Age``: it ends with the browser)."""
        return f"{SESSION_COOKIE}={self.session}; Path=/; HttpOnly; SameSite=Strict"


def allowed_hosts(port: int) -> frozenset[str]:
    """The Host header values this server answers to."""
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


def refusal(
    method: str, headers: Headers, port: int, token: str, *, write: bool = True
) -> tuple[int, str] | None:
    """Why a request is refused, as (status, message), or None when it may go on (``write``
    False: a POST that needs no write token, as ``/link``, which checks its own secret)."""
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
    if method not in SAFE_METHODS and write:
        sent = headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return 403, "refused: a write without this dashboard's token (reload the page)"
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return 415, "refused: writes are JSON (Content-Type: application/json)"
    return None


class Guard:
    """ASGI middleware: refuse what :func:`refusal` refuses, let in only the session (or the
    login exchange, or ``/static/``), and add :data:`HEADERS` to every response."""

    def __init__(self, app: ASGIApp, *, port: int, credentials: Credentials) -> None:
        self.app = app
        self.port = port
        self.credentials = credentials
        self.token = credentials.token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        problem = refusal(scope["method"], headers, self.port, self.token, write=path != LINK_PATH)
        if problem is not None:
            status, text = problem
            response: Response = PlainTextResponse(text, status_code=status)
        elif path == LOGIN_PATH:
            response = self._login(scope)
        elif path == LINK_PATH:
            response = self._link(scope, headers)
        elif path.startswith("/static/") or self.credentials.authenticated(headers):
            await self.app(scope, receive, _with_headers(send))
            return
        else:
            response = _unauthenticated(path)
        cookie = self.credentials.session_cookie() if response.status_code == 303 else None
        await response(scope, receive, _with_headers(send, cookie))

    def _login(self, scope: Scope) -> Response:
        """Exchange the one-time secret for the session cookie and go to the clean address."""
        query = QueryParams(scope.get("query_string", b"").decode("latin-1"))
        if scope["method"] != "GET" or not self.credentials.exchange(query.get("secret", "")):
            return _unauthenticated(LOGIN_PATH)
        return RedirectResponse("/", status_code=303)

    def _link(self, scope: Scope, headers: Headers) -> Response:
        """A new one-time login secret, for the holder of the control secret only."""
        if scope["method"] != "POST" or not self.credentials.controls(headers):
            return JSONResponse({"error": "refused: not this dashboard's control secret"}, 403)
        return JSONResponse({"secret": self.credentials.new_login()})


def _with_headers(send: Send, cookie: str | None = None) -> Send:
    """``send`` with :data:`HEADERS` on the response, every ``Set-Cookie`` dropped but ours."""

    async def sender(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            del headers["set-cookie"]
            for name, value in HEADERS.items():
                headers[name] = value
            if cookie is not None:
                headers.append("set-cookie", cookie)
        await send(message)

    return sender


def _unauthenticated(path: str) -> Response:
    """The answer to a request without the session: 401, and a pointer to ``agentctx ui``."""
    if path.startswith("/api/"):
        return JSONResponse({"error": OPEN_VIA_UI}, status_code=401)
    return PlainTextResponse(OPEN_VIA_UI + "\n", status_code=401)
