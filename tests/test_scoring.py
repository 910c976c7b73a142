"""Consolidation scores (half-lives, access, the low-score mark) and preference reinforcement."""

from __future__ import annotations

import time
from contextlib import closing
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from agentctx import config
from agentctx.consolidate.reinforce import reinforce_preferences
from agentctx.consolidate.scoring import rescore
from agentctx.consolidate.timebox import TimeBox
from agentctx.core import clock, db, digests
from agentctx.core.schema import GLOBAL_PROJECT_ID, INSERT_RECORD_SQL
from agentctx.core.search import CONFIDENCE_WEIGHT, HALF_LIFE_DAYS, TYPE_WEIGHT
from agentctx.extract import apply
from agentctx.retrieval import digest
from agentctx.store import LOW_SCORE, Store
from tests.helpers import new_record

if TYPE_CHECKING:
    from agentctx.core.shapes import Digest
    from agentctx.records import Record

pytestmark = pytest.mark.anyio

P = "a" * 64


def later(stamp: str, days: float) -> str:
    """The stored time ``days`` after ``stamp``."""
    return clock.format_time(datetime.fromisoformat(stamp) + timedelta(days=days))


async def score_at(store: Store, record: Record, now: str) -> float:
    await rescore(store, P, now=now)
    return (await store.get(record.id)).score


# -- scores ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "half_life"),
    [("handover", 14.0), ("bugfix", 60.0), ("discovery", 90.0), ("preference", 365.0)],
)
async def test_one_half_life_halves_the_score(store: Store, type_: str, half_life: float) -> None:
    assert HALF_LIFE_DAYS[type_] == half_life  # the documented half-lives (docs/consolidation.md)
    record = await store.add(new_record(type=type_))
    fresh = await score_at(store, record, record.valid_from)
    assert fresh == pytest.approx(TYPE_WEIGHT[type_])
    aged = await score_at(store, record, later(record.valid_from, half_life))
    assert aged == pytest.approx(fresh / 2, abs=1e-6)
    assert await score_at(store, record, later(record.valid_from, 2 * half_life)) == pytest.approx(
        fresh / 4, abs=1e-6
    )


@pytest.mark.parametrize("type_", ["decision", "convention", "profile"])
async def test_decisions_conventions_and_profile_never_decay(store: Store, type_: str) -> None:
    record = await store.add(new_record(type=type_, key="k" if type_ == "profile" else None))
    fresh = await score_at(store, record, record.valid_from)
    assert fresh == pytest.approx(TYPE_WEIGHT[type_])
    assert await score_at(store, record, later(record.valid_from, 3650)) == fresh


async def test_a_pinned_record_never_decays(store: Store) -> None:
    pinned = await store.add(new_record(type="handover", pinned=True))
    other = await store.add(new_record(type="handover", project_id="b" * 64))
    await rescore(store, None, now=later(pinned.valid_from, 365))
    assert (await store.get(pinned.id)).score == pytest.approx(TYPE_WEIGHT["handover"])
    assert (await store.get(other.id)).score < 0.8 * 0.5**26


async def test_confidence_weights_the_score(store: Store) -> None:
    explicit = await store.add(new_record(type="decision", title="Explicit one"))
    inferred = await store.add(
        new_record(type="decision", title="Inferred one", confidence="inferred")
    )
    await rescore(store, P, now=inferred.valid_from)
    assert (await store.get(explicit.id)).score == pytest.approx(1.3)
    assert (await store.get(inferred.id)).score == pytest.approx(
        1.3 * CONFIDENCE_WEIGHT["inferred"]
    )


async def test_reads_raise_the_score_and_the_lift_fades(store: Store) -> None:
    read = await store.add(new_record(type="discovery", title="Read often"))
    unread = await store.add(new_record(type="discovery", title="Never read"))
    for _ in range(3):
        await store.get_many([read.id])  # what ctx_get does: bumps access_count, last_accessed
    bumped = await store.get(read.id)
    assert bumped.access_count == 3 and bumped.last_accessed is not None
    now = bumped.last_accessed
    await rescore(store, P, now=now)
    lift_now = (await store.get(read.id)).score / (await store.get(unread.id)).score
    assert lift_now > 1.2
    await rescore(store, P, now=later(now, 30))  # one access half-life after the last read
    lift_later = (await store.get(read.id)).score / (await store.get(unread.id)).score
    assert lift_later - 1 == pytest.approx((lift_now - 1) / 2, rel=1e-3)


