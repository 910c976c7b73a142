"""``agentctx model``: the local embedding model, described and fetched on request."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from cyclopts import App, Parameter

from agentctx import config
from agentctx.cli import Json, _json, _out, _with_store, app
from agentctx.core.errors import AgentctxError, ValidationError

if TYPE_CHECKING:
    from agentctx.embeddings.models import Embedder
    from agentctx.store import Store

model_app = App(
    name="model",
    help="The local embedding model of consolidation and hybrid search.\n\n"
    "Example: agentctx model fetch; agentctx model reembed (after `config set embedding.model`)",
)
app.command(model_app)


@model_app.command(name="fetch")
async def model_fetch(*, json: Json = False) -> int:
    """Download the configured embedding model now, with a progress bar, and check that it loads.

    Otherwise it is fetched at the first consolidation or hybrid search. A model already downloaded,
    or a local folder (``embedding.path``), is only loaded. Without network it fails in one line,
    and search stays keyword-only.

    Example: ``agentctx model fetch``
    """
    from agentctx.embeddings import models

    settings = config.load()
    info = models.model_info(settings)
    loaded = await fetch_model(settings)
    if json:
        _json({**models.model_info(settings).to_dict(), "dims": loaded.dims})
    else:
        note = (
            ""
            if settings["embeddings"]
            else " (embeddings are off: `agentctx config set embeddings on`)"
        )
        _out(f"{loaded.name} ready in {info.folder} ({loaded.dims} dimensions){note}")
    return 0


async def fetch_model(settings: dict[str, Any]) -> Embedder:
    """The configured model, downloaded first when needed (saying so on stderr)."""
    from agentctx.embeddings import models

    def announce(info: models.ModelInfo) -> None:
        size = f"about {info.size_mb} MB" if info.size_mb else "size unknown"
        sys.stderr.write(f"agentctx: fetching {info.name} ({size}) into {info.folder}\n")

    try:
        return await anyio.to_thread.run_sync(models.fetch, settings, announce)
    except models.ModelUnavailable as exc:
        raise AgentctxError(str(exc)) from None


_BATCH_HELP = "Records embedded and committed together (a kill loses at most one batch's work)."


@model_app.command(name="reembed")
async def model_reembed(
    *,
    batch: Annotated[int, Parameter(name="--batch", help=_BATCH_HELP)] = 64,
    json: Json = False,
) -> int:
    """Embed every record with the configured model now, with progress on stderr.

    After ``agentctx config set embedding.model NAME`` the stored vectors belong to the old
    model: this drops them, sizes the vector table for the new model's dimension and embeds
    every record again, batch by batch. Interrupted (or killed), it resumes where it stopped
    when run again; the next consolidation carries on too. Meanwhile search is hybrid over the
    records already re-embedded and keyword-only for the rest. With the model unchanged it only
    embeds the records still pending. The model is downloaded first if needed (as ``model
    fetch``). A model without measured cosine thresholds gets them calibrated once, from the
    calibration set shipped with agentctx (docs/retrieval.md, "Thresholds per model").

    Example: ``agentctx config set embedding.model google/embeddinggemma-300m`` then
    ``agentctx model reembed``
    """
    from agentctx.embeddings import reembed, vecstore

    if batch < 1:
        raise ValidationError(f"--batch takes a number of at least 1 (got {batch})")
    settings = config.load()
    if not settings["embeddings"]:
        raise AgentctxError("embeddings are off: `agentctx config set embeddings on` first")
    loaded = await fetch_model(settings)

    async def action(store: Store) -> int:
        prepared = await reembed.prepare(store, loaded)
        if prepared.action == "switched":
            was = prepared.before_model or "an unrecorded model"
            sys.stderr.write(
                f"agentctx: vectors of {was} ({prepared.before_dims} dimensions) dropped; "
                f"re-embedding {prepared.flagged} records with {loaded.name} "
                f"({loaded.dims} dimensions)\n"
            )
        state = await reembed.status(store)
        total = state.pending
        done = 0
        tty = sys.stderr.isatty()
        while True:
            count = await vecstore.embed_pending(store, loaded, limit=batch)
            if not count:
                break
            done += count
            line = f"agentctx: embedded {done}/{total} records"
            sys.stderr.write(f"\r{line}" if tty else f"{line}\n")
            sys.stderr.flush()
        if tty and done:
            sys.stderr.write("\n")
        await reembed.finish(store)
        state = await reembed.status(store)
        note = await reembed.calibrate(loaded)
        if note:
            sys.stderr.write(f"agentctx: {note}\n")
        if json:
            _json(
                {
                    "prepared": prepared.to_dict(),
                    "embedded": done,
                    "vectors": state.to_dict(),
                }
            )
        else:
            left = f"; {state.pending} still pending" if state.pending else ""
            _out(
                f"{state.embedded} records have vectors of {loaded.name} "
                f"({loaded.dims} dimensions); {done} embedded now{left}"
            )
        return 0

    return await _with_store(action)
