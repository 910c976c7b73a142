"""The graph's rows (issue 18): what extraction and capture link, and what ``ctx_related`` walks.

Everything runs for real: the capture hooks as ``agentctx hook`` subprocesses, extraction with the
real ``anthropic`` client against the loopback Messages API server (tests/messages_server.py), and
``ctx_related`` through the real stdio MCP server, as Claude Code starts it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import anyio
import pytest
import sqlean
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from agentctx.core import home
from agentctx.core.project import identify
from tests.helpers import payload, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

SID = "9a1c7e55-2b3d-4e6f-8a9b-0c1d2e3f4a5b"
DEADLINE = 30  # seconds for a whole stdio session; one round trip takes well under one

PYTEST_FAIL = """\
============================= test session starts ==============================
collected 2 items

tests/test_billing.py F.                                                 [100%]

=================================== FAILURES ===================================
_____________________________ test_invoice_total _______________________________
    def test_invoice_total():
>       assert invoice_total([3, 4]) == 7
E       assert 8 == 7

tests/test_billing.py:9: AssertionError
=========================== short test summary info ============================
FAILED tests/test_billing.py::test_invoice_total - assert 8 == 7
========================= 1 failed, 1 passed in 0.04s ==========================
"""


def query(sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlean.connect(home.db_path())
    try:
        return list(conn.execute(sql, params).fetchall())
    finally:
        conn.close()


def post(project_dir: Path, tool: str, tool_input: dict[str, Any], **extra: Any) -> None:
    """One PostToolUse (or PostToolUseFailure) event through the real hook process."""
    event = extra.pop("event", "PostToolUse")
    data = payload(event, SID, project_dir, tool_name=tool, tool_input=tool_input, **extra)
    result = run_hook("post-tool-use", data, cwd=project_dir)
    assert result.returncode == 0 and result.stdout == b"", result.stderr


def server_params(project_dir: Path, agentctx_home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentctx", "mcp"],
        env={
            "AGENTCTX_HOME": str(agentctx_home),
            "CLAUDE_PROJECT_DIR": str(project_dir),
            "HOME": os.environ["HOME"],
            "PATH": os.environ.get("PATH", ""),
        },
    )


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    data: dict[str, Any] = json.loads(block.text)
    return data


async def related(project_dir: Path, agentctx_home: Path, *names: str) -> list[dict[str, Any]]:
    """``ctx_related`` of each name, over one real stdio session."""
    answers = []
    with anyio.fail_after(DEADLINE):
        async with Client(server_params(project_dir, agentctx_home)) as client:
            for name in names:
                answers.append(ok(await client.call_tool("ctx_related", {"file": name})))
    return answers


# -- capture: a failure is linked to the files its session edited before it -------------------------


async def test_related_on_an_edited_file_returns_the_sessions_test_failure(
    project_dir: Path, agentctx_home: Path
) -> None:
    await anyio.to_thread.run_sync(seed, project_dir, [])
    (project_dir / "src").mkdir()
    source = project_dir / "src" / "billing.py"
    post(project_dir, "Edit", {"file_path": str(source), "old_string": "a", "new_string": "b"})
    post(
        project_dir,
        "Bash",
        {"command": "pytest -q tests/test_billing.py"},
        event="PostToolUseFailure",
        error="Exit code 1\n" + PYTEST_FAIL,
    )
    # edited after the failure: not a suspect of it
    post(project_dir, "Write", {"file_path": str(project_dir / "README.md"), "content": "x"})
    [(failure_id, title)] = query("SELECT id, title FROM records WHERE type = 'bugfix'")
    assert title == "Test failure: pytest -q tests/test_billing.py"
    linked = query(
        "SELECT n.name FROM record_entities l JOIN nodes n ON n.id = l.entity_id "
        "WHERE l.record_id = ? ORDER BY n.name",
        (failure_id,),
    )
    assert [row[0] for row in linked] == ["src/billing.py", "tests/test_billing.py"]

    on_source, on_readme = await related(project_dir, agentctx_home, "src/billing.py", "README.md")
    assert on_source["known"] is True
    assert [(e["id"], e["type"], e["hops"]) for e in on_source["results"]] == [
        (failure_id, "bugfix", 1)
    ]
    # README.md was written in the same session but after the failure: reached only through the
    # session and the source file it shares with the failure, never as a direct link
    assert [(e["id"], e["hops"]) for e in on_readme["results"]] == [(failure_id, 3)]