async def test_low_score_since_is_set_once_and_cleared(store: Store) -> None:
    record = await store.add(new_record(type="discovery", confidence="inferred"))
    start = record.valid_from
    await rescore(store, P, now=later(start, 200))
    assert (await store.get(record.id)).score >= LOW_SCORE
    assert await low_since(store, record.id) is None
    first = later(start, 300)  # 0.7 × 0.5^(300/90) ≈ 0.07
    await rescore(store, P, now=first)
    assert (await store.get(record.id)).score < LOW_SCORE
    assert await low_since(store, record.id) == first
    await rescore(store, P, now=later(start, 400))
    assert await low_since(store, record.id) == first  # when it first fell, not the last run
    await store.set_pinned(record.id, True)
    await rescore(store, P, now=later(start, 400))
    assert (await store.get(record.id)).score >= LOW_SCORE
    assert await low_since(store, record.id) is None


async def low_since(store: Store, record_id: str) -> str | None:
    row = await store.row("SELECT low_score_since FROM records WHERE id = ?", (record_id,))
    return None if row[0] is None else str(row[0])


async def test_rescore_writes_only_changes_and_leaves_history_alone(store: Store) -> None:
    old = await store.add(new_record(type="discovery", title="Old"))
    _, current = await store.supersede(old.id, "Newer text.", "changed")
    now = later(current.valid_from, 45)
    assert await rescore(store, P, now=now) == 1  # the current record only
    assert await rescore(store, P, now=now) == 0  # nothing changed since
    assert (await store.get(old.id)).score == 1.0
    assert await rescore(store, "other-project", now=now) == 0


async def test_scores_do_not_invalidate_the_digest(store: Store) -> None:
    await store.add(new_record(type="decision"))
    started = time.time_ns()
    assert await rescore(store, P, now=later(clock.now(), 1)) == 1
    probe = _probe()
    assert digests.write(probe, clock.now(), started) is not None  # no change marked since


async def test_an_expired_time_box_writes_nothing(store: Store) -> None:
    await store.add(new_record(type="discovery"))
    assert await rescore(store, P, now=later(clock.now(), 10), timebox=TimeBox(0)) == 0


async def test_ten_thousand_records_rescore_in_one_pass(store: Store) -> None:
    types = ("decision", "convention", "preference", "discovery", "bugfix")
    now = clock.now()
    rows = []
    for n in range(10_000):
        stamp = later(now, -(n % 400))
        draft = new_record(
            type=types[n % len(types)], title=f"Record {n}", valid_from=stamp
        ).validated()
        record = draft.to_record(clock.ulid(), now)
        rows.append(record.to_values())
    async with store.transaction() as tx:
        await tx.executemany(INSERT_RECORD_SQL, rows)
    written = await rescore(store, P, now=now)  # its speed: benchmarks/consolidate.py
    assert written == 10_000  # every score differs from the default 1.0
    assert await rescore(store, P, now=now) == 0


# -- reinforcement ---------------------------------------------------------------------------------


async def preference(store: Store, *, scope: str = "project", session: str = "s1") -> Record:
    return await store.add(
        new_record(
            type="preference",
            title="Prefer small commits",
            confidence="inferred",
            scope=scope,
            session_id=session,
        )
    )


async def seen_in(store: Store, record_id: str, *sessions: str) -> None:
    async with store.transaction() as tx:
        for session in sessions:
            await tx.mark_seen_in(record_id, session)


