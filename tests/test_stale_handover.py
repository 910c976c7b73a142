"""A handover reaches the digest until a later session of its checkout has ended, or it grows old.

The session that wrote it may end (its handover is for the next one); a session of another
worktree does not stale it; a later session of the same checkout that ended took the work on.
"""

from __future__ import annotations

from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from agentctx import config
from agentctx.core import clock, db, digests, sessions
from agentctx.core.project import identify
from tests.helpers import contract, new_record, payload, run_hook

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

pytestmark = pytest.mark.anyio

TASK = "port billing to gRPC"  # in the body the digest shows


def session_start(project_dir: Path) -> str:
    text = contract(
        run_hook("session-start", payload("SessionStart", "reader", project_dir, source="startup")),
        "SessionStart",
    )
    return text or ""


def end_session(store: Store, session_id: str, project_id: str, cwd: Path) -> None:
    """What the SessionEnd hook does to the store (its bookkeeping), then its time ``ended_at``."""
    conn, _caps = db.connect(store.path, load_vec=False)
    with closing(conn):
        sessions.end(conn, session_id, project_id, str(cwd), "")


async def test_a_later_session_of_the_checkout_stales_the_handover(
    store: Store, project_dir: Path, tmp_path: Path
) -> None:
    identity = identify(str(project_dir))
    await store.add(
        new_record(
            type="handover",
            title="Handover: " + TASK,
            body="Current task: port billing to gRPC\nNext: generate the client stubs",
            project_id=identity.project_id,
            key=identity.checkout,
            session_id="writer",
        )
    )
    assert TASK in session_start(project_dir)
    end_session(store, "writer", identity.project_id, project_dir)  # its own session ends
    assert digests.read(identity.project_id) is None  # an ended session drops the digest
    assert TASK in session_start(project_dir)
    elsewhere = tmp_path / "other-worktree"
    elsewhere.mkdir()
    end_session(store, "in-another-checkout", identity.project_id, elsewhere)
    assert TASK in session_start(project_dir)
    sub = project_dir / "src"
    sub.mkdir()
    end_session(store, "later-here", identity.project_id, sub)  # took the work on, and ended
    assert TASK not in session_start(project_dir)


async def test_a_handover_older_than_the_limit_is_left_out(store: Store, project_dir: Path) -> None:
    identity = identify(str(project_dir))
    old = clock.format_time(clock_days_ago(20))
    await store.add(
        new_record(
            type="handover",
            title="Handover: " + TASK,
            body="Current task: port billing to gRPC",
            project_id=identity.project_id,
            key=identity.checkout,
            valid_from=old,
        )
    )
    assert TASK not in session_start(project_dir)  # the default limit: 14 days
    config.set_value("digest.handover_max_age_days", 30)
    digests.invalidate([identity.project_id])
    assert TASK in session_start(project_dir)


def clock_days_ago(days: int) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)
