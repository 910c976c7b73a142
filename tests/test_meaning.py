"""Meaning at prompt time (issue 25): the MCP server lends its warm model over a Unix socket, the
prompt hook fuses its neighbours with the keyword candidates into tiers, and one-line entries carry
a handle that ctx_get, ``agentctx show`` and the dashboard accept.

The real server process and the real hook subprocess where the behaviour is theirs; a small socket
server written here only where a misbehaving server is the point (garbage, a slow answer, a server
still loading, chosen cosines): the hook on the other side is always the real one.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import Client, ClientSession, stdio_client

from agentctx.core import handles, meaning, search, tiers
from agentctx.core.errors import ValidationError
from agentctx.core.explain import explain
from agentctx.core.inject import LINES_NOTE, render_tiers
from agentctx.core.project import identify
from agentctx.embeddings import models, vecstore
from agentctx.mcp import lend
from agentctx.mcp.server import create_server
from agentctx.store import Store
from tests.helpers import contract, payload, run_cli, run_hook, seed, server_params

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

RECORDS = [
    {
        "type": "decision",
        "title": "Background jobs run on arq with Redis",
        "body": "We moved from Celery to arq for the async workers. Rationale: asyncio native.",
    },
    {
        "type": "convention",
        "title": "Money is stored as integer minor units",
        "body": "Never floats for amounts: cents as an int column.",
    },
    {
        "type": "bugfix",
        "title": "Login loop after the token refresh",
        "body": "Problem: the SPA redirected forever. Fix: the refresh cookie's path.",
    },
]
PROMPT = "how do we store money amounts?"


def hook(project_dir: Path, prompt: str, session: str | None = None, **env: str) -> str | None:
    """The real UserPromptSubmit hook's additionalContext for ``prompt``."""
    event = payload("UserPromptSubmit", session or str(uuid.uuid4()), project_dir, prompt=prompt)
    return contract(
        run_hook("user-prompt-submit", event, cwd=project_dir, env=env), "UserPromptSubmit"
    )


def hooks_log(home: Path) -> str:
    log = home / "logs" / "hooks.log"
    return log.read_text() if log.exists() else ""


# -- the real server process and the real hook ---------------------------------------------------


@pytest.fixture
def embedded(project_dir: Path, minilm_settings: dict[str, Any]) -> list[str]:
    """The records seeded and embedded with the offline MiniLM, and the model configured."""
    ids = seed(project_dir, RECORDS)

    async def go() -> int:
        model = models.load_model(minilm_settings)
        assert model is not None
        async with await Store.open() as store:
            return await vecstore.embed_pending(store, model)

    assert anyio.run(go) == len(RECORDS)
    for key in ("embedding.model", "embedding.path"):
        assert run_cli("config", "set", key, str(minilm_settings[key])).returncode == 0
    return ids


async def wait_ready(deadline: float = 120.0) -> None:
    """Until a live server's socket answers with its model loaded."""
    began = time.monotonic()
    while True:
        pending = meaning.ask("warm up", "none")
        if pending is not None and pending.hits(time.monotonic() + 5) is not None:
            return
        assert time.monotonic() - began < deadline, "the socket never answered ready"
        await anyio.sleep(0.2)


