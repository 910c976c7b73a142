"""Test runs of every runner of agentctx.core.testruns, passing and failing, through the real hook.

Each output is the shape the runner prints (its own summary lines, as a developer sees them in a
terminal); each event goes through ``agentctx hook post-tool-use`` as Claude Code runs it (a
subprocess, a real SQLite store). A failing run is a "Test failure: <command>" bugfix stub; a
passing one a "Tests passed: <command>" discovery. Issue 27, item 17.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from agentctx.core import testruns
from tests.helpers import query, seed
from tests.test_capture_activity import post

if TYPE_CHECKING:
    from pathlib import Path

PYTEST = (
    """============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/u/app
collected 3 items

tests/test_api.py .F.                                                    [100%]

=================================== FAILURES ===================================
_________________________________ test_refresh _________________________________

    def test_refresh():
>       assert refresh("t") == "t2"
E       AssertionError: assert 't' == 't2'

tests/test_api.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_api.py::test_refresh - AssertionError: assert 't' == 't2'
========================= 1 failed, 2 passed in 0.05s ==========================
""",
    """============================= test session starts ==============================
collected 3 items

tests/test_api.py ...                                                    [100%]

============================== 3 passed in 0.02s ===============================
""",
)
UNITTEST = (
    """.F
======================================================================
FAIL: test_refresh (tests.test_api.RefreshTest.test_refresh)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/u/app/tests/test_api.py", line 9, in test_refresh
    self.assertEqual(refresh("t"), "t2")
AssertionError: 't' != 't2'

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
""",
    "..\n----------------------------------------------------------------------\n"
    "Ran 2 tests in 0.001s\n\nOK\n",
)
JEST = (
    """ FAIL  src/auth.test.js
  ● refresh › returns a new token

    expect(received).toBe(expected) // Object.is equality

    Expected: "t2"
    Received: "t"

      10 |   it('returns a new token', () => {
    > 11 |     expect(refresh('t')).toBe('t2');
         |                          ^
      12 |   });

      at Object.toBe (src/auth.test.js:11:26)

 PASS  src/util.test.js

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 4 passed, 5 total
Snapshots:   0 total
Time:        1.234 s
Ran all test suites.
""",
    """ PASS  src/auth.test.js
 PASS  src/util.test.js

Test Suites: 2 passed, 2 total
Tests:       1 skipped, 5 passed, 6 total
Snapshots:   0 total
Time:        0.912 s, estimated 1 s
Ran all test suites.
""",
)
VITEST = (
    """
 RUN  v2.1.8 /home/u/app

 ❯ src/auth.test.ts (2 tests | 1 failed) 5ms
   × refresh > returns a new token 3ms
     → expected 't' to be 't2' // Object.is equality
 ✓ src/util.test.ts (3 tests) 2ms

⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯

 FAIL  src/auth.test.ts > refresh > returns a new token
AssertionError: expected 't' to be 't2' // Object.is equality
 ❯ src/auth.test.ts:11:26

 Test Files  1 failed | 1 passed (2)
      Tests  1 failed | 4 passed (5)
   Start at  10:21:03
   Duration  412ms (transform 40ms, setup 0ms, collect 35ms, tests 7ms)
""",
    """
 RUN  v2.1.8 /home/u/app

 ✓ src/auth.test.ts (2 tests) 3ms
 ✓ src/util.test.ts (3 tests) 2ms

 Test Files  2 passed (2)
      Tests  5 passed (5)
   Start at  10:22:41
   Duration  380ms
""",
)
PLAYWRIGHT = (
    """
