"""Several sessions in a row in one project under the real Claude Code CLI, offline: the whole loop.

``agentctx init`` (user level, the default: hooks in ``~/.claude/settings.json``, the MCP server in
``~/.claude.json``) with LLM extraction on and local embeddings on (``embedding.path`` is the offline
MiniLM of tests/conftest.py). One loopback server (:mod:`tests.messages_server`) plays both models:
Claude Code's scripted main model, and the Claude Haiku that agentctx's detached workers call for
extraction (the route for requests that force the ``record_extraction`` tool). Each ``claude -p``
is a session, or a ``--resume`` of one; after each, the test waits (polling, with a deadline) until
its SessionEnd worker has extracted and consolidated, so the next session starts from what a user's
would. Nothing is faked on agentctx's side: Claude Code runs ``agentctx hook …`` through PATH.

1. Session 1: the developer states a decision, a preference and a fact about the repository; the
   worker's extraction writes them, consolidation embeds them and writes the digest.
2. Session 2: the decision is in the SessionStart context of the request. A prompt about it gets
   the preference through UserPromptSubmit, not the decision (SessionStart showed it: spec 11.6
   dedup); the same topic again, after ``--resume``, does not get the preference again (only the
   fact, which the second prompt matches too: proof that the hook ran).
3. Session 3 changes the decision and pastes a long CI log: the conversation grew over 32 KiB, so
   the Stop hook starts an extraction, which names the old decision's id in ``supersedes``. A second
   turn follows while it runs; the SessionEnd worker waits for it, then extracts that turn. Session 4
   sees only the new decision and supersedes it through the MCP tool ``ctx_supersede``; session 5
   sees only that one, and ``agentctx search --as-of`` still answers each older one at its time.
4. The CI log holds an AWS key pair and a GitHub token: they reach Claude Code's model (so they were
   typed) but never a Haiku request, nor any byte of any file in the agentctx home.
5. ``claude -p /compact --resume`` in session 5: PreCompact writes a handover, and the SessionStart
   Claude Code runs with source ``compact`` carries it into the next request.
6. ``agentctx uninstall`` leaves ``~/.claude/settings.json`` and the project's files byte for byte as
   they were before ``init``, and the next session gets no agentctx context at all.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.consolidate import cues
from agentctx.core import inject
from agentctx.core.handles import handle
from agentctx.core.project import identify
from agentctx.extract import verdicts
from agentctx.extract.prompt import TOOL_NAME
from tests.e2e.harness import Machine, blocks, hook_contexts, texts, wait_until
from tests.messages_server import (
    MessagesServer,
    Recorded,
    Reply,
    TextReply,
    ToolUseReply,
    forced_tool,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

pytestmark = pytest.mark.e2e

#: agentctx's Haiku calls: extractions, consolidation's retrieval-cue calls (answered with no
#: cues) and the workers' injection verdicts (answered with none); every other request is Claude
#: Code's.
EXTRACTION = forced_tool(TOOL_NAME)
CUES = forced_tool(cues.TOOL_NAME)
VERDICTS = forced_tool(verdicts.TOOL_NAME)


def haiku_call(request: Recorded) -> bool:
    """A request agentctx sent to Haiku: an extraction, a retrieval-cue or a verdict call."""
    return EXTRACTION(request) or CUES(request) or VERDICTS(request)


def no_verdicts(request: Recorded) -> ToolUseReply:
    """The verdict calls get none: this scenario checks extraction and injection, not learning."""
    return ToolUseReply(verdicts.TOOL_NAME, {"verdicts": []})


def no_cues(request: Recorded) -> ToolUseReply:
    """Consolidation's cue calls get no cues: this scenario checks extraction's records."""
    return ToolUseReply(cues.TOOL_NAME, {"records": []})


SUPERSEDE = "mcp__agentctx__ctx_supersede"
CLAUDE_TIMEOUT_S = 120
#: A worker loads the embedding model, calls "Haiku" and consolidates: seconds on an idle machine.
WORKER_DEADLINE_S = 90.0
#: How long the scripted Haiku holds the Stop hook's extraction until the SessionEnd worker waits.
GATE_DEADLINE_S = 30.0

# -- what the developer says, and what the models answer --------------------------------------------

DECIDE = (
    "Decision for the shop: internal services talk gRPC instead of REST, because we stream order "
    "events. And in this repository I prefer buf over protoc to generate the gRPC stubs. Mind that "
    "the .proto files live in schemas/, not in proto/."
)
DECIDE_ANSWER = "Noted: gRPC between internal services, stubs generated with buf."
ASK = "Should the new inventory service call the order service over gRPC or REST, and how do we generate its stubs?"
ASK_ANSWER = "Over gRPC, with stubs generated by buf."
ASK_AGAIN = "Remind me which tool generates the gRPC stubs, and where the proto files live."
ASK_AGAIN_ANSWER = "buf generates them."
CHANGE = (
    "Change of plan: internal services move from gRPC to Connect RPC, because the browser app "
    "must call them directly. Here is the CI log of the failing browser test:\n"
)
CHANGE_ANSWER = "Understood: Connect RPC; the browser cannot speak gRPC to the order service."
WRAP_UP = "One more thing: every new endpoint gets a browser test in e2e/browser/."
WRAP_UP_ANSWER = "Will do."
CONVENTION_TITLE = "Every new endpoint gets a browser test in e2e/browser/"
REFINE = (
    "Refine the protocol decision in the project memory: Connect RPC over HTTP/1.1 with JSON, "
    "since the ingress proxy does not forward HTTP/2."
)
REFINE_ANSWER = "Recorded in the project memory."
NOW = "Which protocol do the internal services use now?"
NOW_ANSWER = "Connect RPC over HTTP/1.1 with JSON."
RESUME = "What was I working on before the compaction?"
RESUME_ANSWER = "You asked which protocol the internal services use."
AFTER = "Hello."
AFTER_ANSWER = "Hello."
SUMMARY = (
    "<analysis>The user asked about the internal protocol.</analysis>\n\n<summary>\n"
    "1. Primary Request and Intent: which protocol the internal services use.\n</summary>"
)
#: Part of the prompt Claude Code sends when it compacts a conversation.
COMPACT_INSTRUCTION = "create a detailed summary of the conversation so far"

D1_TITLE = "Internal services talk gRPC instead of REST"
D2_TITLE = "Internal services talk Connect RPC instead of gRPC"
D3_BODY = (
    "Internal services talk Connect RPC instead of gRPC, over HTTP/1.1 with JSON, so that curl "
    "and the browser app can call them."
)
D3_RATIONALE = "The ingress proxy does not forward HTTP/2."
PREFERENCE_TITLE = "Generate the gRPC stubs with buf, never with protoc"
DISCOVERY_TITLE = "The .proto files live in schemas/, not in proto/"
GOTCHA_START = "The CI log prints the AWS credentials:"


def _secret(label: str, size: int, encoding: str) -> str:
    """A fixed string of a secret's shape, built here so that no secret literal sits in the repo."""
    digest = hashlib.sha256(f"agentctx e2e {label}".encode()).digest() * 2
    encode = {"b32": base64.b32encode, "b64": base64.b64encode}.get(encoding)
    return (encode(digest).decode() if encode else digest.hex())[:size]


