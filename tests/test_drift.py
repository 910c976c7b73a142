"""CLAUDE.md drift scores (consolidation step 6): real SQLite, the real offline all-MiniLM-L6-v2.

One project with four explicit records and CLAUDE.md fixtures covering each case of the issue:
a decision missing entirely, one present but phrased differently, one contradicted by text its
predecessor left behind, one present word for word; then the digest's note, the records that are
never candidates, ``.claude/CLAUDE.md``, the time box, and agreement with ``agentctx sync``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from agentctx.claude import claudemd
from agentctx.consolidate.drift import DriftReport, score_drift
from agentctx.consolidate.timebox import TimeBox
from agentctx.core import db, home
from agentctx.core.project import identify
from agentctx.embeddings import thresholds
from agentctx.records import COLUMNS
from agentctx.retrieval import digest
from tests import minilm
from tests.helpers import new_record

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.embeddings import models
    from agentctx.store import Store

pytestmark = pytest.mark.anyio

NOTE = "in the store are not reflected in CLAUDE.md"

# The paraphrase of MONEY shares none of its title's keywords (store, money, integer, cents).
PARAPHRASE = "- Currency values are kept in the smallest unit; no floating point for prices."
CLAUDE_MD = f"""# Shop

## Conventions

- Pytest for every test: run `pytest -q` before pushing.
{PARAPHRASE}
- Sessions use **JWT access tokens** signed with RS256.

## Commands