Running 3 tests using 2 workers

  ✘  1 [chromium] › tests/login.spec.ts:8:5 › login › shows the dashboard (5.2s)
  ✓  2 [chromium] › tests/home.spec.ts:3:5 › has title (812ms)
  ✓  3 [chromium] › tests/home.spec.ts:9:5 › get started link (1.1s)


  1) [chromium] › tests/login.spec.ts:8:5 › login › shows the dashboard ──────────────────────

    Error: Timed out 5000ms waiting for expect(locator).toBeVisible()

    Locator: getByRole('heading', { name: 'Dashboard' })
    Expected: visible
    Received: <element(s) not found>

      10 |     await page.getByRole('button', { name: 'Sign in' }).click();
    > 11 |     await expect(page.getByRole('heading', { name: 'Dashboard' })).toBeVisible();
         |                                                                    ^
      12 |   });

        at /home/u/app/tests/login.spec.ts:11:68

  1 failed
    [chromium] › tests/login.spec.ts:8:5 › login › shows the dashboard ───────────────────────
  2 passed (7.4s)

  To open last HTML report run:

    npx playwright show-report

""",
    """
Running 3 tests using 2 workers

  ✓  1 [chromium] › tests/home.spec.ts:3:5 › has title (812ms)
  ✓  2 [chromium] › tests/home.spec.ts:9:5 › get started link (1.1s)
  ✓  3 [chromium] › tests/login.spec.ts:8:5 › login › shows the dashboard (2.0s)

  3 passed (2.9s)
""",
)
CYPRESS = (
    """
  (Run Finished)

       Spec                                              Tests  Passing  Failing  Pending  Skipped
  ┌────────────────────────────────────────────────────────────────────────────────────────────────┐
  │ ✖  login.cy.ts                              00:04        2        1        1        -        - │
  └────────────────────────────────────────────────────────────────────────────────────────────────┘
    ✖  1 of 1 failed (100%)                     00:04        2        1        1        -        -
""",
    """
  (Run Finished)

       Spec                                              Tests  Passing  Failing  Pending  Skipped
  ┌────────────────────────────────────────────────────────────────────────────────────────────────┐
  │ ✔  login.cy.ts                              00:03        2        2        -        -        - │
  └────────────────────────────────────────────────────────────────────────────────────────────────┘
    ✔  All specs passed!                        00:03        2        2        -        -        -
""",
)
MOCHA = (
    """

  refresh
    ✔ keeps a valid token
    1) returns a new token


  1 passing (12ms)
  1 failing

  1) refresh
       returns a new token:

      AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

'"t"' !== '"t2"'

      at Context.<anonymous> (test/auth.spec.js:11:12)

""",
    """

  refresh
    ✔ keeps a valid token
    ✔ returns a new token


  2 passing (9ms)

""",
)
AVA = (
    "  ✔ keeps a valid token\n  ✘ returns a new token\n\n  1 test failed\n\n"
    "  returns a new token\n\n  test/auth.js:11\n\n   10:   const t = refresh('t');\n",
    "  ✔ keeps a valid token\n  ✔ returns a new token\n  ─\n\n  2 tests passed\n",
)
BUN = (
    """bun test v1.1.30 (7996d06b)

src/auth.test.ts:
✓ refresh > keeps a valid token [0.12ms]
error: expect(received).toBe(expected)

Expected: "t2"
Received: "t"

      at <anonymous> (/home/u/app/src/auth.test.ts:11:26)
✗ refresh > returns a new token [0.40ms]

 1 pass
 1 fail
 2 expect() calls
Ran 2 tests across 1 files. [12.00ms]
""",
    """bun test v1.1.30 (7996d06b)

src/auth.test.ts:
✓ refresh > keeps a valid token [0.12ms]
✓ refresh > returns a new token [0.08ms]

 2 pass
 0 fail
 2 expect() calls
Ran 2 tests across 1 files. [11.00ms]
""",
)
DENO = (
    """running 2 tests from ./auth_test.ts
keeps a valid token ... ok (1ms)
returns a new token ... FAILED (2ms)

 ERRORS

returns a new token => ./auth_test.ts:8:6
error: AssertionError: Values are not equal.

 FAILURES

returns a new token => ./auth_test.ts:8:6

