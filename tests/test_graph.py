"""The graph's rows (issue 18): what extraction and capture link, and what ``ctx_related`` walks.

Everything runs for real: the capture hooks as ``agentctx hook`` subprocesses, ``agentctx extract``
(the real ``anthropic`` client) against the loopback Messages API server (tests/messages_server.py)
on a real Claude Code transcript, and ``ctx_related`` through the real stdio MCP server, as Claude
Code starts it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from agentctx.core.errors import ValidationError
from agentctx.core.project import identify
from agentctx.extract import prompt
from agentctx.store import Store
from tests.helpers import fixtures_dir, payload, query, run_cli, run_hook, seed, server_params
from tests.messages_server import MessagesServer, Recorded, ToolUseReply

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


def post(project_dir: Path, tool: str, tool_input: dict[str, Any], **extra: Any) -> None:
    """One PostToolUse (or PostToolUseFailure) event through the real hook process."""
    event = extra.pop("event", "PostToolUse")
    data = payload(event, SID, project_dir, tool_name=tool, tool_input=tool_input, **extra)
    result = run_hook("post-tool-use", data, cwd=project_dir)
    assert result.returncode == 0 and result.stdout == b"", result.stderr


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    data: dict[str, Any] = json.loads(block.text)
    return data


async def related(
    project_dir: Path, agentctx_home: Path, *names: str, search: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """``ctx_related`` of each name (then ``ctx_search`` with ``search``), over one real stdio
    session."""
    answers = []
    with anyio.fail_after(DEADLINE):
        async with Client(server_params(project_dir, agentctx_home)) as client:
            for name in names:
                answers.append(ok(await client.call_tool("ctx_related", {"file": name})))
            if search is not None:
                answers.append(ok(await client.call_tool("ctx_search", search)))
    return answers


# -- capture: a failure is linked to the files its session edited before it -------------------------


def edit_then_fail(project_dir: Path) -> None:
    """The hooks of a session that edits src/billing.py, then runs the failing tests."""
    seed(project_dir, [])
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


async def test_related_on_an_edited_file_returns_the_sessions_test_failure(
    project_dir: Path, agentctx_home: Path
) -> None:
    await anyio.to_thread.run_sync(edit_then_fail, project_dir)
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


# -- extraction: entries name their code, and the graph gains nodes and edges ------------------------

SPOTTER = "spotter-tool_heavy.jsonl"  # a real session: xterm.js scrollback in assets/js/app.js
SPOTTER_SID = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
SPOTTER_CWD = "/home/marco/projects/spotter"


def spotter_in(project_dir: Path, folder: Path) -> Path:
    """The real transcript, byte for byte but for its cwd: the session ran in ``project_dir``."""
    text = (fixtures_dir() / "transcripts" / SPOTTER).read_text()
    assert text.count(SPOTTER_CWD) > 10
    path = folder / f"{SPOTTER_SID}.jsonl"
    path.write_text(text.replace(SPOTTER_CWD, str(project_dir)))
    return path


def spotter_extraction(project_dir: Path) -> ToolUseReply:
    """What the model answers for the spotter session: entries that name their code."""
    app = str(project_dir / "assets" / "js" / "app.js")  # absolute, as the transcript shows it
    return ToolUseReply(
        prompt.TOOL_NAME,
        {
            "flush_ok": False,
            "decisions": [
                {
                    "what": "The web terminal keeps xterm.js and fixes scrolling in the page",
                    "confidence": "explicit",
                    "entities": [{"kind": "package", "name": "xterm"}],
                }
            ],
            "conventions": [
                {
                    "scope": "file",
                    "convention": "Terminal scroll handling lives in assets/js/app.js",
                    "confidence": "inferred",
                    "entities": [
                        {"kind": "file", "name": app},
                        {"kind": "module", "name": "assets/js"},
                    ],
                }
            ],
            "bugfixes": [
                {
                    "problem": "Scrolling back in the xterm.js terminal did nothing",
                    "fix": "stop the outer page from capturing wheel events over the terminal",
                    "files": ["./assets/js/app.js"],
                    "entities": [
                        {"kind": "symbol", "name": "Terminal.attachCustomWheelEventHandler"}
                    ],
                }
            ],
        },
    )


def extract_spotter(
    project_dir: Path, tmp_path: Path, reply: ToolUseReply
) -> tuple[dict[str, Any], Recorded]:
    """``agentctx extract --json`` of the spotter session (the real CLI and ``anthropic`` client,
    the loopback server for the API): its report and the one request it sent."""
    return cli_extract(project_dir, spotter_in(project_dir, tmp_path), SPOTTER_SID, reply)


def cli_extract(
    project_dir: Path, path: Path, session_id: str, reply: ToolUseReply
) -> tuple[dict[str, Any], Recorded]:
    """``agentctx extract --json`` of a transcript, the server answering ``reply``."""
    with MessagesServer(replies=[reply]) as server:
        env = {"ANTHROPIC_API_KEY": "sk-test-key", "ANTHROPIC_BASE_URL": server.url}
        args = ("extract", "--session-id", session_id, "--transcript", str(path), "--json")
        done = run_cli(*args, cwd=project_dir, env=env)
    assert done.returncode == 0, done.stderr
    (request,) = server.messages_requests()
    report: dict[str, Any] = json.loads(done.stdout)
    return report, request


def graph_rows() -> list[tuple[str, str, str, str]]:
    """(record type, rel, node kind, node name) of every edge from a record to a node."""
    found = query(
        "SELECT r.type, e.rel_type, n.kind, n.name FROM edges e "
        "JOIN records r ON r.id = e.from_id JOIN nodes n ON n.id = e.to_id "
        "ORDER BY r.type, e.rel_type, n.kind, n.name"
    )
    return [tuple(row) for row in found]


async def test_extraction_of_a_real_transcript_writes_nodes_and_edges(
    project_dir: Path, agentctx_home: Path, tmp_path: Path
) -> None:
    report, request = extract_spotter(project_dir, tmp_path, spotter_extraction(project_dir))
    assert (
        "scrolling back in xterm.js still does not work" in request.body["messages"][0]["content"]
    )
    entities = request.body["tools"][0]["input_schema"]["properties"]["conventions"]["items"]
    assert entities["properties"]["entities"]["items"]["properties"]["kind"]["enum"] == [
        "file",
        "module",
        "package",
        "symbol",
    ]
    assert report["status"] == "extracted"
    assert report["written"] == {"decision": 1, "convention": 1, "bugfix": 1}
    assert (report["linked"], report["entities_dropped"]) == (5, 0)
    assert graph_rows() == [
        ("bugfix", "applies_to", "file", "assets/js/app.js"),
        ("bugfix", "applies_to", "symbol", "Terminal.attachCustomWheelEventHandler"),
        ("convention", "applies_to", "file", "assets/js/app.js"),  # made relative to the root
        ("convention", "applies_to", "module", "assets/js"),
        ("decision", "scoped_to", "package", "xterm"),
    ]
    pid = identify(str(project_dir)).project_id
    assert {row[0] for row in query("SELECT DISTINCT project_id FROM nodes")} == {pid}

    # the real stdio server walks the new edges, from a file and from a package, module or symbol
    on_app, on_xterm, on_symbol, on_module, searched = await related(
        project_dir,
        agentctx_home,
        "assets/js/app.js",
        "xterm",
        "Terminal.attachCustomWheelEventHandler",
        "assets/js",
        search={"query": "xterm terminal scroll", "file": "assets/js/app.js"},
    )
    titles = {r["id"]: r["title"] for r in on_app["results"]}

    def seen(answer: dict[str, Any]) -> list[tuple[str, int]]:
        return [(e["type"], e["hops"]) for e in answer["results"]]

    assert (on_app["file"], on_app["known"]) == ("assets/js/app.js", True)
    assert seen(on_app) == [("convention", 1), ("bugfix", 1)]
    assert "Terminal scroll handling lives in assets/js/app.js" in titles.values()
    assert (on_xterm["file"], seen(on_xterm)) == ("xterm", [("decision", 1)])
    assert seen(on_symbol) == [
        ("bugfix", 1),
        ("convention", 3),
    ]  # symbol, bugfix, app.js, convention
    assert seen(on_module) == [("convention", 1), ("bugfix", 3)]
    # the file filter of ctx_search reads the same edges: the decision on xterm is not on app.js
    assert sorted(e["type"] for e in searched["results"]) == ["bugfix", "convention"]


def test_bad_entities_are_dropped_and_counted_the_entries_kept(
    project_dir: Path, tmp_path: Path
) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    bad: list[Any] = [
        {"kind": "branch", "name": "main"},  # a node kind, but not one extraction names
        {"kind": "class", "name": "Terminal"},
        {"kind": "symbol", "name": "x" * 201},  # over the length limit
        {"kind": "symbol", "name": "   "},
        {"kind": "symbol", "name": "two\nlines"},
        {"kind": "file", "name": "../../etc/passwd"},  # out of the project
    ]
    more: list[Any] = [
        {"kind": "symbol", "name": secret},  # a secret is not a code entity
        {"kind": "module", "name": 42},
        "assets/js",
        {"kind": "module", "name": "assets/js"},  # the one good entity
    ]
    reply = ToolUseReply(
        prompt.TOOL_NAME,
        {
            "flush_ok": False,
            "conventions": [
                {
                    "convention": "Scroll code lives with the terminal",
                    "confidence": "inferred",
                    "entities": bad[:5],
                },
                {
                    "convention": "Wheel events stop at the terminal",
                    "confidence": "inferred",
                    "entities": [bad[5], *more, {"kind": "symbol", "name": "Terminal"}],
                },
            ],
            "gotchas": [
                {
                    "pattern": "The page captures wheel events",
                    "why_it_matters": "no scrollback",
                    "entities": "assets/js/app.js",
                },
            ],
            "bugfixes": [
                {
                    "problem": "Scrollback broken",
                    "fix": "handle wheel in the terminal",
                    "files": ["/etc/hosts", "", 7],
                },
            ],
        },
    )
    report, _ = extract_spotter(project_dir, tmp_path, reply)
    assert report["written"] == {"convention": 2, "discovery": 1, "bugfix": 1}
    assert report["dropped"] == 0
    # 5; 4 of the first 5 and the 6th (cut by the cap of 5); the list that is a string; the file ""
    assert report["entities_dropped"] == 5 + 5 + 1 + 1
    assert report["linked"] == 2
    assert graph_rows() == [
        ("bugfix", "applies_to", "file", "/etc/hosts"),  # absolute outside the root: kept as is
        ("convention", "applies_to", "module", "assets/js"),
    ]
    assert not query("SELECT 1 FROM nodes WHERE name LIKE '%ghp_%' OR name LIKE '%passwd%'")


def test_relate_refuses_what_the_parse_drops() -> None:
    """The write rule itself refuses a kind or name the parse would drop (one rule, two guards)."""
    from agentctx.core import writes

    assert writes.entity_problem("symbol", "Terminal.open") is None
    for kind, name in (("branch", "main"), ("symbol", ""), ("module", "a" * 201), ("file", "a\tb")):
        assert writes.entity_problem(kind, name) is not None
        with pytest.raises(ValidationError):
            next(writes.relate("R", "P", kind, name, "2026-01-01T00:00:00.000000Z"))


async def test_the_dashboard_draws_the_new_nodes_and_edges(
    project_dir: Path, tmp_path: Path
) -> None:
    import numpy as np

    from agentctx.web import graph
    from agentctx.web.views.graph import drawing

    extract_spotter(project_dir, tmp_path, spotter_extraction(project_dir))
    pid = identify(str(project_dir)).project_id
    async with await Store.open() as store:
        drawn = await graph.load(store, pid)
        [convention] = await store.list_records(pid, types=("convention",))
        linked = await graph.entities(store, convention.id)
    kinds = sorted(node.kind for node in drawn.nodes if node.kind != "record")
    assert kinds == ["file", "module", "package", "symbol"]
    rels = sorted(edge.rel for edge in drawn.edges)
    assert rels == ["applies_to"] * 4 + ["scoped_to"]
    svg = str(drawing(drawn, np.zeros((len(drawn.nodes), 2)) + 50.0))
    for css in ("node module", "node package", "node symbol", "edge rel-scoped_to"):
        assert f'class="{css}' in svg, css
    assert [(e["kind"], e["name"]) for e in linked] == [
        ("file", "assets/js/app.js"),
        ("module", "assets/js"),
    ]


def session_transcript(project_dir: Path, path: Path) -> Path:
    """The session of :func:`edit_then_fail` as Claude Code writes it: a request, the edit, the
    failing run and its result, one JSON object a line."""
    source = str(project_dir / "src" / "billing.py")
    turns: list[tuple[str, Any]] = [
        ("user", "invoice_total double counts the last line, fix it"),
        ("assistant", [{"type": "tool_use", "id": "toolu_01", "name": "Edit",
                        "input": {"file_path": source, "old_string": "a", "new_string": "b"}}]),
        ("user", [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "Updated."}]),
        ("assistant", [{"type": "tool_use", "id": "toolu_02", "name": "Bash",
                        "input": {"command": "pytest -q tests/test_billing.py"}}]),
        ("user", [{"type": "tool_result", "tool_use_id": "toolu_02", "is_error": True,
                   "content": PYTEST_FAIL}]),
        ("assistant", [{"type": "text", "text": "The loop in invoice_total adds the last line "
                        "twice; I will fix the range."}]),
    ]  # fmt: skip
    parent = None
    with path.open("w") as fh:
        for number, (role, content) in enumerate(turns, 1):
            uuid = f"00000000-0000-4000-8000-{number:012d}"
            line = {
                "parentUuid": parent, "isSidechain": False, "userType": "external",
                "cwd": str(project_dir), "sessionId": SID, "version": "2.1.38", "type": role,
                "message": {"role": role, "content": content}, "uuid": uuid,
                "timestamp": f"2026-02-10T22:58:{number:02d}.000Z",
            }  # fmt: skip
            fh.write(json.dumps(line) + "\n")
            parent = uuid
    return path


async def test_extraction_explains_the_failure_and_links_it_to_the_symbol(
    project_dir: Path, agentctx_home: Path, tmp_path: Path
) -> None:
    """Capture's links and extraction's edges meet on one record: the stub, explained."""
    await anyio.to_thread.run_sync(edit_then_fail, project_dir)
    path = session_transcript(project_dir, tmp_path / f"{SID}.jsonl")
    fix = {
        "problem": "invoice_total counted the last line twice",
        "fix": "iterate over range(len(lines)), not range(len(lines) + 1)",
        "files": ["src/billing.py"],  # an edited file: the failure's stub is the one explained
        "entities": [{"kind": "symbol", "name": "invoice_total"}],
    }
    reply = ToolUseReply(prompt.TOOL_NAME, {"flush_ok": False, "bugfixes": [fix]})
    report, _ = await anyio.to_thread.run_sync(cli_extract, project_dir, path, SID, reply)
    assert (report["enriched"], report["written"], report["linked"]) == (1, {}, 2)
    [(failure_id, body)] = query("SELECT id, body FROM records WHERE type = 'bugfix'")
    assert body.startswith("Problem: invoice_total counted the last line twice")
    (on_symbol,) = await related(project_dir, agentctx_home, "invoice_total")
    assert [(e["id"], e["hops"]) for e in on_symbol["results"]] == [(failure_id, 1)]
