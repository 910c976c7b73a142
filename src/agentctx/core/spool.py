"""The spool: observations that could not be written yet wait here, never lost.

When a capture hook cannot write (no database yet, another schema version, the write lock not had
within the hook's short busy timeout) it saves its observations as one JSON file under
``<home>/spool/``. The next hook that does get a write connection drains the spool first, oldest
first, deleting each file only after its observations committed.
"""

from __future__ import annotations

import os

from agentctx.core import clock, files, home, jsonio, nofollow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import sqlean

    from agentctx.core.shapes import Observation

MAX_DRAIN = 200
#: A spool file holds one hook's observations (their texts capped): far below this.
MAX_FILE_BYTES = 64 * 1024 * 1024
STALE_CLAIM_S = 300


def folder() -> str:
    """The spool folder."""
    return home.sub("spool")


def save(observations: list[Observation]) -> str:
    """Write observations to a new spool file (atomically); return its path."""
    home.ensure_sub("spool")
    path = os.path.join(folder(), f"{clock.ulid()}.json")
    # a full disk leaves no empty file behind that nothing would ever drain
    files.write_atomic(path, jsonio.dumps(observations).encode("utf-8"))
    return path


def drain(conn: sqlean.Connection, log: Any = None) -> int:
    """Apply and remove spooled observations (up to :data:`MAX_DRAIN` files); return how many.

    A file is claimed by renaming it first, so two drainers never apply it twice; a claim left by a
    killed process is released after :data:`STALE_CLAIM_S`.
    """
    import time

    from agentctx.core.driver import sqlite
    from agentctx.core.errors import ValidationError
    from agentctx.core.observe import apply

    try:
        names = sorted(os.listdir(folder()))
    except OSError:
        return 0
    now = time.time()
    for name in names:
        if name.endswith(".claim"):
            path = os.path.join(folder(), name)
            try:
                if now - os.path.getmtime(path) > STALE_CLAIM_S:
                    os.replace(path, path.rsplit(".", 2)[0])
            except OSError:
                continue
    done = 0
    for name in [n for n in names if n.endswith(".json")][:MAX_DRAIN]:
        path = os.path.join(folder(), name)
        claimed = f"{path}.{os.getpid()}.claim"
        try:
            os.rename(path, claimed)
        except OSError:
            continue  # another process claimed it
        try:
            # a symlink or a FIFO renamed into the claim is refused here, and kept as .bad
            text = nofollow.read_text(claimed, MAX_FILE_BYTES)
        except OSError as exc:
            os.replace(claimed, path + ".bad")
            if log is not None:
                log(f"spool file {name} unreadable ({exc}); kept as {name}.bad")
            continue
        try:
            observations = jsonio.loads(text)
            if not isinstance(observations, list):
                raise ValueError("not a list")
            kept: list[Any] = [o for o in observations if isinstance(o, dict)]
            apply(conn, kept)
        except (ValueError, KeyError, TypeError, ValidationError, sqlite.IntegrityError) as exc:
            os.replace(claimed, path + ".bad")  # kept for inspection, never retried forever
            if log is not None:
                log(f"spool file {name} unusable ({exc}); kept as {name}.bad")
            continue
        except sqlite.DatabaseError:
            os.replace(claimed, path)  # busy, full or damaged: left for a later writer
            break
        except BaseException:
            os.replace(claimed, path)  # unclaimed at once, not after STALE_CLAIM_S
            raise
        os.unlink(claimed)
        done += 1
    return done
