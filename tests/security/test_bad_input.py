"""Issue 16, finding 7: bad input gets a clear error, never a hang, a traceback or silent damage."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentctx import config
from agentctx.core import home, ledger
from agentctx.core.errors import ValidationError
from agentctx.core.schema import RECORD_COLUMNS
from agentctx.store import transfer
from tests.helpers import MCP_INITIALIZE, PROJECT, new_record, run_cli, run_hook, seed

if TYPE_CHECKING:
    from agentctx.store import Store

DEADLINE = 30

# -- the MCP server: a reply to every line, and it keeps serving ------------------------------------

INIT = MCP_INITIALIZE


def _call(request_id: int, name: str, arguments: dict[str, Any]) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )


def test_mcp_answers_bad_lines_and_keeps_serving(project_dir: Path, agentctx_home: Path) -> None:
    seed(project_dir, [{"type": "decision", "title": "Auth uses JWT", "body": "auth tokens"}])
    lines = [
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        # a lone surrogate: valid JSON, not valid Unicode
        _call(2, "ctx_search", {"query": "auth"}).replace('"auth"', '"au\\ud800th"'),
        '{"jsonrpc": "2.0", "id": 3, "method": ',  # malformed JSON
        _call(4, "ctx_search", {"query": "auth", "limit": 16}),  # clamped to 15, not refused
        _call(5, "ctx_record", {"type": "discovery", "title": "x\\udfffy", "body": "b"}).replace(
            "\\\\udfff", "\\udfff"
        ),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    ]
    env = {
        **os.environ,
        "AGENTCTX_HOME": str(agentctx_home),
        "CLAUDE_PROJECT_DIR": str(project_dir),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "agentctx", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: list[dict[str, Any]] = []
    try:
        for line in lines:
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
            if '"method": "notifications/' in line:
                continue
            # one reply per line, within the deadline (before the fix: none, and a hang)
            ready, _, _ = select.select([process.stdout], [], [], DEADLINE)
            assert ready, f"no reply to {line[:60]!r}"
            replies.append(json.loads(process.stdout.readline()))
    finally:
        process.stdin.close()
        process.wait(timeout=DEADLINE)
        process.stdout.close()
    by_id = {reply.get("id"): reply for reply in replies}
    assert by_id[2]["error"]["code"] == -32602
    assert "surrogate" in by_id[2]["error"]["message"]
    parse_errors = [r for r in replies if r.get("id") is None and "error" in r]
    assert [r["error"]["code"] for r in parse_errors] == [-32700]
    assert by_id[4]["result"].get("isError") is not True, by_id[4]
    assert by_id[5]["error"]["code"] == -32602
    assert len(by_id[6]["result"]["tools"]) == 7  # still serving after all of it


# -- import: validated whole, all or nothing, naming the record and field ---------------------------

P = PROJECT


def _record(record_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": record_id,
        "project_id": P,
        "type": "decision",
        "title": f"Title {record_id[-2:]}",
        "body": "Body.",
        "scope": "project",
        "confidence": "explicit",
        "source": "cli",
        "valid_from": "2026-01-01T00:00:00.000000Z",
        "recorded_at": "2026-01-01T00:00:00.000000Z",
        **fields,
    }


GOOD = "01HX0000000000000000000001"
A, B, C = "01HX00000000000000000000AA", "01HX00000000000000000000BB", "01HX00000000000000000000CC"
AT = "2026-02-01T00:00:00.000000Z"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("records", "extra", "message"),
    [
        ([_record(A, score="high")], {}, f"record {A}: score must be a number"),
        ([_record(A, pinned="yes")], {}, f"record {A}: pinned must be true or false"),
        ([_record(A, access_count=-1)], {}, f"record {A}: access_count must be a whole number"),
        ([_record(A, title=7)], {}, f"record {A}: title must be a non-empty string"),
        ([_record(A, keywords=["a"])], {}, f"record {A}: keywords must be a string"),
        ([_record(A, valid_from="soon")], {}, f"record {A}: valid_from 'soon' is not an ISO"),
        (
            [_record(A, superseded_by=A, superseded_at=AT)],
            {},
            f"record {A}: superseded_by names the record itself",
        ),
        (
            [
                _record(A, superseded_by=B, superseded_at=AT),
                _record(B, superseded_by=C, superseded_at=AT),
                _record(C, superseded_by=A, superseded_at=AT),
            ],
            {},
            "superseded_by forms a cycle",
        ),
        ([_record(A, superseded_by=B)], {}, f"record {A}: superseded_at and superseded_by"),
        (
            [_record(A)],
            {
                "edges": [
                    {
                        "id": "E1",
                        "from_id": A,
                        "to_id": "NOWHERE",
                        "rel_type": "derives_from",
                        "created_at": AT,
                        "weight": 1.0,
                    }
                ]
            },
            "edges row E1: to_id 'NOWHERE' is in neither the file nor the store",
        ),
        ([_record(A)], {"records": "x"}, "records is a str, not a list"),
    ],
)
async def test_import_validates_everything_and_writes_nothing(
    store: Store, records: list[dict[str, Any]], extra: dict[str, Any], message: str
) -> None:
    data = {"format": "agentctx-export", "records": [_record(GOOD), *records], **extra}
    with pytest.raises(ValidationError) as caught:
        await transfer.import_data(store, data)
    assert message in str(caught.value)
    assert "nothing was imported" in str(caught.value)
    assert await store.list_records() == []  # all or nothing: the good record is not written


@pytest.mark.anyio
async def test_import_names_every_bad_field_at_once(store: Store) -> None:
    data = {
        "format": "agentctx-export",
        "records": [_record(A, score="1"), _record(B, reinforce_count="3")],
    }
    with pytest.raises(ValidationError) as caught:
        await transfer.import_data(store, data)
    assert f"record {A}: score" in str(caught.value)
    assert f"record {B}: reinforce_count" in str(caught.value)


@pytest.mark.anyio
async def test_import_accepts_edges_to_what_the_store_holds(store: Store) -> None:
    held = await store.add(new_record())
    edge = {
        "id": "E2",
        "from_id": A,
        "to_id": held.id,
        "rel_type": "derives_from",
        "created_at": AT,
        "weight": 1.0,
    }
    data = {"format": "agentctx-export", "records": [_record(A)], "edges": [edge]}
    report = await transfer.import_data(store, data)
    assert report.added == {"records": 1, "edges": 1}


# -- the command line --------------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["70000", "-1", "65536"])
def test_ui_port_out_of_range_is_one_line_and_exit_2(port: str, agentctx_home: Path) -> None:
    result = run_cli("ui", "--no-open", "--port", port)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "--port must be 0 to 65535" in result.stderr
    assert not Path(home.db_path()).exists()


@pytest.mark.parametrize("argv", [["status"], ["search", "anything"], ["show", GOOD]])
def test_read_commands_before_init_create_nothing(
    argv: list[str], agentctx_home: Path, project_dir: Path
) -> None:
    result = run_cli(*argv, cwd=project_dir)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "run `agentctx init` first" in result.stderr
    assert not Path(home.db_path()).exists()
    assert not agentctx_home.exists() or not any(agentctx_home.iterdir())


def test_markdown_round_trip_keeps_crlf_bytes(
    tmp_path: Path, agentctx_home: Path, project_dir: Path
) -> None:
    body = "line one\r\nline two\r\n\r\nline four"
    added = run_cli(
        "record", "--type", "discovery", "--title", "CRLF body", "--body", body, cwd=project_dir
    )
    assert added.returncode == 0, added.stderr
    out = tmp_path / "export.md"
    assert run_cli("export", "--out", str(out), cwd=project_dir).returncode == 0
    assert b"line one\r\nline two" in out.read_bytes()
    other = tmp_path / "other-home"
    env = {"AGENTCTX_HOME": str(other)}
    imported = run_cli("import", "--restore", str(out), cwd=project_dir, env=env)  # as written
    assert imported.returncode == 0, imported.stderr
    again = tmp_path / "again.md"
    assert run_cli("export", "--out", str(again), cwd=project_dir, env=env).returncode == 0
    assert again.read_bytes() == out.read_bytes()


# -- files of the home: never through a planted symlink ----------------------------------------------


def test_hooks_log_is_not_followed(agentctx_home: Path, tmp_path: Path, project_dir: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    logs = agentctx_home / "logs"
    logs.mkdir(parents=True)
    (logs / "hooks.log").symlink_to(victim)
    result = run_hook("UserPromptSubmit", b"{not json", cwd=project_dir)  # logs a problem
    assert result.returncode == 0
    assert victim.read_text() == "precious\n"


def test_ledgers_are_not_followed(agentctx_home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.jsonl"
    victim.write_text('{"tokens": 5, "ids": ["planted"]}\n')
    path = Path(ledger.path_for("s1"))
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    assert ledger.read_entries("s1") == []
    assert "s1" not in ledger.open_sessions() or ledger.open_sessions()["s1"] == []
    with ledger.Ledger("s1") as opened:
        assert opened.entries == [] and not opened.writable
    assert victim.read_text() == '{"tokens": 5, "ids": ["planted"]}\n'


# -- a corrupt config.json: defaults, a log line, and doctor says so --------------------------------


def test_corrupt_config_falls_back_to_defaults(agentctx_home: Path) -> None:
    agentctx_home.mkdir(parents=True, exist_ok=True)
    Path(home.config_path()).write_text('{"llm": tru')
    values = config.load()
    assert values["llm"] == config.SETTINGS["llm"][1]  # extraction is not turned off
    assert values == {key: spec[1] for key, spec in config.SETTINGS.items()}
    log = (agentctx_home / "logs" / "hooks.log").read_text()
    assert "config.json" in log and "default" in log
    doctor = run_cli("doctor")
    assert "config.json" in doctor.stdout and "default" in doctor.stdout
    assert "extraction is off" not in doctor.stdout


# -- a fuzz of import: every mutation imports whole or is refused whole ------------------------------

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from([A, B, GOOD, "", AT, "decision", "global", "project"]),
)
_FIELDS = st.sampled_from(RECORD_COLUMNS)  # every column of a record


@pytest.mark.anyio
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutations=st.lists(st.tuples(st.integers(0, 1), _FIELDS, _VALUES), max_size=4))
# found at random before the ci profile (issue 24, #7): a cue that is not a string
@example(mutations=[(0, "cues", [0])])
@example(mutations=[(1, "cues", {"": 0})])
@example(mutations=[(0, "cues", 7)])
@example(mutations=[(0, "project_id", "global")])  # found by nox -s explore
async def test_import_fuzz_is_all_or_nothing(
    store: Store, mutations: list[tuple[int, str, Any]]
) -> None:
    records = [_record(A), _record(B)]
    for index, name, value in mutations:
        records[index][name] = value
    before = len(await store.list_records())
    refused: ValidationError | None = None
    try:
        await transfer.import_data(store, {"format": "agentctx-export", "records": records})
    except ValidationError as exc:  # any other exception fails the test
        refused = exc
    if refused is not None:
        assert str(refused).startswith("import: ")
        assert len(await store.list_records()) == before  # nothing written
    else:
        stored = await store.list_records()
        assert {A, B} & {r.id for r in stored}
        for record in stored:  # what was written reads back: no type the dashboard trips on
            assert isinstance(record.score, float) and isinstance(record.title, str)
