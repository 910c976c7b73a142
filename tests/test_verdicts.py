"""Learning from use (issue 25): injection verdicts, the store's precision, the prior, calibration.

The verdict calls go through the real ``AsyncAnthropic`` to the loopback Messages API server
(tests/messages_server.py), whose script reads each request and answers per injection; the store
and the session ledger are real files.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
from anthropic import AsyncAnthropic

from agentctx import config
from agentctx.consolidate import consolidate
from agentctx.core import clock, home, learning, ledger, plan, search, sessions
from agentctx.core.connect import open_db
from agentctx.extract import claude_code, verdicts
from agentctx.extract.verdicts import judge_session
from agentctx.store import Store, inventory
from tests.helpers import new_record
from tests.messages_server import MessagesServer, Recorded, TextReply, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agentctx.records import Record

pytestmark = pytest.mark.anyio

SID = "sess-verdicts-1"
P = "p" * 64
INJECTION = re.compile(
    r'<injection id="(i\d+)" shown="[^"]*">\nPrompt: (.*)\nRecord \[(\w+)\]: (.*)\n'
)
#: The scripted model's verdict for a record, by its title.
VERDICT = {
    "Services talk gRPC": "used",
    "Queue names are kebab-case": "ignored",
    "Deploys run on Fridays": "wrong",
}


def client(server: MessagesServer) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=0)


def judge(extra: list[Any] | None = None) -> Callable[[Recorded], ToolUseReply]:
    """A model that gives every injection the verdict :data:`VERDICT` has for its title."""

    def script(request: Recorded) -> ToolUseReply:
        asked = INJECTION.findall("\n".join(request.texts()))
        answers = [
            {"id": key, "verdict": VERDICT.get(title, "ignored"), "reason": f"about {title}"}
            for key, _prompt, _type, title in asked
        ]
        return ToolUseReply(verdicts.TOOL_NAME, {"verdicts": [*answers, *(extra or [])]})

    return script


class Session:
    """A session's transcript and ledger, with times set by the test (seconds before now)."""

    def __init__(self, tmp_path: Path, session_id: str = SID) -> None:
        self.session_id = session_id
        self.path = tmp_path / f"{session_id}.jsonl"
        self.base = clock_now() - 3600.0
        self.count = 0

    def turn(self, role: str, text: str, at: float) -> None:
        self.count += 1
        if role == "user":
            message: dict[str, Any] = {"role": "user", "content": text}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        line = {
            "type": role, "uuid": f"00000000-0000-4000-8000-{self.count:012d}",
            "sessionId": self.session_id, "cwd": "/tmp", "isSidechain": False,
            "timestamp": clock.from_epoch(self.base + at), "message": message,
        }  # fmt: skip
        with self.path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    def inject(self, at: float, ids: list[str], tokens: int = 300, **extra: Any) -> None:
        """A prompt hook's ledger entry ``at`` seconds after the base time."""
        home.ensure_sub("sessions")
        entry = {"t": round(self.base + at, 3), "event": "UserPromptSubmit", "ids": ids,
                 "tokens": tokens, **extra}  # fmt: skip
        with open(ledger.path_for(self.session_id), "a") as fh:
            fh.write(json.dumps(entry) + "\n")


def clock_now() -> float:
    import time

    return time.time()


async def seed(store: Store) -> dict[str, Record]:
    made = [
        new_record("decision", "Services talk gRPC", "Internal services use gRPC, not REST.", P),
        new_record("convention", "Queue names are kebab-case", "billing-events", P),
        new_record("decision", "Deploys run on Fridays", "Release train leaves Friday.", P),
    ]
    return {r.title: await store.add(r) for r in made}


async def conversation(store: Store, tmp_path: Path) -> tuple[Session, dict[str, Record]]:
    """Two prompts: the first got gRPC and the queue convention, the second the deploy day."""
    seeded = await seed(store)
    ids = {title: r.id for title, r in seeded.items()}
    session = Session(tmp_path)
    session.turn("user", "How do the billing and ledger services talk to each other?", 0)
    session.inject(0.4, [ids["Services talk gRPC"], ids["Queue names are kebab-case"]], 400)
    session.turn("assistant", "They talk gRPC (the recorded decision), so I add a proto.", 5)
    session.turn("user", "When can I ship this to production?", 120)
    session.inject(120.3, [ids["Deploys run on Fridays"]], 150)
    session.turn("assistant", "Deploys are continuous now; the Friday note is outdated.", 125)
    return session, seeded


