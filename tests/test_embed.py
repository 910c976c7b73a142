"""Embeddings: the real offline all-MiniLM-L6-v2, real SQLite, sqlite-vec and the numpy fallback."""

from __future__ import annotations

import copy
import logging
import threading
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest

from agentctx.core import db
from agentctx.embeddings import models, vecstore
from agentctx.store import Store
from tests import minilm
from tests.helpers import add_texts, new_record

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

REST = "We moved from REST to gRPC for internal services"
GRPC = "Internal services now talk gRPC instead of REST"
ARROW = "Always use arrow functions in TypeScript"

TEXTS = [
    ("decision", "gRPC for internal services", REST),
    ("decision", "Internal RPC protocol", GRPC),
    ("convention", "Arrow functions", ARROW),
    ("convention", "Python formatting", "Format Python code with ruff format before every commit"),
    ("bugfix", "Flaky login test", "The login test failed because of a race in the session cache"),
    ("discovery", "Slow CI", "CI is slow because the Docker layer cache is disabled on forks"),
    ("preference", "Short answers", "The developer prefers short answers without preamble"),
    ("decision", "Postgres for analytics", "Analytics events go to Postgres, not to Elasticsearch"),
]


async def _fill(store: Store, texts: list[tuple[str, str, str]] = TEXTS) -> list[str]:
    return await add_texts(store, texts)


async def _pending(store: Store) -> int:
    async with store.transaction() as tx:
        rows = await tx.rows("SELECT count(*) FROM records WHERE pending_embedding = 1")
    return int(rows[0][0])


async def test_paraphrases_are_closer_than_unrelated_texts(embedder: models.Embedder) -> None:
    assert embedder.dims == 384
    assert embedder.query_prefix == ""  # MiniLM has no query prefix; bge does
    vectors = await embedder.embed([REST, GRPC, ARROW])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    paraphrase = float(vectors[0] @ vectors[1])
    unrelated = float(vectors[0] @ vectors[2])
    assert paraphrase > 0.7 > 0.2 > unrelated
    query = await embedder.embed_query("which protocol do internal services use?")
    assert float(query @ vectors[1]) > float(query @ vectors[2])


def test_record_text_shape() -> None:
    record = (
        new_record(type="decision", title="Use gRPC", body=REST, project_id="p1")
        .validated()
        .to_record("01ID", "2026-11-29T10:00:00.000Z")
    )
    text = vecstore.record_text(record, "shop")
    assert text.startswith("[decision] [")
    assert text.endswith("] [shop] Use gRPC — " + REST)
    assert vecstore.record_text(record).count("[p1]") == 1


async def test_embed_pending_embeds_everything_and_clears_flags(
    store: Store, embedder: models.Embedder
) -> None:
    assert vecstore.uses_vec(store)
    ids = await _fill(store)
    assert await _pending(store) == len(ids)
    assert await vecstore.embed_pending(store, embedder, limit=3) == 3
    assert await _pending(store) == len(ids) - 3
    assert await vecstore.embed_pending(store, embedder) == len(ids) - 3
    assert await _pending(store) == 0
    assert await vecstore.embed_pending(store, embedder) == 0  # nothing left: nothing embedded
    async with store.transaction() as tx:
        rows = await tx.rows("SELECT record_id FROM records_vec")
    assert sorted(r[0] for r in rows) == sorted(ids)
    # an edit re-flags the record, and the next run embeds it again
    async with store.transaction() as tx:
        await tx.update_body(ids[0], "We moved from REST to gRPC for every internal service")
    assert await _pending(store) == 1
    assert await vecstore.embed_pending(store, embedder) == 1
    assert await _pending(store) == 0


async def test_current_versions_are_embedded_before_superseded_ones(
    store: Store, embedder: models.Embedder
) -> None:
    ids = await _fill(store)
    older = ids[:5]  # written first, then superseded (as a new member's pulled history is)
    async with store.transaction() as tx:
        for record_id in older:
            await tx.execute(
                "UPDATE records SET superseded_at = '2026-11-29T10:00:00.000Z' WHERE id = ?",
                (record_id,),
            )

    async def embedded() -> set[str]:
        rows = await store.rows("SELECT record_id FROM records_vec")
        return {str(r[0]) for r in rows}

    current = set(ids) - set(older)
    assert await vecstore.embed_pending(store, embedder, limit=2) == 2
    assert await embedded() < current  # the current ones first, though written last
    assert await vecstore.embed_pending(store, embedder, limit=1) == 1
    assert await embedded() == current
    assert await vecstore.embed_pending(store, embedder, limit=2) == 2
    assert await embedded() - current == set(older[:2])  # then the superseded, in write order
    assert await vecstore.embed_pending(store, embedder) == 3
    assert await embedded() == set(ids)


