"""The precision eval's Markdown report: the figures of ``run.py`` as tables, with the goals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from precision_eval.dataset import Dataset
    from precision_eval.run import Outcome

COLUMNS = ("tuning", "heldout", "overall")


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def goal(value: float | None, target: float, *, at_most: bool = False) -> str:
    if value is None:
        return ""
    met = value <= target if at_most else value >= target
    return " ✓" if met else " ✗"


BASELINE = Path(__file__).resolve().parent / "baseline.json"
#: The hook's figures compared with the baseline: (key, label, a percentage).
COMPARED = (
    ("hit3", "hit@3", True),
    ("full3", "full recall@3", True),
    ("unanswerable_injected", "unanswerable prompts with an injection", True),
    ("chitchat_injected", "chit-chat prompts with an injection", True),
    ("cross_project_injected", "cross-project prompts with an injection", True),
    ("answerable_extra", "non-answers injected per answerable prompt", False),
    ("tokens_unanswerable", "tokens injected per unanswerable prompt", False),
)


def baseline_lines(figures: dict[str, Any]) -> list[str]:
    """The hook's figures beside the baseline's (before the issue-14 rules), per part."""
    if not BASELINE.exists():
        return []
    before = json.loads(BASELINE.read_text())
    lines = [
        f"Against the baseline (git {before['meta']['revision']}, before tuning; its tuning "
        f"part is {', '.join(before['split_tuning'])}):"
        if "split_tuning" in before
        else f"Against the baseline (git {before['meta']['revision']}, before tuning):",
        "",
        "| figure | tuning: baseline | tuning: now | held-out: baseline | held-out: now |",
        "|---|--:|--:|--:|--:|",
    ]
    for key, label, share in COMPARED:
        show = pct if share else num
        cells = [
            show(part[key]) for name in ("tuning", "heldout")
            for part in (before["figures"][name]["hook"], figures[name]["hook"])
        ]  # fmt: skip
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return [*lines, ""]


#: Issue 25's goals for the hook with tiers: (key, label, goal, at most, a share).
TIER_ROWS = (
    ("named3", "answer named (whole or one line) in the top 3", 0.90, False, True),
    ("whole3", "answer's body shown whole", 0.80, False, True),
    ("tokens_negative", "tokens per unanswerable prompt (all kinds)", 40.0, True, False),
    ("tokens_unanswerable", "… hard negatives (unanswerable)", None, True, False),
    ("tokens_cross_project", "… other projects' questions", None, True, False),
    ("tokens_chitchat", "tokens per chit-chat prompt", 10.0, True, False),
    ("lines_per_prompt", "one-line entries per prompt", None, True, False),
    ("meaning_share", "prompts that got the server's answer in time", None, False, True),
)


def tier_lines(figures: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Issue 25: the hook with meaning and tiers, with and without cues, and keywords alone."""
    runs = [("without cues" if meta.get("cues") == "without" else "with cues", figures)]
    if "no_cues" in figures:
        runs.append(("without cues", figures["no_cues"]))
    lines = [
        "",
        "## The UserPromptSubmit hook with meaning and tiers (issue 25)",
        "",
        "Each prompt through the real hook while a real `agentctx mcp` lends its model over its "
        "socket (the hook's deadline raised to "
        f"{meta.get('eval_deadline_ms', 2000)} ms here: this eval measures what meaning brings on "
        "a shared machine; the hook's speed is benchmarks/results/hooks.md's). *Named*: an answer "
        "injected whole or offered as a one-line entry. *Without cues*: the same data with every "
        "record's hand-written retrieval cues stripped (a user without an LLM has none). The "
        "held-out part is the newest blind one of issue 25 (the earlier ones are tuning data now), "
        "run once after the rules were fixed.",
        "",
        "| figure | goal | " + " | ".join(f"{label}: {c}" for label, _f in runs
                                            for c in ("tuning", "held-out")) + " |",
        "|---|--:|" + "--:|" * (2 * len(runs)),
    ]  # fmt: skip
    for key, label, target, at_most, is_share in TIER_ROWS:
        show = pct if is_share else num
        cells = []
        for _label, run in runs:
            for column in ("tuning", "heldout"):
                value = run[column]["hook"].get(key)
                mark = goal(value, target, at_most=at_most) if target is not None else ""
                cells.append(show(value) + mark)
        want = (
            ""
            if target is None
            else ("≤ " if at_most else "≥ ") + (f"{target:.0%}" if is_share else f"{target:g}")
        )
        lines.append(f"| {label} | {want} | {' | '.join(cells)} |")
    for key, label in (("leaks", "records of another project (whole or line)"),
                       ("superseded", "superseded records (whole or line)")):  # fmt: skip
        cells = [str(len(run[c]["hook"][key])) for _l, run in runs for c in ("tuning", "heldout")]
        lines.append(f"| {label} | 0 | {' | '.join(cells)} |")
    lines += [
        "",
        "With no server (the fallback: the same hook, `AGENTCTX_MEANING=off`, keywords alone, "
        "every candidate whole, as before issue 25):",
        "",
        "| figure | " + " | ".join(f"{label}: {c}" for label, _f in runs
                                   for c in ("tuning", "held-out")) + " |",
        "|---|" + "--:|" * (2 * len(runs)),
    ]  # fmt: skip
    for key, label, is_share in (
        ("hit3", "answer shown whole in the top 3", True),
        ("full3", "every answer shown", True),
        ("unanswerable_injected", "unanswerable prompts with an injection", True),
        ("tokens_negative", "tokens per unanswerable prompt (all kinds)", False),
        ("tokens_chitchat", "tokens per chit-chat prompt", False),
    ):
        show = pct if is_share else num
        cells = [show(run[c]["keywords_alone"].get(key)) for _l, run in runs
                 for c in ("tuning", "heldout")]  # fmt: skip
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return lines


