"""``agentctx consolidate``: the offline consolidation of a project, by hand (SessionEnd runs it too)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Annotated, Any

from cyclopts import Parameter

from agentctx.cli import Json, _err, _json, _out, _project, app
from agentctx.core.project import GLOBAL_PROJECT_ID
from agentctx.store import Store

if TYPE_CHECKING:
    from agentctx.consolidate import Report


@app.command
async def consolidate(
    *,
    project: Annotated[
        str | None, Parameter(help="A project id (default: the project of the current directory).")
    ] = None,
    all_projects: Annotated[
        bool, Parameter(name="--all", negative="", help="Every project in the store.")
    ] = False,
    time_box: Annotated[
        float,
        Parameter(help="Seconds for the costly steps; unfinished work waits for the next run."),
    ] = 60.0,
    json: Json = False,
) -> int:
    """Embed, merge near-duplicates, write retrieval cues, score, rank the digest, check CLAUDE.md
    drift, archive.

    Prints one plain line per project (the global records first), e.g. ``shop: 3 records merged,
    digest rebuilt; CLAUDE.md: 2 decisions missing, 1 stale``; ``--json`` prints the raw reports.

    Example: ``agentctx consolidate``; ``agentctx consolidate --all --time-box 120``.
    """
    from agentctx.consolidate import consolidate_many
    from agentctx.core.errors import ValidationError

    if project and all_projects:
        raise ValidationError("give --project or --all, not both")
    if time_box <= 0:
        raise ValidationError("--time-box must be a positive number of seconds")
    here = _project()
    names: dict[str, str] = {GLOBAL_PROJECT_ID: "global records", here.project_id: here.name}

    def log(line: str) -> None:
        for project_id, name in names.items():  # the library logs id prefixes; people read names
            line = line.replace(f" {project_id[:12]}", f" {name}")
        _err(f"agentctx: {line}")

    async with await Store.open() as store:
        known = await store.projects()
        names.update({str(p["project_id"]): str(p["name"]) for p in known if p["name"]})
        names[GLOBAL_PROJECT_ID] = "global records"
        if all_projects:
            ids = [str(p["project_id"]) for p in known]
        else:
            ids = [project or here.project_id]
        reports = await consolidate_many(store, ids, time_box=time_box, log=log)
    if json:
        _json([r.to_dict() for r in reports])
    else:
        shown = _labels(reports, names)
        store_line = _embedding(reports)
        if store_line:
            _out(f"store: {store_line}")
        for report in reports:
            _out(summary(report, shown[report.project_id]))
    return 1 if any(r.status == "failed" for r in reports) else 0


def _labels(reports: list[Report], names: dict[str, str]) -> dict[str, str]:
    """Each report's project name; a name two projects share gets its id's start."""
    labels = {r.project_id: names.get(r.project_id, r.project_id[:12]) for r in reports}
    counts = Counter(labels.values())
    return {
        pid: (f"{label} ({pid[:8]})" if counts[label] > 1 else label)
        for pid, label in labels.items()
    }


def _embedding(reports: list[Report]) -> str:
    """What the run's embedding step did, for the whole store (it embeds every project's
    records at once, in the first report that ran it); "" when there is nothing to say."""
    for report in reports:
        embed = (report.steps.get("embed") or {}).get("result") or {}
        if not embed:
            continue
        said = []
        if embed.get("embedded"):
            said.append(_count(embed["embedded"], "record") + " embedded")
        if embed.get("model") is None and embed.get("pending"):
            said.append(
                _count(embed["pending"], "record") + " wait for the embedding model (keyword-only)"
            )
        return ", ".join(said)
    return ""


def summary(report: Report, name: str) -> str:
    """One project's run in plain words: what changed, then CLAUDE.md drift, then errors."""
    if report.status == "locked":
        return f"{name}: skipped, another consolidation of it is running"
    steps: dict[str, Any] = {k: v.get("result") for k, v in report.steps.items()}
    done: list[str] = []  # embedding is the store's, not a project's: said once (_embedding)
    dedupe = steps.get("dedupe") or {}
    if dedupe.get("merged"):
        done.append(_count(dedupe["merged"], "record") + " merged")
    cues = steps.get("cues") or {}
    if cues.get("written"):
        done.append(_count(cues["written"], "record") + " given retrieval cues")
    if steps.get("reinforce"):
        done.append(_count(steps["reinforce"], "preference") + " now reinforced")
    digest = steps.get("digest")
    if isinstance(digest, dict):
        done.append(
            "digest rebuilt"
            if digest.get("written")
            else "digest not rebuilt (the project changed meanwhile; the next run does it)"
        )
    archive = steps.get("archive") or {}
    if archive.get("moved"):
        done.append(_count(archive["moved"], "old record") + " archived")
    if archive.get("prune_candidates"):
        done.append(
            _count(archive["prune_candidates"], "prune candidate") + " (see `agentctx status`)"
        )
    team = steps.get("team_export") or {}
    if team.get("written"):
        done.append(f"team file written ({team['written']})")
    parts = [", ".join(done) or "nothing to do"]
    drift = steps.get("drift")
    if isinstance(drift, dict):
        parts.append("CLAUDE.md: " + _drift(drift))
    line = f"{name}: " + "; ".join(parts)
    if report.status == "unfinished":
        line += " (unfinished: the time box ran out; the next run goes on)"
    if report.status == "failed":
        line += " (failed)"
    return "\n".join([line, *(f"  error: {e}" for e in report.errors)])


def _drift(drift: dict[str, Any]) -> str:
    if drift.get("skipped"):
        return f"not checked ({drift['skipped']})"
    if not drift.get("files"):
        return "none found, nothing to compare"
    missing = Counter(str(r["type"]) for r in drift.get("records", []) if r.get("missing"))
    found = [_count(n, kind) for kind, n in sorted(missing.items())]
    stale = len(drift.get("contradictions", []))
    words = [" and ".join(found) + " missing"] if found else ["nothing missing"]
    words.append(f"{stale} stale" if stale else "nothing stale")
    return ", ".join(words)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