@pytest.mark.anyio
async def test_the_server_lends_its_model_and_the_hook_fuses_meaning(
    project_dir: Path, agentctx_home: Path, embedded: list[str]
) -> None:
    params = server_params(project_dir, agentctx_home)
    params.env = {**(params.env or {}), "HF_HUB_OFFLINE": "1"}
    with anyio.fail_after(180):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            await wait_ready()
            run = agentctx_home / "run"
            sockets = list(run.iterdir())
            assert [s.name for s in sockets] == [sockets[0].name]  # one per server process
            assert re.fullmatch(r"embed-\d+\.sock", sockets[0].name)
            assert stat.S_IMODE(run.stat().st_mode) == 0o700
            assert stat.S_ISSOCK(sockets[0].lstat().st_mode)
            assert stat.S_IMODE(sockets[0].lstat().st_mode) == 0o600
            # the protocol: the project's current records with cosines, nearest first
            pid = identify(str(project_dir)).project_id
            pending = meaning.ask(PROMPT, pid)
            assert pending is not None
            hits = pending.hits(time.monotonic() + 10)
            assert hits is not None and {h[0] for h in hits} == set(embedded)
            assert hits[0][0] == embedded[1] and hits[0][1] > hits[1][1]
            other = meaning.ask(PROMPT, "b" * 64)  # another project's prompt: none of these
            assert other is not None and other.hits(time.monotonic() + 10) == []
            # the hook: meaning took part (explain in the log), the answer whole
            text = hook(
                project_dir, PROMPT, AGENTCTX_DEBUG="1", AGENTCTX_MEANING_DEADLINE_MS="5000"
            )
            assert text is not None and f"id {handles.handle(embedded[1])}" in text
            log = hooks_log(agentctx_home)
            assert "keywords alone" not in log and "cos None" not in log
            assert re.search(rf"{embedded[1]} rel [\d.]+ cos 0\.\d+: whole", log)
            assert PROMPT not in log  # the prompt itself is never logged
            # search --explain shows the cosine, the fused score and the tier of each candidate
            result = run_cli("search", "--explain", PROMPT, "--json", cwd=project_dir)
            assert result.returncode == 0, result.stderr
            report = json.loads(result.stdout)
            assert report["meaning"] is True and report["injected"] == [embedded[1]]
            top = report["candidates"][0]
            assert top["id"] == embedded[1] and top["tier"] == "whole" and top["cosine"] > 0.3
            assert top["fused"] > 0 and top["verdict"].startswith("injected whole")
            shown = run_cli("search", "--explain", PROMPT, cwd=project_dir)
            assert "meaning: on" in shown.stdout and "tier whole" in shown.stdout
    assert list((agentctx_home / "run").iterdir()) == []  # removed when the server ended


def test_the_server_socket_says_off_without_a_model(project_dir: Path, agentctx_home: Path) -> None:
    """Embeddings off: the server still lends nothing, and says so; the hook uses keywords."""
    seed(project_dir, RECORDS)
    assert run_cli("config", "set", "embeddings", "off").returncode == 0

    def ask_state() -> str:
        pending = meaning.ask(PROMPT, "x")
        if pending is None:
            return "none"
        pending.hits(time.monotonic() + 5)
        return pending.state

    async def go() -> tuple[str, str | None]:
        with anyio.fail_after(180):  # a generous bound: a loaded machine starts servers slowly
            async with Client(create_server(str(project_dir))) as connected:
                await connected.list_tools()
                while (state := await anyio.to_thread.run_sync(ask_state)) != "off":  # noqa: ASYNC110
                    await anyio.sleep(0.1)  # the server answers on this loop: ask from a thread
                return state, await anyio.to_thread.run_sync(
                    lambda: hook(project_dir, PROMPT, AGENTCTX_DEBUG="1")
                )

    state, text = anyio.run(go)
    assert state == "off"
    assert text is not None and "Money is stored" in text
    assert "meaning: keywords alone (server off)" in hooks_log(agentctx_home)


# -- fallbacks: what the hook does when the server is absent or misbehaves ----------------------


@contextmanager
def fake_server(
    answer: Callable[[dict[str, Any]], bytes], delay: float = 0.0
) -> Iterator[list[dict[str, Any]]]:
    """A socket in the home's run folder answering each request with ``answer(request)``."""
    lend.prepare_dir()
    path = lend.socket_path(os.getpid())
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o600)
    server.listen(4)
    server.settimeout(0.2)
    requests: list[dict[str, Any]] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    data += conn.recv(65536)
                requests.append(json.loads(data))
                time.sleep(delay)
                try:
                    conn.sendall(answer(requests[-1]))
                except OSError:
                    pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield requests
    finally:
        stop.set()
        thread.join()
        server.close()
        os.unlink(path)