def markdown(
    data: Dataset,
    figures: dict[str, Any],
    devbench: dict[str, Any] | None,
    outcomes: dict[str, Outcome],
    meta: dict[str, Any],
) -> str:
    """The whole report."""
    split = {
        part: ", ".join(n for n, p in data.projects.items() if p.part == part)
        for part in ("tuning", "heldout")
    }
    records = {
        part: sum(
            1 for i in data.items if not i.is_global and data.projects[i.project].part == part
        )
        for part in ("tuning", "heldout")
    }
    globals_ = sum(1 for i in data.items if i.is_global)
    lines = [
        "# Precision eval: per-prompt retrieval on held-out data (issue 14)",
        "",
        f"Generated by `{meta['command']}`, {meta['date']}, git {meta['revision']}, Python "
        f"{meta['python']}, {meta['seconds']} s. Data: `benchmarks/precision_eval/data/` "
        f"({len(data.projects)} projects and the global preferences, {len(data.items)} records, "
        f"{len(data.prompts)} prompts; how it was made: its README.md). Store: "
        f"{meta['records']} records, {meta['embedded']} embedded with the offline "
        "all-MiniLM-L6-v2 (int8). Capture items the PostToolUse hook wrote no stub for: "
        f"{meta.get('uncaptured', 0)}, {meta.get('uncaptured_answers', 0)} of them an answer to a "
        "prompt (that answer cannot be found: counted as missed).",
        "",
        f"Split by project: **tuning** = {split['tuning']} ({records['tuning']} records), "
        f"**held-out** = {split['heldout']} ({records['heldout']} records); the {globals_} global "
        "preferences are in both. The retrieval rules were tuned on the tuning part only "
        "(docs/retrieval.md); the held-out part is never used for tuning. The baseline (the "
        "rules before any tuning) is `benchmarks/precision_eval/baseline.json`, compared at the "
        "end of the hook's section.",
        "",
        "Every figure comes from the real interfaces: the records written through `Store.add`, "
        "the capture stubs through `agentctx hook post-tool-use`, each prompt through "
        "`agentctx hook user-prompt-submit` (a subprocess, fresh session, cwd = the project) and "
        "through `ctx_search` (limit 5) of the `agentctx mcp` stdio server, with embeddings off "
        "(keyword) and on (hybrid)"
        + ("." if meta.get("search", True) else " (not in this run: `--no-search`)."),
        "",
        "## Prompts",
        "",
        "| part | answerable | unanswerable (share words) | chit-chat | cross-project | all |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for column in COLUMNS:
        c = figures[column]["counts"]
        lines.append(
            f"| {column} | {c['answerable']} | {c['unanswerable']} | {c['chitchat']} | "
            f"{c['cross_project']} | {figures[column]['prompts']} |"
        )
    lines += tier_lines(figures, meta)
    db = devbench or {}
    dh = db.get("hook", {})
    lines += [
        "",
        "## The UserPromptSubmit hook, whole records (as before issue 25)",
        "",
        "| figure | goal | tuning | held-out | overall | DevBench |",
        "|---|--:|--:|--:|--:|--:|",
    ]

    def row(label: str, key: str, target: str, fmt: Any, dev: str = "—", **how: Any) -> None:
        cells = []
        for column in COLUMNS:
            value = figures[column]["hook"][key]
            mark = goal(value, how["t"], at_most=how.get("at_most", False)) if "t" in how else ""
            cells.append(fmt(value) + mark)
        lines.append(f"| {label} | {target} | {' | '.join(cells)} | {dev} |")

    row("hit@3 (an answer injected)", "hit3", "≥ 90%", pct, pct(dh.get("hit3")), t=0.90)
    row("full recall@3 (every answer injected)", "full3", "≥ 85%", pct, pct(dh.get("full3")),
        t=0.85)  # fmt: skip
    row("mean recall@3", "recall3", "", pct)
    row("unanswerable prompts with an injection", "unanswerable_injected", "≤ 10%", pct,
        pct(dh.get("unanswerable_injected")), t=0.10, at_most=True)  # fmt: skip
    row("chit-chat prompts with an injection", "chitchat_injected", "≤ 10%", pct, t=0.10,
        at_most=True)  # fmt: skip
    row("cross-project prompts with an injection", "cross_project_injected", "", pct)
    for label, key in (("records of another project injected", "leaks"),
                       ("superseded records injected", "superseded")):  # fmt: skip
        cells = [str(len(figures[c]["hook"][key])) for c in COLUMNS]
        lines.append(f"| {label} | 0 | {' | '.join(cells)} | — |")
    row("non-answers injected per answerable prompt", "answerable_extra", "", num)
    row("records injected per prompt", "records_per_prompt", "", num)
    row("tokens injected per answerable prompt", "tokens_answerable", "", num)
    row("… when something is injected", "tokens_answerable_when_injected", "", num)
    row("tokens injected per unanswerable prompt", "tokens_unanswerable", "", num)
    row("… when something is injected", "tokens_unanswerable_when_injected", "", num)
    row("tokens injected per chit-chat prompt", "tokens_chitchat", "", num)
    lines += [
        "",
        "Tokens: agentctx's own estimate (`agentctx.core.tokens.estimate_tokens`) of the injected "
        "`additionalContext`, averaged over every prompt of the kind (0 when nothing is "
        "injected). Leaks count records of a project other than the prompt's (global "
        "preferences excepted).",
        "",
        *baseline_lines(figures),
        "## `ctx_search` (limit 5)",
        "",
        "| figure | goal | mode | tuning | held-out | overall | DevBench |",
        "|---|--:|---|--:|--:|--:|--:|",
    ]
    for mode in ("keyword", "hybrid"):
        if f"search_{mode}" not in figures["overall"]:
            lines.append(f"| (not run: `--no-search`) | | {mode} | | | | |")
            continue
        ds = db.get(f"search_{mode}", {})
        for label, key, target, dev, t in (
            ("recall@5", "recall5", "≥ 95%", pct(ds.get("recall5")), 0.95),
            ("hit@5", "hit5", "", "—", None),
            ("answerable: an answer labelled strong", "answer_strong", "",
             pct(ds.get("answer_strong")), None),
            ("strong non-answers per answerable prompt", "strong_extra", "", "—", None),
            ("unanswerable: says so (no strong hit)", "unanswerable_says_so", "≥ 90%",
             pct(ds.get("unanswerable_says_so")), 0.90),
            ("unanswerable: nothing returned", "unanswerable_empty", "", "—", None),
            ("unanswerable: a note says so", "unanswerable_note", "", "—", None),
            ("chit-chat: no strong hit", "chitchat_says_so", "", "—", None),
            ("cross-project: no strong hit", "cross_project_says_so", "", "—", None),
        ):  # fmt: skip
            cells = []
            show = num if key == "strong_extra" else pct
            for column in COLUMNS:
                value = figures[column][f"search_{mode}"].get(key)
                cells.append(show(value) + (goal(value, t) if t is not None else ""))
            lines.append(f"| {label} | {target} | {mode} | {' | '.join(cells)} | {dev} |")
        for label, key in (("records of another project", "leaks"),
                           ("superseded records", "superseded")):  # fmt: skip
            cells = [str(len(figures[c][f"search_{mode}"][key])) for c in COLUMNS]
            lines.append(f"| {label} | 0 | {mode} | {' | '.join(cells)} | — |")
    modes = {
        m: figures["overall"].get(f"search_{m}", {}).get("modes", "not run")
        for m in ("keyword", "hybrid")
    }
    lines += [
        "",
        "How `ctx_search` says it has no answer: every hit carries a `match` label, `strong` "
        '(about what was asked) or `weak` (shares words or a topic), with a note ("no strong '
        'match: …") when all are weak; or an empty `results` list, with a note ("nothing '
        'relevant found: …") when nothing passed its floor; a query without searchable words is '
        "refused with a tool error (counted as nothing returned, its message as the note). "
        "*Says so* = no hit labelled strong. *An answer labelled strong* = the answer is returned "
        "and labelled strong (a label that calls everything weak would say so always and score 0 "
        "here). The labels' rule: docs/retrieval.md. Modes the server reported: keyword pass "
        f"{modes['keyword']}, hybrid pass {modes['hybrid']}.",
        "",
        "DevBench column: "
        + (
            f"{db['source']}; {db['questions']} questions of which {db['negatives']} negatives "
            "(its hook figures are the injected top 3, as here; its unanswerable row is its "
            "negatives). DevBench has no chit-chat or cross-project questions."
            if devbench
            else "benchmarks/results/eval.json is missing: run `nox -s eval` first."
        ),
        "",
        "## Per prompt: what went wrong",
        "",
    ]
    by_key = data.by_key
    lines += [
        "The held-out part is reported as the aggregates above only: its per-prompt results are",
        "neither written nor printed, so that nobody tunes on them (benchmarks/precision_eval/README.md).",
        "",
    ]
    for part in ("tuning",):
        lines += [f"### {part}", ""]
        wrong = []
        for p in data.prompts:
            if data.part_of(p.project) != part:
                continue
            got = outcomes[p.id].injected
            if p.kind == "answerable" and not set(p.answers) <= set(got):
                why = f"missed {', '.join(sorted(set(p.answers) - set(got)))}"
            elif p.kind != "answerable" and got:
                why = "injected"
            else:
                continue
            names = (
                "; ".join(f"{k} ({by_key[k].project if k in by_key else '?'})" for k in got)
                or "nothing"
            )
            text = p.text.replace("|", "\\|")
            wrong.append(f"| {p.id} | {p.kind} | {text} | {why} | {names} |")
        lines += ["| prompt | kind | text | | hook injected |", "|---|---|---|---|---|", *wrong, ""]
    if meta["hook_log"]:
        lines += ["## hooks.log", "", "```", meta["hook_log"].rstrip(), "```", ""]
    return "\n".join(lines)
