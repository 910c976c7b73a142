"""Export and import: JSON and Markdown round trips, idempotent merges, conflicts, bad input."""

from __future__ import annotations

import re
from contextlib import closing
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.core import clock, db
from agentctx.core.errors import TransferError, ValidationError
from agentctx.core.project import ProjectIdentity
from agentctx.store import Store, transfer
from tests.helpers import new_record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from agentctx.store.transfer import Export

P = "a" * 64
Q = "b" * 64

TRICKY_BODY = (
    "# A heading inside the body\n"
    "## Another\n"
    "#### Looks like a record title\n"
    "<!-- an HTML comment --> then an arrow --> and a -- dash, and <!-- agentctx:export {} -->\n"
    "trailing spaces here   \n"
    "   indented line\n"
    "\ttab-indented, unicode: ü 日本語 🚀 ﬁ \u2028 (line separator) \u00a0nbsp\n"
    "\n"
    "\n"
    "two blank lines above; a Windows line\r\n"
    "and a lone CR\r here\n"
    "<!-- /agentctx:record not-this-one -->\n"
    '<!-- agentctx:export {"format":"agentctx-export","version":1} -->\n'
    '<!-- agentctx:edge {"id": "fake"} -->\n'
    "```python\nprint('--')\n```"
)


async def populate(store: Store) -> Export:
    """A store with every kind of row an export carries."""
    await store.touch_project(ProjectIdentity(P, "alpha", "/src/alpha", "github.com/o/alpha"))
    await store.touch_project(ProjectIdentity(Q, "beta -- two", "/src/beta", None))
    first = await store.add(
        new_record(title="Queue", body="Use RabbitMQ.", valid_from="2025-01-01")
    )
    await store.supersede(first.id, "Use Kafka.", "throughput --> needed")
    tricky = await store.add(
        new_record(
            type="bugfix",
            title="Fix `--flag` parsing -> no more #### issues (superseded)",
            body=TRICKY_BODY,
            keywords=["argparse", "CLI"],
            rationale="<!-- seen in prod -->",
            session_id="sess-1",
            confidence="inferred",
            source="llm_extraction",
            pinned=True,
        )
    )
    await store.add(new_record(type="handover", title="Handover", body="Next: wire the importer."))
    await store.add(new_record(type="profile", title="Tests", body="pytest -q", key="test_command"))
    await store.add(
        new_record(type="discovery", title="Beta", body="Beta builds with make.", project_id=Q)
    )
    await store.add(
        new_record(type="preference", title="Style", body="Short names.", scope="global")
    )
    editor = await store.add(
        new_record(type="profile", title="Editor", body="vim", key="editor", scope="global")
    )
    await store.supersede(editor.id, "helix", "switched", title="Editor (superseded)")
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        conn.execute(
            "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES "
            "('node-1', ?, 'file', 'src/cli.py', ?), ('node-2', ?, 'symbol', 'main', ?)",
            (P, clock.now(), Q, clock.now()),
        )
        conn.execute("INSERT INTO record_entities VALUES (?, 'node-1')", (tricky.id,))
    return await transfer.export_data(store)


@pytest.fixture
async def source(store: Store) -> Export:
    return await populate(store)


@pytest.fixture
async def other(tmp_path: Path) -> AsyncIterator[Store]:
    """A second, empty store in another file."""
    opened = await Store.open(str(tmp_path / "elsewhere" / "other.db"))
    try:
        yield opened
    finally:
        await opened.close()


def row_counts(data: Mapping[str, Any]) -> dict[str, int]:
    tables = ("projects", "records", "edges", "nodes", "record_entities")
    return {table: len(data[table]) for table in tables if data[table]}


# -- round trips -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_json_round_trip_into_an_empty_store(source: dict[str, Any], other: Store) -> None:
    text = transfer.to_json(source)
    assert text.endswith(b"\n")
    parsed = transfer.parse(text.decode())
    assert parsed == source
    report = await transfer.import_data(other, parsed)
    assert report.added == row_counts(source)
    assert report.skipped == {}
    assert report.superseded_on_conflict == []
    assert await transfer.export_data(other) == source
    assert row_counts(source) == {
        "projects": 2,
        "records": 9,
        "edges": 2,
        "nodes": 2,
        "record_entities": 1,
    }


