"""agentctx.claude.transcript on the four real Claude Code transcripts in tests/fixtures and on synthetic files.

The real fixtures (tests/fixtures/transcripts, MIT, provenance in PROVENANCE.md there) cover
v1.0.98 (inline sidechains, a summary line, a slash command) and v2.1.38/39 (progress lines,
thinking, queue operations, a subagent's own file). tests/data/transcripts holds synthetic files
for what the fixtures lack: compact summaries, images, errors, MCP tools, injected agentctx
context and the v2.1 ``<session>/subagents/`` layout.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.claude.transcript import (
    SUBAGENT_PREFIX,
    SUMMARY_PREFIX,
    TOOL_CALL_CHARS,
    Transcript,
    Turn,
    read_transcript,
    render,
)
from agentctx.core.inject import FENCE_OPEN, OLD_HEADERS, PROMPT_NOTE

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
KITCHEN = DATA / "kitchen-sink.jsonl"
LAYOUT_SESSION = "0b5a7d3e-1111-4222-8333-944455556666"
LAYOUT = DATA / "v21-layout" / f"{LAYOUT_SESSION}.jsonl"

CCVIEWER = "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
AGENT_FILE = "spotter-258c7280-subagents-agent-a881341.jsonl"
SUBAGENT = "spotter-subagent.jsonl"
TOOL_HEAVY = "spotter-tool_heavy.jsonl"

#: Per fixture: (lines, turns by (role, sidechain), skipped), checked by hand against a listing
#: of every line and re-derived below by a separate plain-json count.
EXPECTED: dict[str, tuple[int, dict[tuple[str, bool], int], dict[str, int]]] = {
    CCVIEWER: (
        438,
        {
            ("developer", False): 2,  # "/orchestrator create TODO app by Next.js", "Thanks! ..."
            ("assistant", False): 7,
            ("tool", False): 22,  # 11 calls (Glob x2, TodoWrite x3, Task x5, Write) + 11 results
            ("assistant", True): 93,  # 88 texts + the 5 subagent task prompts
            ("tool", True): 312,  # 156 calls + 156 results
        },
        {"meta": 1, "summary": 1},
    ),
    AGENT_FILE: (
        10,
        {("assistant", True): 4, ("tool", True): 4},
        {"progress": 2},
    ),
    SUBAGENT: (
        96,
        {("developer", False): 2, ("assistant", False): 7, ("tool", False): 32},
        {
            "empty": 1,  # an assistant text block "\n\n"
            "file-history-snapshot": 3,
            "interrupted": 1,
            "meta": 1,  # the expanded skill prompt
            "progress": 44,  # 25 hook_progress + 19 agent_progress
            "system": 1,
            "thinking": 4,
        },
    ),
    TOOL_HEAVY: (
        39,
        {("developer", False): 3, ("assistant", False): 1, ("tool", False): 12},
        {
            "command_output": 1,
            "empty": 1,
            "file-history-snapshot": 3,
            "interrupted": 2,
            "meta": 1,
            "progress": 10,
            "queue-operation": 2,
            "system": 2,
            "thinking": 1,
        },
    ),
}


@pytest.fixture(scope="module")
def fixture_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "transcripts"


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _independent_counts(path: Path) -> tuple[Counter[tuple[str, bool]], Counter[str]]:
    """Turns and skip reasons counted with plain json and simple rules, not the reader's code."""
    roles: Counter[tuple[str, bool]] = Counter()
    skipped: Counter[str] = Counter()
    for entry in _raw(path):
        kind, side = entry["type"], bool(entry.get("isSidechain"))
        if kind not in ("user", "assistant"):
            skipped[kind] += 1
            continue
        content = entry["message"]["content"]
        if kind == "assistant":
            for block in content:
                if block["type"] == "thinking":
                    skipped["thinking"] += 1
                elif block["type"] == "tool_use":
                    roles["tool", side] += 1
                elif block["text"].strip():
                    roles["assistant", side] += 1
                else:
                    skipped["empty"] += 1
            continue
        if entry.get("isMeta"):
            skipped["meta"] += 1
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block["type"] == "tool_result":
                roles["tool", side] += 1
            elif block["text"].startswith("[Request interrupted by user"):
                skipped["interrupted"] += 1
            elif block["text"].startswith("<local-command-stdout>"):
                skipped["command_output"] += 1
            else:
                roles["assistant" if side else "developer", side] += 1
    return roles, skipped


