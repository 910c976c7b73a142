"""Near-duplicates: real SQLite, the real offline MiniLM, the LLM on a loopback Messages server."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import numpy as np
import pytest
from anthropic import AsyncAnthropic

from agentctx.consolidate import dedupe, merge_check
from agentctx.consolidate.timebox import TimeBox
from agentctx.core import db, home, search
from agentctx.embeddings import models, vecstore
from agentctx.store import Store
from tests.helpers import new_record
from tests.messages_server import ErrorReply, MessagesServer, Recorded, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agentctx.records import Record

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-4-5"

# Cosines under the offline MiniLM (int8) of the embedded text "[decision] [date] [p1] title — body",
# measured with find_candidates:
#   GRPC_A ~ GRPC_B        0.947  a paraphrase: a candidate, merged only with the LLM
#   RUFF_A ~ RUFF_B        0.990  near-identical: merged even without the LLM
#   RUFF_A ~ RUFF_C 0.995, RUFF_B ~ RUFF_C 0.995, RUFF_MERGED ~ RUFF_C 0.981 (the chain)
#   RETRY_3 ~ RETRY_5      0.991  distinct facts (a number) the embedding barely tells apart
#   PNPM_ALWAYS ~ NEVER    0.979  opposite rules, as close
#   PG_ANALYTICS ~ ORDERS  < 0.5  distinct decisions: never a candidate
GRPC_A = ("gRPC for internal services", "Internal services talk gRPC instead of REST")
GRPC_B = (
    "gRPC between internal services",
    "Internal services communicate over gRPC rather than REST",
)
GRPC_MERGED = "Internal services talk gRPC instead of REST (streaming and typed contracts)"
RUFF_A = ("Ruff formatting", "Format Python code with ruff format before every commit")
RUFF_B = ("Ruff formatting", "Format the Python code with ruff format before each commit")
RUFF_C = ("Ruff formatting", "Format Python code with ruff format before each commit")
RUFF_MERGED = "Format all Python code with ruff format before every commit"
RETRY_3 = ("Retry policy", "HTTP clients retry three times with exponential backoff")
RETRY_5 = ("Retry policy", "HTTP clients retry five times with exponential backoff")
PNPM_ALWAYS = ("Package manager", "Always use pnpm for installing packages")
PNPM_NEVER = ("Package manager", "Never use pnpm for installing packages")
WAREHOUSE_M = ("Warehouse size", "The nightly load runs on a MEDIUM warehouse")
WAREHOUSE_L = ("Warehouse size", "The nightly load runs on a LARGE warehouse")
PG_ANALYTICS = (
    "Postgres for analytics",
    "Analytics events are stored in Postgres, not in Elasticsearch",
)
PG_ORDERS = ("Postgres for orders", "Order data is stored in Postgres, not in MongoDB")

PAIR = re.compile(
    r'<pair id="(\w+)" type="\w+">\n<record>\nTitle: .*\nBody: (.*)\n</record>\n'
    r"<record>\nTitle: .*\nBody: (.*)\n</record>\n</pair>"
)


async def add(
    store: Store, text: tuple[str, str], record_type: str = "decision", **fields: Any
) -> Record:
    return await store.add(
        new_record(type=record_type, title=text[0], body=text[1], project_id="p1", **fields)
    )


async def fill(store: Store, embedder: models.Embedder, *texts: tuple[str, str]) -> list[Record]:
    records = [await add(store, text) for text in texts]
    assert await vecstore.embed_pending(store, embedder) == len(records)
    return records


def client(server: MessagesServer) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=0)


async def dedupe_run(
    store: Store,
    api: AsyncAnthropic | None = None,
    *,
    project_id: str = "p1",
    timebox: TimeBox | None = None,
    lines: list[str] | None = None,
) -> dedupe.DedupeReport:
    report = await dedupe.merge_near_duplicates(
        store,
        project_id,
        client=api,
        model=MODEL,
        timebox=timebox or TimeBox(None),
        log=(lines if lines is not None else []).append,
    )
    # every candidate ends merged, judged distinct, or left for the next run
    assert report.candidates == report.merged + report.kept_distinct + report.skipped
    return report


def judge(same: dict[frozenset[str], str | None]) -> Callable[[Recorded], ToolUseReply]:
    """A model that calls the pairs whose bodies are a key of ``same`` the same (merged body)."""

    def script(request: Recorded) -> ToolUseReply:
        verdicts = []
        for key, body_a, body_b in PAIR.findall("\n".join(request.texts())):
            pair = frozenset((body_a, body_b))
            verdicts.append(
                {"pair": key, "same": pair in same, "title": None, "body": same.get(pair)}
            )
        return ToolUseReply(merge_check.TOOL_NAME, {"verdicts": verdicts})

    return script


def asked_pairs(request: Recorded) -> list[frozenset[str]]:
    return [frozenset((a, b)) for _, a, b in PAIR.findall("\n".join(request.texts()))]


async def current(store: Store) -> dict[str, Record]:
    return {r.id: r for r in await store.list_records("p1", include_superseded=False)}


async def checks(store: Store) -> list[tuple[str, str, str]]:
    rows = await store.rows("SELECT record_a, record_b, verdict FROM merge_checks ORDER BY 1, 2")
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def pair_of(a: Record, b: Record) -> tuple[str, str]:
    first, second = sorted((a.id, b.id))
    return first, second


# -- with the LLM ----------------------------------------------------------------------------------


async def test_paraphrases_merge_and_distinct_ones_stay(
    store: Store, embedder: models.Embedder
) -> None:
    grpc_a, grpc_b, ruff_a, ruff_b, pg_a, pg_b, retry_3, retry_5 = await fill(
        store, embedder, GRPC_A, GRPC_B, RUFF_A, RUFF_B, PG_ANALYTICS, PG_ORDERS, RETRY_3, RETRY_5
    )
    model = judge(
        {
            frozenset((GRPC_A[1], GRPC_B[1])): GRPC_MERGED,
            frozenset((RUFF_A[1], RUFF_B[1])): None,  # same, and A's body already says it all
        }
    )
    with MessagesServer(model) as server:
        async with client(server) as api:
            report = await dedupe_run(store, api)
    assert report.pairs_scanned == 8 * 7 // 2
    assert (report.candidates, report.asked, report.merged, report.kept_distinct) == (3, 3, 2, 1)
    assert report.llm_errors == 0 and not report.unfinished
    assert report.calls == 1 and report.cost_usd > 0

    # one call for the three pairs: forced strict tool, no temperature (anthropic 2.14 has none)
    (request,) = server.messages_requests()
    body = request.body
    assert body["model"] == MODEL
    assert body["tool_choice"] == {"type": "tool", "name": merge_check.TOOL_NAME}
    assert body["tools"][0]["strict"] is True
    assert body["tools"][0]["input_schema"] == merge_check.INPUT_SCHEMA
    assert "temperature" not in body
    assert set(asked_pairs(request)) == {
        frozenset((GRPC_A[1], GRPC_B[1])),
        frozenset((RUFF_A[1], RUFF_B[1])),
        frozenset((RETRY_3[1], RETRY_5[1])),
    }
    assert PG_ANALYTICS[1] not in "\n".join(request.texts())

    now = await current(store)
    assert set(now) == {grpc_a.id, ruff_a.id, pg_a.id, pg_b.id, retry_3.id, retry_5.id}
    merged = now[grpc_a.id]  # both explicit and unreinforced: the older one stays
    assert merged.body == GRPC_MERGED and merged.pending_embedding  # re-embedded next run
    assert now[ruff_a.id].body == RUFF_A[1] and not now[ruff_a.id].pending_embedding
    assert (await store.get(grpc_b.id)).superseded_by == grpc_a.id
    assert (await store.get(ruff_b.id)).superseded_by == ruff_a.id
    assert await checks(store) == sorted(
        [
            (*pair_of(grpc_a, grpc_b), "same"),
            (*pair_of(ruff_a, ruff_b), "same"),
            (*pair_of(retry_3, retry_5), "distinct"),
        ]
    )


async def test_a_distinct_verdict_is_not_asked_again(
    store: Store, embedder: models.Embedder
) -> None:
    retry_3, retry_5 = await fill(store, embedder, RETRY_3, RETRY_5)
    with MessagesServer(judge({})) as server:
        async with client(server) as api:
            first = await dedupe_run(store, api)
            second = await dedupe_run(store, api)
    assert (first.asked, first.kept_distinct) == (1, 1)
    assert (second.pairs_scanned, second.candidates, second.asked) == (1, 0, 0)
    assert len(server.messages_requests()) == 1  # no second request
    assert await checks(store) == [(*pair_of(retry_3, retry_5), "distinct")]
    assert set(await current(store)) == {retry_3.id, retry_5.id}


@pytest.mark.parametrize("status", [500, 529])
async def test_an_api_error_merges_and_records_nothing(
    store: Store, embedder: models.Embedder, status: int
) -> None:
    grpc_a, grpc_b = await fill(store, embedder, GRPC_A, GRPC_B)
    lines: list[str] = []
    same = judge({frozenset((GRPC_A[1], GRPC_B[1])): GRPC_MERGED})
    with MessagesServer(replies=[ErrorReply(status)], default=ErrorReply(400)) as server:
        async with client(server) as api:
            failed = await dedupe_run(store, api, lines=lines)
            assert (failed.asked, failed.merged, failed.llm_errors, failed.skipped) == (1, 0, 1, 1)
            assert await checks(store) == []
            assert set(await current(store)) == {grpc_a.id, grpc_b.id}
            assert any("failed" in line and "next run" in line for line in lines)
            server.push(same(server.messages_requests()[0]))  # the model answers this time
            retried = await dedupe_run(store, api)
    assert len(server.messages_requests()) == 2  # the next run asked again
    assert (retried.asked, retried.merged) == (1, 1)
    assert set(await current(store)) == {grpc_a.id}


async def test_a_record_edited_during_the_check_is_skipped(
    store: Store, embedder: models.Embedder
) -> None:
    grpc_a, grpc_b = await fill(store, embedder, GRPC_A, GRPC_B)
    token = anyio.lowlevel.current_token()
    same = judge({frozenset((GRPC_A[1], GRPC_B[1])): GRPC_MERGED})
    async with await Store.open() as other:  # another process editing meanwhile

        async def edit() -> None:
            await other.edit(grpc_b.id, body="Internal services use gRPC; REST stays public")

        def script(request: Recorded) -> ToolUseReply:
            anyio.from_thread.run(edit, token=token)  # between the scan and the merge
            return same(request)

        with MessagesServer(script) as server:
            async with client(server) as api:
                report = await dedupe_run(store, api)
    assert (report.asked, report.merged, report.skipped) == (1, 0, 1)
    assert await checks(store) == []
    now = await current(store)
    assert grpc_a.id in now and grpc_b.id not in now
    assert now[grpc_a.id].body == GRPC_A[1]
    edited = (await store.get(grpc_b.id)).superseded_by
    assert edited in now and now[edited].body == "Internal services use gRPC; REST stays public"


async def test_a_chain_resolves_over_two_runs(store: Store, embedder: models.Embedder) -> None:
    _ruff_a, _ruff_b, ruff_c = await fill(store, embedder, RUFF_A, RUFF_B, RUFF_C)
    bodies = (RUFF_A[1], RUFF_B[1], RUFF_C[1], RUFF_MERGED)
    model = judge({frozenset((x, y)): RUFF_MERGED for x in bodies for y in bodies if x != y})
    with MessagesServer(model) as server:
        async with client(server) as api:
            first = await dedupe_run(store, api)
            # one pair asked: the survivor's text changed, its vector is stale until re-embedded
            assert (first.candidates, first.asked, first.merged, first.skipped) == (3, 1, 1, 2)
            assert len(await current(store)) == 2
            assert await vecstore.embed_pending(store, embedder) == 1
            second = await dedupe_run(store, api)
    assert (second.candidates, second.asked, second.merged) == (1, 1, 1)
    requests = server.messages_requests()
    assert [len(asked_pairs(r)) for r in requests] == [1, 1]
    assert RUFF_MERGED in asked_pairs(requests[1])[0]  # the merged text, embedded again
    now = await current(store)
    assert len(now) == 1
    (survivor,) = now.values()
    assert survivor.body == RUFF_MERGED
    assert survivor.reinforce_count == 2  # three records, each seen in one session
    # C is the newest: the first merge supersedes it by the record that stays to the end
    assert {r.id for r in await store.history(ruff_c.id)} == {ruff_c.id, survivor.id}


async def test_a_zero_time_box_does_nothing(store: Store, embedder: models.Embedder) -> None:
    await fill(store, embedder, GRPC_A, GRPC_B, RUFF_A, RUFF_B)
    with MessagesServer(judge({})) as server:
        async with client(server) as api:
            report = await dedupe_run(store, api, timebox=TimeBox(0))
    assert report.unfinished and report.to_dict()["unfinished"] is True
    assert (report.pairs_scanned, report.candidates, report.asked, report.merged) == (0, 0, 0, 0)
    assert server.requests == []
    assert len(await current(store)) == 4 and await checks(store) == []
    offline = await dedupe_run(store, timebox=TimeBox(0))
    assert offline.unfinished and offline.merged == 0 and len(await current(store)) == 4


# -- without the LLM -------------------------------------------------------------------------------


async def test_without_llm_only_097_and_safe_pairs_merge(
    store: Store, embedder: models.Embedder
) -> None:
    grpc_a, grpc_b, ruff_a, ruff_b, retry_3, retry_5, always, never = await fill(
        store, embedder, GRPC_A, GRPC_B, RUFF_A, RUFF_B, RETRY_3, RETRY_5, PNPM_ALWAYS, PNPM_NEVER
    )
    # profile records are kept unique by key, never merged here, however alike they read
    await add(store, RUFF_A, "profile", key="formatter")
    await add(store, RUFF_B, "profile", key="formatter-ci")
    assert await vecstore.embed_pending(store, embedder) == 2
    report = await dedupe_run(store)
    assert report.pairs_scanned == 8 * 7 // 2  # the profile records are not compared
    assert (report.candidates, report.merged, report.skipped, report.asked) == (4, 1, 3, 0)
    assert report.calls == 0 and report.cost_usd == 0
    now = await current(store)
    assert ruff_b.id not in now  # 0.990, same numbers and polarity
    for kept in (grpc_a, grpc_b, retry_3, retry_5, always, never):  # 0.947; number; never
        assert kept.id in now
    assert len([r for r in now.values() if r.type == "profile"]) == 2
    assert await checks(store) == [(*pair_of(ruff_a, ruff_b), "same")]  # nothing else recorded


async def test_without_llm_a_pair_differing_in_one_word_is_left_alone(
    store: Store, embedder: models.Embedder
) -> None:
    """The calibration set's MEDIUM / LARGE warehouse: 0.988, no number or polarity word."""
    medium, large, ruff_a, ruff_b = await fill(
        store, embedder, WAREHOUSE_M, WAREHOUSE_L, RUFF_A, RUFF_B
    )
    report = await dedupe_run(store)
    assert (report.candidates, report.merged, report.skipped) == (2, 1, 1)
    now = await current(store)
    assert medium.id in now and large.id in now
    assert len({ruff_a.id, ruff_b.id} & set(now)) == 1
    assert await checks(store) == [(*pair_of(ruff_a, ruff_b), "same")]


