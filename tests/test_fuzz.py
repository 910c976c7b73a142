"""Fuzzing the two parsers of outside input: each hook's stdin, and Claude Code transcripts.

Hooks: arbitrary bytes, arbitrary JSON, and payloads of the right shape with hostile values (huge
strings, NULs, lone surrogates, deep nesting, wrong types) go through the real entry point
(:func:`agentctx.hooks.runner.run_hook`) in-process for speed, and a smaller sample through real
``python -m agentctx hook`` processes. Every run must exit 0, print nothing or exactly the contract
JSON, write nothing to stderr, and log no exception: the runner would swallow a handler's crash
(fail-open), so a crash shows only as its one log line, which is what is checked. In-process, the
detached workers are recorded instead of forked (the subprocess sample starts them for real).

Transcripts: ``tests/test_transcript.py`` already feeds synthetic lines; here the real fixture
lines are mutated (cut anywhere, bytes flipped, values replaced by hostile ones, nested deeply)
and the parser must never raise.

The budget is modest and deterministic (the ``ci`` hypothesis profile of tests/conftest.py):
CI runs the same examples every time; ``nox -s explore`` looks for new ones.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx import config
from agentctx.claude.transcript import read_transcript, render
from agentctx.core import home
from agentctx.hooks import lifecycle, runner
from tests.helpers import fixtures_dir, run_hook, seed
from tests.reliability.procs import EVENTS, INJECTING, wait_for_workers

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Many seconds of generated input through hooks and hook processes: its own session (nox -s slow).
pytestmark = pytest.mark.slow

# What runner._log_exception writes: "<Type>: <message> at <file>:<line>" (deliberate lines differ).
CRASH = re.compile(r" [A-Za-z_.]*(?:Error|Exception|Exit|Interrupt|Warning)\b.* at \S+:\d+$", re.M)
IN_PROCESS = settings(
    max_examples=70,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# -- strategies ---------------------------------------------------------------------------------------

# Strings as hostile as JSON can carry: NULs, lone surrogates, control and RTL characters, escapes,
# huge ones; spiked into plausible values so that handlers get past their first checks.
SPECIALS = [
    "\x00",
    "\ud800",
    "\udfff",
    "\u202e",
    "\x1b[31m",
    "\n",
    "\r\n",
    "'",
    '"',
    "\\",
    "%",
    "../",
]
PLAUSIBLE = ["kestrel cache ", "pytest -q tests/test_x.py", "/tmp/", "src/a.py", "", "feat/x"]
hostile_text = st.one_of(
    st.text(st.characters(categories=["Cs", "Cc", "Zs", "Ll", "Nd", "So"]), max_size=30),
    st.builds(
        lambda a, s, b: a + s + b,
        st.sampled_from(PLAUSIBLE),
        st.sampled_from(SPECIALS),
        st.text(max_size=8),
    ),
    st.sampled_from(SPECIALS),
    st.integers(0, 200_000).map(lambda n: "ä" * n),
)
json_any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=20,
)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": [value]}
    return value


hostile = st.one_of(json_any, st.integers(0, 3000).map(_nested))
field = st.one_of(hostile_text, hostile_text, hostile)  # mostly strings, sometimes the wrong type
tool_names = st.sampled_from(
    ["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "Read", "mcp__x__y"]
)
TOOL_INPUT = {
    "file_path": field,
    "command": st.sampled_from(["pytest -q"]) | field,
    "notebook_path": field,
    "content": field,
}
TOOL_RESPONSE = {
    "stdout": st.sampled_from(["FAILED t.py::x - AssertionError\n1 failed"]) | field,
    "stderr": field,
    "output": field,
    "error": field,
}
payloads = st.fixed_dictionaries(
    {
        "session_id": st.sampled_from(["5f0c9a61-9a2b-4c1e-8f3d-0123456789ab"]) | field,
        "cwd": st.just(".") | field,
        "transcript_path": field,
        "hook_event_name": st.sampled_from([*EVENTS.values(), "PostToolUseFailure"]) | field,
    },
    optional={
        "prompt": st.sampled_from(["how does the kestrel cache expire?"]) | field,
        "source": st.sampled_from(["startup", "resume", "clear", "compact"]) | field,
        "tool_name": tool_names | field,
        "tool_input": st.fixed_dictionaries({}, optional=TOOL_INPUT) | hostile,
        "tool_response": st.fixed_dictionaries({}, optional=TOOL_RESPONSE) | hostile,
        "error": field,
        "trigger": field,
        "new_cwd": field,
        "reason": field,
        "stop_hook_active": field,
        "agent_type": field,
    },
)


def _encode(value: Any) -> bytes:
    try:
        return json.dumps(value).encode()  # lone surrogates go out as \\udXXX escapes
    except (ValueError, RecursionError):
        return b"{}"


stdin_bytes = st.one_of(
    st.binary(max_size=2048),
    json_any.map(_encode),
    payloads.map(_encode),
    payloads.map(_encode).map(lambda data: data[: len(data) // 2]),  # cut mid-document
)

# -- the harness ----------------------------------------------------------------------------------------


@pytest.fixture
def seeded(project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """A store with records, in the project the hooks run in; workers recorded, not started."""
    seed(
        project_dir,
        (
            {
                "type": "decision",
                "title": f"The {topic} cache expires entries",
                "body": f"{topic} expiry.",
            }
            for topic in ("kestrel", "zebrafish", "quokka")
        ),
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake")  # Stop may start an extraction: recorded
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project_dir))
    monkeypatch.chdir(project_dir)
    started: list[list[str]] = []
    real_spawn = lifecycle.spawn_detached
    monkeypatch.setattr(lifecycle, "spawn_detached", lambda argv, log: started.append(list(argv)))
    yield started
    monkeypatch.setattr(lifecycle, "spawn_detached", real_spawn)
    wait_for_workers(home.home_dir())  # the real processes' SessionEnd workers, if any


def _log() -> str:
    path = Path(home.sub("logs")) / "hooks.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _clear_log() -> None:
    (Path(home.sub("logs")) / "hooks.log").unlink(missing_ok=True)


def _check_output(stdout: str | bytes, event: str) -> None:
    """Nothing, or exactly ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}``."""
    if not stdout:
        return
    data = json.loads(stdout)
    assert set(data) == {"hookSpecificOutput"}, stdout
    inner = data["hookSpecificOutput"]
    assert set(inner) == {"hookEventName", "additionalContext"}, stdout
    assert inner["hookEventName"] in INJECTING and isinstance(inner["additionalContext"], str)
    assert event in ("", inner["hookEventName"]) or inner["hookEventName"] in INJECTING


def _in_process(cli: str, data: bytes) -> tuple[int, str, str]:
    """``run_hook([cli])`` with ``data`` on stdin; (exit code, stdout, stderr)."""
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdin, sys.stdout, sys.stderr = io.TextIOWrapper(io.BytesIO(data)), out, err
    try:
        code = runner.run_hook([cli])
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def _one(cli: str, data: bytes, started: list[list[str]]) -> None:
    _clear_log()
    started.clear()
    code, out, err = _in_process(cli, data)
    assert code == 0
    assert err == "", err
    _check_output(out, EVENTS[cli])
    crashes = CRASH.findall(_log())
    assert not crashes, (cli, data[:300], crashes)
    for argv in started:  # a worker that could never start (execv refuses NULs) is a lost job
        assert all(isinstance(a, str) and "\x00" not in a for a in argv), argv


# -- hooks, in-process ----------------------------------------------------------------------------------


@IN_PROCESS
@given(cli=st.sampled_from(sorted(EVENTS)), data=st.binary(max_size=4096))
def test_hooks_take_any_bytes(seeded: list[list[str]], cli: str, data: bytes) -> None:
    _one(cli, data, seeded)


@IN_PROCESS
@given(cli=st.sampled_from(sorted(EVENTS)), value=json_any)
def test_hooks_take_any_json(seeded: list[list[str]], cli: str, value: Any) -> None:
    _one(cli, _encode(value), seeded)


@settings(IN_PROCESS, max_examples=200)
@given(cli=st.sampled_from(sorted(EVENTS)), value=payloads)
def test_hooks_take_hostile_payloads(
    seeded: list[list[str]], cli: str, value: dict[str, Any]
) -> None:
    _one(cli, _encode(value), seeded)


# -- hooks, real processes --------------------------------------------------------------------------------


@settings(IN_PROCESS, max_examples=20)
@given(cli=st.sampled_from(sorted(EVENTS)), data=stdin_bytes)
def test_hook_processes_take_anything(
    seeded: list[list[str]], project_dir: Path, cli: str, data: bytes
) -> None:
    config.set_value("llm", False)  # SessionEnd still starts its (consolidation) worker for real
    _clear_log()
    result = run_hook(cli, data, cwd=project_dir)
    assert result.returncode == 0
    assert result.stderr == b"", result.stderr[-2000:]
    _check_output(result.stdout, EVENTS[cli])
    assert not CRASH.findall(_log()), (cli, data[:300], _log())


# -- the transcript parser -----------------------------------------------------------------------------


def _fixture_lines() -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted((fixtures_dir() / "transcripts").glob("*.jsonl")):
        lines += [line for line in path.read_bytes().split(b"\n") if line]
    return lines


REAL_LINES = _fixture_lines()


def _replace_somewhere(entry: Any, value: Any, choice: int) -> Any:
    """``entry`` with one of its values (picked by ``choice``) replaced by ``value``."""
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in node:
                slots.append((node, key))
                walk(node[key])
        elif isinstance(node, list):
            for index in range(len(node)):
                slots.append((node, index))
                walk(node[index])

    walk(entry)
    if slots:
        parent, key = slots[choice % len(slots)]
        parent[key] = value
    return entry


@st.composite
def mutated_line(draw: st.DrawFn) -> bytes:
    line = draw(st.sampled_from(REAL_LINES))
    how = draw(st.sampled_from(["cut", "flip", "replace", "nest", "bytes"]))
    if how == "cut":
        return line[: draw(st.integers(0, len(line)))]
    if how == "flip":
        data = bytearray(line)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if how == "bytes":
        return draw(st.binary(max_size=200))
    entry = json.loads(line)
    value = _nested(draw(st.integers(500, 3000))) if how == "nest" else draw(hostile)
    return _encode(_replace_somewhere(entry, value, draw(st.integers(0, 10_000))))


@settings(IN_PROCESS, max_examples=200)
@given(
    lines=st.lists(mutated_line() | st.sampled_from(REAL_LINES), min_size=1, max_size=12),
    tail=st.booleans(),
    resume=st.sampled_from([None, "", "\x00", "\ud800"]) | st.text(max_size=40),
    subagent=st.lists(mutated_line(), max_size=3),
)
def test_transcript_parser_takes_mutated_real_lines(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    tail: bool,
    resume: str | None,
    subagent: list[bytes],
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if tail else b""))
    if subagent:
        (folder / "s" / "subagents").mkdir(parents=True)
        (folder / "s" / "subagents" / "agent-x.jsonl").write_bytes(b"\n".join(subagent))
    transcript = read_transcript(path, after_uuid=resume)
    render(transcript.turns).encode("utf-8")  # valid text for the API, whatever came in
    assert isinstance(transcript.last_uuid, str)
    assert all(isinstance(n, int) and n > 0 for n in transcript.skipped.values())