async def test_one_call_judges_every_injection_of_the_session(store: Store, tmp_path: Path) -> None:
    session, seeded = await conversation(store, tmp_path)
    lines: list[str] = []
    with MessagesServer(judge(extra=[{"id": "i99", "verdict": "used", "reason": "x"}])) as server:
        async with client(server) as api:
            report = await judge_session(
                store, SID, transcript=str(session.path), client=api, log=lines.append
            )
    (request,) = server.messages_requests()  # one call for the three injections
    assert request.body["tool_choice"] == {"type": "tool", "name": verdicts.TOOL_NAME}
    assert request.body["tools"][0]["input_schema"] == verdicts.INPUT_SCHEMA
    text = "\n".join(request.texts())
    assert "Prompt: How do the billing and ledger services talk to each other?" in text
    assert "They talk gRPC (the recorded decision)" in text
    assert "Deploys are continuous now" in text
    assert (report.status, report.noted, report.asked, report.judged) == ("judged", 3, 3, 3)
    got = {
        row["record_id"]: (row["verdict"], row["tier"], row["tokens"], row["backend"])
        for row in await store.rows("SELECT * FROM injection_verdicts")
    }
    assert got == {
        seeded["Services talk gRPC"].id: ("used", "whole", 200, "api"),
        seeded["Queue names are kebab-case"].id: ("ignored", "whole", 200, "api"),
        seeded["Deploys run on Fridays"].id: ("wrong", "whole", 150, "api"),
    }
    described = await store.rows(
        "SELECT prompt_hash, prompt_excerpt, relevance, model FROM injection_verdicts"
    )
    assert all(r["prompt_hash"] and r["model"] == "claude-haiku-4-5" for r in described)
    assert all(r["relevance"] is not None for r in described)
    (spent,) = await store.rows("SELECT * FROM extraction_ledger")
    assert (spent["status"], spent["calls"], spent["backend"]) == ("verdicts", 1, "api")


async def test_a_rerun_never_counts_twice(store: Store, tmp_path: Path) -> None:
    session, _seeded = await conversation(store, tmp_path)
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            first = await judge_session(store, SID, transcript=str(session.path), client=api)
            second = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert first.judged == 3 and (second.status, second.noted, second.judged) == ("nothing", 0, 0)
    assert len(server.messages_requests()) == 1
    # SessionEnd's fold notes the same entries again: nothing is added
    async with store.transaction() as tx:
        await tx.run(sessions.fold(SID, ledger.read_entries(SID), ended=True))
    count = await store.row("SELECT count(*), sum(verdict IS NOT NULL) FROM injection_verdicts")
    assert tuple(count) == (3, 3)
    # and a verdict already written is never replaced
    first_row = (await store.rows("SELECT record_id, injected_at FROM injection_verdicts"))[0]
    again = (str(first_row["record_id"]), str(first_row["injected_at"]), "wrong", "again")
    written = await store.run(learning.save_verdicts(SID, [again], model="m", backend="api"))
    assert written == 0


async def test_llm_off_sends_nothing_and_leaves_them_unjudged(store: Store, tmp_path: Path) -> None:
    session, _seeded = await conversation(store, tmp_path)
    config.set_value("llm", "off")
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            report = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert (report.status, report.waiting, report.calls) == ("llm_off", 3, 0)
    assert server.messages_requests() == []
    precision = (await inventory.status(store, P))["precision"]
    assert precision["judging"] == "llm off"
    assert (precision["7d"]["injections"], precision["7d"]["unjudged"]) == (3, 3)
    assert precision["7d"]["useful_share"] is None


