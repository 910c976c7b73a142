"""Parallel sessions in linked worktrees of one repository: shared memory, one handover per checkout."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.core import ledger
from agentctx.core.handles import handle
from agentctx.core.project import checkout_key, identify
from agentctx.extract import apply, extract_session
from agentctx.store import Store, transfer
from tests.helpers import contract, new_record, payload, query, run_cli, run_hook, seed
from tests.messages_server import MessagesServer
from tests.test_extract import Transcript, client, extraction, records
from tests.test_project import Git, make_repo

if TYPE_CHECKING:
    from pathlib import Path

real = os.path.realpath  # a plain name: the async tests compute checkout keys with it too

SID_A = "aaaaaaaa-0000-4000-8000-00000000000a"
SID_B = "bbbbbbbb-0000-4000-8000-00000000000b"
TASK_A = "Refactor the auth store so tokens refresh on 401"
TASK_B = "Port the billing client to gRPC streaming"
DECISION = {"type": "decision", "title": "Use gRPC for internal services", "body": "For streaming."}


@pytest.fixture
def worktrees(tmp_path: Path) -> tuple[Path, Path]:
    """The main worktree of a repository and a linked one (``git worktree add``)."""
    git = Git(tmp_path)
    main = make_repo(git, tmp_path / "shop")
    git("worktree", "add", "-q", "-b", "billing", tmp_path / "shop-billing", cwd=main)
    return main, tmp_path / "shop-billing"


def pre_compact(checkout: Path, session_id: str, request: str) -> None:
    """Run the real PreCompact hook of a session working on ``request`` in ``checkout``."""
    lines = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": request}},
        {
            "type": "assistant",
            "uuid": "a1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "On it."}]},
        },
    ]
    transcript = checkout.parent / f"{session_id}.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    data = payload("PreCompact", session_id, checkout, trigger="auto")
    data["transcript_path"] = str(transcript)
    result = run_hook("pre-compact", data, cwd=checkout)
    assert result.returncode == 0 and result.stdout == b"", result.stderr


def session_start(checkout: Path, session_id: str) -> str:
    data = payload("SessionStart", session_id, checkout, source="startup")
    return contract(run_hook("session-start", data, cwd=checkout), "SessionStart") or ""


def current_handovers() -> dict[str | None, tuple[str, str]]:
    """key -> (id, title) of every current handover."""
    rows = query(
        "SELECT key, id, title FROM records WHERE type = 'handover' AND superseded_at IS NULL"
    )
    found = {row[0]: (str(row[1]), str(row[2])) for row in rows}
    assert len(found) == len(rows)
    return found


def test_each_worktree_is_handed_its_own_handover(worktrees: tuple[Path, Path]) -> None:
    main, linked = worktrees
    assert identify(str(main)).project_id == identify(str(linked)).project_id  # one project
    (decision,) = seed(main, [DECISION])
    pre_compact(main, SID_A, TASK_A)
    pre_compact(linked, SID_B, TASK_B)
    current = current_handovers()
    key_a, key_b = os.path.realpath(main), os.path.realpath(linked)
    assert set(current) == {key_a, key_b}  # the second did not supersede the first
    assert TASK_A in current[key_a][1] and TASK_B in current[key_b][1]
    (linked / "pkg").mkdir()
    for checkout, sid, mine, other in (
        (main, SID_A, key_a, key_b),
        (linked, SID_B, key_b, key_a),
        (linked / "pkg", "cccccccc-0000-4000-8000-00000000000c", key_b, key_a),
    ):
        text = session_start(checkout, sid)
        assert DECISION["title"] in text and handle(decision) in text  # the rest is shared
        assert f"id {handle(current[mine][0])})" in text and current[mine][1][10:] in text
        assert handle(current[other][0]) not in text and current[other][1][10:] not in text
        shown = ledger.injected_ids(ledger.read_entries(sid))
        assert current[mine][0] in shown and current[other][0] not in shown
        assert decision in shown


def test_a_legacy_handover_is_shown_everywhere_until_the_first_keyed_one(
    worktrees: tuple[Path, Path],
) -> None:
    main, linked = worktrees
    (legacy,) = seed(main, [{"type": "handover", "title": "Handover: old task", "body": "old"}])
    for checkout, sid in ((main, SID_A), (linked, SID_B)):
        assert f"id {handle(legacy)})" in session_start(checkout, sid)
    pre_compact(linked, SID_B, TASK_B)
    (kept,) = current_handovers().values()
    assert query("SELECT superseded_by FROM records WHERE id = ?", (legacy,)) == [(kept[0],)]
    text_b = session_start(linked, SID_B)
    assert f"id {handle(kept[0])})" in text_b and handle(legacy) not in text_b
    text_a = session_start(main, "dddddddd-0000-4000-8000-00000000000d")
    assert "Last handover" not in text_a and kept[0] not in text_a  # B's is not A's


def test_checkout_key_is_the_worktree_top_level(worktrees: tuple[Path, Path]) -> None:
    main, linked = worktrees
    (linked / "a" / "b").mkdir(parents=True)
    assert checkout_key(str(linked / "a" / "b")) == os.path.realpath(linked)
    assert checkout_key(str(main)) == os.path.realpath(main)
    assert identify(str(linked)).root == os.path.realpath(main)  # the project is the main one's


def test_cli_record_handover_belongs_to_the_current_worktree(worktrees: tuple[Path, Path]) -> None:
    main, linked = worktrees
    seed(main, [])
    for checkout, task in ((main, TASK_A), (linked, TASK_B)):
        run_cli("record", "--type", "handover", "--title", task, "--body", task, cwd=checkout)
    current = current_handovers()
    assert current[os.path.realpath(main)][1] == TASK_A
    assert current[os.path.realpath(linked)][1] == TASK_B


@pytest.mark.anyio
async def test_extraction_in_one_worktree_touches_only_its_handover(
    worktrees: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    main, linked = worktrees
    async with await Store.open() as store:  # the hooks write to an existing store only
        await store.touch_project(identify(str(main)))
    pre_compact(main, SID_A, TASK_A)
    pre_compact(linked, SID_B, TASK_B)
    before = current_handovers()
    key_a, key_b = real(main), real(linked)

    async def extract(checkout: Path, sid: str, reply: Any) -> Any:
        script = Transcript(checkout.parent / f"x-{sid}.jsonl", checkout)
        script.add("user", "Carry on with the task.")
        script.add("assistant", "Done for now.")
        with MessagesServer(default=reply) as server:
            async with await Store.open() as store, client(server) as api:
                report = await extract_session(store, sid, transcript=str(script.path), client=api)
            sent = server.messages_requests()[0].body["messages"][0]["content"]
        return report, sent

    work = {"current_task": "Finish the token refresh", "next_steps": ["add a test"]}
    report, sent = await extract(main, SID_A, extraction(active_work=work))
    assert report.status == "extracted"
    assert before[key_a][0] in sent and before[key_b][0] not in sent  # shown its own only
    after = current_handovers()
    assert after[key_a][1] == "Handover: Finish the token refresh"
    assert after[key_b] == before[key_b]  # the other worktree's task is untouched
    # handover_done in the linked worktree closes its task, not the main one's
    report, sent = await extract(linked, SID_B, extraction(handover_done=True))
    assert report.closed_handover == before[key_b][0] and after[key_a][0] not in sent
    final = current_handovers()
    assert final[key_b][1] == apply.CLOSED_HANDOVER_TITLE
    assert final[key_a] == after[key_a]
    assert len(await records(type="handover")) == 4  # 2 snapshots, 1 extracted, 1 closing


@pytest.mark.anyio
async def test_keyed_handovers_survive_an_export_import_round_trip(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    main, linked = worktrees
    project = identify(str(main)).project_id
    async with await Store.open() as store:
        for key, title in ((None, "Legacy"), (real(main), "A"), ("/x/b", "B")):
            await store.add(
                new_record(type="handover", title=title, body=title, project_id=project, key=key)
            )
        data = await transfer.export_data(store, project)
    (tmp_path / "other").mkdir()
    async with await Store.open(str(tmp_path / "other" / "agentctx.db")) as other:
        report = await transfer.import_data(other, data)
        again = await transfer.import_data(other, data)  # idempotent
        current = await other.list_records(project, types=("handover",), include_superseded=False)
        assert {(r.key, r.title) for r in current} == {(real(main), "A"), ("/x/b", "B")}
        assert report.added["records"] == 3 and not report.superseded_on_conflict
        assert again.skipped["records"] == 3
        here = await other.current_handover(project, real(main))
        assert here is not None and here.title == "A"
        assert (await other.current_handover(project, real(linked))) is None
