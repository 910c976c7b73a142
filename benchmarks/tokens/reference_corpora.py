"""Estimate vs an offline reference tokenizer on broad corpora; optionally re-fit the weights.

Needs ``ctok`` (and ``scipy`` for ``--fit``) in the interpreter that runs it, e.g. the scratch venv
of reference_ctok.py; agentctx.core.tokens is imported from ``src/`` (standard library only)::

    /tmp/ctok-venv/bin/python benchmarks/tokens/reference_corpora.py TRANSCRIPT_DIR [--fit]

Corpora (all built deterministically on this machine):

* ``transcript:<kind>``: every payload of the transcripts (text, thinking, tool parameters, tool
  results), split at line ends into chunks of 1,500-3,000 characters;
* ``package:<kind>``: files of the installed site-packages (Python, .pyi, JS, CSS, HTML,
  Markdown, package METADATA, JSON, TOML, text) plus the repository's docs and sources, held out
  from the fit;
* ``stress:<kind>``: synthetic worst cases (hex hashes, UUIDs, base64, numbers, commit lists, emoji,
  random punctuation / printable ASCII, whitespace runs, space-padded tables, aligned columns,
  indented YAML, deeply indented code);
* ``lang:<code>``: the translated strings of humanize's .po catalogues (36 languages).

The table prints, per corpus and vocabulary family (v3: Claude 3 .. Opus 4.6; v4.7: Opus 4.7+):
aggregate estimate/reference, share of chunks undercounted, worst chunk ratio.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import importlib
import json
import random
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from derive_calibration import _params_text, _result_text  # noqa: E402

from agentctx.core.tokens import estimate_tokens  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

Row = dict[str, Any]
PAD = "\u27e8pad\u27e9"


def split(text: str, low: int = 1500, high: int = 3000) -> list[str]:
    if len(text) <= high:
        return [text]
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        size += len(line)
        if size >= low:
            chunks.append("".join(current))
            current, size = [], 0
    if current:
        chunks.append("".join(current))
    return chunks


def transcript_rows(folder: Path) -> list[Row]:
    rows: list[Row] = []
    seen: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        names: dict[str, str] = {}
        lines = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
        for line in lines:
            message = line.get("message")
            if not isinstance(message, dict) or line.get("type") not in ("user", "assistant"):
                continue
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for block in content or []:
                kind = str(block.get("type"))
                texts: list[str] = []
                if kind in ("text", "thinking"):
                    texts = [str(block.get(kind) or "")]
                elif kind == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
                    texts = _params_text(block.get("input"))[1]
                    kind = "tool_use:" + str(block.get("name"))
                elif kind == "tool_result":
                    result = _result_text(block)
                    texts = [result] if result else []
                    kind = "tool_result:" + names.get(str(block.get("tool_use_id")), "?")
                for text in texts:
                    if text.strip() and text not in seen:
                        seen.add(text)
                        rows.extend(
                            {"corpus": "transcript:" + _kind(kind), "text": c} for c in split(text)
                        )
    return rows


def _kind(kind: str) -> str:
    tool = kind.partition(":")[2]
    if tool in ("Read",) and kind.startswith("tool_result"):
        return "read-output"
    if tool in ("Write", "Edit", "MultiEdit"):
        return "code"
    if tool in ("Bash", "BashOutput", "Grep", "Glob", "KillBash"):
        return "shell"
    if tool in ("TodoWrite", "WebSearch"):
        return "json"
    return "prose" if kind in ("text", "thinking") or not tool else "mixed"


def package_rows() -> list[Row]:
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    project_site = ROOT / ".venv" / "lib" / "python3.11" / "site-packages"
    if project_site.is_dir():
        site = project_site
    rng = random.Random(11)
    rows: list[Row] = []
    plan = [
        ("**/*.py", 150, "code"),
        ("**/*.pyi", 30, "code"),
        ("**/*.js", 20, "code"),
        ("**/*.css", 10, "code"),
        ("**/*.html", 10, "code"),
        ("**/*.md", 60, "prose"),
        ("*.dist-info/METADATA", 60, "prose"),
        ("**/*.json", 60, "json"),
        ("**/*.txt", 30, "other"),
        ("**/*.toml", 10, "other"),
    ]
    for pattern, count, kind in plan:
        files = sorted(
            f
            for f in glob.glob(str(site / pattern), recursive=True)
            if Path(f).stat().st_size > 200
        )
        files = [f for f in files if Path(f).stat().st_size < 200_000]
        rng.shuffle(files)
        for name in files[:count]:
            try:
                chunks = split(Path(name).read_text("utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
            rng.shuffle(chunks)
            rows.extend({"corpus": "package:" + kind, "text": c} for c in chunks[:3] if c.strip())
    for file in sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "src").rglob("*.py")):
        kind = "prose" if file.suffix == ".md" else "code"
        rows.extend(
            {"corpus": "package:" + kind, "text": c} for c in split(file.read_text("utf-8"))
        )
    return rows


def stress_rows() -> list[Row]:
    rng = random.Random(7)
    words = ["id", "name", "status", "value", "token", "record", "src/agentctx/store/api.py", "ok"]
    words += ["failed", "2026-02-10", "1500", "0.42", "True", "None", "decision", "note"]

    def sha() -> str:
        return hashlib.sha1(str(rng.random()).encode()).hexdigest()

    def emoji() -> str:
        lo, hi = rng.choice([(0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x2600, 0x26FF)])
        return chr(rng.randint(lo, hi)) + rng.choice(["", " ", " ok ", "\n"])

    def table() -> str:
        widths = [rng.randint(4, 24) for _ in range(rng.randint(2, 6))]

        def row() -> str:
            return "| " + " | ".join(rng.choice(words).ljust(w) for w in widths) + " |"

        sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        return "\n".join([row(), sep, *(row() for _ in range(rng.randint(2, 30)))])

    def indented(unit: str, leaves: list[str]) -> str:
        depth, out = 0, []
        for _ in range(rng.randint(5, 60)):
            depth = max(0, min(6, depth + rng.choice([-1, 0, 1])))
            out.append(unit * depth + rng.choice(leaves))
        return "\n".join(out)

    makers: dict[str, Callable[[], str]] = {
        "hex": lambda: "\n".join(sha() for _ in range(rng.randint(1, 30))),
        "uuid": lambda: " ".join(
            str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(rng.randint(1, 30))
        ),
        "base64": lambda: base64.b64encode(rng.randbytes(rng.randint(20, 1500))).decode(),
        "numbers": lambda: " ".join(
            str(rng.randint(0, 10 ** rng.randint(1, 12))) for _ in range(rng.randint(5, 300))
        ),
        "commits": lambda: "\n".join(
            sha()[:7] + " " + rng.choice(["fix: handle empty input", "docs: update README"])
            for _ in range(rng.randint(1, 40))
        ),
        "emoji": lambda: "".join(emoji() for _ in range(rng.randint(5, 200))),
        "punct": lambda: "".join(
            rng.choice("!@#$%^&*()_+-=[]{}|;:,.<>/?~`\"'\\") for _ in range(rng.randint(20, 2000))
        ),
        "printable": lambda: "".join(
            chr(rng.randint(32, 126)) for _ in range(rng.randint(20, 2000))
        ),
        "whitespace": lambda: "".join(
            rng.choice([" " * rng.randint(1, 40), "\n" * rng.randint(1, 5), "\t", "x"])
            for _ in range(rng.randint(20, 500))
        ),
        "table": table,
        "aligned": lambda: "\n".join(
            "".join(rng.choice(words).rjust(rng.randint(6, 16)) for _ in range(rng.randint(2, 6)))
            for _ in range(rng.randint(3, 40))
        ),
        "yaml": lambda: indented("  ", [w + ": " + rng.choice(words) for w in words]),
        "deep-code": lambda: indented("    ", ["if x:", "return y", "foo(bar, baz)", "x = 1", "}"]),
    }
    return [
        {"corpus": "stress:" + name, "text": make()}
        for _ in range(40)
        for name, make in makers.items()
    ]


def language_rows() -> list[Row]:
    rows: list[Row] = []
    site = ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "humanize" / "locale"
    for po in sorted(site.glob("*/LC_MESSAGES/humanize.po")):
        strings = []
        for line in po.read_text("utf-8").splitlines():
            if line.startswith("msgstr") and '"' in line:
                value = line.split('"', 1)[1].rsplit('"', 1)[0]
                if value:
                    strings.append(value)
        if strings:
            rows.append({"corpus": "lang:" + po.parts[-3], "text": "\n".join(strings)})
    return rows


def count(rows: list[Row]) -> None:
    ctok = importlib.import_module("ctok")
    for row in rows:
        for family, version in (("v3", "3.0"), ("v47", "4.7")):
            pieces = cast("list[str]", ctok.tokenize(row["text"], version))
            row[family] = sum(1 for piece in pieces if piece != PAD)


def report(rows: list[Row]) -> None:
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[row["corpus"]].append(row)
        if row["corpus"].startswith("lang:"):
            latin = row["text"].isascii() or sum(ord(c) > 0x24F for c in row["text"]) < 5
            groups["lang:ALL-" + ("latin" if latin else "non-latin")].append(row)
    print("| corpus | n | v3 agg | v3 under | v3 worst | v4.7 agg | v4.7 under | v4.7 worst |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for name in sorted(groups):
        items = groups[name]
        cells = [name, str(len(items))]
        for family in ("v3", "v47"):
            estimates = [estimate_tokens(r["text"]) for r in items]
            refs = [max(int(r[family]), 1) for r in items]
            ratios = [e / t for e, t in zip(estimates, refs, strict=True)]
            under = sum(1 for r in ratios if r < 1)
            cells += [
                f"{sum(estimates) / sum(refs):.2f}",
                f"{100 * under / len(items):.0f} %",
                f"{min(ratios):.2f}",
            ]
        print("| " + " | ".join(cells) + " |")


def features(text: str) -> list[float]:
    """The estimator's inputs, in the order of WEIGHTS below (mirrors agentctx.core.tokens)."""
    tokens_module = importlib.import_module("agentctx.core.tokens")
    classes = text.encode("utf-8", "surrogatepass").translate(tokens_module._CLASSES)
    runs = classes.translate(tokens_module._RUNS)
    return [
        classes.count(b"a"),
        classes.count(b"A"),
        classes.count(b"0"),
        runs.count(b"x0") + runs.count(b" 0") + (runs[:1] == b"0"),
        classes.count(b"."),
        classes.count(b"\n"),
        runs.count(b"x  ") + runs.count(b"0  ") + (runs[:2] == b"  "),
        classes.count(b"2"),
        classes.count(b"3"),
        classes.count(b"4"),
        1.0,
    ]


