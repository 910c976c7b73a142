"""``agentctx consolidate``: the offline consolidation of a project, by hand (SessionEnd runs it too)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

from cyclopts import Parameter

from agentctx.cli import Json, _json, _out, _project, app
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
    """Embed, merge near-duplicates, score, rank the digest, check CLAUDE.md drift, archive."""
    from agentctx.consolidate import consolidate_many
    from agentctx.core.errors import ValidationError

    if project and all_projects:
        raise ValidationError("give --project or --all, not both")
    if time_box <= 0:
        raise ValidationError("--time-box must be a positive number of seconds")

    def log(line: str) -> None:
        sys.stderr.write(f"agentctx: {line}\n")

    async with await Store.open() as store:
        if all_projects:
            ids = [str(p["project_id"]) for p in await store.projects()]
        else:
            ids = [project or _project().project_id]
        reports = await consolidate_many(store, ids, time_box=time_box, log=log)
    if json:
        _json([r.to_dict() for r in reports])
    else:
        for report in reports:
            _out(_summary(report))
    return 1 if any(r.status == "failed" for r in reports) else 0


def _summary(report: Report) -> str:
    steps: dict[str, Any] = report.steps
    parts = [
        f"{report.project_id[:16]}: {report.status} in {report.elapsed_s:.1f}s ({report.mode})"
    ]
    for name, entry in steps.items():
        result = entry.get("result")
        if isinstance(result, dict):
            shown = ", ".join(
                f"{k} {v}" for k, v in result.items() if isinstance(v, int | float | str) and v
            )
            parts.append(f"  {name}: {shown or 'nothing to do'}")
        elif result is not None:
            parts.append(f"  {name}: {result}")
    parts.extend(f"  error: {error}" for error in report.errors)
    return "\n".join(parts)
