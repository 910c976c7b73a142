"""PostToolUse capture of test outcomes both ways and of git operations, through the real hook.

Every event is run as Claude Code runs it (``agentctx hook post-tool-use``, a subprocess, a real
SQLite store). The git outputs are git's own: the commands run in a real repository and what they
print is what the hook is given. ``gh`` is not installed here: its output is the shape it prints
(the "Creating pull request" line on stderr, the URL on stdout).
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from typing import TYPE_CHECKING, Any

import pytest
import sqlean
from mcp import Client

from agentctx.core import home
from agentctx.mcp.server import create_server
from tests.helpers import payload, query, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

SID = "0c1d2e3f-4a5b-4c6d-8e7f-0123456789ab"
OTHER_SID = "9f8e7d6c-5b4a-4392-8170-fedcba987654"

PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_auth.py .F.                                                   [100%]

=================================== FAILURES ===================================
FAILED tests/test_auth.py::test_refresh_on_401 - AssertionError: assert 'old' == 'new'
========================= 1 failed, 2 passed in 0.05s ==========================
"""
PYTEST_PASS = """============================= test session starts ==============================
collected 3 items

tests/test_auth.py ...                                                   [100%]

============================== 3 passed in 0.04s ===============================
"""


def post(
    cwd: Path,
    command: str,
    stdout: str = "",
    stderr: str = "",
    *,
    failed: bool = False,
    session: str = SID,
) -> None:
    """One Bash call as Claude Code reports it: PostToolUse, or PostToolUseFailure on exit != 0."""
    extra: dict[str, Any] = (
        {"error": "Exit code 1\n" + stdout + stderr}
        if failed
        else {"tool_response": {"stdout": stdout, "stderr": stderr, "interrupted": False}}
    )
    event = "PostToolUseFailure" if failed else "PostToolUse"
    data = payload(
        event,
        session,
        cwd,
        tool_name="Bash",
        tool_input={"command": command, "description": "run"},
        tool_use_id=f"toolu_{uuid.uuid4().hex}",  # unique per call, as Claude Code's ids are
        **extra,
    )
    result = run_hook("post-tool-use", data, cwd=cwd)
    assert result.returncode == 0 and result.stdout == b""


def linked(record_id: str) -> list[tuple[str, str]]:
    return sorted(
        (r[0], r[1])
        for r in query(
            "SELECT n.kind, n.name FROM record_entities re JOIN nodes n ON n.id = re.entity_id "
            "WHERE re.record_id = ?",
            (record_id,),
        )
    )


# -- test outcomes ----------------------------------------------------------------------------------


def test_a_pass_after_a_failure_closes_the_stub_with_the_evidence(project_dir: Path) -> None:
    seed(project_dir, [])
    command = "pytest -q tests/test_auth.py"
    post(project_dir, command, PYTEST_FAIL, failed=True)
    (stub_id,) = [r[0] for r in query("SELECT id FROM records WHERE type = 'bugfix'")]
    post(project_dir, command, PYTEST_PASS, session=OTHER_SID)

    current = query(
        "SELECT id, title, body, session_id, confidence, source FROM records "
        "WHERE type = 'bugfix' AND superseded_at IS NULL"
    )
    assert len(current) == 1
    fixed_id, title, body, session, confidence, source = current[0]
    assert title == f"Test failure fixed: {command}"
    assert (session, confidence, source) == (OTHER_SID, "inferred", "hook_observation")
    # the failure is still there, and the evidence of the fix is added to it
    assert "FAILED tests/test_auth.py::test_refresh_on_401" in body
    assert f"Fixed: `{command}` passed at " in body and f"in session {OTHER_SID}" in body
    # the time to the minute, as a person reads it (not the stored microseconds)
    assert re.search(r"passed at \d{4}-\d\d-\d\d \d\d:\d\d UTC in session", body), body
    assert "3 passed in 0.04s" in body
    # bi-temporal: the open stub is superseded by the closed version, not edited
    old = query("SELECT superseded_by, superseded_at, title FROM records WHERE id = ?", (stub_id,))
    assert old[0][0] == fixed_id and old[0][1] is not None
    assert old[0][2] == f"Test failure: {command}"
    edges = query("SELECT from_id, to_id FROM edges WHERE rel_type = 'supersedes'")
    assert edges == [(fixed_id, stub_id)]
    assert linked(fixed_id) == [("file", "tests/test_auth.py")]
    # the green run itself is recorded too
    passes = query("SELECT title, body FROM records WHERE type = 'discovery'")
    assert [p[0] for p in passes] == [f"Tests passed: {command}"]
    assert "1 green run seen" in passes[0][1]
    assert re.search(r"the first at \d{4}-\d\d-\d\d \d\d:\d\d UTC, the latest at ", passes[0][1])

    # a new failure of the same command is a new stub (the closed one does not swallow it)
    post(project_dir, command, PYTEST_FAIL, failed=True)
    open_stubs = query(
        "SELECT title FROM records WHERE type = 'bugfix' AND superseded_at IS NULL ORDER BY title"
    )
    assert [r[0] for r in open_stubs] == [
        f"Test failure fixed: {command}",
        f"Test failure: {command}",
    ]


