"""core.connect.release: a hook process leaves its read connection to the process's end."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import agentctx.core
from agentctx.core import connect
from agentctx.store import Store

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.anyio
async def test_release_closes_unless_the_process_ends_with_the_handler(
    agentctx_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await Store.open():
        pass
    logged: list[str] = []
    conn = connect.open_db(logged.append)
    assert conn is not None
    connect.release(conn)
    with pytest.raises(Exception, match="closed"):
        conn.execute("SELECT 1")
    monkeypatch.setattr(agentctx.core, "ENDS_WITH_HANDLER", True)
    kept = connect.open_db(logged.append)
    assert kept is not None
    connect.release(kept)
    assert kept.execute("SELECT 1").fetchone()[0] == 1
    assert not logged
