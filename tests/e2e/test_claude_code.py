"""The hooks under the real Claude Code CLI, offline: one session from first prompt to compaction.

``claude -p`` (the version pinned in conftest) runs in a git project set up by
``agentctx init --project``, with an isolated HOME and TMPDIR and ``ANTHROPIC_BASE_URL`` pointing at
:mod:`tests.messages_server`, whose scripted model answers as a model would: text, tool calls, a
compaction summary. Nothing is faked on agentctx's side: Claude Code runs ``agentctx hook …``
through PATH, and the assertions read what Claude Code sent to the model, the transcript it wrote
and the SQLite store the hooks wrote.

1. Injection: the first model request carries the SessionStart digest and the UserPromptSubmit
   records (Claude Code drops context whose ``hookEventName`` is wrong, so this checks that too).
2. Capture: the model runs Bash (a new branch, a failing test run) and Write; the async
   PostToolUse / PostToolUseFailure hooks record the branch, the files and a bugfix stub, linked to
   the session id Claude Code reported.
3. Compaction: ``/compact`` fires PreCompact (a handover record), then SessionStart with source
   ``compact``, whose digest (with the handover) reaches the next model request.
4. Session end: SessionEnd marked the session ended and folded in the tokens injected.

The session goes on with ``--resume``, as a user's would. No fixed sleeps: ``-p`` kills async hooks
still running when it exits, so the scripted model's last answer waits (up to a deadline) until the
capture hooks have written, as a slow model would; everything else polls with a deadline.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentctx.core import inject
from agentctx.core.handles import handle
from agentctx.core.project import identify
from agentctx.retrieval import digest as digest_fence
from tests.e2e.harness import Machine, blocks, texts, wait_until
from tests.messages_server import MessagesServer, Recorded, Reply, TextReply, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.e2e

DECISION = (
    "Use gRPC for internal services",
    "We moved from REST to gRPC between internal services for streaming.",
)
DISCOVERY = (
    "gRPC deadlines are mandatory",
    "Every gRPC call needs a deadline; the mesh drops calls without one after 30 s.",
)

ASK = "Which protocol do our internal services use to talk to each other, gRPC or REST, and do their calls need a deadline?"
ASK_ANSWER = "They use gRPC; REST was retired for internal calls."
BUILD = "Add a gRPC client module with a default deadline and a test for it, on a new branch."
BUILD_ANSWER = "The client is written; its test fails until the deadline is set."
AFTER = "Set the default deadline of the gRPC client so that its test passes."
AFTER_ANSWER = "Next I will set DEFAULT_DEADLINE_S."
SUMMARY = (
    "<analysis>The user asked for a gRPC client with a deadline.</analysis>\n\n<summary>\n"
    "1. Primary Request and Intent: a gRPC client module with a default deadline, tested.\n"
    "8. Current Work: tests/test_grpc_client.py fails: DEFAULT_DEADLINE_S is None.\n</summary>"
)
#: Part of the prompt Claude Code sends when it compacts a conversation.
COMPACT_INSTRUCTION = "create a detailed summary of the conversation so far"

CLIENT_FILE = "src/shop/grpc_client.py"
CLIENT_CODE = (
    '"""gRPC client for the internal services."""\n\nDEFAULT_DEADLINE_S: float | None = None\n'
)
TEST_FILE = "tests/test_grpc_client.py"
TEST_CODE = (
    "from shop.grpc_client import DEFAULT_DEADLINE_S\n\n\n"
    "def test_default_deadline_is_set():\n"
    "    assert DEFAULT_DEADLINE_S is not None\n"
)
BRANCH = "feat/grpc-client"
TEST_COMMAND = f"python -m pytest -q -p no:cacheprovider {TEST_FILE}"
CAPTURE_DEADLINE_S = 30.0
CLAUDE_TIMEOUT_S = 120


# -- the scenario: an isolated machine with a project, agentctx and the model server ---------------


class Scenario(Machine):
    """The isolated machine, plus what this test reads: the store, transcripts, the hooks log."""

    claude_timeout_s = CLAUDE_TIMEOUT_S

    @property
    def project_id(self) -> str:
        """The project's id as agentctx identifies it (from the origin remote)."""
        return identify(str(self.project)).project_id

    def captured(self, session_id: str) -> bool:
        """Whether the capture hooks have recorded all that step 2 shows them."""
        if not (self.agentctx_home / "agentctx.db").exists():
            return False
        linked = self.query(
            "SELECT n.kind, n.name FROM nodes n JOIN edges e ON e.from_id = n.id "
            "WHERE e.to_id = ? AND e.rel_type = 'observed_in'",
            (session_id,),
        )
        stubs = self.query(
            "SELECT count(*) FROM records WHERE type = 'bugfix' AND session_id = ?", (session_id,)
        )
        wanted = {("file", CLIENT_FILE), ("file", TEST_FILE), ("branch", BRANCH)}
        return wanted <= set(linked) and stubs[0][0] > 0

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The session's transcript lines (``~/.claude/projects/<slug>/<id>.jsonl``)."""
        paths = list((self.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"))
        assert len(paths) == 1, f"transcript of {session_id}: {paths}"
        return [json.loads(line) for line in paths[0].read_text().splitlines() if line.strip()]

    def context(self, request: Recorded, event: str) -> str:
        """The ``additionalContext`` of ``event`` in a model request.

        Claude Code 2.1.332 puts it in a ``role: "system"`` entry of ``messages``, after the words
        "<event> hook additional context: ", together with other context of its own.
        """
        prefix = f"{event} hook additional context: "
        found = [
            (message.get("role"), text)
            for message in request.body["messages"]
            for text in texts(message)
            if prefix in text
        ]
        assert len(found) == 1, f"{len(found)} {event} contexts\n{self.diagnostics()}"
        role, text = found[0]
        assert role == "system", role
        return text.split(prefix, 1)[1]

    def diagnostics(self) -> str:
        """What to read when a step fails: the last claude run, the hooks log, the requests."""
        parts = self.last_run()
        parts.append("hooks.log:\n" + "\n".join(self.hooks_log()[-40:]))
        parts.append("requests: " + ", ".join(f"{r.method} {r.path}" for r in self.server.requests))
        return "\n".join(parts)


# -- the scripted model ----------------------------------------------------------------------------


class Model:
    """Answers from the newest user prompt and the number of tool results that followed it."""

    def __init__(self, project: Path) -> None:
        self.plans: dict[str, list[Reply]] = {
            ASK: [TextReply(ASK_ANSWER)],
            BUILD: [
                ToolUseReply(
                    "Bash",
                    {"command": f"git checkout -b {BRANCH}", "description": "Create the branch"},
                ),
                ToolUseReply(
                    "Write",
                    {"file_path": str(project / CLIENT_FILE), "content": CLIENT_CODE},
                    text="Writing the client.",
                ),
                ToolUseReply(
                    "Write", {"file_path": str(project / TEST_FILE), "content": TEST_CODE}
                ),
                ToolUseReply("Bash", {"command": TEST_COMMAND, "description": "Run the test"}),
                TextReply(BUILD_ANSWER),
            ],
            AFTER: [TextReply(AFTER_ANSWER)],
        }
        #: called with the session id before the BUILD answer (the fixture makes it wait)
        self.before_build_answer: Callable[[str], object] = lambda session_id: None

    def __call__(self, request: Recorded) -> Reply | None:
        users = [m for m in request.body["messages"] if m["role"] == "user"]
        if COMPACT_INSTRUCTION in "\n".join(texts(users[-1])):
            return TextReply(SUMMARY)
        results = 0  # walk back over tool results to the prompt that started this turn
        for message in reversed(users):
            if not any(b.get("type") == "tool_result" for b in blocks(message)):
                break
            results += 1
        prompt = "\n".join(texts(message))
        plan = next((p for key, p in self.plans.items() if key in prompt), None)
        if plan is None:
            return None  # not a turn of ours: the server's default reply
        if plan is self.plans[BUILD] and results == len(plan) - 1:
            self.before_build_answer(request.headers.get("x-claude-code-session-id", ""))
        return plan[min(results, len(plan) - 1)]


@pytest.fixture
def scenario(tmp_path_factory: pytest.TempPathFactory, claude_code: Path) -> Iterator[Scenario]:
    """A git project (origin remote, pyproject.toml) and the model server, not yet set up."""
    root = tmp_path_factory.mktemp("cc")  # short: Claude Code puts sockets under TMPDIR
    model = Model(root / "project")
    with MessagesServer(model) as server:
        scenario = Scenario(root, claude_code, server)
        model.before_build_answer = lambda session_id: wait_until(
            lambda: scenario.captured(session_id), CAPTURE_DEADLINE_S
        )
        project = scenario.project
        (project / "pyproject.toml").write_text(
            '[project]\nname = "shop"\nversion = "0.1.0"\n\n'
            '[tool.pytest.ini_options]\npythonpath = ["src"]\n'
        )
        (project / "src" / "shop").mkdir(parents=True)
        (project / "src" / "shop" / "__init__.py").write_text("")
        (project / "tests").mkdir()
        scenario.commit_project()
        yield scenario


# -- the test ---------------------------------------------------------------------------------------


def test_hooks_under_real_claude_code(scenario: Scenario) -> None:
    setup = scenario.agentctx("init", "--project", "--no-mcp", "--no-llm", "--no-embeddings")
    settings = scenario.project / ".claude" / "settings.json"
    assert [(c["path"], c["action"]) for c in setup["changes"]] == [(str(settings), "created")]
    assert setup["agentctx_on_path"] == str(Path(sys.executable).parent / "agentctx")
    decision = scenario.agentctx(
        "record", "--type", "decision", "--title", DECISION[0], "--body", DECISION[1]
    )
    discovery = scenario.agentctx(
        "record", "--type", "discovery", "--title", DISCOVERY[0], "--body", DISCOVERY[1]
    )

    session_id = step1_injection(scenario, decision["id"], discovery["id"])
    step2_capture(scenario, session_id)
    step3_compaction(scenario, session_id)
    step4_session_end(scenario, session_id)


def step1_injection(scenario: Scenario, decision_id: str, discovery_id: str) -> str:
    """SessionStart and UserPromptSubmit context reach the model in the first request."""
    output = scenario.claude_p(ASK)
    session_id = str(output["session_id"])
    assert output["result"] == ASK_ANSWER, scenario.diagnostics()
    requests = scenario.server.messages_requests()
    assert len(requests) == 1, scenario.diagnostics()
    first = requests[0]
    assert first.stream and first.headers["x-claude-code-session-id"] == session_id
    digest = scenario.context(first, "SessionStart")
    fenced = f"# agentctx: context for shop\n{digest_fence.FENCE_OPEN}\n{inject.FENCE_NOTE}\n\n"
    assert digest.startswith(fenced + "## Project profile\n"), digest
    assert "] Test command: pytest (from pyproject.toml [tool.pytest.ini_options])\n" in digest
    assert "- [decision | " in digest
    assert f"] {DECISION[0]}: {DECISION[1]} (id {handle(decision_id)})\n" in digest
    records = scenario.context(first, "UserPromptSubmit")
    assert records.startswith(f"{inject.FENCE_OPEN}\n{inject.PROMPT_NOTE}\n\n### [")
    assert f"| today | id {handle(discovery_id)}] {DISCOVERY[0]}\n{DISCOVERY[1]}" in records, (
        records
    )
    # the decision matches the prompt as well, but SessionStart has shown it already
    assert f"### {DECISION[0]}" not in records
    return session_id


def step2_capture(scenario: Scenario, session_id: str) -> None:
    """Bash and Write, allowed and run for real; the async capture hooks record what they did."""
    before = len(scenario.server.messages_requests())
    output = scenario.claude_p(BUILD, "--resume", session_id, "--allowedTools", "Write Bash")
    assert output["session_id"] == session_id and output["result"] == BUILD_ANSWER
    assert output["permission_denials"] == [], output["permission_denials"]
    turns = scenario.server.messages_requests()[before:]
    assert len(turns) == 5, scenario.diagnostics()  # four tool calls, then the answer
    last_results = json.dumps(blocks(turns[-1].body["messages"][-1]))
    assert "1 failed" in last_results, last_results  # the test ran, and failed
    assert (scenario.project / CLIENT_FILE).read_text() == CLIENT_CODE
    assert scenario.run("git", "branch", "--show-current").stdout.strip() == BRANCH
    # the model's answer waited for the async hooks; wait here too in case it gave up
    assert wait_until(lambda: scenario.captured(session_id), CAPTURE_DEADLINE_S), (
        scenario.diagnostics()
    )
    nodes = scenario.query(
        "SELECT n.kind, n.name, n.project_id FROM nodes n JOIN edges e ON e.from_id = n.id "
        "WHERE e.to_id = ? AND e.rel_type = 'observed_in' ORDER BY n.kind, n.name",
        (session_id,),
    )
    project_id = scenario.project_id
    assert nodes == [
        ("branch", BRANCH, project_id),
        ("file", CLIENT_FILE, project_id),
        ("file", TEST_FILE, project_id),
    ]
    stub_id, title, body, confidence, source, stub_project = scenario.one(
        "SELECT id, title, body, confidence, source, project_id FROM records "
        "WHERE type = 'bugfix' AND session_id = ?",
        (session_id,),
    )
    assert title == f"Test failure: {TEST_COMMAND}"
    assert (confidence, source, stub_project) == ("inferred", "hook_observation", project_id)
    assert f"\nFailing: {TEST_FILE}.\n" in body and "1 failed" in body, body
    linked = scenario.query(
        "SELECT n.name FROM record_entities re JOIN nodes n ON n.id = re.entity_id "
        "WHERE re.record_id = ? ORDER BY n.name",
        (stub_id,),
    )
    # the failing file, and the file the session edited before the failure (the suspect)
    assert linked == sorted([(CLIENT_FILE,), (TEST_FILE,)])


def step3_compaction(scenario: Scenario, session_id: str) -> None:
    """``/compact``: PreCompact writes a handover; SessionStart(compact) injects it next turn."""
    before = len(scenario.server.messages_requests())
    started = datetime.now(UTC)
    output = scenario.claude_p("/compact", "--resume", session_id)
    assert output["session_id"] == session_id
    asked = scenario.server.messages_requests()[before:]
    summaries = [r for r in asked if COMPACT_INSTRUCTION in json.dumps(r.body["messages"][-1])]
    assert len(summaries) == len(asked) == 1, scenario.diagnostics()

    handover_id, title, body, confidence, source, valid_from = scenario.one(
        "SELECT id, title, body, confidence, source, valid_from FROM records "
        "WHERE type = 'handover' AND session_id = ? AND superseded_at IS NULL",
        (session_id,),
    )
    assert title == f"Handover: {BUILD}"
    assert (confidence, source) == ("inferred", "hook_observation")
    assert body == (
        "Snapshot of the working state before a manual compaction.\n"
        f"Current request: {BUILD}\n"
        f"Files touched: {CLIENT_FILE}, {TEST_FILE}\n"
        f"Last assistant note: {BUILD_ANSWER}"
    ), body
    assert datetime.fromisoformat(valid_from) >= started

    # Claude Code's record of it: SessionStart ran with source compact after the boundary, and
    # its digest already holds the handover (PreCompact ran first and refreshed the digest)
    lines = scenario.transcript(session_id)
    boundary = next(i for i, e in enumerate(lines) if e.get("subtype") == "compact_boundary")
    ran = [
        (i, e["attachment"])
        for i, e in enumerate(lines)
        if e.get("type") == "attachment"
        and e["attachment"].get("type") == "hook_success"
        and e["attachment"].get("hookName") == "SessionStart:compact"
    ]
    assert len(ran) == 1 and ran[0][0] > boundary, lines[boundary:]
    contract = json.loads(ran[0][1]["stdout"])
    assert list(contract) == ["hookSpecificOutput"]
    assert contract["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    handover_line = f"## Last handover ({valid_from[:10]}, id {handle(handover_id)})\n[handover | hook | unconfirmed]\n"
    assert handover_line in contract["hookSpecificOutput"]["additionalContext"]

    # ... and that context reaches the model with the next prompt, after the summary
    before = len(scenario.server.messages_requests())
    output = scenario.claude_p(AFTER, "--resume", session_id)
    assert output["session_id"] == session_id and output["result"] == AFTER_ANSWER
    after = scenario.server.messages_requests()[before]
    digest = scenario.context(after, "SessionStart")
    assert handover_line + "Snapshot of the working state before a manual compaction." in digest
    messages = after.body["messages"]
    assert "DEFAULT_DEADLINE_S is None" in "\n".join(texts(messages[0]))  # starts from the summary
    assert not [b for m in messages for b in blocks(m) if b.get("type") == "tool_use"]


def step4_session_end(scenario: Scenario, session_id: str) -> None:
    """SessionEnd marked the session ended and folded its injection ledger into the row."""
    project_id, cwd, transcript_path, ended_at, tokens, injections = scenario.one(
        "SELECT project_id, cwd, transcript_path, ended_at, tokens_injected, injections "
        "FROM sessions WHERE session_id = ?",
        (session_id,),
    )
    assert (project_id, cwd) == (scenario.project_id, str(scenario.project))
    assert transcript_path.endswith(f"/{session_id}.jsonl") and Path(transcript_path).is_file()
    assert ended_at is not None and datetime.fromisoformat(ended_at) >= scenario.last_started
    assert tokens > 0 and injections >= 3, (tokens, injections)
    assert not (scenario.agentctx_home / "sessions" / f"{session_id}.jsonl").exists()
    # every hook ran cleanly (they log any problem there), and nothing but the model was asked
    assert scenario.hooks_log() == []
    assert {(r.method, r.path) for r in scenario.server.requests} == {
        ("POST", "/v1/messages?beta=true")
    }
