"""Embeddings, in one place (ADR-006): the model (:mod:`.models`), the store's vectors
(:mod:`.vecstore`), a change of model (:mod:`.reembed`), cosine thresholds per model (:mod:`.thresholds`,
calibrated by :mod:`.calibrate` from the shipped ``calibration.json``). The prompt hook's
meaning comes from the MCP server's warm model (:mod:`agentctx.mcp.lend`); a static token-vector
table was measured and lost (docs/retrieval.md, "Two ways to a prompt vector").

The part the hooks need is in the core, standard library only: which model the stored vectors
belong to (:mod:`agentctx.core.vectors`). Importing this package imports nothing heavy: numpy and
fastembed come with :mod:`.models`, :mod:`.vecstore` and :mod:`.calibrate` only.
"""