@pytest.mark.anyio
async def test_markdown_round_trip_into_an_empty_store(
    source: dict[str, Any], other: Store
) -> None:
    text = transfer.to_markdown(source)
    parsed = transfer.parse(text)
    assert sorted(parsed["records"], key=lambda r: str(r["id"])) == sorted(
        source["records"], key=lambda r: str(r["id"])
    )
    await transfer.import_data(other, parsed)
    assert await transfer.export_data(other) == source
    tricky = next(r for r in source["records"] if r["type"] == "bugfix")
    assert (await other.get(tricky["id"])).body == TRICKY_BODY
    assert (await other.get(tricky["id"])).title == tricky["title"]


@pytest.mark.anyio
async def test_markdown_is_organized_for_people(source: dict[str, Any]) -> None:
    text = transfer.to_markdown(source)
    lines = text.split("\n")
    assert lines[0] == "# agentctx context export"
    order = [lines.index(s) for s in ("## alpha", "## beta -- two", "## Global (every project)")]
    assert order == sorted(order)
    headings = [line for line in lines if line.startswith("### ")]
    assert headings == [
        "### Decisions",
        "### Bugfixes",
        "### Handovers",
        "### Profile",
        "### Discoveries",
        "### Preferences",
        "### Profile",
    ]
    assert "#### Queue (superseded)" in lines
    assert "#### Queue" in lines
    # Comments never close early: no "--" inside any agentctx comment, the data block included.
    data_at = next(i for i, line in enumerate(lines) if line.startswith("<!-- agentctx:data"))
    assert lines[data_at + 1 :].index("-->") == len(lines[data_at + 1 :]) - 2  # ends the file
    for n, line in enumerate(lines):
        if line.startswith("<!-- agentctx:"):
            assert "--" not in line[len("<!-- ") : -len(" -->")]
        elif data_at < n and line != "-->":
            assert "--" not in line
    # Readable: the fields ride in the one data block; above it, ids only in comments, and a
    # line of plain words under each title.
    above = lines[:data_at]
    assert not [line for line in above if line.startswith("<!-- agentctx:record {")]
    queue = [r for r in source["records"] if r["title"] == "Queue"]
    old = next(r for r in queue if r["superseded_at"] is not None)
    new = next(r for r in queue if r["superseded_at"] is None)
    about = above[above.index("#### Queue (superseded)") + 2]
    assert about.startswith("*decision · ") and f"superseded by “{new['title']}”" in about
    assert f"valid {old['valid_from'][:10]}" in about
    about = above[above.index("#### Queue") + 2]
    assert "valid since" in about and "replaces “Queue”" in about
    assert lines[2].startswith("Exported ") and "records (" in lines[2]


@pytest.mark.anyio
async def test_crlf_markdown_is_accepted(store: Store, other: Store) -> None:
    await store.add(new_record(title="Plain", body="line one\nline two   \n\nline four"))
    data = await transfer.export_data(store)
    parsed = transfer.parse(transfer.to_markdown(data).replace("\n", "\r\n"))
    await transfer.import_data(other, parsed)
    assert await transfer.export_data(other) == data


@pytest.mark.anyio
async def test_mixed_line_endings_keep_markers_and_bodies(store: Store, other: Store) -> None:
    """Marker lines edited to CRLF still match; a body keeps exactly its own characters."""
    await store.add(new_record(title="Mixed", body="first line\nsecond line\r\nthird line"))
    data = await transfer.export_data(store)
    lines = transfer.to_markdown(data).split("\n")
    text = "\n".join(line + "\r" if line.startswith(("#", "<!--")) else line for line in lines)
    await transfer.import_data(other, transfer.parse(text))
    assert await transfer.export_data(other) == data


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["json", "markdown"])
async def test_importing_into_the_same_store_adds_nothing(
    store: Store, source: dict[str, Any], form: str
) -> None:
    text = transfer.to_json(source).decode() if form == "json" else transfer.to_markdown(source)
    report = await transfer.import_data(store, transfer.parse(text))
    assert report.added == {}
    assert report.skipped == row_counts(source)
    assert report.superseded_on_conflict == []
    assert await transfer.export_data(store) == source


@pytest.mark.anyio
async def test_importing_twice_changes_nothing_the_second_time(
    source: dict[str, Any], other: Store
) -> None:
    await transfer.import_data(other, source)
    again = await transfer.import_data(other, source)
    assert again.added == {}
    assert await transfer.export_data(other) == source


