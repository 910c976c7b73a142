"""Extraction backends without the claude CLI: the choice, the caps, the ledger, the idle sweep.

The claude-code backend against the real CLI is tested in tests/e2e/test_claude_code_extractor.py.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import pytest

from agentctx import config
from agentctx.core import backend, clock, home, sessions
from agentctx.core.errors import ConfigError
from agentctx.extract import claude_code, extract_session
from agentctx.store import Store, inventory
from agentctx.workers import sweep
from tests.helpers import payload, run_hook
from tests.messages_server import MessagesServer
from tests.test_extract import DECISION, SID, Transcript, client, extraction

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "shop"
    path.mkdir()
    return path


@pytest.fixture
def transcript(tmp_path: Path, project: Path) -> Transcript:
    return Transcript(tmp_path / f"{SID}.jsonl", project)


def fake_cli(tmp_path: Path) -> str:
    """An executable file named claude that is never run by these tests (``resolve`` gets a
    ``status`` answer instead; a run would fail loudly)."""
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\necho 'this test must not run the CLI' >&2\nexit 97\n")
    path.chmod(0o755)
    return str(path)


def ledger_rows() -> list[dict[str, Any]]:
    conn = sqlite3.connect(home.db_path())
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM extraction_ledger ORDER BY id")]
    finally:
        conn.close()


# -- the setting and the choice ---------------------------------------------------------------------


def test_the_setting_takes_the_four_names_only() -> None:
    assert config.get("extraction.backend") == "auto"
    for name in ("api", "claude-code", "off", "AUTO"):
        assert config.set_value("extraction.backend", name) == name.lower()
    with pytest.raises(ConfigError, match="one of auto, api, claude-code, off"):
        config.set_value("extraction.backend", "haiku")


def test_auto_with_an_api_key_is_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv(backend.ENV_BIN, fake_cli(tmp_path))
    choice = backend.resolve("auto", status=lambda binary: pytest.fail("no CLI probe with a key"))
    assert (choice.backend, choice.reason) == ("api", "auto: ANTHROPIC_API_KEY is set")
    assert backend.quick("auto") == "api"


def test_auto_without_key_or_cli_is_capture_only() -> None:
    choice = backend.resolve("auto")
    assert choice.backend is None and "no claude CLI found" in choice.reason
    assert backend.quick("auto") is None


def test_the_environment_overrides_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv(backend.ENV_BACKEND, "off")
    assert backend.resolve("api").backend is None and backend.quick("api") is None
    monkeypatch.setenv(backend.ENV_BACKEND, "claude-code")
    monkeypatch.setenv(backend.ENV_BIN, fake_cli(tmp_path))
    logged_in = {"loggedIn": True, "authMethod": "claude.ai"}
    choice = backend.resolve("api", status=lambda binary: logged_in)
    assert (choice.backend, choice.binary) == ("claude-code", os.environ[backend.ENV_BIN])
    monkeypatch.setenv(backend.ENV_BACKEND, "nonsense")  # ignored: the setting counts
    assert backend.resolve("api").backend == "api"


def test_a_shell_only_token_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(backend.ENV_BIN, fake_cli(tmp_path))
    choice = backend.resolve(
        "auto", status=lambda b: {"loggedIn": True, "authMethod": "oauth_token"}
    )
    assert choice.backend == "claude-code"
    (warning,) = choice.warnings
    assert "removes it from its hooks" in warning and "claude login" in warning
    out = backend.resolve("auto", status=lambda b: {"loggedIn": False, "authMethod": "none"})
    assert out.backend is None and "not logged in" in out.reason


def test_child_env_drops_the_parent_session_and_sets_the_guards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE"):
        monkeypatch.setenv(name, "parent")
    env = backend.child_env()
    assert not any(name in env for name in backend.PARENT_IDENTITY)
    assert env[backend.CHILD_MARKER] == "1" and env["CLAUDE_CODE_DISABLE_THINKING"] == "1"
    args = claude_code.argv("claude", "claude-haiku-4-5")
    assert args[args.index("--setting-sources") + 1] == ""
    assert "--no-session-persistence" in args and "--strict-mcp-config" in args
    helper = claude_code.argv("claude", "m", user_settings=True)
    assert helper[-4:] == ["--setting-sources", "user", "--settings", '{"disableAllHooks": true}']


def test_the_child_marker_makes_every_hook_exit_at_once(project: Path) -> None:
    home.ensure_home()
    data = payload("SessionStart", SID, project, source="startup")
    result = run_hook("session-start", data, cwd=project, env={backend.CHILD_MARKER: "1"})
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert not os.path.exists(os.path.join(home.home_dir(), "logs", "hooks.log"))
    assert not os.path.exists(home.db_path())


async def test_no_backend_reports_why_and_sends_nothing(transcript: Transcript) -> None:
    transcript.add("user", "We use gRPC between services.")
    config.set_value("extraction.backend", "off")
    async with await Store.open() as store:
        report = await extract_session(store, SID, transcript=str(transcript.path))
    assert (report.status, report.backend, report.calls) == ("backend_off", None, 0)


# -- the ledger and the caps ------------------------------------------------------------------------


@pytest.mark.usefixtures("api_key")
async def test_the_ledger_names_the_backend_and_counts_the_tokens(
    transcript: Transcript,
) -> None:
    transcript.add("user", "Let's move internal services from REST to gRPC, for streaming.")
    with MessagesServer(replies=[extraction(decisions=[DECISION])]) as server:
        async with await Store.open() as store, client(server) as api:
            report = await extract_session(store, SID, transcript=str(transcript.path), client=api)
            row = await store.row("SELECT * FROM sessions WHERE session_id = ?", (SID,))
            listed = await inventory.sessions(store)  # status --json and the dashboard list these
    assert [(s["session_id"], s["extraction_backend"]) for s in listed] == [(SID, "api")]
    assert report.status == "extracted" and report.backend == "api"
    assert report.usage["input_tokens"] > 0 and report.usage["calls"] == 1
    (entry,) = ledger_rows()
    assert (entry["backend"], entry["status"], entry["calls"]) == ("api", "extracted", 1)
    assert entry["input_tokens"] == report.usage["input_tokens"]
    assert entry["cache_read_tokens"] == 0 and entry["cost_usd"] == pytest.approx(report.cost_usd)
    assert entry["day"] == clock.now()[:10]
    assert row is not None and row["extraction_backend"] == "api"
    assert row["extracted_size"] == transcript.path.stat().st_size


async def test_a_cap_defers_the_run_and_keeps_the_session_queued(
    transcript: Transcript, tmp_path: Path
) -> None:
    transcript.add("user", "We use gRPC between services.")
    config.set_value("extraction.daily_calls", "10")
    missing = str(tmp_path / "not-a-cli")  # a deferred run starts no process: never reached
    caller = claude_code.ClaudeCodeCaller(missing)
    async with await Store.open() as store:
        async with store.transaction() as tx:
            await tx.run(
                sessions.spend("other", None, "claude-code", "extracted", {"calls": 10}, 0.0)
            )
        report = await extract_session(store, SID, transcript=str(transcript.path), caller=caller)
        row = await store.row("SELECT * FROM sessions WHERE session_id = ?", (SID,))
    assert report.status == "deferred" and report.calls == 0
    assert report.error is not None and "extraction.daily_calls is 10" in report.error
    assert row is not None and row["extracted_uuid"] is None and row["extracted_size"] == 0
    assert [(r["session_id"], r["status"]) for r in ledger_rows()] == [
        ("other", "extracted"),
        (SID, "deferred"),
    ]
    async with await Store.open() as store:
        today = (await inventory.status(store))["extraction_today"]
    assert today["claude-code"]["deferred"] == 1 and today["claude-code"]["calls"] == 10
    # a new day: the same run goes through (here to the missing CLI, which fails, still queued)
    conn = sqlite3.connect(home.db_path())
    with conn:
        conn.execute("UPDATE extraction_ledger SET day = '2000-01-01'")
    conn.close()
    async with await Store.open() as store:
        again = await extract_session(store, SID, transcript=str(transcript.path), caller=caller)
    assert again.status == "failed" and "cannot run the claude CLI" in str(again.error)


async def test_a_run_larger_than_a_cap_goes_through_on_a_fresh_day(
    transcript: Transcript, tmp_path: Path
) -> None:
    transcript.add("user", "We use gRPC between services. " * 200)
    config.set_value("extraction.daily_tokens", "1")
    caller = claude_code.ClaudeCodeCaller(str(tmp_path / "not-a-cli"))
    async with await Store.open() as store:
        report = await extract_session(store, SID, transcript=str(transcript.path), caller=caller)
    assert report.status == "failed"  # not deferred: nothing was spent today, so it may run


# -- the idle sweep ---------------------------------------------------------------------------------


async def _session_row(transcript: Transcript, project: Path) -> None:
    async with await Store.open() as store, store.transaction() as tx:
        await tx.run(sessions.upsert(SID, "p", str(project), str(transcript.path), clock.now()))


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.mark.usefixtures("api_key")
async def test_the_sweep_extracts_an_idle_tail_exactly_once(
    transcript: Transcript, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transcript.add("user", "Let's move internal services from REST to gRPC, for streaming.")
    await _session_row(transcript, project)
    with MessagesServer(default=extraction(decisions=[DECISION])) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        assert await sweep() == []  # just written: not idle yet
        _age(transcript.path, sessions.IDLE_S + 60)
        (report,) = await sweep()
        assert report.status == "extracted" and report.backend == "api"
        assert await sweep() == []  # covered: never again until the transcript grows
        assert len(server.messages_requests()) == 1
        transcript.add("user", "From now on, name queues after their consumer.")
        _age(transcript.path, sessions.IDLE_S + 60)
        (grown,) = await sweep()
        assert grown.status == "extracted" and len(server.messages_requests()) == 2
        assert "name queues" in server.messages_requests()[-1].texts()[-1]


@pytest.mark.usefixtures("api_key")
async def test_a_failed_run_is_swept_again(
    transcript: Transcript, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.messages_server import ErrorReply

    transcript.add("user", "Let's move internal services from REST to gRPC, for streaming.")
    await _session_row(transcript, project)
    _age(transcript.path, sessions.IDLE_S + 60)
    monkeypatch.setattr("agentctx.extract.llm.MAX_RETRIES", 0)
    with MessagesServer(default=ErrorReply(500)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        (failed,) = await sweep()
        server.default = extraction(decisions=[DECISION])
        (retried,) = await sweep()
    assert (failed.status, retried.status) == ("failed", "extracted")


@pytest.mark.usefixtures("api_key")
def test_session_start_starts_the_sweep_of_an_idle_session(
    transcript: Transcript, project: Path
) -> None:
    import anyio

    transcript.add("user", "Let's move internal services from REST to gRPC, for streaming.")
    anyio.run(_session_row, transcript, project)
    _age(transcript.path, sessions.IDLE_S + 60)
    with MessagesServer(default=extraction(decisions=[DECISION])) as server:
        env = {"ANTHROPIC_API_KEY": "sk-test-key", "ANTHROPIC_BASE_URL": server.url}
        data = payload("SessionStart", "another-session", project, source="startup")
        result = run_hook("session-start", data, cwd=project, env=env, timeout=20)
        assert result.returncode == 0
        server.wait_for(lambda rs: len(rs) >= 1, timeout=60)
        deadline = time.monotonic() + 30
        size = 0
        while time.monotonic() < deadline and not size:
            conn = sqlite3.connect(home.db_path())
            (size,) = conn.execute(
                "SELECT extracted_size FROM sessions WHERE session_id = ?", (SID,)
            ).fetchone()
            conn.close()
            time.sleep(0.1)
        assert size == transcript.path.stat().st_size
    assert os.path.exists(os.path.join(home.home_dir(), "sweep.stamp"))
