"""Every install or upgrade advice names commands that work: a tool install from a clone or a wheel
(the PyPI name ``agentctx-cc`` is not published, so no message offers it as if it were)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agentctx.core.errors import INSTALL_ADVICE, UPGRADE_ADVICE
from tests.helpers import run_cli

if TYPE_CHECKING:
    import pytest


def path_without_agentctx() -> str:
    """PATH with every folder that holds an ``agentctx`` left out."""
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    kept = [f for f in folders if f and shutil.which("agentctx", path=f) is None]
    return os.pathsep.join(kept)


def test_the_advice_names_working_sources() -> None:
    for advice in (INSTALL_ADVICE, UPGRADE_ADVICE):
        assert "uv tool install" in advice and "pipx install" in advice
        assert "clone" in advice and "wheel" in advice
        assert "agentctx-cc" not in advice and "pip install -U" not in advice


def test_init_and_doctor_off_path_advise_a_tool_install(
    agentctx_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``python -m agentctx`` from an interpreter with no ``agentctx`` command beside it (run from
    a source tree, say): no command to register but ``agentctx``, so the warning and the advice
    to install it as a tool. In-process, since the interpreter of the tests has one beside it."""
    from agentctx import cli

    bare = tmp_path / "bare-python" / "bin"
    bare.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bare / "python3"))
    monkeypatch.setattr(sys, "argv", [str(Path(cli.__file__).parent.parent / "__main__.py")])
    monkeypatch.setenv("PATH", path_without_agentctx())
    monkeypatch.chdir(tmp_path)
    assert cli.run(["init", "--no-mcp"]) == 0
    init = capsys.readouterr()
    assert "`agentctx` is not on PATH" in init.err
    assert INSTALL_ADVICE in init.err and "agentctx-cc" not in init.err
    settings = json.loads((Path.home() / ".claude" / "settings.json").read_text())
    commands = {h["command"] for g in settings["hooks"].values() for x in g for h in x["hooks"]}
    assert {c.partition(" hook ")[0] for c in commands} == {"agentctx"}
    assert cli.run(["doctor"]) == 1  # the hooks cannot run: a failed check
    doctor = capsys.readouterr()
    assert "`agentctx` is not on PATH" in doctor.out
    assert "uv tool install <clone-or-wheel>" in doctor.out
    assert "agentctx-cc" not in doctor.out


def test_python_m_init_off_path_registers_the_command_beside_its_interpreter(
    agentctx_home: Path, tmp_path: Path
) -> None:
    """``python -m agentctx init`` (issue 27): when PATH finds no ``agentctx``, the user's files
    name the ``agentctx`` command its installation made beside the interpreter, by its full path,
    as the console script does (ADR-016), and the hooks run from a shell without it on PATH."""
    script = os.path.realpath(os.path.join(os.path.dirname(sys.executable), "agentctx"))
    assert os.path.isfile(script), "the console script of this environment"
    env = {"PATH": path_without_agentctx()}
    init = run_cli("init", cwd=tmp_path, env=env)
    assert init.returncode == 0, init.stderr
    assert f"command   {shlex.quote(script)} (no `agentctx` on PATH)" in init.stdout
    assert f'`export PATH="{os.path.dirname(sys.executable)}:$PATH"`' in init.stdout
    assert "not on PATH, but" not in init.stderr and INSTALL_ADVICE not in init.stdout
    home = Path(os.environ["HOME"])
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    commands = [h["command"] for g in settings["hooks"].values() for x in g for h in x["hooks"]]
    assert commands and all(c.startswith(f"{shlex.quote(script)} hook ") for c in commands)
    mcp = json.loads((home / ".claude.json").read_text())["mcpServers"]["agentctx"]
    assert mcp["command"] == script and mcp["args"] == ["mcp"]
    # the registered command runs where PATH has no agentctx, as Claude Code runs it
    start = next(c for c in commands if c.endswith(" hook session-start"))
    ran = subprocess.run(
        start,
        shell=True,
        input=json.dumps({"session_id": "s", "cwd": str(tmp_path), "source": "startup"}),
        env={**os.environ, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0 and "not found" not in ran.stderr, ran.stderr
    doctor = run_cli("doctor", cwd=tmp_path, env=env)
    assert "`agentctx` is not on PATH; the hooks run it by its full path" in doctor.stdout
    assert f"the hooks run {script}" in doctor.stdout


def test_a_tool_launcher_off_path_is_told_the_line_that_puts_its_folder_on_path(
    agentctx_home: Path, tmp_path: Path
) -> None:
    """Run through its own ``agentctx`` command (as ``install.sh`` runs ``init``): the folder of
    that command, as a line for ``~/.profile``; no advice to install it again."""
    launcher = os.path.join(os.path.dirname(sys.executable), "agentctx")
    assert os.path.isfile(launcher), "the console script of this environment"
    env = {**os.environ, "PATH": path_without_agentctx()}
    init = subprocess.run(
        [launcher, "init", "--no-mcp"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    folder = os.path.dirname(launcher)
    # the hooks run it by its full path (issue 27): the advice is for the user's shell, on stdout
    assert f'`export PATH="{folder}:$PATH"` in ~/.profile' in init.stdout
    assert "uv tool install" not in init.stdout + init.stderr
