"""The test runners capture knows, in one table: how a command runs each, and the summary it prints.

A Bash call is a test run (:func:`agentctx.core.capture.tool_use` records its outcome) when

* its command runs a runner of :data:`RUNNERS` (its ``command`` pattern, matched where the command's
  program starts, after wrappers such as ``npx``, ``pnpm exec``, ``yarn``, ``bunx``, ``uv run``,
  ``poetry run``, ``timeout 60`` or ``FOO=1``: :func:`agentctx.core.capture.runs_tests`), or
* its output carries a runner's own summary line (the ``failed`` and ``passed`` patterns below,
  each the exact shape that runner prints) and the command is not one that only shows text
  (``cat``, ``grep``, ``tail``, ``echo``…: :data:`VIEWERS`). This catches the runs behind a task
  runner or a script: ``make e2e``, ``npm run ci``, ``just check``, ``./scripts/test.sh``.

Each row: the runner's name, the command pattern, the summary line(s) that say some tests failed,
those that say they ran and passed, and (``finished``) a line that counts as a pass only when the
command itself names the runner (Gradle's ``BUILD SUCCESSFUL`` says nothing about tests otherwise).
The rows' outputs, passing and failing, are tested in ``tests/test_capture_runners.py``.
Standard library only (the PostToolUse hook imports it).
"""

from __future__ import annotations

import re


class Runner:
    """One row of :data:`RUNNERS` (patterns are ``re`` sources, multi-line mode)."""

    __slots__ = ("command", "failed", "finished", "name", "passed")

    def __init__(
        self, name: str, command: str, failed: str, passed: str, finished: str = ""
    ) -> None:
        self.name = name
        self.command = command
        self.failed = failed
        self.passed = passed
        self.finished = finished


