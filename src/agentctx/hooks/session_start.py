"""SessionStart: inject the project's pre-computed digest (hard cap 1,500 tokens).

The fast path reads ``digests/<project>.json`` and imports neither SQLite nor ``json``. When the file
is missing or corrupt (first session, or a write made it stale) the digest is built from the store
within the same budget and saved for the next session. The file holds the digest in parts; this
session's checkout (worktree) picks its own handover, else the legacy one (:func:`digests.assemble`).
"""

from __future__ import annotations

import os
import time

from agentctx.core import digests, home
from agentctx.core.ledger import Ledger
from agentctx.core.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.shapes import Digest
    from agentctx.hooks.runner import HookContext


def handle(ctx: HookContext) -> str | None:
    """The digest text, or None when the store knows nothing of this project; starts the
    idle-session sweep now and then (:func:`maybe_sweep`), and the team hub sync when it is due
    (:func:`maybe_hub_sync`), and the profile detection when the manifests changed
    (:func:`maybe_profile`)."""
    try:
        maybe_sweep(ctx)
    except Exception as exc:  # the digest comes first
        ctx.log(f"sweep not started: {type(exc).__name__}: {exc}")
    try:
        maybe_hub_sync(ctx)
    except Exception as exc:
        ctx.log(f"team sync not started: {type(exc).__name__}: {exc}")
    try:
        maybe_profile(ctx)
    except Exception as exc:
        ctx.log(f"profile detection not started: {type(exc).__name__}: {exc}")
    project = ctx.project
    data = digests.read(project.project_id) or _build(ctx)
    if data is None:
        whole, ids = _pinned_only(ctx)
    else:
        whole, ids = digests.assemble(data["parts"], project.checkout)
    # the digest file's text fits its caps (digest.build cut it): one estimate, for the ledger too
    tokens = estimate_tokens(whole)
    if tokens <= digests.MAX_TOKENS and len(whole) <= digests.MAX_CHARS:
        text = whole
    else:  # cut again here (a hand-edited file): keep the ids whose handles are still visible
        from agentctx.core.handles import handle

        text = truncate_to_tokens(whole, digests.MAX_TOKENS, digests.MAX_CHARS)
        tokens = estimate_tokens(text)
        ids = [i for i in ids if handle(i) in text]
    if not text.strip():
        return None
    if ctx.session_id:
        with Ledger(ctx.session_id) as ledger:
            ledger.append(
                {
                    "event": ctx.event,
                    "ids": ids,
                    "tokens": tokens,
                    "project_id": project.project_id,
                    "cwd": ctx.cwd,
                    "transcript_path": ctx.text("transcript_path"),
                    "source": ctx.text("source"),
                }
            )
    return text


def _pinned_only(ctx: HookContext) -> tuple[str, list[str]]:
    """No digest and none can be built: the last rung, the pinned records as last saved
    (:mod:`agentctx.core.pinned`), under a note that says so."""
    from agentctx.core import pinned
    from agentctx.core.inject import render

    text, ids = render(pinned.fallback(None, ctx.project.project_id, (), ctx.log))
    if not text:
        return "", []
    ctx.log("no digest and the store cannot be read: pinned records only")
    return f"{pinned.NOTE}\n{text}", ids


#: SessionStart looks for idle sessions to sweep (``agentctx worker sweep``) at most this often.
SWEEP_EVERY_S = 15 * 60
SWEEP_STAMP = "sweep.stamp"


def maybe_sweep(ctx: HookContext) -> None:
    """Start the idle-session sweep (:func:`agentctx.workers.sweep`) when no look happened within
    :data:`SWEEP_EVERY_S` (the stamp file's time says), an extraction backend may run and a session
    has an idle unextracted tail. One stat on most starts."""
    from agentctx.core import nofollow

    stamp = os.path.join(home.home_dir(), SWEEP_STAMP)
    last = nofollow.mtime(stamp)  # a symlink there is no stamp: the touch below refuses it
    if last is not None and time.time() - last < SWEEP_EVERY_S:
        return
    if last is None and not os.path.exists(home.db_path()):
        return  # no store: nothing to sweep
    try:  # first: the rest runs at most once per SWEEP_EVERY_S, whatever it finds
        nofollow.touch(stamp)
    except OSError as exc:
        ctx.log(f"cannot write {stamp} ({exc}); no sweep")
        return
    from agentctx.hooks import lifecycle

    if not lifecycle.extraction_enabled(ctx, quiet=True):
        return
    from agentctx.core import clock, sessions
    from agentctx.core.connect import open_db, release
    from agentctx.core.plan import run

    conn = open_db(ctx.log)
    if conn is None:
        return
    try:
        found = run(conn, sessions.idle_unextracted(clock.days_ago(sessions.SWEEP_DAYS), 1000))
    finally:
        release(conn)
    if sessions.idle_tails(found, time.time()):
        lifecycle.start_worker(ctx, ["worker", "sweep"])


def maybe_hub_sync(ctx: HookContext) -> None:
    """Start ``agentctx worker team-sync`` detached when a project of this home is linked to a
    team hub and the last sync was tried :data:`agentctx.core.hubstamp.SYNC_EVERY_S` ago or more.

    One ``stat`` of the stamp file: no connection and no hub client here (docs/team-hub.md).
    """
    from agentctx.core import hubstamp

    if not hubstamp.due():
        return
    hubstamp.touch()  # first: one start per period, however many sessions start
    from agentctx.hooks import lifecycle

    lifecycle.start_worker(ctx, ["worker", "team-sync"])


def maybe_profile(ctx: HookContext, cwd: str | None = None) -> None:
    """Start ``agentctx worker profile`` detached when the checkout's manifest files changed since
    the project's profile was last detected, or it never was (:func:`agentctx.core.manifests.due`).

    One listing of the checkout's top folder and one small file read: the detection itself (parsing the
    manifests, writing the facts) is the worker's, and the digest shows its facts from the next
    session on (a profile write invalidates the digest file).
    """
    from agentctx.core import manifests

    if cwd is None:
        project = ctx.project
    else:
        from agentctx.core.project import identify

        project = identify(cwd)
    signature = manifests.due(project.project_id, project.checkout)
    if signature is None:
        return
    manifests.claim(project.project_id, signature)  # first: one worker, however many hooks
    from agentctx.hooks import lifecycle

    lifecycle.start_worker(ctx, ["worker", "profile", "--cwd", project.checkout])


def _build(ctx: HookContext) -> Digest | None:
    from agentctx.core import clock
    from agentctx.core.connect import open_db, release
    from agentctx.retrieval import digest

    started_ns = time.time_ns()
    conn = open_db(ctx.log)
    if conn is None:
        return None
    try:
        data = digest.build(conn, ctx.project.project_id, ctx.project.name, ctx.project.checkout)
    except Exception as exc:  # the store cannot be read: the pinned rung
        ctx.log(f"digest not built ({type(exc).__name__}: {exc})")
        return None
    finally:
        release(conn)
    try:
        digests.write(data, clock.now(), started_ns)
    except OSError as exc:
        ctx.log(f"could not save the digest: {exc}")
    return data
