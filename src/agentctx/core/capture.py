"""The capture rules: what a PostToolUse / PostToolUseFailure or PreCompact event shows, as
observations (:mod:`agentctx.core.observe` writes them). Deterministic, no LLM. The hook
(:mod:`agentctx.hooks.capture`) runs them on each event; ``agentctx extract --no-llm``
(:mod:`agentctx.extract.replay`) on each tool call of a transcript.

* Write/Edit/MultiEdit/NotebookEdit → the file, linked to the session.
* ``git checkout -b``/``switch -c`` and branch switches (git's "Switched to … branch" line) → the branch.
* A failing test run (pytest, jest, vitest, go test, cargo test, npm/pnpm/yarn/bun test, …) → an
  inferred bugfix stub "Test failure: <command>" linked to the failing file; other hard errors in Bash
  output → "Error observed: <command>".
* A green test run (the output says so: "3 passed", "ok", "test result: ok", …) → a ``test_pass``
  observation: it closes the command's open failure stub with the evidence and is folded into one
  "Tests passed: <command>" record (:mod:`agentctx.core.activity`). A test command is one that runs
  a test runner (its first words, after wrappers such as ``uv run`` or ``timeout 60``), not one
  that merely names it (``cat pytest.ini``).
* Git operations read from the command and git's own output lines: commits (``[main abc1234]
  subject``, the files of ``git add``/``-- <paths>``/``create mode``), merges and pulls
  (``Fast-forward``, ``Merge made by``, ``CONFLICT … in <file>``), rebases (``Successfully
  rebased``, ``could not apply``) and ``gh pr create`` (the URL it prints) → ``git`` observations,
  folded per branch. Other commands record nothing.
* PreCompact → a handover snapshot of the working state (the newest real user request and the files
  touched, read from the transcript tail) that supersedes the previous handover of this checkout
  (worktree); the other worktrees of the project keep theirs.

All text is redacted before it is stored, as one event: a value found secret anywhere in the
event (the command, its output, a path) is masked in every text and name the event gives
(:class:`Scrub`), so a password redacted in the command is not kept in the output it echoed.
"""

from __future__ import annotations

import os
import re

from agentctx.core import jsonio, testruns
from agentctx.core.files import read_tail
from agentctx.core.observe import STUB_NOTE, STUB_NOTE_FIX, TEST_FAILURE
from agentctx.core.redact import redact, redact_name, secret_values

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agentctx.core.event import Event
    from agentctx.core.shapes import Observation

EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
OUTPUT_TAIL_CHARS = 64_000
TRANSCRIPT_TAIL_BYTES = 512 * 1024