```bash
make dev
```
"""
GRPC_LINE = "- Internal services talk to each other over gRPC, never REST.\n"


@dataclass(frozen=True)
class Shop:
    project_id: str
    name: str
    root: str
    grpc: str  # (a) missing entirely
    money: str  # (b) present but phrased differently
    jwt_old: str  # (c) its text is still in CLAUDE.md ...
    jwt: str  # ... and contradicts this, its successor
    pytest: str  # (d) present verbatim
    inferred: str
    discovery: str


@pytest.fixture
async def shop(store: Store, project_dir: Path) -> Shop:
    project = identify(str(project_dir))
    await store.touch_project(project)
    pid = project.project_id
    grpc = await store.add(
        new_record(
            type="decision",
            title="Use gRPC for internal services",
            body="Internal services talk to each other over gRPC, not REST.",
            project_id=pid,
        )
    )
    money = await store.add(
        new_record(
            type="decision",
            title="Store money as integer cents",
            body="Amounts are stored as integer cents, never floats.",
            project_id=pid,
        )
    )
    old = await store.add(
        new_record(
            type="decision",
            title="Use JWT for auth",
            body="Sessions use JWT access tokens signed with RS256.",
            project_id=pid,
        )
    )
    _, jwt = await store.supersede(
        old.id, "Sessions use opaque tokens stored in Redis.", "revocable", project_id=pid
    )
    pytest_ = await store.add(
        new_record(
            type="convention",
            title="Pytest for every test",
            body="All tests use pytest; run pytest -q.",
            project_id=pid,
        )
    )
    inferred = await store.add(
        new_record(
            type="convention",
            title="Tabs for indentation",
            body="Indent with tabs.",
            project_id=pid,
            confidence="inferred",
        )
    )
    discovery = await store.add(
        new_record(
            type="discovery",
            title="Slow CI",
            body="CI is slow because the Docker layer cache is off.",
            project_id=pid,
        )
    )
    return Shop(
        pid,
        project.name,
        project.root,
        grpc.id,
        money.id,
        old.id,
        jwt.id,
        pytest_.id,
        inferred.id,
        discovery.id,
    )


async def _run(
    store: Store, shop: Shop, embedder: models.Embedder | None = None, seconds: float = 60
) -> DriftReport:
    return await score_drift(
        store, shop.project_id, shop.root, embedder=embedder, timebox=TimeBox(seconds)
    )


async def _scores(store: Store, pid: str) -> dict[str, float]:
    return {r.id: r.claudemd_drift_score for r in await store.list_records(pid)}


def _digest_text(shop: Shop) -> str:
    conn, _ = db.connect(home.db_path())
    try:
        return str(digest.build(conn, shop.project_id, shop.name)["text"])
    finally:
        conn.close()


# -- the four cases --------------------------------------------------------------------------------


async def test_keywords_alone(store: Store, shop: Shop, project_dir: Path) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD)
    report = await _run(store, shop)
    scores = await _scores(store, shop.project_id)
    assert report.files == [str(project_dir / "CLAUDE.md")]
    assert report.method == claudemd.METHOD and not report.unfinished
    # (a) missing entirely, (b) phrased differently: both flagged by keywords alone
    assert scores[shop.grpc] >= 0.5 and scores[shop.money] >= 0.5
    assert scores[shop.money] == 1.0  # none of the title's keywords is in the file
    # (c) the predecessor's text is still there: a contradiction, and the successor flagged
    [stale] = report.contradictions
    assert (stale.id, stale.superseded_by, stale.line) == (shop.jwt_old, shop.jwt, 7)
    assert scores[shop.jwt] == 1.0
    by_id = {r.id: r for r in report.records}
    assert by_id[shop.jwt].contradicted_by == shop.jwt_old
    # (d) present word for word
    assert scores[shop.pytest] < 0.5 and by_id[shop.pytest].coverage == 1.0
    assert report.checked == 4 and report.candidates == 3 and report.previous_candidates == 0
    assert report.candidates_changed and report.updated == 3  # pytest stays at 0.0
    # never candidates: inferred records, other types, superseded records
    assert scores[shop.inferred] == scores[shop.discovery] == scores[shop.jwt_old] == 0.0
    assert shop.inferred not in by_id and shop.discovery not in by_id


async def test_embeddings_cover_a_paraphrase(
    store: Store, shop: Shop, project_dir: Path, embedder: models.Embedder
) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD)
    report = await _run(store, shop, embedder)
    scores = await _scores(store, shop.project_id)
    by_id = {r.id: r for r in report.records}
    assert report.method.startswith("keyword coverage and embedding similarity")
    # (b) the paraphrase shares no keyword, but its meaning is there: measured cosine 0.70
    # (0.62 against the stored vector's labelled text, which is why the record is re-embedded)
    money = by_id[shop.money]
    assert money.coverage == 0.0 and money.similarity is not None
    assert 0.65 <= money.similarity <= 0.75
    assert claudemd.similarity_bounds(minilm.NAME)[1] <= money.similarity
    assert scores[shop.money] < 0.5
    # (a) nothing close to gRPC in the file (measured cosine 0.21): still missing
    grpc = by_id[shop.grpc]
    assert grpc.similarity is not None and grpc.similarity < 0.35
    assert scores[shop.grpc] >= 0.5
    # (c) contradicted whatever the embeddings say; (d) verbatim, not even embedded
    assert scores[shop.jwt] == 1.0 and by_id[shop.jwt].similarity is None
    assert scores[shop.pytest] < 0.5 and by_id[shop.pytest].similarity is None
    assert report.candidates == 2


async def test_a_superseded_text_in_the_archive_still_contradicts(
    store: Store, shop: Shop, project_dir: Path
) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD)
    columns = ", ".join(COLUMNS)
    async with store.transaction() as tx:  # what the archive step does to old history
        await tx.execute(
            f"INSERT INTO records_archive({columns}, archived_at) "
            f"SELECT {columns}, '2030-01-01T00:00:00.000000Z' FROM records WHERE id = ?",
            (shop.jwt_old,),
        )
        await tx.execute("DELETE FROM records WHERE id = ?", (shop.jwt_old,))
    report = await _run(store, shop)
    [stale] = report.contradictions
    assert (stale.id, stale.superseded_by) == (shop.jwt_old, shop.jwt)
    assert (await _scores(store, shop.project_id))[shop.jwt] == 1.0


# -- the digest's note -----------------------------------------------------------------------------


async def test_the_digest_note_needs_two_candidates(
    store: Store, shop: Shop, project_dir: Path, embedder: models.Embedder
) -> None:
    claude_md = project_dir / "CLAUDE.md"
    claude_md.write_text(CLAUDE_MD)
    first = await _run(store, shop, embedder)
    assert first.candidates == 2 and first.candidates_changed
    text = _digest_text(shop)
    assert f"Note: 2 decisions or conventions {NOTE}" in text and "`agentctx sync`" in text
    # nothing changed: nothing written, the count is the same
    again = await _run(store, shop, embedder)
    assert again.updated == 0 and not again.candidates_changed and again.candidates == 2
    # the gRPC decision reaches CLAUDE.md: one candidate left (the contradicted one), no note
    claude_md.write_text(CLAUDE_MD + GRPC_LINE)
    third = await _run(store, shop, embedder)
    assert (third.previous_candidates, third.candidates, third.updated) == (2, 1, 1)
    scores = await _scores(store, shop.project_id)
    assert scores[shop.grpc] < 0.5 and scores[shop.jwt] == 1.0
    assert NOTE not in _digest_text(shop)


async def test_without_claude_md_nothing_drifts(
    store: Store, shop: Shop, project_dir: Path, embedder: models.Embedder
) -> None:
    """No CLAUDE.md is no drift: no record is a candidate and the digest has no drift note. When a
    CLAUDE.md is removed the scores go back to 0; when it returns it is judged again."""
    report = await _run(store, shop, embedder)
    assert report.files == [] and report.candidates == 0
    assert report.skipped is not None and "agentctx sync --apply" in report.skipped
    assert set((await _scores(store, shop.project_id)).values()) == {0.0}
    assert NOTE not in _digest_text(shop)
    claude_md = project_dir / "CLAUDE.md"
    claude_md.write_text(CLAUDE_MD)
    assert (await _run(store, shop, embedder)).candidates == 2
    claude_md.unlink()
    gone = await _run(store, shop, embedder)
    assert (gone.previous_candidates, gone.candidates) == (2, 0) and gone.updated >= 2
    assert NOTE not in _digest_text(shop)
    claude_md.write_text(CLAUDE_MD)
    back = await _run(store, shop, embedder)
    assert back.skipped is None and back.candidates == 2


async def test_inferred_records_and_other_types_are_reset_to_zero(
    store: Store, shop: Shop, project_dir: Path
) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD + GRPC_LINE)
    async with store.transaction() as tx:  # e.g. imported from a teammate's store
        for record_id in (shop.inferred, shop.discovery, shop.pytest):
            await tx.execute(
                "UPDATE records SET claudemd_drift_score = 0.9 WHERE id = ?", (record_id,)
            )
    report = await _run(store, shop)
    scores = await _scores(store, shop.project_id)
    assert scores[shop.inferred] == scores[shop.discovery] == 0.0
    assert scores[shop.pytest] < 0.5
    assert report.previous_candidates == 2  # the pytest convention and the inferred one
    assert report.candidates == 2  # money (keywords alone) and the contradicted jwt


async def test_claude_dir_claude_md_is_read(store: Store, shop: Shop, project_dir: Path) -> None:
    (project_dir / ".claude").mkdir()
    (project_dir / ".claude" / "CLAUDE.md").write_text(GRPC_LINE)
    (project_dir / "CLAUDE.md").write_text("# Shop\n\n- Pytest for every test.\n")
    report = await _run(store, shop)
    assert report.files == [
        str(project_dir / "CLAUDE.md"),
        str(project_dir / ".claude" / "CLAUDE.md"),
    ]
    scores = await _scores(store, shop.project_id)
    assert scores[shop.grpc] < 0.5 and scores[shop.pytest] < 0.5
    assert scores[shop.money] >= 0.5 and scores[shop.jwt] >= 0.5


# -- limits ----------------------------------------------------------------------------------------


class _Checks(TimeBox):
    """A time box that expires after ``checks`` looks at it (the step's own check points)."""

    def __init__(self, checks: int) -> None:
        super().__init__(None)
        self.left = checks

    def expired(self) -> bool:
        self.left -= 1
        return self.left < 0


async def test_an_expired_time_box_writes_nothing(
    store: Store, shop: Shop, project_dir: Path, embedder: models.Embedder
) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD)
    before = await _scores(store, shop.project_id)
    report = await _run(store, shop, embedder, seconds=0)
    assert report.unfinished and report.records == [] and not report.candidates_changed
    # expired once the embedding has begun: the step stops before its first batch, writes nothing
    box = _Checks(1)
    stopped = await score_drift(store, shop.project_id, shop.root, embedder=embedder, timebox=box)
    assert stopped.unfinished and box.left < 0 and stopped.updated == 0
    assert await _scores(store, shop.project_id) == before
    # and a box that lasts: done
    done = await _run(store, shop, embedder)
    assert not done.unfinished and done.candidates == 2


