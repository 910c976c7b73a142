"""The last rung of the degradation ladder: when the store cannot be searched, the hooks inject the
pinned records only (:mod:`agentctx.core.pinned`), through the real hook processes."""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlean

from agentctx.core import digests, home, pinned, plan
from agentctx.core.project import identify
from tests.helpers import contract, payload, run_hook, seed

if TYPE_CHECKING:
    from collections.abc import Iterator

SID = "0b7d2c55-4a1e-4f8e-9c3d-9a8b7c6d5e4f"
RECORDS: list[dict[str, Any]] = [
    {
        "type": "decision",
        "title": "Money is stored as integer cents",
        "body": "Every amount column is an integer number of cents; never floats.",
        "pinned": True,
    },
    {
        "type": "convention",
        "title": "Queue names are kebab-case",
        "body": "Name every queue in kebab-case, e.g. invoice-created.",
    },
]


def start(project_dir: Path, session: str = SID) -> str | None:
    data = payload("SessionStart", session, project_dir, source="startup")
    return contract(run_hook("session-start", data, cwd=project_dir), "SessionStart")


def prompt(project_dir: Path, text: str, session: str = SID) -> str | None:
    data = payload("UserPromptSubmit", session, project_dir, prompt=text)
    result = run_hook("user-prompt-submit", data, cwd=project_dir, timeout=20)
    return contract(result, "UserPromptSubmit")


@contextmanager
def locked_store() -> Iterator[None]:
    """Another process's lock that readers cannot pass: exclusive locking mode mid-write."""
    holder = sqlean.connect(home.db_path(), isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE projects SET name = name")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_digest_build_saves_the_pinned_list(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    assert start(project_dir) is not None
    path = pinned.path_for(identify(str(project_dir)).project_id)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    saved = pinned.load(identify(str(project_dir)).project_id)
    assert [r["title"] for r in saved] == ["Money is stored as integer cents"]


def test_a_locked_store_gives_the_pinned_records_once_per_session(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    start(project_dir, "warm-up-session")  # builds the digest and saves the pinned list
    with locked_store():
        first = prompt(project_dir, "what is the queue naming convention for invoices")
        again = prompt(project_dir, "and how are amounts stored in the money columns")
    assert first is not None
    assert first.startswith(pinned.NOTE)
    assert "Money is stored as integer cents" in first
    assert "kebab-case" not in first  # not pinned: this rung shows nothing else
    assert again is None  # never twice in a session
    log = Path(home.home_dir(), "logs", "hooks.log").read_text()
    assert "pinned records only" in log
    # the lock gone, search answers again
    answered = prompt(project_dir, "queue names kebab-case convention", session="another")
    assert answered is not None and "kebab-case" in answered
    assert pinned.NOTE not in answered


def test_session_start_without_a_digest_under_a_lock_shows_the_pinned_records(
    project_dir: Path,
) -> None:
    seed(project_dir, RECORDS)
    start(project_dir, "warm-up-session")
    project_id = identify(str(project_dir)).project_id
    digests.invalidate([project_id])  # no digest file left; the pinned list stays
    assert not os.path.exists(digests.path_for(project_id))
    with locked_store():
        text = start(project_dir)
    assert text is not None and text.startswith(pinned.NOTE)
    assert "Money is stored as integer cents" in text


def test_a_corrupt_database_falls_to_the_saved_list(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    start(project_dir, "warm-up-session")
    db = Path(home.db_path())
    conn = sqlean.connect(str(db))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    page = 4096
    for offset in range(page, len(data), page):  # every page but the header's
        data[offset : offset + page] = b"\xa5" * min(page, len(data) - offset)
    db.write_bytes(bytes(data))
    text = prompt(project_dir, "how are amounts stored")
    assert text is not None and text.startswith(pinned.NOTE)
    assert "Money is stored as integer cents" in text


def test_nothing_pinned_and_a_locked_store_inject_nothing(project_dir: Path) -> None:
    seed(project_dir, [RECORDS[1]])
    start(project_dir, "warm-up-session")
    with locked_store():
        assert prompt(project_dir, "queue naming convention") is None


def test_the_rung_reads_the_database_when_it_answers(project_dir: Path) -> None:
    ids = seed(project_dir, RECORDS)
    project_id = identify(str(project_dir)).project_id
    conn = sqlean.connect(home.db_path())
    try:
        rows = pinned.fallback(conn, project_id, (), print)
        assert [r["id"] for r in rows] == [ids[0]]
        assert pinned.fallback(conn, project_id, {ids[0]}, print) == []
        assert plan.run(conn, pinned.current("another-project")) == []
    finally:
        conn.close()
    assert pinned.load(project_id) == []  # no digest built yet: nothing saved