@pytest.mark.parametrize(
    ("answer", "delay", "why"),
    [
        (lambda _r: b"garbage\n", 0.0, "unusable answer"),
        (lambda _r: b'{"v": 1, "state": "ready", "hits": [["x", 7]]}\n', 0.0, "unusable answer"),
        (lambda _r: meaning.answer_line("loading"), 0.0, "server loading"),
        (lambda _r: meaning.answer_line("busy"), 0.0, "server busy"),
        (lambda _r: meaning.answer_line("ready", "m", []), 1.5, "no answer within the deadline"),
    ],
    ids=["garbage", "cosine-out-of-range", "loading", "busy", "slow"],
)
def test_the_hook_falls_back_to_keywords(
    project_dir: Path,
    agentctx_home: Path,
    answer: Callable[[dict[str, Any]], bytes],
    delay: float,
    why: str,
) -> None:
    ids = seed(project_dir, RECORDS)
    alone = hook(project_dir, PROMPT, AGENTCTX_MEANING="off")
    assert alone is not None and f"id {handles.handle(ids[1])}" in alone
    with fake_server(answer, delay) as requests:
        text = hook(project_dir, PROMPT, AGENTCTX_DEBUG="1", AGENTCTX_MEANING_DEADLINE_MS="200")
    assert text == alone  # keywords alone, exactly as with no server
    assert len(requests) == 1 and requests[0]["text"] == PROMPT
    assert requests[0]["project"] == identify(str(project_dir)).project_id
    assert f"meaning: keywords alone ({why}" in hooks_log(agentctx_home)


def test_no_server_and_a_stale_socket_cost_nothing(project_dir: Path, agentctx_home: Path) -> None:
    """No run folder at all, then a socket whose server died (nothing listens): keywords alone,
    at once (the connect is non-blocking), and the next server removes the stale socket."""
    ids = seed(project_dir, RECORDS)
    text = hook(project_dir, PROMPT, AGENTCTX_DEBUG="1")
    assert text is not None and f"id {handles.handle(ids[1])}" in text
    folder = lend.prepare_dir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = Path(folder) / meaning.socket_name(int(dead.stdout))
    orphan = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    orphan.bind(str(stale))
    orphan.close()  # the file stays; nothing accepts on it
    assert meaning.ask(PROMPT, "x") is None  # refused at once
    assert hook(project_dir, PROMPT) == text
    assert "Traceback" not in hooks_log(agentctx_home)
    assert lend.clean_stale(folder) == [stale.name]
    assert not stale.exists()


def test_sockets_in_an_unsafe_folder_or_of_a_symlink_are_not_used(agentctx_home: Path) -> None:
    folder = Path(lend.prepare_dir())
    target = agentctx_home / "elsewhere.sock"
    outside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    outside.bind(str(target))
    outside.listen(1)
    try:
        (folder / meaning.socket_name(4242)).symlink_to(target)
        assert meaning.ask(PROMPT, "x") is None  # a symlink is never followed
        (folder / meaning.socket_name(4242)).unlink()
        inside.bind(str(folder / meaning.socket_name(4243)))
        inside.listen(1)
        pending = meaning.ask(PROMPT, "x")
        assert pending is not None  # a socket in place: used
        pending.close()
        os.chmod(folder, 0o755)
        assert meaning.ask(PROMPT, "x") is None  # a folder others may enter: not trusted
    finally:
        outside.close()
        inside.close()


def test_the_peer_check_accepts_this_user() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert lend.same_user(left)


