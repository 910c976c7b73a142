"""``agentctx ui``: serve the local dashboard on 127.0.0.1 and open it in the browser.

Starlette, uvicorn, the views and ``webbrowser`` load only for this command (imported inside it),
so the other commands start as fast as before. The server stops on Ctrl-C (or SIGTERM) and the command then
exits 0.
"""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
from cyclopts import Parameter

from agentctx.cli import app
from agentctx.store import Store

MAX_PORT = 65535


@app.command
async def ui(
    *,
    port: Annotated[int, Parameter(help="Port on 127.0.0.1 (0 picks a free one).")] = 7327,
    no_open: Annotated[
        bool, Parameter(name="--no-open", negative="", help="Do not open a browser.")
    ] = False,
    link: Annotated[
        bool,
        Parameter(
            name="--link",
            negative="",
            help="Ask the dashboard already running for a new one-time link (another browser).",
        ),
    ] = False,
) -> int:
    """Serve the dashboard on http://127.0.0.1:PORT/ until Ctrl-C: inspect, search and correct
    records, see the graph, the profile, sessions and the CLAUDE.md drift.

    Its link logs in one browser, once; ``agentctx ui --link`` gets another from the running one.

    Example: ``agentctx ui --port 8000``.
    """
    if link:
        return await _new_link(no_open=no_open)
    if not 0 <= port <= MAX_PORT:  # a usage error: one line, exit 2 (as cyclopts' own)
        sys.stderr.write(f"agentctx: error: --port must be 0 to {MAX_PORT} (0 picks a free one)\n")
        return 2
    import webbrowser

    from agentctx.web import link as links
    from agentctx.web import server

    sock = server.bind(port)
    store = await Store.open()
    try:
        async with server.running(store, sock, handle_signals=True) as dashboard:
            # where `agentctx ui --link` finds this server (a 0600 file of the home)
            await anyio.to_thread.run_sync(links.publish, dashboard.port, dashboard.control)
            try:
                # the one-time link: the server trades it, once, for the browser's session cookie
                sys.stdout.write(
                    f"agentctx dashboard: {dashboard.login_url}  (a one-time link; Ctrl-C stops "
                    "it; `agentctx ui --link` gives another)\n"
                )
                sys.stdout.flush()
                if not no_open:
                    # webbrowser may start a program and wait for it: not on the event loop
                    await anyio.to_thread.run_sync(webbrowser.open, dashboard.login_url)
                await dashboard.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(links.withdraw, dashboard.control)
    finally:
        await store.close()
    sys.stdout.write("agentctx dashboard: stopped\n")
    return 0


async def _new_link(*, no_open: bool) -> int:
    """``agentctx ui --link``: a new one-time link from the running dashboard, printed (opened)."""
    import webbrowser

    from agentctx.web import link as links

    url = await anyio.to_thread.run_sync(links.ask)
    sys.stdout.write(f"agentctx dashboard: {url}  (a new one-time link to the running dashboard)\n")
    sys.stdout.flush()
    if not no_open:
        await anyio.to_thread.run_sync(webbrowser.open, url)
    return 0
