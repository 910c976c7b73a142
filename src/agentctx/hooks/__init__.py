"""The Claude Code hooks: short-lived, fail-open processes on the synchronous fast path.

``agentctx hook <event>`` reaches :func:`agentctx.hooks.runner.run_hook` straight from the console
entry point. Modules here import the standard library, the SQLite driver and little else; the
injection hooks avoid even ``json``, ``re`` and ``typing`` where they can (see docs/architecture.md,
ADR P-1), because every millisecond of start-up is paid on every prompt. Handlers only: they parse the
event, call :mod:`agentctx.core` and print the contract; nothing but :mod:`agentctx._entry` imports
this package.
"""