AWS_KEY_ID = "AKIA" + _secret("aws key id", 16, "b32")
AWS_SECRET = _secret("aws secret", 40, "b64")
GITHUB_TOKEN = "ghp_" + _secret("github token", 36, "hex")
SECRETS = (AWS_KEY_ID, AWS_SECRET, GITHUB_TOKEN)


def ci_log() -> str:
    """A CI log of about 36 KB (over the Stop hook's 32 KiB) with credentials in the middle."""
    lines = [
        f"2026-11-28T10:{i // 60:02d}:{i % 60:02d}Z [browser-e2e] GET /api/orders/{1000 + i} "
        f"-> 200 OK in {12 + i % 7} ms"
        for i in range(520)
    ]
    lines[260:260] = [
        f"2026-11-28T10:04:20Z [ci] export AWS_ACCESS_KEY_ID={AWS_KEY_ID} "
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        f"2026-11-28T10:04:21Z [ci] remote: using token {GITHUB_TOKEN} for acme/shop",
    ]
    lines.append(
        "2026-11-28T10:08:41Z [browser-e2e] FAILED orders.spec.ts: fetch to orders.internal: "
        "net::ERR_HTTP2_PROTOCOL_ERROR"
    )
    return "\n".join(lines)


def extraction_output(**fields: Any) -> ToolUseReply:
    """A Haiku answer: the forced extraction tool with these fields."""
    return ToolUseReply(TOOL_NAME, {"flush_ok": False, **fields})