def _shape(transcript: Transcript) -> tuple[Counter[tuple[str, bool]], dict[str, int]]:
    return Counter((turn.role, turn.sidechain) for turn in transcript.turns), transcript.skipped


# -- the real fixtures --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_counts(fixture_dir: Path, name: str) -> None:
    path = fixture_dir / name
    transcript = read_transcript(str(path))
    lines, roles, skipped = EXPECTED[name]
    assert transcript.lines_total == lines == len(path.read_bytes().splitlines())
    assert _shape(transcript) == (Counter(roles), skipped)
    independent_roles, independent_skipped = _independent_counts(path)
    assert independent_roles == Counter(roles)
    assert dict(independent_skipped) == skipped
    raw = _raw(path)
    assert transcript.last_uuid == next(e["uuid"] for e in reversed(raw) if e.get("uuid"))
    assert transcript.bytes_read == path.stat().st_size
    assert transcript.path == str(path)


def test_every_fixture_is_covered(transcripts: list[Path]) -> None:
    assert sorted(p.name for p in transcripts) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_render_leaves_out_thinking_signatures_progress_and_harness_text(
    fixture_dir: Path, name: str
) -> None:
    path = fixture_dir / name
    text = render(read_transcript(path).turns)
    assert text
    forbidden: list[str] = []
    for entry in _raw(path):
        if entry["type"] == "assistant":
            for block in entry["message"]["content"]:
                if block["type"] == "thinking":
                    forbidden += [block["thinking"][:80], block["signature"]]
        elif entry["type"] == "progress":
            data = entry["data"]
            if data["type"] == "hook_progress":
                forbidden.append(data["command"])
        elif entry["type"] == "file-history-snapshot":
            backups = entry["snapshot"]["trackedFileBackups"].values()
            forbidden += [b["backupFileName"] for b in backups if b["backupFileName"]]
        elif entry["type"] == "user" and entry.get("isMeta"):
            forbidden.append(json.dumps(entry["message"]["content"])[20:100])
        elif entry["type"] == "summary":
            forbidden.append(entry["summary"])
    for needle in forbidden:
        assert needle not in text, needle
    for needle in (
        "<system-reminder>",
        "consider whether it",
        "<command-name>",
        "<local-command",
        "Caveat:",
        "[Request interrupted",
        '"signature"',
        "msg_01",
    ):
        assert needle not in text


def test_fixture_specific_turns(fixture_dir: Path) -> None:
    heavy = [t.text for t in read_transcript(fixture_dir / TOOL_HEAVY).turns]
    assert heavy[:3] == [
        "start phoenix in background",
        "Bash: mix phx.server",
        "result: Command running in background with ID: bae407b. Output is being written to: "
        "/tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output",
    ]
    assert "/mcp" in heavy  # the slash command, not its wrapper or its output
    assert "Read: /home/marco/projects/spotter/assets/js/app.js" in heavy
    assert "WebFetch: https://github.com/xtermjs/xterm.js/issues/1343" in heavy
    assert "Glob: assets/js/**/*.js" in heavy

    beads = read_transcript(fixture_dir / SUBAGENT).turns
    developer = [t.text for t in beads if t.role == "developer"]
    assert developer[0].startswith("/handgemacht:create-beads websearch to learn how to fastest")
    assert developer[0].endswith("Maybe there are igniter scripts?")
    assert developer[1] == "create the beads"
    texts = [t.text for t in beads]
    assert "Task: Draft beads for linting setup (Plan)" in texts
    assert any(t.startswith("AskUserQuestion: Which rig do these beads belong to?") for t in texts)
    assert any('"No rig"' in t and t.startswith("result: User has answered") for t in texts)

    cc = read_transcript(fixture_dir / CCVIEWER).turns
    assert cc[0] == Turn(
        uuid=_raw(fixture_dir / CCVIEWER)[1]["uuid"],
        role="developer",
        text="/orchestrator create TODO app by Next.js",
        timestamp=_raw(fixture_dir / CCVIEWER)[1]["timestamp"],
        sidechain=False,
    )
    texts = [t.text for t in cc]
    assert "Glob: **/*.md in ~/.claude/commands" in texts
    assert "Task: Setup Next.js project (general-purpose)" in texts
    assert any(t.startswith("TodoWrite: [ ] Set up Next.js project structure") for t in texts)
    assert any(t.startswith("TodoWrite: [x] Set up Next.js project") for t in texts)
    errors = [t.text for t in cc if t.text.startswith("error: ")]
    assert len(errors) == 23  # every is_error result
    assert "error: File has not been read yet. Read it first before writing to it." in errors
    assert not any("\x1b" in t for t in texts)  # ANSI colours of npx output removed


