"""Consolidation as a whole: the command, the lock, the time box, the worker, kill -9 at random points.

Real SQLite, the real offline all-MiniLM-L6-v2 through fastembed, real subprocesses; llm off (the
Haiku merge confirmation has its own tests in test_dedupe.py).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from agentctx import config
from agentctx.consolidate import consolidate
from agentctx.consolidate.ranking import rank_decisions
from agentctx.core import digests
from agentctx.core.locks import ProcessLock
from agentctx.embeddings import models, vecstore
from agentctx.records import NewRecord
from agentctx.store import Store
from tests import minilm
from tests.helpers import new_record, run_cli

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.records import NewRecord


pytestmark = pytest.mark.anyio

PROJECT = "p-consolidate"

TOPICS = {
    "auth": ["login", "session", "token", "OAuth", "password", "cookie", "refresh"],
    "db": ["Postgres", "migration", "index", "query", "transaction", "schema", "replica"],
    "build": ["Docker", "cache", "CI", "wheel", "layer", "runner", "artifact"],
    "ui": ["React", "component", "state", "render", "hook", "CSS", "layout"],
    "payments": ["Stripe", "invoice", "refund", "webhook", "currency", "tax", "checkout"],
}
TYPES = ["decision", "convention", "discovery", "bugfix"]


@pytest.fixture
def minilm_config(minilm_dir: Path) -> dict[str, Any]:
    """Settings that load the offline test model; written to the home's config for subprocesses."""
    config.set_value("embedding.model", minilm.NAME)
    config.set_value("embedding.path", str(minilm_dir))
    config.set_value("llm", "off")
    return config.load()


def _records(count: int, seed: int) -> list[NewRecord]:
    """Deterministic varied records, with a few exact-duplicate texts (merge without an LLM)."""
    rng = random.Random(seed)
    made: list[NewRecord] = []
    for index in range(count):
        topic = rng.choice(sorted(TOPICS))
        words = rng.sample(TOPICS[topic], 4)
        kind = TYPES[index % len(TYPES)]
        title = f"{topic} {words[0]} {index}"
        body = (
            f"For {topic}, the {words[0]} and the {words[1]} work through {words[2]}; "
            f"note {index}: keep {words[3]} in mind ({rng.randint(1, 10_000)})."
        )
        made.append(new_record(kind, title, body, PROJECT))
    for index in range(0, min(count, 40), 8):  # near-identical twins of a few records
        twin = made[index]
        made.append(new_record(twin.type, twin.title, twin.body + " ", PROJECT))
    return made


async def _seed(store: Store, count: int, seed: int = 7) -> None:
    async with store.transaction() as tx:
        for new in _records(count, seed):
            await tx.add(new)


async def _snapshot(store: Store) -> dict[str, Any]:
    """Everything a run must neither lose nor double."""
    rows = await store.rows("SELECT id, title, body, superseded_by FROM records ORDER BY id")
    archived = await store.rows("SELECT id FROM records_archive ORDER BY id")
    pending = await store.row("SELECT count(*) FROM records WHERE pending_embedding = 1")
    vec_table = "records_vec" if vecstore.uses_vec(store) else vecstore.BLOB_TABLE
    vectors = await store.rows(f"SELECT record_id FROM {vec_table}")
    return {
        "ids": [r[0] for r in rows],
        "current": sorted((r[1], r[2]) for r in rows if r[3] is None),
        "superseded": sorted((r[0], r[3]) for r in rows if r[3] is not None),
        "archived": [r[0] for r in archived],
        "pending": int(pending[0]),
        "vectors": sorted(str(r[0]) for r in vectors),
    }


async def test_a_run_embeds_merges_scores_and_writes_the_digest(
    store: Store, minilm_config: dict[str, Any]
) -> None:
    await _seed(store, 60)
    lines: list[str] = []
    reports = await consolidate(store, PROJECT, settings=minilm_config, log=lines.append)
    assert [r.project_id for r in reports] == ["global", PROJECT]
    report = reports[1]
    assert report.status == "done", report.to_dict()
    assert report.mode == "vectors"
    assert set(report.steps) >= {"embed", "dedupe", "scores", "reinforce", "drift", "digest"}
    assert report.steps["embed"]["result"]["pending"] == 0
    after = await _snapshot(store)
    assert after["pending"] == 0
    assert len(after["vectors"]) == len(after["ids"])
    # The five exact twins were merged into their originals (≥ 0.97 without an LLM).
    assert len(after["superseded"]) == 5
    data = digests.read(PROJECT)
    assert data is not None
    assert data["tokens"] <= digests.MAX_TOKENS
    assert report.steps["digest"]["result"]["written"] is True


async def test_without_a_model_it_runs_keyword_only_and_retries_later(
    store: Store, tmp_path: Path
) -> None:
    await _seed(store, 12)
    settings = {**config.load(), "embedding.path": str(tmp_path / "no-such-model"), "llm": False}
    lines: list[str] = []
    models.clear_model_cache()
    reports = await consolidate(store, PROJECT, settings=settings, log=lines.append)
    report = reports[1]
    assert report.mode == "keyword"
    assert report.status == "done", report.to_dict()
    assert report.steps["dedupe"]["result"]["candidates"] == 0  # no vectors stored yet
    assert (await _snapshot(store))["pending"] == len(_records(12, 7))  # queued for a model
    assert digests.read(PROJECT) is not None
    assert any("keyword-only" in line for line in lines)