WEIGHTS = ["lower", "upper", "digit", "digit_run", "symbol", "newline", "space_run"]
WEIGHTS += ["char2", "char3", "char4", "base"]


def fit(rows: list[Row], core_penalty: float = 150.0, stress_penalty: float = 40.0) -> None:
    """Linear program: minimise the mean estimate/reference per corpus, with penalised
    undercounts (heavily for transcripts, moderately for stress), reference = max(v3, v4.7)."""
    np = importlib.import_module("numpy")
    optimize = importlib.import_module("scipy.optimize")
    sparse = importlib.import_module("scipy.sparse")
    train = [r for r in rows if r["corpus"].startswith(("transcript:", "stress:", "lang:"))]
    size: dict[str, int] = defaultdict(int)
    for row in train:
        size[row["corpus"]] += 1
    matrix = np.array([features(r["text"]) for r in train], dtype=float)
    target = np.array([max(r["v3"], r["v47"], 1) for r in train], dtype=float)
    weight = np.array(
        [(1.0 if r["corpus"].startswith("transcript:") else 0.2) / size[r["corpus"]] for r in train]
    )
    penalty = np.array(
        [
            (
                core_penalty
                if r["corpus"].startswith("transcript:")
                else stress_penalty
                if r["corpus"].startswith("stress:")
                else 2.0
            )
            / size[r["corpus"]]
            for r in train
        ]
    )
    n, k = matrix.shape
    cost = np.concatenate([(weight / target) @ matrix, penalty / target])
    a_ub = sparse.hstack([sparse.csr_matrix(-matrix), -sparse.identity(n)]).tocsr()
    result = optimize.linprog(
        cost, A_ub=a_ub, b_ub=-target, bounds=[(0, None)] * (k + n), method="highs"
    )
    w = result.x[:k]
    print("fitted weights (before rounding up):")
    for name, value in zip(WEIGHTS, w, strict=True):
        print(f"  {name:10s} {value:.3f}")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    rows = transcript_rows(Path(argv[1])) + package_rows() + stress_rows() + language_rows()
    count(rows)
    report(rows)
    if "--fit" in argv:
        fit(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