@pytest.mark.anyio
async def test_project_export_leaves_out_other_projects_and_global(store: Store) -> None:
    await populate(store)
    data = await transfer.export_data(store, P)
    assert {r["project_id"] for r in data["records"]} == {P}
    assert [p["project_id"] for p in data["projects"]] == [P]
    assert [n["id"] for n in data["nodes"]] == ["node-1"]
    ids = {r["id"] for r in data["records"]}
    assert all(e["from_id"] in ids or e["to_id"] in ids for e in data["edges"])


titles = st.text(min_size=1, max_size=140).filter(
    lambda t: 0 < len(" ".join(t.split())) <= 120 and "\x00" not in t
)
bodies = st.text(min_size=1, max_size=300).map(lambda b: b.replace("\x00", "")).filter(str.strip)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(items=st.lists(st.tuples(titles, bodies, st.booleans()), min_size=1, max_size=4))
def test_markdown_round_trip_of_arbitrary_text(items: list[tuple[str, str, bool]]) -> None:
    records = []
    for n, (title, body, superseded) in enumerate(items):
        valid = new_record(title=title, body=body).validated()
        record = valid.to_record(f"ID{n:03d}", "2026-01-01T00:00:00.000000Z").to_dict()
        if superseded:
            record.update(
                {"superseded_at": "2026-02-01T00:00:00.000000Z", "superseded_by": "ID999"}
            )
        records.append(record)
    data = {
        "format": "agentctx-export",
        "version": 1,
        "projects": [],
        "records": records,
        "edges": [],
        "nodes": [],
        "record_entities": [],
    }
    assert transfer.parse(transfer.to_markdown(data)) == data
    assert transfer.parse(transfer.to_json(data).decode()) == data


# -- keyed conflicts on import -----------------------------------------------------------------


async def handover_store(store: Store, body: str, valid_from: str) -> tuple[str, Export]:
    record = await store.add(
        new_record(type="handover", title="Handover", body=body, valid_from=valid_from)
    )
    return record.id, await transfer.export_data(store)


async def current_handovers(store: Store) -> list[str]:
    return [r.id for r in await store.list_records(P, types=["handover"], include_superseded=False)]


@pytest.mark.anyio
async def test_import_of_a_newer_current_handover_supersedes_ours(
    store: Store, other: Store
) -> None:
    older, _ = await handover_store(store, "older work", "2026-01-01T00:00:00Z")
    newer, newer_data = await handover_store(other, "newer work", "2026-02-01T00:00:00Z")
    report = await transfer.import_data(store, newer_data)
    assert report.superseded_on_conflict == [older]
    assert await current_handovers(store) == [newer]
    loser = await store.get(older)
    assert loser.superseded_by == newer
    assert loser.superseded_at == (await store.get(newer)).valid_from
    history = await store.history(newer)
    assert {r.id for r in history} == {older, newer}
    data = await transfer.export_data(store)
    assert [(e["from_id"], e["to_id"], e["rel_type"]) for e in data["edges"]] == [
        (newer, older, "supersedes")
    ]


@pytest.mark.anyio
async def test_import_of_an_older_current_handover_is_stored_superseded(
    store: Store, other: Store
) -> None:
    newer, _ = await handover_store(store, "newer work", "2026-02-01T00:00:00Z")
    older, older_data = await handover_store(other, "older work", "2026-01-01T00:00:00Z")
    report = await transfer.import_data(store, transfer.parse(transfer.to_markdown(older_data)))
    assert report.superseded_on_conflict == [older]
    assert report.added == {"records": 1}
    assert await current_handovers(store) == [newer]
    imported = await store.get(older)
    assert (imported.superseded_by, imported.superseded_at) == (
        newer,
        "2026-02-01T00:00:00.000000Z",
    )


@pytest.mark.anyio
async def test_import_tie_on_valid_from_goes_to_the_incoming_handover(
    store: Store, other: Store
) -> None:
    ours, _ = await handover_store(store, "ours", "2026-01-01T00:00:00Z")
    theirs, data = await handover_store(other, "theirs", "2026-01-01T00:00:00Z")
    await transfer.import_data(store, data)
    assert await current_handovers(store) == [theirs]
    assert (await store.get(ours)).superseded_by == theirs


