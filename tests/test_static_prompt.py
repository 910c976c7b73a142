"""The static token-vector table: derived from the real offline MiniLM, stored in a real store,
read by the hook-side module (standard library and the SQLite driver only) with sqlite-vec."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import numpy as np
import pytest
from tokenizers import Tokenizer

from agentctx.core import db, static_prompt
from agentctx.embeddings import models, tokens, vecstore
from tests.helpers import FORBIDDEN, add_texts

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

pytestmark = pytest.mark.anyio

PROMPTS = [
    "how do we run background jobs here, still celery?",
    "sqlalchemy.exc.MissingGreenlet: greenlet_spawn has not been called; can't call await_only()",
    "Stripe webhook keeps failing with SignatureVerificationError — no signatures found!!",
    "Café naïve résumé: ÜBER-long_identifier_name_with_underscores and camelCaseWords",
    "pytest -n 2 -q tests/test_x.py::test_y[param-1] → 3 failed",
    "日本語のテキスト and émojis 🎉 mixed with code `x = f(y)`",
]
#: Longer than static_prompt.MAX_WORD: one unknown token there (the model splits it into pieces).
LONG_WORD = "supercalifragilisticexpialidociousandmuchlongerthanthirtytwocharacters"

TEXTS = [
    (
        "decision",
        "Background jobs run on arq",
        "We replaced Celery with arq for background jobs and cron",
    ),
    ("convention", "Format with ruff", "Format Python code with ruff format before every commit"),
    ("bugfix", "Stripe webhook signature", "Webhook signature failed: verify against the raw body"),
    ("discovery", "Slow CI", "CI is slow because the Docker layer cache is disabled on forks"),
    ("preference", "Short answers", "The developer prefers short answers without preamble"),
]


def test_the_pure_python_wordpiece_splits_as_the_models_tokenizer(minilm_dir: Path) -> None:
    real = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    real.no_padding()
    real.no_truncation()
    vocab = set(real.get_vocab())
    for text in PROMPTS:
        ours = [
            piece
            for word in static_prompt.basic_tokens(text)
            for piece in static_prompt.wordpiece(word, vocab)
        ]
        theirs = real.encode(text, add_special_tokens=False).tokens
        assert ours == theirs, text
    assert static_prompt.wordpiece(LONG_WORD, vocab) == ["[UNK]"]
    assert len(real.encode(LONG_WORD, add_special_tokens=False).tokens) > 1


@pytest.fixture(scope="module")
def table(embedder: models.Embedder) -> tokens.Table:
    """MiniLM's table, derived once for the module (a minute or more on a loaded machine)."""
    derived = tokens.derive(embedder)
    assert derived is not None
    return derived


async def _embedded_store(
    store: Store, embedder: models.Embedder, table: tokens.Table | None = None
) -> list[str]:
    ids = await add_texts(store, TEXTS, project_id="p1")
    await add_texts(
        store, [("decision", "Jobs on Sidekiq", "Background jobs run on Sidekiq")], "p2"
    )
    await vecstore.embed_pending(store, embedder)
    if table is not None:
        await tokens.store_table(store, table)
    return ids


async def test_the_table_is_derived_once_and_finds_the_answer(
    store: Store, embedder: models.Embedder, table: tokens.Table
) -> None:
    assert len(table.tokens) > 20000 and table.dims == embedder.dims and table.lowercase
    ids = await _embedded_store(store, embedder, table)
    assert await tokens.current(store, embedder)
    assert await tokens.ensure(store, embedder) is None  # there already: not derived again
    conn, _caps = db.connect(store.path, load_vec=False)  # as the hook opens it
    try:
        found = static_prompt.candidates(
            conn, "how do we run background jobs, still celery?", "p1", 3
        )
        assert found is not None and found[0][0] == ids[0]
        assert all(rid in ids for rid, _ in found)  # never the other project's record
        found = static_prompt.candidates(conn, "stripe webhook signature check fails", "p1", 1)
        assert found is not None and [rid for rid, _ in found] == [ids[2]]
        assert static_prompt.candidates(conn, "   ", "p1", 3) is None  # no word: no answer
    finally:
        conn.close()


async def test_the_static_vector_is_a_unit_vector_of_the_models_size(
    store: Store, embedder: models.Embedder, table: tokens.Table
) -> None:
    """How near it lies to the model's own vector is measured, not asserted: 0.35 and 0.14 for the
    first two prompts here, and the quality figures in docs/retrieval.md."""
    await _embedded_store(store, embedder, table)
    conn, _caps = db.connect(store.path, load_vec=False)
    try:
        for text in PROMPTS:
            static = static_prompt.prompt_vector(conn, text, dims=embedder.dims)
            assert static is not None and len(static) == embedder.dims
            assert abs(sum(x * x for x in static) - 1.0) < 1e-6
        assert static_prompt.prompt_vector(conn, "@@@ ###", dims=embedder.dims) is not None
        assert static_prompt.prompt_vector(conn, "", dims=embedder.dims) is None
    finally:
        conn.close()


async def test_superseded_records_are_never_candidates(
    store: Store, embedder: models.Embedder, table: tokens.Table
) -> None:
    ids = await _embedded_store(store, embedder, table)
    await store.supersede(
        ids[0], "Dramatiq runs our background jobs now", "arq died", title="Jobs on Dramatiq"
    )
    await vecstore.embed_pending(store, embedder)
    conn, _caps = db.connect(store.path, load_vec=False)
    try:
        found = static_prompt.candidates(conn, "how do we run background jobs?", "p1", 5)
        assert found is not None and ids[0] not in [rid for rid, _ in found]
    finally:
        conn.close()


async def test_a_table_of_another_model_or_none_gives_no_answer(
    store: Store, embedder: models.Embedder, table: tokens.Table
) -> None:
    await _embedded_store(store, embedder)
    conn, _caps = db.connect(store.path, load_vec=False)
    try:
        assert static_prompt.candidates(conn, "background jobs", "p1", 3) is None  # no table yet
        await tokens.store_table(store, table)
        assert static_prompt.candidates(conn, "background jobs", "p1", 3)
        async with store.transaction() as tx:  # the stored vectors now belong to another model
            await tx.execute("UPDATE embedding_model SET model = 'other/model' WHERE id = 1")
        assert static_prompt.candidates(conn, "background jobs", "p1", 3) is None
    finally:
        conn.close()


def test_the_hook_side_imports_nothing_heavy() -> None:
    code = (
        "import sys; from agentctx.core import static_prompt; "
        "print(' '.join(sorted(m for m in sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    assert not {m for m in loaded if m.split(".")[0] in FORBIDDEN}
    assert not {"re", "json", "typing", "sqlite_vec"} & set(loaded)


def test_the_model_embeds_at_most_128_tokens(embedder: models.Embedder) -> None:
    assert embedder.model.model.tokenizer.truncation["max_length"] == models.MAX_TOKENS == 128
    head = " ".join(f"word{n}" for n in range(200))  # far more than 128 tokens
    a, b = embedder.embed_sync([head + " about databases", head + " about the weather in spring"])
    assert float(np.dot(a, b)) > 0.9999  # what differs lies past the cap