def test_write_and_multiedit_summaries_match_the_raw_input(fixture_dir: Path) -> None:
    path = fixture_dir / CCVIEWER
    expected = []
    for entry in _raw(path):
        if entry["type"] != "assistant":
            continue
        for block in entry["message"]["content"]:
            if block.get("name") == "Write":
                lines = len(block["input"]["content"].splitlines())
                expected.append(f"Write: {block['input']['file_path']} ({lines} lines)")
            elif block.get("name") == "MultiEdit":
                edits = len(block["input"]["edits"])
                expected.append(f"MultiEdit: {block['input']['file_path']} ({edits} edits)")
    texts = [t.text for t in read_transcript(path).turns]
    assert len(expected) == 36  # 33 Write + 3 MultiEdit
    assert [t for t in texts if t.startswith(("Write: ", "MultiEdit: "))] == expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tool_calls_are_one_line_and_results_are_truncated(fixture_dir: Path, name: str) -> None:
    limit = 120
    turns = read_transcript(fixture_dir / name, tool_result_chars=limit).turns
    calls = [t for t in turns if t.role == "tool" and not t.text.startswith(("result:", "error:"))]
    results = [t for t in turns if t.role == "tool" and t.text.startswith(("result:", "error:"))]
    assert calls and results
    for turn in calls:
        name_part, _, detail = turn.text.partition(": ")
        assert "\n" not in turn.text
        assert len(detail) <= TOOL_CALL_CHARS + 1
        assert name_part.isidentifier() or name_part.startswith("mcp__")
    for turn in results:
        label, _, body = turn.text.partition(": ")
        assert label in ("result", "error")
        assert len(body) <= limit + 1
    assert any(t.text.endswith("…") for t in results)
    # The default limit keeps more, and all the short results are whole.
    default = read_transcript(fixture_dir / name).turns
    assert (
        max(len(t.text) for t in default if t.text.startswith("result:")) <= len("result: ") + 601
    )


def test_v1_inline_sidechains(fixture_dir: Path) -> None:
    path = fixture_dir / CCVIEWER
    raw = _raw(path)
    side_uuids = {e["uuid"] for e in raw if e.get("isSidechain")}
    turns = read_transcript(path).turns
    assert {t.uuid for t in turns if t.sidechain} == side_uuids  # every sidechain line has a turn
    assert all(t.sidechain == (t.uuid in side_uuids) for t in turns)
    prompts = [t.text for t in turns if t.text.startswith(SUBAGENT_PREFIX)]
    assert len(prompts) == 5 and all(t.role == "assistant" for t in turns if t.text in prompts)
    assert prompts[0].startswith(SUBAGENT_PREFIX + "Create React components for the TODO app")
    # Without subagents the sidechain lines are skipped and counted.
    main = read_transcript(path, include_subagents=False)
    assert not any(t.sidechain for t in main.turns)
    assert main.skipped == {"meta": 1, "summary": 1, "sidechain": len(side_uuids)}
    assert [t for t in turns if not t.sidechain] == main.turns
    assert "[subagent assistant] " + prompts[0] in render(turns)


def test_subagent_file_read_on_its_own(fixture_dir: Path) -> None:
    turns = read_transcript(fixture_dir / AGENT_FILE).turns
    assert all(t.sidechain for t in turns)
    assert turns[0].role == "assistant"
    assert turns[0].text.startswith(SUBAGENT_PREFIX + "What is the output contract for Claude")
    assert turns[2].text.startswith("WebFetch: https://code.claude.com/docs/en/claude_code_docs")


