"""A finished handover does not stay current: extraction closes it when the model says so."""

from __future__ import annotations

import json
from contextlib import closing
from typing import TYPE_CHECKING

import pytest

from agentctx.core import db, home
from agentctx.core.project import identify
from agentctx.extract import apply
from agentctx.records import Record
from agentctx.retrieval import digest
from agentctx.store import Store
from tests.helpers import new_record
from tests.messages_server import MessagesServer
from tests.test_extract import SID, Transcript, extraction, records, run

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("api_key")]

OPEN_TASK = "Handover: Migrating the billing service to gRPC"


@pytest.fixture
def transcript(tmp_path: Path, project_dir: Path) -> Transcript:
    script = Transcript(tmp_path / f"{SID}.jsonl", project_dir)
    script.add("user", "The billing client stubs are generated and the invoices proto is merged.")
    script.add("assistant", "Done: the billing service now talks gRPC end to end.")
    return script


async def open_handover(project_dir: Path, *, session_id: str = "earlier-session") -> Record:
    async with await Store.open() as store:
        return await store.add(
            new_record(
                type="handover",
                title=OPEN_TASK,
                body="Current task: Migrating the billing service to gRPC\n"
                "Next steps:\n- generate client stubs",
                project_id=identify(str(project_dir)).project_id,
                source="llm_extraction",
                session_id=session_id,
            )
        )


async def current_handover() -> Record:
    (current,) = [r for r in await records(type="handover") if r.is_current]
    assert isinstance(current, Record)
    return current


async def test_the_model_is_shown_the_open_handover_and_closes_it(
    transcript: Transcript, project_dir: Path
) -> None:
    old = await open_handover(project_dir)
    with MessagesServer(default=extraction(handover_done=True)) as server:
        report = await run(server, transcript)
    (request,) = server.messages_requests()
    sent = request.body["messages"][0]["content"]
    assert f"Open handover from an earlier session ({old.id}): {OPEN_TASK}" in sent
    assert "generate client stubs" in sent
    assert "handover_done" in request.body["tools"][0]["input_schema"]["properties"]
    assert report.status == "extracted" and report.closed_handover == old.id
    closed = await current_handover()
    assert closed.title == apply.CLOSED_HANDOVER_TITLE and closed.session_id == SID
    assert closed.body == "Nothing is left open. Finished: Migrating the billing service to gRPC"
    (history,) = [r for r in await records(type="handover") if r.id == old.id]
    assert history.superseded_by == closed.id  # kept as history, not deleted
    # the next session's digest hands over no finished task
    conn, _ = db.connect(home.db_path(), load_vec=False)
    with closing(conn):
        text = str(digest.build(conn, identify(str(project_dir)).project_id, "shop")["text"])
    assert "Nothing is left open" in text and "generate client stubs" not in text


async def test_a_closed_handover_is_not_shown_again(
    transcript: Transcript, project_dir: Path
) -> None:
    await open_handover(project_dir)
    with MessagesServer(default=extraction(handover_done=True)) as server:
        await run(server, transcript)
        transcript.add("user", "Now let us look at the orders service.")
        again = await run(server, transcript)
    assert again.closed_handover is None
    second = server.messages_requests()[-1].body["messages"][0]["content"]
    assert "Open handover" not in second
    assert len(await records(type="handover")) == 2  # no second "no open work" record


async def test_work_left_open_is_a_new_handover_not_a_closed_one(
    transcript: Transcript, project_dir: Path
) -> None:
    old = await open_handover(project_dir)
    work = {"current_task": "Moving invoices to the new proto", "next_steps": ["backfill"]}
    with MessagesServer(default=extraction(handover_done=True, active_work=work)) as server:
        report = await run(server, transcript)
    assert report.closed_handover is None
    current = await current_handover()
    assert current.title == "Handover: Moving invoices to the new proto"
    (history,) = [r for r in await records(type="handover") if r.id == old.id]
    assert history.superseded_by == current.id


async def test_without_handover_done_the_open_handover_stays(
    transcript: Transcript, project_dir: Path
) -> None:
    old = await open_handover(project_dir)
    with MessagesServer(default=extraction()) as server:  # empty active_work, nothing said
        report = await run(server, transcript)
    assert report.closed_handover is None and (await current_handover()).id == old.id


async def test_a_trivial_session_that_finished_the_work_still_closes_it(
    transcript: Transcript, project_dir: Path
) -> None:
    old = await open_handover(project_dir)
    reply = extraction(handover_done=True, flush_ok=True)
    with MessagesServer(default=reply) as server:
        report = await run(server, transcript)
    assert report.status == "flush_ok" and report.closed_handover == old.id


async def test_no_open_handover_nothing_to_close(transcript: Transcript, project_dir: Path) -> None:
    with MessagesServer(default=extraction(handover_done=True)) as server:
        report = await run(server, transcript)
    assert "Open handover" not in json.dumps(server.messages_requests()[0].body)
    assert report.closed_handover is None and await records(type="handover") == []


async def test_a_handover_written_meanwhile_by_another_session_is_left_alone(
    project_dir: Path,
) -> None:
    shown = await open_handover(project_dir)
    newer = await open_handover(project_dir, session_id="parallel-session")  # supersedes `shown`
    parsed = apply.parse({"flush_ok": False, "handover_done": True})
    pid = identify(str(project_dir)).project_id
    async with await Store.open() as store, store.transaction() as tx:
        applied = await apply.write(
            tx, parsed, project_id=pid, session_id=SID, threshold=3, open_handover=shown.id
        )
    assert applied.closed_handover is None
    assert (await current_handover()).id == newer.id
