"""A change of embedding model: the vector table follows the model's dimension, a resumable re-embed,
and vectors of two models never compared.

Two real models through fastembed: the offline all-MiniLM-L6-v2 (384 dimensions) and MiniLM projected
to 768 (or rotated in 384) dimensions by :func:`tests.minilm.derive` (no other small ONNX model of
another dimension installs from PyPI here: see that module). Real SQLite with sqlite-vec (and its
numpy fallback), real ``agentctx`` subprocesses for the CLI, a real SIGKILL for the resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import closing
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from agentctx import config
from agentctx.core import clock, db, plan, schema, vectors
from agentctx.core.vectors import ModelMismatchError
from agentctx.embeddings import models, reembed, thresholds, vecstore
from agentctx.retrieval import hybrid
from agentctx.store import SearchQuery, Store
from tests import helpers, minilm
from tests.helpers import (
    COLUMNS_BEFORE_0008,
    INSERT_BEFORE_0008,
    add_texts,
    new_record,
    reembed_when_pending,
    run_cli,
    seed,
    use_model,
    vectors_check,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TEXTS = [
    ("decision", "gRPC for internal services", "We moved from REST to gRPC for internal services"),
    ("decision", "Internal RPC protocol", "Internal services now talk gRPC instead of REST"),
    ("convention", "Arrow functions", "Always use arrow functions in TypeScript"),
    ("convention", "Python formatting", "Format Python code with ruff format before every commit"),
    ("bugfix", "Flaky login test", "The login test failed because of a race in the session cache"),
    ("discovery", "Slow CI", "CI is slow because the Docker layer cache is disabled on forks"),
    ("preference", "Short answers", "The developer prefers short answers without preamble"),
    ("decision", "Postgres for analytics", "Analytics events go to Postgres, not Elasticsearch"),
]
QUERY = "which protocol do the internal services use?"


@pytest.fixture(scope="session")
def wide_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM projected to 768 dimensions: a second model of another dimension."""
    return helpers.shared_folder(tmp_path_factory, "minilm-768", lambda f: minilm.derive(f, 768))


