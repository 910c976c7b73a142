"""Record validation (nothing is written when it fails) and the clock: ULIDs and time parsing."""

from __future__ import annotations

import re
from contextlib import closing
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.core import clock, db
from agentctx.core.errors import ValidationError
from agentctx.core.schema import BODY_MAX, RECORD_COLUMNS, TITLE_MAX
from agentctx.core.writes import CUE_MAX, CUES_MAX, KEYWORDS_MAX, normalize_keywords
from agentctx.records import COLUMNS, Record
from tests.helpers import new_record

if TYPE_CHECKING:
    from agentctx.store import Store

PROJECT = "p" * 64
#: The text of a record when a test names none.
TITLE = "Use gRPC for internal services"
BODY = "We moved from REST to gRPC."


def table_counts(path: str) -> tuple[int, int, int]:
    """Rows in records, edges and the FTS index, read through a separate connection."""
    conn, _ = db.connect(path, load_vec=False)
    with closing(conn):
        row = conn.execute(
            "SELECT (SELECT count(*) FROM records), (SELECT count(*) FROM edges), "
            "(SELECT count(*) FROM records_fts_docsize)"
        ).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


# -- validation writes nothing ---------------------------------------------------------------

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("empty title", {"title": ""}, "title is empty"),
    ("blank title", {"title": " \t\n "}, "title is empty"),
    ("empty body", {"body": ""}, "body is empty"),
    ("blank body", {"body": "\n\n   "}, "body is empty"),
    ("title 121", {"title": "t" * (TITLE_MAX + 1)}, "title is 121 characters"),
    ("body 2001", {"body": "b" * (BODY_MAX + 1)}, "body is 2001 characters"),
    ("unknown type", {"type": "opinion"}, "type 'opinion' is not one of"),
    ("unknown scope", {"scope": "team"}, "scope 'team' is not one of"),
    ("unknown confidence", {"confidence": "maybe"}, "confidence 'maybe' is not one of"),
    ("unknown source", {"source": "email"}, "source 'email' is not one of"),
    ("project scope, no id", {"project_id": ""}, "a project-scoped record needs a project id"),
    ("project scope, global id", {"project_id": "global"}, "needs a project id"),
    ("bad valid_from", {"valid_from": "last tuesday"}, "valid_from 'last tuesday'"),
    ("blank profile key", {"type": "profile", "key": "  "}, "profile key"),
    ("NUL in title", {"title": "\x00"}, "title contains a NUL"),
    ("NUL in body", {"body": "a\x00b"}, "body contains a NUL"),
    ("cue not a string", {"cues": ["ok", 3]}, "a cue must be a string, not int"),
    ("cues not a list", {"cues": 7}, "cues must be a list of strings"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("changes", "message"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
async def test_invalid_record_writes_nothing(
    store: Store, changes: dict[str, Any], message: str
) -> None:
    await store.add(new_record(title="an existing record", body=BODY, project_id=PROJECT))
    before = table_counts(store.path)
    with pytest.raises(ValidationError, match=re.escape(message)) as caught:
        await store.add(
            new_record(
                **{
                    "title": TITLE,
                    "body": BODY,
                    "project_id": PROJECT,
                    **changes,
                }
            )
        )
    assert str(caught.value).startswith("invalid record: ")
    assert table_counts(store.path) == before == (1, 0, 1)
    # The store is still writable afterwards.
    await store.add(new_record(title="another", body=BODY, project_id=PROJECT))
    assert table_counts(store.path) == (2, 0, 2)


def test_validation_reports_every_problem_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        new_record(
            type="x", title="", body="", project_id=PROJECT, scope="y", confidence="z", source="w"
        ).validated()
    message = str(caught.value)
    for field in ("type 'x'", "scope 'y'", "confidence 'z'", "source 'w'", "title", "body"):
        assert field in message


@pytest.mark.anyio
async def test_exactly_at_the_limits_passes(store: Store) -> None:
    title = "t" * TITLE_MAX
    body = "b" * BODY_MAX
    record = await store.add(new_record(title=title, body=body, project_id=PROJECT))
    assert (record.title, record.body) == (title, body)
    stored = await store.get(record.id)
    assert len(stored.title) == TITLE_MAX
    assert len(stored.body) == BODY_MAX


@pytest.mark.anyio
async def test_limits_count_characters_not_bytes(store: Store) -> None:
    title = "é" * TITLE_MAX  # 240 bytes of UTF-8
    record = await store.add(new_record(title=title, body="ü" * BODY_MAX, project_id=PROJECT))
    assert (await store.get(record.id)).title == title


@pytest.mark.anyio
async def test_title_whitespace_is_normalized(store: Store) -> None:
    # 191 characters before normalization, 119 after: the limit applies to the normalized title.
    raw = "  " + " \t\n ".join(["word"] * 24) + "\n"
    assert len(raw) > TITLE_MAX
    record = await store.add(
        new_record(title=raw, body="\n  keep   inner\n\nspacing  \n", project_id=PROJECT)
    )
    assert record.title == " ".join(["word"] * 24)
    assert len(record.title) == 119
    assert record.body == "keep   inner\n\nspacing"
    assert (await store.get(record.id)).title == record.title


def test_normalization_of_the_other_fields() -> None:
    valid = new_record(
        title=TITLE,
        body=BODY,
        project_id=PROJECT,
        scope="global",
        keywords=["Kafka Queue", "kafka", "  ", "A", "b", "c", "d", "e", "f", "g", "h"],
        key="  editor ",
        rationale="   ",
        valid_from="2026-04-01",
    ).validated()
    assert valid.project_id == "global"
    assert valid.keywords == "kafka queue a b c d e f"
    assert len(str(valid.keywords).split()) == KEYWORDS_MAX
    assert valid.key == "editor"
    assert valid.rationale is None
    assert valid.valid_from == "2026-04-01T23:59:59.999999Z"


def test_normalize_keywords_from_text() -> None:
    assert normalize_keywords("  Foo foo BAR\tbaz ") == "foo bar baz"
    assert normalize_keywords([]) == ""


def test_cues_are_normalized_and_capped() -> None:
    long = "why does the nightly export job " + "really " * 30 + "stop"
    given = ["  how do we  name\nqueues?  ", "", "HOW DO WE NAME QUEUES?", long, "a", "b", "c"]
    cues = new_record(cues=given).validated().cues
    assert cues[0] == "how do we name queues?"  # one line, whitespace collapsed
    assert len(cues) == CUES_MAX  # the blank one and the repeat (any case) dropped, then cut
    assert cues[1].startswith("why does the nightly") and len(cues[1]) <= CUE_MAX
    assert cues[1].endswith("really")  # cut at a word
    assert cues[2:] == ["a", "b"]


@pytest.mark.anyio
async def test_cues_are_stored_one_per_line_and_read_as_a_tuple(store: Store) -> None:
    added = await store.add(new_record(cues=["which port does the api use", "api port?"]))
    assert added.cues == ("which port does the api use", "api port?")
    row = await store.row("SELECT cues FROM records WHERE id = ?", (added.id,))
    assert row[0] == "which port does the api use\napi port?"
    assert (await store.get(added.id)).cues == added.cues
    assert (await store.add(new_record(title="none"))).cues == ()


def test_record_round_trips_through_a_row() -> None:
    record = (
        new_record(
            title=TITLE,
            body=BODY,
            project_id=PROJECT,
            pinned=True,
            cues=["how do services talk?"],
        )
        .validated()
        .to_record(clock.ulid(), clock.now())
    )
    row = dict(record.to_row())
    assert row["cues"] == "how do services talk?"
    row["pinned"], row["pending_embedding"] = 1, 0
    back = Record.from_row(row)
    assert back.cues == ("how do services talk?",)
    assert back.pinned is True
    assert back.pending_embedding is False
    assert back.is_current
    assert COLUMNS == RECORD_COLUMNS
    assert list(record.to_dict()) == list(COLUMNS)


# -- clock -----------------------------------------------------------------------------------

CROCKFORD = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def test_ulids_are_crockford_and_unique() -> None:
    ids = [clock.ulid() for _ in range(10_000)]
    assert all(CROCKFORD.match(value) for value in ids)
    assert len(set(ids)) == len(ids)
    assert all(value[0] in "01234567" for value in ids)  # 128 bits in 26 × 5 = 130


def test_ulids_sort_by_time_across_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    base = 1_790_000_000.000
    made: list[str] = []
    for step in range(200):
        fake = SimpleNamespace(time=lambda step=step: base + step * 0.001)
        monkeypatch.setattr(clock, "time", fake)
        made.append(clock.ulid())
    assert made == sorted(made)
    # The first 10 characters are the millisecond timestamp.
    assert int(_decode(made[0][:10])) == int(base * 1000)
    assert int(_decode(made[-1][:10])) == int(base * 1000) + 199


def test_ulids_made_in_one_millisecond_sort_in_the_order_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clock, "time", SimpleNamespace(time=lambda: 1_790_000_000.0005))
    made = [clock.ulid() for _ in range(1_000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert {value[:10] for value in made} == {made[0][:10]}  # one millisecond


def test_ulids_from_the_real_clock_sort_across_milliseconds() -> None:
    first = clock.ulid()
    stamp = first[:10]
    later = clock.ulid()
    while later[:10] == stamp:  # at most about a millisecond of spinning
        later = clock.ulid()
    assert first < later


def _decode(text: str) -> int:
    value = 0
    for char in text:
        value = value * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".index(char)
    return value


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("2026-04-01", "2026-04-01T23:59:59.999999Z"),
        ("2024-02-29", "2024-02-29T23:59:59.999999Z"),
        ("2026-04-01T12:00", "2026-04-01T12:00:00.000000Z"),
        ("2026-04-01T12:00:00Z", "2026-04-01T12:00:00.000000Z"),
        ("2026-04-01T12:00:00z", "2026-04-01T12:00:00.000000Z"),
        ("2026-04-01T12:00:00.5Z", "2026-04-01T12:00:00.500000Z"),
        ("2026-04-01T12:00:00+02:00", "2026-04-01T10:00:00.000000Z"),
        ("2026-04-01T01:30:00-05:30", "2026-04-01T07:00:00.000000Z"),
        ("2026-04-01T23:00:00-02:00", "2026-04-02T01:00:00.000000Z"),
        ("2026-04-01 12:00:00", "2026-04-01T12:00:00.000000Z"),
        ("  2026-04-01T12:00:00  ", "2026-04-01T12:00:00.000000Z"),
    ],
)
def test_parse_time(text: str, stored: str) -> None:
    assert clock.parse_time(text) == stored
    assert len(stored) == 27


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "yesterday",
        "2026-13-01",
        "2026-02-30",
        "2026-04-01T25:00",
        "01/04/2026",
        "2026-4-1",
    ],
)
def test_parse_time_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        clock.parse_time(text)


def test_stored_times_sort_as_times() -> None:
    start = datetime(2026, 1, 1, 23, 59, 59, 999_999, tzinfo=UTC)
    moments = [start + timedelta(microseconds=n * 7_919) for n in range(300)]
    texts = [clock.format_time(m) for m in moments]
    assert texts == sorted(texts)
    assert (
        clock.format_time(datetime(2026, 1, 1, 12)) == "2026-01-01T12:00:00.000000Z"
    )  # naive = UTC
    assert clock.age_days("2026-01-01T00:00:00.000000Z", reference=start.timestamp()) == (
        pytest.approx(1.0, abs=1e-6)
    )
    assert clock.age_days("2999-01-01T00:00:00.000000Z") == 0.0
    assert clock.age_days("garbage") == 0.0
