"""Background work, also runnable by hand: ``extract`` and the hooks' ``worker`` entry points."""

from __future__ import annotations

from typing import Annotated

import anyio
from cyclopts import App, Parameter

from agentctx.cli import Json, _json, _out, app
from agentctx.core.errors import ConfigError, ValidationError
from agentctx.store import Store

worker_app = App(
    name="worker",
    help="Entry points of the detached workers the hooks start.\n\nExample: agentctx worker sweep",
    show=False,
)
app.command(worker_app)


@app.command
async def extract(
    *,
    session_id: str,
    transcript: Annotated[
        str | None,
        Parameter(
            help="The transcript file (default: from the session, or ~/.claude/projects/*/<id>.jsonl)."
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        Parameter(
            negative="", help="Show what would be sent (redacted) and its size; send nothing."
        ),
    ] = False,
    no_llm: Annotated[
        bool,
        Parameter(
            negative="",
            help="Deterministic capture only, for this run: the transcript's tool calls through "
            "the capture hook's rules (files, test outcomes, git operations); no model is called.",
        ),
    ] = False,
    json: Json = False,
) -> int:
    """Extract records from a session transcript with Claude Haiku (incremental, one at a time).

    Example: ``agentctx extract --session-id 7f3c… --dry-run``; ``agentctx extract --session-id
    7f3c… --no-llm`` (no model).
    """
    from agentctx.extract import extract_session
    from agentctx.workers import log

    if no_llm:
        if dry_run:
            raise ValidationError("--dry-run shows what a model would be sent; --no-llm sends none")
        return await _replay(session_id, transcript, json)
    if not dry_run:
        missing = await anyio.to_thread.run_sync(_missing_backend)
        if missing:  # before the store opens: nothing is created in an empty home
            raise ConfigError(missing)
    async with await Store.open() as store:
        report = await extract_session(
            store, session_id, transcript=transcript, dry_run=dry_run, log=log
        )
    if json:
        _json(report.to_dict())
    elif report.prompt is not None:
        _out(f"tier {report.tier}, ~{report.tokens_estimated} tokens, {len(report.prompt)} call(s)")
        for index, message in enumerate(report.prompt, start=1):
            _out(f"\n===== call {index} =====\n{message}")
    else:
        _out(
            f"{report.status}: {sum(report.written.values())} records written "
            f"{report.written or ''}, {report.reinforced} reinforced, {report.calls} call(s)"
            + (f" through {report.backend}" if report.backend else "")
            + f", ${report.cost_usd:.4f}"
        )
        if report.error:
            _out(f"error: {report.error}")
    return 1 if report.status in ("failed", "no_transcript") else 0


def _missing_backend() -> str:
    """Why no extraction can run here (``llm`` off, no backend), or "" when a backend runs."""
    from agentctx import config
    from agentctx.core import backend

    settings = config.load()
    if not settings["llm"]:
        return "no extraction: llm is off (`agentctx config set llm on`); nothing was done"
    choice = backend.resolve(str(settings["extraction.backend"]), True)
    if choice.backend is not None:
        return ""
    fix = (
        "`agentctx config set extraction.backend auto`"
        if choice.configured == backend.OFF
        else "export ANTHROPIC_API_KEY=…, or sign in to Claude Code (`claude login`)"
    )
    return f"no extraction backend: {choice.reason}; {fix} (nothing was done)"


async def _replay(session_id: str, transcript: str | None, as_json: bool) -> int:
    from agentctx.extract.replay import replay_session
    from agentctx.workers import log

    async with await Store.open() as store:
        report = await replay_session(store, session_id, transcript=transcript, log=log)
    if as_json:
        _json(report.to_dict())
    elif report.status == "no_transcript":
        _out(f"no_transcript: {report.error}")
    else:
        seen = ", ".join(f"{n} {kind}" for kind, n in sorted(report.observed.items()))
        _out(
            f"replayed {report.tool_calls} tool call(s) without a model: "
            f"{report.written} observation(s) written"
            + (f" ({seen})" if seen else "")
            + (f", {report.already_captured} already captured" if report.already_captured else "")
        )
    return 1 if report.status == "no_transcript" else 0


@worker_app.command(name="session-end")
async def worker_session_end(
    *,
    project: str,
    session_id: str | None = None,
    transcript: str | None = None,
    no_extract: Annotated[bool, Parameter(negative="")] = False,
    deadline: float | None = None,
) -> int:
    """Final extraction of a session, then consolidation (started detached by SessionEnd).

    ``--deadline``: seconds before the worker gives up (default ``EXTRACTION_DEADLINE_S``, or
    ``WORKER_DEADLINE_S`` with ``--no-extract``).

    Example: ``agentctx worker session-end --project 4b1e…``.
    """
    from agentctx.workers import (
        EXTRACTION_DEADLINE_S,
        WORKER_DEADLINE_S,
        give_up_after,
        session_end,
    )

    default = WORKER_DEADLINE_S if no_extract or not session_id else EXTRACTION_DEADLINE_S
    ends = give_up_after(deadline or default, f"session-end worker {session_id or ''}")
    await session_end(
        session_id, transcript or None, project, extract=not no_extract, deadline=ends
    )
    return 0


@worker_app.command(name="team-sync")
async def worker_team_sync(*, deadline: float | None = None) -> int:
    """Sync every linked project with its team hub (started detached by SessionStart when the
    last sync is older than a few minutes; backs off after failures).

    Example: ``agentctx worker team-sync``.
    """
    from agentctx.store import Store
    from agentctx.workers import WORKER_DEADLINE_S, give_up_after, team_sync

    ends = give_up_after(deadline or WORKER_DEADLINE_S, "team-sync worker")
    async with await Store.open() as store:
        await team_sync(store, deadline=ends)
    return 0


@worker_app.command(name="sweep")
async def worker_sweep() -> int:
    """Extract idle sessions with an unextracted tail (started detached by SessionStart).

    Example: ``agentctx worker sweep``.
    """
    from agentctx.workers import EXTRACTION_DEADLINE_S, give_up_after, sweep

    give_up_after(EXTRACTION_DEADLINE_S, "sweep worker")
    await sweep()
    return 0


@worker_app.command(name="profile")
async def worker_profile(*, cwd: str, deadline: float | None = None) -> int:
    """Detect the project profile of the checkout at ``--cwd`` and record what changed (started
    detached by SessionStart and CwdChanged when its manifest files changed).

    Example: ``agentctx worker profile --cwd ~/src/app``.
    """
    from agentctx.workers import WORKER_DEADLINE_S, give_up_after, profile

    give_up_after(deadline or WORKER_DEADLINE_S, "profile worker")
    await profile(cwd)
    return 0


@worker_app.command(name="extract")
async def worker_extract(
    *, session_id: str, transcript: str | None = None, deadline: float | None = None
) -> int:
    """An extraction of a session as the Stop hook starts it, then the verdicts of its
    injections: detached, with a deadline.

    Example: ``agentctx worker extract --session-id 7f3c…``.
    """
    from agentctx.extract import extract_session
    from agentctx.workers import (
        EXTRACTION_DEADLINE_S,
        NOT_JUDGED_AFTER,
        give_up_after,
        judge,
        log,
    )

    give_up_after(deadline or EXTRACTION_DEADLINE_S, f"extract worker {session_id}")
    async with await Store.open() as store:
        report = await extract_session(store, session_id, transcript=transcript, log=log)
        log(f"extract {session_id}: {report.status} {report.written or ''}".rstrip())
        if report.status not in NOT_JUDGED_AFTER:
            await judge(store, session_id, transcript)  # the injections' verdicts: one call
    return 1 if report.status in ("failed", "no_transcript") else 0