# -- subagent folding (v2.1 layout) -------------------------------------------------------------


def test_v21_subagent_files_are_folded_in_by_timestamp() -> None:
    transcript = read_transcript(LAYOUT)
    turns = transcript.turns
    uuids = [t.uuid for t in turns]
    main_uuids = ["m-01", "m-02", "m-03", "m-04", "m-06", "m-07", "m-08", "m-09"]
    subagents = ["a-01", "a-02", "a-03", "a-04", "b-01", "b-02"]
    assert uuids == [*main_uuids[:4], *subagents, *main_uuids[4:]]
    assert [t.sidechain for t in turns] == [u[0] in "ab" for u in uuids]
    for agent in "ab":  # each subagent is one block, in its own time order
        stamps = [t.timestamp for t in turns if t.uuid[0] == agent]
        assert stamps == sorted(stamps)
    task_call = uuids.index("m-04")
    assert all(turns[task_call].timestamp <= t.timestamp for t in turns if t.sidechain)
    first_result = uuids.index("m-06")
    assert all(uuids.index(t.uuid) < first_result for t in turns if t.sidechain)
    assert turns[4].text == SUBAGENT_PREFIX + "Look at tests/test_cache.py"
    assert transcript.skipped == {"corrupt": 1, "progress": 1}  # a bad line in agent-bbb2222
    assert transcript.last_uuid == "m-09"  # the main file's
    assert "MIRRORED-PROGRESS-TEXT" not in render(turns)
    assert "[subagent tool] Read: /repo/tests/test_cache.py" in render(turns)

    without = read_transcript(LAYOUT, include_subagents=False)
    assert [t.uuid for t in without.turns] == main_uuids
    assert without.skipped == {"progress": 1}


def test_real_subagent_file_in_the_v21_layout(fixture_dir: Path, tmp_path: Path) -> None:
    """The real agent file placed under a real main file (it is newer, so it folds in last)."""
    main = tmp_path / "491e126e-1e71-469c-ade2-fcc8af567c74.jsonl"
    shutil.copy(fixture_dir / SUBAGENT, main)
    (tmp_path / main.stem / "subagents").mkdir(parents=True)
    shutil.copy(
        fixture_dir / AGENT_FILE, tmp_path / main.stem / "subagents" / "agent-a881341.jsonl"
    )
    alone = read_transcript(fixture_dir / SUBAGENT)
    agent = read_transcript(fixture_dir / AGENT_FILE)
    folded = read_transcript(main)
    assert folded.turns == alone.turns + agent.turns
    assert folded.skipped == dict(sorted((Counter(alone.skipped) + Counter(agent.skipped)).items()))
    assert folded.last_uuid == alone.last_uuid


