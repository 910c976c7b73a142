"""``agentctx demo``: the real command in a subprocess, and the library function in-process.

The caller's home (``AGENTCTX_HOME``, ``HOME``: the conftest's temporary folders) must come out
byte for byte as it went in, and the demo's own temporary folder must be gone afterwards (``TMPDIR``
points at an empty folder of the test so that "nothing left behind" can be checked exactly).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from anthropic import AsyncAnthropic, NotFoundError

from agentctx.core import inject
from agentctx.demo import DEMO_API_KEY, run_demo
from agentctx.demo.standin import LABEL, StandIn
from agentctx.store import Store, inventory
from tests.helpers import run_cli

if TYPE_CHECKING:
    import subprocess

DECISION = "Invoices are stored in PostgreSQL, not SQLite"
BUGFIX_BODY = "test_total_with_discount failed on float rounding"


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``folder``: (mode, mtime_ns, bytes); folders as empty entries."""
    found: dict[str, tuple[int, int, bytes]] = {}
    if not folder.exists():
        return found
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        data = path.read_bytes() if path.is_file() else b""
        found[str(path.relative_to(folder))] = (stat.st_mode, stat.st_mtime_ns, data)
    return found


def sections(stdout: str) -> dict[int, str]:
    """The demo's numbered sections ("1. …" to the next heading) by number."""
    parts = re.split(r"(?m)^(\d)\. ", stdout)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def demo(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, Path]:
    """Run ``agentctx demo`` in a subprocess with its own empty TMPDIR; stdout and that folder."""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir(exist_ok=True)
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    result: subprocess.CompletedProcess[str] = run_cli(
        "demo", *args, cwd=cwd, env={"TMPDIR": str(scratch), **(env or {})}
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout, scratch


@pytest.mark.slow  # the whole demo in a subprocess: seconds (the in-process test below is fast)
def test_demo_shows_the_whole_loop_and_leaves_nothing(tmp_path: Path, agentctx_home: Path) -> None:
    user_home = Path(os.environ["HOME"])
    before = snapshot(user_home)
    stdout, scratch = demo(tmp_path)
    part = sections(stdout)
    assert sorted(part) == [1, 2, 3, 4, 5, 6]
    # the hooks ran and captured the test failure without an LLM
    assert "SessionStart" in part[1] and "PostToolUse Bash pytest tests/test_totals.py" in part[1]
    # the failure, closed by the passing run with its evidence, and the green run itself
    assert 'a bugfix stub "Test failure fixed: pytest tests/test_totals.py"' in part[1]
    assert 'a test pass "Tests passed: pytest tests/test_totals.py"' in part[1]
    # extraction went to the stand-in, which says what it is
    assert LABEL in part[2] and "not Claude" in part[2] and "http://127.0.0.1:" in part[2]
    assert "sent: 1 request," in part[2]
    assert "and consolidation 2 requests for retrieval cues" in part[2]  # no cues: none written
    assert "1 decision" in part[2] and "1 capture stub explained" in part[2]
    assert "keyword mode" in part[3]
    # the next session's digest carries the decision; the prompt gets the explained bugfix
    assert "# agentctx: context for invoice-service" in part[4] and DECISION in part[4]
    assert f"│ {inject.FENCE_OPEN}\n  │ {inject.PROMPT_NOTE}\n" in part[5]
    assert BUGFIX_BODY in part[5] and DECISION not in part[5]
    assert "Fixed: `pytest tests/test_totals.py` passed at " in part[5]
    # ctx_search ranks the decision first
    hits = [line for line in part[6].splitlines() if re.match(r"  [0-9A-Z]{26}  ", line)]
    assert hits and "decision" in hits[0] and DECISION in hits[0]
    assert re.search(r"Done in [\d.]+ s\.", stdout)  # how long it takes: docs/demo.md
    assert "Removed " in stdout
    assert list(scratch.iterdir()) == []  # no temporary folder left behind
    assert not agentctx_home.exists()  # the caller's home was never created
    assert snapshot(user_home) == before
    assert_readme_excerpt_is_current(stdout)


def readme_excerpt() -> list[str]:
    """The lines of the README's demo excerpt (the ``text`` block after "agentctx demo")."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    block = re.search(r"```text\n(.*?)\n```", readme.split("agentctx demo", 1)[1], re.S)
    assert block is not None, "no demo excerpt in the README"
    return [line.rstrip() for line in block.group(1).splitlines() if line.strip()]


def excerpt_pattern(line: str) -> str:
    """A regular expression for one excerpt line: ``[…]`` is any text, a ULID any ULID, a
    record's handle after ``id `` any handle."""
    masked = re.sub(r"\b[0-9A-HJKMNP-TV-Z]{26}\b", "\0", line)
    masked = re.sub(r"(?<=\bid )[0-9a-hjkmnp-tv-z]{8}\b", "\x01", masked)
    pieces = re.split(r"(\[…\]|\0|\x01)", masked)
    wild = {"[…]": ".*", "\0": "[0-9A-Z]{26}", "\x01": "[0-9a-z]{8}"}
    return "".join(wild.get(piece, re.escape(piece)) for piece in pieces)


def assert_readme_excerpt_is_current(stdout: str) -> None:
    """Every line of the README's excerpt is a line of this run's output, ``[…]`` standing for
    any text and a ULID for any ULID: the excerpt cannot go stale unnoticed."""
    shown = [line.rstrip() for line in stdout.splitlines()]
    stale = [
        line
        for line in readme_excerpt()
        if not any(re.fullmatch(excerpt_pattern(line), out) for out in shown)
    ]
    assert stale == [], "README demo excerpt lines not in the demo's output (regenerate them)"


@pytest.mark.slow  # the whole demo in a subprocess
def test_demo_never_touches_the_callers_store_key_or_api(
    tmp_path: Path, agentctx_home: Path, project_dir: Path
) -> None:
    made = run_cli(
        "record", "--type", "decision", "--title", "Mine", "--body", "The caller's record.",
        cwd=project_dir,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    before = snapshot(agentctx_home)
    assert "agentctx.db" in before
    closed = "http://127.0.0.1:9"  # nothing listens there: any use of these fails the demo
    stdout, scratch = demo(
        tmp_path,
        env={
            "ANTHROPIC_API_KEY": "sk-the-callers-real-key",
            "ANTHROPIC_BASE_URL": closed,
            "HTTP_PROXY": closed,
            "HTTPS_PROXY": closed,
            "ALL_PROXY": closed,
        },
    )
    assert DECISION in sections(stdout)[4]
    assert snapshot(agentctx_home) == before
    assert list(scratch.iterdir()) == []


@pytest.mark.slow  # the whole demo in a subprocess
@pytest.mark.anyio
async def test_demo_keep_leaves_a_store_with_the_extracted_records(tmp_path: Path) -> None:
    stdout, scratch = demo(tmp_path, "--keep")
    (root,) = scratch.iterdir()
    assert f"Kept {root}" in stdout
    home = re.findall(r"(?m)^  home +(\S+)$", stdout)[0]
    assert home == str(root / "agentctx-home")
    async with await Store.open(os.path.join(home, "agentctx.db"), create=False) as store:
        records = await store.list_records(None, include_superseded=False)
        extracted = {(r.type, r.title) for r in records if r.source == "llm_extraction"}
        assert ("decision", DECISION) in extracted
        assert any(kind == "preference" for kind, _ in extracted)
        (stub,) = [r for r in records if r.type == "bugfix"]
        assert stub.source == "hook_observation" and BUGFIX_BODY in stub.body
        first = await inventory.session(store, "6f1c2a9e-1b7d-4c55-9a0e-3d2b5e8f0001")
        assert first is not None and first["ended_at"] and first["records_extracted"] == 4
    assert (root / "agentctx-home" / "digests").is_dir()


@pytest.mark.anyio
async def test_demo_in_process_runs_in_its_own_environment(
    tmp_path: Path, agentctx_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-the-callers-real-key")
    claude_dir = str(tmp_path / "claude")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", claude_dir)
    environment = dict(os.environ)
    seen: list[tuple[str, str, str | None, str | None]] = []

    def write(line: str) -> None:
        env = os.environ
        seen.append(
            (env["AGENTCTX_HOME"], env["HOME"], env.get("ANTHROPIC_API_KEY"), env.get("CLAUDE_CONFIG_DIR"))
        )  # fmt: skip

    result = await run_demo(write=write, parent=str(tmp_path))
    assert not result.kept and snapshot(tmp_path) == {}  # the caller's home was never made
    during, after = seen[:-2], seen[-2:]  # "Removed …" and "Done in …" come after the sandbox
    assert during and all(
        home.startswith(result.root + os.sep)
        and user.startswith(result.root + os.sep)
        and key == DEMO_API_KEY
        and claude is None
        for home, user, key, claude in during
    )
    caller = (str(agentctx_home), environment["HOME"], "sk-the-callers-real-key", claude_dir)
    assert after == [caller, caller]
    assert dict(os.environ) == environment


@pytest.mark.anyio
async def test_the_stand_in_answers_only_the_extraction_call() -> None:
    with StandIn("record_extraction", {"flush_ok": True}) as api:
        client = AsyncAnthropic(base_url=api.url, api_key=DEMO_API_KEY, max_retries=0)
        try:
            forced = await client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=100,
                tools=[{"name": "record_extraction", "input_schema": {"type": "object"}}],
                tool_choice={"type": "tool", "name": "record_extraction"},
                messages=[{"role": "user", "content": "a transcript"}],
            )
            other = await client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=100,
                messages=[{"role": "user", "content": "hello"}],
            )
            with pytest.raises(NotFoundError):
                await client.models.list()
        finally:
            await client.close()
    assert forced.stop_reason == "tool_use"
    block = forced.content[0]
    assert block.type == "tool_use" and block.input == {"flush_ok": True}
    assert other.stop_reason == "end_turn" and other.content[0].type == "text"
    assert forced.usage.input_tokens == 0 and len(api.requests) == 2