FAILED | 1 passed | 1 failed (15ms)

error: Test failed
""",
    """running 2 tests from ./auth_test.ts
keeps a valid token ... ok (1ms)
returns a new token ... ok (1ms)

ok | 2 passed | 0 failed (12ms)

""",
)
GO = (
    """--- FAIL: TestRefresh (0.00s)
    auth_test.go:14: refresh("t") = "t", want "t2"
FAIL
FAIL\tgithub.com/acme/app/auth\t0.004s
ok  \tgithub.com/acme/app/util\t0.003s
FAIL
""",
    "ok  \tgithub.com/acme/app/auth\t0.004s\n?   \tgithub.com/acme/app/cmd\t[no test files]\n"
    "ok  \tgithub.com/acme/app/util\t(cached)\n",
)
CARGO = (
    """   Compiling app v0.1.0 (/home/u/app)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.61s
     Running unittests src/lib.rs (target/debug/deps/app-3f1c2a9d0e4b5c6a)

running 2 tests
test tests::keeps_token ... ok
test tests::refreshes_token ... FAILED

failures:

---- tests::refreshes_token stdout ----

thread 'tests::refreshes_token' panicked at src/lib.rs:14:9:
assertion `left == right` failed
  left: "t"
 right: "t2"
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::refreshes_token

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
""",
    """   Compiling app v0.1.0 (/home/u/app)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.58s
     Running unittests src/lib.rs (target/debug/deps/app-3f1c2a9d0e4b5c6a)

running 2 tests
test tests::keeps_token ... ok
test tests::refreshes_token ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

""",
)
RSPEC = (
    """..F

Failures:

  1) Auth refreshes the token
     Failure/Error: expect(auth.refresh("t")).to eq("t2")

       expected: "t2"
            got: "t"

       (compared using ==)
     # ./spec/auth_spec.rb:12:in `block (2 levels) in <top (required)>'

Finished in 0.01234 seconds (files took 0.0712 seconds to load)
3 examples, 1 failure

Failed examples:

rspec ./spec/auth_spec.rb:10 # Auth refreshes the token
""",
    "...\n\nFinished in 0.0101 seconds (files took 0.0698 seconds to load)\n3 examples, 0 failures\n",
)
MINITEST = (
    """Run options: --seed 4242

# Running:

.F

Failure:
AuthTest#test_refresh [test/models/auth_test.rb:12]:
Expected: "t2"
  Actual: "t"

bin/rails test test/models/auth_test.rb:10

Finished in 0.012345s, 162.0 runs/s, 162.0 assertions/s.
2 runs, 2 assertions, 1 failures, 0 errors, 0 skips
""",
    "Run options: --seed 4242\n\n# Running:\n\n..\n\nFinished in 0.010101s, 198.0 runs/s.\n"
    "2 runs, 2 assertions, 0 failures, 0 errors, 0 skips\n",
)
PHPUNIT = (
    """PHPUnit 10.5.20 by Sebastian Bergmann and contributors.

Runtime:       PHP 8.3.6
Configuration: /home/u/app/phpunit.xml

..F                                                                 3 / 3 (100%)

Time: 00:00.021, Memory: 8.00 MB

There was 1 failure:

1) Tests\\AuthTest::testRefresh
Failed asserting that two strings are identical.
--- Expected
+++ Actual
@@ @@
-'t2'
+'t'

/home/u/app/tests/AuthTest.php:14

FAILURES!
Tests: 3, Assertions: 3, Failures: 1.
""",
    """PHPUnit 10.5.20 by Sebastian Bergmann and contributors.

Runtime:       PHP 8.3.6

...                                                                 3 / 3 (100%)

Time: 00:00.018, Memory: 8.00 MB

OK (3 tests, 3 assertions)
""",
)
GRADLE = (
    """> Task :app:compileJava
> Task :app:test FAILED

AuthTest > refreshesToken() FAILED
    org.opentest4j.AssertionFailedError at AuthTest.java:14

