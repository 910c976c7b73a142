"""Extraction against a real HTTP server on 127.0.0.1 speaking the Messages API, real client."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from anthropic import AsyncAnthropic

from agentctx.core import clock, home
from agentctx.core.project import identify
from agentctx.extract import extract_session, llm, prompt
from agentctx.store import SearchQuery, Store, inventory
from tests.helpers import new_record, payload, run_hook, seed
from tests.messages_server import ErrorReply, MessagesServer, Recorded, TextReply, ToolUseReply

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

SID = "7d0e5a2c-1111-4c1e-8f3d-0123456789ab"
SECRETS = [
    "sk-ant-api03-" + "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz" * 2,
    "AKIA" + "QWERTYUIOPASDFGH",
    "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "hunter2-" + "correct-horse",
]


class Transcript:
    """Write a Claude Code transcript, line by line, as the CLI does."""

    def __init__(self, path: Path, cwd: Path) -> None:
        self.path = path
        self.cwd = cwd
        self.count = 0

    def add(self, role: str, text: str) -> str:
        self.count += 1
        uuid = f"00000000-0000-4000-8000-{self.count:012d}"
        if role == "user":
            message: dict[str, Any] = {"role": "user", "content": text}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        line = {
            "type": role, "uuid": uuid, "sessionId": SID, "cwd": str(self.cwd),
            "timestamp": clock.now(), "isSidechain": False, "message": message,
        }  # fmt: skip
        with self.path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")
        return uuid


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "shop"
    path.mkdir()
    return path


@pytest.fixture
def transcript(tmp_path: Path, project: Path) -> Transcript:
    return Transcript(tmp_path / f"{SID}.jsonl", project)


def client(server: MessagesServer, retries: int = 2) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=retries)


def extraction(**fields: Any) -> ToolUseReply:
    return ToolUseReply(prompt.TOOL_NAME, {"flush_ok": False, **fields})


DECISION: dict[str, Any] = {"what": "Internal services talk gRPC instead of REST", "rationale": "streaming",
            "supersedes": None, "confidence": "explicit", "keywords": ["grpc", "rest"]}  # fmt: skip


async def run(
    server: MessagesServer, transcript: Transcript, *, retries: int = 2, **kwargs: Any
) -> Any:
    async with await Store.open() as store, client(server, retries) as api:
        return await extract_session(
            store, SID, transcript=str(transcript.path), client=api, **kwargs
        )


async def records(**where: str) -> list[Any]:
    async with await Store.open() as store:
        found = await store.list_records()
    return [r for r in found if all(getattr(r, k) == v for k, v in where.items())]


def bodies(server: MessagesServer) -> str:
    return json.dumps([r.body for r in server.messages_requests()])


# -- the call ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("api_key")
async def test_whole_tier_one_cached_forced_call(transcript: Transcript, project: Path) -> None:
    transcript.add("user", "Let's move internal services from REST to gRPC, for streaming.")
    transcript.add("assistant", "Sounds good, I will switch the client.")
    with MessagesServer(replies=[extraction(decisions=[DECISION])]) as server:
        report = await run(server, transcript)
    assert report.status == "extracted" and report.tier == "whole" and report.calls == 1
    (request,) = server.messages_requests()
    body = request.body
    assert body["model"] == "claude-haiku-4-5"
    # with the cues' schema the estimated shared prefix reaches Haiku 4.5's minimum cacheable
    # length: a breakpoint is claimed (the API ignores it if the real prefix is shorter)
    assert llm.min_cacheable("claude-haiku-4-5") <= llm.CACHE_PREFIX
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tool_choice"] == {"type": "tool", "name": prompt.TOOL_NAME}
    assert body["tools"][0]["input_schema"] == prompt.OUTPUT_SCHEMA
    assert "move internal services from REST to gRPC" in body["messages"][0]["content"]
    (decision,) = await records(type="decision")
    assert decision.title == DECISION["what"] and decision.confidence == "explicit"
    assert decision.source == "llm_extraction" and decision.session_id == SID
    assert decision.project_id == identify(str(project)).project_id
    assert decision.keywords == "grpc rest"


@pytest.mark.usefixtures("api_key")
async def test_incremental_and_idempotent(transcript: Transcript) -> None:
    transcript.add("user", "We keep Postgres 16 for the orders service.")
    with MessagesServer(default=extraction(decisions=[DECISION])) as server:
        first = await run(server, transcript)
        again = await run(server, transcript)
        assert (first.status, again.status) == ("extracted", "nothing_new")
        assert len(server.messages_requests()) == 1  # nothing new: no call at all
        transcript.add("user", "From now on, name queues after their consumer.")
        third = await run(server, transcript)
        assert third.status == "extracted"
        last = server.messages_requests()[-1].body["messages"][0]["content"]
    assert "name queues after their consumer" in last
    assert "Postgres 16" not in last  # old text is never sent again
    assert len(await records(type="decision")) == 1  # the repeat in the same session is dropped


@pytest.mark.usefixtures("api_key")
async def test_no_secret_reaches_the_request_or_the_store(transcript: Transcript) -> None:
    transcript.add(
        "user",
        f"Deploy with ANTHROPIC_API_KEY={SECRETS[0]} and aws key {SECRETS[1]}; token={SECRETS[2]}; "
        f"the db is postgres://app:{SECRETS[3]}@db.internal:5432/shop. "
        "<private>my home address is 1 Main St</private> Please decide the deploy target.",
    )
    # The model only ever sees redacted text; should it still echo a secret of a known shape
    # (say, from its own output), the stored record is redacted too.
    echo = {**DECISION, "what": f"Deploy with key {SECRETS[0]}", "rationale": f"token={SECRETS[2]}"}
    with MessagesServer(replies=[extraction(decisions=[echo])]) as server:
        report = await run(server, transcript)
    assert report.status == "extracted"
    sent = bodies(server)
    stored = json.dumps([r.to_dict() for r in await records()])
    for secret in [*SECRETS, "1 Main St"]:
        assert secret not in sent, secret
        assert secret not in stored, secret
    assert "[REDACTED" in sent


@pytest.mark.usefixtures("api_key")
async def test_head_tail_tier(transcript: Transcript) -> None:
    for i in range(60):
        transcript.add("user", f"Step {i}: " + "refactor the payment adapter carefully. " * 40)
    with MessagesServer(replies=[extraction(decisions=[DECISION])]) as server:
        report = await run(server, transcript)
    assert report.tier == "head_tail" and report.calls == 1
    content = server.messages_requests()[0].body["messages"][0]["content"]
    assert "the middle of the session is left out" in content
    assert "Step 0:" in content and "Step 59:" in content and "Step 30:" not in content


@pytest.mark.usefixtures("api_key")
async def test_map_reduce_chunks_run_concurrently_then_synthesis(transcript: Transcript) -> None:
    for i in range(200):
        transcript.add("user", f"Part {i}: " + "we discussed the cache invalidation plan. " * 40)

    def is_chunk(request: Recorded) -> bool:
        if (request.method, request.route) != ("POST", "/v1/messages"):
            return False
        return prompt.SYNTHESIS_NOTE[:40] not in request.body["messages"][0]["content"]

    def script(request: Recorded) -> ToolUseReply:
        if not is_chunk(request):
            return extraction(decisions=[DECISION])
        # four at once: no chunk is answered before four chunks were asked, so calls made one
        # at a time would wait here until the timeout and fail the extraction (an order, not a
        # speed: nothing here depends on how busy the machine is)
        server.wait_for(lambda got: sum(map(is_chunk, got)) >= 4, timeout=60)
        return ToolUseReply(prompt.TOOL_NAME, {"flush_ok": False, "decisions": [DECISION]})

    with MessagesServer(script) as server:
        report = await run(server, transcript)
    requests = server.messages_requests()
    assert report.tier == "map_reduce" and report.status == "extracted"
    chunks = requests[:-1]
    assert len(chunks) >= 5 and report.calls == len(requests)
    assert all(map(is_chunk, chunks)) and not is_chunk(requests[-1])
    assert prompt.SYNTHESIS_NOTE[:40] in requests[-1].body["messages"][0]["content"]
    assert requests[-1].received >= max(r.received for r in chunks)
    assert len(await records(type="decision")) == 1


# -- output handling --------------------------------------------------------------------------------


@pytest.mark.usefixtures("api_key")
async def test_flush_ok_writes_nothing_but_counts_cost(transcript: Transcript) -> None:
    transcript.add("user", "hi")
    with MessagesServer(replies=[ToolUseReply(prompt.TOOL_NAME, {"flush_ok": True})]) as server:
        report = await run(server, transcript)
    assert report.status == "flush_ok" and report.cost_usd > 0
    assert await records() == []
    async with await Store.open() as store:
        session = await inventory.session(store, SID)
        status = await inventory.status(store, session["project_id"] if session else None)
    assert session is not None and session["extraction_cost_usd"] == pytest.approx(report.cost_usd)
    assert session["extracted_uuid"]
    assert status["extraction_cost_usd"] == pytest.approx(report.cost_usd)
    month = session["started_at"][:7]
    assert status["extraction_cost_by_month"][month] == pytest.approx(report.cost_usd)


@pytest.mark.usefixtures("api_key")
async def test_malformed_entries_are_dropped_one_by_one(transcript: Transcript) -> None:
    transcript.add("user", "Decide the queue naming.")
    output = extraction(
        decisions=[123, {"what": ""}, {"confidence": "explicit"}, DECISION],
        preferences="not a list",
        conventions=[{"convention": "Queues are named after their consumer", "confidence": "x"}],
        active_work=[1, 2],
    )
    with MessagesServer(replies=[output]) as server:
        report = await run(server, transcript)
    assert report.status == "extracted"
    assert report.written == {"decision": 1, "convention": 1}
    assert report.dropped == 5
    (convention,) = await records(type="convention")
    assert convention.confidence == "inferred"  # an unknown confidence is not taken as explicit


@pytest.mark.usefixtures("api_key")
async def test_a_text_answer_keeps_the_session_queued(transcript: Transcript) -> None:
    transcript.add("user", "Decide the queue naming.")
    with MessagesServer(replies=[TextReply("I cannot use tools today")]) as server:
        report = await run(server, transcript)
    assert report.status == "failed" and await records() == []
    async with await Store.open() as store:
        session = await inventory.session(store, SID)
    assert session is not None and session["extracted_uuid"] is None


@pytest.mark.usefixtures("api_key")
async def test_rate_limit_and_overload_are_retried(transcript: Transcript) -> None:
    transcript.add("user", "We use gRPC between services.")
    replies: list[ErrorReply | ToolUseReply] = [
        ErrorReply(429, retry_after=0),
        ErrorReply(529),
        extraction(decisions=[DECISION]),
    ]
    with MessagesServer(replies=replies) as server:
        report = await run(server, transcript, retries=3)
    assert report.status == "extracted"
    assert len(server.messages_requests()) == 3


@pytest.mark.usefixtures("api_key")
async def test_permanent_failure_keeps_the_session_queued(transcript: Transcript) -> None:
    transcript.add("user", "We use gRPC between services.")
    with MessagesServer(default=ErrorReply(500, "boom")) as server:
        report = await run(server, transcript)
        assert report.status == "failed" and "500" in (report.error or "")
        assert await records() == []
        async with await Store.open() as store:
            session = await inventory.session(store, SID)
        assert session is not None
        assert session["extracted_uuid"] is None and session["extraction_error"]
        server.default = extraction(decisions=[DECISION])
        retried = await run(server, transcript)  # the next run sends the same text again
    assert retried.status == "extracted"
    assert len(await records(type="decision")) == 1


async def test_no_api_key_sends_nothing(transcript: Transcript) -> None:
    transcript.add("user", "We use gRPC between services.")
    assert "ANTHROPIC_API_KEY" not in os.environ
    with MessagesServer() as server:
        report = await run(server, transcript)
    assert report.status == "no_backend" and report.backend is None
    assert server.requests == []


@pytest.mark.usefixtures("api_key")
async def test_llm_off_sends_nothing(transcript: Transcript) -> None:
    from agentctx import config

    config.set_value("llm", "off")
    transcript.add("user", "We use gRPC between services.")
    with MessagesServer() as server:
        report = await run(server, transcript)
    assert report.status == "llm_off" and server.requests == []


@pytest.mark.usefixtures("api_key")
async def test_dry_run_shows_the_redacted_prompt(transcript: Transcript) -> None:
    transcript.add("user", f"Use the key {SECRETS[0]} for the gRPC gateway.")
    with MessagesServer() as server:
        report = await run(server, transcript, dry_run=True)
    assert report.status == "dry_run" and server.requests == []
    assert report.prompt and "gRPC gateway" in report.prompt[0]
    assert SECRETS[0] not in report.prompt[0]


# -- mapping ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("api_key")
async def test_supersedes_a_real_id_and_ignores_an_unknown_one(
    transcript: Transcript, project: Path
) -> None:
    pid = identify(str(project)).project_id
    async with await Store.open() as store:
        old = await store.add(new_record(type="decision", title="Services talk REST",
                                        body="JSON over HTTP", project_id=pid))  # fmt: skip
    transcript.add("user", "Drop REST, we go gRPC.")
    replacing = {**DECISION, "supersedes": old.id}
    unknown = {**DECISION, "what": "Protobufs live in proto/", "supersedes": "01NOPE"}
    with MessagesServer(replies=[extraction(decisions=[replacing, unknown])]) as server:
        report = await run(server, transcript)
    assert old.id in server.messages_requests()[0].body["messages"][0]["content"]
    assert report.superseded == 1 and report.unknown_supersedes == ["01NOPE"]
    async with await Store.open() as store:
        before = await store.get(old.id)
        current = await store.list_records(pid, types=("decision",), include_superseded=False)
    assert before.superseded_by is not None
    assert sorted(r.title for r in current) == sorted([DECISION["what"], unknown["what"]])


@pytest.mark.usefixtures("api_key")
async def test_preferences_global_namespace_and_reinforcement(
    transcript: Transcript, tmp_path: Path
) -> None:
    preference = {"category": "tooling", "rule": "Use pnpm, never npm", "confidence": "inferred",
                  "scope": "global"}  # fmt: skip
    sessions = []
    for n in range(3):
        path = tmp_path / f"s{n}.jsonl"
        t = Transcript(path, transcript.cwd)
        t.add("user", "install deps with pnpm please: I use pnpm, never npm, in every project")
        sessions.append(path)
    with MessagesServer(default=extraction(preferences=[preference])) as server:
        for n, path in enumerate(sessions):
            async with await Store.open() as store, client(server) as api:
                await extract_session(store, f"session-{n}", transcript=str(path), client=api)  # fmt: skip
            (pref,) = await records(type="preference")
            assert pref.project_id == "global" and pref.scope == "global"
            assert pref.reinforce_count == n
            assert pref.confidence == ("reinforced" if n == 2 else "inferred")


@pytest.mark.usefixtures("api_key")
async def test_bugfix_enriches_the_sessions_stub(transcript: Transcript, project: Path) -> None:
    from agentctx.core.connect import WRITE_BUSY_MS
    from agentctx.core.observe import STUB_NOTE_FIX, apply

    pid = identify(str(project)).project_id
    async with await Store.open():
        pass
    from agentctx.core import db

    conn, _ = db.connect(home.db_path(), busy_timeout_ms=WRITE_BUSY_MS)
    apply(conn, [{"kind": "stub", "project_id": pid, "session_id": SID, "at": clock.now(),
                  "title": "Test failure: pytest -q", "body": f"failed\n{STUB_NOTE_FIX}",
                  "files": ["tests/test_auth.py"]}])  # fmt: skip
    conn.close()
    transcript.add("user", "The refresh test fails, fix the interceptor.")
    fix = {"problem": "Token not refreshed on 401", "fix": "refresh in the interceptor",
           "files": ["tests/test_auth.py"]}  # fmt: skip
    with MessagesServer(replies=[extraction(bugfixes=[fix])]) as server:
        report = await run(server, transcript)
    assert report.enriched == 1 and report.written == {}
    (stub,) = await records(type="bugfix")
    assert "refresh in the interceptor" in stub.body and stub.title == "Test failure: pytest -q"
    assert stub.body.endswith("\n\nObserved: failed")  # the stub's "extraction may add…" is gone


@pytest.mark.usefixtures("api_key")
async def test_active_work_becomes_the_handover(transcript: Transcript, project: Path) -> None:
    transcript.add("user", "Keep going with the billing migration.")
    work = {"current_task": "Migrating billing to gRPC", "blockers": ["invoice proto"],
            "next_steps": ["generate stubs"], "open_questions": []}  # fmt: skip
    with MessagesServer(replies=[extraction(active_work=work)]) as server:
        await run(server, transcript)
    (handover,) = await records(type="handover")
    assert handover.title == "Handover: Migrating billing to gRPC"
    assert "- generate stubs" in handover.body


def test_cost_arithmetic() -> None:
    usage = llm.Usage()

    class U:
        input_tokens = 1_000_000
        output_tokens = 200_000
        cache_creation_input_tokens = 400_000
        cache_read_input_tokens = 2_000_000

    usage.add(U())
    # $1/M input, $5/M output, cache writes 1.25×, cache reads 0.1×
    assert usage.cost_usd == pytest.approx(1.0 + 1.0 + 0.5 + 0.2)


# -- the detached runner ----------------------------------------------------------------------------


def test_stop_hook_detaches_the_extraction(transcript: Transcript, project: Path) -> None:
    for i in range(40):
        transcript.add("user", f"Note {i}: we agreed the gRPC deadlines are mandatory. " * 20)
    answer = threading.Event()
    with MessagesServer(default=extraction(decisions=[DECISION]), hold=answer) as server:
        env = {"ANTHROPIC_API_KEY": "sk-test-key", "ANTHROPIC_BASE_URL": server.url}
        seed(project, [])  # the store exists (status no longer creates it)
        data = payload("Stop", SID, project, stop_hook_active=False)
        data["transcript_path"] = str(transcript.path)
        # the answer is held until the hook has exited: a hook that waited for it times out here
        result = run_hook("stop", data, cwd=project, env=env, timeout=20)
        assert result.returncode == 0 and result.stdout == b""
        assert len(server.wait_for(lambda rs: len(rs) >= 1, timeout=30)) == 1
        answer.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            import sqlean

            conn = sqlean.connect(home.db_path())
            found = conn.execute("SELECT count(*) FROM records WHERE type='decision'").fetchone()
            conn.close()
            if found[0]:
                break
            time.sleep(0.1)
        assert found[0] == 1


@pytest.mark.usefixtures("api_key")
async def test_reinforcement_counts_sessions_not_runs(
    transcript: Transcript, tmp_path: Path
) -> None:
    rule = {"rule": "Prefer small commits", "confidence": "inferred", "scope": "global"}
    first = Transcript(tmp_path / "first.jsonl", transcript.cwd)
    first.add("user", "commit in small steps please")
    with MessagesServer(default=extraction(preferences=[rule])) as server:
        async with await Store.open() as store, client(server) as api:
            await extract_session(store, "first", transcript=str(first.path), client=api)
            for turn in range(3):  # the same other session, three incremental runs
                transcript.add("user", f"small commits again ({turn})")
                await extract_session(store, SID, transcript=str(transcript.path), client=api)
    (pref,) = await records(type="preference")
    assert pref.reinforce_count == 1 and pref.confidence == "inferred"


@pytest.mark.usefixtures("api_key")
async def test_an_overlong_entry_is_cut_not_lost(transcript: Transcript) -> None:
    transcript.add("user", "Write down the whole reasoning.")
    long = {**DECISION, "what": "w " * 700, "rationale": "r " * 700}
    with MessagesServer(replies=[extraction(decisions=[long])]) as server:
        report = await run(server, transcript)
    assert report.status == "extracted"
    (decision,) = await records(type="decision")
    assert len(decision.body) <= 2000 and decision.body.endswith("…")


@pytest.mark.usefixtures("api_key")
async def test_a_waiting_run_gets_the_lock_when_the_running_one_ends(
    transcript: Transcript,
) -> None:
    """The SessionEnd worker waits for an extraction Stop started, instead of skipping its turns."""
    from agentctx.core.locks import extraction_lock

    transcript.add("user", "We keep Postgres 16 for the orders service.")
    lines: list[str] = []
    lock = extraction_lock(SID)
    with MessagesServer(default=extraction(decisions=[DECISION])) as server:
        with lock as held:
            assert held
            gave_up = await run(server, transcript, wait=0.3, log=lines.append)
        assert gave_up.status == "locked"
        assert sum("waiting for the running extraction" in line for line in lines) == 1
        assert server.messages_requests() == []

        waiting = anyio.Event()

        def log(line: str) -> None:
            lines.append(line)
            if "waiting for the running extraction" in line:
                waiting.set()

        async def release_once_waiting() -> None:
            await waiting.wait()  # the "running extraction" ends while the other one waits
            lock.__exit__(None, None, None)

        assert lock.__enter__()
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_once_waiting)
            waited = await run(server, transcript, wait=30, log=log)
    assert waited.status == "extracted"
    assert sum("waiting for the running extraction" in line for line in lines) == 2


def test_a_preference_outside_the_schemas_categories_is_dropped_and_counted() -> None:
    """The schema's enum is the rule (seed: validate every entry): a "mood" preference is dropped
    and counted, the others kept; an entry without a category is kept without one."""
    from agentctx.extract import apply
    from agentctx.extract.prompt import OUTPUT_SCHEMA, PREFERENCE_CATEGORIES

    schema = OUTPUT_SCHEMA["properties"]["preferences"]["items"]["properties"]["category"]
    assert schema["enum"] == list(PREFERENCE_CATEGORIES)
    rule = {"confidence": "explicit", "scope": "project"}
    parsed = apply.parse(
        {
            "preferences": [
                {**rule, "category": "mood", "rule": "Be cheerful in commit messages"},
                {**rule, "category": "tooling", "rule": "Use pnpm, never npm"},
                {**rule, "rule": "Prefer small pull requests"},
            ]
        }
    )
    assert parsed.dropped == 1
    bodies = [e.body for e in parsed.entries]
    assert bodies == ["Use pnpm, never npm\n(category: tooling)", "Prefer small pull requests"]


# -- retrieval cues (issue 14) ------------------------------------------------------------------------


@pytest.mark.usefixtures("api_key")
async def test_entries_cues_go_with_their_records_and_find_them(
    transcript: Transcript, project: Path
) -> None:
    pid = identify(str(project)).project_id
    async with await Store.open() as store:
        old = await store.add(new_record(type="convention", title="Queues are snake_case",
                                        body="billing_events", project_id=pid))  # fmt: skip
    transcript.add("user", "Services go gRPC; and queue names are kebab-case from now on.")
    cued = {**DECISION, "cues": ["how do our services call each other", "  ", 7,
                                 "HOW DO OUR SERVICES CALL EACH OTHER", "new endpoint: rpc?"]}  # fmt: skip
    kebab = {"convention": "Queue names are kebab-case", "confidence": "explicit",
             "supersedes": old.id, "cues": ["what do I name a broker topic"]}  # fmt: skip
    gotcha = {"pattern": "The staging DB is shared", "why_it_matters": "migrations collide",
              "cues": "not a list"}  # fmt: skip
    output = extraction(decisions=[cued], conventions=[kebab], gotchas=[gotcha])
    with MessagesServer(replies=[output]) as server:
        report = await run(server, transcript)
    assert report.superseded == 1
    schema = server.messages_requests()[0].body["tools"][0]["input_schema"]
    assert schema["properties"]["decisions"]["items"]["properties"]["cues"]["maxItems"] == 4
    (decision,) = await records(type="decision")
    assert decision.cues == ("how do our services call each other", "new endpoint: rpc?")
    (convention,) = [r for r in await records(type="convention") if r.is_current]
    assert convention.cues == ("what do I name a broker topic",)  # the superseding record's own
    (discovery,) = await records(type="discovery")
    assert discovery.cues == ()
    async with await Store.open() as store:  # found by words only its cues hold
        hits = (await store.search(SearchQuery("broker topic", project_id=pid))).hits
        assert [hit.record.id for hit in hits] == [convention.id]
        hits = (await store.search(SearchQuery("call each other", project_id=pid))).hits
        assert [hit.record.id for hit in hits] == [decision.id]


@pytest.mark.usefixtures("api_key")
async def test_an_explained_stub_and_a_repeated_record_get_the_entrys_cues(
    transcript: Transcript, project: Path
) -> None:
    from agentctx.core.connect import WRITE_BUSY_MS
    from agentctx.core.observe import STUB_NOTE_FIX, apply

    pid = identify(str(project)).project_id
    async with await Store.open() as store:
        known = await store.add(new_record(type="decision", title=DECISION["what"],
                                          body="as before", project_id=pid))  # fmt: skip
    from agentctx.core import db

    conn, _ = db.connect(home.db_path(), busy_timeout_ms=WRITE_BUSY_MS)
    apply(conn, [{"kind": "stub", "project_id": pid, "session_id": SID, "at": clock.now(),
                  "title": "Test failure: pytest -q", "body": f"failed\n{STUB_NOTE_FIX}",
                  "files": ["tests/test_auth.py"]}])  # fmt: skip
    conn.close()
    transcript.add("user", "The refresh test fails, fix the interceptor.")
    fix = {"problem": "Token not refreshed on 401", "fix": "refresh in the interceptor",
           "files": ["tests/test_auth.py"], "cues": ["why am I logged out after an hour"]}  # fmt: skip
    again = {**DECISION, "cues": ["how do our services call each other"]}
    with MessagesServer(replies=[extraction(bugfixes=[fix], decisions=[again])]) as server:
        report = await run(server, transcript)
    assert report.enriched == 1 and report.written == {} and report.reinforced == 1
    (stub,) = await records(type="bugfix")
    assert stub.cues == ("why am I logged out after an hour",)
    (decision,) = await records(type="decision")
    assert decision.id == known.id and decision.cues == ("how do our services call each other",)
