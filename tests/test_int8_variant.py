"""MiniLM's int8 variant (issue 25, item 5): derived once, privately, named apart, re-embedded into.

The real offline MiniLM (``tests/minilm.py``) through fastembed and ONNX Runtime; the variant is
derived by :mod:`agentctx.embeddings.quantize` (no ``onnx`` package) and compared with the fp32
model it comes from. Real SQLite for the re-embed.
"""

from __future__ import annotations

import json
import os
import stat
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from agentctx.embeddings import calibrate, models, quantize, reembed, thresholds, vecstore
from tests import minilm
from tests.helpers import add_texts

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from agentctx.store import Store

TEXTS = [
    ("decision", "gRPC for internal services", "We moved from REST to gRPC for internal services"),
    ("convention", "Python formatting", "Format Python code with ruff format before every commit"),
    ("bugfix", "Flaky login test", "The login test failed because of a race in the session cache"),
    ("discovery", "Slow CI", "CI is slow because the Docker layer cache is disabled on forks"),
    ("preference", "Short answers", "The developer prefers short answers without preamble"),
]


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield
    if previous is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = previous


def _fp32_settings(folder: Path, **more: Any) -> dict[str, Any]:
    return {**minilm.settings(folder), **more}


@pytest.fixture(scope="module")
def fp32(minilm_fp32_dir: Path, offline: None) -> models.Embedder:
    loaded = models.load_model(_fp32_settings(minilm_fp32_dir, **{"embedding.int8": False}))
    assert loaded is not None
    return loaded


@pytest.fixture(scope="module")
def variant(minilm_int8_dir: Path, offline: None) -> models.Embedder:
    """The variant derived once for the session: its folder loads as the variant."""
    loaded = models.load_model(minilm.settings(minilm_int8_dir))
    assert loaded is not None
    return loaded


