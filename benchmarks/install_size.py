"""Installed size: a fresh virtual environment with agentctx installed, and its largest packages.

Builds nothing by hand: ``uv venv`` makes an empty environment with this interpreter, ``uv pip
install <repository>`` installs agentctx and its dependencies as a user's ``uv tool install`` would
(the same resolution; the tool form adds only its own shim), then the environment is measured:

- the whole folder (bytes of every file, and blocks on disk), and the empty environment before the
  install, so the difference is what agentctx costs;
- each installed distribution: the files its ``RECORD`` lists (the bytes ``pip uninstall`` would
  free), which packages require it, and whether agentctx imports it directly.

Writes ``benchmarks/results/install_size.md``. The embedding model (``embedding.model``, fetched on
first use into the fastembed cache) is not part of the install and is reported apart, from the
model's published size. Nothing here is timed; the figures depend only on the resolved versions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement  # fastembed's huggingface_hub brings it

import uvtool

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "install_size.md"
MB = 1_000_000
#: agentctx's default embedding model (config ``embedding.model``), read from the source so that
#: it follows agentctx.embeddings.models.DEFAULT_MODEL.
DEFAULT_MODEL = re.findall(
    r'^DEFAULT_MODEL = "([^"]+)"',
    (ROOT / "src" / "agentctx" / "embeddings" / "models.py").read_text(),
    re.M,
)[0]

#: Run inside the fresh environment: every distribution, its RECORD bytes and its requirements.
INSPECT = r"""
import json, os, sys
from importlib import metadata, util
from pathlib import Path
out = []
for dist in metadata.distributions():
    paths = set()
    for f in dist.files or []:
        p = Path(dist.locate_file(f))
        paths.add(p)
        if p.suffix == ".py":  # its bytecode, written by the install (not listed in RECORD)
            paths.add(Path(util.cache_from_source(str(p))))
    size = sum(p.stat().st_size for p in paths if p.is_file())
    out.append({
        "name": dist.metadata["Name"],
        "version": dist.version,
        "bytes": size,
        "requires": list(dist.requires or []),
    })
model = None
try:
    from fastembed import TextEmbedding
    for m in TextEmbedding.list_supported_models():
        if m["model"] == MODEL:
            model = {"name": MODEL, "source": m["sources"]["hf"], "gb": m["size_in_GB"]}
except Exception as exc:  # reported, not fatal: the size table stands without it
    model = {"name": MODEL, "error": repr(exc)}
print(json.dumps({"dists": out, "model": model}))
"""


def folder_size(path: Path) -> tuple[int, int]:
    """Bytes of every regular file under ``path`` and the bytes of the blocks they occupy."""
    apparent = blocks = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            st = os.lstat(os.path.join(folder, name))
            if not os.path.islink(os.path.join(folder, name)):
                apparent += st.st_size
                blocks += st.st_blocks * 512
    return apparent, blocks


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def active_edges(listed: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Who requires each installed distribution, following only the requirements in force.

    From agentctx-cc (no extras) down: a requirement counts when its marker holds here for one of
    the extras its requirer was installed with (``x[extra]`` in the answer when only an extra
    brings it in). fsspec's test extras, for one, list numpy but are never installed.
    """
    by_name = {canonical(str(d["name"])): d for d in listed}
    extras: dict[str, set[str]] = {"agentctx-cc": set()}
    required_by: dict[str, set[str]] = {}
    queue = ["agentctx-cc"]
    while queue:
        name = queue.pop()
        dist = by_name.get(name)
        if dist is None:
            continue
        for text in dist["requires"]:
            requirement = Requirement(text)
            target = canonical(requirement.name)
            via = None
            if requirement.marker is None:
                via = ""
            else:
                for extra in ["", *sorted(extras[name])]:
                    if requirement.marker.evaluate({"extra": extra}):
                        via = extra
                        break
            if via is None or target not in by_name:
                continue
            label = f"{dist['name']}[{via}]" if via else str(dist["name"])
            required_by.setdefault(target, set()).add(label)
            wanted = set(requirement.extras)
            if target not in extras or not wanted <= extras[target]:
                extras[target] = extras.get(target, set()) | wanted
                queue.append(target)
    return {name: sorted(labels) for name, labels in required_by.items()}


