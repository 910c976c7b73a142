"""A failed model download is remembered: no new try for an hour, then a day (issue 27).

Offline, every consolidation and sync used to import fastembed and probe the hub again (~2.5 s)
to learn what the last run already knew. A failed download writes ``model-download.json`` in the
home (the model's name, how many downloads failed in a row, when, why, and the time before which
:func:`agentctx.embeddings.models.load_model` does not try again); a model that loads removes it.
``agentctx model fetch`` always tries (the user asked). The first failure says, once, how to get
the model; while the back-off holds, callers say only that it holds and until when.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from agentctx.core import files, home
from agentctx.core.errors import AgentctxError

FILE_NAME = "model-download.json"
#: Seconds without a new try after the 1st, 2nd, ... failure in a row (the last one repeats).
BACKOFF_S = (3600, 86400)
#: How to get the model without the automatic download: said with every failure.
ADVICE = (
    "`agentctx model fetch` downloads it when online; or copy the model folder to this "
    "machine and `agentctx config set embedding.path <folder>`"
)


@dataclass(frozen=True, slots=True)
class Failure:
    """The last failed download of a model: how many in a row, when, why, and the next try."""

    model: str
    failures: int
    failed_at: float
    until: float
    reason: str

    def next_try(self) -> str:
        """The time of the next automatic try, UTC (``2026-12-06 15:02 UTC``)."""
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.until))

    def note(self) -> str:
        """A short line for a run that did not try (the first failure said :data:`ADVICE`)."""
        return (
            f"the model download failed ({self.reason}); no new try before {self.next_try()}, "
            "`agentctx model fetch` tries now"
        )


def path() -> str:
    """The back-off file in the home."""
    return os.path.join(home.home_dir(), FILE_NAME)


def last_failure(model: str) -> Failure | None:
    """The recorded failure of ``model`` (another model's is not its), or None."""
    try:
        with open(path(), "rb") as handle:
            data = json.loads(handle.read(64 * 1024))
        found = Failure(
            model=str(data["model"]),
            failures=int(data["failures"]),
            failed_at=float(data["failed_at"]),
            until=float(data["until"]),
            reason=str(data.get("reason", ""))[:300],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, or unreadable: as if none (the next failure rewrites it)
    return found if found.model == model else None


def waiting(model: str, now: float | None = None) -> Failure | None:
    """The failure whose back-off still holds for ``model``, or None (a download may be tried)."""
    found = last_failure(model)
    current = time.time() if now is None else now
    return found if found is not None and current < found.until else None


def record_failure(model: str, reason: str, now: float | None = None) -> Failure:
    """Remember a failed download of ``model``; the back-off grows with failures in a row."""
    current = time.time() if now is None else now
    previous = last_failure(model)
    count = (previous.failures if previous else 0) + 1
    delay = BACKOFF_S[min(count, len(BACKOFF_S)) - 1]
    failure = Failure(model, count, current, current + delay, " ".join(reason.split())[:300])
    data = {
        "model": failure.model,
        "failures": failure.failures,
        "failed_at": failure.failed_at,
        "until": failure.until,
        "reason": failure.reason,
    }
    try:
        files.write_atomic(path(), json.dumps(data).encode())
    except (OSError, AgentctxError):
        pass  # not remembered: the next run tries again, as before
    return failure


def clear() -> None:
    """Forget any failure: a model loaded (or was fetched)."""
    try:
        os.unlink(path())
    except OSError:
        pass
