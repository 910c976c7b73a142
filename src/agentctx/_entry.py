"""The console entry point: route ``agentctx hook …`` to the fast path before anything heavy loads.

Hooks run on every Claude Code event, so ``agentctx hook`` must not pay for cyclopts, anthropic, mcp or
fastembed imports. This module imports nothing but ``sys`` until it knows which path it is on. It is
the only module outside :mod:`agentctx.hooks` that imports it (:func:`hook`).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the agentctx command line."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and argv[1:2] not in (["--help"], ["-h"]):
        import os

        if os.environ.get("AGENTCTX_EXTRACTION_CHILD"):
            # A `claude` that agentctx runs to extract (agentctx.core.backend.CHILD_MARKER): its
            # hooks must not start agentctx again. Exit before reading anything.
            os._exit(0)
        import agentctx.core

        agentctx.core.ENDS_WITH_HANDLER = True
        code = hook(argv[1:])
        # Every file the hook wrote is closed and stdout is flushed by now; skipping the
        # interpreter's shutdown saves a sizeable share of a bare start on every prompt.
        sys.stderr.flush()
        os._exit(code)
    if argv in (["--version"], ["-V"]):  # nothing to load for it
        from agentctx import __version__

        sys.stdout.write(f"{__version__}\n")
        sys.exit(0)
    if argv == ["mcp"]:  # Claude Code waits ~2 s for the server: skip the CLI's imports
        import signal

        import anyio

        # Claude Code stops its servers with SIGINT: end at once (every write is committed or
        # rolled back by SQLite), instead of waiting for the stdin reader thread.
        signal.signal(signal.SIGINT, signal.SIG_DFL)

        from agentctx.mcp.server import serve

        anyio.run(serve)
        sys.exit(0)
    from agentctx.cli import run

    sys.exit(run(argv))


def hook(argv: list[str]) -> int:
    """Run one Claude Code hook (``argv``: the event's CLI name); always 0. The one way in to
    :mod:`agentctx.hooks`."""
    from agentctx.hooks.runner import run_hook

    return run_hook(argv)
