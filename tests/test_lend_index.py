"""The lent model's answer, fast (issue 25): the server's vector index and the hook's read.

The index (:class:`agentctx.mcp.lend.VectorIndex`) narrows a large store by the Hamming distance of
sign bits before scoring exactly; these tests hold the narrowing to what an exact scan finds, the
scope to the project and the global records, and the batched load to the vectors in the store. The
hook's read (:meth:`agentctx.core.meaning.Pending.hits`) uses an answer that came while its keyword
search ran, even when the deadline has passed. No wall-clock asserts: the speed is measured by
``benchmarks/hooks.py``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.core import db, home, meaning, vectors
from agentctx.core.project import identify
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.embeddings import models, vecstore
from agentctx.mcp import lend
from agentctx.store import Store
from tests.helpers import contract, payload, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from numpy.typing import NDArray

DIMS = 384


def clustered(n: int, rng: np.random.Generator) -> NDArray[np.float32]:
    """``n`` unit vectors around 40 centres (as a store's records crowd around its topics)."""
    centres = rng.normal(size=(40, DIMS)).astype(np.float32)
    rows = centres[rng.integers(40, size=n)] + rng.normal(0, 0.6, size=(n, DIMS)).astype(np.float32)
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def index_of(vectors: NDArray[np.float32], owners: list[str], batch: int = 500) -> lend.VectorIndex:
    rows = [(f"r{i:06d}", v.tobytes(), owners[i]) for i, v in enumerate(vectors)]
    return lend.VectorIndex.from_rows(
        (rows[i : i + batch] for i in range(0, len(rows), batch)), len(rows)
    )


def exact(vectors: NDArray[np.float32], owners: list[str], query: NDArray[np.float32],
          project: str, k: int) -> list[str]:  # fmt: skip
    """The k nearest ids in scope by the float32 cosines (the reference)."""
    scores = vectors @ (query / np.linalg.norm(query))
    scope = [i for i, p in enumerate(owners) if p in (project, GLOBAL_PROJECT_ID)]
    best = sorted(scope, key=lambda i: -float(scores[i]))[:k]
    return [f"r{i:06d}" for i in best]


def test_hamming_over_transposed_words_is_the_bitwise_distance() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(300, DIMS)).astype(np.float32)
    index = index_of(vectors, ["p"] * 300, batch=64)
    query = rng.normal(size=DIMS).astype(np.float32)
    signs = np.packbits(vectors > 0, axis=1) ^ np.packbits(query > 0)
    reference = np.unpackbits(signs, axis=1).sum(axis=1)
    assert index.bits.shape == (DIMS // 64, 300)
    assert index.hamming(query).tolist() == reference.tolist()


def test_closest_keeps_ties_and_partitions_when_they_are_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lend, "PREFILTER", 4)
    distance = np.array([9, 1, 5, 2, 5, 5, 7, 0, 30], dtype=np.uint16)
    # the 4th smallest is 5, held by three rows: all of them are kept
    assert sorted(lend.VectorIndex.closest(distance).tolist()) == [1, 2, 3, 4, 5, 7]
    many = np.array([3] * 20 + [0], dtype=np.uint16)  # ties would take 21 > 2 x 4 rows
    near = lend.VectorIndex.closest(many)
    assert len(near) == 4 and 20 in near.tolist()


def test_the_prefilter_finds_what_an_exact_scan_finds_within_the_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store past EXACT_MAX is narrowed by sign bits; the k nearest of the project and the
    global records are still found, and another project's records never are."""
    rng = np.random.default_rng(7)
    n = 6000
    vectors = clustered(n, rng)
    owners = [("p1", "p2", GLOBAL_PROJECT_ID)[i % 3] for i in range(n)]
    index = index_of(vectors, owners)
    assert len(index) == n and index.rows.dtype == np.int8
    overlap = 0
    for _trial in range(20):
        query = vectors[rng.integers(n)] + rng.normal(0, 0.05, DIMS).astype(np.float32)
        monkeypatch.setattr(lend, "EXACT_MAX", 10**9)  # every row of the scope scored
        scanned = index.nearest(query, "p1", 10)
        monkeypatch.setattr(lend, "EXACT_MAX", 1000)
        monkeypatch.setattr(lend, "PREFILTER", 400)
        hits = index.nearest(query, "p1", 10)
        assert hits == scanned  # the narrowing lost nothing here
        ids = [rid for rid, _cos in hits]
        assert len(ids) == 10 and all(owners[int(rid[1:])] != "p2" for rid in ids)
        assert [c for _r, c in hits] == sorted((c for _r, c in hits), reverse=True)
        overlap += len(set(ids) & set(exact(vectors, owners, query, "p1", 10)))
    assert overlap >= 0.9 * 200  # int8 rows: near ties of float32 cosines may swap
    assert index.nearest(vectors[0], "nowhere-else", 5)  # the global records are everyone's
    only = index_of(vectors[:50], ["p2"] * 50)
    assert only.nearest(vectors[0], "p1", 5) == []


