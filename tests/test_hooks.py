"""The hooks as Claude Code runs them: real subprocesses, real payload shapes, a real SQLite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlean

from agentctx.core import digests, home, ledger
from agentctx.core.handles import handle
from agentctx.core.project import identify
from agentctx.core.tokens import estimate_tokens
from tests.helpers import FORBIDDEN, contract, payload, query, run_hook, seed

SID = "5f0c9a61-9a2b-4c1e-8f3d-0123456789ab"
EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "post-tool-use": "PostToolUse",
    "pre-compact": "PreCompact",
    "stop": "Stop",
    "session-end": "SessionEnd",
    "cwd-changed": "CwdChanged",
    "subagent-start": "SubagentStart",
}


DECISIONS = [
    {
        "type": "decision",
        "title": "Use gRPC for internal services",
        "body": "We moved from REST to gRPC between internal services for streaming.",
    },
    {
        "type": "convention",
        "title": "Tests live beside the code",
        "body": "Every module foo.py has tests/test_foo.py; run them with pytest -q.",
    },
    {
        "type": "bugfix",
        "title": "useAuthStore returned stale tokens",
        "body": "useAuthStore cached the token; refresh it on 401 responses.",
        "confidence": "inferred",
    },
    {
        "type": "preference",
        "title": "Prefer small commits",
        "body": "Commit small steps.",
        "scope": "global",
        "confidence": "explicit",
    },
]


# -- the import set ---------------------------------------------------------------------------------

_PROBE = """
import sys
from agentctx.hooks.runner import run_hook
run_hook([sys.argv[1]])
sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n")
"""


def _modules(event: str, data: dict[str, Any], cwd: Path) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, event],
        input=json.dumps(data).encode(),
        capture_output=True,
        cwd=cwd,
        check=True,
    )
    line = result.stderr.decode().rsplit("MODULES ", 1)[1]
    return set(line.split())


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_hooks_import_nothing_heavy(event: str, project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    data = payload(EVENTS[event], SID, project_dir, prompt="grpc services", source="startup")
    loaded = _modules(event, data, project_dir)
    heavy = {m for m in loaded if m.split(".")[0] in FORBIDDEN}
    assert not heavy, f"{event} imported {sorted(heavy)}"


@pytest.mark.parametrize("event", ["user-prompt-submit", "subagent-start", "stop"])
def test_database_hooks_load_the_driver_alone(event: str, project_dir: Path) -> None:
    """The hooks that open the store load sqlean's C module, not its Python layer (datetime...)."""
    seed(project_dir, DECISIONS)
    data = payload(EVENTS[event], SID, project_dir, prompt="grpc services", source="startup")
    loaded = _modules(event, data, project_dir)
    assert "sqlean._sqlite3" in loaded
    for name in ("sqlean", "sqlean.dbapi2", "datetime", "json", "re", "typing"):
        assert name not in loaded, f"{event} imported {name}"


