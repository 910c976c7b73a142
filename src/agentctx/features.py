"""Which optional parts this installation of agentctx has, checked without importing them.

Standard library only (the hooks ask). The hooks start background workers and ``init`` registers
the MCP server only when the modules behind them exist, so nothing points at a command that is not
there, and the SessionStart digest names only tools Claude can call.
"""

from __future__ import annotations

WORKERS = "agentctx.workers"
MCP_SERVER = "agentctx.mcp.server"


def available(module: str) -> bool:
    """True when ``module`` can be imported (looked up, not imported)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