async def test_no_backend_makes_no_verdicts_and_status_says_so(
    store: Store, tmp_path: Path
) -> None:
    session, _seeded = await conversation(store, tmp_path)
    report = await judge_session(store, SID, transcript=str(session.path))
    assert (report.status, report.judged) == ("no_backend", 0)
    assert (await inventory.status(store, P))["precision"]["judging"] == "no backend"


async def test_a_claude_code_cap_defers_the_call(store: Store, tmp_path: Path) -> None:
    session, _seeded = await conversation(store, tmp_path)
    config.set_value("extraction.daily_calls", "10")
    await store.write(sessions.spend("other", None, "claude-code", "extracted", {"calls": 10}, 0.0))
    caller = claude_code.ClaudeCodeCaller(str(tmp_path / "not-a-cli"))  # never started
    report = await judge_session(store, SID, transcript=str(session.path), caller=caller)
    assert report.status == "deferred" and report.calls == 0
    assert report.error is not None and "extraction.daily_calls is 10" in report.error
    statuses = [r["status"] for r in await store.rows("SELECT status FROM extraction_ledger")]
    assert statuses == ["extracted", "verdicts_deferred"]
    unjudged = await store.row("SELECT count(*) FROM injection_verdicts WHERE verdict IS NULL")
    assert unjudged[0] == 3
    # a new day: the call is made (to the missing CLI, which fails; still unjudged)
    conn = sqlite3.connect(home.db_path())
    with conn:
        conn.execute("UPDATE extraction_ledger SET day = '2000-01-01'")
    conn.close()
    again = await judge_session(store, SID, transcript=str(session.path), caller=caller)
    assert again.status == "failed" and "cannot run the claude CLI" in str(again.error)
    assert caller.schema == json.dumps(verdicts.INPUT_SCHEMA, separators=(",", ":"))


@pytest.mark.parametrize(
    "answer",
    [
        ToolUseReply(verdicts.TOOL_NAME, {"verdicts": [{"id": "i1", "verdict": "maybe",
                                                        "reason": "?"}]}),
        ToolUseReply(verdicts.TOOL_NAME, {"verdicts": [{"id": "i42", "verdict": "used",
                                                        "reason": "?"}]}),
        ToolUseReply(verdicts.TOOL_NAME, {"verdicts": "used"}),
        ToolUseReply(verdicts.TOOL_NAME, {"nothing": []}),
        TextReply("I think they were all useful."),
    ],
    ids=["bad-verdict", "unknown-id", "not-a-list", "no-verdicts", "no-tool-call"],
)  # fmt: skip
async def test_a_garbled_answer_writes_nothing_and_is_asked_again(
    store: Store, tmp_path: Path, answer: Any
) -> None:
    session, _seeded = await conversation(store, tmp_path)
    with MessagesServer(replies=[answer]) as server:
        async with client(server) as api:
            report = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert (report.status, report.judged, report.calls) == ("garbled", 0, 1)
    row = await store.row("SELECT count(*) FROM injection_verdicts WHERE verdict IS NOT NULL")
    assert row[0] == 0
    (spent,) = await store.rows("SELECT status, error FROM extraction_ledger")
    assert spent["status"] == "verdicts" and spent["error"]
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            again = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert again.judged == 3


async def test_an_injection_waits_for_its_answer(store: Store, tmp_path: Path) -> None:
    seeded = await seed(store)
    session = Session(tmp_path)
    session.turn("user", "How do the services talk?", 0)
    session.inject(0.5, [seeded["Services talk gRPC"].id])
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            report = await judge_session(store, SID, transcript=str(session.path), client=api)
            assert (report.status, report.waiting) == ("waiting", 1)
            session.turn("assistant", "With gRPC.", 8)
            later = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert later.judged == 1 and len(server.messages_requests()) == 1


async def test_secrets_in_the_prompt_never_leave(store: Store, tmp_path: Path) -> None:
    seeded = await seed(store)
    secret = "sk-ant-api03-" + "A1b2C3d4" * 10
    session = Session(tmp_path)
    session.turn("user", f"Use the key {secret} for the gRPC services", 0)
    session.inject(0.5, [seeded["Services talk gRPC"].id])
    session.turn("assistant", f"Configured gRPC with {secret}.", 8)
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            report = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert report.judged == 1
    (request,) = server.messages_requests()
    assert secret.encode() not in request.raw and b"[REDACTED" in request.raw
    stored = await store.row("SELECT prompt_excerpt FROM injection_verdicts")
    assert secret not in stored[0]