# -- the two scripted models ------------------------------------------------------------------------


def prompt_and_results(request: Recorded, keys: list[str]) -> tuple[str | None, int]:
    """The newest developer prompt among ``keys`` in a request, and the tool results after it."""
    messages: list[dict[str, Any]] = request.body["messages"]
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") != "user":
            continue
        text = "\n".join(texts(messages[index]))
        key = next((k for k in keys if k in text), None)
        if key is not None:
            results = sum(
                b.get("type") == "tool_result" for m in messages[index + 1 :] for b in blocks(m)
            )
            return key, results
    return None, 0


class MainModel:
    """Claude Code's model: an answer per prompt, a ``ctx_supersede`` call, compaction summaries."""

    answers = {  # noqa: RUF012 - read-only
        DECIDE: DECIDE_ANSWER,
        ASK: ASK_ANSWER,
        ASK_AGAIN: ASK_AGAIN_ANSWER,
        CHANGE: CHANGE_ANSWER,
        WRAP_UP: WRAP_UP_ANSWER,
        NOW: NOW_ANSWER,
        RESUME: RESUME_ANSWER,
        AFTER: AFTER_ANSWER,
    }

    def __call__(self, request: Recorded) -> Reply | None:
        messages = request.body["messages"]
        users = [m for m in messages if m.get("role") == "user"]
        if users and COMPACT_INSTRUCTION in "\n".join(texts(users[-1])):
            return TextReply(SUMMARY)
        key, results = prompt_and_results(request, [*self.answers, REFINE])
        if key is None:
            return None  # not a turn of ours: the server's default reply, and the test fails
        if key != REFINE:
            return TextReply(self.answers[key])
        if results:
            return TextReply(REFINE_ANSWER)
        # the model learns the id of the current decision from the SessionStart context
        found = [
            m.group(1)
            for context in hook_contexts(request, "SessionStart")
            for m in re.finditer(
                rf"^- \[decision \| [^\]]*\] {re.escape(D2_TITLE)}: .* \(id (\w+)\)$",
                context,
                re.M,
            )
        ]
        if not found:
            return TextReply("no decision id in the SessionStart context")  # the test fails on it
        return ToolUseReply(
            SUPERSEDE, {"old_id": found[-1], "new_body": D3_BODY, "rationale": D3_RATIONALE}
        )


class Haiku:
    """agentctx's extraction model: scripted entries for sessions 1 and 3, nothing for the rest."""

    def __init__(self) -> None:
        #: called before answering the session 3 extraction (the fixture makes it wait)
        self.before_change: Callable[[], object] = lambda: None

    def __call__(self, request: Recorded) -> Reply:
        text = "\n".join(request.texts())
        if DECIDE[:60] in text:
            return extraction_output(
                decisions=[{"what": D1_TITLE, "rationale": "we stream order events",
                            "supersedes": None, "confidence": "explicit",
                            "keywords": ["grpc", "rest", "protocol"]}],
                preferences=[{"category": "tooling", "rule": PREFERENCE_TITLE,
                              "confidence": "explicit", "scope": "project",
                              "keywords": ["buf", "protoc", "stubs"]}],
                gotchas=[{"pattern": DISCOVERY_TITLE, "why_it_matters": "buf.yaml points there",
                          "keywords": ["proto", "schemas"]}],
            )  # fmt: skip
        if CHANGE[:60] in text:
            self.before_change()
            # the id of the current decision, from the list the prompt gives
            old = re.search(rf"^- (\w+) \[decision\] {re.escape(D1_TITLE)}$", text, re.M)
            # echo the credentials line as received: a secret sent here would come back and be stored
            line = next((x for x in text.splitlines() if "AWS_ACCESS_KEY_ID" in x), "")
            return extraction_output(
                decisions=[{"what": D2_TITLE, "rationale": "the browser app calls them directly",
                            "supersedes": old.group(1) if old else None,
                            "confidence": "explicit", "keywords": ["connect", "grpc", "protocol"]}],
                gotchas=[{"pattern": f"{GOTCHA_START} {line.strip()}",
                          "why_it_matters": "Anyone who reads the CI logs can use the keys.",
                          "keywords": ["ci", "aws", "credentials"]}],
            )  # fmt: skip
        if WRAP_UP in text:
            return extraction_output(
                conventions=[{"scope": "project", "convention": CONVENTION_TITLE,
                              "confidence": "explicit", "keywords": ["browser", "e2e", "tests"]}],
            )  # fmt: skip
        return extraction_output(flush_ok=True)