def test_the_spread_is_the_prompts_cosines_to_the_records_in_scope() -> None:
    """The mean and deviation of the query's cosines to the project's and the global records (the
    tiers' scale): exact on a small scope, from evenly spaced rows on a large one."""
    rng = np.random.default_rng(7)
    vectors = clustered(6_000, rng)
    owners = ["p1" if i % 3 == 0 else "p2" if i % 3 == 1 else GLOBAL_PROJECT_ID
              for i in range(len(vectors))]  # fmt: skip
    index = index_of(vectors, owners)
    query = vectors[5] + rng.normal(0, 0.3, size=DIMS).astype(np.float32)
    scores = vectors @ (query / np.linalg.norm(query))
    for project in ("p1", "p2"):
        scope = np.array([p in (project, GLOBAL_PROJECT_ID) for p in owners])
        found = index.spread(query, project)
        assert found is not None
        assert abs(found[0] - float(scores[scope].mean())) < 0.01
        assert abs(found[1] - float(scores[scope].std())) < 0.01
    small = index_of(vectors[:300], owners[:300])
    mean, sd = small.spread(query, "p1") or (0.0, 0.0)
    scope = np.array([p in ("p1", GLOBAL_PROJECT_ID) for p in owners[:300]])
    assert abs(mean - float(scores[:300][scope].mean())) < 0.005  # int8 rows: near, not equal
    assert abs(sd - float(scores[:300][scope].std())) < 0.005
    assert index_of(vectors[:1], owners[:1]).spread(query, "p1") is None  # one row: no spread
    assert index.spread(query[:10], "p1") is None  # another model's size


def test_every_project_in_scope_skips_the_row_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    vectors = clustered(2500, rng)
    owners = ["p1" if i % 2 else GLOBAL_PROJECT_ID for i in range(2500)]
    index = index_of(vectors, owners)
    monkeypatch.setattr(lend, "EXACT_MAX", 1000)
    monkeypatch.setattr(lend, "PREFILTER", 300)
    query = vectors[11]
    assert index.nearest(query, "p1", 1)[0][0] == "r000011"
    assert index.scope("p1") is None  # the project and the global records: all rows
    assert index.scope("p9") is not None and index.scope("p9").size == 1250  # type: ignore[union-attr]


def test_rows_of_another_size_are_skipped() -> None:
    good = np.ones(DIMS, dtype=np.float32)
    rows = [("a", good.tobytes(), "p"), ("b", b"\x00" * 12, "p"), ("c", (-good).tobytes(), "p")]
    index = lend.VectorIndex.from_rows([rows[:2], rows[2:]], 3)
    assert index.ids == ["a", "c"]
    assert [rid for rid, _c in index.nearest(good, "p", 2)] == ["a", "c"]