3 tests completed, 1 failed

FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':app:test'.
> There were failing tests. See the report at: file:///home/u/app/app/build/reports/tests/test/index.html

BUILD FAILED in 3s
4 actionable tasks: 2 executed, 2 up-to-date
""",
    """> Task :app:compileJava UP-TO-DATE
> Task :app:test

BUILD SUCCESSFUL in 2s
4 actionable tasks: 1 executed, 3 up-to-date
""",
)
MAVEN = (
    """[INFO] -------------------------------------------------------
[INFO]  T E S T S
[INFO] -------------------------------------------------------
[INFO] Running com.acme.AuthTest
[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.05 s <<< FAILURE! -- in com.acme.AuthTest
[ERROR] com.acme.AuthTest.refreshesToken -- Time elapsed: 0.01 s <<< FAILURE!
org.opentest4j.AssertionFailedError: expected: <t2> but was: <t>
	at com.acme.AuthTest.refreshesToken(AuthTest.java:14)

[INFO]
[INFO] Results:
[INFO]
[ERROR] Failures:
[ERROR]   AuthTest.refreshesToken:14 expected: <t2> but was: <t>
[INFO]
[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 0
[INFO]
[INFO] BUILD FAILURE
""",
    """[INFO] Running com.acme.AuthTest
[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.04 s -- in com.acme.AuthTest
[INFO]
[INFO] Results:
[INFO]
[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0
[INFO]
[INFO] BUILD SUCCESS
""",
)
DOTNET = (
    """  Determining projects to restore...
  All projects are up-to-date for restore.
  App.Tests -> /home/u/app/App.Tests/bin/Debug/net8.0/App.Tests.dll
Test run for /home/u/app/App.Tests/bin/Debug/net8.0/App.Tests.dll (.NETCoreApp,Version=v8.0)
Microsoft (R) Test Execution Command Line Tool Version 17.8.0 (x64)
Copyright (c) Microsoft Corporation.  All rights reserved.

Starting test execution, please wait...
A total of 1 test files matched the specified pattern.
  Failed App.Tests.AuthTests.RefreshesToken [12 ms]
  Error Message:
   Assert.Equal() Failure: Strings differ
Expected: "t2"
Actual:   "t"
  Stack Trace:
     at App.Tests.AuthTests.RefreshesToken() in /home/u/app/App.Tests/AuthTests.cs:line 14

Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 20 ms - App.Tests.dll (net8.0)
""",
    """  Determining projects to restore...
  All projects are up-to-date for restore.
  App.Tests -> /home/u/app/App.Tests/bin/Debug/net8.0/App.Tests.dll
Test run for /home/u/app/App.Tests/bin/Debug/net8.0/App.Tests.dll (.NETCoreApp,Version=v8.0)
Starting test execution, please wait...
A total of 1 test files matched the specified pattern.

Passed!  - Failed:     0, Passed:     3, Skipped:     0, Total:     3, Duration: 15 ms - App.Tests.dll (net8.0)
""",
)
SWIFT = (
    "Test Suite 'All tests' started at 2026-12-06 10:00:00.000\n"
    "/home/u/app/Tests/AppTests/AuthTests.swift:14: error: -[AppTests.AuthTests testRefresh] : "
    'XCTAssertEqual failed: ("t") is not equal to ("t2")\n'
    "Test Suite 'All tests' failed at 2026-12-06 10:00:00.010.\n"
    "\t Executed 3 tests, with 1 failure (0 unexpected) in 0.009 (0.010) seconds\n",
    "Test Suite 'All tests' started at 2026-12-06 10:00:00.000\n"
    "Test Suite 'All tests' passed at 2026-12-06 10:00:00.008.\n"
    "\t Executed 3 tests, with 0 failures (0 unexpected) in 0.007 (0.008) seconds\n",
)
MIX = (
    """..

  1) test refresh returns a new token (App.AuthTest)
     test/app/auth_test.exs:10
     Assertion with == failed
     code:  assert Auth.refresh("t") == "t2"
     left:  "t"
     right: "t2"
     stacktrace:
       test/app/auth_test.exs:11: (test)


Finished in 0.04 seconds (0.02s async, 0.02s sync)
3 tests, 1 failure
""",
    "...\nFinished in 0.03 seconds (0.01s async, 0.02s sync)\n3 tests, 0 failures\n",
)
CTEST = (
    """Test project /home/u/app/build
    Start 1: auth
1/2 Test #1: auth .............................***Failed    0.01 sec
    Start 2: util
2/2 Test #2: util .............................   Passed    0.00 sec

50% tests passed, 1 tests failed out of 2

Total Test time (real) =   0.02 sec

The following tests FAILED:
\t  1 - auth (Failed)
""",
    """Test project /home/u/app/build
    Start 1: auth
1/2 Test #1: auth .............................   Passed    0.01 sec
    Start 2: util
2/2 Test #2: util .............................   Passed    0.00 sec

100% tests passed, 0 tests failed out of 2

Total Test time (real) =   0.02 sec
""",
)

#: runner -> (commands that run it, its failing output, its passing output)
CASES: dict[str, tuple[list[str], tuple[str, str]]] = {
    "pytest": (["uv run pytest -q", "poetry run python -m pytest tests/"], PYTEST),
    "unittest": (["python -m unittest discover -s tests"], UNITTEST),
    "jest": (["npx jest", "yarn jest --ci"], JEST),
    "vitest": (["pnpm vitest run", "bunx vitest run"], VITEST),
    "playwright": (["npx playwright test", "pnpm exec playwright test --retries=0"], PLAYWRIGHT),
    "cypress": (["npx cypress run"], CYPRESS),
    "mocha": (["npx mocha test/"], MOCHA),
    "ava": (["npx ava"], AVA),
    "bun test": (["bun test"], BUN),
    "deno test": (["deno test --allow-read"], DENO),
    "go test": (["go test ./..."], GO),
    "cargo test": (["cargo test", "cargo +nightly test --lib"], CARGO),
    "rspec": (["bundle exec rspec"], RSPEC),
    "minitest": (["bin/rails test"], MINITEST),
    "phpunit": (["vendor/bin/phpunit"], PHPUNIT),
    "gradle": (["./gradlew test", "./gradlew :app:test --tests AuthTest"], GRADLE),
    "maven": (["mvn -q test", "./mvnw verify"], MAVEN),
    "dotnet test": (["dotnet test"], DOTNET),
    "swift test": (["swift test"], SWIFT),
    "mix test": (["mix test"], MIX),
    "ctest": (["ctest --test-dir build"], CTEST),
}
RUNS = [(name, command) for name, (commands, _out) in CASES.items() for command in commands]


def test_every_runner_of_the_table_has_realistic_outputs_here() -> None:
    with_summary = {r.name for r in testruns.RUNNERS if r.failed}
    assert with_summary <= set(CASES), with_summary - set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_runner_summary_is_its_own(name: str) -> None:
    """The failing output matches its row's failure summary, the passing one its pass summary and
    no failure summary of any row."""
    failing, passing = CASES[name][1]
    (row,) = [r for r in testruns.RUNNERS if r.name == name]
    assert re.search(row.failed, failing, re.MULTILINE)
    assert any(re.search(p, passing, re.MULTILINE) for p in (row.passed, row.finished) if p)
    assert not testruns.SUMMARY_FAILED.search(passing)


@pytest.mark.parametrize(("name", "command"), RUNS)
def test_a_failing_run_of_each_runner_is_a_failure_stub(
    name: str, command: str, project_dir: Path
) -> None:
    seed(project_dir, [])
    post(project_dir, command, CASES[name][1][0], failed=True)
    rows = query("SELECT type, title, body FROM records")
    assert [(r[0], r[1]) for r in rows] == [("bugfix", f"Test failure: {command}")], rows


@pytest.mark.parametrize(("name", "command"), RUNS)
def test_a_passing_run_of_each_runner_is_a_pass(name: str, command: str, project_dir: Path) -> None:
    seed(project_dir, [])
    post(project_dir, command, CASES[name][1][1])
    assert query("SELECT type, title FROM records") == [("discovery", f"Tests passed: {command}")]


def test_a_failing_playwright_run_names_the_spec_and_its_summary(project_dir: Path) -> None:
    """The issue's own case: ``npx playwright test`` failing, exit 1 (PostToolUseFailure)."""
    seed(project_dir, [])
    post(project_dir, "npx playwright test", PLAYWRIGHT[0], failed=True)
    ((record_id, body),) = query("SELECT id, body FROM records WHERE type = 'bugfix'")
    assert "Failing: tests/login.spec.ts." in body
    assert "  1 failed" in body
    files = query(
        "SELECT n.name FROM record_entities re JOIN nodes n ON n.id = re.entity_id "
        "WHERE re.record_id = ?",
        (record_id,),
    )
    assert files == [("tests/login.spec.ts",)]


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("make e2e", PLAYWRIGHT[0]),
        ("npm run ci", JEST[0]),
        ("just check", CARGO[0]),
        ("./scripts/run-tests.sh", GO[0]),
        ("FOO=1 timeout 600 make integration", DOTNET[0]),
    ],
)
def test_a_script_or_task_runner_is_read_from_the_runner_summary_it_prints(
    command: str, output: str, project_dir: Path
) -> None:
    """A command that names no runner is a test run when its output carries a runner's summary."""
    seed(project_dir, [])
    post(project_dir, command, output, failed=True)
    assert query("SELECT type, title FROM records") == [("bugfix", f"Test failure: {command}")]


@pytest.mark.parametrize(
    ("command", "output"),
    [("make e2e", PLAYWRIGHT[1]), ("npm run ci", VITEST[1]), ("just test", RSPEC[1])],
)
def test_a_green_script_run_is_a_pass(command: str, output: str, project_dir: Path) -> None:
    seed(project_dir, [])
    post(project_dir, command, output)
    assert query("SELECT type, title FROM records") == [("discovery", f"Tests passed: {command}")]


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("cat test-results.txt", PLAYWRIGHT[0]),
        ("tail -50 ci.log", JEST[0]),
        ("grep -A3 FAIL build.log", GO[0]),
        ("git log -1", "commit abc\n\n    3 examples, 1 failure fixed\n"),
        ("make build", "> Task :app:compileJava\n\nBUILD SUCCESSFUL in 2s\n"),
        ("make deploy", "deploying...\nOK\n"),
    ],
)
def test_shown_text_and_other_builds_are_not_test_runs(
    command: str, output: str, project_dir: Path
) -> None:
    seed(project_dir, [])
    post(project_dir, command, output)
    assert query("SELECT count(*) FROM records")[0][0] == 0


def test_secrets_in_a_runner_command_and_output_stay_redacted(project_dir: Path) -> None:
    seed(project_dir, [])
    secret = "sk-ant-api03-" + "Zq9Xw8Vu" * 6
    first = "✘  1 [chromium] › tests/login.spec.ts:8:5 › login ›"
    output = PLAYWRIGHT[0].replace(first, f"✘  1 [chromium] › tests/login.spec.ts:8:5 › {secret} ›")
    post(project_dir, f"ANTHROPIC_API_KEY={secret} npx playwright test", output, failed=True)
    rows = query("SELECT title, body FROM records")
    assert len(rows) == 1 and rows[0][0].startswith("Test failure: ")
    assert secret not in rows[0][0] + rows[0][1]
    assert "playwright test" in rows[0][0]
    assert "✘  1 [chromium] › tests/login.spec.ts:8:5 › " in rows[0][1]  # the line, redacted