# -- the scenario ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One ``claude -p`` and its SessionEnd worker."""

    output: dict[str, Any]  #: the result object of the (last) turn
    requests: list[Recorded]  #: Claude Code's model requests
    extractions: list[Recorded]  #: agentctx's Haiku calls (its workers')
    worker_lines: list[str]  #: what the workers logged meanwhile

    @property
    def session_id(self) -> str:
        """The session Claude Code reported."""
        return str(self.output["session_id"])


class Scenario(Machine):
    """The isolated machine, run session by session; Claude Code's files as they were before init."""

    claude_timeout_s = CLAUDE_TIMEOUT_S

    def __init__(self, root: Path, claude: Path, server: MessagesServer) -> None:
        # tools in tools[] with their schemas, as a model that calls them sees them
        super().__init__(root, claude, server, {"ENABLE_TOOL_SEARCH": "false"})
        self.user_settings = self.home / ".claude" / "settings.json"
        self.project_settings = self.project / ".claude" / "settings.json"
        self.before_init: dict[Path, bytes | None] = {}

    @property
    def project_id(self) -> str:
        """The project's id as agentctx identifies it (from the origin remote)."""
        return identify(str(self.project)).project_id

    def claude_files(self) -> dict[Path, bytes | None]:
        """The bytes of the settings files init may touch (None: no such file)."""
        paths = [self.user_settings, self.project_settings, self.project / ".mcp.json"]
        return {p: p.read_bytes() if p.exists() else None for p in paths}

    def consolidations(self) -> int:
        """How many consolidations of the project the workers have logged."""
        mark = f" consolidate {self.project_id[:12]}: "
        return sum(mark in line for line in self.log("workers.log"))

    def session(self, prompt: str, *args: str) -> Run:
        """``claude -p prompt args``, then wait until its SessionEnd worker has consolidated."""
        return self._session(lambda: self.claude_p(prompt, *args))

    def session_of_turns(self, prompts: list[str], between: Callable[[int], object]) -> Run:
        """Several prompts in one ``claude -p`` process, then wait for its SessionEnd worker."""
        return self._session(lambda: self.claude_turns(prompts, between=between)[-1])

    def _session(self, claude: Callable[[], dict[str, Any]]) -> Run:
        requests = len(self.server.requests)
        lines = len(self.log("workers.log"))
        done = self.consolidations()
        output = claude()
        assert wait_until(lambda: self.consolidations() > done, WORKER_DEADLINE_S), (
            self.diagnostics()
        )
        new = self.server.requests[requests:]
        return Run(
            output,
            requests=[r for r in new if not haiku_call(r)],
            extractions=[r for r in new if EXTRACTION(r)],
            worker_lines=self.log("workers.log")[lines:],
        )

    def records(self, kind: str, *, current: bool = True) -> list[dict[str, Any]]:
        """The project's records of a type, oldest first."""
        columns = ("id", "title", "body", "source", "valid_from", "superseded_by", "pending")
        rows = self.query(
            "SELECT id, title, body, source, valid_from, superseded_by, pending_embedding "
            "FROM records WHERE project_id = ? AND type = ?"
            + (" AND superseded_at IS NULL" if current else "")
            + " ORDER BY valid_from, id",
            (self.project_id, kind),
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def search(self, words: str, *extra: str) -> list[str]:
        """``agentctx search`` in the project: the ids of the hits, best first."""
        return [hit["id"] for hit in self.agentctx("search", words, *extra)]

    def diagnostics(self) -> str:
        """What to read when a step fails: the claude run, agentctx's logs, the requests."""
        parts = self.last_run()
        for name in ("hooks.log", "workers.log"):
            parts.append(f"{name}:\n" + "\n".join(self.log(name)[-40:]))
        for request in self.server.messages_requests():
            last = request.body["messages"][-1] if request.body["messages"] else {}
            kind = "haiku" if haiku_call(request) else "claude"
            parts.append(f"{kind} request, last message: {json.dumps(last)[:600]}")
        return "\n".join(parts)


@pytest.fixture
def scenario(
    tmp_path_factory: pytest.TempPathFactory, claude_code: Path, minilm_dir: Path
) -> Iterator[Scenario]:
    """A git project with its own Claude settings, a user with settings of theirs, both models."""
    root = tmp_path_factory.mktemp("ms")  # short: Claude Code puts sockets under TMPDIR
    haiku = Haiku()
    with MessagesServer(
        MainModel(), routes=[(EXTRACTION, haiku), (CUES, no_cues), (VERDICTS, no_verdicts)]
    ) as server:
        scenario = Scenario(root, claude_code, server)

        def worker_waits() -> None:  # hold the Stop hook's extraction until the worker waits for it
            wait_until(
                lambda: any("waiting for the running extraction" in x
                            for x in scenario.log("workers.log")),
                GATE_DEADLINE_S,
            )  # fmt: skip

        haiku.before_change = worker_waits
        # the user's own settings, in the layout init writes (so uninstall can give the bytes
        # back), and the project's committed ones in a layout of their own (any write would show)
        user = {"permissions": {"allow": ["Bash(git status:*)"]},
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}  # fmt: skip
        scenario.user_settings.parent.mkdir()
        scenario.user_settings.write_text(json.dumps(user, indent=2) + "\n")
        scenario.project_settings.parent.mkdir()
        scenario.project_settings.write_text(
            '{\n    "permissions": {"deny": ["Read(./.env)"]}\n}\n'
        )
        (scenario.project / "README.md").write_text("# shop\n")
        scenario.commit_project()
        scenario.before_init = scenario.claude_files()
        scenario.run("agentctx", "config", "set", "embedding.path", str(minilm_dir))
        scenario.run(
            "agentctx", "config", "set", "embedding.model", "sentence-transformers/all-MiniLM-L6-v2"
        )
        yield scenario


# -- the test ---------------------------------------------------------------------------------------


def test_sessions_in_a_row_in_one_project(scenario: Scenario) -> None:
    setup = scenario.agentctx("init")
    changes = {c["path"]: c["action"] for c in setup["changes"]}
    assert changes == {
        str(scenario.user_settings): "updated",
        str(scenario.home / ".claude.json"): "created",
    }, setup

    d1, preference, discovery = step1_decision_and_preference(scenario)
    step2_injection_once(scenario, d1, preference, discovery)
    d2, before_change = step3_supersede_by_extraction(scenario, d1)
    d3, before_refine = step3_supersede_by_mcp(scenario, d2)
    session_id = step3_only_the_newest_and_history(
        scenario, (d1, d2, d3), (before_change, before_refine)
    )
    step4_no_secret_in_haiku_or_store(scenario)
    step5_compaction(scenario, session_id)
    step6_uninstall(scenario)


def step1_decision_and_preference(scenario: Scenario) -> tuple[str, str, str]:
    """Session 1 ends; its worker extracts the decision, the preference and a discovery, then
    consolidates."""
    run = scenario.session(DECIDE)
    assert run.output["result"] == DECIDE_ANSWER, scenario.diagnostics()
    assert len(run.requests) == 1, scenario.diagnostics()
    # one Haiku call, made by the SessionEnd worker: the text was small, Stop started none
    (call,) = run.extractions
    assert DECIDE in "\n".join(call.texts()) and "- (none)" in "\n".join(call.texts())
    assert call.model == "claude-haiku-4-5" and not call.stream
    sid = run.session_id
    assert any(
        line.endswith(
            f"extract {sid}: extracted {{'decision': 1, 'preference': 1, 'discovery': 1}}"
        )
        for line in run.worker_lines
    ), run.worker_lines
    (decision,) = scenario.records("decision")
    (preference,) = scenario.records("preference")
    (discovery,) = scenario.records("discovery")
    assert (decision["title"], decision["source"]) == (D1_TITLE, "llm_extraction")
    assert preference["title"] == PREFERENCE_TITLE
    # consolidation embedded both (the offline MiniLM) and wrote the digest SessionStart reads
    assert decision["pending"] == preference["pending"] == discovery["pending"] == 0
    assert any(
        f"consolidate {scenario.project_id[:12]}: done" in line and "(vectors)" in line
        for line in run.worker_lines
    ), run.worker_lines
    digest = json.loads(
        (scenario.agentctx_home / "digests" / f"{scenario.project_id}.json").read_text()
    )
    assert decision["id"] in digest["ids"], digest
    return str(decision["id"]), str(preference["id"]), str(discovery["id"])


def step2_injection_once(scenario: Scenario, d1: str, preference: str, discovery: str) -> None:
    """Session 2: the decision at SessionStart, the preference once through UserPromptSubmit."""
    run = scenario.session(ASK)
    assert run.output["result"] == ASK_ANSWER, scenario.diagnostics()
    (first,) = run.requests
    (start,) = hook_contexts(first, "SessionStart")
    assert f"] {D1_TITLE}: " in start and f"(id {handle(d1)})" in start, start
    (records,) = hook_contexts(first, "UserPromptSubmit")
    assert records.startswith(f"{inject.FENCE_OPEN}\n{inject.PROMPT_NOTE}\n\n### [")
    assert f"| today | id {handle(preference)}] {PREFERENCE_TITLE}\n" in records, records
    assert d1 not in records  # the decision matches too, but SessionStart has shown it
    assert discovery not in records  # it does not match this prompt

    # the same topic again, in the same session resumed: the preference is not injected again,
    # the discovery, which this prompt matches too, is (so the hook did run)
    again = scenario.session(ASK_AGAIN, "--resume", run.session_id)
    assert again.session_id == run.session_id and again.output["result"] == ASK_AGAIN_ANSWER
    (second,) = again.requests
    replayed, new = hook_contexts(second, "UserPromptSubmit")  # the history replays the first
    assert (
        replayed.startswith(records.split("\n\n### ")[0])
        and f"id {handle(preference)}]" in replayed
    )
    assert new.startswith(f"{inject.FENCE_OPEN}\n{inject.PROMPT_NOTE}\n\n### [")
    assert f"| unconfirmed | today | id {handle(discovery)}] {DISCOVERY_TITLE}\n" in new, new
    assert f"id {handle(preference)}]" not in new and handle(d1) not in new, new


def step3_supersede_by_extraction(scenario: Scenario, d1: str) -> tuple[str, str]:
    """Session 3 changes the decision; its extraction (started by Stop) supersedes the old one.

    Two turns in one process: the first, with the CI log, makes Stop start an extraction; the second
    is written only once that extraction has sent its request (so it has read the transcript), and
    "Haiku" answers only once the SessionEnd worker waits for it. The worker must then extract the
    second turn itself, not skip it as "locked".
    """
    before = _now()
    sent = len(scenario.server.messages_requests(EXTRACTION))

    def after_the_first_turn(index: int) -> None:
        scenario.server.wait_for(
            lambda rs: sum(EXTRACTION(r) for r in rs) > sent, timeout=WORKER_DEADLINE_S
        )

    run = scenario.session_of_turns([CHANGE + ci_log(), WRAP_UP], after_the_first_turn)
    assert run.output["result"] == WRAP_UP_ANSWER, scenario.diagnostics()
    stopped, final = run.extractions
    assert f"- {d1} [decision] {D1_TITLE}" in "\n".join(stopped.texts())
    assert CHANGE_ANSWER in "\n".join(stopped.texts())
    assert WRAP_UP not in "\n".join(stopped.texts()), "the second turn was already written"
    assert CHANGE not in "\n".join(final.texts()) and WRAP_UP in "\n".join(final.texts())
    sid = run.session_id
    marks = (
        f"waiting for the running extraction of session {sid}",  # the worker
        f"extract {sid}: extracted {{'decision': 1, 'discovery': 1}}",  # Stop's worker
        f"extract {sid}: extracted {{'convention': 1}}",  # the worker, once the lock was free
    )
    lines = run.worker_lines
    order = [next((i for i, x in enumerate(lines) if mark in x), -1) for mark in marks]
    assert -1 not in order and order == sorted(order), lines
    assert not [x for x in scenario.log("workers.log") if "locked" in x]

    old, new = scenario.records("decision", current=False)
    assert (old["id"], old["superseded_by"], new["superseded_by"]) == (d1, new["id"], None)
    assert (new["title"], new["source"], new["pending"]) == (D2_TITLE, "llm_extraction", 0)
    (convention,) = scenario.records("convention")
    assert (convention["title"], convention["pending"]) == (CONVENTION_TITLE, 0)
    return str(new["id"]), before


def step3_supersede_by_mcp(scenario: Scenario, d2: str) -> tuple[str, str]:
    """Session 4 sees only the new decision and supersedes it through ``ctx_supersede``."""
    # the MCP entry init wrote in ~/.claude.json, passed so that Claude Code waits for the server
    # (a user-level server gets ~2 s to start before the first request: test_claude_code_mcp.py)
    entry = json.loads((scenario.home / ".claude.json").read_text())["mcpServers"]["agentctx"]
    mcp_config = scenario.root / "mcp.json"
    mcp_config.write_text(json.dumps({"mcpServers": {"agentctx": entry}}))
    before = _now()
    run = scenario.session(
        REFINE, "--allowedTools", SUPERSEDE, "--mcp-config", str(mcp_config), "--strict-mcp-config"
    )
    assert run.output["result"] == REFINE_ANSWER, scenario.diagnostics()
    assert run.output["permission_denials"] == [], run.output["permission_denials"]
    first, second = run.requests
    (start,) = hook_contexts(first, "SessionStart")
    assert f"] {D2_TITLE}: " in start and f"(id {handle(d2)})" in start, start
    assert D1_TITLE not in start, start
    assert SUPERSEDE in {t["name"] for t in first.body.get("tools") or []}
    results = [
        b for m in second.body["messages"] for b in blocks(m) if b.get("type") == "tool_result"
    ]
    assert len(results) == 1 and not results[0].get("is_error"), results
    answer = json.loads("".join(texts({"content": results[0]["content"]})))
    (new,) = scenario.records("decision")
    assert answer["old_id"] == d2 and answer["new_id"] == new["id"], answer
    assert (new["title"], new["body"], new["source"]) == (D2_TITLE, D3_BODY, "mcp_tool")
    return str(new["id"]), before


def step3_only_the_newest_and_history(
    scenario: Scenario, ids: tuple[str, str, str], times: tuple[str, str]
) -> str:
    """Session 5 sees only the newest decision; ``search --as-of`` still answers the older ones."""
    d1, d2, d3 = ids
    run = scenario.session(NOW)
    assert run.output["result"] == NOW_ANSWER, scenario.diagnostics()
    (start,) = hook_contexts(run.requests[0], "SessionStart")
    assert f"(id {handle(d3)})" in start and "over HTTP/1.1 with JSON" in start, start
    assert d1 not in start and d2 not in start and D1_TITLE not in start, start
    assert "the browser app calls them directly" not in start  # the body of the second one

    before_change, before_refine = times
    assert scenario.search("internal services protocol")[:1] == [d3]
    assert scenario.search("internal services protocol", "--as-of", before_refine)[:1] == [d2]
    assert scenario.search("internal services protocol", "--as-of", before_change)[:1] == [d1]
    return run.session_id


def step4_no_secret_in_haiku_or_store(scenario: Scenario) -> None:
    """The credentials of the CI log reached Claude Code's model, never Haiku nor agentctx's home."""
    requests = scenario.server.messages_requests()
    main = [r for r in requests if not haiku_call(r)]
    haiku = [r for r in requests if haiku_call(r)]
    for secret in SECRETS:
        assert any(secret.encode() in r.raw for r in main), "the secret was not typed"
        assert not [r for r in haiku if secret.encode() in r.raw], secret
    sent = "\n".join(t for r in haiku for t in r.texts())
    assert "[REDACTED:aws-access-key-id]" in sent and "[REDACTED:github]" in sent
    # what Haiku echoed back is stored with the markers, and no file of the home holds a secret
    (gotcha,) = [r for r in scenario.records("discovery") if r["title"].startswith(GOTCHA_START)]
    assert "[REDACTED:aws-access-key-id]" in gotcha["body"], gotcha
    files = [path for path in scenario.agentctx_home.rglob("*") if path.is_file()]
    assert scenario.agentctx_home / "agentctx.db" in files  # with its -wal, logs, digests, ledgers
    leaks = [(p, s) for p in files for s in SECRETS if s.encode() in p.read_bytes()]
    assert leaks == []


def step5_compaction(scenario: Scenario, session_id: str) -> None:
    """``/compact``: PreCompact writes a handover; SessionStart(compact) carries it to the model."""
    started = _now()
    run = scenario.session("/compact", "--resume", session_id)
    assert run.session_id == session_id
    summaries = [
        r for r in run.requests if COMPACT_INSTRUCTION in json.dumps(r.body["messages"][-1])
    ]
    assert len(summaries) == 1, scenario.diagnostics()
    (handover,) = scenario.records("handover")
    assert handover["title"] == f"Handover: {NOW}" and handover["valid_from"] >= started
    assert handover["body"] == (
        "Snapshot of the working state before a manual compaction.\n"
        f"Current request: {NOW}\nLast assistant note: {NOW_ANSWER}"
    ), handover
    heading = (
        f"## Last handover ({handover['valid_from'][:10]}, id {handle(handover['id'])})\n"
        "[handover | hook | unconfirmed]\n"
    )

    # Claude Code ran SessionStart with source compact after the boundary, with the handover
    paths = list((scenario.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
    lines = [json.loads(x) for x in paths[0].read_text().splitlines() if x.strip()]
    boundary = max(i for i, e in enumerate(lines) if e.get("subtype") == "compact_boundary")
    ran = [
        e["attachment"]
        for e in lines[boundary:]
        if e.get("type") == "attachment"
        and e["attachment"].get("type") == "hook_success"
        and e["attachment"].get("hookName") == "SessionStart:compact"
    ]
    assert len(ran) == 1, lines[boundary:]
    compact_context = json.loads(ran[0]["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert heading in compact_context

    # ... and that is the context the next request carries
    after = scenario.session(RESUME, "--resume", session_id)
    assert after.output["result"] == RESUME_ANSWER, scenario.diagnostics()
    (start,) = hook_contexts(after.requests[0], "SessionStart")
    assert start.startswith(compact_context), start
    assert heading + "Snapshot of the working state before a manual compaction." in start


def step6_uninstall(scenario: Scenario) -> None:
    """``agentctx uninstall``: Claude Code's files as they were before init, no more injection."""
    removed = scenario.agentctx("uninstall")
    actions = {c["path"]: c["action"] for c in removed["changes"]}
    assert actions[str(scenario.user_settings)] == "updated", removed
    assert scenario.claude_files() == scenario.before_init
    # Claude Code keeps its own state in ~/.claude.json: only our entry had to go
    state = json.loads((scenario.home / ".claude.json").read_text())
    assert "agentctx" not in (state.get("mcpServers") or {}), state.get("mcpServers")

    consolidated = scenario.consolidations()
    output = scenario.claude_p(AFTER)
    assert output["result"] == AFTER_ANSWER, scenario.diagnostics()
    last = scenario.server.messages_requests()[-1]
    assert not hook_contexts(last, "SessionStart") and not hook_contexts(last, "UserPromptSubmit")
    assert "agentctx" not in json.dumps(last.body), "agentctx still registered somewhere"
    assert scenario.consolidations() == consolidated
    # every hook ran cleanly (they log any problem there), and nothing but the two models was asked
    assert scenario.hooks_log() == []
    assert {(r.method, r.path) for r in scenario.server.requests} == {
        ("POST", "/v1/messages?beta=true"),  # Claude Code
        ("POST", "/v1/messages"),  # agentctx's workers
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
