"""The Claude Code integration: what agentctx reads and writes of Claude Code's own files.

:mod:`~agentctx.claude.install` registers the hooks and the MCP server in Claude Code's settings,
:mod:`~agentctx.claude.transcript` reads a session's transcript (JSONL) for extraction, and
:mod:`~agentctx.claude.claudemd` keeps agentctx's marked block of a project's ``CLAUDE.md``.
This ``__init__`` imports nothing, so a hook that reads a transcript pays for that module only.
"""
