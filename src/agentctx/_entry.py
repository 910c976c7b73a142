"""The console entry point: route ``agentctx hook …`` to the fast path before anything heavy loads.

Hooks run on every Claude Code event, so ``agentctx hook`` must not pay for cyclopts, anthropic, mcp or
fastembed imports. This module imports nothing but ``sys`` until it knows which path it is on. It is
the only module outside :mod:`agentctx.hooks` that imports it (:func:`hook`).

No ``from __future__ import annotations`` here nor in ``agentctx/__init__.py`` (their annotations
evaluate at run time as they are): a hook stands in for ``__future__`` (:func:`_future_stand_in`)
before the first module that names it loads.
"""

import sys


def main() -> None:
    """Run the agentctx command line."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and argv[1:2] not in (["--help"], ["-h"]):
        import gc
        import os

        # A hook lives for milliseconds and ends with os._exit: the cyclic collector's passes
        # while its modules load only cost time (ADR-017, speed pass 4).
        gc.disable()
        _future_stand_in()

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


class _Feature:
    """``__future__.annotations`` as the stand-in gives it: the release facts and the compiler
    flag of the real one (CPython 3.11-3.13), what ``compile()`` callers read."""

    optional = (3, 7, 0, "beta", 1)
    mandatory = None
    compiler_flag = 0x1000000  # CO_FUTURE_ANNOTATIONS

    def getOptionalRelease(self) -> tuple[int, int, int, str, int]:  # its API
        return self.optional

    def getMandatoryRelease(self) -> None:  # its API
        return self.mandatory


def _future_stand_in() -> None:
    """Put a stand-in for the ``__future__`` module in ``sys.modules``, in a hook process only.

    Every agentctx module starts with ``from __future__ import annotations``: a compiler directive
    that also imports the module at run time, 0.75M instructions on every hook (the finder, the
    file, its code) for one attribute. The stand-in has that attribute; any other feature loads
    the real module in its place (module ``__getattr__``; a dunder name the import system asks of
    every module is not one). Nothing when ``__future__`` is loaded already.
    """
    if "__future__" in sys.modules:
        return
    stand_in = type(sys)("__future__")
    stand_in.annotations = _Feature()  # type: ignore[attr-defined]

    def real(name: str) -> object:
        if name.startswith("__"):  # what the import system asks of any module (__path__ ...)
            raise AttributeError(name)
        if sys.modules.get("__future__") is stand_in:
            del sys.modules["__future__"]
        import __future__

        return getattr(__future__, name)

    stand_in.__getattr__ = real  # type: ignore[method-assign]
    sys.modules["__future__"] = stand_in


def hook(argv: list[str]) -> int:
    """Run one Claude Code hook (``argv``: the event's CLI name); always 0. The one way in to
    :mod:`agentctx.hooks`."""
    from agentctx.hooks.runner import run_hook

    return run_hook(argv)
