"""Dashboard speed at the graph's cap: the /graph page of 2,000 nodes against the /records page.

Usage, from the repository root (project venv; ``python3 -m nox -s bench``)::

    python benchmarks/web.py [--records 1500] [--files 500] [--runs 5] [--out FILE]

In a temporary ``AGENTCTX_HOME`` it fills one project with ``--records`` records and ``--files`` file
nodes (the defaults make the graph's cap, 2,000 nodes); each record is about one file and every
tenth about a second one, as in a busy project where several records touch the same module; then
it serves the real dashboard (``agentctx.web.server``) on a loopback port and times
HTTP GETs with httpx, in one run so that the machine's load weighs on all of them alike:

* ``/records`` of the project, the baseline: a plain page of one query;
* ``/graph`` cold: a fresh server each run, so the force layout (``web/forcelayout.py``) is computed;
* ``/graph`` warm: the same server again, the layout kept for the unchanged graph;
* the force layout of that graph alone, in process.

The medians, and the graph pages' ratios to the records page, are written to
``benchmarks/results/web.md``. The tests check what the pages hold; how fast they are is measured
only here (timings in unit tests would fail on a loaded machine).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx

from agentctx.core import clock
from agentctx.core.project import ProjectIdentity
from agentctx.records import NewRecord
from agentctx.store import Store
from agentctx.web import forcelayout, server
from agentctx.web import graph as graphs

RESULTS = Path(__file__).parent / "results" / "web.md"
PROJECT = "bench-web"


async def fill(store: Store, records: int, files: int) -> None:
    """One project of ``records`` records about ``files`` files (one each, a second for every tenth)."""
    await store.touch_project(ProjectIdentity(PROJECT, "bench", "/nowhere", None))
    now = clock.now()
    async with store.transaction() as tx:
        for f in range(files):
            await tx.execute(
                "INSERT INTO nodes(id, project_id, kind, name, created_at) "
                "VALUES (?, ?, 'file', ?, ?)",
                (f"F{f}", PROJECT, f"src/pkg/module_{f}.py", now),
            )
        for i in range(records):
            record = await tx.add(
                NewRecord(
                    type=("decision", "discovery", "bugfix", "convention")[i % 4],
                    title=f"Fact {i} about module {i % 97}",
                    body=f"What was learned about module {i % 97}, case {i}.",
                    project_id=PROJECT,
                )
            )
            about = {i % files} | ({(i * 31 + 7) % files} if i % 10 == 0 else set())
            await tx.executemany(
                "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)",
                [(record.id, f"F{f}") for f in sorted(about)],
            )


async def get(client: httpx.AsyncClient, path: str) -> tuple[float, str]:
    """Seconds for one GET of ``path`` (status 200 required), and the page."""
    started = time.perf_counter()
    response = await client.get(path, params={"project": PROJECT})
    seconds = time.perf_counter() - started
    response.raise_for_status()
    return seconds, response.text


async def measure(records: int, files: int, runs: int) -> dict[str, float | int]:
    """Time the pages and the layout; the medians in seconds."""
    async with await Store.open() as store:
        await fill(store, records, files)
        cold: list[float] = []
        warm: list[float] = []
        plain: list[float] = []
        for _ in range(runs):
            sock = server.bind(0)
            async with (
                server.running(store, sock) as dash,
                httpx.AsyncClient(base_url=dash.url.rstrip("/"), timeout=120) as client,
            ):
                await get(client, "/records")  # the connection and the app warmed up
                seconds, page = await get(client, "/graph")
                cold.append(seconds)
                assert "Laid out in 0 ms" not in page, "a fresh server kept a layout"
                warm.append((await get(client, "/graph"))[0])
                plain.append((await get(client, "/records"))[0])
        g = await graphs.load(store, PROJECT)
    index = {node.id: i for i, node in enumerate(g.nodes)}
    pairs = [(index[e.source], index[e.target]) for e in g.edges]
    layout: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        forcelayout.layout(len(index), pairs)
        layout.append(time.perf_counter() - started)
    return {
        "nodes": len(index),
        "edges": len(pairs),
        "records_page": statistics.median(plain),
        "graph_cold": statistics.median(cold),
        "graph_warm": statistics.median(warm),
        "layout": statistics.median(layout),
    }


def render(result: dict[str, float | int], args: argparse.Namespace) -> str:
    """The Markdown report."""
    base = float(result["records_page"])
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        ("`/records` (baseline)", base),
        ("`/graph`, laid out (fresh server)", float(result["graph_cold"])),
        ("`/graph`, layout kept", float(result["graph_warm"])),
        ("the force layout alone", float(result["layout"])),
    ]
    lines = [
        "# Dashboard speed at the graph's cap",
        "",
        f"Generated by `benchmarks/web.py` (`python3 -m nox -s bench`), {stamp}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs. {args.records:,} records and "
        f"{args.files:,} file nodes: a graph of {int(result['nodes']):,} nodes and "
        f"{int(result['edges']):,} links. "
        f"Medians of {args.runs} runs over loopback HTTP.",
        "",
        "| what | median | × `/records` |",
        "|---|--:|--:|",
        *(f"| {name} | {s * 1000:,.0f} ms | {s / base:.1f}× |" for name, s in rows),
        "",
        "The first view of a graph after a change pays the layout; later views reuse it. In the "
        "browser, panning and zooming move the SVG's `viewBox` and ask nothing of the server.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    """Run the benchmark; write and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=1500)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-web-") as tmp:
        os.environ["AGENTCTX_HOME"] = str(Path(tmp) / "home")
        os.makedirs(os.environ["AGENTCTX_HOME"], mode=0o700)
        result = anyio.run(measure, args.records, args.files, args.runs)
    text = render(result, args)
    Path(args.out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
