"""This checkout's hooks against another revision's, interleaved, with no MCP server.

Usage, from the repository root (project venv, ``uv`` on PATH or in ``UV``)::

    python benchmarks/hooks_against.py REV [--sizes 10000,100000] [--runs 60] [--out FILE]

Issue 25 asks that without a server the prompt hook be no slower than before the issue; a ratio
to ``python -c pass`` from two separate runs of ``benchmarks/hooks.py`` differs by more than that
from run to run. So both versions run here in the same rounds: ``git worktree add`` puts ``REV``
in a temporary folder, ``uv venv`` and ``uv pip install --editable`` give it its own environment
(this interpreter, its own dependencies), and each version builds its own store of each size with
its own ``benchmarks/synthetic_store.py`` (the topical vocabulary, the same seed) in its own home,
since an older version refuses a newer schema. Then, in interleaved rounds in a shuffled order,
``python -c pass``, each version's ``agentctx hook user-prompt-submit`` (the prompt of
``benchmarks/hooks.py``, a fresh session id each run) and ``agentctx hook session-start`` run
from the same project folder; every hook run must print the contract JSON with a context, and
both homes' ``hooks.log`` must stay empty. The medians, their ratios to the baseline and the
difference between the versions are written as Markdown to
``benchmarks/results/hooks_against.md`` and printed. No server runs: the prompt hook of a version
with the meaning path finds no socket and searches by keywords alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import uvtool
from hooks import DROPPED_ENV, PROMPT, SEED, make_project

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "hooks_against.md"
#: Builds a version's store with its own generator (older ones take no vocabulary argument).
BUILD = """
import inspect, sys
sys.path.insert(0, sys.argv[1])
import synthetic_store
from agentctx.core.project import identify
ident = identify(sys.argv[2])
args = [sys.argv[3], int(sys.argv[4]), ident.project_id, ident.name, int(sys.argv[5])]
if "vocabulary" in inspect.signature(synthetic_store.build).parameters:
    args.append("topical")
synthetic_store.build(*args)
"""


def run(
    cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, check=True, capture_output=True, cwd=cwd, env=env)


def payload(project: Path, event: str) -> bytes:
    session = f"bench-{uuid.uuid4().hex}"
    data = {
        "session_id": session,
        "transcript_path": str(project / f".claude-{session}.jsonl"),
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": event,
    }
    data.update(prompt=PROMPT) if event == "UserPromptSubmit" else data.update(source="startup")
    return json.dumps(data).encode()


def measure(
    size: int, runs: int, versions: dict[str, tuple[Path, Path]], work: Path
) -> dict[str, list[float]]:
    """Timed rounds at one store size; ``versions``: name -> (the venv's bin folder, the tree)."""
    project = work / f"webapp-{size}"
    project.mkdir()
    make_project(project)
    envs: dict[str, dict[str, str]] = {}
    for name, (bin_dir, tree) in versions.items():
        home = work / f"home-{name}-{size}"
        home.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        env["AGENTCTX_HOME"] = str(home)
        envs[name] = env
        script = [str(bin_dir / "python"), "-c", BUILD, str(tree / "benchmarks"), str(project)]
        run([*script, str(home / "agentctx.db"), str(size), str(SEED)], env=env)
        # a version with profile detection records the project's (else SessionStart starts it)
        subprocess.run([str(bin_dir / "agentctx"), "worker", "profile", "--cwd", str(project)],
                       env=env, cwd=project, capture_output=True, timeout=300, check=False)  # fmt: skip
    first = next(iter(versions.values()))[0]
    commands: dict[str, tuple[list[str], str, str]] = {
        "baseline": ([str(first / "python"), "-c", "pass"], next(iter(versions)), "")
    }
    for name, (bin_dir, _tree) in versions.items():
        exe = str(bin_dir / "agentctx")
        commands[f"{name} UserPromptSubmit"] = (
            [exe, "hook", "user-prompt-submit"], name, "UserPromptSubmit",
        )  # fmt: skip
        commands[f"{name} SessionStart"] = ([exe, "hook", "session-start"], name, "SessionStart")

    def once(label: str) -> float:
        cmd, name, event = commands[label]
        stdin = payload(project, event or "UserPromptSubmit")
        start = time.perf_counter_ns()
        proc = subprocess.run(cmd, input=stdin, capture_output=True, env=envs[name], cwd=project)
        ms = (time.perf_counter_ns() - start) / 1e6
        if event:
            data = json.loads(proc.stdout) if proc.returncode == 0 and not proc.stderr else {}
            context = data.get("hookSpecificOutput", {}).get("additionalContext")
            if not context:
                raise SystemExit(f"{label} gave no context: {proc.stdout[:300]!r} {proc.stderr!r}")
        return ms

    for label in commands:  # the digests are built, the page cache warm
        once(label)
        once(label)
    samples: dict[str, list[float]] = {label: [] for label in commands}
    rng = random.Random(SEED + size)
    for _ in range(runs):
        for label in rng.sample(list(commands), len(commands)):
            samples[label].append(once(label))
    for name in versions:
        log = work / f"home-{name}-{size}" / "logs" / "hooks.log"
        if log.exists() and log.read_text("utf-8").strip():
            raise SystemExit(f"{name}'s hooks.log is not empty:\n{log.read_text('utf-8')}")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("rev", help="the other revision (a commit, tag or branch)")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    uv = uvtool.uv()
    commit = run(["git", "rev-parse", "--short", args.rev], cwd=ROOT).stdout.decode().strip()
    here = run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).stdout.decode().strip()
    sizes = [int(s) for s in args.sizes.split(",")]
    tables = []
    with tempfile.TemporaryDirectory(prefix="agentctx-against-") as tmp:
        work = Path(tmp)
        tree = work / "tree"
        run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT)
        try:
            venv = work / "venv"
            run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
            run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                 "-e", str(tree)])  # fmt: skip
            versions = {
                commit: (venv / "bin", tree),
                f"{here} (this checkout)": (Path(sys.executable).parent, ROOT),
            }
            for size in sizes:
                print(
                    f"[{size:,} records] building both stores, {args.runs} rounds ...", flush=True
                )
                samples = measure(size, args.runs, versions, work)
                base = statistics.median(samples["baseline"])
                rows = [f"| `python -c pass` | {base:.1f} | 1.00× | |"]
                for event in ("UserPromptSubmit", "SessionStart"):
                    old, new = (statistics.median(samples[f"{v} {event}"]) for v in versions)
                    rows.append(f"| {event}, {commit} | {old:.1f} | {old / base:.2f}× | |")
                    rows.append(
                        f"| {event}, {here} | {new:.1f} | {new / base:.2f}× | "
                        f"{new - old:+.1f} ms ({(new / old - 1) * 100:+.0f}%) |"
                    )
                tables.append(
                    f"### {size:,} records (topical store)\n\n"
                    "| command | median ms | ratio | this checkout against the other |\n"
                    "|---|--:|--:|--:|\n" + "\n".join(rows) + "\n"
                )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                           capture_output=True, check=False)  # fmt: skip
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    text = (
        f"# Hooks against {commit}, no MCP server\n\n"
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average {load} "
        f"at the end, {args.runs} interleaved rounds per size. Command: `python "
        f"benchmarks/hooks_against.py {args.rev} --sizes {args.sizes} --runs {args.runs}` "
        "(module docstring: the method).\n\n" + "\n".join(tables)
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(text)


if __name__ == "__main__":
    main()
