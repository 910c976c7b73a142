"""``agentctx model``: the local embedding model, described and fetched on request."""

from __future__ import annotations

import sys

import anyio
from cyclopts import App

from agentctx import config
from agentctx.cli import Json, _json, _out, app
from agentctx.core.errors import AgentctxError

model_app = App(
    name="model",
    help="The local embedding model of consolidation and hybrid search.\n\n"
    "Example: agentctx model fetch",
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
    from agentctx import embed

    settings = config.load()
    info = embed.model_info(settings)

    def announce(info: embed.ModelInfo) -> None:
        size = f"about {info.size_mb} MB" if info.size_mb else "size unknown"
        sys.stderr.write(f"agentctx: fetching {info.name} ({size}) into {info.folder}\n")

    try:
        loaded = await anyio.to_thread.run_sync(embed.fetch, settings, announce)
    except embed.ModelUnavailable as exc:
        raise AgentctxError(str(exc)) from None
    if json:
        _json({**embed.model_info(settings).to_dict(), "dims": loaded.dims})
    else:
        note = (
            ""
            if settings["embeddings"]
            else " (embeddings are off: `agentctx config set embeddings on`)"
        )
        _out(f"{loaded.name} ready in {info.folder} ({loaded.dims} dimensions){note}")
    return 0