def test_the_index_loads_the_stores_vectors_in_batches(
    project_dir: Path, minilm_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a real store (the offline MiniLM's vectors), a batch of two rows at a time: the same
    neighbours and cosines as the stored float32 vectors give."""
    ids = seed(project_dir, [
        {"type": "decision", "title": "Jobs run on arq", "body": "Celery was replaced by arq."},
        {"type": "convention", "title": "Money in minor units", "body": "Cents as integers."},
        {"type": "bugfix", "title": "Login loop fixed", "body": "The refresh cookie's path."},
    ])  # fmt: skip
    model = models.load_model(minilm_settings)
    assert model is not None

    async def embed() -> int:
        async with await Store.open() as store:
            return await vecstore.embed_pending(store, model)

    assert anyio.run(embed) == 3
    monkeypatch.setattr(lend, "_BATCH", 2)
    conn, caps = db.connect(home.db_path(), create=False, readonly=True)
    try:
        index = lend.VectorIndex.load(conn, bool(caps.vec_version))
        table = "records_vec" if caps.vec_version else vectors.BLOB_TABLE
        stored = {
            str(r[0]): np.frombuffer(r[1], dtype=np.float32)
            for r in conn.execute(f"SELECT record_id, embedding FROM {table}")
        }
    finally:
        conn.close()
    assert sorted(index.ids) == sorted(ids) and index.model == model.name
    query = model.embed_sync(["how do we store money amounts?"])[0]
    project = identify(str(project_dir)).project_id
    hits = index.nearest(query, project, 3)
    reference = sorted(ids, key=lambda i: -float(stored[i] @ query / np.linalg.norm(stored[i])))
    assert [rid for rid, _c in hits] == reference
    for rid, cos in hits:
        assert abs(cos - float(stored[rid] @ query / np.linalg.norm(stored[rid]))) < 0.01


# -- the hook's read -------------------------------------------------------------------------------


def test_an_answer_that_came_in_time_is_read_past_the_deadline() -> None:
    """The keyword search may outlast the deadline; the answer already in the socket is used."""
    mine, theirs = socket.socketpair()
    theirs.sendall(meaning.answer_line("ready", "m", [("01ABC", 0.61)]))
    pending = meaning.Pending(mine, time.monotonic() - 1)
    assert pending.hits(time.monotonic() - 0.5) == [("01ABC", 0.61)]
    assert pending.state == "ready"
    theirs.close()


def test_no_answer_past_the_deadline_is_late_at_once() -> None:
    mine, theirs = socket.socketpair()
    pending = meaning.Pending(mine, time.monotonic() - 1)
    assert pending.hits(time.monotonic() - 0.5) is None
    assert pending.state == "late" and "deadline" in pending.why
    theirs.close()


def test_half_an_answer_past_the_deadline_is_late_not_garbage() -> None:
    mine, theirs = socket.socketpair()
    theirs.sendall(meaning.answer_line("ready", "m", [("01ABC", 0.61)])[:10])
    pending = meaning.Pending(mine, time.monotonic())
    assert pending.hits(time.monotonic() + 0.05) is None
    assert pending.state == "late"
    theirs.close()


def test_the_prompt_hook_sends_before_it_loads_the_stores_driver() -> None:
    """The request goes out before the database driver is imported: the server embeds while the
    hook loads it (the driver comes with :mod:`agentctx.core.connect`)."""
    code = (
        "import sys; import agentctx.hooks.runner, agentctx.hooks.prompt; "
        "print(sorted(m for m in ('agentctx.core.db', 'agentctx.core.connect', 'sqlean') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_debug_log_has_the_prompts_timings(project_dir: Path, agentctx_home: Path) -> None:
    """With AGENTCTX_DEBUG, one line of each step's milliseconds (no server: ask, keywords, fused)."""
    seed(project_dir, [{"type": "convention", "title": "Money in minor units",
                        "body": "Amounts are stored as integer cents, never floats."}])  # fmt: skip
    event = payload("UserPromptSubmit", "s-timing", project_dir, prompt="how do we store money?")
    result = run_hook("user-prompt-submit", event, cwd=project_dir, env={"AGENTCTX_DEBUG": "1"})
    assert contract(result, "UserPromptSubmit")
    log = (agentctx_home / "logs" / "hooks.log").read_text()
    line = next(x for x in log.splitlines() if "timing ms:" in x)
    assert [
        step.split()[0] for step in line.split("timing ms: ")[1].split(" (")[0].split(", ")
    ] == ["ask", "keywords", "fused"]


def test_a_store_written_between_prompts_is_not_reindexed_after_every_answer(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change seen right after a rebuild waits REBUILD_SPACING times that rebuild's length (at
    least REBUILD_GAP_MIN): captures write the store between most prompts, and a rebuild of a
    large store is seconds of a core beside the hooks. Past the gap, the change is picked up."""
    from agentctx.retrieval import hybrid

    seed(project_dir, [{"type": "decision", "title": "Jobs run on arq", "body": "Celery went."}])
    monkeypatch.setattr(lend, "REBUILD_GAP_MIN", 3600.0)
    lender = lend.Lender(hybrid.QueryModel({"embeddings": False}), home.db_path())
    try:
        lender.refresh(wait=True)
        first = lender.index
        assert first is not None
        seed(project_dir, [{"type": "bugfix", "title": "Login loop", "body": "Cookie path."}])
        lender.refresh(wait=False)  # changed, but within the gap: nothing starts
        assert lender.index is first and not lender._rebuilding
        lender._next_build = 0.0  # the gap has passed
        lender.refresh(wait=False)
        deadline = time.monotonic() + 30
        while lender.index is first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lender.index is not first
    finally:
        lender.close()
