"""``agentctx demo``: the whole loop on a scripted session, in a temporary home, offline."""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from agentctx.cli import _out, app


@app.command
async def demo(
    *,
    keep: Annotated[
        bool,
        Parameter(negative="", help="Keep the temporary home and print its path, to look around."),
    ] = False,
) -> int:
    """Replay a scripted session through the hooks, extraction (a local stand-in, not Claude) and
    consolidation, then show what the next session is given and what ctx_search finds.

    Example: ``agentctx demo``.
    """
    from agentctx.demo import run_demo

    await run_demo(keep=keep, write=_out)
    return 0