_TEST_FAILED = re.compile(
    r"""(?xm)
    \b[1-9]\d*\s+(?:failed|failing|failures?|errors?)\b | ^FAILED\b | ^FAIL\b | \bFAIL\s | ^---\sFAIL
    | test\sresult:\sFAILED | \bTests?:\s+\d+\s+failed | ^ERROR\b | \bAssertionError\b
    | ^\s*(?:✗|✕|×|✘)\s | \bpanicked\sat\b
    """
)
_TEST_PASSED = re.compile(
    r"""(?xm)
    \b[1-9]\d*\s+(?:passed|passing)\b | ^OK(?:\s\(|\s*$) | ^ok\s+\S | ^PASS(?:\s|$)
    | test\sresult:\sok\b | \b[1-9]\d*\s+examples?,\s+0\s+failures\b | \bcongratulations\s:\)
    | \bSession\s\S+\swas\ssuccessful\b
    """
)
#: What may come before the test runner in a command segment: wrappers, options, env, numbers.
_PREFIX_WORDS = frozenset((
    "time", "timeout", "nice", "env", "sudo", "command", "exec", "xvfb-run", "npx", "bunx", "pnpx",
    "uv", "uvx", "run", "poetry", "pdm", "hatch", "pipenv", "rye", "coverage", "dotenv", "bundle",
    "php", "bash", "sh", "zsh", "ruby", "node", "stdbuf", "nohup", "npm", "pnpm", "yarn", "bun",
    "dlx", "x",
))  # fmt: skip
_MANAGERS = frozenset(("npm", "pnpm", "yarn", "bun"))
_MANAGER_TEST = re.compile(r"\b(?:npm|pnpm|yarn|bun)\b[^;&|\n]*\stest\b")
_PREFIX_WORD = re.compile(r"\w+=\S*|-\S*|\d+[smh]?|python[\d.]*|\S*/activate")
#: Output cut or filtered before the summary: a pass line in it proves nothing.
_FILTERED = re.compile(r"\|\s*(?:head|grep|egrep|rg|sed|awk|cut)\b")
_SEGMENTS = re.compile(r"&&|\|\||[;|&\n(){}`]|\$\(")
_FAILING_FILE = [
    re.compile(r"(?m)^(?:FAILED|ERROR)\s+([\w./\\-]+\.py)(?:::|\s|$)"),
    re.compile(r"(?m)^\s*(?:FAIL|✗|×)\s+([\w./@-]+\.(?:[cm]?[jt]sx?))\b"),
    re.compile(r"(?m)^\s*([\w./-]+_test\.go):\d+:"),
    re.compile(r"(?m)-->\s+([\w./-]+\.rs):\d+"),
    re.compile(r"(?m)^rspec\s+\./([\w./-]+_spec\.rb)"),
    re.compile(r"(?m)^\s+(?:✘\s+\d+|\d+\))\s+\[[^\]\n]*\]\s+›\s+([\w./@-]+\.[cm]?[jt]sx?):\d+"),
    re.compile(r"\bin\s+(?:\S*/)?([\w.-]+\.cs):line\s\d+"),  # dotnet
    re.compile(r"([\w./-]+\.(?:py|[cm]?[jt]sx?|go|rs|rb|java|kt|exs?|php|cs|swift)):\d+"),
]
_HARD_ERROR = re.compile(
    r"""(?xm)
    Traceback\s\(most\srecent\scall\slast\) | \bcommand\snot\sfound\b | ^fatal:\s | ^panic:\s
    | \bSegmentation\sfault\b | ^npm\sERR!  | \berror\[E\d+\] | ^error:\s | ^Error:\s
    | \b(?:SyntaxError|ModuleNotFoundError|ImportError|NameError|TypeError|ReferenceError):\s
    | \bCannot\sfind\smodule\b | \bPermission\sdenied\b | \bNo\ssuch\sfile\sor\sdirectory\b
    """
)
#: A here-document's body (a commit message, a PR body): text, not commands to look at.
_HEREDOC = re.compile(r"""(?ms)<<-?\s*(['"]?)(\w+)\1([^\n]*)\n.*?^\s*\2\s*$""")
_SWITCHED = re.compile(r"Switched to (?:a new )?branch '([^'\n]+)'|Already on '([^'\n]+)'")
_NEW_BRANCH = re.compile(r"\bgit\s+(?:checkout\s+-[bB]|switch\s+(?:-[cC]|--create))\s+([^\s;&|]+)")


class Scrub:
    """Redaction for the texts of one event: each is redacted with the secret values found in all
    the event's sources (computed once, when the first text is redacted: an event that records
    nothing compiles no rule)."""

    def __init__(self, *sources: str) -> None:
        self.sources = sources
        self._known: dict[str, str] | None = None

    @property
    def known(self) -> dict[str, str]:
        """The values the rules find secret in the event's sources."""
        if self._known is None:
            self._known = secret_values(self.sources)
        return self._known

    def __call__(self, text: str) -> str:
        """A text of the event (a title, a body, a summary), redacted."""
        return redact(text, self.known)

    def name(self, name: str) -> str:
        """A node's name (a file, a branch) of the event, redacted."""
        return redact_name(name, self.known)


def tool_use(ctx: Event) -> list[Observation]:
    """Observations of one PostToolUse / PostToolUseFailure event."""
    tool = ctx.text("tool_name")
    tool_input = ctx.payload.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    base = _base(ctx)
    if tool in EDIT_TOOLS:
        path = tool_input.get("file_path") or tool_input.get("notebook_path")
        if isinstance(path, str) and path:
            return [{**base, "kind": "file", "name": redact_name(relative(ctx, path))}]
        return []
    if tool != "Bash":
        return []
    command = tool_input.get("command")
    if not isinstance(command, str) or not command.strip():
        return []
    output = _tool_output(ctx)
    failed = ctx.event == "PostToolUseFailure"
    scrub = Scrub(command, output)
    found: list[Observation] = []
    for match in _SWITCHED.finditer(output):
        name = scrub.name(match.group(1) or match.group(2))
        found.append({**base, "kind": "branch", "name": name})
    if failed is False:
        for match in _NEW_BRANCH.finditer(command):
            found.append({**base, "kind": "branch", "name": scrub.name(match.group(1))})
    scan = _HEREDOC.sub(r"<<\1\2\1\3", command) if "<<" in command else command
    if ("git " in scan or "gh pr" in scan) and output:
        from agentctx.core import gitops  # its patterns compile only for a git or gh command

        found.extend(gitops.operations(ctx, base, scan, output, failed, scrub))
    outcome = _test_outcome(scan, output, failed)
    if outcome == "failed":
        short = _short_command(command, scrub)
        files = _failing_files(ctx, output, scrub)
        summary = _first_lines(output, _TEST_FAILED, testruns.SUMMARY_FAILED)
        body = (
            f"A test run failed in this session: `{short}`."
            + (f"\nFailing: {', '.join(files)}." if files else "")
            + (f"\nOutput:\n{summary}" if summary else "")
            + f"\n{STUB_NOTE_FIX}"
        )
        stub = _stub(base, TEST_FAILURE + short, body, files, "test failure", scrub)
        found.append(stub)
    elif outcome == "passed":
        short = _short_command(command, scrub)
        summary = _last_line(output, scrub)
        found.append({**base, "kind": "test_pass", "command": short, "summary": summary})
    elif (
        not outcome
        and _HARD_ERROR.search(output)
        and (failed or "Traceback" in output or "panic:" in output)
    ):
        short = _short_command(command, scrub)
        summary = _first_lines(output, _HARD_ERROR)
        body = (
            f"A command failed with an error in this session: `{short}`."
            + (f"\nOutput:\n{summary}" if summary else "")
            + f"\n{STUB_NOTE}"
        )
        files = _failing_files(ctx, output, scrub)
        found.append(_stub(base, f"Error observed: {short}", body, files, "error", scrub))
    return found


