"""ONNX Runtime's lean session options (embeddings/session.py): set on what fastembed makes while
loading, prepacking kept for the int8 variant, the factory restored after; the heap trim."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.embeddings import models, session
from tests import minilm

if TYPE_CHECKING:
    from pathlib import Path

ort: Any = pytest.importorskip("onnxruntime")


def test_the_options_made_while_loading_are_lean_and_the_factory_comes_back() -> None:
    original = ort.SessionOptions
    with session.lean_sessions():
        options = ort.SessionOptions()
    assert ort.SessionOptions is original
    assert options.enable_mem_pattern is False
    assert options.get_session_config_entry("session.disable_prepacking") == "1"
    with session.lean_sessions(keep_prepacking=True):
        kept = ort.SessionOptions()
    assert kept.enable_mem_pattern is False
    assert _entry(kept, "session.disable_prepacking") is None
    assert ort.SessionOptions().enable_mem_pattern is True  # outside: ONNX Runtime's default


def test_a_failed_load_restores_the_factory() -> None:
    original = ort.SessionOptions
    with pytest.raises(RuntimeError), session.lean_sessions():
        raise RuntimeError("the load failed")
    assert ort.SessionOptions is original


def test_the_loaded_models_session_runs_lean(minilm_fp32_dir: Path, minilm_int8_dir: Path) -> None:
    settings = {**minilm.settings(minilm_fp32_dir), "embedding.int8": False}
    for loaded in (
        models.load_model(settings),
        models.load_model(minilm.settings(minilm_int8_dir)),
    ):
        assert loaded is not None
        options = loaded.model.model.model.get_session_options()
        assert options.enable_mem_pattern is False
        prepacking_off = _entry(options, "session.disable_prepacking") == "1"
        assert prepacking_off == (loaded.name == minilm.NAME)  # the variant keeps it


def test_the_heap_trim_is_asked_on_glibc_linux() -> None:
    assert session.release_freed() == (sys.platform.startswith("linux") and _glibc())


def _glibc() -> bool:
    import platform

    return platform.libc_ver()[0] == "glibc"


def _entry(options: Any, key: str) -> str | None:
    try:
        return str(options.get_session_config_entry(key))
    except RuntimeError:  # ONNX Runtime's answer for a key that was never set
        return None
