"""Every install or upgrade advice names commands that work: a tool install from a clone or a wheel
(the PyPI name ``agentctx-cc`` is not published, so no message offers it as if it were)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from agentctx.core.errors import INSTALL_ADVICE, UPGRADE_ADVICE
from tests.helpers import run_cli

if TYPE_CHECKING:
    from pathlib import Path


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
    agentctx_home: Path, tmp_path: Path
) -> None:
    env = {"PATH": path_without_agentctx()}
    init = run_cli("init", "--no-mcp", cwd=tmp_path, env=env)
    assert init.returncode == 0, init.stderr
    assert "`agentctx` is not on PATH" in init.stderr
    assert INSTALL_ADVICE in init.stderr and "agentctx-cc" not in init.stderr
    doctor = run_cli("doctor", cwd=tmp_path, env=env)
    assert doctor.returncode == 1  # the hooks cannot run: a failed check
    assert "`agentctx` is not on PATH" in doctor.stdout
    assert "uv tool install <clone-or-wheel>" in doctor.stdout
    assert "agentctx-cc" not in doctor.stdout


def test_a_tool_launcher_off_path_is_told_the_line_that_puts_its_folder_on_path(
    agentctx_home: Path, tmp_path: Path
) -> None:
    """Run through its own ``agentctx`` command (as ``install.sh`` runs ``init``): the folder of
    that command, as a line for ``~/.profile``; no advice to install it again."""
    import subprocess
    import sys

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