async def test_an_unknown_or_missing_root_is_skipped(
    store: Store, shop: Shop, tmp_path: Path
) -> None:
    for root in (None, str(tmp_path / "gone")):
        report = await score_drift(store, shop.project_id, root, embedder=None, timebox=TimeBox(60))
        assert report.skipped and not report.unfinished and report.updated == 0
    assert set((await _scores(store, shop.project_id)).values()) == {0.0}


# -- agreement with agentctx sync ------------------------------------------------------------------


@pytest.mark.parametrize("with_embeddings", [False, True])
async def test_sync_reports_the_same_records(
    store: Store,
    shop: Shop,
    project_dir: Path,
    embedder: models.Embedder,
    with_embeddings: bool,
) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD)
    model = embedder if with_embeddings else None
    report = await _run(store, shop, model)
    files = await claudemd.discover(str(project_dir), shop.root)
    sync = await claudemd.report(
        store,
        shop.project_id,
        files=files,
        target=files[0].path,
        root=shop.root,
        embedder=model,
    )
    flagged = {r.id for r in report.records if r.missing}
    assert {m.id for m in sync.missing} == flagged
    assert shop.jwt in flagged and shop.grpc in flagged and shop.pytest not in flagged
    assert sync.candidates == report.candidates and sync.method == report.method
    assert [c.id for c in sync.contradictions] == [c.id for c in report.contradictions]
    assert (shop.money in flagged) is not with_embeddings


