"""The MCP server Claude Code starts for a session (``agentctx mcp``, stdio; ADR-008).

:mod:`~agentctx.mcp.server` is what the handshake needs (the tools' names, descriptions and
schemas; the lifespan); :mod:`~agentctx.mcp.tools` the tools' bodies over the library, loaded
after the handshake; :mod:`~agentctx.mcp.models` the results' pydantic models (the output schemas);
:mod:`~agentctx.mcp.graph` the graph reads of ``ctx_related`` and of the ``file`` filter.

The SDK is imported by its absolute name (``import mcp...``), which resolves to the SDK from here
too (absolute imports never look in the importing package).
"""