async def test_a_merge_carries_counts_entities_edges_and_history(
    store: Store, embedder: models.Embedder
) -> None:
    older = await add(store, RUFF_A, confidence="inferred", keywords=["ruff", "format"])
    newer = await add(store, RUFF_B, keywords=["precommit"])  # explicit: the survivor
    async with store.transaction() as tx:
        for session in ("s1", "s2"):
            await tx.reinforce(older.id, explicit=False, threshold=99)
            assert await tx.mark_seen_in(older.id, session)
        await tx.reinforce(newer.id, explicit=False, threshold=99)
        await tx.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) "
            "VALUES ('n1', 'p1', 'file', 'pyproject.toml', '2026-01-01T00:00:00.000000Z')"
        )
        await tx.execute(
            "INSERT INTO record_entities(record_id, entity_id) VALUES (?, 'n1')", (older.id,)
        )
        await tx.execute("UPDATE records SET access_count = 3 WHERE id = ?", (older.id,))
    assert await vecstore.embed_pending(store, embedder) == 2
    marker = anyio.Path(home.sub("digests")) / "p1.changed"
    before = await marker.read_text()

    report = await dedupe_run(store)

    assert report.merged == 1
    survivor, loser = await store.get(newer.id), await store.get(older.id)
    assert survivor.is_current and survivor.confidence == "explicit"
    # the older one was seen in 3 sessions (count 2), the newer in 2 (count 1): 5 sessions, count 4
    assert survivor.reinforce_count == 2 + 1 + 1
    assert survivor.access_count == 3
    assert set(survivor.keywords.split()) == {"ruff", "format", "precommit"}
    assert survivor.body == RUFF_B[1] and not survivor.pending_embedding
    assert loser.superseded_by == survivor.id and loser.superseded_at is not None
    assert [r.id for r in await store.history(loser.id)] == [older.id, newer.id]
    rows = await store.rows(
        "SELECT entity_id FROM record_entities WHERE record_id = ?", (newer.id,)
    )
    assert [r[0] for r in rows] == ["n1"]
    edges = await store.rows(
        "SELECT to_id, rel_type FROM edges WHERE from_id = ? ORDER BY rel_type, to_id", (newer.id,)
    )
    assert [tuple(e) for e in edges] == [
        ("s1", "derives_from"),
        ("s2", "derives_from"),
        (older.id, "supersedes"),
    ]
    assert int(await marker.read_text()) > int(before)  # the project's digest is stale


