"""Offline consolidation (ADR-005/006/010/012/013): what keeps the store small, current and cheap.

``agentctx consolidate`` and the SessionEnd worker run :func:`consolidate` per project. Steps, in order:

1. **embed** every pending record (one model load per process; keyword-only when there is no model);
2. **dedupe** near-duplicates within each type (``dedupe.py``; Haiku confirms when llm is on);
   then **cues**: Haiku writes retrieval cues for up to 40 current records that have none
   (``cues.py``; only when llm is on, within the time box);
3. **score** the current records (``scoring.py``), then **reinforce** inferred preferences seen in
   enough sessions (``reinforce.py``); with the global scope, **learning**: the injection verdicts
   become demotion priors and calibrated thresholds (``learning.py``, issue 25);
4. **drift**: how far each decision and convention is from the project's CLAUDE.md (``drift.py``);
5. **digest**: rank decisions (``ranking.py``: RRF of keyword and vector rank), then write
   ``digests/<project>.json`` atomically for the SessionStart hook;
6. **archive** long-superseded records and list prune candidates (``archive.py``);
7. **team export** to ``.agentctx/context.md`` when it is on (``team.py``), and the profile mirror.

One consolidation per project at a time: an ``flock`` (:mod:`agentctx.core.locks`) that the kernel drops
when a worker dies. The global scope (developer preferences) is consolidated under its own lock with
the first project of a run. Time box: the costly steps (embedding, near-duplicate checks, drift
embeddings) stop between units of work once it expires and leave the rest for the next run; the cheap
bookkeeping steps (scores, digest, archive, export) always run, they take milliseconds. Crash safety:
every unit of work commits on its own (a record's vector with its cleared flag, one merge, one batch
of scores), so ``kill -9`` anywhere loses at most the unit in flight, and the next run redoes it. A step
that fails is logged and reported; the steps after it still run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from agentctx import config
from agentctx.consolidate.timebox import TimeBox
from agentctx.core import clock, digests
from agentctx.core.locks import ProcessLock
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.retrieval import digest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anthropic import AsyncAnthropic

    from agentctx.embeddings.models import Embedder
    from agentctx.store import Store

DEFAULT_TIME_BOX = 60.0
#: Pending records embedded per transaction-sized unit before the time box is looked at again.
EMBED_CHUNK = 256

__all__ = ["DEFAULT_TIME_BOX", "Report", "TimeBox", "consolidate", "consolidate_many"]


@dataclass(slots=True)
class Report:
    """What one run did for one project (the ``--json`` output of ``agentctx consolidate``)."""

    project_id: str
    status: str = "done"  # done | unfinished | locked | failed
    mode: str = "keyword"  # vectors | keyword (no embedding model)
    elapsed_s: float = 0.0
    steps: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class _Run:
    store: Store
    settings: Mapping[str, Any]
    timebox: TimeBox
    log: Callable[[str], None]
    client: AsyncAnthropic | None
    embedder: Embedder | None = None
    model_tried: bool = False
    calibrated: bool = False  # the model's thresholds calibrated (or found) in this run


async def consolidate_many(
    store: Store,
    project_ids: list[str],
    *,
    time_box: float | None = DEFAULT_TIME_BOX,
    settings: Mapping[str, Any] | None = None,
    client: AsyncAnthropic | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Report]:
    """Consolidate each project in turn within one shared time box (the global scope first).

    ``client`` overrides the Anthropic client (tests point one at a loopback server); without it one
    is made when ``llm`` is on and ``ANTHROPIC_API_KEY`` is set, else merges need no LLM (≥ 0.97).
    """
    values = dict(settings if settings is not None else config.load())
    run = _Run(
        store=store,
        settings=values,
        timebox=TimeBox(time_box),
        log=log or (lambda _line: None),
        client=client if client is not None else _client(values),
    )
    targets = [
        GLOBAL_PROJECT_ID,
        *(p for p in dict.fromkeys(project_ids) if p != GLOBAL_PROJECT_ID),
    ]
    return [await _one(run, project_id) for project_id in targets]


async def consolidate(
    store: Store,
    project_id: str,
    *,
    time_box: float | None = DEFAULT_TIME_BOX,
    settings: Mapping[str, Any] | None = None,
    client: AsyncAnthropic | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Report]:
    """Consolidate one project (and the global scope): the reports, global first."""
    return await consolidate_many(
        store, [project_id], time_box=time_box, settings=settings, client=client, log=log
    )


def _client(settings: Mapping[str, Any]) -> AsyncAnthropic | None:
    if not settings.get("llm", True) or not os.environ.get("ANTHROPIC_API_KEY", "").strip():
        return None
    from agentctx.extract import llm

    return llm.make_client()


async def _one(run: _Run, project_id: str) -> Report:
    report = Report(project_id)
    started = time.monotonic()
    with ProcessLock(f"consolidate-{project_id}") as held:
        if not held:
            report.status = "locked"
            run.log(f"consolidate {project_id[:12]}: another consolidation holds the lock")
            return report
        await _steps(run, project_id, report)
    report.elapsed_s = round(time.monotonic() - started, 3)
    if report.status == "done" and run.timebox.expired():
        report.status = "unfinished"
    if report.errors and report.status == "done":
        report.status = "failed"
    run.log(
        f"consolidate {project_id[:12]}: {report.status} in {report.elapsed_s:.1f}s "
        f"({report.mode}{'; ' + '; '.join(report.errors) if report.errors else ''})"
    )
    return report


async def _steps(run: _Run, project_id: str, report: Report) -> None:
    from agentctx.consolidate import archive, drift, ranking, reinforce, scoring

    store = run.store
    root = await _project_root(store, project_id)
    unlimited = TimeBox(None)
    await _step(report, run, "embed", lambda: _embed(run))
    report.mode = "vectors" if run.embedder is not None else "keyword"
    await _step(report, run, "dedupe", lambda: _dedupe(run, project_id))
    await _step(report, run, "cues", lambda: _cues(run, project_id))
    await _step(
        report, run, "scores", lambda: scoring.rescore(store, project_id, timebox=unlimited)
    )
    threshold = int(run.settings.get("reinforcement_threshold", 3))
    await _step(
        report,
        run,
        "reinforce",
        lambda: reinforce.reinforce_preferences(store, project_id, threshold=threshold),
    )
    if project_id == GLOBAL_PROJECT_ID:  # the store's own: once per run
        await _step(report, run, "learning", lambda: _learning(run))
    if project_id != GLOBAL_PROJECT_ID:
        await _step(
            report,
            run,
            "drift",
            lambda: drift.score_drift(
                store, project_id, root, embedder=run.embedder, timebox=run.timebox
            ),
        )
        drifted = report.steps.get("drift", {}).get("result")
        offer = isinstance(drifted, dict) and drift.sync_offer_due(project_id, drifted)
        await _step(report, run, "digest", lambda: _digest(run, project_id, ranking, offer=offer))
    await _step(
        report, run, "archive", lambda: archive.archive(store, project_id, timebox=unlimited)
    )
    if project_id != GLOBAL_PROJECT_ID:
        await _step(report, run, "team_export", lambda: _team(run, project_id, root))
    else:
        await _step(report, run, "profile_mirror", lambda: _mirror(run))


async def _step(report: Report, run: _Run, name: str, action: Callable[[], Awaitable[Any]]) -> None:
    started = time.monotonic()
    try:
        result = await action()
    except Exception as exc:  # one failed step never stops the others; the next run retries it
        message = f"{name}: {type(exc).__name__}: {exc}"[:400]
        report.errors.append(message)
        run.log(f"consolidate {report.project_id[:12]} {message}")
        return
    entry = _plain(result)
    if isinstance(entry, dict) and entry.get("unfinished"):
        report.status = "unfinished"
    report.steps[name] = {"result": entry, "seconds": round(time.monotonic() - started, 3)}


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    return value


async def _project_root(store: Store, project_id: str) -> str | None:
    row = await store.row("SELECT root FROM projects WHERE project_id = ?", (project_id,))
    root = None if row is None else row[0]
    return str(root) if root else None


async def _embed(run: _Run) -> dict[str, Any]:
    """Embed pending records chunk by chunk until none are left or the time box expires."""
    from agentctx.embeddings import (  # numpy and fastembed: only when a run embeds
        backoff,
        models,
        reembed,
        vecstore,
    )

    if not run.model_tried:
        run.model_tried = True
        run.embedder = await models.load_model_async(run.settings)
        if run.embedder is None:
            name = str(run.settings.get("embedding.model") or models.DEFAULT_MODEL)
            local = bool(run.settings.get("embedding.path"))
            failed = None if local else backoff.waiting(name)
            run.log(
                "embeddings unavailable: keyword-only consolidation "
                + (f"({failed.note()})" if failed else "(retried next run)")
            )
    if run.embedder is None:
        pending = await _pending(run.store)
        return {"embedded": 0, "pending": pending, "model": None}
    # A model change (the settings name another model than the stored vectors') starts the
    # re-embed here: the old vectors go, every record is pending, and the chunks below (this run
    # and the next ones) embed them again.
    prepared = await reembed.prepare(run.store, run.embedder)
    if prepared.action == "switched":
        run.log(
            f"embedding model changed to {prepared.model}: re-embedding {prepared.flagged} records"
        )
    if not run.calibrated:
        run.calibrated = True
        note = await reembed.calibrate(run.embedder)
        if note:
            run.log(note)
    done = 0
    while not run.timebox.expired():
        count = await vecstore.embed_pending(run.store, run.embedder, limit=EMBED_CHUNK)
        done += count
        if count < EMBED_CHUNK:
            break
    pending = await _pending(run.store)
    if not pending:
        await reembed.finish(run.store)
    return {
        "embedded": done,
        "pending": pending,
        "model": run.embedder.name,
        "dims": run.embedder.dims,
        "switched": prepared.to_dict() if prepared.action == "switched" else None,
        "unfinished": pending > 0,
    }


async def _pending(store: Store) -> int:
    row = await store.row("SELECT count(*) FROM records WHERE pending_embedding = 1")
    return int(row[0])


def _llm_model(run: _Run) -> str:
    return str(run.settings.get("llm.model") or "claude-haiku-4-5")


async def _dedupe(run: _Run, project_id: str) -> Any:
    from agentctx.consolidate import dedupe  # it reads stored vectors: no model needed

    return await dedupe.merge_near_duplicates(
        run.store,
        project_id,
        client=run.client,
        model=_llm_model(run),
        timebox=run.timebox,
        log=run.log,
    )


async def _cues(run: _Run, project_id: str) -> Any:
    from agentctx.consolidate import cues

    return await cues.write_cues(
        run.store,
        project_id,
        client=run.client,
        model=_llm_model(run),
        timebox=run.timebox,
        log=run.log,
    )


async def _learning(run: _Run) -> Any:
    from agentctx.consolidate import learning

    return await learning.learn(run.store, run.settings, run.log)


async def _digest(
    run: _Run, project_id: str, ranking: Any, *, offer: bool = False
) -> dict[str, Any]:
    store = run.store
    ranked = await ranking.rank_decisions(store, project_id)
    name_row = await store.row("SELECT name FROM projects WHERE project_id = ?", (project_id,))
    name = str(name_row[0]) if name_row is not None else ""
    started_ns = time.time_ns()
    data = await store.read_sync(
        lambda conn: digest.build(conn, project_id, name, offer_sync=offer)
    )
    path = await anyio.to_thread.run_sync(digests.write, data, clock.now(), started_ns)
    if offer and path is not None and "agentctx sync --apply" in data["text"]:
        from agentctx.consolidate import drift

        await anyio.to_thread.run_sync(drift.mark_sync_offered, project_id)
    return {
        "ranked": len(ranked),
        "tokens": data["tokens"],
        "records": len(data["ids"]),
        "written": path is not None,
    }


async def _team(run: _Run, project_id: str, root: str | None) -> dict[str, Any]:
    if root is None:
        return {"written": None}
    from agentctx import team
    from agentctx.core.project import identify

    # a stored root is only a write target when that folder is this project's checkout today
    # (a root that came with imported data, or a folder since reused, is not: docs/security.md)
    if identify(root).project_id != project_id:
        return {"written": None, "skipped": f"{root} is not this project's folder"}

    return {"written": await team.export_team(run.store, project_id, root, settings=run.settings)}


async def _mirror(run: _Run) -> dict[str, Any]:
    from agentctx import preferences

    await preferences.sync_mirror(run.store)
    return {"written": True}