def test_protocol_lines_are_bounded_and_checked() -> None:
    line = meaning.request_line("x" * 50_000, "p")
    assert len(line) <= meaning.MAX_REQUEST and line.endswith(b"\n")
    text, project, k = meaning.parse_request(line)
    assert len(text) == meaning.MAX_TEXT and project == "p" and k == meaning.NEIGHBOURS
    for bad in (b"{}", b'{"v": 2, "text": "a", "project": "p"}', b'{"v": 1, "text": 3}',
                b'{"v": 1, "text": "a", "project": "p", "k": 1000}', b"\xff"):  # fmt: skip
        with pytest.raises((ValueError, UnicodeDecodeError)):
            meaning.parse_request(bad)
    state, hits = meaning.parse_answer(meaning.answer_line("ready", "m", [("a", 0.5)]))
    assert (state, hits, hits.spread) == ("ready", [("a", 0.5)], None)
    line = meaning.answer_line("ready", "m", [("a", 0.5)], (0.123456, 0.0789))
    assert meaning.parse_answer(line)[1].spread == (0.1235, 0.0789)
    for spread in ("[0.1]", "[0.1, 0]", "[0.1, -0.2]", '["a", 0.1]', "[5, 0.1]", "[true, 0.1]"):
        odd = f'{{"v": 1, "state": "ready", "hits": [["a", 0.5]], "spread": {spread}}}'
        state, hits = meaning.parse_answer(odd.encode())
        assert hits == [("a", 0.5)] and hits.spread is None  # dropped, the hits still used
    with pytest.raises(ValueError, match="not \\[id, cosine\\]"):
        meaning.parse_answer(b'{"v": 1, "state": "ready", "hits": [["a", true]]}')


# -- tiers, lines and the ledger -----------------------------------------------------------------


def tier_at(
    project_dir: Path, prompt: str, neighbours: list[tuple[str, float]], record_id: str
) -> str:
    """The tier the core's rules give ``record_id`` for ``prompt`` and these server neighbours."""
    pid = identify(str(project_dir)).project_id

    async def go() -> dict[str, Any]:
        async with await Store.open() as store:
            return await store.run(explain(prompt, pid, 0.3, (), neighbours))

    by_id = {c["id"]: c for c in anyio.run(go)["candidates"]}
    return str(by_id[record_id]["tier"]) if record_id in by_id else tiers.NONE