#: The runners, each with how it is invoked and the summary lines it prints.
RUNNERS: tuple[Runner, ...] = (
    Runner(
        "pytest",
        r"(?:pytest|py\.test)\b|-m\s+pytest\b",
        r"^[= ]*(?:\d+ \w+, )*[1-9]\d* (?:failed|errors?)\b.* in [\d.]+s\b",
        r"^[= ]*(?:\d+ \w+, )*[1-9]\d* passed\b.* in [\d.]+s\b",
    ),
    Runner(
        "unittest",
        r"-m\s+unittest\b",
        r"^FAILED \((?:failures|errors)=[1-9]",
        r"^Ran [1-9]\d* tests? in [\d.]+s$",
    ),
    Runner(
        "jest",
        r"jest\b",
        r"^Tests:\s+(?:\d+ \w+, )*[1-9]\d* failed\b",
        r"^Tests:\s+(?!.*\bfailed\b).*\b[1-9]\d* passed, \d+ total",
    ),
    Runner(
        "vitest",
        r"vitest\b",
        r"^\s*(?:Test Files|Tests)\s+[1-9]\d* failed\b",
        r"^\s*Tests\s+(?!.*\bfailed\b)(?:.*\| )?[1-9]\d* passed\b.*\(\d+\)",
    ),
    Runner(
        "playwright",
        r"playwright\s+test\b",
        r"^\s+[1-9]\d* failed$",
        r"^\s+[1-9]\d* passed \([\d.]+m?s\)$",
    ),
    Runner(
        "cypress",
        r"cypress\s+run\b",
        r"✖\s+[1-9]\d* of \d+ failed\b",
        r"✔\s+All specs passed!",
    ),
    Runner(
        "mocha",
        r"mocha\b",
        r"^\s+[1-9]\d* failing$",
        r"^\s+[1-9]\d* passing \(\d+m?s\)$",
    ),
    Runner("ava", r"ava\b", r"^\s+[1-9]\d* tests? failed$", r"^\s+[1-9]\d* tests? passed$"),
    Runner(
        "bun test",
        r"bun\s+test\b",
        r"^ [1-9]\d* fail$",
        r"^Ran [1-9]\d* tests? across \d+ files?\. \[",
    ),
    Runner(
        "deno test",
        r"deno\s+test\b",
        r"^FAILED \| \d+ passed.* \| [1-9]\d* failed",
        r"^ok \| [1-9]\d* passed.* \| 0 failed",
    ),
    Runner(
        "go test",
        r"go\s+test\b",
        r"^--- FAIL: |^FAIL\t\S+",
        r"^ok\s+\S+\s+(?:[\d.]+s|\(cached\))",
    ),
    Runner(
        "cargo test",
        r"cargo\s+(?:\+\S+\s+)?(?:test|nextest)\b",
        r"^test result: FAILED\.|^\s+Summary \[.*\b[1-9]\d* failed",
        r"^test result: ok\. [1-9]\d* passed|^\s+Summary \[.*tests? run: [1-9]\d* passed",
    ),
    Runner(
        "rspec",
        r"rspec\b",
        r"^\d+ examples?, [1-9]\d* failures?",
        r"^[1-9]\d* examples?, 0 failures",
    ),
    Runner(
        "minitest",
        r"(?:rails|rake|bin/rails)\s+test\b",
        r"^\d+ runs, \d+ assertions, (?:[1-9]\d* failures|\d+ failures, [1-9]\d* errors)",
        r"^[1-9]\d* runs, \d+ assertions, 0 failures, 0 errors",
    ),
    Runner(
        "phpunit",
        r"(?:phpunit|pest)\b",
        r"^(?:FAILURES|ERRORS)!$|^Tests: \d+, Assertions: \d+, (?:Errors|Failures): [1-9]",
        r"^OK \([1-9]\d* tests?, \d+ assertions?\)",
    ),
    Runner(
        "gradle",
        r"gradlew?(?:\s+-\S+)*\s+(?:\S*:)?(?:test|check)\b",
        r"^\d+ tests? completed, [1-9]\d* failed|^> Task \S*:test FAILED$",
        "",  # a green Gradle run prints no test count
        finished=r"^BUILD SUCCESSFUL\b",
    ),
    Runner(
        "maven",
        r"mvnw?(?:\s+-\S+)*\s+(?:[\w:.-]+\s+)*?(?:test|verify)\b",
        r"^\[(?:ERROR|INFO)\]\s+Tests run: \d+, (?:Failures: [1-9]|Failures: \d+, Errors: [1-9])",
        r"^\[INFO\]\s+Tests run: [1-9]\d*, Failures: 0, Errors: 0",
    ),
    Runner(
        "dotnet test",
        r"dotnet\s+test\b",
        r"^Failed!\s+-\s+Failed:\s+[1-9]|^Test summary: total: \d+, failed: [1-9]",
        r"^Passed!\s+-\s+Failed:\s+0,|^Test summary: total: [1-9]\d*, failed: 0",
    ),
    Runner(
        "swift test",
        r"swift\s+test\b",
        r"Executed \d+ tests?, with [1-9]\d* failures?",
        r"Executed [1-9]\d* tests?, with 0 failures",
    ),
    Runner(
        "mix test",
        r"mix\s+test\b",
        r"^\d+ tests?, [1-9]\d* failures?",
        r"^[1-9]\d* tests?, 0 failures",
    ),
    Runner(
        "ctest",
        r"ctest\b",
        r"tests passed, [1-9]\d* tests? failed out of \d+",
        r"^100% tests passed, 0 tests failed out of [1-9]",
    ),
    # Wrappers and scripts that run a project's tests: their outcome is read from the output
    # (the rows above, and the generic lines of agentctx.core.capture).
    Runner("tox", r"tox\b", "", r"^\s*congratulations :\)"),
    Runner("nox", r"nox\b", "", r"\bSession \S+ was successful\b"),
    Runner("zig test", r"zig\s+(?:build\s+)?test\b", "", ""),
    Runner("package script", r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test\b|npm\s+t\b", "", ""),
    Runner("make", r"make\s+(?:test|check)\b", "", ""),
)

#: Programs that only show, search or echo text: a runner's summary in their output is not a run.
VIEWERS = frozenset((
    "cat", "bat", "less", "more", "head", "tail", "grep", "egrep", "fgrep", "rg", "ag", "ack",
    "sed", "awk", "cut", "jq", "echo", "printf", "ls", "find", "wc", "sort", "uniq", "diff", "git",
    "gh", "view", "vi", "vim", "nano", "code", "open", "xxd", "od", "strings", "zcat", "file",
))  # fmt: skip


def _union(sources: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{s})" for s in sources if s), re.MULTILINE)


#: A command that runs a runner of the table, matched where a program starts.
COMMAND = re.compile("|".join(f"(?:{r.command})" for r in RUNNERS))
#: Some runner's own failure summary.
SUMMARY_FAILED = _union([r.failed for r in RUNNERS])
#: Some runner's own pass summary (not the ``finished`` lines: they need the runner's command).
SUMMARY_PASSED = _union([r.passed for r in RUNNERS])
#: A pass line of a runner the command names itself.
FINISHED = _union([r.finished for r in RUNNERS])


def runner_of(output: str) -> str:
    """The name of the first runner whose summary ``output`` carries ('' when none)."""
    for runner in RUNNERS:
        for source in (runner.failed, runner.passed):
            if source and re.search(source, output, re.MULTILINE):
                return runner.name
    return ""