def _runs_tests(command: str) -> bool:
    """Whether a command segment runs a test runner (after wrappers), not merely names one."""
    if not (testruns.COMMAND.search(command) or _MANAGER_TEST.search(command)):
        return False
    for segment in _SEGMENTS.split(command):
        words = [w.strip("'\"") for w in segment.split()]
        option_value = False  # the word after an option without "=" may be its value
        manager = ""  # `pnpm --filter web test`: the package manager, for its own `test`
        for i, word in enumerate(words):
            name = os.path.basename(word) or word
            rest = " ".join([name, *words[i + 1 :]])
            if testruns.COMMAND.match(rest) or (
                manager and testruns.COMMAND.match(f"{manager} {rest}")
            ):
                return True
            if name in _MANAGERS:
                manager = name
            if name in _PREFIX_WORDS or _PREFIX_WORD.fullmatch(word):
                option_value = word.startswith("-") and "=" not in word
            elif option_value:  # `pnpm --filter web exec vitest`: "web" is --filter's
                option_value = False
            else:
                break
    return False


def _test_outcome(command: str, output: str, failed: bool) -> str:
    """The outcome: "failed", "passed", "ran" (a test run, outcome unknown) or "" (none).

    A command that runs a runner (:func:`_runs_tests`) failed when the event is a failure or its
    output says so (the generic lines or a runner's summary, :mod:`agentctx.core.testruns`); any
    other command is a test run only when its output carries a runner's own summary and its
    program is not one that only shows text (``cat log``).
    """
    named = _runs_tests(command)
    if named:
        if failed or _TEST_FAILED.search(output) or testruns.SUMMARY_FAILED.search(output):
            return "failed"
        passed = (
            _TEST_PASSED.search(output)
            or testruns.SUMMARY_PASSED.search(output)
            or testruns.FINISHED.search(output)
        )
    elif _program(command) in testruns.VIEWERS:
        return ""
    elif testruns.SUMMARY_FAILED.search(output):
        return "failed"
    else:
        passed = None if failed else testruns.SUMMARY_PASSED.search(output)
        if passed is None:
            return ""
    return "passed" if passed and not _FILTERED.search(command) else "ran"


def _program(command: str) -> str:
    """The program of the command's first segment, after wrappers and variables."""
    for segment in _SEGMENTS.split(command):
        for word in segment.split():
            word = word.strip("'\"")
            name = os.path.basename(word) or word
            if name in _PREFIX_WORDS or _PREFIX_WORD.fullmatch(word):
                continue
            return name
    return ""


def pre_compact(ctx: Event) -> list[Observation]:
    """A handover snapshot from the transcript tail, before compaction loses it."""
    request, files, note = _transcript_state(ctx.text("transcript_path"))
    if not request and not files:
        return []
    trigger = ctx.text("trigger") or "auto"
    lines = [f"Snapshot of the working state before a {trigger} compaction."]
    if request:
        lines.append(f"Current request: {clip(request, 900)}")
    if files:
        lines.append("Files touched: " + ", ".join(relative(ctx, f) for f in files))
    if note:
        lines.append(f"Last assistant note: {clip(note, 400)}")
    title = "Handover: " + clip(" ".join((request or "work in progress").split()), 100)
    scrub = Scrub(request, note, *files)
    return [
        {
            **_base(ctx),
            "kind": "handover",
            "checkout": ctx.project.checkout,
            "title": scrub(title),
            "body": scrub("\n".join(lines)),
            "files": [scrub.name(relative(ctx, f)) for f in files],
        }
    ]


