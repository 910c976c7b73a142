"""Shared fixtures: every test runs against its own agentctx home in a tmp folder.

Records to add are built by the one factory, :func:`tests.helpers.new_record` (defaults for every
required field, any field by keyword), a plain function so that module-level helpers use it too.

Property tests (hypothesis) run under one of two profiles registered here (issue 24, #7):

* ``ci``, the default, whatever runs the tests (``nox -s tests``, ``nox -s slow``, a bare
  ``pytest``, CI): derandomized, no example database, so every run tries the same examples and a
  random example can never fail an unrelated commit; a failure prints its reproduction blob.
* ``explore`` (``AGENTCTX_HYPOTHESIS_PROFILE=explore``, what ``nox -s explore`` sets): random
  examples, :data:`EXPLORE_FACTOR` times each test's budget, the local example database. What it
  finds becomes a fixed ``@example`` of the test, so that ``ci`` tries it from then on.

A test's own ``@settings`` set only its budget and health checks, never ``derandomize`` or
``database``: the profile decides those (``test_every_property_test_leaves_randomness_to_the_profile``
in tests/security/test_import_validation.py checks it).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from agentctx.store import Store
from tests import helpers, minilm

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from agentctx.embeddings.models import Embedder

#: The environment variable that picks the hypothesis profile (``ci`` when unset).
PROFILE_ENV = "AGENTCTX_HYPOTHESIS_PROFILE"
#: ``explore`` runs each property test this many times its ``ci`` budget.
EXPLORE_FACTOR = 10
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get(PROFILE_ENV) or "ci")

# The tests run as nox runs them, with their environment's ``bin`` (its ``agentctx`` command) first
# on PATH, also when its pytest is started directly (``.nox/tests/bin/pytest``): what ``init``
# registers depends on what PATH finds (ADR-016). Tests about a PATH without it say so
# (tests/test_install_advice.py).
_BIN = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[:1] != [_BIN]:
    os.environ["PATH"] = os.pathsep.join([_BIN, os.environ.get("PATH", os.defpath)])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``explore``, multiply each property test's own budget by :data:`EXPLORE_FACTOR`.

    A test's explicit ``max_examples`` wins over the profile's, so the profile alone would leave
    those budgets as they are. Hypothesis keeps a decorated test's settings on the function.
    """
    if settings.default is None or settings.default.derandomize:
        return
    for item in items:
        function = getattr(item, "obj", None)
        own = getattr(function, "_hypothesis_internal_use_settings", None)
        if isinstance(own, settings):
            wider = settings(own, max_examples=own.max_examples * EXPLORE_FACTOR)
            function._hypothesis_internal_use_settings = wider  # type: ignore[union-attr]


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
    # Extraction backends: no `claude` CLI unless a test gives one (a user's real binary on PATH
    # would otherwise make `auto` pick claude-code), no override, no child marker.
    monkeypatch.setenv("AGENTCTX_CLAUDE_BIN", str(tmp_path / "no-claude-cli"))
    for name in (
        "AGENTCTX_EXTRACTION_BACKEND",
        "AGENTCTX_EXTRACTION_CHILD",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    return home_dir


@pytest.fixture(autouse=True)
def no_worker_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    """Detached workers (``lifecycle.spawn_detached``: the hooks' sweep, profile, team-sync,
    extraction and SessionEnd workers) whose home lies in the test's ``tmp_path`` are killed when
    the test ends, and waited for until gone.

    A test that needs a worker's result waits for it itself (``tests.reliability.procs``); the
    others left them running past their end, writing into a folder the test was done with (or
    was removing: the random failure of the own eval at stop 25) and taking CPU from the tests
    after them. Found by their environment (Linux /proc), so also the workers of hook processes.
    """
    yield
    from tests.reliability.procs import end_workers_under

    end_workers_under(str(tmp_path))


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Anthropic API key in the environment (the tests' Messages API server accepts any)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (what cyclopts and the MCP server use)."""
    return "asyncio"


@pytest.fixture
async def store(agentctx_home: Path) -> AsyncIterator[Store]:
    """An open store in the test's home."""
    async with await Store.open() as opened:
        yield opened


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A plain (non-git) project folder."""
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The repository's test fixtures (tests/fixtures)."""
    return helpers.fixtures_dir()


@pytest.fixture(scope="session")
def transcripts(fixtures_dir: Path) -> list[Path]:
    """The real Claude Code transcripts in tests/fixtures/transcripts."""
    found = sorted((fixtures_dir / "transcripts").glob("*.jsonl"))
    assert found, "no transcript fixtures"
    return found


@pytest.fixture(scope="session")
def minilm_fp32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local all-MiniLM-L6-v2 folder for fastembed (``specific_model_path``), no download, as the
    packages ship it: run in fp32 with ``embedding.int8`` off, or the source the loader derives the
    variant from. Assembled by :func:`tests.minilm.assemble` from the two model packages."""
    return minilm.assemble(tmp_path_factory.mktemp("minilm"))


@pytest.fixture(scope="session")
def minilm_int8_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Its int8 variant (``embedding.int8``, on by default), derived once per test run
    (:func:`tests.minilm.assemble_int8`, :func:`shared_folder`); configured as
    :func:`tests.minilm.settings` says, it loads as the variant."""
    shared = helpers.shared_folder(
        tmp_path_factory, "minilm-int8", lambda f: minilm.assemble_int8(f / "int8")
    )
    return shared / "int8"


@pytest.fixture(scope="session")
def minilm_dir(minilm_int8_dir: Path) -> Path:
    """The offline all-MiniLM-L6-v2 as agentctx runs it by default: the variant's folder, derived
    once per run, so that no test's home derives it again (``embedding.path`` at it loads it as it
    is; vectors named :data:`tests.minilm.MODEL_ID`)."""
    return minilm_int8_dir


@pytest.fixture(scope="session")
def minilm_settings(minilm_dir: Path) -> dict[str, Any]:
    """Settings (as ``config.load`` gives them) that load the offline MiniLM."""
    return minilm.settings(minilm_dir)


@pytest.fixture(autouse=True, scope="session")
def one_load_per_model() -> Iterator[dict[tuple[str, str, tuple[int, int, int]], Embedder]]:
    """Each model folder loaded once per test process, whatever the test's home.

    :func:`agentctx.embeddings.models.load_model` caches per home (its cache folder is in the key),
    and every test has its own home: a test that embeds in-process (consolidation, the MCP server,
    the hook's socket) loaded the model again, ~1 s of CPU each. Here the real loader
    (``models._load``) runs once per model folder (by the real path and the identity of its
    ``model.onnx``), and the same loaded model is returned after; a folder that does not load is
    tried every time, as before. What ``load_model`` decides (embeddings off, its own cache,
    logging a failure) runs unchanged. The loaded models, keyed as said: for the tests that count.
    """
    from agentctx.embeddings import models, quantize

    real = models._load
    loaded: dict[tuple[str, str, tuple[int, int, int]], Embedder] = {}

    def load_once(name: str, path: str, cache_dir: str, *, int8: bool = False) -> Embedder | None:
        if int8 and not (path and quantize.is_variant(path)):
            return real(name, path, cache_dir, int8=True)  # derived into the test's own home
        try:
            found = os.stat(os.path.join(path, "model.onnx")) if path else None
        except OSError:
            found = None
        if found is None:  # a download, or a folder without a model: the real loader's case
            return real(name, path, cache_dir)
        key = (name, os.path.realpath(path), (found.st_dev, found.st_ino, found.st_mtime_ns))
        if key not in loaded:
            model = real(name, path, cache_dir, int8=int8)
            if model is None:
                return None
            loaded[key] = model
        return loaded[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(models, "_load", load_once)
        yield loaded


@pytest.fixture(scope="session")
def embedder(minilm_settings: dict[str, Any]) -> Iterator[Embedder]:
    """One load of the offline MiniLM for the whole session (as one load per worker run)."""
    from agentctx.embeddings import models

    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        loaded = models.load_model(minilm_settings)
        assert loaded is not None
        yield loaded
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous
