"""Running the dashboard: uvicorn inside the caller's event loop, on a socket bound here.

The socket is bound (127.0.0.1 only) and listening before uvicorn starts, so the port is known
at once (``port=0`` picks a free one, as the tests do), a busy port is a clear error rather than a
log line, and a client that connects early waits in the backlog instead of being refused.

:func:`running` serves while its ``async with`` block runs and stops when the block ends; the
CLI waits in it for Ctrl-C. uvicorn's own signal capture re-raises the signal after a graceful
stop, which would end the CLI in a KeyboardInterrupt; :class:`_Server` stops on SIGINT/SIGTERM
without re-raising (and installs no handlers at all when embedded, as in the tests).
"""

from __future__ import annotations

import errno
import signal
import socket
import threading
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import uvicorn

from agentctx.core.errors import AgentctxError
from agentctx.web import security
from agentctx.web.app import create_app
from agentctx.web.link import login_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from types import FrameType

    from agentctx.store import Store

HOST = "127.0.0.1"
DEFAULT_PORT = 7327
#: Seconds uvicorn gives open requests at shutdown before closing them.
GRACE = 3


class PortInUseError(AgentctxError):
    """Raised by :func:`bind` when the port is taken by another program."""


def bind(port: int = DEFAULT_PORT) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:``port`` (0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(
                f"port {port} on {HOST} is in use (another `agentctx ui`?); pass --port N, "
                "or run `agentctx ui --link` for a new link to the dashboard already running"
            ) from exc
        raise
    sock.setblocking(False)
    return sock


@dataclass(frozen=True, slots=True)
class Dashboard:
    """A running dashboard: where it is and the token its pages carry."""

    url: str
    port: int
    token: str
    stopped: anyio.Event
    #: The one-time link that logs a browser in (``agentctx ui`` prints and opens it).
    login_url: str = ""
    #: The secret that asks this server for another one-time link (``agentctx ui --link``).
    control: str = ""

    async def wait(self) -> None:
        """Return when the server has stopped (on SIGINT/SIGTERM when it handles signals)."""
        await self.stopped.wait()


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, *, handle_signals: bool) -> None:
        super().__init__(config)
        self._handle_signals = handle_signals

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop on SIGINT/SIGTERM; unlike uvicorn's, do not re-raise the signal afterwards."""
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(sig: int, frame: FrameType | None) -> None:
            # A second Ctrl-C while requests drain stops at once.
            self.force_exit = self.should_exit
            self.should_exit = True

        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, stop) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@asynccontextmanager
async def running(
    store: Store, sock: socket.socket, *, handle_signals: bool = False
) -> AsyncIterator[Dashboard]:
    """Serve the dashboard for ``store`` on ``sock`` until the block ends (or a signal stops it)."""
    port = int(sock.getsockname()[1])
    credentials = security.Credentials()
    token = credentials.token
    app = create_app(store, port=port, credentials=credentials)
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACE,
    )
    server = _Server(config, handle_signals=handle_signals)
    stopped = anyio.Event()

    async def serve() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            stopped.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                yield Dashboard(
                    url=f"http://{HOST}:{port}/",
                    port=port,
                    token=token,
                    stopped=stopped,
                    login_url=login_url(port, credentials.new_login()),
                    control=credentials.control,
                )
            finally:
                server.should_exit = True
    finally:
        sock.close()  # uvicorn closes it on a clean stop, not when its task is cancelled