# -- helpers ---------------------------------------------------------------------------------------


def _base(ctx: Event) -> Observation:
    from agentctx.core import clock

    base: Observation = {
        "project_id": ctx.project.project_id,
        "session_id": ctx.session_id,
        "at": clock.now(),
    }
    call = ctx.text("tool_use_id")
    if call:
        base["call"] = call[:200]
    return base


def _stub(
    base: Observation, title: str, body: str, files: list[str], word: str, scrub: Scrub
) -> Observation:
    return {
        **base,
        "kind": "stub",
        "title": scrub(title),
        "body": scrub(body),
        "files": files,
        "keywords": word,
    }


def _tool_output(ctx: Event) -> str:
    parts: list[str] = []
    error = ctx.payload.get("error")
    if isinstance(error, str):
        parts.append(error)
    response = ctx.payload.get("tool_response")
    if isinstance(response, dict):
        for key in ("stdout", "stderr", "output", "error"):
            value = response.get(key)
            if isinstance(value, str):
                parts.append(value)
    elif isinstance(response, str):
        parts.append(response)
    text = "\n".join(parts)
    return text[-OUTPUT_TAIL_CHARS:]


def _short_command(command: str, scrub: Scrub) -> str:
    # the whole first line is redacted before it is cut: a cut must not split a secret off its cue
    first = " ".join(command.strip().splitlines()[0].split()) if command.strip() else ""
    return clip(scrub(first), 90)


def clip(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` - 1 characters and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_lines(output: str, *patterns: re.Pattern[str], limit: int = 6) -> str:
    lines = [line.rstrip() for line in output.splitlines() if any(p.search(line) for p in patterns)]
    return clip("\n".join(lines[:limit]), 600)


def _last_line(output: str, scrub: Scrub) -> str:
    """The last line that says the run passed (a generic pass line or a runner's summary)."""
    patterns = (_TEST_PASSED, testruns.SUMMARY_PASSED, testruns.FINISHED)
    lines = [
        line.strip(" =") for line in output.splitlines() if any(p.search(line) for p in patterns)
    ]
    return clip(scrub(lines[-1]), 200) if lines else ""


def relative(ctx: Event, path: str) -> str:
    """A path as capture names files: relative to the project root when inside it."""
    root = ctx.project.root
    full = path if os.path.isabs(path) else os.path.join(ctx.cwd, path)
    full = os.path.normpath(full)
    try:
        rel = os.path.relpath(full, root)
    except ValueError:
        return full
    return full if rel.startswith("..") else rel


def _failing_files(ctx: Event, output: str, scrub: Scrub) -> list[str]:
    for pattern in _FAILING_FILE:
        found = list(dict.fromkeys(m.group(1) for m in pattern.finditer(output)))
        if found:
            return [scrub.name(relative(ctx, f)) for f in found[:5]]
    return []


def _transcript_state(path: str) -> tuple[str, list[str], str]:
    """(newest real user request, files touched recently, last assistant text) from the tail."""
    if not path:
        return "", [], ""
    try:  # a regular file only (a FIFO would block, /dev/zero never end), its tail only
        data, _cut = read_tail(path, TRANSCRIPT_TAIL_BYTES)
    except (OSError, ValueError):  # ValueError: a path the OS refuses (NUL)
        return "", [], ""
    lines = data.decode("utf-8", "replace").split("\n")
    request = ""
    note = ""
    files: list[str] = []
    for line in reversed(lines):
        if not line.startswith("{"):  # blank or foreign: not worth a parse (a tail of newlines)
            continue
        try:
            entry = jsonio.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("isSidechain"):
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if entry.get("type") == "assistant" and isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and block.get("name") in EDIT_TOOLS:
                    args = block.get("input")
                    target = (
                        args.get("file_path") or args.get("notebook_path")
                        if isinstance(args, dict)
                        else None
                    )
                    if isinstance(target, str) and target not in files and len(files) < 12:
                        files.append(target)
                elif (
                    block.get("type") == "text" and not note and isinstance(block.get("text"), str)
                ):
                    note = block["text"].strip()
        elif entry.get("type") == "user" and not request and _is_real_request(entry, content):
            request = _text_of(content)
    return request, list(reversed(files)), note


def _is_real_request(entry: dict[str, Any], content: Any) -> bool:
    if (
        entry.get("isMeta")
        or entry.get("isCompactSummary")
        or entry.get("toolUseResult") is not None
    ):
        return False
    text = _text_of(content).lstrip()
    if not text:
        return False
    return not text.startswith(("<command-", "<local-command", "Caveat:", "[Request interrupted"))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return ""
        return "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""
