"""``install.sh`` (the README's install command) stops with the exact command to run where it
cannot install a missing piece itself: a Python older than 3.11, a Python without ``venv``.

The Python here is a stand-in script that answers the version check or ``-m venv`` as such a
Python would and runs the real interpreter for everything else; uv and pipx are kept off PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fake_python(tmp_path: Path, refuse: str) -> Path:
    """A ``python3`` that fails (exit 1) when its arguments start with ``refuse``."""
    script = tmp_path / "bin" / "python3"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in "{refuse}"*) echo "refused: $*" >&2; exit 1;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    script.chmod(0o755)
    return script


def run_script(tmp_path: Path, python: Path) -> subprocess.CompletedProcess[str]:
    tools = [f for f in os.environ.get("PATH", "").split(os.pathsep) if f]
    kept = [f for f in tools if not (shutil.which("uv", path=f) or shutil.which("pipx", path=f))]
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("UV", "XDG_DATA_HOME")}
    env |= {"HOME": str(home), "PATH": os.pathsep.join([str(python.parent), *kept])}
    return subprocess.run(
        ["sh", str(ROOT / "install.sh")], env=env, capture_output=True, text=True, timeout=60
    )


def test_an_old_python_stops_with_how_to_choose_another(tmp_path: Path) -> None:
    result = run_script(tmp_path, fake_python(tmp_path, "-c import sys"))
    assert result.returncode == 1
    assert "Python 3.11 or newer is needed" in result.stderr
    assert "PYTHON=<python3.11+>" in result.stderr
    assert not (tmp_path / "home" / ".agentctx").exists()


def test_a_python_without_venv_stops_with_the_apt_command(tmp_path: Path) -> None:
    result = run_script(tmp_path, fake_python(tmp_path, "-m venv"))
    assert result.returncode == 1
    assert "sudo apt-get install python3-venv" in result.stderr, result.stderr
    assert not (tmp_path / "home" / ".local/share/agentctx-cc/uv").exists()
    assert not (tmp_path / "home" / ".agentctx").exists()