# -- incremental reads --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_after_a_middle_uuid_only_later_turns(fixture_dir: Path, name: str) -> None:
    path = fixture_dir / name
    raw = _raw(path)
    line_of = {e["uuid"]: i for i, e in enumerate(raw) if e.get("uuid")}
    middle = next(e["uuid"] for e in raw[len(raw) // 2 :] if e.get("uuid"))
    full = read_transcript(path)
    later = read_transcript(path, after_uuid=middle)
    assert later.turns == [t for t in full.turns if line_of[t.uuid] > line_of[middle]]
    assert later.turns and len(later.turns) < len(full.turns)
    assert later.last_uuid == full.last_uuid
    assert later.lines_total == len(raw) - line_of[middle] - 1
    assert "resume_uuid_missing" not in later.skipped
    # After the last uuid: nothing new, and the cursor stays.
    done = read_transcript(path, after_uuid=full.last_uuid)
    assert done.turns == [] and done.last_uuid == full.last_uuid


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unknown_resume_uuid_reads_everything(fixture_dir: Path, name: str) -> None:
    full = read_transcript(fixture_dir / name)
    again = read_transcript(fixture_dir / name, after_uuid="no-such-uuid")
    assert again.turns == full.turns
    assert again.skipped == {**full.skipped, "resume_uuid_missing": 1}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reading_a_growing_file_in_pieces_gives_every_turn_once(
    fixture_dir: Path, tmp_path: Path, name: str
) -> None:
    """Claude Code appends asynchronously: cut the file anywhere, even mid-line or mid-character."""
    data = (fixture_dir / name).read_bytes()
    full = read_transcript(fixture_dir / name).turns
    target = tmp_path / "growing.jsonl"
    cuts = [len(data) * k // 7 + 13 for k in range(1, 7)] + [len(data)]
    seen: list[Turn] = []
    cursor: str | None = None
    truncated = 0
    for cut in cuts:
        target.write_bytes(data[:cut])
        part = read_transcript(target, after_uuid=cursor)
        assert "resume_uuid_missing" not in part.skipped
        truncated += part.skipped.get("truncated", 0)
        seen += part.turns
        cursor = part.last_uuid or cursor
    assert seen == full
    assert truncated >= 5  # the cuts fell mid-line


def test_subagent_lines_after_the_resume_point() -> None:
    after_task = read_transcript(LAYOUT, after_uuid="m-04")
    assert [t.uuid for t in after_task.turns][:6] == [
        "a-01",
        "a-02",
        "a-03",
        "a-04",
        "b-01",
        "b-02",
    ]
    after_results = read_transcript(LAYOUT, after_uuid="m-07")
    assert [t.uuid for t in after_results.turns] == ["m-08", "m-09"]
    assert after_results.skipped == {"corrupt": 1}  # the bad line has no timestamp to go by


# -- synthetic edge cases -----------------------------------------------------------------------


def test_kitchen_sink() -> None:
    transcript = read_transcript(KITCHEN)
    assert transcript.skipped == {
        "agentctx_context": 1,
        "ai-title": 1,
        "api_error": 1,
        "attachment": 1,
        "command_output": 2,
        "file-history-snapshot": 1,
        "interrupted": 1,
        "last-prompt": 1,
        "meta": 1,
        "progress": 1,
        "queue-operation": 1,
        "summary": 1,
        "system": 1,
        "thinking": 2,
        "unknown_type": 1,
    }
    assert transcript.last_uuid == "k-21"
    assert [(t.uuid, t.role, t.text) for t in transcript.turns] == [
        (
            "k-01",
            "developer",
            "Please migrate the settings loader to TOML.\n\nKeep the old INI path working.",
        ),
        ("k-04", "assistant", "I'll read the loader first."),
        ("k-05", "tool", "Read: /repo/settings.py"),
        ("k-06", "tool", "result:      1\tdef load():\n     2\t    return ini()"),
        ("k-07", "tool", "Write: /repo/settings.toml (3 lines)"),
        (
            "k-07",
            "tool",
            'mcp__github__create_issue: {"body":"' + "x" * (TOOL_CALL_CHARS - 9) + "…",
        ),
        ("k-08", "tool", "result: File created\n[image]"),
        ("k-08", "tool", "error: boom: rate limited"),
        ("k-10", "developer", "/compact"),
        (
            "k-13",
            "assistant",
            SUMMARY_PREFIX + "This session is being continued from a previous conversation. "
            "The settings loader now reads TOML.",
        ),
        ("k-14", "developer", "Here is the failing screen\n\n[image]"),
        ("k-15", "tool", "TodoWrite: [x] Port loader; [~] Add tests; [ ] Docs"),
        ("k-17", "developer", "! git status"),
        ("k-21", "assistant", "Done: the loader reads TOML and falls back to INI."),
    ]
    text = render(transcript.turns)
    for needle in ("KITCHEN", "agentctx", "01JKITCHENSINK", "uv sync", "Postgres", "API Error"):
        assert needle not in text
    assert text.startswith("[developer] Please migrate")
    assert "\n\n[tool] Read: /repo/settings.py\n\n" in text


def test_render_format_is_deterministic() -> None:
    turns = [
        Turn("u1", "developer", "use ruff", "t1", False),
        Turn("u2", "assistant", "ok\n\nnoted", "t2", False),
        Turn("u3", "tool", "Bash: ruff check", "t3", True),
    ]
    expected = "[developer] use ruff\n\n[assistant] ok\n\nnoted\n\n[subagent tool] Bash: ruff check"
    assert render(turns) == expected == render(tuple(turns))
    assert render([]) == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        turns[0].text = "x"  # type: ignore[misc]
    assert render(read_transcript(KITCHEN).turns) == render(read_transcript(KITCHEN).turns)


def _user_line(uuid: str, content: Any, **extra: Any) -> bytes:
    entry = {"type": "user", "message": {"role": "user", "content": content}, "uuid": uuid}
    entry["timestamp"] = f"2026-03-01T10:00:0{len(uuid) % 10}.000Z"
    return json.dumps({**entry, **extra}).encode()


def test_corrupt_binary_unknown_and_truncated_lines(tmp_path: Path) -> None:
    good = _user_line("g1", "first request")
    lines = [
        good,
        b"not json at all",
        b"\x00\x01\xff\xfe\x80 binary \xc3\x28",
        b"[1, 2, 3]",
        b'"a string"',
        b"42",
        b"",
        b"   \r",
        b'{"type": "user", "message": {"content": "never closed"',
        b'{"type": "mystery", "uuid": "x1"}',
        b'{"no_type": true}',
        b'{"type": "user", "uuid": "m1", "message": "not an object"}',
        b'{"type": "assistant", "uuid": "m2", "message": {"content": 7}}',
        b'{"type":"user","uuid":"u8","message":{"content":"caf\xe9 cr\xc3\xa8me"}}',
        b'{"type":"user","uuid":"s1","message":{"content":"lone \\ud800 surrogate"}}',
        b"[" * 5000,
        good,  # the same uuid again
        _user_line("g2", "second request"),
        _user_line("g3", "third req")[:-7],  # still being written: no newline yet
    ]
    path = tmp_path / "messy.jsonl"
    path.write_bytes(b"\n".join(lines))
    transcript = read_transcript(path)
    assert transcript.skipped == {
        "corrupt": 7,
        "duplicate": 1,
        "empty": 2,
        "malformed": 2,
        "truncated": 1,
        "unknown_type": 2,
    }
    assert transcript.lines_total == len(lines)
    assert [(t.uuid, t.text) for t in transcript.turns] == [
        ("g1", "first request"),
        ("u8", "caf\ufffd cr\u00e8me"),
        ("s1", "lone ? surrogate"),
        ("g2", "second request"),
    ]
    assert transcript.last_uuid == "g2"  # the partial line is read again next time
    render(transcript.turns).encode("utf-8")
    # The same partial line in the middle of a file is corrupt, not truncated.
    path.write_bytes(b"\n".join([lines[-1], good]) + b"\n")
    assert read_transcript(path).skipped == {"corrupt": 1}


def test_deep_nesting_and_wrappers_mid_text(tmp_path: Path) -> None:
    deep = b"[" * 1015 + b"]" * 1015  # within orjson's depth limit, beyond the json encoder's
    call = b'{"type":"tool_use","name":"mcp__db__query","input":{"q":' + deep + b"}}"
    path = tmp_path / "odd.jsonl"
    path.write_bytes(
        b'{"type":"assistant","uuid":"d1","message":{"content":['
        + call
        + b"]}}\n"
        + _user_line("d2", "why does <command-name>/x</command-name> show up in my transcript?")
        + b"\n"
    )
    assert [t.text for t in read_transcript(path).turns] == [
        "mcp__db__query: {…}",
        "why does <command-name>/x</command-name> show up in my transcript?",
    ]


def test_huge_lines_and_empty_files(tmp_path: Path) -> None:
    huge = "y" * 5_000_000
    path = tmp_path / "huge.jsonl"
    result = {"type": "tool_result", "tool_use_id": "t", "content": huge}
    path.write_bytes(_user_line("h1", [result]) + b"\n" + _user_line("h2", huge) + b"\n")
    turns = read_transcript(path, tool_result_chars=50).turns
    assert turns[0].text == "result: " + "y" * 50 + "…"
    assert turns[1].text == huge  # prompts are not cut: the caller budgets tokens
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert read_transcript(empty) == Transcript(str(empty), [], 0, {}, "", 0)
    with pytest.raises(FileNotFoundError):
        read_transcript(tmp_path / "missing.jsonl")


def test_agentctx_injected_context_never_reaches_the_output(tmp_path: Path) -> None:
    record = "### Prefer httpx (preference, today, id 01JINJECTED000000000000001)\nINJECTED-BODY"
    digest = "# agentctx: context for demo\n\n## Project profile\n- Stack: INJECTED-PROFILE"
    subagent = "Project decisions and conventions (agentctx):\n- [decision] INJECTED-SUBAGENT"
    # the prompt's records as injected now, and under a header of before (older transcripts)
    hook = f"<user-prompt-submit-hook>{OLD_HEADERS[0]}\n\n{record}</user-prompt-submit-hook>"
    result = {"type": "tool_result", "tool_use_id": "t", "content": f"ok\n\n{digest}"}
    lines = [
        _user_line("i1", f"add retries to the client\n\n{FENCE_OPEN}\n{PROMPT_NOTE}\n\n{record}"),
        _user_line("i2", [{"type": "text", "text": f"and log them{hook}"}]),
        _user_line("i3", f"<system-reminder>\n{digest}\n</system-reminder>\nkeep it small"),
        _user_line("i4", digest),
        _user_line("i5", subagent, isSidechain=True),
        _user_line("i6", [result]),
        json.dumps(
            {
                "type": "attachment",
                "uuid": "i7",
                "attachment": {"type": "hook_additional_context", "content": [digest, record]},
            }
        ).encode(),
    ]
    path = tmp_path / "injected.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    transcript = read_transcript(path)
    assert [t.text for t in transcript.turns] == [
        "add retries to the client",
        "and log them",
        "keep it small",
        "result: ok",
    ]
    assert transcript.skipped == {"agentctx_context": 4, "attachment": 1, "empty": 2}
    text = render(transcript.turns)
    assert "INJECTED" not in text and "agentctx" not in text


# -- robustness properties ----------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
block_types = st.sampled_from(
    ["text", "tool_use", "tool_result", "thinking", "image", "redacted_thinking", "other"]
)
blocks = st.fixed_dictionaries(
    {"type": block_types},
    optional={
        "text": json_values,
        "name": st.sampled_from(["Bash", "Write", "MultiEdit", "TodoWrite", "Grep", "mcp__x__y"])
        | st.text(max_size=10),
        "input": json_values,
        "content": json_values
        | st.lists(st.fixed_dictionaries({"type": block_types}, optional={"text": json_values})),
        "is_error": json_values,
    },
)
entries = st.fixed_dictionaries(
    {"type": st.sampled_from(["user", "assistant", "progress", "system", "x"]) | st.text()},
    optional={
        "uuid": st.sampled_from(["a", "b", "c"]) | json_values,
        "timestamp": json_values,
        "isSidechain": json_values,
        "isMeta": json_values,
        "isCompactSummary": json_values,
        "message": st.fixed_dictionaries(
            {}, optional={"content": st.text() | st.lists(blocks | json_values, max_size=4)}
        )
        | json_values,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.binary(max_size=120) | entries.map(lambda e: json.dumps(e).encode()), max_size=12),
       newline_at_end=st.booleans(), limit=st.integers(0, 50), resume=st.sampled_from([None, "a", "zz"]))  # fmt: skip
def test_arbitrary_lines_never_raise(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    newline_at_end: bool,
    limit: int,
    resume: str | None,
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if newline_at_end else b""))
    transcript = read_transcript(path, after_uuid=resume, tool_result_chars=limit)
    render(transcript.turns).encode("utf-8")  # always valid text for the API
    for turn in transcript.turns:
        assert turn.role in ("developer", "assistant", "tool") and turn.text
        if turn.text.startswith(("result: ", "error: ")):
            assert len(turn.text.partition(": ")[2]) <= max(limit + 1, len("(no output)"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.floats(0, 1), max_size=6))
def test_any_growth_sequence_gives_every_turn_once(
    fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory, cuts: list[int]
) -> None:
    source = fixtures_dir / "transcripts" / TOOL_HEAVY
    data = source.read_bytes()
    target = tmp_path_factory.mktemp("grow") / "t.jsonl"
    seen: list[Turn] = []
    cursor: str | None = None
    for cut in [*sorted(int(c * len(data)) for c in cuts), len(data)]:
        target.write_bytes(data[:cut])
        part = read_transcript(target, after_uuid=cursor)
        seen += part.turns
        cursor = part.last_uuid or cursor
    assert seen == read_transcript(source).turns