def line_cosine(
    project_dir: Path, prompt: str, record_id: str, others: tuple[tuple[str, float], ...] = ()
) -> float:
    """A cosine at which the server naming ``record_id`` (after ``others``) makes it a line for
    ``prompt`` (the middle of the band where the evidence gives a line)."""
    band = [cos / 100 for cos in range(0, 100)
            if tier_at(project_dir, prompt, [*others, (record_id, cos / 100)], record_id)
            == tiers.LINE]  # fmt: skip
    assert band, "no cosine makes this keyword match a line"
    return band[len(band) // 2]


def test_a_line_then_whole_in_one_session(project_dir: Path, agentctx_home: Path) -> None:
    """A possible match is one line with a handle; the ledger does not count it as shown, so a
    later prompt that matches it strongly gets it whole; a line is not offered twice."""
    ids = seed(project_dir, RECORDS)
    login = ids[2]
    prompt = "is the login loop fixed in safari too"  # a keyword match, not every word
    between = line_cosine(project_dir, prompt, login)  # a keyword match, far-ish in meaning
    cosines = iter([between, between, 0.95])
    session = str(uuid.uuid4())

    def answer(_request: dict[str, Any]) -> bytes:
        return meaning.answer_line("ready", "m", [(login, next(cosines))])

    wait = {"AGENTCTX_MEANING_DEADLINE_MS": "5000"}  # tiers, not speed: never keywords alone
    with fake_server(answer):
        first = hook(project_dir, prompt, session, **wait)
        second = hook(project_dir, prompt, session, **wait)
        third = hook(project_dir, prompt, session, **wait)
    assert first is not None and LINES_NOTE in first
    assert f"({handles.handle(login)})" in first and f"id {handles.handle(login)}" not in first
    assert "- bugfix, today: Login loop after the token refresh (" in first
    assert second is None  # offered as a line already: not again
    assert (
        third is not None and f"id {handles.handle(login)}" in third
    )  # now close in meaning: whole
    entries = [json.loads(line) for line in
               (agentctx_home / "sessions" / f"{session}.jsonl").read_text().splitlines()]  # fmt: skip
    assert entries[0]["ids"] == [] and entries[0]["lines"] == [login]
    assert entries[-1]["ids"] == [login]


def test_the_server_cannot_bring_in_what_the_rules_keep_out(project_dir: Path) -> None:
    """A superseded record or another project's, named by a server, is never injected."""
    ids = seed(project_dir, RECORDS)
    other = Path(str(project_dir) + "-other")
    (other / ".git").mkdir(parents=True)
    (other / ".git" / "config").write_text('[remote "origin"]\n\turl = git@x:o/other.git\n')
    foreign = seed(other, [{"type": "decision", "title": "Foreign", "body": "other project"}])[0]
    newer = run_cli("supersede", ids[2], "--body", "Fixed differently.", "--rationale", "r",
                    cwd=project_dir)  # fmt: skip
    assert newer.returncode == 0, newer.stderr

    def answer(_request: dict[str, Any]) -> bytes:
        return meaning.answer_line("ready", "m", [(foreign, 0.99), (ids[2], 0.98)])

    with fake_server(answer):
        text = hook(project_dir, "why does the spa keep redirecting forever")
    assert text is None or (foreign not in text and ids[2] not in text)


def test_tier_rules() -> None:
    def candidate(rank: int | None, relevance: float | None, cos: float | None) -> tiers.Candidate:
        c = tiers.Candidate({"id": "X"})
        c.keyword_rank, c.relevance, c.cosine = rank, relevance, cos
        return c

    # without meaning: every keyword match whole, nothing else
    assert tiers.tier(candidate(1, 0.5, None), meaning=False)[0] == "whole"
    assert tiers.tier(candidate(None, None, 0.9), meaning=False)[0] == "none"
    # with meaning: the evidence decides, at the two scores
    for score, expected in ((tiers.WHOLE_SCORE, "whole"), (tiers.LINE_SCORE, "line"),
                            (tiers.LINE_SCORE - 0.01, "none")):  # fmt: skip
        c = candidate(1, 0.5, 0.4)
        c.evidence = score
        assert tiers.tier(c, meaning=True)[0] == expected


def candidates(*spec: tuple[int | None, float | None, float | None]) -> list[tiers.Candidate]:
    """Candidates from ``(keyword rank, relevance, cosine)``, ids R0, R1, ..."""
    found = []
    for i, (rank, relevance, cos) in enumerate(spec):
        c = tiers.Candidate({"id": f"R{i}"})
        c.keyword_rank, c.relevance, c.cosine = rank, relevance, cos
        found.append(c)
    return found


def spread_list(
    pairs: list[tuple[str, float]], spread: tuple[float, float] | None
) -> meaning.Neighbours:
    found = meaning.Neighbours(pairs)
    found.spread = spread
    return found


def test_evidence_signals() -> None:
    """The evidence's signals: the cosine in deviations above the prompt's mean cosine, the margin
    over the next candidate in deviations, keyword relevance only for a prompt of two content words
    or more, a keyword match not among a full neighbour list counted at the list's lowest cosine."""
    terms = ["invoice", "rounding", "vat"]
    full = [(f"N{i}", 0.6 - i * 0.02) for i in range(meaning.NEIGHBOURS)]
    cands = candidates((1, 1.0, None), (None, None, 0.6))
    mean, sd = 0.1, 0.08
    first, second = tiers.signals(cands, terms, spread_list([("R1", 0.6), *full[1:]], (mean, sd)))
    lowest = full[-1][1]
    assert first["cosine_z"] == pytest.approx((lowest - mean) / sd / tiers.Z_UNIT)
    assert second["cosine_z"] == pytest.approx((0.6 - mean) / sd / tiers.Z_UNIT)
    assert second["relevance"] == 0.0
    assert second["margin_z"] == pytest.approx((0.6 - lowest) / sd)
    assert first["relevance"] == 1.0 and first["relevance_margin"] == 1.0
    # a partial list bounds nothing: an unknown cosine counts at the prompt's mean
    assert tiers.signals(cands, terms, spread_list([("R1", 0.6)], (mean, sd)))[0][
        "cosine_z"
    ] == pytest.approx(0.0)
    # no spread sent (a server of before): the default scale
    plain = tiers.signals(cands, terms, [("R1", 0.6)])[1]
    default_mean, default_sd = tiers.DEFAULT_SPREAD
    assert plain["cosine_z"] == pytest.approx((0.6 - default_mean) / default_sd / tiers.Z_UNIT)
    # one content word ("ok flash it"): every record holding it matches every word; no relevance
    single = tiers.signals(candidates((1, 1.0, 0.2)), ["flash"], [])[0]
    assert single["relevance"] == 0.0 and single["relevance_content"] == 0.0
    # more cosine, more evidence; more relevance, more evidence
    low, high = candidates((1, 0.6, 0.3)), candidates((1, 0.6, 0.6))
    tiers.evidence(low, terms, [])
    tiers.evidence(high, terms, [])
    assert (high[0].evidence or 0) > (low[0].evidence or 0)
    weak, strong = (
        candidates((1, 0.4, 0.4), (2, 0.3, 0.3)),
        candidates((1, 0.9, 0.4), (2, 0.3, 0.3)),
    )
    tiers.evidence(weak, terms, [])
    tiers.evidence(strong, terms, [])
    assert (strong[0].evidence or 0) > (weak[0].evidence or 0)


def test_the_evidence_reads_cosines_on_the_prompts_own_scale() -> None:
    """A prompt worded far from the records' words lowers every cosine: the answer's, the other
    candidates' and the store's mean alike. The evidence does not move with such a shift (the
    absolute scale of the second round's rule did), and a record that stands out from the rest
    of the store gets more evidence than one that does not, at the same cosine."""
    terms = ["invoice", "rounding", "vat"]
    spec = ((1, 0.7, 0.55), (2, 0.5, 0.4), (None, None, 0.35))
    near = [("R0", 0.55), ("R1", 0.4), ("R2", 0.35)]
    close, far = candidates(*spec), candidates(*spec)
    for c in far:
        c.cosine = (c.cosine or 0.0) - 0.15
    tiers.evidence(close, terms, spread_list(near, (0.12, 0.1)))
    tiers.evidence(far, terms, spread_list([(r, c - 0.15) for r, c in near], (-0.03, 0.1)))
    for a, b in zip(close, far, strict=True):
        assert a.evidence == pytest.approx(b.evidence)
    # the same cosine, in a store it stands out from (narrow spread) or not (wide spread)
    narrow, wide = candidates((None, None, 0.45)), candidates((None, None, 0.45))
    tiers.evidence(narrow, terms, spread_list([("R0", 0.45)], (0.1, 0.05)))
    tiers.evidence(wide, terms, spread_list([("R0", 0.45)], (0.1, 0.15)))
    assert (narrow[0].evidence or 0) > (wide[0].evidence or 0)


def test_a_hard_negatives_near_miss_is_a_line_and_a_clear_match_is_whole() -> None:
    """Fourth round (docs/retrieval.md): the shape of the blind-written projects' hard negatives
    -- a record that shares two thirds of the prompt's content words and is the nearest by meaning
    by a third of a deviation -- is offered as one line, no longer whole (the third round's
    scores gave it a body of ~300 tokens); the same record standing 1.5 deviations clear of the
    next one is whole."""
    terms = search.query_terms(
        "how many replicas does the eks deployment run, whats the hpa config"
    )
    rest = [(f"N{i}", 0.35 - 0.01 * i) for i in range(meaning.NEIGHBOURS - 2)]

    def first(cos: float, runner_up: float) -> tiers.Candidate:
        cands = candidates((1, 0.65, cos), (2, 0.4, runner_up))
        tiers.evidence(
            cands, terms, spread_list([("R0", cos), ("R1", runner_up), *rest], (0.1, 0.1))
        )
        cands[0].tier = tiers.tier(cands[0], meaning=True)[0]
        return cands[0]

    near_miss = first(0.42, 0.39)
    assert tiers.LINE_SCORE <= (near_miss.evidence or 0) < tiers.WHOLE_SCORE
    assert near_miss.tier == tiers.LINE
    assert first(0.55, 0.40).tier == tiers.WHOLE


def test_render_tiers_and_explain(project_dir: Path) -> None:
    ids = seed(project_dir, RECORDS)
    pid = identify(str(project_dir)).project_id
    prompt = "is the login loop fixed in safari too"
    close = 0.95  # found by meaning alone, far closer than the rest of the store
    between = line_cosine(project_dir, prompt, ids[2])

    def report_for(neighbours: list[tuple[str, float]]) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            async with await Store.open() as store:
                return await store.run(explain(prompt, pid, 0.3, (), neighbours))

        return anyio.run(go)

    report = report_for([(ids[0], close)])
    assert report["meaning"] is True
    assert report["injected"][:1] == [ids[0]]
    by_id = {c["id"]: c for c in report["candidates"]}
    assert by_id[ids[0]]["tier"] == "whole" and by_id[ids[0]]["cosine"] == close
    assert by_id[ids[0]]["verdict"].startswith("injected whole: strong evidence")
    assert by_id[ids[0]]["relevance"] == 0.0  # found by meaning alone
    report = report_for([(ids[2], between)])
    assert report["lines"] == [ids[2]] and ids[0] not in report["injected"]
    by_id = {c["id"]: c for c in report["candidates"]}
    assert by_id[ids[2]]["tier"] == "line" and by_id[ids[2]]["relevance"] > 0.3
    assert by_id[ids[2]]["verdict"].startswith("offered as a line: possible match")
    row = {"id": ids[0], "type": "decision", "title": "T #x", "valid_from": "2020-01-01T00:00:00Z",
           "scope": "project"}  # fmt: skip
    c = tiers.Candidate(row)
    c.tier = tiers.LINE
    text, whole, lines = render_tiers([c])
    assert whole == [] and lines == [ids[0]]
    assert text.splitlines()[1] == LINES_NOTE
    assert re.search(rf"^- decision, \d+d ago: T #x \({ids[0][-8:].lower()}\)$", text, re.M)


# -- handles: ctx_get, agentctx show, the dashboard ----------------------------------------------


def test_handles_name_records_everywhere(project_dir: Path, agentctx_home: Path) -> None:
    ids = seed(project_dir, RECORDS)
    money = ids[1]
    handle = handles.handle(money)
    shown = run_cli("show", handle, "--json", cwd=project_dir)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == money
    assert json.loads(run_cli("show", money[:20], "--json").stdout)["id"] == money  # a prefix
    short = run_cli("show", money[-5:])
    assert short.returncode != 0 and "Traceback" not in short.stderr
    # every record of one process shares its ULID's time prefix: ambiguous, said in one line
    common = os.path.commonprefix(ids)  # noqa: RUF071  # strings, on purpose
    if len(common) >= handles.MIN_HANDLE:
        ambiguous = run_cli("show", common)
        assert ambiguous.returncode != 0
        assert "matches several records" in ambiguous.stderr
        assert len(ambiguous.stderr.strip().splitlines()) == 1

    async def go() -> None:
        async with Client(create_server(str(project_dir)), raise_exceptions=True) as client:
            result = await client.call_tool("ctx_get", {"ids": [handle.upper(), "zzzzzzzz"]})
            assert not result.is_error
            data = result.structured_content
            assert data is not None
            assert [r["id"] for r in data["records"]] == [money]
            assert data["missing"] == ["zzzzzzzz"]
        async with await Store.open() as store:
            if len(common) >= handles.MIN_HANDLE:
                with pytest.raises(ValidationError, match="matches several records"):
                    await store.get(common.lower())
            from tests.test_web import serving

            async with serving(store) as (_dash, client):
                page = await client.get(f"/records/{handle}")
                assert page.status_code == 200 and "Money is stored" in page.text

    anyio.run(go)
