"""``agentctx mcp``: the MCP server Claude Code starts for a session (stdio)."""

from __future__ import annotations

from agentctx.cli import app


@app.command
async def mcp() -> int:
    """Serve the MCP tools on stdio (Claude Code runs this; `agentctx init` registers it).

    Example: ``agentctx mcp`` (what Claude Code runs; ``agentctx init`` registers it)``.
    """
    # Imported here: mcp and pydantic load only for this command, never for the other commands.
    from agentctx.mcp.server import serve

    await serve()
    return 0