# -- the score ---------------------------------------------------------------------------------------


def test_drift_score_separates_missing_from_covered() -> None:
    covered = claudemd.COVERED
    assert claudemd.drift_score(0.0) == 1.0
    assert claudemd.drift_score(covered - 0.01) > 0.5
    assert claudemd.drift_score(covered) == claudemd.COVERED_SCORE_MAX
    assert claudemd.drift_score(1.0) == 0.0
    assert claudemd.drift_score(0.0, meaning=covered) == claudemd.COVERED_SCORE_MAX
    floor, bound = claudemd.similarity_bounds(minilm.NAME)
    assert claudemd.meaning(floor, (floor, bound)) == 0.0
    assert claudemd.meaning(bound, (floor, bound)) == covered
    assert claudemd.meaning(1.0, (floor, bound)) == 1.0
    assert claudemd.similarity_bounds("BAAI/bge-small-en-v1.5") == thresholds.DRIFT_DEFAULT


def test_chunks() -> None:
    text = (
        "# Title\n\nFirst sentence here. Second one follows.\n\n"
        "- an item\n  continued here\n* another item\n\n"
        "| col | row |\n|---|---|\n| cell one | cell two |\n\n"
        "```\nmake dev\n```\n<!-- a comment -->\n---\nx\n"
    )
    assert claudemd.chunks(text) == [
        "Title",
        "First sentence here.",
        "Second one follows.",
        "an item continued here",
        "another item",
        "col row",
        "cell one cell two",
        "make dev",
    ]


async def test_an_unchanged_project_is_not_judged_again(
    store: Store, shop: Shop, project_dir: Path
) -> None:
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD)
    first = await _run(store, shop)
    assert first.skipped is None and first.checked == 4
    again = await _run(store, shop)
    assert again.skipped is not None and "unchanged" in again.skipped
    assert await _scores(store, shop.project_id) == await _scores(store, shop.project_id)
    # an edit of CLAUDE.md, or of a record, makes the next run judge again
    (project_dir / "CLAUDE.md").write_text(CLAUDE_MD + "\n- Services talk gRPC internally.\n")
    edited = await _run(store, shop)
    assert edited.skipped is None and edited.checked == 4
    await store.supersede(shop.pytest, "Tests run with pytest -x.", "faster feedback")
    assert (await _run(store, shop)).skipped is None


async def test_a_project_without_claude_md_is_offered_sync_once(
    store: Store, shop: Shop, project_dir: Path
) -> None:
    """No CLAUDE.md: the first consolidated digest says once that `agentctx sync --apply` writes
    one; later digests do not repeat it."""
    from agentctx.consolidate import consolidate
    from agentctx.core import digests

    def digest_file() -> str:
        data = digests.read(shop.project_id)
        assert data is not None
        return str(data["text"])

    await consolidate(store, shop.project_id, settings={"embeddings": False, "llm": False})
    first = digest_file()
    assert "no CLAUDE.md" in first and "`agentctx sync --apply`" in first
    assert NOTE not in first
    await consolidate(store, shop.project_id, settings={"embeddings": False, "llm": False})
    assert "agentctx sync --apply" not in digest_file()