def test_a_pass_of_another_command_leaves_the_failure_open(project_dir: Path) -> None:
    seed(project_dir, [])
    post(project_dir, "pytest -q tests/test_auth.py", PYTEST_FAIL, failed=True)
    post(project_dir, "pytest -q tests/test_other.py", PYTEST_PASS)
    titles = query("SELECT title FROM records WHERE type = 'bugfix' AND superseded_at IS NULL")
    assert titles == [("Test failure: pytest -q tests/test_auth.py",)]


def test_fifty_green_runs_are_one_observation(project_dir: Path) -> None:
    seed(project_dir, [])
    for i in range(50):
        post(project_dir, "uv run pytest -q", PYTEST_PASS, session=SID if i < 25 else OTHER_SID)
    rows = query("SELECT title, body, reinforce_count, superseded_at, session_id FROM records")
    assert len(rows) == 1  # one row in all: no versions, no copies
    title, body, reinforce_count, superseded_at, session = rows[0]
    assert title == "Tests passed: uv run pytest -q" and superseded_at is None
    assert "50 green runs seen" in body and reinforce_count == 49
    assert f"(session {OTHER_SID})" in body and "Latest result: 3 passed in 0.04s" in body
    assert session == SID  # the record belongs to the session that first saw it green


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("cargo test", "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 0 ignored\n"),
        ("bundle exec rspec", "...\n\nFinished in 0.1 seconds\n5 examples, 0 failures\n"),
        ("go test ./...", "ok  \texample.com/app/auth\t0.012s\n"),
        ("npx jest", "PASS src/auth.test.ts\nTests:       4 passed, 4 total\n"),
        ("python -m unittest", "....\n------\nRan 4 tests in 0.001s\n\nOK\n"),
        ("cargo nextest run -p app", "     Summary [   0.3s] 4 tests run: 4 passed, 0 skipped\n"),
        (
            "pnpm --filter @atlas/ui exec vitest run",
            " Test Files  1 passed (1)\n      Tests  4 passed (4)\n",
        ),
        ("pnpm --filter web test", " Test Files  2 passed (2)\n      Tests  9 passed (9)\n"),
    ],
)
def test_green_runs_of_each_runner_are_passes_not_failures(
    command: str, output: str, project_dir: Path
) -> None:
    seed(project_dir, [])
    post(project_dir, command, output)
    assert query("SELECT type, title FROM records") == [("discovery", f"Tests passed: {command}")]


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("cat pytest.ini", "[pytest]\naddopts = -q\n# 3 passed in 0.01s\n"),
        ("pnpm --filter web build", "vite build\n3 passed checks\n"),
        ("grep -r 'passed' logs/pytest.log", "logs/pytest.log:=== 12 passed in 1.0s ===\n"),
        ("echo 'pytest -q'", "pytest -q\n3 passed\n"),
        ("pytest --collect-only -q", "tests/test_auth.py::test_a\n\n1 test collected in 0.01s\n"),
        ("pytest -q", ""),
        ("npx jest 2>&1 | head -3", "PASS src/a.test.ts\nPASS src/b.test.ts\n"),
        ("pytest -q | grep passed", "3 passed in 0.01s\n"),
    ],
)
def test_commands_that_only_look_like_a_green_run_record_nothing(
    command: str, output: str, project_dir: Path
) -> None:
    seed(project_dir, [])
    post(project_dir, command, output)
    assert query("SELECT count(*) FROM records")[0][0] == 0


