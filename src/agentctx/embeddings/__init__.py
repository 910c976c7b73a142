"""Embeddings, in one place (ADR-006): the model (:mod:`.models`), the store's vectors
(:mod:`.vecstore`), a change of model (:mod:`.reembed`), cosine thresholds per model (:mod:`.thresholds`,
calibrated by :mod:`.calibrate` from the shipped ``calibration.json``), and the static token-vector
table derived from the model (:mod:`.tokens`).

The parts the hooks need are in the core, standard library only: which model the stored vectors
belong to (:mod:`agentctx.core.vectors`) and a prompt vector from the static table
(:mod:`agentctx.core.static_prompt`). Importing this package imports nothing heavy: numpy and
fastembed come with :mod:`.models`, :mod:`.vecstore` and :mod:`.calibrate` only.
"""