async def test_tiers_and_token_shares_come_from_the_ledger(store: Store, tmp_path: Path) -> None:
    seeded = await seed(store)
    a, b = seeded["Services talk gRPC"].id, seeded["Queue names are kebab-case"].id
    session = Session(tmp_path)
    session.inject(
        1.0, [a, b], 260, tiers={b: "line"}, tokens_by_id={a: 240, b: 20}, relevance={a: 0.8}
    )
    rows = learning.from_entries(ledger.read_entries(SID))
    assert [(r["tier"], r["tokens"], r["relevance"]) for r in rows] == [
        ("whole", 240, 0.8),
        ("line", 20, None),
    ]


async def test_the_hooks_one_line_entries_are_judged_as_lines(store: Store, tmp_path: Path) -> None:
    seeded = await seed(store)
    a, b = seeded["Services talk gRPC"].id, seeded["Queue names are kebab-case"].id
    session = Session(tmp_path)
    session.inject(1.0, [a], 260, lines=[b])  # what the prompt hook writes (core/tiers)
    rows = learning.from_entries(ledger.read_entries(SID))
    assert [(r["record_id"], r["tier"]) for r in rows] == [(a, "whole"), (b, "line")]


# -- the store's precision ----------------------------------------------------------------------


async def test_status_shows_precision_over_7_and_30_days(store: Store, tmp_path: Path) -> None:
    session, _seeded = await conversation(store, tmp_path)
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            await judge_session(store, SID, transcript=str(session.path), client=api)
    # an older judged injection (20 days ago) and an open session's unnoted one
    await store.write(
        steps(
            plan.execute(
                "INSERT INTO injection_verdicts(session_id, record_id, injected_at, tokens, "
                "verdict) VALUES ('old', 'r-old', ?, 500, 'ignored')",
                (clock.days_ago(20),),
            )
        )
    )
    other = Session(tmp_path, "sess-open")
    other.inject(3000.0, ["r-open"], 90)
    found = (await inventory.status(store, P))["precision"]
    week, month = found["7d"], found["30d"]
    assert (week["injections"], week["judged"], week["unjudged"]) == (4, 3, 1)
    assert (week["used"], week["ignored"], week["wrong"], week["useful_share"]) == (1, 1, 1, 0.333)
    assert (week["tokens"], week["tokens_ignored"]) == (640, 350)
    assert (month["injections"], month["judged"], month["ignored"]) == (5, 4, 2)
    assert month["tokens_ignored"] == 850 and month["useful_share"] == 0.25
    from agentctx.cli.admin import precision_lines

    text = "\n".join(precision_lines(found))
    assert "precision 7d   4 injections, 3 judged (33% useful" in text
    assert "350 of 640 tokens on ignored or wrong" in text


# -- the demotion prior -------------------------------------------------------------------------


def test_the_prior_formula() -> None:
    assert learning.prior(0, 2, 0, 0.5) == 1.0  # too few verdicts
    assert learning.prior(3, 0, 0, 0.5) == 1.0  # useful: never promoted above 1
    assert learning.prior(0, 3, 0, 0.5) == pytest.approx((2 / 7) / 0.5, abs=1e-4)
    assert learning.prior(0, 20, 0, 0.5) == learning.PRIOR_FLOOR  # bounded
    assert learning.prior(0, 2, 1, 0.5) < learning.prior(0, 3, 0, 0.5)  # wrong weighs more
    assert learning.prior(1, 4, 0, 0.5) > learning.prior(0, 5, 0, 0.5)


def steps(*steps: Any) -> Any:
    """A plan of these steps (for store.write); a loop, not ``yield from``: the executor sends
    each step's result into the plan, which a tuple's iterator cannot take."""
    for step in steps:  # noqa: UP028
        yield step


