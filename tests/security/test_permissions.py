"""Finding 4: other local accounts could read the store.

Every file under the agentctx home is 0600 and every folder 0700, whatever the umask; ``init``
tightens a home left loose and says so; ``doctor`` flags anything group- or world-accessible.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.helpers import payload

if TYPE_CHECKING:
    from pathlib import Path


def agentctx(
    *args: str, cwd: Path, umask: int, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The real entry point under a given umask (as a user's shell would start it)."""
    return subprocess.run(
        [sys.executable, "-m", "agentctx", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.umask(umask),
    )


def modes(root: Path) -> dict[str, int]:
    found = {str(root): stat.S_IMODE(root.lstat().st_mode)}
    for folder, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            path = os.path.join(folder, name)
            found[path] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_everything_the_home_holds_is_owner_only(
    agentctx_home: Path, project_dir: Path, umask: int
) -> None:
    assert agentctx("init", "--no-mcp", cwd=project_dir, umask=umask).returncode == 0
    added = agentctx(
        "record", "--type", "decision", "--title", "Queue", "--body", "Use Kafka.",
        cwd=project_dir, umask=umask,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert (
        agentctx("config", "set", "team_export", "on", cwd=project_dir, umask=umask).returncode == 0
    )
    data = json.dumps(payload("SessionStart", "s-1", project_dir, source="startup")).encode()
    agentctx("hook", "session-start", cwd=project_dir, umask=umask, stdin=data)
    data = json.dumps(
        payload("UserPromptSubmit", "s-1", project_dir, prompt="Kafka queue")
    ).encode()
    agentctx("hook", "user-prompt-submit", cwd=project_dir, umask=umask, stdin=data)

    found = modes(agentctx_home)
    names = {os.path.basename(p) for p in found}
    assert {"agentctx.db", "config.json"} <= names
    assert any(name.endswith("-wal") for name in names), names  # the store is open in WAL mode
    loose = {
        path: oct(mode)
        for path, mode in found.items()
        if mode != (0o700 if os.path.isdir(path) else 0o600)
    }
    assert loose == {}


def test_init_tightens_a_loose_home_and_doctor_flags_it(
    agentctx_home: Path, project_dir: Path
) -> None:
    assert agentctx("init", "--no-mcp", cwd=project_dir, umask=0o022).returncode == 0
    db = agentctx_home / "agentctx.db"
    os.chmod(agentctx_home, 0o755)
    os.chmod(db, 0o644)
    os.chmod(agentctx_home / "logs", 0o755)

    doctor = agentctx("doctor", "--json", cwd=project_dir, umask=0o022)
    assert doctor.returncode != 0  # a failed check
    home_check = [c for c in json.loads(doctor.stdout) if c["name"] == "home"]
    assert home_check[0]["ok"] is False
    assert "other accounts" in home_check[0]["detail"]
    assert str(db) in home_check[0]["detail"]

    again = agentctx("init", "--no-mcp", cwd=project_dir, umask=0o022)
    assert again.returncode == 0, again.stderr
    assert b"tightened " in again.stdout  # the home, logs, the db (and its -wal, -shm if open)
    assert stat.S_IMODE(agentctx_home.stat().st_mode) == 0o700
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert {m for p, m in modes(agentctx_home).items()} <= {0o600, 0o700}
    doctor = agentctx("doctor", "--json", cwd=project_dir, umask=0o022)
    home_check = [c for c in json.loads(doctor.stdout) if c["name"] == "home"]
    assert home_check and home_check[0]["ok"] is True, home_check


def test_a_hook_before_init_leaves_an_owner_only_home(
    agentctx_home: Path, project_dir: Path
) -> None:
    # a failed command is spooled (no database yet), and the hook logs why
    data = payload(
        "PostToolUse", "s-1", project_dir, tool_name="Bash",
        tool_input={"command": "make test"},
        tool_response={"stdout": "", "stderr": "error: 3 failed", "exit_code": 2},
    )  # fmt: skip
    agentctx("hook", "post-tool-use", cwd=project_dir, umask=0o000, stdin=json.dumps(data).encode())
    agentctx("hook", "session-start", cwd=project_dir, umask=0o000, stdin=b"not json")
    assert (agentctx_home / "logs" / "hooks.log").is_file()
    assert {oct(m) for p, m in modes(agentctx_home).items() if os.path.isdir(p)} == {"0o700"}
    assert {oct(m) for p, m in modes(agentctx_home).items() if os.path.isfile(p)} <= {"0o600"}