@pytest.mark.anyio
async def test_import_of_a_colliding_profile_key(store: Store, other: Store) -> None:
    mine = await store.add(
        new_record(type="profile", title="t", body="make test", key="test", valid_from="2026-03-01")
    )
    theirs = await other.add(
        new_record(type="profile", title="t", body="tox", key="test", valid_from="2026-01-01")
    )
    report = await transfer.import_data(store, await transfer.export_data(other))
    assert report.superseded_on_conflict == [theirs.id]
    current = await store.list_records(P, types=["profile"], include_superseded=False)
    assert [r.id for r in current] == [mine.id]


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"records": []}', "not an agentctx export"),
        ('{"format": "something-else"}', "not an agentctx export"),
        ('  {"format": "agentctx-export"', "not valid JSON"),
        ("[1, 2, 3]", "no agentctx:export marker"),
        ("# My notes\n\nJust some Markdown.\n", "no agentctx:export marker"),
        ("", "no agentctx:export marker"),
        (
            '<!-- agentctx:export {"format":"agentctx-export","version":1} -->\n'
            '#### Title\n<!-- agentctx:record {"id": "X"} -->\nbody without an end\n',
            "line 3: record X has no end marker",
        ),
        (
            '<!-- agentctx:export {"format":"agentctx-export","version":1} -->\n'
            '<!-- agentctx:record {"id": "X"} -->\nbody\n<!-- /agentctx:record X -->\n',
            "must follow its '#### title' line",
        ),
        (
            '<!-- agentctx:export {"format":"agentctx-export","version":1} -->\n'
            "<!-- agentctx:node {not json} -->\n",
            "line 2: unreadable metadata",
        ),
    ],
)
def test_non_exports_are_refused(text: str, message: str) -> None:
    with pytest.raises(TransferError, match=re.escape(message)):
        transfer.parse(text)


def record_entry(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "01HX0000000000000000000000",
        "project_id": P,
        "type": "decision",
        "title": "Imported",
        "body": "From a hand-written file.",
        "scope": "project",
        "confidence": "explicit",
        "source": "import",
        "valid_from": "2026-01-01T00:00:00.000000Z",
        "recorded_at": "2026-01-01T00:00:00.000000Z",
    }
    entry.update(changes)
    return entry


@pytest.mark.anyio
async def test_minimal_record_entries_take_column_defaults(store: Store) -> None:
    report = await transfer.import_data(
        store, {"format": "agentctx-export", "records": [record_entry()]}
    )
    assert report.added == {"records": 1}
    record = await store.get("01HX0000000000000000000000")
    assert (record.keywords, record.pinned, record.access_count, record.score) == (
        "",
        False,
        0,
        1.0,
    )
    assert record.source == "import"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"scope": None}, "lacks scope"),
        ({"source": None, "confidence": None}, "lacks confidence, source"),
        ({"type": "opinion"}, "type 'opinion'"),
        ({"title": "t" * 121}, "title is 121 characters"),
        ({"superseded_by": "NOT-THERE", "superseded_at": "2026-02-01"}, "inconsistent"),
    ],
)
async def test_bad_record_entries_import_nothing(
    store: Store, entry: dict[str, Any], message: str
) -> None:
    data = {
        "format": "agentctx-export",
        "projects": [
            {
                "project_id": P,
                "name": "p",
                "root": None,
                "remote": None,
                "created_at": "x",
                "last_seen_at": "x",
            }
        ],
        "records": [record_entry(id="01HX0000000000000000000001"), record_entry(**entry)],
    }
    with pytest.raises(ValidationError, match=message):
        await transfer.import_data(store, data)
    assert await store.list_records() == []
    assert await store.projects() == []
    # A failed import leaves the store writable.
    await store.add(new_record())
    assert len(await store.list_records()) == 1