# -- git --------------------------------------------------------------------------------------------


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, env=env, check=check
    )


def run_and_post(repo: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` for real and give the hook ``command`` with git's real output."""
    result = git(repo, *args, check=False)
    post(repo, command, result.stdout, result.stderr, failed=result.returncode != 0)
    return result


@pytest.fixture
def repo(project_dir: Path) -> Path:
    git(project_dir, "init", "-q", "-b", "main")
    (project_dir / "README.md").write_text("app\n")
    git(project_dir, "add", "README.md")
    git(project_dir, "commit", "-q", "-m", "Initial commit")
    seed(project_dir, [])
    return project_dir


def activity(branch: str) -> tuple[str, str, int]:
    rows = query(
        "SELECT id, body, reinforce_count FROM records WHERE title = ? AND superseded_at IS NULL",
        (f"Git activity on {branch}",),
    )
    assert len(rows) == 1, rows
    return rows[0][0], rows[0][1], rows[0][2]


def test_a_commit_is_captured_with_its_files_and_branch(repo: Path) -> None:
    (repo / "auth.py").write_text("def login(): ...\n")
    (repo / "README.md").write_text("app, with login\n")
    git(repo, "add", "auth.py", "README.md")
    message = "Fix login refresh\n\nThe token was cached."
    command = "git add auth.py README.md && git commit -m \"$(cat <<'EOF'\n" + message + '\nEOF\n)"'
    result = run_and_post(repo, command, "commit", "-m", message)
    sha = git(repo, "rev-parse", "--short", "HEAD").stdout.strip()
    assert f"[main {sha}] Fix login refresh" in result.stdout

    record_id, body, _ = activity("main")
    assert f'commit {sha} "Fix login refresh" (2 files changed' in body
    assert "The token was cached" not in body  # the subject only
    assert linked(record_id) == [("branch", "main"), ("file", "README.md"), ("file", "auth.py")]
    types = query("SELECT type, confidence, source FROM records")
    assert types == [("discovery", "inferred", "hook_observation")]
    branch_seen = query(
        "SELECT n.name FROM nodes n JOIN edges e ON e.from_id = n.id "
        "WHERE n.kind = 'branch' AND e.rel_type = 'observed_in' AND e.to_id = ?",
        (SID,),
    )
    assert branch_seen == [("main",)]


def test_a_commit_of_staged_work_links_the_files_the_session_edited(repo: Path) -> None:
    edited = repo / "src" / "api.py"
    edited.parent.mkdir()
    edited.write_text("x = 1\n")
    data = payload(
        "PostToolUse",
        SID,
        repo,
        tool_name="Write",
        tool_input={"file_path": str(edited), "content": "x = 1\n"},
        tool_response={"filePath": str(edited), "success": True},
    )
    assert run_hook("post-tool-use", data, cwd=repo).returncode == 0
    git(repo, "add", "-A")
    run_and_post(repo, "git commit -q -m 'Add the API'", "commit", "-m", "Add the API")
    record_id, _, _ = activity("main")
    assert ("file", "src/api.py") in linked(record_id)


def test_many_commits_fold_into_one_record_per_branch(repo: Path) -> None:
    for i in range(15):
        (repo / f"f{i}.py").write_text(f"x = {i}\n")
        git(repo, "add", f"f{i}.py")
        run_and_post(repo, f"git commit -m 'Step {i}'", "commit", "-m", f"Step {i}")
    rows = query("SELECT title FROM records")
    assert rows == [("Git activity on main",)]
    _, body, count = activity("main")
    assert count == 14 and "15 in all, the last 12 listed" in body
    items = [line for line in body.splitlines() if line.startswith("- ")]
    assert len(items) == 12 and '"Step 14"' in items[0] and '"Step 3"' in items[-1]
    assert len(body) <= 2000
    # the same commit reported twice (a re-run of the hook) is listed once
    sha = git(repo, "rev-parse", "--short", "HEAD").stdout.strip()
    post(repo, "git commit -m 'Step 14'", f"[main {sha}] Step 14\n 1 file changed\n")
    assert activity("main")[2] == 14


def test_merge_rebase_and_conflicts_are_captured(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "feature")
    (repo / "feature.py").write_text("y = 1\n")
    git(repo, "add", "feature.py")
    git(repo, "commit", "-q", "-m", "Feature work")
    git(repo, "switch", "-q", "main")
    (repo / "main.py").write_text("z = 1\n")
    git(repo, "add", "main.py")
    git(repo, "commit", "-q", "-m", "Main work")

    # a rebase of feature onto main
    git(repo, "switch", "-q", "feature")
    result = run_and_post(repo, "git rebase main", "rebase", "main")
    assert "Successfully rebased" in result.stdout + result.stderr
    _, body, _ = activity("feature")
    assert "rebase onto main" in body

    # a real merge (not fast-forward) into main: git's diffstat names the file
    git(repo, "switch", "-q", "main")
    result = run_and_post(
        repo,
        "git merge --no-ff -m 'Merge feature' feature",
        "merge",
        "--no-ff",
        "-m",
        "Merge",
        "feature",
    )
    assert "Merge made by" in result.stdout
    record_id, body, _ = activity("main")
    assert "merge of feature — files: feature.py" in body
    assert ("file", "feature.py") in linked(record_id)

    # a conflicting merge: a failure event; the conflicted file is linked
    git(repo, "switch", "-q", "-c", "other")
    (repo / "main.py").write_text("z = 2\n")
    git(repo, "commit", "-q", "-am", "Other change")
    git(repo, "switch", "-q", "main")
    (repo / "main.py").write_text("z = 3\n")
    git(repo, "commit", "-q", "-am", "Main change")
    result = run_and_post(repo, "git merge other", "merge", "other")
    assert result.returncode != 0 and "CONFLICT" in result.stdout
    record_id, body, _ = activity("main")
    assert "merge of other stopped on conflicts" in body.splitlines()[1]
    assert ("file", "main.py") in linked(record_id)


def test_gh_pr_create_is_captured_with_its_url(repo: Path) -> None:
    git(repo, "switch", "-q", "-c", "feat/login")
    (repo / "login.py").write_text("ok = True\n")
    git(repo, "add", "login.py")
    run_and_post(repo, "git commit -m 'Add login'", "commit", "-m", "Add login")
    command = (
        'gh pr create --title "Add login" --body "$(cat <<\'EOF\'\n## Summary\n- login\nEOF\n)"'
    )
    post(
        repo,
        command,
        "https://github.com/acme/app/pull/42\n",
        "\nCreating pull request for feat/login into main in acme/app\n\n",
    )
    (pr_id, body), *rest = query(
        "SELECT id, body FROM records WHERE title = 'PR opened: Add login'"
    )
    assert not rest
    assert "https://github.com/acme/app/pull/42" in body and "`feat/login`" in body
    assert re.search(r", at \d{4}-\d\d-\d\d \d\d:\d\d UTC\.\n", body), body  # to the minute
    assert linked(pr_id) == [("branch", "feat/login"), ("file", "login.py")]
    _, activity_body, _ = activity("feat/login")
    assert "PR opened: https://github.com/acme/app/pull/42" in activity_body
    assert "into main" in activity_body


@pytest.mark.parametrize(
    ("command", "stdout", "failed"),
    [
        ("git commit -m 'x'", "", False),  # no output at all
        ("git commit -m 'x'", "On branch main\nnothing to commit, working tree clean\n", True),
        ('echo "git commit -m x"', "[main abc1234] x\n 1 file changed\n", False),
        ("cat notes.txt", "[main abc1234] x\n 1 file changed\n", False),
        ("git log --oneline -3", "abc1234 Merge branch 'x'\ndef5678 Fast-forward\n", False),
        ("grep -rn 'git merge' .", "./a.sh:1:git merge x\nFast-forward\n", False),
        ("git merge feature", "Already up to date.\n", False),
        ("gh pr create --title x", "", True),
        ("gh pr list", "https://github.com/acme/app/pull/42\n", False),
        ("git commit -m 'x'", "[main abc1234] x\n" + "noise line\n" * 200_000, False),
    ],
    ids=[
        "no-output",
        "nothing-to-commit",
        "echo",
        "cat",
        "log",
        "grep",
        "up-to-date",
        "pr-failed",
        "pr-list",
        "commit-line-outside-the-tail",
    ],
)
def test_odd_or_similar_looking_git_input_records_nothing_wrong(
    command: str, stdout: str, failed: bool, repo: Path
) -> None:
    post(repo, command, stdout, failed=failed)
    assert query("SELECT title FROM records") == []


def test_huge_output_and_long_text_are_capped(repo: Path) -> None:
    subject = "Refactor " + "very " * 1000 + "long"
    noise = "building...\n" * 100_000
    post(repo, "git commit -m 'long'", noise + f"[main abc1234] {subject}\n 1 file changed\n")
    _, body, _ = activity("main")
    item = next(line for line in body.splitlines() if line.startswith("- "))
    assert 'commit abc1234 "Refactor very' in item and len(item) < 250
    post(repo, "pytest -q", noise + "=" * 30 + " 3 passed in 9.1s " + "=" * 30 + "\n")
    (body,) = query("SELECT body FROM records WHERE title = 'Tests passed: pytest -q'")[0]
    assert body.endswith("Latest result: 3 passed in 9.1s\n(Captured by the PostToolUse hook.)")


def test_a_locked_store_spools_the_new_kinds_and_the_next_hook_applies_them(repo: Path) -> None:
    holder = sqlean.connect(home.db_path(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        post(repo, "pytest -q tests/test_auth.py", PYTEST_FAIL, failed=True)
        post(repo, "pytest -q tests/test_auth.py", PYTEST_PASS)
        post(repo, "git commit -m 'Fix auth'", "[main 1a2b3c4] Fix auth\n 1 file changed\n")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [n for n in os.listdir(home.sub("spool")) if n.endswith(".json")]
    assert query("SELECT count(*) FROM records") == [(0,)]
    write = payload(
        "PostToolUse",
        SID,
        repo,
        tool_name="Write",
        tool_input={"file_path": str(repo / "x.py"), "content": ""},
    )
    assert run_hook("post-tool-use", write, cwd=repo).returncode == 0  # drains, oldest first
    assert not [n for n in os.listdir(home.sub("spool")) if n.endswith(".json")]
    rows = query("SELECT title, superseded_at IS NULL FROM records ORDER BY seq")
    assert rows == [
        ("Test failure: pytest -q tests/test_auth.py", 0),
        ("Test failure fixed: pytest -q tests/test_auth.py", 1),
        ("Tests passed: pytest -q tests/test_auth.py", 1),
        ("Git activity on main", 1),
    ]


@pytest.mark.anyio
async def test_ctx_related_on_a_committed_file_finds_the_commit_and_the_closed_failure(
    repo: Path,
) -> None:
    post(repo, "pytest -q tests/test_auth.py", PYTEST_FAIL, failed=True)
    post(repo, "pytest -q tests/test_auth.py", PYTEST_PASS)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_auth.py").write_text("def test_refresh_on_401(): ...\n")
    git(repo, "add", "tests/test_auth.py")
    command = "git add tests/test_auth.py && git commit -m 'Refresh the token on 401'"
    run_and_post(repo, command, "commit", "-m", "Refresh the token on 401")

    async with Client(create_server(str(repo)), raise_exceptions=True) as client:
        result = await client.call_tool("ctx_related", {"file": "tests/test_auth.py"})
    assert not result.is_error and result.structured_content is not None
    titles = {entry["title"] for entry in result.structured_content["results"]}
    assert {
        "Git activity on main",
        "Test failure fixed: pytest -q tests/test_auth.py",
    } <= titles
    assert "Test failure: pytest -q tests/test_auth.py" not in titles  # superseded: not current
