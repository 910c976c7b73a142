"""The static token-vector table (issue 25, the second way to a prompt vector): derived from the model.

For each wordpiece of the model's vocabulary, the model's own output for that token alone
(``[CLS] token [SEP]``, pooled and normalized as the model pools a text: model2vec's idea, without
its PCA, which would leave the space of the stored record vectors that the prompt vector is compared
with), stored as int8 with a per-token scale (384 bytes a token for MiniLM, 11 MB for its 30,522
tokens), and a weight by smooth inverse frequency (SIF, ``a / (a + p)``) with ``p`` from the token's
rank in the vocabulary (Zipf; BERT's vocabulary lists words roughly by frequency), so that "the",
"how" and punctuation weigh little. The hook side is :mod:`agentctx.core.static_prompt`, standard
library only.

:func:`ensure` derives and stores it once per model, after the model is loaded; never in a hook. It
is not run by consolidation nor by ``agentctx model`` today: measured on the precision eval's tuning
data, the static vector finds the answer in the top 3 for 39% of the prompts, keywords for 88% and
the model's own vector for 97% (docs/retrieval.md, "Two ways to a prompt vector"), so the table
would cost minutes of derivation and 11 MB per store for a way that does not earn its place. A
model whose tokenizer is not WordPiece gets no table (logged).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.core import clock

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from agentctx.embeddings.models import Embedder
    from agentctx.store import Store

log = logging.getLogger("agentctx.embed")

#: SIF's smoothing: a token with a Zipf probability of ``SIF_A`` weighs one half.
SIF_A = 1e-4
BATCH = 512  # tokens per model call (three positions each: cheap)
SPECIAL = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")


@dataclass(frozen=True, slots=True)
class Table:
    """A derived table: the tokens, their int8 vectors with scales, their weights."""

    model: str
    dims: int
    lowercase: bool
    tokens: list[str]
    vectors: NDArray[np.int8]
    scales: NDArray[np.float32]
    weights: NDArray[np.float32]


def derive(embedder: Embedder) -> Table | None:
    """The model's static table (blocking; seconds: one call per :data:`BATCH` tokens); None when
    the model's tokenizer is not a WordPiece one."""
    from fastembed.common.onnx_model import OnnxOutputContext

    inner: Any = embedder.model.model  # fastembed's ONNX text model: its tokenizer and session
    spec = json.loads(inner.tokenizer.to_str())
    if (spec.get("model") or {}).get("type") != "WordPiece" or (spec.get("model") or {}).get(
        "continuing_subword_prefix", "##"
    ) != "##":
        log.warning("no static token table for %s: its tokenizer is not WordPiece", embedder.name)
        return None
    normalizer = spec.get("normalizer") or {}
    lowercase = bool(normalizer.get("lowercase", False))
    vocab: dict[str, int] = inner.tokenizer.get_vocab(with_added_tokens=False)
    cls_id, sep_id = vocab.get("[CLS]"), vocab.get("[SEP]")
    if cls_id is None or sep_id is None:
        log.warning("no static token table for %s: no [CLS]/[SEP] tokens", embedder.name)
        return None
    ordered = sorted(
        (tok, i) for tok, i in vocab.items() if tok not in SPECIAL and not tok.startswith("[unused")
    )
    tokens = [tok for tok, _ in ordered]
    ids = np.asarray([i for _, i in ordered], dtype=np.int64)
    names = {node.name for node in inner.model.get_inputs()}
    rows: list[NDArray[np.float32]] = []
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        input_ids = np.stack(
            [np.full(len(chunk), cls_id), chunk, np.full(len(chunk), sep_id)], axis=1
        ).astype(np.int64)
        mask = np.ones_like(input_ids)
        feed: dict[str, Any] = {"input_ids": input_ids}
        if "attention_mask" in names:
            feed["attention_mask"] = mask
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        with embedder.lock:
            out = inner.model.run(inner.ONNX_OUTPUT_NAMES, feed)[0]
        pooled = inner._post_process_onnx_output(
            OnnxOutputContext(model_output=out, attention_mask=mask, input_ids=input_ids)
        )
        rows.append(np.asarray(list(pooled), dtype=np.float32))
    matrix = np.concatenate(rows)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    scales = np.maximum(np.abs(matrix).max(axis=1), 1e-12) / 127.0
    quantized = np.clip(np.rint(matrix / scales[:, None]), -127, 127).astype(np.int8)
    return Table(
        embedder.name,
        int(matrix.shape[1]),
        lowercase,
        tokens,
        quantized,
        scales.astype(np.float32),
        sif_weights(ids, len(vocab)),
    )


def sif_weights(ids: NDArray[np.int64], size: int) -> NDArray[np.float32]:
    """``a / (a + p)`` with ``p`` Zipf's probability of the token's rank (its id, plus one)."""
    harmonic = float(np.sum(1.0 / np.arange(1, size + 1)))
    p = 1.0 / ((ids.astype(np.float64) + 1.0) * harmonic)
    return np.asarray(SIF_A / (SIF_A + p), dtype=np.float32)


async def current(store: Store, embedder: Embedder) -> bool:
    """True when the store holds ``embedder``'s table."""
    rows = await store.rows("SELECT model, dims FROM token_table WHERE id = 1 AND tokens > 0")
    return bool(rows) and rows[0][0] == embedder.name and int(rows[0][1]) == embedder.dims


async def ensure(store: Store, embedder: Embedder) -> int | None:
    """Derive and store ``embedder``'s table unless the store has it; the number of tokens stored
    now (None: it was there already, or the model has no WordPiece tokenizer)."""
    if await current(store, embedder):
        return None
    table = await anyio.to_thread.run_sync(derive, embedder)
    if table is None:
        return None
    await store_table(store, table)
    return len(table.tokens)


async def store_table(store: Store, table: Table) -> None:
    """Replace the stored table by ``table`` (one transaction)."""
    rows = [
        (tok, float(w), float(s), table.vectors[n].tobytes())
        for n, (tok, w, s) in enumerate(zip(table.tokens, table.weights, table.scales, strict=True))
    ]
    async with store.transaction() as tx:
        await tx.execute("DELETE FROM token_vectors")
        await tx.executemany(
            "INSERT INTO token_vectors(token, weight, scale, vector) VALUES (?, ?, ?, ?)", rows
        )
        await tx.execute(
            "INSERT OR REPLACE INTO token_table(id, model, dims, lowercase, tokens, built_at) "
            "VALUES (1, ?, ?, ?, ?, ?)",
            (table.model, table.dims, int(table.lowercase), len(rows), clock.now()),
        )
