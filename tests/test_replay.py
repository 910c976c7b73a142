"""``agentctx extract --no-llm``: the capture rules over a transcript, no model, each call once.

The transcripts are in Claude Code's JSONL shape (assistant ``tool_use`` blocks, user
``tool_result`` blocks with the line's ``toolUseResult``); the CLI and the hook are the real
processes. No extraction backend is reachable (no key, no ``claude`` on PATH), and the LLM setting is
on: the replay must not need one.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import TYPE_CHECKING, Any

from tests.helpers import payload, query, run_cli, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

SID = "3a1f0e2d-7c6b-4a59-8e4d-2b1c0a9f8e7d"
FAIL = (
    "FAILED tests/test_auth.py::test_refresh_on_401 - AssertionError\n"
    "========================= 1 failed, 2 passed in 0.05s =========================="
)
PASS = "============================== 3 passed in 0.04s ==============================="


class Transcript:
    """A session transcript written line by line, as Claude Code writes it."""

    def __init__(self, path: Path, cwd: Path) -> None:
        self.path, self.cwd, self.lines = path, cwd, []  # type: ignore[var-annotated]
        self.minute = 0

    def _line(self, kind: str, content: list[dict[str, Any]], **extra: Any) -> None:
        self.minute += 1
        self.lines.append(
            {
                "type": kind,
                "uuid": str(uuid.uuid4()),
                "sessionId": SID,
                "cwd": str(self.cwd),
                "timestamp": f"2026-11-30T10:{self.minute:02d}:00.000Z",
                "message": {"role": kind, "content": content},
                **extra,
            }
        )

    def call(self, name: str, args: dict[str, Any], result: Any, *, error: bool = False) -> str:
        use_id = f"toolu_{uuid.uuid4().hex[:24]}"
        self._line("assistant", [{"type": "tool_use", "id": use_id, "name": name, "input": args}])
        text = result if isinstance(result, str) else result.get("stdout", "")
        block = {"type": "tool_result", "tool_use_id": use_id, "content": text, "is_error": error}
        self._line("user", [block], toolUseResult=result)
        self.write()
        return use_id

    def write(self) -> None:
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))


def session_transcript(tmp_path: Path, project_dir: Path) -> tuple[Transcript, dict[str, str]]:
    """Edit a file, fail a test run, pass it, commit: the ids of each call."""
    t = Transcript(tmp_path / f"{SID}.jsonl", project_dir)
    t._line("user", [{"type": "text", "text": "fix the token refresh"}])
    ids = {
        "edit": t.call(
            "Edit",
            {"file_path": str(project_dir / "src/auth.py"), "old_string": "a", "new_string": "b"},
            {"filePath": str(project_dir / "src/auth.py")},
        ),
        "fail": t.call(
            "Bash", {"command": "pytest -q tests/test_auth.py"}, f"Error: Exit code 1\n{FAIL}",
            error=True,
        ),
        "pass": t.call(
            "Bash",
            {"command": "pytest -q tests/test_auth.py"},
            {"stdout": PASS, "stderr": "", "interrupted": False, "isImage": False},
        ),
        "commit": t.call(
            "Bash",
            {"command": "git commit -am 'Fix token refresh'"},
            {"stdout": "[main 1a2b3c4] Fix token refresh\n 1 file changed, 2 insertions(+)\n",
             "stderr": "", "interrupted": False, "isImage": False},
        ),
        "read": t.call("Read", {"file_path": str(project_dir / "README.md")}, "a readme"),
    }  # fmt: skip
    return t, ids


def no_llm(transcript: Path, *extra: str) -> dict[str, Any]:
    env = {"ANTHROPIC_API_KEY": "", "AGENTCTX_CLAUDE_BIN": "/nonexistent/claude"}
    result = run_cli(
        "extract", "--session-id", SID, "--transcript", str(transcript), "--no-llm", *extra,
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return dict(json.loads(result.stdout)) if "--json" in extra else {"text": result.stdout}


def records() -> list[tuple[str, str, int, str | None]]:
    return sorted(
        (str(r[0]), str(r[1]), int(r[2]), r[3])
        for r in query("SELECT type, title, reinforce_count, superseded_at FROM records")
    )


def test_a_transcript_replays_through_the_capture_rules_without_a_model(
    tmp_path: Path, project_dir: Path
) -> None:
    seed(project_dir, [])
    transcript, _ids = session_transcript(tmp_path, project_dir)

    report = no_llm(transcript.path, "--json")

    assert report["status"] == "replayed" and report["tool_calls"] == 5
    assert report["observed"] == {"branch": 1, "file": 1, "git": 1, "stub": 1, "test_pass": 1}
    assert (report["written"], report["already_captured"]) == (5, 0)
    current = [(t, title) for t, title, _n, gone in records() if gone is None]
    assert current == [
        ("bugfix", "Test failure fixed: pytest -q tests/test_auth.py"),
        ("discovery", "Git activity on main"),
        ("discovery", "Tests passed: pytest -q tests/test_auth.py"),
    ]
    # the failure was recorded at its own time and closed by the pass, both from the transcript
    superseded = query("SELECT title, valid_from FROM records WHERE superseded_at IS NOT NULL")
    assert superseded == [
        ("Test failure: pytest -q tests/test_auth.py", "2026-11-30T10:05:00.000000Z")
    ]
    files = query(
        "SELECT n.name FROM nodes n JOIN edges e ON e.from_id = n.id "
        "WHERE n.kind = 'file' AND e.rel_type = 'observed_in' AND e.to_id = ?",
        (SID,),
    )
    assert files == [("src/auth.py",)]
    # extraction proper is untouched: the session's position did not move
    assert query("SELECT extracted_uuid FROM sessions WHERE session_id = ?", (SID,)) in (
        [],
        [(None,)],
    )


def test_a_second_replay_writes_nothing_again(tmp_path: Path, project_dir: Path) -> None:
    seed(project_dir, [])
    transcript, _ids = session_transcript(tmp_path, project_dir)
    no_llm(transcript.path)
    before = records()

    again = no_llm(transcript.path, "--json")

    assert (again["written"], again["already_captured"]) == (0, 5)
    assert records() == before  # no second green run counted, no second commit
    text = no_llm(transcript.path)["text"]
    assert text.startswith("replayed 5 tool call(s) without a model: 0 observation(s) written")
    assert "5 already captured" in text


def test_calls_the_hook_captured_live_are_not_counted_twice(
    tmp_path: Path, project_dir: Path
) -> None:
    seed(project_dir, [])
    transcript, ids = session_transcript(tmp_path, project_dir)
    live = payload(
        "PostToolUse", SID, project_dir, tool_name="Bash", tool_use_id=ids["pass"],
        tool_input={"command": "pytest -q tests/test_auth.py"},
        tool_response={"stdout": PASS, "stderr": "", "interrupted": False},
    )  # fmt: skip
    assert run_hook("post-tool-use", live, cwd=project_dir).returncode == 0
    (passes,) = query("SELECT reinforce_count FROM records WHERE title LIKE 'Tests passed:%'")

    report = no_llm(transcript.path, "--json")

    assert report["already_captured"] == 1 and report["written"] == 4
    assert query("SELECT reinforce_count FROM records WHERE title LIKE 'Tests passed:%'") == [
        passes
    ]


def test_a_real_claude_code_transcript_replays(
    fixtures_dir: Path, project_dir: Path, tmp_path: Path
) -> None:
    """The ccviewer fixture (Claude Code 1.0.98, 167 tool calls incl. Edit and MultiEdit)."""
    seed(project_dir, [])
    source = fixtures_dir / "transcripts" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    copy = tmp_path / "ccviewer.jsonl"  # its cwd moved into the test's project
    copy.write_text(source.read_text().replace('"cwd":"/path/to/Demo"', f'"cwd":"{project_dir}"'))

    report = no_llm(copy, "--json")

    assert report["tool_calls"] == 167
    assert report["observed"].get("file", 0) > 0
    assert report["written"] == sum(report["observed"].values())
    edited = query("SELECT count(*) FROM nodes WHERE kind = 'file'")[0][0]
    assert 0 < edited <= report["observed"]["file"]  # a file edited twice is one node


def test_no_llm_refuses_dry_run_and_a_missing_transcript_in_one_line(
    tmp_path: Path, project_dir: Path
) -> None:
    seed(project_dir, [])
    both = run_cli("extract", "--session-id", SID, "--no-llm", "--dry-run")
    assert both.returncode != 0 and len(both.stderr.strip().splitlines()) == 1
    assert "--no-llm sends none" in both.stderr
    missing = run_cli(
        "extract", "--session-id", SID, "--no-llm", "--transcript", str(tmp_path / "gone.jsonl"),
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert missing.returncode == 1 and "no_transcript" in missing.stdout
    assert not os.path.exists(tmp_path / "gone.jsonl")