def imported_by_agentctx() -> set[str]:
    """Top-level modules agentctx's source imports (``import x`` / ``from x import``)."""
    found: set[str] = set()
    pattern = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
    for path in (ROOT / "src" / "agentctx").rglob("*.py"):
        found.update(pattern.findall(path.read_text()))
    return found


#: Distribution name -> the module it provides, where they differ.
MODULE_OF = {"sqlean-py": "sqlean", "sqlite-vec": "sqlite_vec", "agentctx-cc": "agentctx"}


@dataclass
class Measured:
    """One fresh environment: folder sizes (bytes, blocks), its distributions, the model."""

    empty: tuple[int, int]
    full: tuple[int, int]
    dists: list[dict[str, Any]]
    model: dict[str, Any] | None


def measure(uv: str) -> Measured:
    with tempfile.TemporaryDirectory(prefix="agentctx-size-") as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        empty = folder_size(venv)
        python = venv / "bin" / "python"
        install = [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python)]
        subprocess.run([*install, str(ROOT)], check=True)
        full = folder_size(venv)
        inspect = f"MODEL = {DEFAULT_MODEL!r}\n{INSPECT}"
        found = json.loads(
            subprocess.run(
                [str(python), "-c", inspect], check=True, capture_output=True, text=True
            ).stdout
        )
    listed: list[dict[str, Any]] = found["dists"]
    required_by = active_edges(listed)
    imports = imported_by_agentctx()
    for dist in listed:
        name = canonical(dist["name"])
        dist["required_by"] = required_by.get(name, [])
        dist["imported"] = MODULE_OF.get(name, name.replace("-", "_")) in imports
    listed.sort(key=lambda d: -int(d["bytes"]))
    return Measured(empty, full, listed, found["model"])


def model_note(model: dict[str, Any] | None) -> str:
    """The embedding model's name and published download size, as fastembed lists it."""
    if model is None or "gb" not in model:
        return f"`{DEFAULT_MODEL}` (size unknown: {model})"
    return f"`{model['name']}` ({model['source']}, {model['gb'] * 1000:.0f} MB by fastembed's list)"


def report(result: Measured, top: int) -> str:
    """The markdown of ``install_size.md`` above its Findings."""
    empty_bytes, _ = result.empty
    full_bytes, full_blocks = result.full
    dists = result.dists
    total = sum(int(d["bytes"]) for d in dists)
    own = next(d for d in dists if canonical(d["name"]) == "agentctx-cc")
    lines = [
        "# Installed size",
        "",
        f"`python benchmarks/install_size.py`, {datetime.now(UTC):%Y-%m-%d}, Python "
        f"{sys.version.split()[0]} on {sys.platform}: a fresh `uv venv` and `uv pip install . "
        "--compile-bytecode` (what `uv tool install .` resolves; pipx and pip compile bytecode "
        'too). Sizes in MB (10^6 bytes), bytecode included. "required by" names the '
        "distributions whose requirements list it (`x[extra]`: through that extra).",
        "",
        f"- the environment: **{full_bytes / MB:.1f} MB** of files ({full_blocks / MB:.1f} MB on "
        f"disk), of which the empty environment is {empty_bytes / MB:.1f} MB",
        f"- {len(dists)} distributions, {total / MB:.1f} MB by their RECORD files; agentctx "
        f"itself {int(own['bytes']) / MB:.1f} MB",
        f"- not counted: the embedding model, {model_note(result.model)}, fetched on first "
        "use into the fastembed cache",
        "",
        f"## The {top} largest distributions",
        "",
        "| distribution | version | MB | share | required by | agentctx imports it |",
        "|---|---|--:|--:|---|---|",
    ]
    for dist in dists[:top]:
        size = int(dist["bytes"])
        by = ", ".join(dist["required_by"]) or "—"
        lines.append(
            f"| {dist['name']} | {dist['version']} | {size / MB:.1f} | {size / total:.0%} | {by} "
            f"| {'yes' if dist['imported'] else 'no'} |"
        )
    rest = dists[top:]
    rest_bytes = sum(int(d["bytes"]) for d in rest)
    lines += [
        f"| {len(rest)} others | | {rest_bytes / MB:.1f} | {rest_bytes / total:.0%} | | |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="how many distributions to list")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = report(measure(uvtool.uv()), args.top)
    if args.out.exists():  # the hand-written reading of the figures is kept across runs
        kept = args.out.read_text().partition("\n## Findings\n")
        if kept[1]:
            text += "## Findings\n" + kept[2]
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
