"""Hooks that run when ``agentctx`` is not on PATH (issue 27, item 4).

``init`` run through its console script registers ``agentctx`` when PATH finds that same script,
else the script's absolute path, in the user's own files only; a project's shared files always
name ``agentctx``. Re-running ``init`` after PATH changes rewrites the entries, ``uninstall`` finds
both forms, ``doctor`` says what the hooks run and whether it exists. Every command runs the real
console script (``<venv>/bin/agentctx``) in a subprocess with a PATH the test chooses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentctx.claude.install.hooks import our_name, program_of

SCRIPT = Path(sys.executable).parent / "agentctx"
REAL = os.path.realpath(SCRIPT)
#: A PATH with the system's tools (git, sh) and no agentctx.
BARE_PATH = os.pathsep.join(
    p for p in ("/usr/local/bin", "/usr/bin", "/bin") if not (Path(p) / "agentctx").exists()
)

pytestmark = pytest.mark.skipif(
    not SCRIPT.is_file() or sys.platform == "win32", reason="needs the venv's console script"
)


def run(
    script: Path | str, *args: str, cwd: Path, path: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [str(script), *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def user_files() -> tuple[Path, Path]:
    home = Path(os.environ["HOME"])
    return home / ".claude" / "settings.json", home / ".claude.json"


def commands(settings: Path) -> set[str]:
    data: dict[str, Any] = json.loads(settings.read_text())
    return {h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]}


def mcp_command(path: Path) -> str:
    return str(json.loads(path.read_text())["mcpServers"]["agentctx"]["command"])


def doctor(cwd: Path, path: str) -> dict[str, dict[str, Any]]:
    done = run(SCRIPT, "doctor", "--json", cwd=cwd, path=path)
    return {c["name"]: c for c in json.loads(done.stdout)}


def test_off_path_the_full_path_is_registered_and_follows_path_changes(tmp_path: Path) -> None:
    settings, mcp = user_files()
    done = run(SCRIPT, "init", "--no-profile", cwd=tmp_path, path=BARE_PATH)
    assert done.returncode == 0, done.stderr
    assert commands(settings) == {f"{REAL} hook {n}" for n in _names()}
    assert mcp_command(mcp) == REAL
    assert (
        f"command   {REAL} (no `agentctx` on PATH): the hooks and the MCP server run it by its "
        "full path; `agentctx init` again after a change of PATH; to type `agentctx` in a "
        f'shell, add {SCRIPT.parent} to PATH (`export PATH="{SCRIPT.parent}:$PATH"` in '
        "~/.profile, then a new shell)"
    ) in done.stdout.splitlines()
    assert "not on PATH, but Claude Code runs" not in done.stderr  # no false alarm
    found = doctor(tmp_path, BARE_PATH)
    assert (found["command"]["ok"], found["command"]["detail"]) == (True, f"the hooks run {REAL}")
    assert found["on PATH"]["ok"] is None  # a shell cannot type it, the hooks still run
    assert found["hooks"]["ok"] is True and found["mcp"]["ok"] is True

    # a hook registered so runs, through a shell as Claude Code runs it
    event = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "Stop"})
    (stop,) = [c for c in commands(settings) if c.endswith(" hook stop")]
    hook = subprocess.run(
        ["sh", "-c", stop], input=event, capture_output=True, text=True, env={"PATH": BARE_PATH,
        "HOME": os.environ["HOME"], "AGENTCTX_HOME": os.environ["AGENTCTX_HOME"]}, check=False,
        timeout=60,
    )  # fmt: skip
    assert (hook.returncode, hook.stdout) == (0, "")

    # PATH now finds this agentctx (through a link): doctor says out of date, init puts it back
    linked = tmp_path / "bin"
    linked.mkdir()
    (linked / "agentctx").symlink_to(SCRIPT)
    on_path = os.pathsep.join([str(linked), BARE_PATH])
    assert doctor(tmp_path, on_path)["hooks"]["ok"] is None  # stale
    assert run(SCRIPT, "init", "--no-profile", cwd=tmp_path, path=on_path).returncode == 0
    assert commands(settings) == {f"agentctx hook {n}" for n in _names()}
    assert mcp_command(mcp) == "agentctx"
    found = doctor(tmp_path, on_path)
    assert found["command"]["detail"] == f"the hooks run agentctx (found at {linked / 'agentctx'})"
    assert found["hooks"]["ok"] is True

    # and back: PATH loses it, init registers the full path again; uninstall removes that form
    assert run(SCRIPT, "init", "--no-profile", cwd=tmp_path, path=BARE_PATH).returncode == 0
    assert commands(settings) == {f"{REAL} hook {n}" for n in _names()}
    done = run(SCRIPT, "uninstall", cwd=tmp_path, path=BARE_PATH)
    assert done.returncode == 0, done.stderr
    assert not settings.exists() and not mcp.exists()  # init created both: nothing else was there


def test_a_registered_path_that_is_gone_fails_in_doctor(tmp_path: Path) -> None:
    settings, _ = user_files()
    assert run(SCRIPT, "init", "--no-profile", cwd=tmp_path, path=BARE_PATH).returncode == 0
    text = settings.read_text().replace(REAL, str(tmp_path / "gone" / "agentctx"))
    settings.write_text(text)
    found = doctor(tmp_path, BARE_PATH)
    assert found["command"]["ok"] is False
    assert found["command"]["detail"] == (
        f"the hooks run {tmp_path / 'gone' / 'agentctx'}, which does not exist: every hook fails"
    )


def test_a_path_with_a_space_is_quoted_and_still_ours(tmp_path: Path) -> None:
    folder = tmp_path / "my tools"
    folder.mkdir()
    script = folder / "agentctx"
    shutil.copy2(SCRIPT, script)  # a console script: its shebang names the venv's python
    settings, mcp = user_files()
    assert run(script, "init", "--no-profile", cwd=tmp_path, path=BARE_PATH).returncode == 0
    assert commands(settings) == {f"'{script}' hook {n}" for n in _names()}
    assert mcp_command(mcp) == str(script)  # exec'd with args, not through a shell: unquoted
    event = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "Stop"})
    hook = subprocess.run(
        ["sh", "-c", f"'{script}' hook stop"], input=event, capture_output=True, text=True,
        env={"PATH": BARE_PATH, "HOME": os.environ["HOME"],
             "AGENTCTX_HOME": os.environ["AGENTCTX_HOME"]}, check=False, timeout=60,
    )  # fmt: skip
    assert (hook.returncode, hook.stdout) == (0, "")
    assert run(script, "uninstall", cwd=tmp_path, path=BARE_PATH).returncode == 0
    assert not settings.exists()


def test_a_projects_shared_files_never_hold_this_machines_path(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    done = run(SCRIPT, "init", "--project", "--no-profile", cwd=project, path=BARE_PATH)
    assert done.returncode == 0, done.stderr
    assert commands(project / ".claude" / "settings.json") == {
        f"agentctx hook {n}" for n in _names()
    }
    assert mcp_command(project / ".mcp.json") == "agentctx"
    assert "a project's files are shared, so they never hold this machine's path" in done.stderr
    found = doctor(project, BARE_PATH)
    assert found["command"]["ok"] is False  # the shared files name agentctx, not on PATH here
    assert found["command"]["detail"] == (
        "the hooks run agentctx, which is not on PATH: every hook fails"
    )


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("agentctx hook stop", "agentctx"),
        ("/home/u/.local/bin/agentctx hook stop", "/home/u/.local/bin/agentctx"),
        ("'/home/u/my tools/agentctx' hook stop", "/home/u/my tools/agentctx"),
        ("/home/u/my tools/agentctx hook stop", "/home/u/my tools/agentctx"),
        ("'/home/u/agentctx-not' hook stop", None),
        ("'/x/agentctx' extra hook stop", None),
        ("echo x; agentctx hook stop", None),
    ],
)
def test_which_commands_are_ours_and_what_they_run(command: str, program: str | None) -> None:
    handler = {"type": "command", "command": command}
    assert program_of(handler) == program
    assert (our_name(handler) is not None) == (program is not None)


def _names() -> set[str]:
    from agentctx.claude.install.hooks import HOOK_EVENTS

    return {reg.name for reg in HOOK_EVENTS.values()}