@pytest.fixture(scope="session")
def rotated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM rotated in 384 dimensions: a second model of the same dimension."""
    return helpers.shared_folder(tmp_path_factory, "minilm-384", lambda f: minilm.derive(f, 384))


def _settings(name: str, folder: Path) -> dict[str, Any]:
    return {"embeddings": True, "embedding.model": name, "embedding.path": str(folder)}


@pytest.fixture(scope="session")
def offline_hub() -> Iterator[None]:
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield
    if previous is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = previous


@pytest.fixture(scope="session")
def wide(wide_dir: Path, offline_hub: None) -> models.Embedder:
    loaded = models.load_model(_settings(minilm.derived_name(768), wide_dir))
    assert loaded is not None
    return loaded


@pytest.fixture(scope="session")
def rotated(rotated_dir: Path, offline_hub: None) -> models.Embedder:
    loaded = models.load_model(_settings(minilm.derived_name(384), rotated_dir))
    assert loaded is not None
    return loaded


async def _fill(store: Store, texts: list[tuple[str, str, str]] = TEXTS) -> list[str]:
    return await add_texts(store, texts)


async def _ranking(store: Store, model: models.Embedder) -> list[tuple[str, float]]:
    return await vecstore.nearest(store, await model.embed_query(QUERY), 5, model=model.name)


def _vec_sql(path: str) -> str:
    conn, _ = db.connect(path)
    with closing(conn):
        row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'records_vec'").fetchone()
    return " ".join(str(row[0]).split())


# -- the models themselves -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def fp32(minilm_fp32_dir: Path, offline_hub: None) -> models.Embedder:
    """MiniLM in fp32 (``embedding.int8`` off): the model the second models are derived from."""
    loaded = models.load_model({**minilm.settings(minilm_fp32_dir), "embedding.int8": False})
    assert loaded is not None and loaded.name == minilm.NAME
    return loaded


def test_the_second_models_are_other_spaces_with_minilms_cosines(
    embedder: models.Embedder,
    fp32: models.Embedder,
    wide: models.Embedder,
    rotated: models.Embedder,
) -> None:
    texts = [body for _, _, body in TEXTS]
    base = fp32.embed_sync(texts)
    assert (embedder.dims, wide.dims, rotated.dims) == (384, 768, 384)
    for other in (wide, rotated):
        vectors_ = other.embed_sync(texts)
        # the same similarities between texts ...
        assert np.allclose(vectors_ @ vectors_.T, base @ base.T, atol=2e-3)
    # ... but not the same vectors: a rotated vector against MiniLM's is noise
    cross = np.einsum("ij,ij->i", rotated.embed_sync(texts), base)
    assert float(np.max(np.abs(cross))) < 0.5
    # thresholds are per model name: MiniLM's cosine floor is not applied to another model
    minilm = hybrid.floor_for({}, embedder.name)
    assert minilm.similarity == thresholds.SIMILARITY_FLOOR[embedder.name] is not None
    assert minilm.strong_similarity is not None
    unmeasured = hybrid.floor_for({}, wide.name)
    assert unmeasured.similarity is None and unmeasured.strong_similarity is None


# -- the dimension follows the model: 384 -> 768 and back ----------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("vec", [True, False], ids=["sqlite-vec", "numpy"])
async def test_dimension_change_and_back(
    tmp_path: Path,
    fp32: models.Embedder,
    wide: models.Embedder,
    vec: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = fp32  # the wide model is fp32 MiniLM projected: the same cosines
    if not vec:
        monkeypatch.setattr(db, "_load_vec", lambda conn, caps: setattr(caps, "vec_error", "off"))
    path = str(tmp_path / "store.db")
    async with await Store.open(path) as store:
        assert vecstore.uses_vec(store) is vec
        ids = await _fill(store)
        first = await reembed.prepare(store, embedder)
        assert first.action == "adopted"  # a new store: nothing stored yet, same dimension
        assert await vecstore.embed_pending(store, embedder) == len(ids)
        before = await _ranking(store, embedder)
        status = await reembed.status(store)
        assert (status.model, status.dims, status.embedded, status.pending) == (
            minilm.NAME,
            384,
            len(ids),
            0,
        )

        switched = await reembed.prepare(store, wide)
        assert switched.to_dict() == {
            "action": "switched",
            "model": wide.name,
            "dims": 768,
            "before": {"model": minilm.NAME, "dims": 384},
            "flagged": len(ids),
        }
        if vec:
            assert "embedding float[768] distance_metric=cosine" in _vec_sql(path)
        status = await reembed.status(store)
        assert (status.model, status.dims, status.embedded, status.pending) == (
            wide.name,
            768,
            0,
            len(ids),
        )
        assert status.to_dict()["reembed"]["total"] == len(ids)
        # the old model's query finds nothing to compare with: refused, not mixed
        with pytest.raises(ModelMismatchError, match="belong to agentctx-tests/minilm-projected"):
            await _ranking(store, embedder)
        assert await _ranking(store, wide) == []  # nothing re-embedded yet

        # resumable: a few now, the rest later; each batch is committed with its vectors
        assert await vecstore.embed_pending(store, wide, limit=3) == 3
        assert (await reembed.status(store)).reembedded == 3
        assert len(await _ranking(store, wide)) == 3
        assert not await reembed.finish(store)  # not done yet
        assert await vecstore.embed_pending(store, wide) == len(ids) - 3
        assert await reembed.finish(store)
        after = await _ranking(store, wide)
        # every record has its new vector, and MiniLM's ranking stands (the same cosines)
        assert [rid for rid, _ in after] == [rid for rid, _ in before]
        assert np.allclose([s for _, s in after], [s for _, s in before], atol=2e-3)
        assert (await reembed.status(store)).to_dict()["reembed"] is None

        back = await reembed.prepare(store, embedder)
        assert (back.action, back.before_model, back.before_dims) == ("switched", wide.name, 768)
        if vec:
            assert "embedding float[384] distance_metric=cosine" in _vec_sql(path)
        assert await vecstore.embed_pending(store, embedder) == len(ids)
        again = await _ranking(store, embedder)
        assert [rid for rid, _ in again] == [rid for rid, _ in before]
        assert (await store.row("SELECT count(*) FROM records"))[0] == len(ids)


# -- the same dimension, another model -------------------------------------------------------------


@pytest.mark.anyio
async def test_same_dimension_model_change_never_mixes(
    store: Store, embedder: models.Embedder, rotated: models.Embedder
) -> None:
    ids = await _fill(store)
    await reembed.prepare(store, embedder)
    await vecstore.embed_pending(store, embedder)
    before = await _ranking(store, embedder)

    assert (await reembed.prepare(store, rotated)).action == "switched"
    # a process still holding MiniLM neither searches nor stores vectors now
    with pytest.raises(ModelMismatchError):
        await _ranking(store, embedder)
    await store.add(new_record(title="New note", body="Written meanwhile", project_id="p1"))
    with pytest.raises(ModelMismatchError):
        await vecstore.embed_pending(store, embedder)
    assert (await reembed.status(store)).embedded == 0  # nothing of MiniLM's was written

    # hybrid search meanwhile: a MiniLM query falls back to keywords and says why
    query = SearchQuery(text="gRPC internal services", project_id="p1", limit=5)
    ranked = await hybrid.hybrid_search(store, query, embedder)
    assert ranked.mode == "keyword"
    assert ranked.degraded is not None and "ModelMismatchError" in ranked.degraded
    assert ranked.hits  # keywords still find the records
    # the new model's query ranks the records re-embedded so far, and only those
    await vecstore.embed_pending(store, rotated, limit=2)
    assert {rid for rid, _ in await _ranking(store, rotated)} <= set(ids[:2])
    ranked = await hybrid.hybrid_search(store, query, rotated)
    assert ranked.mode == "hybrid"

    await vecstore.embed_pending(store, rotated)
    after = await _ranking(store, rotated)
    assert [rid for rid, _ in after] == [rid for rid, _ in before]


@pytest.mark.anyio
async def test_vectors_stored_before_the_model_was_recorded_go_to_the_model_that_made_them(
    tmp_path: Path,
    embedder: models.Embedder,
    wide: models.Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = str(tmp_path / "old.db")
    with monkeypatch.context() as patch:  # a store as the previous release left it
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:5])
        patch.setattr(schema, "SCHEMA_VERSION", 5)
        async with await Store.open(path) as old:
            records = [
                new_record(type=kind, title=title, body=body, project_id="p1")
                .validated()
                .to_record(clock.ulid(), clock.now())
                for kind, title, body in TEXTS
            ]
            ids = [record.id for record in records]
            async with old.transaction() as tx:  # rows of that schema (no cues column)
                for record in records:
                    row: dict[str, Any] = dict(record.to_row())
                    await tx.execute(INSERT_BEFORE_0008, [row[c] for c in COLUMNS_BEFORE_0008])
            assert await old.run(vectors.space()) is None
            for record in records:  # vectors as the old embed_pending wrote them
                blob = embedder.embed_sync([vecstore.record_text(record)])[0].tobytes()
                async with old.transaction() as tx:
                    await tx.execute(
                        "INSERT INTO records_vec(record_id, embedding) VALUES (?, ?)",
                        (record.id, blob),
                    )
                    await tx.execute(
                        "UPDATE records SET pending_embedding = 0 WHERE id = ?", (record.id,)
                    )
    async with await Store.open(path) as store:  # migrates to 0006
        status = await reembed.status(store)
        assert (status.model, status.dims, status.embedded) == (None, 384, len(ids))
        # not settled yet: searches refuse vectors of a model nobody recorded
        with pytest.raises(ModelMismatchError):
            await vecstore.nearest(store, embedder.embed_sync(["queue"])[0], 3, model=embedder.name)
        # they were made by the model the settings named then: here, this one
        config.set_value("embedding.model", embedder.name)
        assert reembed.unrecorded_owner() == embedder.name
        assert (await reembed.prepare(store, embedder)).action == "adopted"
        assert (await reembed.status(store)).model == minilm.MODEL_ID
        assert await vecstore.embed_pending(store, embedder) == 0  # the old vectors were kept
        assert len(await _ranking(store, embedder)) == 5

    # a store whose settings named no model: its vectors are the old default's, so the new
    # default (this model) does not take them for its own: it re-embeds
    async with await Store.open(path) as store:
        async with store.transaction() as tx:
            await tx.execute("UPDATE embedding_model SET model = NULL")
        config.set_value("embedding.model", vectors.UNRECORDED_DEFAULT)
        assert reembed.unrecorded_owner() == vectors.UNRECORDED_DEFAULT
        prepared = await reembed.prepare(store, embedder)
        assert (prepared.action, prepared.flagged) == ("switched", len(ids))
        assert await vecstore.embed_pending(store, embedder) == len(ids)

    async with await Store.open(path) as store:  # an unrecorded space of another dimension
        await store.write(vectors.switch(embedder.name, 384, vec=True, now="2026-01-01T00:00:00Z"))
        await vecstore.embed_pending(store, embedder)
        async with store.transaction() as tx:
            await tx.execute("UPDATE embedding_model SET model = NULL")
        with pytest.raises(ModelMismatchError):
            await vecstore.embed_pending(store, wide)  # neither adopted nor mixed
        assert (await reembed.prepare(store, wide)).action == "switched"


# -- consolidation ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_consolidation_switches_and_resumes(
    store: Store, embedder: models.Embedder, wide: models.Embedder, wide_dir: Path
) -> None:
    from agentctx import config
    from agentctx import consolidate as consolidation

    await _fill(store)
    await reembed.prepare(store, embedder)
    await vecstore.embed_pending(store, embedder)
    settings = {**config.load(), "llm": False, **_settings(minilm.derived_name(768), wide_dir)}
    first = await consolidation.consolidate(store, "p1", settings=settings, time_box=1e-9)
    steps = [r.steps["embed"]["result"] for r in first if "embed" in r.steps]
    assert steps[0]["switched"]["before"] == {"model": minilm.MODEL_ID, "dims": 384}
    assert steps[-1]["pending"] > 0  # the time box left the re-embed for the next run
    second = await consolidation.consolidate(store, "p1", settings=settings)
    steps = [r.steps["embed"]["result"] for r in second if "embed" in r.steps]
    assert all(step["switched"] is None for step in steps)  # resumed, not switched again
    assert steps[-1]["pending"] == 0 and steps[-1]["dims"] == 768
    status = await reembed.status(store)
    assert (status.model, status.embedded, status.to_dict()["reembed"]) == (
        minilm.derived_name(768),
        len(TEXTS),
        None,
    )


# -- the real CLI ----------------------------------------------------------------------------------


def _cli_json(*args: str, cwd: Path) -> Any:
    result = run_cli(*args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_cli_reembed_and_doctor(project_dir: Path, minilm_dir: Path, wide_dir: Path) -> None:
    seed(project_dir, [{"type": t, "title": a, "body": b} for t, a, b in TEXTS])
    use_model(minilm.NAME, minilm_dir, project_dir)
    first = _cli_json("model", "reembed", cwd=project_dir)
    assert first["embedded"] == len(TEXTS)
    assert thresholds.source(minilm.MODEL_ID) == "measured"
    assert thresholds.calibrated(minilm.MODEL_ID) is None
    check = vectors_check(project_dir)
    assert check["ok"] is True and check["status"] == "current"
    assert check["model"] == minilm.MODEL_ID and check["dims"] == 384  # the variant, by default
    doctor = run_cli("doctor", cwd=project_dir).stdout
    assert doctor.count(f"{minilm.MODEL_ID} (384 dimensions)") == 1

    wide_name = minilm.derived_name(768)
    use_model(wide_name, wide_dir, project_dir)
    check = vectors_check(project_dir)
    assert check["ok"] is None and check["status"] == "pending"
    assert check["configured"] == wide_name and check["model"] == minilm.MODEL_ID
    assert "agentctx model reembed" in check["fix"]

    result = reembed_when_pending(project_dir, minilm.MODEL_ID, len(TEXTS))
    # a model without measured thresholds is calibrated once, when it is loaded to re-embed
    assert f"agentctx: calibrated the cosine thresholds of {wide_name}: " in result.stderr
    assert thresholds.source(wide_name) == "calibrated"
    assert result.stdout.strip() == (
        f"{len(TEXTS)} records have vectors of {wide_name} (768 dimensions); "
        f"{len(TEXTS)} embedded now"
    )
    check = vectors_check(project_dir)
    assert check["ok"] is True and check["dims"] == 768
    search = run_cli("search", QUERY, cwd=project_dir)
    assert search.returncode == 0 and "keyword-only" not in search.stderr  # hybrid again
    top = search.stdout.splitlines()[1]  # under the legend line
    assert "gRPC for internal services" in top or "Internal RPC protocol" in top


@pytest.mark.slow  # a kill -9 trial (nox -s slow)
def test_a_killed_reembed_resumes_where_it_stopped(project_dir: Path, wide_dir: Path) -> None:
    count = 240
    notes = [{"type": "discovery", "title": f"Note {i}", "body": f"Fact {i}"} for i in range(count)]
    zebra = {"type": "decision", "title": "Zebra crossings", "body": "Zebra crossings get lights"}
    seed(project_dir, [*notes[:-1], zebra])  # the last one: re-embedded last
    use_model(
        minilm.derived_name(768), wide_dir, project_dir
    )  # from the new store's 384 dimensions

    command = [sys.executable, "-m", "agentctx", "model", "reembed", "--batch", "4"]
    with subprocess.Popen(
        command, cwd=project_dir, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    ) as child:
        assert child.stderr is not None
        for line in child.stderr:  # the first committed batch: then the kill
            if line.startswith("agentctx: embedded "):
                break
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    check = vectors_check(project_dir)
    assert check["status"] == "running" and check["ok"] is None
    progress = check["reembed"]
    assert progress["total"] == count and 4 <= progress["done"] < count
    assert check["embedded"] == progress["done"]  # only the new model's vectors
    assert "re-embedding with agentctx-tests/minilm-projected-768" in check["detail"]
    # search goes on meanwhile: a record not re-embedded yet is found by its words (RRF gives
    # it the keyword half only, as to a record not embedded yet)
    search = run_cli("search", "zebra crossings", "--limit", "3", cwd=project_dir)
    assert search.returncode == 0 and "Zebra crossings" in search.stdout

    resumed = _cli_json("model", "reembed", cwd=project_dir)
    assert resumed["prepared"]["action"] == "same"  # no second switch: it resumes
    assert resumed["embedded"] == count - progress["done"]
    assert resumed["vectors"]["embedded"] == count and resumed["vectors"]["pending"] == 0
    check = vectors_check(project_dir)
    assert check["ok"] is True and check["model"] == minilm.derived_name(768)
    conn, _ = db.connect(os.environ["AGENTCTX_HOME"] + "/agentctx.db", readonly=True)
    with closing(conn):
        assert plan.run(conn, vectors.counts()) == (count, 0)
        vec_rows = conn.execute("SELECT count(*) FROM records_vec").fetchone()[0]
    assert vec_rows == count  # no record lost, none embedded twice
