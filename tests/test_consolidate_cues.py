"""Consolidation writes retrieval cues for the records that have none (issue 14).

The real ``AsyncAnthropic`` against the loopback Messages API server (tests/messages_server.py),
a real store; the model's answers are scripted per record from the request it received.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from anthropic import AsyncAnthropic

from agentctx import config
from agentctx.consolidate import TimeBox, consolidate, cues
from agentctx.core.observe import STUB_NOTE_FIX
from agentctx.store import SearchQuery
from tests.helpers import new_record
from tests.messages_server import ErrorReply, MessagesServer, Recorded, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctx.records import Record
    from agentctx.store import Store

pytestmark = pytest.mark.anyio

P = "p" * 64
MODEL = "claude-haiku-4-5"
RECORD = re.compile(r'<record id="(r\d+)" type="(\w+)">\nTitle: (.*)\n')
#: The cues the scripted model writes for a record, by its title.
CUES = {
    "The metrics exporter refreshes its cache hourly": ["why does grafana show stale tenants"],
    "Queue names are kebab-case": ["what do I name a broker topic", "rabbit naming"],
}


def client(server: MessagesServer) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=0)


def model(extra: list[dict[str, Any]] | None = None) -> Callable[[Recorded], ToolUseReply]:
    """A model that answers every asked record with its cues from :data:`CUES` (others: none)."""

    def script(request: Recorded) -> ToolUseReply:
        asked = RECORD.findall("\n".join(request.texts()))
        answers = [{"id": key, "cues": CUES.get(title, [])} for key, _type, title in asked]
        return ToolUseReply(cues.TOOL_NAME, {"records": [*answers, *(extra or [])]})

    return script


def asked_titles(server: MessagesServer) -> list[str]:
    return sorted(
        title
        for request in server.messages_requests()
        for _key, _type, title in RECORD.findall("\n".join(request.texts()))
    )


async def seed(store: Store) -> dict[str, Record]:
    made = [
        new_record("decision", "The metrics exporter refreshes its cache hourly", "Cheap.", P),
        new_record("convention", "Queue names are kebab-case", "billing-events", P),
        new_record("convention", "Handlers return Result objects", "Never raise.", P,
                   cues=["should a handler raise"]),
        new_record("handover", "Handover: billing", "Current task: billing", P),
        new_record("bugfix", "Test failure: pytest -q", f"failed\n{STUB_NOTE_FIX}", P,
                   source="hook_observation"),
    ]  # fmt: skip
    return {r.title: await store.add(r) for r in made}


async def run_step(store: Store, api: AsyncAnthropic | None, **kwargs: Any) -> cues.CuesReport:
    lines: list[str] = kwargs.pop("lines", [])
    return await cues.write_cues(
        store, P, client=api, model=MODEL, timebox=kwargs.pop("timebox", TimeBox(None)),
        log=lines.append, **kwargs,
    )  # fmt: skip


async def test_records_without_cues_get_them_and_are_found_by_them(store: Store) -> None:
    seeded = await seed(store)
    with MessagesServer(model(extra=[{"id": "r99", "cues": ["an unknown id"]}])) as server:
        async with client(server) as api:
            report = await run_step(store, api)
    # the record with cues, the handover and the unexplained capture stub are not asked about
    assert asked_titles(server) == sorted(CUES)
    (request,) = server.messages_requests()
    body = request.body
    assert body["model"] == MODEL
    assert body["tool_choice"] == {"type": "tool", "name": cues.TOOL_NAME}
    assert body["tools"][0]["input_schema"] == cues.INPUT_SCHEMA
    assert (report.candidates, report.asked, report.written, report.skipped) == (2, 2, 2, 0)
    assert report.calls == 1 and report.cost_usd > 0 and report.llm_errors == 0
    exporter = await store.get(seeded["The metrics exporter refreshes its cache hourly"].id)
    assert exporter.cues == ("why does grafana show stale tenants",)
    assert exporter.pending_embedding == seeded[exporter.title].pending_embedding
    assert (await store.get(seeded["Handlers return Result objects"].id)).cues == (
        "should a handler raise",
    )
    found = await store.search(SearchQuery("grafana stale tenants", project_id=P))
    assert [hit.record.id for hit in found.hits] == [exporter.id]
    unknown = await store.rows("SELECT id FROM records WHERE cues LIKE '%unknown id%'")
    assert unknown == []


async def test_a_record_with_cues_is_not_sent_again(store: Store) -> None:
    await seed(store)
    with MessagesServer(model()) as server:
        async with client(server) as api:
            first = await run_step(store, api)
            second = await run_step(store, api)
    assert first.written == 2
    assert (second.candidates, second.asked, second.calls) == (0, 0, 0)
    assert len(server.messages_requests()) == 1


async def test_an_explained_capture_stub_is_asked_about_and_a_raw_one_is_not(
    store: Store,
) -> None:
    for title, body in (
        ("Test failure: pytest -q", f"failed\n{STUB_NOTE_FIX}"),  # as capture wrote it
        ("Test failure: cargo test", "Problem: a race\nFix: a lock\n\nObserved: failed"),
    ):
        await store.add(new_record("bugfix", title, body, P, source="hook_observation"))
    with MessagesServer(model()) as server:
        async with client(server) as api:
            await run_step(store, api)
    assert asked_titles(server) == ["Test failure: cargo test"]


async def test_batches_and_the_bound_per_run(store: Store) -> None:
    for n in range(cues.MAX_RECORDS + 5):
        await store.add(new_record("discovery", f"Fact number {n}", f"body {n}", P))
    with MessagesServer(model()) as server:
        async with client(server) as api:
            report = await run_step(store, api)
    requests = server.messages_requests()
    assert len(requests) == cues.MAX_RECORDS // cues.BATCH_RECORDS
    assert all(len(RECORD.findall("\n".join(r.texts()))) == cues.BATCH_RECORDS for r in requests)
    # the model gave none of them a cue: nothing written, every one asked again next run
    assert (report.candidates, report.asked, report.written) == (cues.MAX_RECORDS,) * 2 + (0,)
    assert report.skipped == cues.MAX_RECORDS


async def test_the_record_text_is_redacted_on_its_way_out(store: Store) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    record = await store.add(new_record("decision", "Deploy token lives in the vault", "x", P))
    async with store.transaction() as tx:  # as a store written before a redaction rule existed
        await tx.execute(
            "UPDATE records SET body = ? WHERE id = ?", (f"token {secret} here", record.id)
        )
    with MessagesServer(model()) as server:
        async with client(server) as api:
            await run_step(store, api)
    (request,) = server.messages_requests()
    assert "Deploy token lives in the vault" in "\n".join(request.texts())
    assert secret.encode() not in request.raw and b"[REDACTED:" in request.raw


async def test_an_api_error_leaves_records_as_they_were(store: Store) -> None:
    seeded = await seed(store)
    lines: list[str] = []
    with MessagesServer(default=ErrorReply(500)) as server:
        async with client(server) as api:
            report = await run_step(store, api, lines=lines)
    assert (report.asked, report.written, report.llm_errors, report.skipped) == (2, 0, 1, 2)
    assert any("asked again next run" in line for line in lines)
    rows = await store.rows("SELECT title, cues FROM records ORDER BY title")
    assert {str(r[0]): str(r[1]) for r in rows} == {
        title: "\n".join(record.cues) for title, record in seeded.items()
    }


async def test_a_text_answer_writes_nothing(store: Store) -> None:
    await seed(store)
    with MessagesServer(default=ToolUseReply("another_tool", {})) as server:
        async with client(server) as api:
            report = await run_step(store, api)
    assert (report.written, report.llm_errors, report.skipped) == (0, 1, 2)


async def test_an_expired_time_box_sends_nothing(store: Store) -> None:
    await seed(store)
    with MessagesServer(model()) as server:
        async with client(server) as api:
            report = await run_step(store, api, timebox=TimeBox(0))
    assert report.unfinished and report.asked == 0 and report.skipped == 2
    assert server.messages_requests() == []


async def test_without_a_client_nothing_is_sent(store: Store) -> None:
    await seed(store)
    report = await run_step(store, None)
    assert not report.llm and report.candidates == 0 and report.asked == 0


def settings() -> dict[str, Any]:
    return {**config.load(), "embeddings": False}


async def test_consolidation_runs_the_step_and_reports_it(store: Store) -> None:
    seeded = await seed(store)
    with MessagesServer(model()) as server:
        async with client(server) as api:
            reports = await consolidate(store, P, settings=settings(), client=api, time_box=None)
    report = reports[-1]
    assert report.status == "done", report.to_dict()
    assert report.steps["cues"]["result"]["written"] == 2
    assert reports[0].steps["cues"]["result"]["candidates"] == 0  # global: no records
    exporter = await store.get(seeded["The metrics exporter refreshes its cache hourly"].id)
    assert exporter.cues == ("why does grafana show stale tenants",)


async def test_an_api_error_does_not_stop_consolidation(store: Store) -> None:
    await seed(store)
    with MessagesServer(default=ErrorReply(500)) as server:
        async with client(server) as api:
            (_, report) = await consolidate(
                store, P, settings=settings(), client=api, time_box=None
            )
    assert report.errors == [] and report.status == "done"
    assert report.steps["cues"]["result"]["llm_errors"] == 1
    assert {"scores", "digest", "archive"} <= set(report.steps)
    assert await store.rows("SELECT id FROM records WHERE cues != '' AND title != ?",
                            ("Handlers return Result objects",)) == []  # fmt: skip


async def test_consolidation_without_a_client_sends_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    await seed(store)
    with MessagesServer(model()) as server:
        (_, report) = await consolidate(store, P, settings=settings(), time_box=None)
    assert server.messages_requests() == []
    assert report.steps["cues"]["result"]["llm"] is False
