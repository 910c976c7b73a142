"""The ``claude-code`` backend: each extraction call is one run of the user's own ``claude`` CLI.

For users with a Claude Code login and no API key. One call is one process (the facts behind every
flag are in the project's reference notes on Claude Code as the extractor, verified with CLI 2.1.332):

    claude -p --model <llm.model> --output-format json --json-schema <OUTPUT_SCHEMA>
           --system-prompt <SYSTEM_PROMPT> --tools "" --setting-sources "" --strict-mcp-config
           --disable-slash-commands --no-session-persistence --max-turns 2

with the prompt on stdin (an argument overflows at 128 KiB), in an empty temporary directory (the cwd
is sent to the model and decides which project settings would load), and the environment of
:func:`agentctx.core.backend.child_env` (no thinking, bounded output and retries, no CLAUDE.md, the
parent session's identity removed, and the marker that makes ``agentctx hook`` exit at once).
Our system prompt replaces Claude Code's (~7,000 tokens); the CLI adds ~350 tokens to the request.

Three guards against recursion: no setting sources (no hooks, no MCP servers, no CLAUDE.md), no
session persistence (no transcript agentctx would take for a session), and the environment marker.
A login through an ``apiKeyHelper`` needs the user settings: then ``--setting-sources user`` with
``{"disableAllHooks": true}`` (verified equally isolated).

Success is only: exit 0, one JSON object on stdout, ``is_error`` false and ``structured_output`` an
object. Anything else raises :class:`ClaudeCodeError` (a plain-text answer included: it is a failure,
not an empty result), and the session stays queued. Each call has a deadline (SIGTERM, then SIGKILL)
and transient failures (429, 5xx, a timeout, a killed child) are tried again, a bounded number of
times.
"""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING

import anyio
import orjson

from agentctx.core import backend
from agentctx.extract.llm import CallResult, outbound
from agentctx.extract.prompt import OUTPUT_SCHEMA, SYSTEM_PROMPT

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream, Process

    from agentctx.extract.llm import Usage

NAME = backend.CLAUDE_CODE
#: Seconds one call may take (the CLI's own retries of 429/5xx included) before it is stopped.
CALL_TIMEOUT_S = 240.0
#: Runs of one call: the first and one more after a transient failure.
ATTEMPTS = 2
#: Seconds between a transient failure and the next run.
RETRY_PAUSE_S = 2.0
#: Seconds a child gets to exit after SIGTERM before SIGKILL (it takes < 0.1 s).
GRACE_S = 3.0
#: Calls at once: each CLI process takes ~190 MB and a CPU-bound second to start.
CONCURRENCY = 3
#: ``api_error_status`` values worth another run.
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_SCHEMA = orjson.dumps(OUTPUT_SCHEMA).decode()
_NO_HOOKS = '{"disableAllHooks": true}'


class ClaudeCodeError(Exception):
    """A call through the CLI that gave no extraction; ``transient``: worth another run."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def argv(
    binary: str,
    model: str,
    *,
    user_settings: bool = False,
    schema: str = _SCHEMA,
    system: str = SYSTEM_PROMPT,
) -> list[str]:
    """The command line of one call (``user_settings``: keep the user's settings, for an
    ``apiKeyHelper`` login, with every hook disabled); ``schema`` (JSON) and ``system``: the
    extraction's unless another ask (the injection verdicts) gives its own."""
    args = [
        binary, "-p", "--model", model, "--output-format", "json", "--json-schema", schema,
        "--system-prompt", system, "--tools", "", "--strict-mcp-config",
        "--disable-slash-commands", "--no-session-persistence", "--max-turns", "2",
    ]  # fmt: skip
    if user_settings:
        return [*args, "--setting-sources", "user", "--settings", _NO_HOOKS]
    return [*args, "--setting-sources", ""]