async def test_three_sessions_reinforce_two_do_not(store: Store) -> None:
    pref = await preference(store)
    await seen_in(store, pref.id, "s2")
    assert await reinforce_preferences(store, P, threshold=3) == 0
    assert (await store.get(pref.id)).confidence == "inferred"
    await seen_in(store, pref.id, "s3")
    assert await reinforce_preferences(store, P, threshold=3) == 1
    promoted = await store.get(pref.id)
    assert (promoted.confidence, promoted.reinforce_count) == ("reinforced", 2)
    assert await reinforce_preferences(store, P, threshold=3) == 0


async def test_only_distinct_sessions_count(store: Store) -> None:
    pref = await preference(store)
    other = await store.add(new_record(type="decision"))
    await seen_in(store, pref.id, "s1", other.id)  # its own session again; a record, not a session
    await seen_in(store, pref.id, "s2")
    assert await reinforce_preferences(store, P, threshold=3) == 0
    assert (await store.get(pref.id)).confidence == "inferred"


async def test_the_configured_threshold_is_used(store: Store) -> None:
    pref = await preference(store)
    await seen_in(store, pref.id, "s2")
    assert await reinforce_preferences(store, P) == 0  # default 3
    config.set_value("reinforcement_threshold", "2")
    assert await reinforce_preferences(store, P) == 1
    assert (await store.get(pref.id)).confidence == "reinforced"


async def test_only_current_inferred_preferences_are_promoted(store: Store) -> None:
    decision = await store.add(new_record(type="decision", confidence="inferred", session_id="s1"))
    explicit = await store.add(new_record(type="preference", title="Tabs", session_id="s1"))
    old = await preference(store)
    await seen_in(store, decision.id, "s2", "s3")
    await seen_in(store, explicit.id, "s2", "s3")
    await seen_in(store, old.id, "s2")
    _, current = await store.supersede(
        old.id, "Prefer tiny commits.", "merged", confidence="inferred", session_id="s3"
    )
    # The current version counts the sessions of the version it replaced: s1, s2 and its own s3.
    assert await reinforce_preferences(store, P, threshold=3) == 1
    assert (await store.get(current.id)).confidence == "reinforced"
    assert (await store.get(old.id)).confidence == "inferred"
    assert (await store.get(decision.id)).confidence == "inferred"
    assert (await store.get(explicit.id)).confidence == "explicit"


async def test_extraction_evidence_is_not_counted_twice(store: Store) -> None:
    output = {"preferences": [{"rule": "Prefer small commits", "scope": "global"}]}
    said = "I prefer small commits, everywhere"  # the developer's words: global is theirs
    for session in ("s1", "s2"):
        async with store.transaction() as tx:
            await apply.write(
                tx, apply.parse(output), project_id=P, session_id=session, threshold=3,
                user_text=said,
            )  # fmt: skip
    (pref,) = await store.list_records(GLOBAL_PROJECT_ID, types=("preference",))
    assert (pref.reinforce_count, pref.confidence) == (1, "inferred")
    assert await reinforce_preferences(store, P, threshold=3) == 0  # two sessions, not three
    explicit = {"preferences": [{**output["preferences"][0], "confidence": "explicit"}]}
    async with store.transaction() as tx:
        await apply.write(
            tx, apply.parse(explicit), project_id=P, session_id="s3", threshold=3, user_text=said
        )
    assert (await store.get(pref.id)).confidence == "explicit"  # extraction did it at once
    assert await reinforce_preferences(store, P, threshold=3) == 0


def digest_text(store: Store) -> str:
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        return str(digest.build(conn, P)["text"])


async def test_a_reinforced_global_preference_enters_the_digest(store: Store) -> None:
    # something for the digest to show
    await store.add(new_record(type="decision", title="Use sqlite"))
    pref = await preference(store, scope="global")
    await seen_in(store, pref.id, "s2", "s3")
    assert "Prefer small commits" not in digest_text(store)
    started = time.time_ns()
    assert await reinforce_preferences(store, P, threshold=3) == 1
    assert "Prefer small commits" in digest_text(store)
    probe = _probe()
    assert digests.write(probe, clock.now(), started) is None  # the promotion staled digests


def _probe() -> Digest:
    """A minimal digest file of project P, to tell whether a write drops it."""
    return {"version": 1, "project_id": P, "text": "x", "ids": [], "tokens": 1, "parts": {}}