async def test_one_consolidation_per_project_at_a_time(
    store: Store, minilm_config: dict[str, Any]
) -> None:
    await _seed(store, 4)
    with ProcessLock(f"consolidate-{PROJECT}") as held:
        assert held
        reports = await consolidate(store, PROJECT, settings=minilm_config)
    assert [r.status for r in reports] == ["done", "locked"]
    assert reports[1].steps == {}


async def test_an_expired_time_box_leaves_the_rest_for_the_next_run(
    store: Store, minilm_config: dict[str, Any]
) -> None:
    await _seed(store, 40)
    first = await consolidate(store, PROJECT, settings=minilm_config, time_box=1e-9)
    assert first[0].status == "unfinished"
    assert (await _snapshot(store))["pending"] > 0
    second = await consolidate(store, PROJECT, settings=minilm_config)
    assert second[1].status == "done", second[1].to_dict()
    assert (await _snapshot(store))["pending"] == 0


async def test_the_digest_ranks_what_the_project_works_on_now(
    store: Store, minilm_config: dict[str, Any]
) -> None:
    adds = [
        new_record("decision", "Stripe webhooks", "Stripe webhooks are verified with the signing secret", PROJECT),
        new_record("decision", "Postgres replicas", "Read queries go to the Postgres read replica", PROJECT),
        new_record("convention", "React state", "React components keep state in hooks, not classes", PROJECT),
        new_record("handover", "Next: refunds", "Working on Stripe refunds and the refund webhook retries", PROJECT),
    ]  # fmt: skip
    for new in adds:
        await store.add(new)
    ranked_keyword = await rank_decisions(store, PROJECT)
    assert ranked_keyword[0] == (await _id_of(store, "Stripe webhooks"))
    await consolidate(store, PROJECT, settings=minilm_config)
    data = digests.read(PROJECT)
    assert data is not None
    text = data["text"]
    assert text.index("Stripe webhooks") < text.index("Postgres replicas")
    assert text.index("Stripe webhooks") < text.index("React state")


async def _id_of(store: Store, title: str) -> str:
    row = await store.row("SELECT id FROM records WHERE title = ?", (title,))
    return str(row[0])


def test_the_command_reports_json_and_refuses_bad_options(
    minilm_config: dict[str, Any], project_dir: Path
) -> None:
    result = run_cli("consolidate", "--json", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)
    assert reports[0]["project_id"] == "global"
    assert {r["status"] for r in reports} == {"done"}
    both = run_cli("consolidate", "--all", "--project", "x", cwd=project_dir)
    assert both.returncode == 1
    assert "not both" in both.stderr
    bad = run_cli("consolidate", "--time-box", "0", cwd=project_dir)
    assert bad.returncode == 1
    assert "--time-box" in bad.stderr


async def test_the_session_end_worker_consolidates(
    store: Store, minilm_config: dict[str, Any]
) -> None:
    await _seed(store, 10)
    result = run_cli("worker", "session-end", "--project", PROJECT, "--no-extract")
    assert result.returncode == 0, result.stderr
    assert f"consolidate {PROJECT[:12]}: done" in result.stderr
    assert (await _snapshot(store))["pending"] == 0


def _consolidate_process() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentctx", "consolidate", "--project", PROJECT, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow  # ten consolidations killed and ten complete reruns: a minute or more
def test_kill_9_at_random_points_loses_and_doubles_nothing(
    minilm_config: dict[str, Any],
) -> None:
    """Ten runs killed at random moments, each followed by a complete run: same end state."""

    async def seed() -> dict[str, Any]:
        async with await Store.open() as store:
            await _seed(store, 400, seed=11)
            return await _snapshot(store)

    async def snapshot() -> dict[str, Any]:
        async with await Store.open() as store:
            return await _snapshot(store)

    before = anyio.run(seed)
    rng = random.Random(2026)
    first: dict[str, Any] | None = None
    for trial in range(10):
        proc = _consolidate_process()
        # Not a wait for something: the kill lands at a random moment of the run (model load,
        # embedding, merges, scores, digest...), which is the point of the trial.
        time.sleep(rng.uniform(0.2, 3.5))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        rerun = _consolidate_process()
        out, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err.decode()
        statuses = {r["status"] for r in json.loads(out)}
        assert statuses == {"done"}, (trial, out.decode())
        after = anyio.run(snapshot)
        assert after["pending"] == 0
        assert after["ids"] == before["ids"]  # nothing lost, nothing added
        assert len(after["vectors"]) == len(set(after["vectors"])) == len(after["ids"])
        assert len(after["superseded"]) == 5  # each twin merged exactly once
        current = after["current"]
        assert len(current) == len(set(current)) == len(before["ids"]) - 5
        if first is None:
            first = after
        else:
            assert after == first
