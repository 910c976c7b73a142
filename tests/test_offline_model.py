"""Offline, and without an extraction backend (issue 27, items 5 and 18).

A failed model download is remembered in the home (``model-download.json``): the next runs neither
import fastembed nor probe the hub until the back-off ends (an hour, then a day), they say so in a
short line, and search suggests only what can help. ``status`` says whether the LLM and the
embeddings are on; ``extract`` with no backend creates nothing. The CLI runs in real processes
(``tests.helpers.run_cli``); offline is ``HF_HUB_OFFLINE=1``, which the model's hub probe honours,
so no test waits on the network.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from agentctx.embeddings import backoff
from tests.helpers import run_cli

if TYPE_CHECKING:
    from pathlib import Path

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No route to the hub: no proxy, and the hub probe's offline switch."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def ok(*args: str, cwd: Path) -> tuple[str, str]:
    result = run_cli(*args, cwd=cwd)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout, result.stderr


def recorded(agentctx_home: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((agentctx_home / backoff.FILE_NAME).read_text())
    return data


def test_a_failed_download_is_remembered_and_not_tried_again(
    tmp_path: Path, agentctx_home: Path, minilm_dir: Path, offline: None
) -> None:
    ok("init", "--no-mcp", "--no-llm", cwd=tmp_path)
    ok("config", "set", "embedding.model", MODEL, cwd=tmp_path)
    before = time.time()
    _, err = ok("consolidate", cwd=tmp_path)
    # the first failure says how to get the model, once
    assert err.count(backoff.ADVICE) == 1, err
    first = recorded(agentctx_home)
    assert (first["model"], first["failures"]) == (MODEL, 1)
    assert before + 3600 <= float(str(first["until"])) <= time.time() + 3600
    assert (agentctx_home / backoff.FILE_NAME).stat().st_mode & 0o777 == 0o600

    _, err = ok("consolidate", cwd=tmp_path)
    # not tried again: the record is unchanged, and the line is the short one
    assert recorded(agentctx_home) == first
    assert backoff.ADVICE not in err and "cannot be reached to download it" not in err, err
    assert "no new try before" in err and "`agentctx model fetch` tries now" in err, err

    # search suggests what can help offline, not a consolidation
    _, err = ok("search", "cache", cwd=tmp_path)
    assert err.strip() == (
        "agentctx: keyword-only search: no record has a vector yet: the embedding model is not "
        f"downloaded and its download failed (offline?): {backoff.ADVICE}"
    )

    # the user asks: model fetch tries despite the back-off, and the next back-off is a day
    result = run_cli("model", "fetch", cwd=tmp_path)
    assert result.returncode == 1 and "cannot be reached" in result.stderr
    second = recorded(agentctx_home)
    assert second["failures"] == 2
    assert float(str(second["until"])) - float(str(second["failed_at"])) == 86400

    status = json.loads(ok("status", "--json", cwd=tmp_path)[0])["embeddings"]
    assert status["on"] is False
    assert status["download_failed"]["failures"] == 2

    # a local copy is used at once, back-off or not
    ok("config", "set", "embedding.path", str(minilm_dir), cwd=tmp_path)
    status = json.loads(ok("status", "--json", cwd=tmp_path)[0])["embeddings"]
    assert (status["on"], status["local"], status["download_failed"]) == (True, True, None)
    out, _ = ok("status", cwd=tmp_path)
    assert f"embedding on: {MODEL} ({minilm_dir})" in out.splitlines()


def test_before_any_failure_search_names_the_download(tmp_path: Path, offline: None) -> None:
    ok("init", "--no-mcp", "--no-llm", cwd=tmp_path)
    ok("config", "set", "embedding.model", MODEL, cwd=tmp_path)
    _, err = ok("search", "cache", cwd=tmp_path)
    assert err.strip() == (
        "agentctx: keyword-only search: no record has a vector yet: `agentctx consolidate` "
        "downloads the embedding model (about 90 MB) and embeds them"
    )


def test_the_back_off_grows_and_belongs_to_one_model(agentctx_home: Path) -> None:
    agentctx_home.mkdir()
    assert backoff.waiting(MODEL) is None
    first = backoff.record_failure(MODEL, "offline", now=1000.0)
    assert (first.failures, first.until) == (1, 1000.0 + 3600)
    assert backoff.waiting(MODEL, now=1000.0 + 3599) == first
    assert backoff.waiting(MODEL, now=1000.0 + 3600) is None  # over: the next run tries
    assert backoff.waiting("BAAI/bge-small-en-v1.5", now=1001.0) is None  # another model's
    second = backoff.record_failure(MODEL, "offline\nagain", now=5000.0)
    third = backoff.record_failure(MODEL, "offline", now=100_000.0)
    assert (second.failures, second.until, second.reason) == (2, 5000.0 + 86400, "offline again")
    assert (third.failures, third.until) == (3, 100_000.0 + 86400)
    backoff.clear()
    assert backoff.waiting(MODEL) is None
    (agentctx_home / backoff.FILE_NAME).write_text("{not json")
    assert backoff.waiting(MODEL) is None  # unreadable: as if none
    assert backoff.record_failure(MODEL, "offline", now=1.0).failures == 1


# -- status and extract say whether the LLM is on ----------------------------------------------


def test_status_says_whether_the_llm_and_embeddings_are_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok("init", "--no-mcp", cwd=tmp_path)
    out, _ = ok("status", cwd=tmp_path)
    lines = out.splitlines()
    (llm,) = [line for line in lines if line.startswith("llm ")]
    assert llm.startswith("llm       off: no extraction backend (auto: no ANTHROPIC_API_KEY")
    (embedding,) = [line for line in lines if line.startswith("embedding ")]
    assert embedding == (
        f"embedding off until {MODEL} is downloaded: the next consolidation does it "
        "(`agentctx model fetch` now)"
    )
    data = json.loads(ok("status", "--json", cwd=tmp_path)[0])
    assert (data["llm"]["on"], data["llm"]["backend"]) == (False, None)

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    data = json.loads(ok("status", "--json", cwd=tmp_path)[0])
    assert (data["llm"]["on"], data["llm"]["backend"]) == (True, "api")
    assert "llm       on: extraction through api (" in ok("status", cwd=tmp_path)[0]

    ok("config", "set", "llm", "off", cwd=tmp_path)
    ok("config", "set", "embeddings", "off", cwd=tmp_path)
    out, _ = ok("status", cwd=tmp_path)
    assert "llm       off: capture only (`agentctx config set llm on`)" in out.splitlines()
    assert (
        "embedding off: keyword-only search (`agentctx config set embeddings on`)"
        in out.splitlines()
    )
    data = json.loads(ok("status", "--json", cwd=tmp_path)[0])
    assert (data["llm"]["on"], data["embeddings"]["on"]) == (False, False)


def test_extract_without_a_backend_creates_nothing(tmp_path: Path, agentctx_home: Path) -> None:
    result = run_cli("extract", "--session-id", "abc", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "agentctx: error: no extraction backend: auto: no ANTHROPIC_API_KEY; no claude CLI found "
        f"on $AGENTCTX_CLAUDE_BIN ({tmp_path / 'no-claude-cli'}); export ANTHROPIC_API_KEY=…, or "
        "sign in to Claude Code (`claude login`) (nothing was done)"
    ]
    assert not agentctx_home.exists()
