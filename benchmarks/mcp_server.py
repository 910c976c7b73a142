"""MCP server latency: start to first ``tools/list``, and ``ctx_search`` on a warm server.

Spawns the real ``agentctx mcp`` console script over stdio with the SDK's client (the legacy
``initialize`` handshake Claude Code falls back to) against a 10K-record synthetic store whose
records are all embedded (``embed.embed_pending``) with the offline all-MiniLM-L6-v2 int8 the tests
use (``benchmarks/minilm.py``; the ``TEST_MODEL`` packages of noxfile.py). The config of the home
chooses the ranking: ``embeddings off`` for the keyword figures; MiniLM for the hybrid ones, which
are timed once the server has loaded its model (the first search starts the load; the searches are
repeated until they report ``mode: hybrid``). Start-up is timed with embeddings on: the model is
loaded lazily, never at start. Writes ``benchmarks/results/mcp.md``. Claude Code gives
``.mcp.json`` servers about 2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))

import minilm
import synthetic_store
from agentctx import config, embed
from agentctx.project import identify
from agentctx.store import Store

if TYPE_CHECKING:
    from mcp.types import CallToolResult

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["auth token refresh", "gRPC migration deadlines", "database index", "build cache"]
READY_DEADLINE = 120  # seconds for the server to load its model


def mode_of(result: CallToolResult) -> str:
    assert not result.is_error, result
    assert result.structured_content is not None
    return str(result.structured_content["mode"])


async def time_starts(params: StdioServerParameters, starts: int, errlog: TextIO) -> list[float]:
    times: list[float] = []
    for _ in range(starts):
        began = time.perf_counter()
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            times.append(time.perf_counter() - began)
    return times


async def time_searches(
    params: StdioServerParameters, searches: int, mode: str, errlog: TextIO
) -> dict[str, Any]:
    """Warm the server until it answers in ``mode``, then time ``searches`` calls."""
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        began = time.perf_counter()
        first = mode_of(await session.call_tool("ctx_search", {"query": "warm up"}))
        first_seconds = time.perf_counter() - began
        calls = 1
        with anyio.fail_after(READY_DEADLINE):
            while mode_of(await session.call_tool("ctx_search", {"query": "warm up"})) != mode:
                calls += 1
        ready = time.perf_counter() - began
        times: list[float] = []
        for i in range(searches):
            began = time.perf_counter()
            result = await session.call_tool("ctx_search", {"query": QUERIES[i % len(QUERIES)]})
            times.append(time.perf_counter() - began)
            assert mode_of(result) == mode, result
    return {
        "median": statistics.median(times),
        "p90": sorted(times)[int(len(times) * 0.9) - 1],
        "first_mode": first,
        "first_seconds": first_seconds,
        "ready_seconds": ready,
        "warm_calls": calls,
    }


async def embed_all(db_path: str, settings: dict[str, Any]) -> tuple[int, float]:
    """Embed every record of the store: (how many, seconds)."""
    began = time.perf_counter()
    model = await embed.load_model_async(settings)
    if model is None:
        raise SystemExit("the offline MiniLM did not load (see the log line above)")
    async with await Store.open(db_path) as store:
        done = 0
        while batch := await embed.embed_pending(store, model, limit=1000):
            done += batch
            print(f"  embedded {done:,} records", file=sys.stderr)
    return done, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--searches", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "webapp"
        project.mkdir()
        home = Path(tmp) / "home"
        home.mkdir()
        identity = identify(str(project))
        db_path = str(home / "agentctx.db")
        synthetic_store.build(db_path, args.records, identity.project_id, identity.name, 1)
        os.environ["AGENTCTX_HOME"] = str(home)
        os.environ["HF_HUB_OFFLINE"] = "1"
        settings = minilm.settings(minilm.assemble(Path(tmp) / "minilm"))
        embedded, embed_seconds = anyio.run(embed_all, db_path, settings)
        config_path = str(home / "config.json")
        for key in ("embedding.model", "embedding.path"):
            config.set_value(key, str(settings[key]), config_path)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"AGENTCTX_HOME": str(home), "CLAUDE_PROJECT_DIR": str(project)}
        script = str(Path(sys.executable).parent / "agentctx")
        params = StdioServerParameters(command=script, args=["mcp"], env=env, cwd=str(project))
        with open(os.devnull, "w") as errlog:
            starts = anyio.run(time_starts, params, args.starts, errlog)
            config.set_value("embeddings", "off", config_path)
            keyword = anyio.run(time_searches, params, args.searches, "keyword", errlog)
            config.set_value("embeddings", "on", config_path)
            hybrid = anyio.run(time_searches, params, args.searches, "hybrid", errlog)
    ms = 1000
    text = (
        "# MCP server latency\n\n"
        f"Generated by `benchmarks/mcp_server.py` (`python3 -m nox -s bench`), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs "
        f"(load average {os.getloadavg()[0]:.1f} at the end), "
        f"{args.records:,} records, all {embedded:,} embedded with the offline all-MiniLM-L6-v2 "
        f"(int8; {embed_seconds:.0f} s).\n\n"
        "| measure | median | worst / p90 | budget |\n|---|--:|--:|--:|\n"
        f"| spawn → initialize → first `tools/list`, embeddings on ({args.starts} starts) | "
        f"{statistics.median(starts) * ms:.0f} ms | {max(starts) * ms:.0f} ms | "
        "~2,000 ms (Claude Code's wait for `.mcp.json` servers) |\n"
        f"| `ctx_search` round trip, warm server, keyword (embeddings off; {args.searches} calls)"
        f" | {keyword['median'] * ms:.1f} ms | {keyword['p90'] * ms:.1f} ms | |\n"
        f"| `ctx_search` round trip, warm server, hybrid (model loaded; {args.searches} calls) | "
        f"{hybrid['median'] * ms:.1f} ms | {hybrid['p90'] * ms:.1f} ms | |\n\n"
        f"With embeddings on, the first `ctx_search` answered in "
        f"{hybrid['first_seconds'] * ms:.0f} ms with mode `{hybrid['first_mode']}` (it starts the "
        f"model load in the background and does not wait for it); searches answered `hybrid` "
        f"{hybrid['ready_seconds']:.1f} s after the first one ({hybrid['warm_calls']} keyword "
        "answers meanwhile). A hybrid search adds to the keyword one the query embedding (one "
        "MiniLM call in a worker thread), an exact sqlite-vec KNN over every stored vector and "
        "the filter query for the vector candidates; both rankings go 50 deep into RRF.\n"
    )
    out = ROOT / "benchmarks" / "results" / "mcp.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