@pytest.mark.anyio
async def test_successor_already_in_the_store_of_the_same_project(store: Store) -> None:
    successor = await store.add(new_record(title="Kafka"))
    older = record_entry(superseded_by=successor.id, superseded_at="2026-02-01T00:00:00.000000Z")
    report = await transfer.import_data(store, {"format": "agentctx-export", "records": [older]})
    assert report.added == {"records": 1}
    assert [r.id for r in await store.history(successor.id)] == [older["id"], successor.id]


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["store", "file"])
async def test_successor_of_another_project_is_refused(store: Store, where: str) -> None:
    successor_id = "01HX00000000000000000000SQ"
    if where == "store":
        successor_id = (await store.add(new_record(project_id=Q))).id
        records = []
    else:
        records = [record_entry(id=successor_id, project_id=Q)]
    older = record_entry(superseded_by=successor_id, superseded_at="2026-02-01T00:00:00.000000Z")
    data = {"format": "agentctx-export", "records": [*records, older]}
    with pytest.raises(ValidationError, match="own namespace"):
        await transfer.import_data(store, data)
    assert [r.project_id for r in await store.list_records()] == ([Q] if where == "store" else [])


@pytest.mark.anyio
async def test_rows_lacking_fields_are_refused(store: Store) -> None:
    with pytest.raises(ValidationError, match="a edges row lacks a field"):
        await transfer.import_data(store, {"format": "agentctx-export", "edges": [{"id": "e"}]})
    with pytest.raises(ValidationError, match="not an object"):
        await transfer.import_data(store, {"format": "agentctx-export", "records": ["nope"]})


def test_json_payload_is_sorted_and_indented() -> None:
    data = {"format": "agentctx-export", "version": 1, "b": [1], "a": {"y": 2, "x": 1}}
    text = transfer.to_json(data).decode()
    assert text.startswith('{\n  "a": {\n    "x": 1,')
    assert orjson.loads(text) == data


# -- the Markdown layouts (issue 27: readable, fields in one block at the end) ------------------


def _one_record_data(**fields: Any) -> dict[str, Any]:
    valid = new_record(title="Tabs", body="Indent with tabs.\n\nNever spaces.").validated()
    record: dict[str, Any] = dict(valid.to_record("ID001", "2026-01-01T00:00:00.000000Z").to_dict())
    record.update(fields)
    return {
        "format": "agentctx-export",
        "version": 1,
        "projects": [],
        "records": [record],
        "edges": [],
        "nodes": [],
        "record_entities": [],
    }


def test_an_export_in_the_earlier_layout_still_reads() -> None:
    """Before issue 27 each record's fields rode inline in its start comment: still read."""
    data = _one_record_data()
    record = data["records"][0]
    meta = orjson.dumps(
        {k: v for k, v in record.items() if k not in ("title", "body")},
        option=orjson.OPT_SORT_KEYS,
    ).decode()
    text = "\n".join(
        [
            "# agentctx context export",
            "",
            '<!-- agentctx:export {"format":"agentctx-export","version":1} -->',
            "",
            "## alpha",
            "",
            "### Decisions",
            "",
            "#### Tabs",
            f"<!-- agentctx:record {meta} -->",
            record["body"],
            "<!-- /agentctx:record ID001 -->",
            "",
        ]
    )
    assert transfer.parse(text) == data


def test_a_record_without_its_text_or_its_fields_is_refused() -> None:
    text = transfer.to_markdown(_one_record_data())
    no_text = re.sub(
        r"<!-- agentctx:record ID001 -->\n.*?<!-- /agentctx:record ID001 -->\n",
        "",
        text,
        flags=re.S,
    )
    with pytest.raises(TransferError, match="record ID001 has no text above"):
        transfer.parse(no_text)
    no_fields = "\n".join(line for line in text.split("\n") if not line.startswith("record {"))
    with pytest.raises(TransferError, match="record ID001 has no fields in the data block"):
        transfer.parse(no_fields)
    unended = text.rstrip("\n").removesuffix("-->")
    with pytest.raises(TransferError, match="the data block has no end"):
        transfer.parse(unended)


def test_the_readable_part_says_what_each_record_is() -> None:
    """Provenance and confidence in the digest's words (a detected profile fact reads
    ``detected``), pinned, a retired record, and the export's first line."""
    data = _one_record_data(
        type="profile", key="languages", source="cli", confidence="explicit", pinned=True
    )
    text = transfer.to_markdown(data)
    assert "*profile · detected · stated · pinned · valid since 2026-01-01 00:00 (" in text
    retired = _one_record_data(superseded_at="2026-02-01T00:00:00.000000Z")
    text = transfer.to_markdown(retired)
    assert "· valid 2026-01-01 00:00 to 2026-02-01 00:00 · retired*" in text
    assert "1 record (0 current, 1 superseded) in 1 project." in text