async def test_a_chain_merges_in_one_run_without_llm(
    store: Store, embedder: models.Embedder
) -> None:
    records = await fill(store, embedder, RUFF_A, RUFF_B, RUFF_C)
    lines: list[str] = []
    report = await dedupe_run(store, lines=lines)
    # B~C or A~C (0.995) first, C is merged away; the pair with C left is skipped; A~B (0.990)
    # merges into whichever absorbed C (it is reinforced once now). All in one run: without the LLM
    # the survivor keeps its text, so its vector still holds.
    assert (report.candidates, report.merged, report.skipped) == (3, 2, 1)
    now = await current(store)
    assert len(now) == 1
    (survivor,) = now.values()
    assert survivor.reinforce_count == 2
    for record in records:
        if record.id != survivor.id:
            assert (await store.get(record.id)).superseded_by == survivor.id
    assert sum("merged" in line for line in lines) == 2


async def test_global_preferences_are_deduplicated_as_global(
    store: Store, embedder: models.Embedder
) -> None:
    first = await add(store, RUFF_A, "preference", scope="global")
    second = await add(store, RUFF_B, "preference", scope="global")
    assert first.project_id == "global"
    assert await vecstore.embed_pending(store, embedder) == 2
    assert (await dedupe_run(store)).pairs_scanned == 0  # a project's pass leaves them alone
    report = await dedupe_run(store, project_id="global")
    assert report.merged == 1
    assert (await store.get(second.id)).superseded_by == first.id