def test_derived_once_privately_with_every_weight_matrix_in_int8(
    minilm_fp32_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "cache" / "int8" / "variant"
    assert quantize.derive(str(minilm_fp32_dir), str(target)) == str(target)
    about = json.loads((target / quantize.MARKER).read_text())
    # MiniLM's six layers: four weight matrices for attention, two for the feed-forward part;
    # the word, position and token-type tables
    assert (about["matmul"], about["gather"], about["version"]) == (36, 3, quantize.VERSION)
    assert quantize.is_variant(str(target)) and not quantize.is_variant(str(minilm_fp32_dir))
    for folder in (target.parent, target):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    names = sorted(p.name for p in target.iterdir())
    assert names == sorted([quantize.MODEL_FILE, quantize.MARKER, *quantize.TOKENIZER_FILES])
    for path in target.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and not path.is_symlink()
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no leftovers
    # a quarter of the fp32 weights' size (the packages' file is int8 already: about the same)
    assert (target / quantize.MODEL_FILE).stat().st_size < 30_000_000
    before = (target / quantize.MODEL_FILE).stat().st_mtime_ns
    quantize.derive(str(minilm_fp32_dir), str(target))  # there already: kept as it is
    assert (target / quantize.MODEL_FILE).stat().st_mtime_ns == before


def test_not_an_onnx_model_is_refused_in_one_exception(tmp_path: Path) -> None:
    for data in (b"", b"\x08\x07", b"\xff" * 20, b"\x3a\x05abc"):
        with pytest.raises(quantize.QuantizeError):
            quantize.quantize_model(data)
    source = tmp_path / "broken"
    source.mkdir()
    (source / quantize.MODEL_FILE).write_bytes(b"not a model")
    target = tmp_path / "cache" / "variant"
    with pytest.raises(quantize.QuantizeError, match=r"^deriving failed \(exit 1\): \w+"):
        quantize.derive_apart(str(source), str(target))  # the child's one line, no traceback
    assert not target.exists() and not list((tmp_path / "cache").iterdir())


def test_the_variant_is_its_own_model_close_to_minilm(
    fp32: models.Embedder, variant: models.Embedder
) -> None:
    embedder = variant
    assert (fp32.name, embedder.name) == (minilm.NAME, minilm.MODEL_ID)
    assert embedder.dims == fp32.dims == 384
    texts = [f"{title} — {body}" for _, title, body in TEXTS] + ["which RPC do services use?"]
    mine, theirs = embedder.embed_sync(texts), fp32.embed_sync(texts)
    cosines = np.einsum("ij,ij->i", mine, theirs)
    # version 2 (weights in 8 bits, activations per block): 0.9995 on average over the tuning and
    # calibration texts, 0.9987 at the lowest (version 1: 0.994 and 0.983)
    assert float(cosines.min()) > 0.997 and float(cosines.mean()) > 0.999
    assert float(np.abs(mine - theirs).max()) > 1e-4  # another model's vectors, not the same ones
    # MiniLM's measured thresholds hold for it (docs/retrieval.md, "A lighter model")
    assert thresholds.source(embedder.name) == "measured"
    assert thresholds.similarity_floor(embedder.name) == thresholds.similarity_floor(fp32.name)


def test_the_variants_merge_candidate_separates_the_calibration_set(
    variant: models.Embedder,
) -> None:
    """As MiniLM's 0.92 does for it (tests/test_calibration.py): two paraphrases in three are
    asked about, at most a quarter of the distinct pairs the marker check cannot tell apart."""
    found = calibrate.cosines(variant)
    merge_min, auto_merge = thresholds.merge_bounds(variant.name)
    assert (merge_min, auto_merge) == (0.915, 0.97)

    def share(values: tuple[float, ...]) -> float:
        return sum(1 for v in values if v > merge_min) / len(values)

    assert share(found.duplicates) >= 2 / 3 and share(found.distinct_unmarked) <= 0.25
    data = calibrate.load_set()
    unmarked = [
        item["a"]["title"]
        for item, cosine in zip(data["distinct"], found.distinct, strict=True)
        if cosine >= auto_merge and not item["markers"]
    ]
    assert unmarked == ["Warehouse size"]  # as with MiniLM: the content-word check refuses it


def test_the_configured_model_is_derived_under_the_home_and_named_apart(
    minilm_fp32_dir: Path, agentctx_home: Path, offline: None
) -> None:
    settings = _fp32_settings(minilm_fp32_dir, **{"embedding.int8": True})
    assert models.model_id(settings) == minilm.MODEL_ID
    assert models.model_id({**settings, "embedding.int8": False}) == minilm.NAME
    assert models.model_id(_fp32_settings(minilm_fp32_dir)) == minilm.MODEL_ID  # on by default
    assert models.model_id({"embedding.model": "BAAI/bge-small-en-v1.5"}) == (
        "BAAI/bge-small-en-v1.5"  # no measured variant: the model runs as it is
    )
    models.clear_model_cache()
    try:
        loaded = models.load_model(settings)
        assert loaded is not None and loaded.name == minilm.MODEL_ID
        folder = models.int8_folder(
            minilm.NAME, str(minilm_fp32_dir), str(agentctx_home / "models")
        )
        assert os.path.dirname(os.path.dirname(folder)) == str(agentctx_home / "models")
        assert quantize.is_variant(folder)
        assert stat.S_IMODE(os.stat(agentctx_home / "models").st_mode) == 0o700
        assert models.load_local(settings).name == minilm.MODEL_ID  # doctor and search alike
    finally:
        models.clear_model_cache()


@pytest.mark.anyio
async def test_vectors_of_the_fp32_model_are_reembedded_with_the_variant(
    store: Store, fp32: models.Embedder, variant: models.Embedder
) -> None:
    embedder = variant
    ids = await add_texts(store, TEXTS)
    assert (await reembed.prepare(store, fp32)).action == "adopted"
    assert await vecstore.embed_pending(store, fp32) == len(ids)
    switched = await reembed.prepare(store, embedder)
    assert switched.to_dict() == {
        "action": "switched",
        "model": minilm.MODEL_ID,
        "dims": 384,
        "before": {"model": minilm.NAME, "dims": 384},
        "flagged": len(ids),
    }
    assert await vecstore.embed_pending(store, embedder) == len(ids)
    await reembed.finish(store)
    status = await reembed.status(store)
    assert (status.model, status.embedded, status.pending) == (minilm.MODEL_ID, len(ids), 0)
    query = await embedder.embed_query("which protocol do the internal services use?")
    nearest = await vecstore.nearest(store, query, 1, model=embedder.name)
    assert nearest[0][0] == ids[0]


def test_a_store_of_fp32_vectors_is_reembedded_once_the_default_turns_the_variant_on(
    project_dir: Path, agentctx_home: Path, minilm_fp32_dir: Path, fp32: models.Embedder
) -> None:
    """Upgrading to a release where ``embedding.int8`` is on by default: a store embedded by the
    fp32 model (as the releases before, ``embedding.int8`` unset) is not searched with the variant's
    vectors mixed in. doctor says a re-embed is pending, search says it is keyword-only and why,
    ``agentctx model reembed`` derives the variant once into the home and re-embeds; then hybrid."""
    import anyio

    from agentctx.store import Store
    from tests.helpers import reembed_when_pending, run_cli, seed, use_model, vectors_check

    ids = seed(project_dir, [{"type": t, "title": a, "body": b} for t, a, b in TEXTS])

    async def embed_with_fp32() -> int:
        async with await Store.open() as store:
            assert (await reembed.prepare(store, fp32)).action == "adopted"
            return await vecstore.embed_pending(store, fp32)

    assert anyio.run(embed_with_fp32) == len(ids)
    use_model(minilm.NAME, minilm_fp32_dir, project_dir)

    check = vectors_check(project_dir)
    assert check["status"] == "pending" and check["ok"] is None
    assert (check["configured"], check["model"]) == (minilm.MODEL_ID, minilm.NAME)
    reembed_when_pending(project_dir, minilm.NAME, len(ids))
    folder = models.int8_folder(minilm.NAME, str(minilm_fp32_dir), str(agentctx_home / "models"))
    assert quantize.is_variant(folder)  # derived once, under the home
    search = run_cli("search", "which protocol do the internal services use?", cwd=project_dir)
    assert search.returncode == 0 and "keyword-only" not in search.stderr  # hybrid again
    assert "gRPC for internal services" in search.stdout.splitlines()[1]
