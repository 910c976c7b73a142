"""The own eval (benchmarks/own_eval): its scoring rules on hand-made cases, and a real short run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))  # own_eval, minilm

from agentctx.claude.transcript import read_transcript, render
from agentctx.consolidate import cues, merge_check
from agentctx.core.project import identify
from agentctx.embeddings import vecstore
from agentctx.extract import prompt as extract_prompt
from agentctx.redact import redact
from agentctx.store import SearchQuery
from own_eval import author, floors, replay, report, scoring
from own_eval import figures as own_eval_figures
from own_eval import run as own_eval
from quality import check as check_quality
from tests.helpers import new_record
from tests.messages_server import (
    ErrorReply,
    MessagesServer,
    Recorded,
    ToolUseReply,
    forced_tool,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentctx.embeddings.models import Embedder
    from agentctx.store import Store

HERE = Path(__file__).resolve().parents[1] / "benchmarks" / "own_eval"


def item(
    id: str,
    session: int,
    type: str,
    title: str,
    facts: Sequence[str],
    **extra: Any,
) -> scoring.KeyItem:
    return scoring.KeyItem(id, session, type, title, tuple(facts), **extra)


def record(id: str, session: int, type: str, title: str, body: str = "") -> scoring.Produced:
    return scoring.Produced(id, session, type, title, f"{title}\n{body}")


# -- facts and coverage -------------------------------------------------------------------------


def test_a_fact_is_a_whole_word_or_phrase_with_alternatives() -> None:
    text = scoring.normalize(
        "Move to PostgreSQL;  plain SQL files. 8 chars, 7 gave collisions (v*)"
    )
    assert scoring.fact_present("sql", text)  # "plain SQL files"
    assert not scoring.fact_present("gres", text)  # inside a word
    assert scoring.fact_present("mysql|postgresql", text)
    assert scoring.fact_present("7|seven", text) and not scoring.fact_present("78", text)
    assert scoring.fact_present("tag|v*", text)
    assert scoring.fact_present("plain  sql", text)  # white space in a fact is normalized too
    assert scoring.fact_present("problem+json", "application/problem+json with type")


def test_a_record_covers_an_item_with_more_than_half_of_its_facts() -> None:
    two = item("A", 1, "decision", "t", ["postgres", "asyncpg"])
    three = item("B", 1, "convention", "t", ["migrations", "sql", "alembic"])
    assert scoring.coverage(two, "Postgres via psycopg") == 0.5
    assert not scoring.covers(two, "Postgres via psycopg")
    assert scoring.covers(two, "Postgres via asyncpg")
    assert scoring.covers(three, "Migrations are SQL files") and not scoring.covers(three, "sql")


# -- matching -----------------------------------------------------------------------------------


def test_match_sorts_every_record_and_item_into_one_outcome() -> None:
    earlier = [item("E", 1, "convention", "Tests use httpx", ["httpx", "testclient"])]
    items = [
        item("A", 2, "decision", "Storage on Postgres with asyncpg", ["postgres", "asyncpg"]),
        item("P", 2, "preference", "mypy strict everywhere", ["mypy", "strict"]),
        item("M", 2, "bugfix", "Lost click updates", ["clicks", "atomic"]),
    ]
    produced = [
        record("r1", 2, "decision", "Move storage to Postgres with asyncpg"),
        record("r2", 2, "convention", "mypy runs in strict mode"),  # P under the wrong type
        record("r3", 2, "convention", "Never TestClient, always httpx"),  # repeats E
        record("r4", 2, "decision", "Use asyncpg for Postgres access"),  # repeats A (taken)
        record("r5", 2, "discovery", "The code lives in app/"),  # nothing
    ]
    found = scoring.match(produced, items, earlier)
    assert found.matched == {"r1": "A"}
    assert found.wrong_type == {"r2": "P"}
    assert found.duplicates == {"r3": "E", "r4": "A"}
    assert found.extras == ["r5"]
    assert found.missed == ["M"]
    assert found.produced == 5 and found.assigned() == {"r1": "A", "r2": "P"}
    strict = scoring.precision_recall([found])
    lenient = scoring.precision_recall([found], lenient=True)
    assert (strict.matched, strict.produced, strict.items) == (1, 5, 3)
    assert (strict.precision, strict.recall) == (0.2, 1 / 3)
    assert (lenient.precision, lenient.recall) == (0.4, 2 / 3)


def test_match_is_one_to_one_and_the_closer_title_wins() -> None:
    items = [item("A", 1, "decision", "Short codes are 8 base62 characters", ["8", "base62"])]
    produced = [
        record("r1", 1, "decision", "Use base62 everywhere", "8 workers"),
        record("r2", 1, "decision", "Short codes are 8 base62 characters long"),
    ]
    found = scoring.match(produced, items)
    assert found.matched == {"r2": "A"} and found.duplicates == {"r1": "A"}


def test_records_of_another_session_never_match() -> None:
    items = [item("A", 2, "decision", "Postgres", ["postgres"])]
    found = scoring.match([record("r1", 1, "decision", "Postgres")], items)
    assert found.matched == {} and found.missed == ["A"] and found.duplicates == {"r1": "A"}


def test_precision_and_recall_sum_over_sessions() -> None:
    a = scoring.Matching(matched={"r1": "A", "r2": "B"}, extras=["r3"], missed=["C"])
    b = scoring.Matching(wrong_type={"r4": "D"}, missed=["E"])
    pr = scoring.precision_recall([a, b])
    assert (pr.matched, pr.produced, pr.items) == (2, 4, 5)
    assert scoring.precision_recall([]).precision == 1.0  # nothing produced, nothing wrong


# -- validity and supersession ------------------------------------------------------------------


def test_an_item_holds_from_its_session_until_replaced_or_expired() -> None:
    items = {
        "D1": item("D1", 1, "decision", "SQLite", ["sqlite"], superseded_by="D2"),
        "D2": item("D2", 3, "decision", "Postgres", ["postgres"]),
        "H1": item("H1", 1, "handover", "Next: codes", ["codes"], valid_until=1),
    }
    assert scoring.holds(items["D1"], 2, items) and not scoring.holds(items["D1"], 3, items)
    assert not scoring.holds(items["D2"], 2, items) and scoring.holds(items["D2"], 3, items)
    assert scoring.holds(items["H1"], 1, items) and not scoring.holds(items["H1"], 2, items)


def test_each_key_supersession_gets_its_outcome() -> None:
    pairs = [("A", "B"), ("C", "D"), ("E", "F"), ("G", "H"), ("I", "J")]
    items = []
    for old, new in pairs:
        items += [
            item(old, 1, "decision", old, [old.lower()], superseded_by=new),
            item(new, 2, "decision", new, [new.lower()]),
        ]
    key = scoring.Key("p", tuple(items), {}, {})
    record_of = {"A": "a", "B": "b", "C": "c", "D": "d", "E": "e", "F": "f", "H": "h", "I": "i"}
    superseded_by = {"a": "b", "c": None, "e": "x"}
    found = {s.old: s.status for s in scoring.supersessions(key, record_of, superseded_by)}
    assert found == {
        "A": "correct",
        "C": "not superseded",
        "E": "wrong successor",
        "G": "old not extracted",
        "I": "new not extracted",
    }


# -- retrieval ----------------------------------------------------------------------------------


def test_recall_at_k_counts_expected_items_answered_in_the_top_k() -> None:
    answers = {"r1": frozenset({"A"}), "r2": frozenset({"B", "C"}), "r3": frozenset()}
    assert scoring.recall_at(["r3", "r2", "r1"], ["A", "B"], answers, 3) == 1.0
    assert scoring.recall_at(["r3", "r2", "r1"], ["A", "B"], answers, 2) == 0.5
    assert scoring.recall_at([], ["A"], answers, 3) == 0.0
    assert scoring.recall_at([], [], answers, 3) == 1.0


def test_answers_of_uses_the_assignment_else_coverage() -> None:
    items = [
        item("A", 1, "decision", "Postgres", ["postgres", "asyncpg"]),
        item("B", 1, "convention", "Tests on Postgres", ["postgres", "compose"]),
    ]
    records = [
        record("r1", 1, "decision", "Postgres with asyncpg, tested with compose"),
        record("r2", 1, "convention", "Postgres in compose, asyncpg driver"),
    ]
    answers = scoring.answers_of(records, {"r1": "A"}, items)
    assert answers == {"r1": frozenset({"A"}), "r2": frozenset({"A", "B"})}


def test_stale_hits_are_records_whose_items_no_longer_hold() -> None:
    items = {
        "D1": item("D1", 1, "decision", "SQLite", ["sqlite"], superseded_by="D2"),
        "D2": item("D2", 2, "decision", "Postgres", ["postgres"]),
    }
    answers = {"old": frozenset({"D1"}), "new": frozenset({"D2"}), "both": frozenset({"D1", "D2"})}
    assert scoring.stale_hits(["old", "new", "both"], answers, items, 2, 3) == 1
    assert scoring.stale_hits(["old", "both"], answers, items, 1, 3) == 0  # D1 held then
    assert scoring.stale_hits(["new", "both", "old"], answers, items, 2, 2) == 0


def test_choose_n_is_the_largest_n_within_the_mean_budget() -> None:
    costs = [[], [10, 20], [10, 20, 30]]
    assert scoring.choose_n(20, costs) == 2  # means: 6.7, 20, 30
    assert scoring.choose_n(19.9, costs) == 1
    assert scoring.choose_n(0, costs) == 0
    assert scoring.choose_n(100, []) == 0


# -- the recorded answers -----------------------------------------------------------------------

CONTEXT = (
    "Project: shortlink\nCurrent decisions and conventions (id, type, title):\n"
    "- 01KJKB3Q01SMK645AEDNVB5CNS [decision] Store links in SQLite through aiosqlite\n"
    "- 01KJKB3Q02SM2A8XA4K3G6VDD1 [convention] Error responses are JSON"
)


def test_title_references_resolve_to_listed_ids_and_back() -> None:
    output: dict[str, Any] = {
        "decisions": [
            {"what": "Postgres", "supersedes": "@title:store links in sqlite"},
            {"what": "Redis", "supersedes": "@title:rate limits in memory"},
            {"what": "Plain", "supersedes": None},
        ]
    }
    resolved, unresolved = replay.resolve(output, CONTEXT)
    ids = [d["supersedes"] for d in resolved["decisions"]]
    assert ids == ["01KJKB3Q01SMK645AEDNVB5CNS", None, None]
    assert unresolved == ["@title:rate limits in memory"]
    assert output["decisions"][0]["supersedes"] == "@title:store links in sqlite"  # a copy
    back = replay.referenced(resolved, CONTEXT)
    assert back["decisions"][0]["supersedes"] == "@title:Store links in SQLite through aiosqlite"


def extraction_request(transcript: str) -> Recorded:
    body = {
        "tool_choice": {"type": "tool", "name": extract_prompt.TOOL_NAME},
        "messages": [{"role": "user", "content": f"{CONTEXT}\n\nTranscript:\n{transcript}"}],
    }
    return Recorded("POST", "/v1/messages", {}, body)


def test_replay_answers_by_hash_then_anchor_and_refuses_the_unknown() -> None:
    output = {"decisions": [{"what": "x", "supersedes": "@title:Store links"}], "flush_ok": False}
    known = "[developer] let us store links in postgres"
    answer = replay.Answer("01.txt", "s1", replay.transcript_hash(known), "zzz", output)
    anchored = replay.Answer("02.txt", "s2", "0" * 64, "use redis", {"flush_ok": True})
    script = replay.Replay(replay.Answers("", [answer, anchored], []))
    first = script(extraction_request(known))
    assert isinstance(first, ToolUseReply) and first.name == extract_prompt.TOOL_NAME
    assert first.input["decisions"][0]["supersedes"] == "01KJKB3Q01SMK645AEDNVB5CNS"
    second = script(extraction_request("[developer] ok, use redis then"))
    assert isinstance(second, ToolUseReply) and second.input == {"flush_ok": True}
    third = script(extraction_request("[developer] something else"))
    assert isinstance(third, ErrorReply) and third.status == 400
    assert [e["matched_by"] for e in script.served.extractions] == ["sha256", "anchor"]
    assert len(script.served.problems) == 1


def test_replay_answers_merge_checks_from_recorded_verdicts() -> None:
    verdict = replay.MergeVerdict("tests use httpx", "never testclient", True, "T", "B")
    script = replay.Replay(replay.Answers("", [], [verdict]))
    pairs = [
        merge_check.PairText("p1", "convention", "Never TestClient", "b1", "Tests use httpx", "b2"),
        merge_check.PairText("p2", "decision", "Use Redis", "x", "Use Postgres", "y"),
    ]
    body = {
        "tool_choice": {"type": "tool", "name": merge_check.TOOL_NAME},
        "messages": [{"role": "user", "content": merge_check.user_text(pairs)}],
    }
    reply = script(Recorded("POST", "/v1/messages", {}, body))
    assert isinstance(reply, ToolUseReply)
    assert reply.input["verdicts"] == [
        {"pair": "p1", "same": True, "title": "T", "body": "B"},
        {"pair": "p2", "same": False, "title": None, "body": None},
    ]
    assert [p["recorded"] for p in script.served.merge_pairs] == [True, False]


@pytest.mark.anyio
async def test_capture_keeps_live_answers_in_the_answers_shape() -> None:
    capture = replay.Capture({"store links": "01.txt"})
    transcript = "[developer] store links in postgres"
    body = extraction_request(transcript).body
    tool_input = {"decisions": [{"what": "x", "supersedes": "01KJKB3Q01SMK645AEDNVB5CNS"}]}
    reply = {"content": [{"type": "tool_use", "input": tool_input}], "usage": {"input_tokens": 5}}
    request = httpx.Request(
        "POST", "https://api.anthropic.com/v1/messages", content=json.dumps(body).encode()
    )
    await capture(httpx.Response(200, json=reply, request=request))
    await capture(httpx.Response(529, json={}, request=request))  # errors are not answers
    (kept,) = capture.extractions
    assert kept["script"] == "01.txt"
    assert kept["transcript_sha256"] == hashlib.sha256(transcript.encode()).hexdigest()
    assert kept["output"]["decisions"][0]["supersedes"].startswith("@title:Store links in SQLite")


# -- the fixture --------------------------------------------------------------------------------


def test_transcripts_are_up_to_date_with_their_scripts_and_parse() -> None:
    assert author.stale() == [], "run `python benchmarks/own_eval/author.py`"
    scripts = author.load_scripts()
    key = scoring.load_key(HERE / "key.json")
    assert [s.name for s in scripts] == [key.scripts[n] for n in sorted(key.scripts)]
    assert len({s.session_id for s in scripts}) == len(scripts)
    answers = replay.Answers.load(HERE / "answers.json")
    assert [a.script for a in answers.extractions] == [s.name for s in scripts]
    texts = []
    for script in scripts:
        parsed = read_transcript(author.transcript_path(script))
        assert "corrupt" not in parsed.skipped and "truncated" not in parsed.skipped
        assert any(turn.role == "developer" for turn in parsed.turns)
        texts.append(redact(render(parsed.turns)))
    for answer in answers.extractions:  # the fallback key: each anchor in exactly one session
        assert sum(answer.anchor in text for text in texts) == 1, answer.anchor


def test_key_and_questions_are_consistent() -> None:
    key = scoring.load_key(HERE / "key.json")
    items = key.by_id()
    assert len(items) == len(key.items)
    for entry in key.items:
        assert entry.facts and entry.session in key.scripts
        if entry.superseded_by:
            assert items[entry.superseded_by].session > entry.session
    for restated in key.restates.values():
        assert set(restated) <= set(items)
    questions = scoring.load_questions(HERE / "questions.json")
    assert 20 <= len(questions) <= 40 and len({q.id for q in questions}) == len(questions)
    for question in questions:
        for expected in question.expects:  # what a question expects holds when it is asked
            assert scoring.holds(items[expected], question.after, items), question.id


# -- a real run, three sessions -----------------------------------------------------------------


@pytest.mark.anyio
async def test_the_eval_runs_on_the_first_three_sessions(
    minilm_dir: Path, agentctx_home: Path
) -> None:
    options = own_eval.Options(sessions=3, model_dir=minilm_dir)
    run, meta = await own_eval.evaluate(options)
    assert os.environ["AGENTCTX_HOME"] == str(agentctx_home)  # restored
    assert "ANTHROPIC_API_KEY" not in os.environ
    assert meta["mode"] == "recorded" and meta["sessions"] == 3
    served = meta["served"]
    assert [e["script"] for e in served["extractions"]] == [s.name for s in run.scripts]
    assert served["problems"] == []
    assert served["cue_records"] > 0  # consolidation asked; the recorded answers hold no cues
    extraction = [s["extraction"] for s in run.sessions]
    assert [(e["status"], e["tier"], e["calls"]) for e in extraction] == [
        ("extracted", "whole", 1)
    ] * 3
    # the mistakes planted in answers.json for these sessions, as the scoring sees them
    first, second, third = run.matchings
    assert len(first.matched) == 5 and len(first.extras) == 1 and not first.missed
    assert list(second.wrong_type.values()) == ["P2"] and len(second.matched) == 2
    assert list(third.duplicates.values()) == ["G1"] and len(third.matched) == 2
    pr = scoring.precision_recall(run.matchings)
    assert (pr.matched, pr.produced, pr.items) == (9, 12, 10)
    assert [a.question.id for a in run.asked] == ["a3-db", "a3-locked"]
    figures = own_eval_figures.metrics(run, own_eval.K)
    recall = {q["id"]: q["hook"]["recall"] for q in figures["retrieval"]["questions"]}
    assert recall == {"a3-db": 1.0, "a3-locked": 1.0}
    assert figures["retrieval"]["summary"]["none"]["recall"] == 0.0
    tokens = figures["tokens"]["per_session"]
    assert tokens[0]["agentctx"] == 0 and tokens[0]["recency"] == 0  # an empty store
    assert tokens[1]["session_start"] > 0 and tokens[2]["agentctx"] > 0
    assert figures["supersession"]["checks"] == []  # no replacement within three sessions
    text, payload = report.render(run, meta, k=own_eval.K)
    assert "These figures do not measure Claude Haiku" in text
    assert "3 of 3 matched by hash" in text or "by anchor" in text
    assert payload["extraction"]["strict"]["produced"] == 12
    json.dumps(payload)  # plain data


@pytest.mark.anyio
async def test_live_mode_needs_an_api_key(
    minilm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = own_eval.Options(live=True, sessions=1, model_dir=minilm_dir)
    with pytest.raises(SystemExit, match="ANTHROPIC_API_KEY"):
        await own_eval.evaluate(options)


@pytest.mark.anyio
async def test_live_mode_captures_what_the_endpoint_answered(
    minilm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the "live" endpoint is the loopback server replaying answers.json: the wiring is what is tested
    script = replay.Replay(replay.Answers.load(HERE / "answers.json"))
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
        options = own_eval.Options(live=True, sessions=1, model_dir=minilm_dir)
        run, meta = await own_eval.evaluate(options)
    assert meta["mode"] == "live" and "served" not in meta
    extraction = server.messages_requests(forced_tool(extract_prompt.TOOL_NAME))
    assert [r.body["model"] for r in extraction] == ["claude-haiku-4-5"]
    # the rest are consolidation's retrieval-cue requests (the replay gives no cues)
    assert {r.tool_choice for r in server.messages_requests()} == {
        extract_prompt.TOOL_NAME,
        cues.TOOL_NAME,
    }
    (captured,) = meta["captured"]["extractions"]
    recorded = replay.Answers.load(HERE / "answers.json").extractions[0]
    assert captured["script"] == recorded.script and captured["output"] == recorded.output
    assert len(run.matchings[0].matched) == 5
    text, _payload = report.render(run, meta, k=own_eval.K)
    assert text.startswith("# Own eval") and "(LIVE)" in text


# -- the ctx_search floor rules (floors.py) ------------------------------------------------------

#: Notes of one project, on unrelated topics, for a background of real MiniLM cosines.
NOTES = [
    "Login sessions expire after 30 minutes of inactivity",
    "The CI pipeline caches Docker layers between runs",
    "Invoices are rendered to PDF with WeasyPrint",
    "Postgres is the only database; no SQLite in production",
    "Frontend state lives in a Zustand store per page",
    "API errors are returned as RFC 9457 problem details",
    "Feature flags are read from LaunchDarkly at start-up",
    "Emails go out through Postmark with templates in emails/",
    "Uploads are streamed to S3 with multipart uploads",
    "The search index is rebuilt nightly from the events table",
    "Timezones are stored as UTC and converted in the browser",
    "Rate limits are 100 requests a minute per API key",
    "Background jobs run on Celery with Redis as the broker",
    "Tests use factory_boy fixtures, never the production data",
    "Logs are JSON lines shipped to Loki",
    "Passwords are hashed with argon2id",
    "The mobile clients pin the TLS certificate",
    "Translations live in locale/*.po and are compiled at build",
    "Migrations are written by hand in migrations/ as SQL",
    "Images are resized on upload into three sizes",
    "Webhooks are retried five times with exponential backoff",
    "Admin pages require a hardware security key",
    "Metrics are exported to Prometheus on /metrics",
    "The release branch is cut every second Tuesday",
]


def candidate(
    similarity: float | None, background: tuple[float, ...], relevance: float = 0.0
) -> floors.SearchCandidate:
    return floors.SearchCandidate(f"r{similarity}", similarity, relevance, background)


def test_the_background_floor_stands_k_deviations_above_the_mean() -> None:
    background = tuple(float(i % 5) / 10 for i in range(20))  # mean 0.2, spread √0.02
    floor = floors.background_floor(background, 2.0)
    assert floor is not None and abs(floor - (0.2 + 2 * 0.02**0.5)) < 1e-12
    assert floors.background_floor(background[:19], 2.0) is None  # too few vectors
    assert floors.background_floor((0.3,) * 30, 2.0) is None  # no spread: cannot tell
    rule = floors.SearchRule("background", 2.0, 0.4)
    hits = [
        candidate(0.6, background),
        candidate(0.4, background),
        candidate(None, background, 0.5),
    ]
    assert floors.search_kept(hits, rule) == ["r0.6", "rNone"]
    # a store under BACKGROUND_MIN vectors: no floor, every hit kept
    small = [candidate(0.1, background[:19]), candidate(None, background[:19])]
    assert floors.search_kept(small, rule) == ["r0.1", "rNone"]


def test_rule_names_are_the_reports() -> None:
    assert floors.MINILM_RULE.name == "cosine ≥ 0.3 or relevance ≥ 0.2"  # ctx_search's floor
    assert floors.RELATIVE_RULE.name == "background z ≥ 2.2 or relevance ≥ 0.4"
    squeezed = floors.SearchRule("cosine", 0.32, 0.4, squeeze=True)
    assert squeezed.name == "cosine ≥ 0.32 or relevance ≥ 0.4, cosines squeezed (0.55 + 0.45·s)"
    assert floors.SearchRule("none").name == "no floor"


@given(
    st.lists(st.floats(-1, 1), min_size=20, max_size=60),
    st.lists(st.floats(-1, 1) | st.none(), min_size=1, max_size=20),
    st.floats(-0.5, 0.9),
    st.floats(0.05, 1.5),
    st.sampled_from([1.8, 2.2, 3.0]),
)
@settings(max_examples=200, deadline=None)
def test_the_relative_rule_ignores_an_affine_rescaling_of_the_cosines(
    background: list[float], sims: list[float | None], a: float, b: float, z: float
) -> None:
    floor = floors.background_floor(background, z)
    assume(floor is not None and statistics.pstdev(background) > 1e-3)
    assert floor is not None
    # a hit within rounding of the floor may go either way; the property is about the others
    assume(all(s is None or abs(s - floor) > 1e-9 for s in sims))
    hits = [floors.SearchCandidate(str(i), s, 0.0, tuple(background)) for i, s in enumerate(sims)]
    moved = [
        floors.SearchCandidate(
            h.id,
            None if h.similarity is None else a + b * h.similarity,
            0.0,
            tuple(a + b * x for x in background),
        )
        for h in hits
    ]
    rule = floors.SearchRule("background", z, 0.4)
    assert floors.search_kept(moved, rule) == floors.search_kept(hits, rule)


@pytest.mark.anyio
async def test_on_real_cosines_squeezing_moves_the_absolute_floor_not_the_relative_one(
    store: Store, project_dir: Path, embedder: Embedder
) -> None:
    project_id = identify(str(project_dir)).project_id
    for title in NOTES[: floors.BACKGROUND_MIN - 1]:
        await store.add(
            new_record(type="discovery", title=title, body=title, project_id=project_id)
        )
    await vecstore.embed_pending(store, embedder)
    query = SearchQuery("How do we keep user passwords safe?", project_id, limit=5)
    few = await floors.search_candidates(store, query, embedder)
    assert len(few[0].background) == floors.BACKGROUND_MIN - 1
    every = [c.id for c in few]
    assert floors.search_kept(few, floors.RELATIVE_RULE) == every  # too few vectors: no floor

    for title in NOTES[floors.BACKGROUND_MIN - 1 :]:
        await store.add(
            new_record(type="discovery", title=title, body=title, project_id=project_id)
        )
    await vecstore.embed_pending(store, embedder)
    found = await floors.search_candidates(store, query, embedder)
    assert len(found[0].background) == len(NOTES)
    kept = floors.search_kept(found, floors.RELATIVE_RULE)
    passwords = next(c.id for c in found if c.similarity == max(c.similarity or -1 for c in found))
    assert passwords in kept and len(kept) < len(found)
    for z in (1.8, 2.2, 3.0):
        rule = floors.SearchRule("background", z, 0.4)
        assert floors.search_kept(found, replace(rule, squeeze=True)) == floors.search_kept(
            found, rule
        )
    # MiniLM's absolute floor on bge-like cosines keeps every hit
    squeezed = replace(floors.MINILM_RULE, squeeze=True)
    assert floors.search_kept(found, squeezed) == [c.id for c in found]
    assert len(floors.search_kept(found, floors.MINILM_RULE)) < len(found)


# -- the eval session's quality floors -----------------------------------------------------------


def test_quality_floors_pass_the_recorded_results_and_fail_a_regression(tmp_path: Path) -> None:
    results = HERE.parent / "results"
    floors_file = json.loads((HERE.parent / "quality_floors.json").read_text())["floors"]
    assert not [x for x in check_quality(results, floors_file, live=False) if x.startswith("FAIL")]
    own = json.loads((results / "own_eval.json").read_text())
    own["supersession"]["correct"] -= 1  # one supersession lost
    own["tokens"]["mean_agentctx"] = 5000.0  # and far more tokens injected
    (tmp_path / "own_eval.json").write_text(json.dumps(own))
    shutil.copy(results / "eval.json", tmp_path / "eval.json")
    shutil.copy(results / "precision_eval.json", tmp_path / "precision_eval.json")
    lines = check_quality(tmp_path, floors_file, live=False)
    failed = [x for x in lines if x.startswith("FAIL")]
    assert len(failed) == 2 and "supersession.correct" in failed[0], lines
    assert not [x for x in check_quality(tmp_path, floors_file, live=True) if "own_eval" in x]


def test_a_figure_the_run_did_not_measure_fails_its_floor_in_one_line(tmp_path: Path) -> None:
    """A part missing from the results (a held-out part a run left out: ``null``) is a FAIL line
    naming the figure, not a traceback."""
    (tmp_path / "p.json").write_text(json.dumps({"heldout": None, "tuning": {"named": 0.9}}))
    floors = [
        {"file": "p.json", "path": "heldout.named", "min": 0.5},
        {"file": "p.json", "path": "tuning.named", "min": 0.5},
    ]
    lines = check_quality(tmp_path, floors, live=False)
    assert lines[0].startswith("FAIL p.json: heldout.named is not in the results"), lines
    assert lines[1].startswith("ok"), lines
