"""Test-only pause points: how a crash test kills a sync with SIGKILL at an exact step.

``AGENTCTX_HUB_PAUSE=<point>:<file>`` (only the crash tests set it): when a sync reaches
``point``, it writes its pid to ``file`` and sleeps, so the test can ``kill -9`` it there; if no
kill comes within :data:`PAUSE_S` it goes on. Without the variable (always, outside those tests)
:func:`reached` does nothing. The points:

- ``push-acked``: the hub has committed a push batch and this process holds the batch's acks in
  an open store transaction that has not committed (``sync._stamp_acks``);
- ``pull-applying``: a pulled page is half applied in an open store transaction (``sync._apply``).
"""

from __future__ import annotations

import os

import anyio

from agentctx.core.files import write_atomic

VARIABLE = "AGENTCTX_HUB_PAUSE"
#: How long a pause waits for its kill before going on.
PAUSE_S = 60.0


async def reached(point: str) -> None:
    """Pause here when ``AGENTCTX_HUB_PAUSE`` names ``point`` (module docstring). The sync's own
    coroutine waits here (its store transaction stays open); the event loop is not blocked."""
    wanted, _, path = os.environ.get(VARIABLE, "").partition(":")
    if wanted != point or not path:
        return
    await anyio.to_thread.run_sync(write_atomic, path, str(os.getpid()).encode())
    await anyio.sleep(PAUSE_S)
