"""The claude-code extraction backend with the real Claude Code CLI, offline.

The pinned CLI (tests/e2e/conftest.py) runs against :mod:`tests.messages_server` on loopback
(``ANTHROPIC_BASE_URL``), logged in the way ``claude login`` leaves it on Linux: a credentials file
in an isolated ``HOME``. Nothing on agentctx's side is faked: :func:`agentctx.core.backend.resolve`
asks the real ``claude auth status``, and each extraction call is a real ``claude -p`` process.

1. The same scripted answer gives the same records through ``api`` and ``claude-code``; the request
   carries the CLI's user agent and OAuth headers, our system prompt and schema, no tools but the
   structured output, no thinking, and no planted secret.
2. The child fires no hook, starts no MCP server, reads no CLAUDE.md and writes no transcript (also
   with an ``apiKeyHelper`` login, which needs the user settings).
3. ``auto`` picks each backend in each situation.
4. Every failure mode leaves the session pending, releases the lock, and the next run extracts it.
5. Map-reduce runs the chunks in parallel, at most ``claude_code.CONCURRENCY`` CLI processes at once.
6. The whole loop for a user with only a Claude Code login: ``agentctx init`` under the real CLI,
   a ``claude -p`` session whose SessionEnd worker extracts through ``claude-code``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.core import backend, home
from agentctx.core.locks import extraction_running
from agentctx.extract import claude_code, extract_session, prompt
from agentctx.store import Store
from tests.e2e.harness import Machine, wait_until
from tests.messages_server import (
    ErrorReply,
    MessagesServer,
    Recorded,
    Reply,
    TextReply,
    ToolUseReply,
    forced_tool,
)
from tests.test_extract import SECRETS, SID, Transcript

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

ANSWER: dict[str, Any] = {
    "flush_ok": False,
    "decisions": [
        {
            "what": "Internal services talk gRPC instead of REST",
            "rationale": "streaming",
            "supersedes": None,
            "confidence": "explicit",
            "keywords": ["grpc", "rest"],
        },
    ],
    "preferences": [
        {
            "category": "tooling",
            "rule": "Use pnpm, never npm",
            "confidence": "explicit",
            "scope": "global",
            "keywords": ["pnpm"],
        },
    ],
    "gotchas": [
        {
            "pattern": "The test database is shared between workers",
            "why_it_matters": "tests that truncate tables fail under -n auto",
            "keywords": ["xdist"],
        },
    ],
    "active_work": {"current_task": "Migrating billing to gRPC", "next_steps": ["generate stubs"]},
}
STRUCTURED = "StructuredOutput"
CLAUDE_MD_MARKER = "ZEBRA-CLAUDE-MD-MARKER-7781"


def structured(request: Recorded) -> bool:
    """A request of the claude CLI asking for ``--json-schema`` output."""
    tools = request.body.get("tools") if isinstance(request.body, dict) else None
    return any(isinstance(t, dict) and t.get("name") == STRUCTURED for t in tools or [])


class Script:
    """The scripted model: one reply for the CLI's structured calls, one for the API backend's."""

    def __init__(self, reply: Reply | None = None) -> None:
        self.reply: Reply = reply or ToolUseReply(STRUCTURED, ANSWER)

    def routes(self) -> list[tuple[Any, Any]]:
        return [
            (forced_tool(prompt.TOOL_NAME), lambda r: ToolUseReply(prompt.TOOL_NAME, ANSWER)),
            (structured, lambda r: self.reply),
        ]


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def server(script: Script) -> Iterator[MessagesServer]:
    with MessagesServer(routes=script.routes(), default=TextReply("unexpected request")) as running:
        yield running


@pytest.fixture
def user_home() -> Path:
    return Path(os.environ["HOME"])  # a fresh folder per test (tests/conftest.py)


def log_in(user_home: Path, expires_in: float = 3600.0) -> Path:
    """What ``claude login`` leaves on Linux: ``~/.claude/.credentials.json`` (fake; expiring in
    ``expires_in`` seconds, negative: expired)."""
    path = user_home / ".claude" / ".credentials.json"
    path.parent.mkdir(exist_ok=True)
    expires = int((time.time() + expires_in) * 1000)
    oauth = {"accessToken": "sk-ant-oat01-test-access", "refreshToken": "sk-ant-ort01-test",
             "expiresAt": expires, "scopes": ["user:inference", "user:profile"],
             "subscriptionType": "pro"}  # fmt: skip
    path.write_text(json.dumps({"claudeAiOauth": oauth}))
    path.chmod(0o600)
    return path


@pytest.fixture
def cli_env(
    monkeypatch: pytest.MonkeyPatch, claude_code: Path, server: MessagesServer, tmp_path: Path
) -> Path:
    """The CLI found through AGENTCTX_CLAUDE_BIN, the model server, no API key, a login."""
    monkeypatch.setenv(backend.ENV_BIN, str(claude_code))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    log_in(Path(os.environ["HOME"]))
    return claude_code


@pytest.fixture
def transcript(tmp_path: Path) -> Transcript:
    project = tmp_path / "shop"
    project.mkdir()
    found = Transcript(tmp_path / f"{SID}.jsonl", project)
    found.add("user", "Let's move internal services from REST to gRPC, for streaming.")
    found.add("assistant", "Agreed; I will switch the billing client first.")
    found.add("user", "Use pnpm, never npm. The test db is shared between xdist workers.")
    return found


def fast_caller(binary: Path | str, **kwargs: Any) -> claude_code.ClaudeCodeCaller:
    """The real backend with short retries (the CLI's own backoff would take seconds)."""
    options: dict[str, Any] = {"attempts": 2, "retry_pause": 0.0, "cli_retries": 0} | kwargs
    return claude_code.ClaudeCodeCaller(str(binary), **options)


async def extract(transcript: Transcript, **kwargs: Any) -> Any:
    async with await Store.open() as store:
        return await extract_session(store, SID, transcript=str(transcript.path), **kwargs)


async def stored_records() -> list[tuple[Any, ...]]:
    async with await Store.open() as store:
        found = await store.list_records()
    return sorted(
        (r.type, r.title, r.body, r.confidence, r.keywords, r.scope, r.key, r.source) for r in found
    )


async def session_row() -> dict[str, Any]:
    async with await Store.open() as store:
        row = await store.row("SELECT * FROM sessions WHERE session_id = ?", (SID,))
    return dict(row) if row is not None else {}


async def ledger() -> list[dict[str, Any]]:
    async with await Store.open() as store:
        return [dict(r) for r in await store.rows("SELECT * FROM extraction_ledger ORDER BY id")]


# -- 1. the same records, the request ---------------------------------------------------------------


@pytest.mark.usefixtures("cli_env")
async def test_the_same_records_as_the_api_backend(
    transcript: Transcript, server: MessagesServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home-api"))
    through_api = await extract(transcript)
    api_records = await stored_records()

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home-cli"))
    through_cli = await extract(transcript)  # auto: no key, a logged-in CLI
    cli_records = await stored_records()

    assert (through_api.status, through_api.backend) == ("extracted", "api")
    assert (through_cli.status, through_cli.backend) == ("extracted", "claude-code")
    assert through_cli.written == through_api.written and len(cli_records) == 4
    assert cli_records == api_records
    assert through_cli.usage["input_tokens"] > 0 and through_cli.calls == 1
    (entry,) = await ledger()
    assert (entry["backend"], entry["status"], entry["calls"]) == ("claude-code", "extracted", 1)
    assert entry["input_tokens"] == through_cli.usage["input_tokens"]
    assert (await session_row())["extraction_backend"] == "claude-code"
    assert len(server.messages_requests(structured)) == 1


@pytest.mark.usefixtures("cli_env")
async def test_the_request_is_ours_without_tools_thinking_or_secrets(
    transcript: Transcript, server: MessagesServer
) -> None:
    transcript.add("user", f"deploy with ANTHROPIC_API_KEY={SECRETS[0]} and aws {SECRETS[1]}")
    transcript.add("user", f"token={SECRETS[2]} db postgres://app:{SECRETS[3]}@db:5432/shop")
    report = await extract(transcript)
    assert report.status == "extracted", report.error
    (request,) = server.messages_requests()
    body = request.body
    assert request.headers["user-agent"].startswith("claude-cli/")
    assert request.headers["authorization"] == "Bearer sk-ant-oat01-test-access"
    assert "oauth-2025-04-20" in request.headers.get("anthropic-beta", "")
    assert body["model"] == "claude-haiku-4-5"
    assert "thinking" not in body and body["max_tokens"] == 4096
    assert [tool["name"] for tool in body["tools"]] == [STRUCTURED]
    assert body["tools"][0]["input_schema"] == prompt.OUTPUT_SCHEMA
    system = "\n".join(block["text"] for block in body["system"])
    assert prompt.SYSTEM_PROMPT.strip() in system
    assert len(system) < len(prompt.SYSTEM_PROMPT) + 500  # Claude Code's own prompt is replaced
    assert "move internal services from REST to gRPC" in "\n".join(request.texts())
    for secret in SECRETS:
        assert secret.encode() not in request.raw


# -- 2. isolation -----------------------------------------------------------------------------------


def plant_user_setup(user_home: Path, tmp_path: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """Hooks on every event, an MCP server and a CLAUDE.md in the user's Claude Code setup; each
    leaves a file behind when it runs."""
    marks = {"hook": tmp_path / "hook-ran", "mcp": tmp_path / "mcp-ran"}
    hook = {"hooks": [{"type": "command", "command": f"touch {marks['hook']}"}]}
    events = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd", "PreToolUse")
    claude_dir = user_home / ".claude"
    claude_dir.mkdir(exist_ok=True)
    (claude_dir / "settings.json").write_text(
        json.dumps({"hooks": {event: [hook] for event in events}, **settings})
    )
    (claude_dir / "CLAUDE.md").write_text(f"Always mention {CLAUDE_MD_MARKER}.\n")
    mcp = {"command": "sh", "args": ["-c", f"touch {marks['mcp']}; sleep 5"]}
    (user_home / ".claude.json").write_text(json.dumps({"mcpServers": {"spy": mcp}}))
    return marks


def transcripts_written(user_home: Path) -> list[Path]:
    return sorted((user_home / ".claude" / "projects").glob("**/*.jsonl"))


@pytest.mark.usefixtures("cli_env")
async def test_no_hook_mcp_server_claude_md_or_transcript_from_the_child(
    transcript: Transcript, server: MessagesServer, user_home: Path, tmp_path: Path
) -> None:
    marks = plant_user_setup(user_home, tmp_path, {})
    report = await extract(transcript)
    assert report.status == "extracted", report.error
    (request,) = server.messages_requests()
    assert CLAUDE_MD_MARKER.encode() not in request.raw
    assert not marks["hook"].exists() and not marks["mcp"].exists()
    assert transcripts_written(user_home) == []


async def test_an_api_key_helper_login_keeps_the_user_settings_without_hooks(
    transcript: Transcript,
    server: MessagesServer,
    user_home: Path,
    tmp_path: Path,
    claude_code: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(backend.ENV_BIN, str(claude_code))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    helper = {"apiKeyHelper": "echo sk-ant-helper-key-0001"}
    marks = plant_user_setup(user_home, tmp_path, helper)
    choice = backend.resolve("auto")
    assert (choice.backend, choice.auth_method) == ("claude-code", backend.HELPER_METHOD)
    report = await extract(transcript)
    assert report.status == "extracted", report.error
    (request,) = server.messages_requests()
    assert request.headers.get("x-api-key") == "sk-ant-helper-key-0001"
    assert CLAUDE_MD_MARKER.encode() not in request.raw
    assert not marks["hook"].exists() and not marks["mcp"].exists()
    assert transcripts_written(user_home) == []


@pytest.mark.usefixtures("cli_env")
def test_extract_command_reports_the_backend_and_status_shows_it(
    transcript: Transcript, tmp_path: Path
) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, "-m", "agentctx"]
    done = subprocess.run(
        [*argv, "extract", "--session-id", SID, "--transcript", str(transcript.path), "--json"],
        env=env, cwd=transcript.cwd, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["status"], report["backend"]) == ("extracted", "claude-code")
    status = subprocess.run(
        [*argv, "status", "--json"], env=env, cwd=transcript.cwd, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    sessions = json.loads(status.stdout)["recent_sessions"]
    assert [(s["session_id"], s["extraction_backend"]) for s in sessions] == [(SID, "claude-code")]


# -- 3. auto ----------------------------------------------------------------------------------------


def test_auto_picks_each_backend(
    claude_code: Path, monkeypatch: pytest.MonkeyPatch, user_home: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv(backend.ENV_BIN, str(tmp_path / "missing" / "claude"))
    assert backend.resolve("auto").backend is None  # no key, no CLI
    monkeypatch.setenv(backend.ENV_BIN, str(claude_code))
    not_logged_in = backend.resolve("auto")
    assert not_logged_in.backend is None and "not logged in" in not_logged_in.reason
    assert not_logged_in.auth == {**(not_logged_in.auth or {}), "loggedIn": False}

    credentials = log_in(user_home)
    stored = backend.resolve("auto")
    assert (stored.backend, stored.auth_method, stored.warnings) == ("claude-code", "claude.ai", [])

    credentials.unlink()
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-shell-only")
    shell = backend.resolve("auto")
    assert (shell.backend, shell.auth_method) == ("claude-code", "oauth_token")
    assert "removes it from its hooks" in shell.warnings[0]

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    assert backend.resolve("auto").backend == "api"
    assert backend.resolve("claude-code").backend == "claude-code"  # asked for: the CLI


# -- 4. failure modes -------------------------------------------------------------------------------


def find_child(user_home: Path) -> int | None:
    """The pid of a running ``claude`` extraction child of this test (its HOME and marker)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if (
            f"{backend.CHILD_MARKER}=1".encode() in environ
            and f"HOME={user_home}".encode() in environ
            and b"--json-schema" in cmdline
        ):
            return int(entry.name)
    return None


FAILURES: dict[str, Reply] = {
    "401": ErrorReply(401, "invalid x-api-key"),
    "429": ErrorReply(429, "rate limited"),
    "500": ErrorReply(500, "internal error"),
    "529": ErrorReply(529, "overloaded"),
    "plain-text": TextReply("I cannot produce JSON today."),
    "schema-breaking": ToolUseReply(STRUCTURED, {"decisions": "not a list"}),
}


@pytest.mark.usefixtures("cli_env")
@pytest.mark.parametrize(
    "case", [*FAILURES, "expired-login", "timeout", "not-logged-in", "cli-missing", "killed"]
)
async def test_each_failure_keeps_the_session_pending_and_the_next_run_extracts_it(
    case: str,
    transcript: Transcript,
    server: MessagesServer,
    script: Script,
    claude_code: Path,
    user_home: Path,
    tmp_path: Path,
) -> None:
    binary: Path | str = claude_code
    options: dict[str, Any] = {}
    release = threading.Event()
    killer: threading.Thread | None = None
    if case in FAILURES:
        script.reply = FAILURES[case]
    elif case == "timeout":
        script.reply = ToolUseReply(STRUCTURED, ANSWER, latency=30)
        options = {"timeout": 4.0, "attempts": 1}
    elif case == "expired-login":  # offline the CLI sends the old token; the API refuses it
        log_in(user_home, expires_in=-3600)
        script.reply = ErrorReply(401, "OAuth token has expired")
    elif case == "not-logged-in":
        (user_home / ".claude" / ".credentials.json").unlink()
    elif case == "cli-missing":
        binary = tmp_path / "moved" / "claude"
    else:  # killed: SIGKILL the child while the model "thinks"
        server.hold = release
        options = {"attempts": 1}

        def kill() -> None:
            server.wait_for(lambda rs: len(rs) >= 1, timeout=60)
            pid = find_child(user_home)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)

        killer = threading.Thread(target=kill)
        killer.start()

    failed = await extract(transcript, caller=fast_caller(binary, **options))
    if killer is not None:
        killer.join()
        release.set()

    assert failed.status == "failed" and failed.backend == "claude-code"
    assert failed.error and "\n" not in failed.error
    row = await session_row()
    assert row["extracted_uuid"] is None and row["extracted_size"] == 0
    assert row["extraction_error"] == failed.error
    assert not extraction_running(SID)  # the lock is released
    assert await stored_records() == []
    (entry,) = await ledger()
    assert (entry["backend"], entry["status"], entry["error"]) == (
        "claude-code",
        "failed",
        failed.error,
    )
    if case in ("429", "500", "529"):  # transient: tried again, a bounded number of times
        assert len(server.messages_requests(structured)) == 2

    # fixed: the model answers, the login is back, the CLI is found again
    server.hold = None
    script.reply = ToolUseReply(STRUCTURED, ANSWER)
    log_in(user_home)
    retried = await extract(transcript, caller=fast_caller(claude_code))
    assert retried.status == "extracted", retried.error
    assert len(await stored_records()) == 4
    row = await session_row()
    assert row["extracted_uuid"] is not None and row["extraction_error"] is None


# -- 5. map-reduce --------------------------------------------------------------------------------


@pytest.mark.usefixtures("cli_env")
async def test_map_reduce_runs_the_chunks_in_parallel_under_the_cap(
    transcript: Transcript, server: MessagesServer, script: Script
) -> None:
    for i in range(200):
        transcript.add("user", f"Part {i}: " + "we discussed the cache invalidation plan. " * 40)
    latency = 5.0
    script.reply = ToolUseReply(STRUCTURED, ANSWER, latency=latency)
    report = await extract(transcript)
    requests = server.messages_requests(structured)
    assert (report.status, report.tier, report.backend) == (
        "extracted",
        "map_reduce",
        "claude-code",
    )
    chunks, synthesis = requests[:-1], requests[-1]
    assert len(chunks) >= 5 and report.calls == len(requests)
    cap = claude_code.CONCURRENCY
    # the first `cap` chunks are asked before the first answer came back; the next waits for a slot
    assert all(r.received < chunks[0].received + latency for r in chunks[1:cap])
    assert chunks[cap].received >= chunks[0].received + latency
    assert prompt.SYNTHESIS_NOTE[:40] in "\n".join(synthesis.texts())
    assert synthesis.received >= max(r.received for r in chunks)
    assert len(await stored_records()) == 4


# -- 6. the whole loop with only a Claude Code login -------------------------------------------------


def test_a_session_end_extracts_with_only_a_claude_code_login(
    tmp_path_factory: pytest.TempPathFactory, claude_code: Path
) -> None:
    root = tmp_path_factory.mktemp("cc")  # short: Claude Code puts sockets under TMPDIR
    answer = Script()
    with MessagesServer(routes=answer.routes()[1:], default=TextReply("Noted.")) as server:
        machine = Machine(root, claude_code, server)
        del machine.env["ANTHROPIC_API_KEY"]  # a subscription login only
        machine.env[backend.ENV_BIN] = str(claude_code)
        log_in(machine.home)
        machine.run("agentctx", "config", "set", "embeddings", "off")
        setup = machine.agentctx("init")
        assert setup["extraction"]["backend"] == "claude-code", setup
        assert setup["extraction"]["caps"]["extraction.daily_calls"] == 300
        text = machine.run("agentctx", "init").stdout
        assert "agentctx config set extraction.backend off" in text
        checks = machine.agentctx("doctor")
        (extraction,) = [c["extraction"] for c in checks if c["name"] == "extraction"]
        assert (extraction["backend"], extraction["auth_method"]) == ("claude-code", "claude.ai")
        assert server.messages_requests() == []  # neither init nor doctor asked the model

        machine.claude_p("Decision: internal services talk gRPC instead of REST, for streaming.")

        def extracted() -> bool:
            return bool(machine.query("SELECT 1 FROM records WHERE source = 'llm_extraction'"))

        assert wait_until(extracted, 120), "\n".join(
            [machine.diagnostics(), *machine.log("workers.log"), *machine.hooks_log()]
        )
        titles = {
            row[0] for row in machine.query("SELECT title FROM records WHERE type = 'decision'")
        }
        assert "Internal services talk gRPC instead of REST" in titles
        (session_id, used) = machine.one("SELECT session_id, extraction_backend FROM sessions")
        assert used == "claude-code"  # and the only session: the child left none
        extraction_calls = server.messages_requests(structured)
        assert extraction_calls and all("thinking" not in r.body for r in extraction_calls)
        assert all(r.headers["authorization"].startswith("Bearer ") for r in extraction_calls)
        transcripts = sorted((machine.home / ".claude" / "projects").glob("**/*.jsonl"))
        assert [t.stem for t in transcripts] == [session_id]
