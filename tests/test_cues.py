"""Retrieval cues are search text only (issue 14): a record is found by a cue word, and the cue
itself is never part of what a session is given (the prompt hook's blocks, the SessionStart
digest, ``ctx_search``'s index, ``agentctx search``'s lines); ``ctx_get`` and ``agentctx show``
list them."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client

from agentctx.mcp.server import create_server
from tests.helpers import contract, payload, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

SID = "cues-session"
#: Words only the cue holds: the record's own text says none of them.
CUE = "why does grafana show stale tenants"
RECORDS: list[dict[str, Any]] = [
    {
        "type": "decision",
        "title": "The metrics exporter refreshes its cache hourly",
        "body": "Hourly refresh keeps the exporter cheap; a newer value shows within the hour.",
        "cues": [CUE, "metrics lag behind"],
    },
    {"type": "convention", "title": "Handlers return Result objects", "body": "Never raise."},
]


def cli(*args: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "agentctx", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_prompt_hook_finds_a_record_by_its_cue_and_does_not_inject_the_cue(
    project_dir: Path,
) -> None:
    seed(project_dir, RECORDS)
    ask = payload("UserPromptSubmit", SID, project_dir, prompt="grafana shows stale tenants")
    context = contract(run_hook("user-prompt-submit", ask, cwd=project_dir), "UserPromptSubmit")
    assert context is not None
    assert "The metrics exporter refreshes its cache hourly" in context
    assert "grafana" not in context.lower() and "metrics lag behind" not in context


def test_the_session_start_digest_does_not_show_cues(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    start = payload("SessionStart", SID, project_dir, source="startup")
    context = contract(run_hook("session-start", start, cwd=project_dir), "SessionStart")
    assert context is not None
    assert "The metrics exporter refreshes its cache hourly" in context
    assert CUE not in context and "metrics lag behind" not in context


def test_cli_search_lines_leave_cues_out_and_show_lists_them(project_dir: Path) -> None:
    record_id = seed(project_dir, RECORDS)[0]
    lines = cli("search", "grafana tenants", cwd=project_dir)
    assert record_id in lines
    assert CUE not in lines
    shown = cli("show", record_id, cwd=project_dir)
    assert f"  cues        {CUE}\n              metrics lag behind\n" in shown
    assert json.loads(cli("show", record_id, "--json", cwd=project_dir))["cues"] == [
        CUE,
        "metrics lag behind",
    ]


@pytest.mark.anyio
async def test_ctx_search_leaves_cues_out_and_ctx_get_lists_them(project_dir: Path) -> None:
    record_id = (await anyio.to_thread.run_sync(seed, project_dir, RECORDS))[0]
    with anyio.fail_after(60):
        async with Client(create_server(str(project_dir)), raise_exceptions=True) as client:
            found = await client.call_tool("ctx_search", {"query": "grafana stale tenants"})
            got = await client.call_tool("ctx_get", {"ids": [record_id]})
    assert found.structured_content is not None and got.structured_content is not None
    results = found.structured_content["results"]
    assert [entry["id"] for entry in results] == [record_id]
    assert all("cues" not in entry for entry in results)
    assert CUE not in json.dumps(found.structured_content)
    assert got.structured_content["records"][0]["cues"] == [CUE, "metrics lag behind"]


def test_agentctx_record_takes_cues(project_dir: Path) -> None:
    made = cli(
        "record", "--type", "decision", "--title", "Exporter refresh is hourly", "--body",
        "Hourly keeps it cheap.", "--cue", CUE, "--cue", "metrics lag behind", "--json",
        cwd=project_dir,
    )  # fmt: skip
    record_id = json.loads(made)["id"]
    assert json.loads(cli("show", record_id, "--json", cwd=project_dir))["cues"] == [
        CUE,
        "metrics lag behind",
    ]
    assert record_id in cli("search", "grafana tenants", cwd=project_dir)


@pytest.mark.anyio
async def test_ctx_record_takes_cues(project_dir: Path) -> None:
    with anyio.fail_after(60):
        async with Client(create_server(str(project_dir)), raise_exceptions=True) as client:
            made = await client.call_tool(
                "ctx_record",
                {"type": "decision", "title": "Exporter refresh is hourly",
                 "body": "Hourly keeps it cheap.", "cues": [CUE, "  ", CUE.upper()]},
            )  # fmt: skip
            plain = await client.call_tool(
                "ctx_record",
                {"type": "convention", "title": "Handlers return Result", "body": "Never raise."},
            )
            found = await client.call_tool("ctx_search", {"query": "grafana stale tenants"})
    assert made.structured_content is not None and plain.structured_content is not None
    assert made.structured_content["cues"] == [CUE]  # normalized: blanks and repeats dropped
    assert plain.structured_content["cues"] == []
    assert found.structured_content is not None
    assert [e["id"] for e in found.structured_content["results"]] == [made.structured_content["id"]]