async def test_vec0_and_numpy_give_the_same_neighbours(
    tmp_path: Path, embedder: models.Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await Store.open(str(tmp_path / "vec.db")) as vec_store:
        assert vecstore.uses_vec(vec_store)
        vec_ids = await _fill(vec_store)
        await vecstore.embed_pending(vec_store, embedder)
        query = await embedder.embed_query("internal service protocol")
        vec_hits = await vecstore.nearest(vec_store, query, 5)
        vec_excl = await vecstore.nearest(vec_store, query, 3, exclude={vec_ids[1]})

    def refuse(conn: Any, caps: db.Capabilities) -> None:
        caps.vec_error = "sqlite-vec disabled by the test"

    load_vec = db._load_vec
    monkeypatch.setattr(db, "_load_vec", refuse)
    async with await Store.open(str(tmp_path / "blob.db")) as blob_store:
        assert not vecstore.uses_vec(blob_store)
        with pytest.raises(Exception, match="no such function"):
            await blob_store.rows("SELECT vec_version()")  # really no sqlite-vec here
        assert await vecstore.nearest(blob_store, query, 5) == []  # nothing embedded yet
        blob_ids = await _fill(blob_store)
        assert await vecstore.embed_pending(blob_store, embedder) == len(blob_ids)
        assert await _pending(blob_store) == 0
        blob_hits = await vecstore.nearest(blob_store, query, 5)
        blob_excl = await vecstore.nearest(blob_store, query, 3, exclude={blob_ids[1]})

    # the fallback store opened again with sqlite-vec: its vectors move into records_vec
    monkeypatch.setattr(db, "_load_vec", load_vec)
    async with await Store.open(str(tmp_path / "blob.db")) as reopened:
        assert vecstore.uses_vec(reopened)
        assert await vecstore.nearest(reopened, query, 5) == []  # records_vec is new and empty
        assert await vecstore.embed_pending(reopened, embedder) == 0  # nothing was pending
        moved_hits = await vecstore.nearest(reopened, query, 5)
    assert [r for r, _ in moved_hits] == [r for r, _ in blob_hits]
    assert np.allclose([s for _, s in moved_hits], [s for _, s in blob_hits], atol=1e-5)

    # the two stores hold the same texts in the same order under different ids
    to_index = {rid: i for i, rid in enumerate(vec_ids)} | {
        rid: i for i, rid in enumerate(blob_ids)
    }
    for a, b in ((vec_hits, blob_hits), (vec_excl, blob_excl)):
        assert [to_index[r] for r, _ in a] == [to_index[r] for r, _ in b]
        assert np.allclose([s for _, s in a], [s for _, s in b], atol=1e-5)
    assert [to_index[r] for r, _ in vec_hits[:2]] in ([0, 1], [1, 0])
    assert 1 not in [to_index[r] for r, _ in vec_excl]
    assert len(vec_excl) == 3
    assert [s for _, s in vec_hits] == sorted((s for _, s in vec_hits), reverse=True)


async def test_missing_model_means_keyword_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models.clear_model_cache()
    with caplog.at_level(logging.WARNING, logger="agentctx.embed"):
        assert await models.load_model_async(minilm.settings(tmp_path / "nowhere")) is None
        # the default model, not in home/models, and no download possible
        default = {
            "embeddings": True,
            "embedding.model": models.DEFAULT_MODEL,
            "embedding.path": "",
        }
        assert await models.load_model_async(default) is None
        assert models.load_model(default) is None  # the failure is remembered: no second attempt
    lines = [r for r in caplog.records if r.name == "agentctx.embed"]
    assert len(lines) == 2 and all("embeddings off" in r.getMessage() for r in lines)
    assert "cannot be reached to download it" in lines[1].getMessage()  # no 40 s of retries
    assert models.load_model({"embeddings": False}) is None
    models.clear_model_cache()


class LoopGate:
    """The model, wrapped: a batch computed in the worker thread returns only once a task on the
    event loop has answered meanwhile, which it cannot do if the batch blocks the loop."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.asked = threading.Event()
        self.answered = threading.Event()
        self.batches = 0

    def embed(self, texts: list[str], **kwargs: Any) -> list[Any]:
        rows = list(self.model.embed(texts, **kwargs))
        self.answered.clear()
        self.asked.set()
        if not self.answered.wait(timeout=60):
            raise AssertionError("the event loop ran no task while a batch was being embedded")
        self.batches += 1
        return rows


async def test_event_loop_stays_responsive_while_embedding(
    store: Store, embedder: models.Embedder
) -> None:
    count = 2 * models.BATCH_SIZE + 2  # three batches
    bodies = [
        f"Record number {i}: the service {i % 7} talks to queue {i % 11}" for i in range(count)
    ]
    await _fill(store, [("discovery", f"Note {i}", body) for i, body in enumerate(bodies)])
    gate = LoopGate(embedder.model)
    gated = copy.copy(embedder)  # the session's model, its batches gated
    gated.model = gate
    done = anyio.Event()

    async def answer() -> None:  # another task on the loop, polling for the gate's question
        while not done.is_set():
            if gate.asked.is_set():
                gate.asked.clear()
                gate.answered.set()
            await anyio.sleep(0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        assert await vecstore.embed_pending(store, gated) == count
        done.set()
    assert gate.batches == 3  # every batch waited for the loop to run another task, and got it


def test_the_servers_query_model_runs_on_one_onnx_thread(
    minilm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR-017: the MCP server's query model (QueryModel's own loader) switches the process to one
    ONNX Runtime intra-op thread before it loads, and a model loaded then has one: no second thread
    spinning beside the prompt hook. Batch loads keep ONNX Runtime's default."""
    from agentctx.retrieval import hybrid

    monkeypatch.setattr(models, "_threads", None)

    def linked(name: str) -> Path:
        """Another folder of the same files: the real loader runs (its cache keys on the folder)."""
        folder = tmp_path / name
        folder.mkdir()
        for item in minilm_dir.iterdir():
            (folder / item.name).symlink_to(item)
        return folder

    default = models.load_model(minilm.settings(linked("minilm-copy")))
    assert default is not None
    assert default.model.model.model.get_session_options().intra_op_num_threads != 1

    hybrid.QueryModel({"embeddings": False})._load_sync()  # off: nothing loads, the switch holds
    assert models._threads == 1
    models.clear_model_cache()
    one = models.load_model(minilm.settings(linked("minilm-again")))
    assert one is not None
    assert one.model.model.model.get_session_options().intra_op_num_threads == 1
    assert np.allclose(one.embed_sync([REST]), default.embed_sync([REST]), atol=1e-5)