# -- the scan --------------------------------------------------------------------------------------


async def test_vec0_and_numpy_find_the_same_candidates(
    tmp_path: Path, embedder: models.Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = (GRPC_A, GRPC_B, RUFF_A, RUFF_B, RUFF_C, RETRY_3, RETRY_5, PG_ANALYTICS, PG_ORDERS)

    async def scan(path: str) -> tuple[bool, list[tuple[int, int, float]]]:
        async with await Store.open(path) as opened:
            records = await fill(opened, embedder, *texts)
            index = {r.id: i for i, r in enumerate(records)}
            found = await dedupe.find_candidates(opened, "p1")
            pairs = []
            for c in found.candidates:
                i, j = sorted((index[c.a], index[c.b]))
                pairs.append((i, j, c.similarity))
            return vecstore.uses_vec(opened), pairs

    with_vec, vec_pairs = await scan(str(tmp_path / "vec.db"))

    def refuse(conn: Any, caps: db.Capabilities) -> None:
        caps.vec_error = "sqlite-vec disabled by the test"

    monkeypatch.setattr(db, "_load_vec", refuse)
    with_blob, blob_pairs = await scan(str(tmp_path / "blob.db"))
    assert with_vec and not with_blob
    assert [p[:2] for p in vec_pairs] == [p[:2] for p in blob_pairs]
    assert np.allclose([p[2] for p in vec_pairs], [p[2] for p in blob_pairs], atol=1e-6)
    assert {p[:2] for p in vec_pairs} == {(0, 1), (2, 3), (2, 4), (3, 4), (5, 6)}


async def test_load_vectors_reads_the_same_by_id_list_or_by_scan(
    store: Store, embedder: models.Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = await fill(store, embedder, GRPC_A, GRPC_B, RUFF_A)
    wanted = [records[0].id, records[2].id, "no-such-record"]
    listed = await vecstore.load_vectors(store, wanted)
    monkeypatch.setattr(vecstore, "_IN_MAX", 1)  # more ids than an IN list takes: one streamed scan
    scanned = await vecstore.load_vectors(store, wanted)
    assert vecstore.uses_vec(store)
    assert set(listed) == set(scanned) == {records[0].id, records[2].id}
    for record_id, vector in listed.items():
        assert vector.shape == (384,) and np.isclose(float(np.linalg.norm(vector)), 1.0)
        assert np.array_equal(vector, scanned[record_id])
        ((nearest_id, similarity),) = await vecstore.nearest(store, vector, 1)
        assert nearest_id == record_id and similarity > 0.999
    assert await vecstore.load_vectors(store, []) == {}


def test_similar_pairs_blockwise_equals_the_full_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((300, 16)).astype(np.float32)
    matrix[150:] = matrix[:150] + 0.05 * rng.standard_normal((150, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    full = matrix @ matrix.T
    expected = {(i, j) for i in range(300) for j in range(i + 1, 300) if full[i, j] > 0.92}
    assert len(expected) >= 100
    monkeypatch.setattr(dedupe, "BLOCK", 64)  # several blocks, each against the rest
    found = dedupe.similar_pairs(matrix, 0.92)
    assert {(i, j) for i, j, _ in found} == expected
    assert [s for _, _, s in found] == sorted((s for _, _, s in found), reverse=True)
    top = dedupe.similar_pairs(matrix, 0.92, limit=10)
    assert top == found[:10]


def test_the_survivor_order() -> None:
    base = (
        new_record(type="decision", title="t", body="b", project_id="p1")
        .validated()
        .to_record("01B", "2026-02-01T00:00:00.000000Z")
    )
    older = replace(base, id="01C", valid_from="2026-01-01T00:00:00.000000Z")
    assert dedupe.choose_survivor(base, older) is older
    assert dedupe.choose_survivor(base, replace(base, id="01A")).id == "01A"
    reinforced = replace(base, reinforce_count=2)
    assert dedupe.choose_survivor(older, reinforced) is reinforced
    stronger = replace(base, confidence="reinforced")
    assert dedupe.choose_survivor(replace(reinforced, confidence="inferred"), stronger) is stronger
    explicit = replace(base, confidence="explicit")
    assert dedupe.choose_survivor(replace(older, confidence="reinforced"), explicit) is explicit
    pinned = replace(base, confidence="inferred", pinned=True)
    assert dedupe.choose_survivor(explicit, pinned) is pinned


def test_what_merges_without_the_llm() -> None:
    def record(body: str) -> Record:
        return (
            new_record(type="decision", title="Retry policy", body=body, project_id="p1")
            .validated()
            .to_record("01A", "2026-02-01T00:00:00.000000Z")
        )

    same = dedupe.safe_without_llm
    assert same(record("Retry calls with backoff"), record("Retry the calls with backoff."))
    assert not same(record("Retry three times"), record("Retry five times"))
    assert not same(record("Python 3.11 everywhere"), record("Python 3.12 everywhere"))
    assert not same(record("Always use pnpm"), record("Never use pnpm"))
    assert not same(record("Don't mock the database"), record("Do mock the database"))
    assert not same(record("Enable strict mode"), record("Disable strict mode"))
    # one content word differs: no number or polarity word tells these apart (calibration set)
    medium, large = (
        record("The nightly load runs on a MEDIUM warehouse"),
        record("The nightly load runs on a LARGE warehouse"),
    )
    assert dedupe.same_markers(medium, large) and not same(medium, large)
    assert not same(record("Reads go to the replica"), record("Writes go to the replica"))
    assert not same(
        record("Strict mode is true by default"), record("Strict mode is false by default")
    )
    assert not same(record("Migrate before the deploy"), record("Migrate after the deploy"))
    assert not same(record("Retry idempotent calls"), record("Retry calls"))  # a word more
    assert not same(record("Загрузка на среднем складе"), record("Загрузка на большом складе"))
    # pure rewordings: stop words, inflections, "every" / "each", case and punctuation
    assert same(
        record("Format Python code with ruff format before every commit"),
        record("Format the Python code with Ruff format before each commit."),
    )
    assert same(
        record("Tagged releases are deployed by the pipeline"),
        record("The pipeline deploys tagged releases"),
    )
    assert same(record("Cache the policies"), record("Policies are cached"))


def test_the_content_words_that_differ() -> None:
    def record(title: str, body: str) -> Record:
        return (
            new_record(type="decision", title=title, body=body, project_id="p1")
            .validated()
            .to_record("01A", "2026-02-01T00:00:00.000000Z")
        )

    differ = dedupe.differing_words
    base = record("Warehouse size", "The nightly load runs on a MEDIUM warehouse")
    assert (
        differ(base, record("Warehouse size", "Nightly loads run on a medium warehouse")) == set()
    )
    assert differ(base, record("Warehouse size", "The nightly load runs on a LARGE warehouse")) == {
        "medium",
        "larg",
    }
    assert differ(base, record("Warehouse sizes", "The nightly load runs on a warehouse")) == {
        "medium"
    }
    # the title counts as much as the body
    assert differ(base, record("Compute size", "The nightly load runs on a MEDIUM warehouse")) == {
        "comput"
    }
    # uses/used/using are the stop word "use"; "self" and "return" (in more than a quarter of
    # code documents) are syntax, below the bound; "true" is not
    assert differ(record("t", "Handlers use self"), record("t", "Handlers used it")) == set()
    assert differ(record("t", "Handlers return"), record("t", "Handlers")) == set()
    assert differ(record("t", "Handlers true"), record("t", "Handlers")) == {"tru"}
    assert search.specificity("true") >= dedupe.CONTENT_SPECIFICITY
    assert search.specificity("return") < dedupe.CONTENT_SPECIFICITY
    assert [dedupe.fold(w) for w in ("tags", "tagged", "tag", "policies", "string", "speed")] == [
        "tag",
        "tag",
        "tag",
        "policy",
        "string",
        "speed",
    ]


def test_merge_check_answers_are_parsed_pair_by_pair() -> None:
    long_body = "x" * 2001
    answer = merge_check.parse(
        {
            "verdicts": [
                {"pair": "1", "same": True, "title": "  A   title ", "body": " merged "},
                {"pair": "1", "same": False, "title": None, "body": None},  # a repeat: ignored
                {"pair": "2", "same": False, "title": None, "body": None},
                {"pair": "3", "same": True, "title": None, "body": long_body},  # cannot store
                {"pair": "4", "same": "yes", "title": None, "body": None},  # not a boolean
                {"pair": "9", "same": True, "title": None, "body": None},  # not asked
                {"pair": "5", "same": True, "title": None, "body": None},  # keep survivor's text
            ]
        },
        {"1", "2", "3", "4", "5"},
    )
    assert answer.verdicts == {
        "1": merge_check.Verdict(True, "A title", "merged"),
        "2": merge_check.Verdict(False),
        "5": merge_check.Verdict(True, None, None),
    }
    assert answer.problem == "2 pair(s) without a usable verdict"
    assert merge_check.parse({"nothing": []}, {"1"}).verdicts == {}
    texts = [merge_check.PairText(str(n), "decision", "t", "b" * 3000, "t", "b") for n in range(9)]
    assert [len(b) for b in merge_check.batches(texts)] == [5, 4]  # about BATCH_CHARS each
    small = [merge_check.PairText(str(n), "decision", "t", "b", "t", "b") for n in range(10)]
    assert [len(b) for b in merge_check.batches(small)] == [8, 2]


# -- crash safety ----------------------------------------------------------------------------------

FACTS = [
    ("Queue", "Background jobs run on RabbitMQ"),
    ("Auth", "Sessions are stored in signed cookies"),
    ("Logging", "Services log JSON lines to stdout"),
    ("Frontend", "The web app is written in Svelte"),
    ("Database", "Analytics events are kept in ClickHouse"),
    ("Search", "Product search uses Meilisearch"),
    ("Deploys", "Deploys go through Argo CD"),
    ("Secrets", "Secrets come from Vault at start-up"),
    ("Images", "Images are resized by imgproxy"),
    ("Email", "Transactional email is sent with Postmark"),
    ("Payments", "Payments are processed by Stripe"),
    ("Tests", "Integration tests use Testcontainers"),
    ("Monitoring", "Metrics are scraped by Prometheus"),
    ("Tracing", "Traces are exported over OpenTelemetry"),
    ("Migrations", "Schema migrations are written with Alembic"),
    ("API docs", "The public API is described in OpenAPI"),
    ("Caching", "Hot queries are cached in Redis"),
    ("Feature flags", "Feature flags live in Unleash"),
    ("CI", "CI runs on GitHub Actions"),
    ("Linting", "TypeScript is linted with ESLint"),
    ("Mobile", "The mobile app is built with Flutter"),
    ("Storage", "Uploads are stored in S3 buckets"),
    ("Scheduling", "Cron jobs are defined in Kubernetes CronJobs"),
    ("Errors", "Exceptions are reported to Sentry"),
    ("CDN", "Static assets are served from Cloudflare"),
    ("Maps", "Maps are rendered with MapLibre"),
    ("PDF", "Invoices are rendered to PDF with WeasyPrint"),
    ("Chat", "Support chat runs on Intercom"),
    ("DNS", "DNS records are managed in Terraform"),
    ("Analytics", "Product analytics go to PostHog"),
]
# Each fact three ways, all three pairs of a fact at 0.97 or more, no pair across facts above 0.92.
#: Three wordings of each fact that merge without the LLM (only punctuation and case differ: a
#: different word, even "agreed", makes safe_without_llm wait for the LLM).
VARIANTS = [(title, v) for title, body in FACTS for v in (body, f"{body}.", f"{body.lower()}!")]
DEDUPE_SCRIPT = """
import anyio
from agentctx.consolidate.dedupe import merge_near_duplicates
from agentctx.consolidate.timebox import TimeBox
from agentctx.store import Store

async def main():
    async with await Store.open() as store:
        report = await merge_near_duplicates(
            store, "p1", client=None, model="none", timebox=TimeBox(None),
            log=lambda line: print(line, flush=True),
        )
    print("done", report.merged, flush=True)

anyio.run(main)
"""


def _run_and_kill(home_dir: str, kill_after: int) -> int:
    """Run a pass in a child process and SIGKILL it after its ``kill_after``-th merge line."""
    with subprocess.Popen(
        [sys.executable, "-c", DEDUPE_SCRIPT],
        env={**os.environ, "AGENTCTX_HOME": home_dir},
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            seen += line.startswith("dedupe p1: merged")
            if seen == kill_after:
                os.kill(proc.pid, signal.SIGKILL)
                break
        return proc.wait(timeout=60)


async def _invariants(store: Store) -> tuple[set[str], int]:
    """Nothing half merged, nothing doubled: every superseded record has its edge and its verdict."""
    records = await store.list_records("p1")
    same = {(a, b) for a, b, v in await checks(store) if v == "same"}
    assert all(v == "same" for _, _, v in await checks(store))
    superseded = [r for r in records if not r.is_current]
    assert len(same) == len(superseded)
    for record in superseded:
        assert record.superseded_by is not None
        assert tuple(sorted((record.id, record.superseded_by))) in same
        edge = await store.row(
            "SELECT 1 FROM edges WHERE from_id = ? AND to_id = ? AND rel_type = 'supersedes'",
            (record.superseded_by, record.id),
        )
        assert edge is not None
    live = {r.id for r in records if r.is_current}
    # every original record was seen in one session: merges move the counts, never lose or add
    assert sum(r.reinforce_count + 1 for r in records if r.is_current) == len(VARIANTS)
    return live, len(superseded)


@pytest.mark.slow  # kill -9 trials of merging processes
async def test_kill_9_during_merges_leaves_whole_merges(
    embedder: models.Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await Store.open() as store:
        for text in VARIANTS:
            await add(store, text)
        assert await vecstore.embed_pending(store, embedder) == len(VARIANTS)
    seed = tmp_path / "seed.db"
    shutil.copy(home.db_path(), seed)
    for suffix in ("-wal", "-shm"):
        assert not await anyio.Path(home.db_path() + suffix).exists()  # closed cleanly: one file

    def trial_home(name: str) -> str:
        folder = tmp_path / name
        folder.mkdir()
        shutil.copy(seed, folder / os.path.basename(home.db_path()))
        monkeypatch.setenv("AGENTCTX_HOME", str(folder))
        return str(folder)

    trial_home("reference")
    async with await Store.open() as reference:
        full = await dedupe_run(reference)
        expected, merges = await _invariants(reference)
    assert full.merged == merges == 2 * len(FACTS) and len(expected) == len(FACTS)

    picker = random.Random(5)
    for trial in range(6):
        folder = trial_home(f"trial{trial}")
        kill_after = picker.randint(1, merges - 5)
        returncode = await anyio.to_thread.run_sync(_run_and_kill, folder, kill_after)
        assert returncode == -signal.SIGKILL, f"trial {trial}: not killed"
        async with await Store.open() as crashed:
            _, done = await _invariants(crashed)
            assert kill_after <= done <= merges, (trial, kill_after, done)
            rerun = await dedupe_run(crashed)  # the next run completes the work
            live, total = await _invariants(crashed)
        assert rerun.merged == merges - done
        assert (live, total) == (expected, merges), f"trial {trial} killed after {kill_after}"