class ClaudeCodeCaller:
    """Extraction calls through the ``claude`` CLI at ``binary``."""

    name = NAME

    def __init__(
        self,
        binary: str,
        *,
        auth_method: str = "",
        timeout: float = CALL_TIMEOUT_S,
        attempts: int = ATTEMPTS,
        retry_pause: float = RETRY_PAUSE_S,
        cli_retries: int = 4,
        schema: dict[str, object] | None = None,
        system: str | None = None,
    ) -> None:
        self.binary = binary
        #: the structured output's schema and the system prompt (default: the extraction's)
        self.schema = _SCHEMA if schema is None else orjson.dumps(schema).decode()
        self.system = SYSTEM_PROMPT if system is None else system
        self.user_settings = auth_method == backend.HELPER_METHOD
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.retry_pause = retry_pause
        #: the CLI's own retries of 429/5xx within one run (CLAUDE_CODE_MAX_RETRIES)
        self.cli_retries = cli_retries
        self.concurrency = CONCURRENCY

    async def __call__(self, model: str, user_text: str, usage: Usage) -> CallResult:
        """One extraction; :class:`ClaudeCodeError` when there is none after the bounded runs."""
        for attempt in range(1, self.attempts + 1):
            try:
                return await self._once(model, user_text, usage)
            except ClaudeCodeError as exc:
                if not exc.transient or attempt == self.attempts:
                    raise
            await anyio.sleep(self.retry_pause * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Nothing to release (one process per call)."""

    async def _once(self, model: str, user_text: str, usage: Usage) -> CallResult:
        command = argv(
            self.binary,
            model,
            user_settings=self.user_settings,
            schema=self.schema,
            system=self.system,
        )
        with tempfile.TemporaryDirectory(prefix="agentctx-extract-") as cwd:
            try:
                process = await anyio.open_process(
                    command,
                    cwd=cwd,
                    env={
                        **backend.child_env(),
                        "CLAUDE_CODE_MAX_RETRIES": str(self.cli_retries),
                    },
                    start_new_session=True,
                )
            except OSError as exc:
                raise ClaudeCodeError(f"cannot run the claude CLI {self.binary}: {exc}") from exc
            try:
                with anyio.move_on_after(self.timeout) as scope:
                    out, err = await _communicate(process, outbound(user_text).encode("utf-8"))
                if scope.cancelled_caught:
                    raise ClaudeCodeError(
                        f"the claude CLI gave no answer within {self.timeout:g} s (stopped)",
                        transient=True,
                    )
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process)
        return _result(process.returncode, out, err, usage)


def _result(code: int | None, out: bytes, err: bytes, usage: Usage) -> CallResult:
    try:
        data = orjson.loads(out) if out.strip() else None
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        killed = code is not None and (code < 0 or code in (137, 143))
        detail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ClaudeCodeError(
            f"the claude CLI {'was killed' if killed else 'failed'} (exit {code}): {detail[0][:200]}",
            transient=killed,
        )
    usage.add_counts(data.get("usage"))
    structured = data.get("structured_output")
    if code == 0 and data.get("is_error") is False and isinstance(structured, dict):
        return CallResult(structured, data.get("stop_reason"))
    status = data.get("api_error_status")
    text = str(data.get("result") or "").strip().replace("\n", " ")
    errors = data.get("errors")
    if not text and isinstance(errors, list) and errors:
        text = str(errors[0])
    if code == 0 and data.get("is_error") is False:
        raise ClaudeCodeError(
            "the claude CLI answered in plain text, without the structured output"
        )
    transient = status in TRANSIENT_STATUS or (status is None and "timed out" in text.lower())
    raise ClaudeCodeError(
        f"the claude CLI failed (exit {code}, {data.get('subtype')}, api status {status}): "
        f"{text[:200]}",
        transient=transient,
    )


async def _communicate(process: Process, data: bytes) -> tuple[bytes, bytes]:
    out = bytearray()
    err = bytearray()

    async def feed() -> None:
        stdin = process.stdin
        assert stdin is not None
        try:
            await stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the child exited without reading: its output says why
        finally:
            await stdin.aclose()

    async def drain(stream: ByteReceiveStream | None, into: bytearray) -> None:
        if stream is not None:
            async for chunk in stream:
                into += chunk

    async with anyio.create_task_group() as group:
        group.start_soon(feed)
        group.start_soon(drain, process.stdout, out)
        group.start_soon(drain, process.stderr, err)
    await process.wait()
    return bytes(out), bytes(err)


async def _stop(process: Process) -> None:
    """End the child if it still runs: SIGTERM (it exits in < 0.1 s), then SIGKILL."""
    if process.returncode is None:
        try:
            process.terminate()
        except ProcessLookupError:
            pass
        with anyio.move_on_after(GRACE_S):
            await process.wait()
        if process.returncode is None:
            try:
                process.kill()
            except ProcessLookupError:
                pass
            await process.wait()
    await process.aclose()
