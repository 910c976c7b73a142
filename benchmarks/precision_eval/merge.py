"""Join a with-cues run and a without-cues run of ``run.py`` (made in parallel) into one report.

    python benchmarks/precision_eval/run.py --cues with --out-dir A
    python benchmarks/precision_eval/run.py --cues without --out-dir B
    python benchmarks/precision_eval/merge.py A/precision_eval.json B/precision_eval.json \\
        --out-dir benchmarks/results

The with-cues run's figures, outcomes and meta stay as they are; the without-cues run's hook
figures become ``figures.no_cues`` (what ``run.py --cues both`` writes in one go, sequentially).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from precision_eval import dataset  # noqa: E402
from precision_eval.report import markdown  # noqa: E402
from precision_eval.run import Outcome  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("with_cues", type=Path)
    parser.add_argument("without_cues", type=Path)
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args()
    cued = json.loads(args.with_cues.read_text())
    bare = json.loads(args.without_cues.read_text())
    if cued["meta"].get("cues") != "with" or bare["meta"].get("cues") != "without":
        raise SystemExit("give a --cues with run, then a --cues without run")
    keep = ("counts", "prompts", "hook", "keywords_alone")
    cued["figures"]["no_cues"] = {
        part: {k: v for k, v in bare["figures"][part].items() if k in keep}
        for part in (*dataset.PARTS, "overall")
    }
    cued["meta"]["cues"] = "both"
    flag = "" if cued["meta"].get("search", True) else " --no-search"
    cued["meta"]["command"] = (
        f"python benchmarks/precision_eval/run.py{flag} --cues with, and --cues without in "
        "parallel, joined by benchmarks/precision_eval/merge.py"
    )
    cued["meta"]["no_cues_prompts_with_meaning"] = bare["meta"]["prompts_with_meaning"]
    cued["meta"]["no_cues_run"] = {k: bare["meta"][k] for k in ("date", "revision", "seconds")}
    outcomes = {}
    for prompt_id, p in cued["prompts"].items():
        outcome = Outcome(
            injected=p["injected"],
            lines=p["lines"],
            tokens=p["tokens"],
            meaning=p["meaning"],
            keyword_injected=p["keywords_alone"],
        )
        outcome.search, outcome.strong, outcome.notes = p["search"], p["strong"], p["notes"]
        outcomes[prompt_id] = outcome
    text = markdown(dataset.load(), cued["figures"], cued["devbench"], outcomes, cued["meta"])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "precision_eval.md").write_text(text)
    (args.out_dir / "precision_eval.json").write_text(
        json.dumps(cued, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )


if __name__ == "__main__":
    main()
