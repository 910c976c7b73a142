"""SessionStart against ``python -c pass`` on other interpreters than this venv's.

Usage, from the repository root (project venv; ``python3 -m nox -s bench`` runs it)::

    python benchmarks/session_start_python.py [--python PATH ...] [--runs 100] [--out FILE]

The SessionStart hook's normal path is stdlib-only (ADR-017), so its cost beside a bare start
depends on the interpreter's build as much as on agentctx: an extension module the hook needs
(``fcntl`` for the session ledger's lock, ``_sha256`` for the project id, ``_json``) is a shared
library to open on one build and built into the interpreter on another. For each interpreter
(default: this venv's base interpreter, and ``/usr/bin/python3`` when it is another one), ``uv
venv`` makes an environment and ``uv pip install --no-deps --editable .`` puts this checkout's
console script in it (the normal path needs no dependency). One home is prepared with this venv's
agentctx (a synthetic store of 1,000 records, the project profiled, the digest built); then, in
interleaved rounds in a shuffled order, each interpreter's ``python -c pass`` and ``agentctx hook
session-start`` run with the same payload, and every hook run must print the contract JSON with
the digest. The ratio of medians per interpreter is written as Markdown to
``benchmarks/results/session_start_python.md`` and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import synthetic_store
import uvtool
from agentctx.core.project import identify
from hooks import DROPPED_ENV, ORIGIN, PROJECT_NAME, SEED, check_output, make_project

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "session_start_python.md"
RECORDS = 1_000
#: The extension modules the SessionStart hook's normal path imports.
EXTENSIONS = ("fcntl", "_sha256", "_json")


def base_interpreter() -> str:
    """The interpreter this venv was made from."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def describe(python: str) -> tuple[str, list[str]]:
    """The interpreter's version and which of :data:`EXTENSIONS` it has built in."""
    code = (
        "import platform, sys; print(platform.python_version()); "
        f"print(' '.join(m for m in {EXTENSIONS!r} if m in sys.builtin_module_names))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    version, _, builtin = out.stdout.partition("\n")
    return version.strip(), builtin.split()


def make_venv(uv: str, python: str, folder: Path) -> Path:
    """A venv of ``python`` with this checkout's console script (no dependencies)."""
    subprocess.run([uv, "venv", "--quiet", "--python", python, str(folder)], check=True)
    venv_python = folder / "bin" / "python"
    install = [uv, "pip", "install", "--quiet", "--no-deps", "--python", str(venv_python)]
    subprocess.run([*install, "-e", str(ROOT)], check=True)
    return folder / "bin"


def timed(cmd: list[str], stdin: bytes, env: dict[str, str], cwd: Path) -> tuple[float, bytes]:
    start = time.perf_counter_ns()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    ms = (time.perf_counter_ns() - start) / 1e6
    if proc.returncode != 0 or proc.stderr:
        raise SystemExit(f"{cmd} failed ({proc.returncode}): {proc.stderr[-500:]!r}")
    return ms, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--python", action="append", help="an interpreter (repeatable)")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    uv = uvtool.uv()
    pythons = args.python or [base_interpreter()]
    if not args.python and os.path.exists("/usr/bin/python3"):
        system = os.path.realpath("/usr/bin/python3")
        if system != pythons[0]:
            pythons.append(system)
    with tempfile.TemporaryDirectory(prefix="agentctx-ss-python-") as tmp:
        work = Path(tmp)
        home, project = work / "home", work / PROJECT_NAME
        home.mkdir(mode=0o700)
        project.mkdir()
        make_project(project)
        identity = identify(str(project))
        synthetic_store.build(
            str(home / "agentctx.db"), RECORDS, identity.project_id, identity.name, SEED, "zipf"
        )
        env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        env["AGENTCTX_HOME"] = str(home)
        own = Path(sys.executable).with_name("agentctx")
        subprocess.run([str(own), "worker", "profile", "--cwd", str(project)], env=env,
                       cwd=project, capture_output=True, timeout=120, check=True)  # fmt: skip

        def payload() -> bytes:
            session = f"bench-{uuid.uuid4().hex}"
            return json.dumps({
                "session_id": session, "transcript_path": str(project / f".claude-{session}.jsonl"),
                "cwd": str(project), "permission_mode": "default",
                "hook_event_name": "SessionStart", "source": "startup",
            }).encode()  # fmt: skip

        timed([str(own), "hook", "session-start"], payload(), env, project)  # builds the digest
        commands: dict[str, list[str]] = {}
        for index, python in enumerate(pythons):
            bin_dir = make_venv(uv, python, work / f"venv{index}")
            commands[f"{index}:base"] = [str(bin_dir / "python"), "-c", "pass"]
            commands[f"{index}:ss"] = [str(bin_dir / "agentctx"), "hook", "session-start"]
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(3):  # warm-up: page cache, bytecode
            for cmd in commands.values():
                timed(cmd, payload(), env, project)
        rng = random.Random(SEED)
        for _ in range(args.runs):
            for name in rng.sample(list(commands), len(commands)):
                ms, out = timed(commands[name], payload(), env, project)
                if name.endswith(":ss"):
                    done = subprocess.CompletedProcess(commands[name], 0, out, b"")
                    text = check_output("session-start", done)
                    if not text or not text.startswith("# agentctx: context"):
                        raise SystemExit(f"session-start printed no digest: {out[:300]!r}")
                samples[name].append(ms)
        log = home / "logs" / "hooks.log"
        if log.exists() and log.read_text("utf-8").strip():
            raise SystemExit("hooks.log is not empty:\n" + log.read_text("utf-8"))
    rows = []
    for index, python in enumerate(pythons):
        version, builtin = describe(python)
        base = statistics.median(samples[f"{index}:base"])
        hook = statistics.median(samples[f"{index}:ss"])
        built = ", ".join(builtin) or "none"
        rows.append(f"| `{python}` | {version} | {built} | {base:.1f} | {hook:.1f} | "
                    f"{hook - base:.1f} | {hook / base:.2f}× |")  # fmt: skip
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    text = "\n".join([
        "# SessionStart on other interpreters",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} CPUs, load average {load} at the end), {args.runs} interleaved rounds, "
        f"a {RECORDS:,}-record Zipf store, origin `{ORIGIN}`. Command: `python "
        "benchmarks/session_start_python.py` (module docstring: the method).",
        "",
        "| interpreter | version | built in of " + ", ".join(f"`{m}`" for m in EXTENSIONS)
        + " | `python -c pass` ms | SessionStart ms | difference ms | ratio (target ≤ 1.25×) |",
        "|---|---|---|--:|--:|--:|--:|",
        *rows,
        "",
    ])  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(text)


if __name__ == "__main__":
    main()
