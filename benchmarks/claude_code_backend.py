"""Per-call cost of the claude-code extraction backend beside the api backend.

The same synthetic transcript of about 200K tokens (``benchmarks/extraction.py``) goes through the
real extraction pipeline twice, against the loopback Messages API server of the tests (a fixed
latency per answer): once with the ``api`` backend (the ``anthropic`` client in this process), once
with ``claude-code`` (one real ``claude -p`` process per call, the pinned CLI of the e2e tests,
logged in through a fake credentials file in a temporary HOME). Reported per call: mean and
maximum wall time, CPU seconds (this process for api, the children for claude-code), and peak
memory (this process's peak RSS for api; the largest child's for claude-code), plus the run's wall
time at each backend's concurrency. Writes ``benchmarks/results/claude_code_backend.md``.

    python benchmarks/claude_code_backend.py [--claude PATH] [--tokens 200000] [--latency 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tests.messages_server import MessagesServer, Recorded, ToolUseReply  # noqa: E402

from agentctx.extract import claude_code, extract_session, llm, prompt  # noqa: E402
from agentctx.store import Store  # noqa: E402
from extraction import write_transcript  # noqa: E402

DEFAULT_CLI = ROOT / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude"
EMPTY: dict[str, Any] = {"flush_ok": False, "decisions": []}


class Timed:
    """A caller that notes each call's wall time."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.concurrency = inner.concurrency
        self.walls: list[float] = []

    async def __call__(self, model: str, user_text: str, usage: llm.Usage) -> llm.CallResult:
        started = time.perf_counter()
        try:
            return await self.inner(model, user_text, usage)  # type: ignore[no-any-return]
        finally:
            self.walls.append(time.perf_counter() - started)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _answer(request: Recorded) -> ToolUseReply:
    tools = request.body.get("tools") or []
    name = "StructuredOutput" if any(t.get("name") == "StructuredOutput" for t in tools) else None
    return ToolUseReply(name or prompt.TOOL_NAME, EMPTY)


async def run(transcript: Path, caller: Timed, home: Path) -> tuple[float, str, int]:
    os.environ["AGENTCTX_HOME"] = str(home)
    async with await Store.open() as store:
        started = time.perf_counter()
        report = await extract_session(store, "bench", transcript=str(transcript), caller=caller)
        wall = time.perf_counter() - started
    assert report.status in ("extracted", "flush_ok"), report.error
    return wall, str(report.tier), report.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--claude", default=str(DEFAULT_CLI))
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "claude_code_backend.md")
    )
    args = parser.parse_args()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        user_home = root / "user"
        (user_home / ".claude").mkdir(parents=True)
        oauth = {"accessToken": "sk-ant-oat01-bench", "refreshToken": "r",
                 "expiresAt": int(time.time() * 1000) + 3_600_000,
                 "scopes": ["user:inference"], "subscriptionType": "pro"}  # fmt: skip
        (user_home / ".claude" / ".credentials.json").write_text(
            json.dumps({"claudeAiOauth": oauth})
        )
        os.environ["HOME"] = str(user_home)
        transcript = root / "bench.jsonl"
        lines = write_transcript(transcript, args.tokens)
        with MessagesServer(_answer, latency=args.latency) as server:
            os.environ["ANTHROPIC_BASE_URL"] = server.url
            os.environ["ANTHROPIC_API_KEY"] = "sk-bench"
            api = Timed(llm.ApiCaller())
            self_before = resource.getrusage(resource.RUSAGE_SELF)
            api_wall, tier, api_calls = anyio.run(run, transcript, api, root / "home-api")
            self_after = resource.getrusage(resource.RUSAGE_SELF)
            api_cpu = (self_after.ru_utime + self_after.ru_stime) - (
                self_before.ru_utime + self_before.ru_stime
            )
            api_rss = self_after.ru_maxrss / 1024
            del os.environ["ANTHROPIC_API_KEY"]
            cli = Timed(claude_code.ClaudeCodeCaller(args.claude))
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_wall, _, cli_calls = anyio.run(run, transcript, cli, root / "home-cli")
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu = (children.ru_utime + children.ru_stime) - (
                children_before.ru_utime + children_before.ru_stime
            )
            cli_rss = children.ru_maxrss / 1024
    for name, timed, wall, calls, cpu, rss, conc, what in (
        ("api", api, api_wall, api_calls, api_cpu, api_rss, api.concurrency, "this process"),
        ("claude-code", cli, cli_wall, cli_calls, cli_cpu, cli_rss, cli.concurrency, "largest child"),
    ):  # fmt: skip
        mean = sum(timed.walls) / len(timed.walls)
        rows.append(
            f"| {name} | {calls} | {conc} | {mean:.2f} | {max(timed.walls):.2f} | "
            f"{cpu / calls:.2f} | {rss:.0f} ({what}) | {wall:.1f} |"
        )
    table = (
        "# Extraction backends: per-call cost, api beside claude-code\n\n"
        f"Generated by `benchmarks/claude_code_backend.py`; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs. "
        f"Transcript ~{args.tokens:,} tokens ({lines:,} lines, tier {tier}); the loopback server "
        f"answers each call after {args.latency:.1f} s.\n\n"
        "| backend | calls | concurrency | wall s per call (mean) | max | CPU s per call | "
        "peak RSS MB | run wall s |\n"
        "|---|--:|--:|--:|--:|--:|--:|--:|\n" + "\n".join(rows) + "\n\n"
        "Per-call wall time includes waiting for a concurrency slot's CPU, not for the slot "
        "itself. The api backend's CPU and memory are this Python process's (reading, redacting "
        "and the HTTP client included); the claude-code backend's are its `claude` children's "
        "(one process per call, ~1 s of CPU to start).\n"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table)
    print(table)


if __name__ == "__main__":
    main()