def _judged(record_id: str, verdict: str, n: int, relevance: float | None = None) -> Any:
    return steps(plan.execute_many(
        "INSERT INTO injection_verdicts(session_id, record_id, injected_at, verdict, relevance, "
        "tokens) VALUES (?, ?, ?, ?, ?, 100)",
        [(f"s{record_id}{verdict}{k}", record_id, clock.now(), verdict, relevance)
         for k in range(n)],
    ))  # fmt: skip


async def test_a_record_ignored_again_and_again_is_demoted_at_prompt_time(
    store: Store, project_dir: Path
) -> None:
    from agentctx.core.project import identify

    project = identify(str(project_dir))
    await store.touch_project(project)
    kept = await store.add(
        new_record("convention", "Billing webhooks retry", "Webhooks retry five times.",
                   project.project_id)
    )  # fmt: skip
    noisy = await store.add(
        new_record("discovery", "Billing webhooks log", "Webhooks log to stdout.",
                   project.project_id)
    )  # fmt: skip
    terms = search.query_terms("billing webhooks")

    def injected() -> list[str]:
        conn = open_db(lambda _m: None)
        assert conn is not None
        try:
            found = plan.run(conn, search.for_prompt(terms, project.project_id, floor=0.6))
        finally:
            conn.close()
        return [row["id"] for row, _score in found.hits]

    assert set(injected()) == {kept.id, noisy.id}
    await store.write(_judged(noisy.id, "ignored", 6))
    await store.write(_judged(kept.id, "used", 6))
    reports = await consolidate(store, project.project_id, time_box=None)
    step = reports[0].steps["learning"]["result"]
    assert step["priors"]["demoted"] == 1
    (row,) = await store.rows("SELECT record_id, prior FROM record_priors")
    assert row["record_id"] == noisy.id and row["prior"] == learning.PRIOR_FLOOR
    # its relevance (1.0: every term) is halved, below the floor (0.6) the other still passes
    assert injected() == [kept.id]


# -- calibration --------------------------------------------------------------------------------


def test_calibration_bounds() -> None:
    few = [(0.35, False)] * 49
    assert learning.calibrate(few, 0.3, 0.3, 0.5) is None
    # low-relevance injections ignored, high ones used: the floor rises past them, within bounds
    pairs = [(0.32, False)] * 40 + [(0.5, True)] * 20
    assert learning.calibrate(pairs, 0.3, 0.3, 0.5) == 0.33
    worse = [(rel / 100, False) for rel in range(30, 80)] + [(0.9, True)] * 10
    assert learning.calibrate(worse, 0.3, 0.3, 0.5) == 0.45  # at most configured + UP
    # everything just above the floor was used: it moves down one step, never past DOWN
    useful = [(0.31, True)] * 60
    assert learning.calibrate(useful, 0.3, 0.3, 0.5) == 0.25
    assert learning.calibrate(useful, 0.2, 0.3, 0.5) == 0.2
    # a mixed store where raising costs more than it saves: unchanged
    mixed = [(0.32, True)] * 30 + [(0.32, False)] * 30 + [(0.6, True)] * 10
    assert learning.calibrate(mixed, 0.3, 0.3, 0.5) == 0.3