def test_session_start_fast_path_imports_no_sqlite_no_json(project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    data = payload("SessionStart", SID, project_dir, source="startup")
    assert contract(run_hook("session-start", data), "SessionStart")  # builds the digest file
    assert os.path.exists(digests.path_for(identify(str(project_dir)).project_id))
    loaded = _modules("session-start", data, project_dir)
    for name in (
        "sqlean",
        "sqlite3",
        "json",
        "re",
        "typing",
        "dataclasses",
        "select",
        "encodings.utf_8_sig",
        "agentctx.core.files",  # the atomic writes: nothing is written on this path
        "agentctx.core.learning",
    ):
        assert name not in loaded, f"SessionStart with a digest imported {name}"


_ASK_PROBE = """
import sys
from agentctx.core import meaning
from agentctx.hooks.runner import run_hook
real = meaning.ask
def ask(*args, **kwargs):
    sys.stderr.write("\\nAT_ASK " + " ".join(sorted(sys.modules)) + "\\n")
    return real(*args, **kwargs)
meaning.ask = ask
run_hook(["user-prompt-submit"])
"""


def test_prompt_request_goes_out_before_the_store_and_the_rendering_load(
    project_dir: Path,
) -> None:
    """ADR-017: the prompt goes to the embedding server as soon as the hook knows the prompt is
    worth it and its project, so the server embeds while the hook loads the driver, opens the store
    and searches; the tiers, the rendering, the ledger and what only the search itself needs (the
    schema, the clock, ``math``) load after the request, not before."""
    seed(project_dir, DECISIONS)
    data = payload("UserPromptSubmit", SID, project_dir, prompt="grpc services streaming refresh")
    result = subprocess.run(
        [sys.executable, "-c", _ASK_PROBE],
        input=json.dumps(data).encode(),
        capture_output=True,
        cwd=project_dir,
        check=True,
    )
    assert contract(result, "UserPromptSubmit")  # the keyword path still answers
    at_ask = set(result.stderr.decode().rsplit("AT_ASK ", 1)[1].split())
    for name in (
        "sqlean._sqlite3",
        "agentctx.core.driver",
        "agentctx.core.tiers",
        "agentctx.core.inject",
        "agentctx.core.ledger",
        "agentctx.config",
        "agentctx.core.schema",
        "agentctx.core.clock",
        "math",
        "select",
        "encodings.utf_8_sig",
    ):
        assert name not in at_ask, f"{name} loaded before the request went out"


_FUTURE_PROBE = """
import sys
from agentctx import _entry
_entry._future_stand_in()
stand_in = sys.modules["__future__"]
assert isinstance(stand_in.annotations, _entry._Feature), "the real module was loaded already"
import agentctx.hooks.runner, agentctx.hooks.prompt  # each names annotations from it
assert sys.modules["__future__"] is stand_in, "a hook module loaded the real __future__"
feature = stand_in.annotations
compile("x: undefined_name = 1", "<probe>", "exec", feature.compiler_flag)  # postponed: no error
division = stand_in.division  # any other feature: the real module, from then on
real = sys.modules["__future__"]
assert real is not stand_in and division is real.division
print(feature.compiler_flag == real.annotations.compiler_flag,
      feature.getOptionalRelease() == real.annotations.getOptionalRelease(),
      feature.getMandatoryRelease() == real.annotations.getMandatoryRelease())
"""


def test_a_hook_stands_in_for_future_faithfully() -> None:
    """ADR-017 (speed pass 4): a hook process does not load ``__future__`` for the one attribute
    its modules import; the stand-in's attribute is the real one's, and any other loads the real
    module."""
    result = subprocess.run(
        [sys.executable, "-c", _FUTURE_PROBE], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]


# -- fail-open --------------------------------------------------------------------------------------

GARBAGE: list[bytes] = [
    b"",
    b"not json",
    b'{"session_id": "abc", "cwd": ',
    bytes(range(256)) * 4,
    b"[1, 2, 3]",
    b'"just a string"',
    b"{}",
    b'{"session_id": 42, "cwd": ["x"], "prompt": {"a": 1}, "tool_input": "x", "tool_name": 7}',
    b'{"a": ' * 5000 + b"1" + b"}" * 5000,
    b'{"prompt": "' + b"x" * (1024 * 1024) + b'"}',
]


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_garbage_stdin_exits_zero_with_clean_stdout(event: str, project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    for data in GARBAGE:
        result = run_hook(event, data, cwd=project_dir)
        assert result.returncode == 0, (data[:40], result.stderr)
        if data.startswith(b"{") and data.endswith(b"}"):
            # an object with missing or odd fields: nothing, or exactly the contract
            contract(result, EVENTS[event])
        else:
            assert result.stdout == b"", (data[:40], result.stdout[:200])


def _log_text() -> str:
    path = os.path.join(home.sub("logs"), "hooks.log")
    return Path(path).read_text() if os.path.exists(path) else ""


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_no_database_is_silent(event: str, project_dir: Path) -> None:
    data = payload(
        EVENTS[event],
        SID,
        project_dir,
        prompt="grpc",
        tool_name="Write",
        tool_input={"file_path": str(project_dir / "a.py")},
    )
    result = run_hook(event, data, cwd=project_dir)
    assert contract(result, EVENTS[event]) is None
    assert not os.path.exists(home.db_path()), "a hook must never create the database"


@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit", "subagent-start"])
def test_corrupt_database_is_silent(event: str, project_dir: Path) -> None:
    home.ensure_home()
    Path(home.db_path()).write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    data = payload(EVENTS[event], SID, project_dir, prompt="grpc services", source="startup")
    assert contract(run_hook(event, data, cwd=project_dir), EVENTS[event]) is None
    assert "database" in _log_text()


def test_unwritable_home_is_silent(project_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    env = {"AGENTCTX_HOME": str(blocker / "home")}  # a path below a file: nothing can be created
    for event, name in EVENTS.items():
        data = payload(name, SID, project_dir, prompt="grpc services", source="startup")
        result = run_hook(event, data, env=env, cwd=project_dir)
        assert result.returncode == 0 and result.stdout == b""


def test_locked_database_does_not_block(project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    holder = sqlean.connect(home.db_path(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        # WAL: a writer's lock does not stop readers, so injection still works
        data = payload("UserPromptSubmit", SID, project_dir, prompt="grpc services")
        result = run_hook("user-prompt-submit", data, cwd=project_dir, timeout=10)
        assert contract(result, "UserPromptSubmit")
        write = payload(
            "PostToolUse",
            SID,
            project_dir,
            tool_name="Write",
            tool_input={"file_path": str(project_dir / "x.py")},
        )
        assert run_hook("post-tool-use", write, cwd=project_dir).returncode == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # the blocked write was spooled, not lost: the next writer drains it
    assert os.listdir(home.sub("spool"))
    again = payload(
        "PostToolUse",
        SID,
        project_dir,
        tool_name="Write",
        tool_input={"file_path": str(project_dir / "y.py")},
    )
    run_hook("post-tool-use", again, cwd=project_dir)
    names = {row[0] for row in query("SELECT name FROM nodes WHERE kind = 'file'")}
    assert names == {"x.py", "y.py"}
    assert not [n for n in os.listdir(home.sub("spool")) if n.endswith(".json")]


# -- SessionStart -----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact"])
def test_session_start_injects_digest(source: str, project_dir: Path) -> None:
    ids = seed(project_dir, DECISIONS)
    data = payload("SessionStart", SID, project_dir, source=source, model="claude-sonnet-4-5")
    text = contract(run_hook("session-start", data, cwd=project_dir), "SessionStart")
    assert text is not None
    assert "Use gRPC for internal services" in text and handle(ids[0]) in text
    assert "Tests live beside the code" in text
    assert "Prefer small commits" in text  # explicit global preference
    assert "More in the agentctx store" in text
    assert estimate_tokens(text) <= 1500 and len(text) <= 10_000
    entries = ledger.read_entries(SID)
    assert entries[-1]["event"] == "SessionStart" and ids[0] in entries[-1]["ids"]
    assert oct(os.stat(ledger.path_for(SID)).st_mode & 0o777) == "0o600"


def test_a_digest_file_past_its_caps_is_cut_and_keeps_the_ids_still_shown(
    project_dir: Path,
) -> None:
    """A hand-edited digest file longer than the caps is cut again by the hook; the ledger keeps
    the records whose handles the cut text still shows (and only those)."""
    ids = seed(project_dir, DECISIONS)
    data = payload("SessionStart", SID, project_dir, source="startup")
    assert contract(run_hook("session-start", data, cwd=project_dir), "SessionStart")
    path = digests.path_for(identify(str(project_dir)).project_id)
    saved = json.loads(Path(path).read_text())
    saved["parts"]["head"] += "\n" + "filler words for the cut " * 2000
    Path(path).write_text(json.dumps(saved))
    other = payload("SessionStart", "3d1a2c4e-0000-4000-8000-000000000001", project_dir)
    text = contract(run_hook("session-start", other, cwd=project_dir), "SessionStart")
    assert text and estimate_tokens(text) <= 1500 and handle(ids[0]) in text
    shown = ledger.read_entries("3d1a2c4e-0000-4000-8000-000000000001")[-1]["ids"]
    assert ids[0] in shown
    assert all(handle(i) in text for i in shown)


def test_records_the_digest_showed_are_not_injected_again(project_dir: Path) -> None:
    """Profile and preference lines print no id; the ledger still learns them (demo regression)."""
    ids = seed(project_dir, DECISIONS)
    start = payload("SessionStart", SID, project_dir, source="startup")
    text = contract(run_hook("session-start", start, cwd=project_dir), "SessionStart")
    assert text and "Prefer small commits" in text
    preference = ids[DECISIONS.index(next(d for d in DECISIONS if "small commits" in d["title"]))]
    assert handle(preference) not in text  # shown by title only
    assert preference in ledger.injected_ids(ledger.read_entries(SID))
    ask = payload("UserPromptSubmit", SID, project_dir, prompt="should I prefer small commits?")
    again = contract(run_hook("user-prompt-submit", ask, cwd=project_dir), "UserPromptSubmit")
    assert again is None or "Prefer small commits" not in again


def test_session_start_digest_is_rebuilt_after_a_write(project_dir: Path) -> None:
    seed(project_dir, DECISIONS[:1])
    data = payload("SessionStart", SID, project_dir, source="startup")
    first = contract(run_hook("session-start", data, cwd=project_dir), "SessionStart")
    assert first and "Tests live beside the code" not in first
    seed(project_dir, DECISIONS[1:2])
    second = contract(run_hook("session-start", data, cwd=project_dir), "SessionStart")
    assert second and "Tests live beside the code" in second


def test_session_start_with_empty_store_prints_nothing(project_dir: Path) -> None:
    seed(project_dir, [])
    data = payload("SessionStart", SID, project_dir, source="startup")
    assert contract(run_hook("session-start", data, cwd=project_dir), "SessionStart") is None


def test_session_start_caps_a_huge_store(project_dir: Path) -> None:
    records = [
        {"type": "decision", "title": f"Decision {i} about module {i}", "body": "word " * 380}
        for i in range(60)
    ] + [{"type": "handover", "title": "Handover", "body": "x" * 1990}]
    seed(project_dir, records)
    data = payload("SessionStart", SID, project_dir, source="startup")
    text = contract(run_hook("session-start", data, cwd=project_dir), "SessionStart")
    assert text and estimate_tokens(text) <= 1500 and len(text) <= 10_000


# -- UserPromptSubmit -------------------------------------------------------------------------------


def test_prompt_injects_matches_once_per_session(project_dir: Path) -> None:
    ids = seed(project_dir, DECISIONS)
    ask = payload(
        "UserPromptSubmit",
        SID,
        project_dir,
        prompt="Why does useAuthStore keep stale tokens after the gRPC change?",
    )
    text = contract(run_hook("user-prompt-submit", ask, cwd=project_dir), "UserPromptSubmit")
    assert text is not None
    assert "useAuthStore returned stale tokens" in text and "unconfirmed" in text
    assert estimate_tokens(text) <= 2000 and len(text) <= 8000
    again = contract(run_hook("user-prompt-submit", ask, cwd=project_dir), "UserPromptSubmit")
    assert again is None, "the same records must not be injected twice in a session"
    other = payload("UserPromptSubmit", "another-session", project_dir, prompt=ask["prompt"])
    assert contract(run_hook("user-prompt-submit", other, cwd=project_dir), "UserPromptSubmit")
    assert ledger.injected_ids(ledger.read_entries(SID)) >= {ids[2]}


@pytest.mark.parametrize("prompt", ["", "ok", "yes please", "thanks!", "?", "   "])
def test_trivial_prompt_prints_nothing(prompt: str, project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    data = payload("UserPromptSubmit", SID, project_dir, prompt=prompt)
    assert (
        contract(run_hook("user-prompt-submit", data, cwd=project_dir), "UserPromptSubmit") is None
    )


def test_prompt_top_three_within_budget(project_dir: Path) -> None:
    records = [
        {"type": "discovery", "title": f"Cache note {i}", "body": "cache invalidation " * 100}
        for i in range(8)
    ]
    seed(project_dir, records)
    data = payload("UserPromptSubmit", SID, project_dir, prompt="cache invalidation")
    text = contract(run_hook("user-prompt-submit", data, cwd=project_dir), "UserPromptSubmit")
    assert text is not None
    assert text.count("] Cache note") == 3
    assert estimate_tokens(text) <= 2000 and len(text) <= 8000


def test_concurrent_prompts_share_dedup_state(project_dir: Path) -> None:
    records = [
        {"type": "discovery", "title": f"Parser quirk {i}", "body": f"The tokenizer quirk {i}."}
        for i in range(12)
    ]
    ids = set(seed(project_dir, records))
    data = payload("UserPromptSubmit", SID, project_dir, prompt="tokenizer quirk parser")

    def one(_: int) -> str | None:
        return contract(run_hook("user-prompt-submit", data, cwd=project_dir), "UserPromptSubmit")

    with ThreadPoolExecutor(4) as pool:
        outputs = [t for t in pool.map(one, range(4)) if t]
    shown = [line for text in outputs for line in text.splitlines() if line.startswith("### ")]
    assert len(shown) == len(set(shown)) == 12, "each record exactly once across 4 processes"
    assert ledger.injected_ids(ledger.read_entries(SID)) == ids


# -- SubagentStart ----------------------------------------------------------------------------------


def test_subagent_start_gets_decisions(project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    data = payload("SubagentStart", SID, project_dir, agent_id="a1", agent_type="Explore")
    text = contract(run_hook("subagent-start", data, cwd=project_dir), "SubagentStart")
    assert text and "Use gRPC for internal services" in text
    assert "useAuthStore" not in text  # bugfixes are not decisions
    assert estimate_tokens(text) <= 800


# -- capture ----------------------------------------------------------------------------------------


def _post(project_dir: Path, tool: str, tool_input: dict[str, Any], **extra: Any) -> None:
    event = extra.pop("event", "PostToolUse")
    data = payload(
        event,
        SID,
        project_dir,
        tool_name=tool,
        tool_input=tool_input,
        tool_use_id=f"toolu_{uuid.uuid4().hex}",  # unique per call, as Claude Code's ids are
        **extra,
    )
    result = run_hook("post-tool-use", data, cwd=project_dir)
    assert result.returncode == 0 and result.stdout == b""


def test_post_tool_use_links_written_files(project_dir: Path) -> None:
    seed(project_dir, [])
    for tool, key in (
        ("Write", "file_path"),
        ("Edit", "file_path"),
        ("MultiEdit", "file_path"),
        ("NotebookEdit", "notebook_path"),
    ):
        _post(
            project_dir,
            tool,
            {key: str(project_dir / "src" / f"{tool}.py"), "content": "x"},
            tool_response={"filePath": "x", "success": True},
        )
    _post(project_dir, "Read", {"file_path": str(project_dir / "ignored.py")})
    rows = query(
        "SELECT n.name FROM nodes n JOIN edges e ON e.from_id = n.id "
        "WHERE n.kind = 'file' AND e.rel_type = 'observed_in' AND e.to_id = ? ORDER BY n.name",
        (SID,),
    )
    assert [r[0] for r in rows] == [
        f"src/{t}.py" for t in sorted(["Write", "Edit", "MultiEdit", "NotebookEdit"])
    ]


PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_auth.py .F.                                                   [100%]

=================================== FAILURES ===================================
___________________________ test_refresh_on_401 ________________________________
    def test_refresh_on_401():
>       assert store.token == "new"
E       AssertionError: assert 'old' == 'new'

tests/test_auth.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_auth.py::test_refresh_on_401 - AssertionError: assert 'old' == 'new'
========================= 1 failed, 2 passed in 0.05s ==========================
"""


def test_failing_test_run_records_one_bugfix_stub(project_dir: Path) -> None:
    seed(project_dir, [])
    for _ in range(2):  # the same failure twice: one stub
        _post(
            project_dir,
            "Bash",
            {"command": "pytest -q tests/test_auth.py"},
            event="PostToolUseFailure",
            error="Exit code 1\n" + PYTEST_FAIL,
        )
    rows = query("SELECT id, title, confidence, source, body FROM records WHERE type = 'bugfix'")
    assert len(rows) == 1
    record_id, title, confidence, source, body = rows[0]
    assert title == "Test failure: pytest -q tests/test_auth.py"
    assert (confidence, source) == ("inferred", "hook_observation")
    assert "tests/test_auth.py" in body
    linked = query(
        "SELECT n.name FROM record_entities re JOIN nodes n ON n.id = re.entity_id "
        "WHERE re.record_id = ?",
        (record_id,),
    )
    assert [r[0] for r in linked] == ["tests/test_auth.py"]


@pytest.mark.parametrize(
    ("command", "output", "recorded"),
    [
        ("pytest -q", "...\n3 passed in 0.01s\n", [("discovery", "Tests passed: pytest -q")]),
        ("ls -la", "total 0\n", []),
        ("npm test", "Tests: 4 passed, 4 total\n", [("discovery", "Tests passed: npm test")]),
        ("grep -r foo .", "", []),
    ],
)
def test_clean_runs_record_no_failure(
    command: str, output: str, recorded: list[tuple[str, str]], project_dir: Path
) -> None:
    """A clean run is no stub; a green test run is its pass (tests/test_capture_activity.py)."""
    seed(project_dir, [])
    _post(
        project_dir,
        "Bash",
        {"command": command},
        tool_response={"stdout": output, "stderr": "", "interrupted": False},
    )
    assert query("SELECT type, title FROM records") == recorded


@pytest.mark.parametrize(
    ("command", "output", "event"),
    [
        (
            "go test ./...",
            "--- FAIL: TestParse (0.00s)\n    parse_test.go:14: bad\nFAIL\n",
            "PostToolUseFailure",
        ),
        (
            "npx jest",
            "FAIL src/auth.test.ts\n  ● refresh\nTests: 1 failed, 3 passed\n",
            "PostToolUseFailure",
        ),
        ("cargo test", "test result: FAILED. 1 passed; 1 failed\n", "PostToolUseFailure"),
        ("yarn test", "FAIL src/x.test.js\n", "PostToolUse"),
    ],
)
def test_test_runners_are_recognized(
    command: str, output: str, event: str, project_dir: Path
) -> None:
    seed(project_dir, [])
    extra: dict[str, Any] = (
        {"error": "Exit code 1\n" + output}
        if event == "PostToolUseFailure"
        else {"tool_response": {"stdout": output, "stderr": ""}}
    )
    _post(project_dir, "Bash", {"command": command}, event=event, **extra)
    titles = [r[0] for r in query("SELECT title FROM records WHERE type = 'bugfix'")]
    assert titles == [f"Test failure: {command}"]


def test_hard_error_is_observed_and_secrets_redacted(project_dir: Path) -> None:
    seed(project_dir, [])
    secret = "sk-ant-api03-" + "a1B2c3D4" * 6
    _post(
        project_dir,
        "Bash",
        {"command": f"ANTHROPIC_API_KEY={secret} python run.py"},
        event="PostToolUseFailure",
        error='Exit code 1\nTraceback (most recent call last):\n  File "run.py", line 3\n'
        "ModuleNotFoundError: No module named 'yaml'\n",
    )
    rows = query("SELECT title, body FROM records")
    assert len(rows) == 1 and rows[0][0].startswith("Error observed: ")
    assert secret not in rows[0][0] + rows[0][1]
    assert "ModuleNotFoundError" in rows[0][1]


def test_branch_switches_become_branch_nodes(project_dir: Path) -> None:
    seed(project_dir, [])
    _post(
        project_dir,
        "Bash",
        {"command": "git checkout -b feat/login"},
        tool_response={"stdout": "", "stderr": "Switched to a new branch 'feat/login'\n"},
    )
    _post(
        project_dir,
        "Bash",
        {"command": "git switch main"},
        tool_response={"stdout": "", "stderr": "Switched to branch 'main'\n"},
    )
    names = sorted(r[0] for r in query("SELECT name FROM nodes WHERE kind = 'branch'"))
    assert names == ["feat/login", "main"]


def _transcript(tmp_path: Path) -> Path:
    lines = [
        {
            "type": "user",
            "isSidechain": False,
            "message": {
                "role": "user",
                "content": "Refactor the auth store so tokens refresh on 401",
            },
            "uuid": "u1",
        },
        {
            "type": "assistant",
            "isSidechain": False,
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Edit",
                        "input": {"file_path": str(tmp_path / "project" / "src" / "auth.ts")},
                    }
                ],
            },
            "uuid": "a1",
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
            "toolUseResult": {},
            "uuid": "u2",
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Edited the store; next: add a test."}],
            },
            "uuid": "a2",
        },
        {"type": "user", "isMeta": True, "message": {"role": "user", "content": "<meta>"}},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{truncated")
    return path


def test_pre_compact_snapshots_a_handover_that_supersedes(
    project_dir: Path, tmp_path: Path
) -> None:
    seed(project_dir, [{"type": "handover", "title": "Old handover", "body": "old"}])
    data = payload("PreCompact", SID, project_dir, trigger="manual", custom_instructions="")
    data["transcript_path"] = str(_transcript(tmp_path))
    result = run_hook("pre-compact", data, cwd=project_dir)
    assert result.returncode == 0 and result.stdout == b""
    current = query(
        "SELECT title, body FROM records WHERE type = 'handover' AND superseded_at IS NULL"
    )
    assert len(current) == 1
    title, body = current[0]
    assert "Refactor the auth store" in title and "src/auth.ts" in body
    assert query("SELECT count(*) FROM records WHERE superseded_at IS NOT NULL")[0][0] == 1
    start = payload("SessionStart", SID, project_dir, source="compact")
    text = contract(run_hook("session-start", start, cwd=project_dir), "SessionStart")
    assert text and "Refactor the auth store" in text


def test_pre_compact_on_real_transcripts(project_dir: Path, transcripts: list[Path]) -> None:
    seed(project_dir, [])
    for path in transcripts:
        data = payload("PreCompact", SID, project_dir, trigger="auto", transcript_path=str(path))
        result = run_hook("pre-compact", data, cwd=project_dir)
        assert result.returncode == 0 and result.stdout == b""
    assert query("SELECT count(*) FROM records WHERE type = 'handover'")[0][0] >= 1


# -- lifecycle --------------------------------------------------------------------------------------


def test_session_end_folds_tokens_and_removes_state(project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    start = payload("SessionStart", SID, project_dir, source="startup")
    text = contract(run_hook("session-start", start, cwd=project_dir), "SessionStart")
    ask = payload("UserPromptSubmit", SID, project_dir, prompt="gRPC services")
    assert text
    contract(run_hook("user-prompt-submit", ask, cwd=project_dir), "UserPromptSubmit")
    expected = sum(e["tokens"] for e in ledger.read_entries(SID))
    stop = payload("Stop", SID, project_dir, stop_hook_active=False)
    assert run_hook("stop", stop, cwd=project_dir).returncode == 0
    end = payload("SessionEnd", SID, project_dir, reason="prompt_input_exit")
    assert run_hook("session-end", end, cwd=project_dir).returncode == 0
    row = query(
        "SELECT project_id, started_at, ended_at, tokens_injected FROM sessions "
        "WHERE session_id = ?",
        (SID,),
    )[0]
    assert row[0] == identify(str(project_dir)).project_id
    assert row[1] and row[2] and row[3] == expected > 0
    assert not os.path.exists(ledger.path_for(SID))


def _jsonl(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)


def test_stop_counts_conversation_not_claude_code_bookkeeping(
    project_dir: Path, tmp_path: Path
) -> None:
    """40 KB of Claude Code's own lines (attachments) start no extraction; conversation does."""
    from agentctx.hooks.lifecycle import EXTRACT_GROWTH_BYTES, conversation_bytes

    seed(project_dir, [])
    transcript = tmp_path / "t.jsonl"
    noise = {"type": "attachment", "attachment": {"type": "x", "content": "n" * 1000}}
    transcript.write_bytes(_jsonl([noise] * 40))
    env = {"ANTHROPIC_API_KEY": "sk-fake", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    stop = payload("Stop", SID, project_dir, transcript_path=str(transcript))
    assert run_hook("stop", stop, cwd=project_dir, env=env).returncode == 0
    row = query("SELECT extract_requested_size FROM sessions WHERE session_id = ?", (SID,))
    assert row[0][0] == 0
    assert conversation_bytes(str(transcript), 0, EXTRACT_GROWTH_BYTES) == 0
    talk = {"type": "user", "message": {"role": "user", "content": "t" * 1000}}
    with transcript.open("ab") as fh:
        fh.write(_jsonl([talk] * 40))
    grown = conversation_bytes(str(transcript), 0, EXTRACT_GROWTH_BYTES)
    assert EXTRACT_GROWTH_BYTES <= grown < EXTRACT_GROWTH_BYTES + 1100  # stops once enough


def test_cwd_changed_moves_the_session(project_dir: Path, tmp_path: Path) -> None:
    seed(project_dir, [])
    other = tmp_path / "other"
    other.mkdir()
    run_hook("stop", payload("Stop", SID, project_dir), cwd=project_dir)
    moved = payload("CwdChanged", SID, project_dir, old_cwd=str(project_dir), new_cwd=str(other))
    assert run_hook("cwd-changed", moved, cwd=project_dir).stdout == b""
    row = query("SELECT project_id, cwd FROM sessions WHERE session_id = ?", (SID,))[0]
    assert tuple(row) == (identify(str(other)).project_id, str(other))


def test_spawn_detached_returns_before_the_worker_finishes(tmp_path: Path) -> None:
    from agentctx.hooks.lifecycle import spawn_detached

    done = tmp_path / "done"
    gate = tmp_path / "gate"
    code = (
        "import os, time\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.01)\n"
        f"open({str(done)!r}, 'w').write(str(os.getsid(0)))\n"
    )
    spawn_detached([sys.executable, "-c", code], str(tmp_path / "worker.log"))
    assert not done.exists()  # we returned while the worker still waits
    gate.write_text("go")
    import time

    deadline = time.monotonic() + 20
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert done.exists()
    assert int(done.read_text() or 0) != os.getsid(0), "the worker runs in its own session"


def _held_open(event: str, data: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The hook with ``data`` written to a stdin that its writer keeps open throughout."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentctx", "hook", event],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    assert proc.stdin is not None
    proc.stdin.write(data)
    proc.stdin.flush()
    try:  # the writer never closes stdin (communicate would): the hook must end on its own
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.stdin.close()
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_closed_stdin_is_read_without_waiting_and_left_blocking() -> None:
    """The usual case (payload written, stdin closed) is read at once; the descriptor, shared with
    the writer's side, is left in blocking mode as it was. A writer still there: read by waiting."""
    from agentctx.hooks import runner

    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b'{"prompt": "grpc"}')
        os.close(write_fd)
        write_fd = -1
        assert runner._read_ready(read_fd) == ([b'{"prompt": "grpc"}'], True)
        assert os.get_blocking(read_fd)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b'{"prompt": ')
        assert runner._read_ready(read_fd) == ([b'{"prompt": '], False)  # more may come
        assert os.get_blocking(read_fd)
        os.write(write_fd, b'{"prompt": ')

        def finish() -> None:
            os.write(write_fd, b'"grpc"}')
            os.close(write_fd)

        rest = threading.Timer(0.2, finish)
        rest.start()
        assert runner._read_stdin(read_fd) == ('{"prompt": "grpc"}', {"prompt": "grpc"})
        rest.join()
        write_fd = -1
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_a_whole_event_on_a_stdin_held_open_is_handled(project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    data = payload("UserPromptSubmit", SID, project_dir, prompt="grpc retries in the gateway")
    result = _held_open("user-prompt-submit", json.dumps(data).encode(), project_dir)
    text = contract(result, "UserPromptSubmit")
    assert text and "gRPC" in text


def test_a_partial_event_on_a_stdin_held_open_is_skipped(project_dir: Path) -> None:
    seed(project_dir, DECISIONS)
    result = _held_open("user-prompt-submit", b'{"session_id": "abc", "prompt": "gr', project_dir)
    assert result.returncode == 0 and result.stdout == b""
    assert "stdin not closed within" in _log_text()


def test_hook_without_an_event_exits_zero_silently() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentctx", "hook"],
        input=b"{}",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, b"")