async def test_calibration_at_consolidation_is_logged_and_reversible(
    store: Store, project_dir: Path
) -> None:
    from agentctx.core.project import identify
    from agentctx.hooks.prompt import min_relevance

    project = identify(str(project_dir))
    await store.touch_project(project)
    await store.write(_judged("r-low", "ignored", 40, relevance=0.32))
    await store.write(_judged("r-high", "used", 20, relevance=0.5))
    lines: list[str] = []
    reports = await consolidate(store, project.project_id, time_box=None, log=lines.append)
    calibration = reports[0].steps["learning"]["result"]["calibration"]
    assert calibration["retrieval.min_relevance"] == {
        "status": "calibrated", "value": 0.33, "previous": 0.3, "verdicts": 60,
    }  # fmt: skip
    assert "calibrated retrieval.min_relevance: 0.3 -> 0.33 on 60 judged injections" in lines

    class Ctx:
        def log(self, _message: str) -> None:
            pass

    from tests.helpers import run_cli

    explained = run_cli("search", "--explain", "billing webhooks", "--json", cwd=project_dir)
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["floor"] == 0.33  # the floor the hook uses
    conn = open_db(lambda _m: None)
    assert conn is not None
    try:
        assert min_relevance(Ctx(), conn) == 0.33  # type: ignore[arg-type]
        config.set_value("retrieval.auto_calibrate", "off")
        assert min_relevance(Ctx(), conn) == 0.3  # type: ignore[arg-type]
        config.set_value("retrieval.auto_calibrate", "on")
        config.set_value("retrieval.min_relevance", "0.4")  # an explicit setting wins
        assert min_relevance(Ctx(), conn) == 0.4  # type: ignore[arg-type]
    finally:
        conn.close()
    found = (await inventory.status(store, P))["precision"]["calibration"]
    assert found["thresholds"]["retrieval.min_relevance"]["in_use"] == 0.4
    reports = await consolidate(store, project.project_id, time_box=None)
    again = reports[0].steps["learning"]["result"]["calibration"]["retrieval.min_relevance"]
    assert again == {"status": "explicit setting", "value": 0.4}


async def test_the_dashboard_shows_the_precision(store: Store, tmp_path: Path) -> None:
    from tests.test_web import serving

    session, _seeded = await conversation(store, tmp_path)
    async with serving(store) as (_, web):
        before = (await web.get("/sessions")).text
    assert "Precision of what was injected" in before
    assert "No verdicts are made: no backend." in before
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            await judge_session(store, SID, transcript=str(session.path), client=api)
    async with serving(store) as (_, web):
        page = (await web.get("/sessions")).text
    week = page[page.index('data-days="7"') :]
    assert re.search(r"<strong>33%</strong>\s*judged useful", week)
    assert re.search(r'data-key="injections">injections<span class="n">3<', week)
    assert re.search(r'data-key="wrong">wrong<span class="n">1<', week)
    assert "350 of 550 tokens on ignored or wrong records" in week


async def test_reset_takes_the_projects_verdicts_and_priors(store: Store, tmp_path: Path) -> None:
    from agentctx.store import deletion

    session, seeded = await conversation(store, tmp_path)
    other = await store.add(new_record("decision", "Other project's", "x", "o" * 64))
    await store.write(_judged(other.id, "ignored", 3))
    await store.write(_judged(seeded["Queue names are kebab-case"].id, "ignored", 3))
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            await judge_session(store, SID, transcript=str(session.path), client=api)
    await consolidate(store, "o" * 64, time_box=None)
    assert (await store.row("SELECT count(*) FROM record_priors"))[0] == 2
    await deletion.reset(store, P)
    left = await store.rows("SELECT DISTINCT record_id FROM injection_verdicts")
    assert [r["record_id"] for r in left] == [other.id]
    priors = await store.rows("SELECT record_id FROM record_priors")
    assert [r["record_id"] for r in priors] == [other.id]


async def test_a_long_session_is_judged_24_at_a_time_one_call_per_run(
    store: Store, tmp_path: Path
) -> None:
    seeded = await seed(store)
    record_id = seeded["Services talk gRPC"].id
    session = Session(tmp_path)
    for n in range(30):
        session.turn("user", f"Question {n} about the gRPC services", 60.0 * n)
        session.inject(60.0 * n + 0.2, [record_id], 100)
        session.turn("assistant", f"Answer {n}: gRPC.", 60.0 * n + 5)
    with MessagesServer(judge()) as server:
        async with client(server) as api:
            first = await judge_session(store, SID, transcript=str(session.path), client=api)
            second = await judge_session(store, SID, transcript=str(session.path), client=api)
    assert (first.noted, first.asked, first.judged) == (30, 24, 24)
    assert (second.asked, second.judged) == (6, 6)
    asked = [INJECTION.findall("\n".join(r.texts())) for r in server.messages_requests()]
    assert [len(a) for a in asked] == [24, 6]
    assert asked[0][0][1] == "Question 0 about the gRPC services"  # oldest first
