"""The package as a user gets it: a wheel and an sdist built from the tree, the wheel installed into a
fresh virtual environment, and ``agentctx demo`` run from it in a clean HOME and agentctx home.

uv builds the sdist and then the wheel from the unpacked sdist (so a file missing from the sdist
breaks the wheel) and installs into the fresh environment; the dependencies come from uv's cache
(the test session installed them already), the registry only for what is not there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def uv_binary() -> str:
    """uv: the one nox runs with (``UV``, set by the noxfile) or the one on PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        pytest.fail("uv is not on PATH: `python3 -m pip install uv` (nox[uv] brings it)")
    return found


def run(
    argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A command that must exit 0 (the test fails with its output otherwise)."""
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, (
        f"{argv}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result


def test_wheel_and_sdist_build_install_and_run_the_demo(tmp_path: Path) -> None:
    uv = uv_binary()
    dist = tmp_path / "dist"
    run([uv, "build", "--sdist", "--wheel", "--out-dir", str(dist), str(ROOT)])
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    assert [w.name for w in wheels] == ["agentctx_cc-0.1.0-py3-none-any.whl"]
    assert [s.name for s in sdists] == ["agentctx_cc-0.1.0.tar.gz"]

    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read("agentctx_cc-0.1.0.dist-info/METADATA").decode()
        entry_points = wheel.read("agentctx_cc-0.1.0.dist-info/entry_points.txt").decode()
    assert {
        "agentctx/py.typed",
        "agentctx/_entry.py",
        "agentctx/core/plan.py",
        "agentctx/embeddings/calibration.json",  # the calibration set calibrate() reads
    } <= names
    assert "agentctx_cc-0.1.0.dist-info/licenses/LICENSE" in names
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    assert "agentctx = agentctx._entry:main" in entry_points
    for line in (
        "Name: agentctx-cc",
        "Requires-Python: >=3.11",
        "License-Expression: MIT",
        "Description-Content-Type: text/markdown",
        "Project-URL: Repository, ",
    ):
        assert line in metadata, line
    with tarfile.open(sdists[0]) as sdist:
        members = {m.name.split("/", 1)[-1] for m in sdist.getmembers()}
    needed_files = ("pyproject.toml", "README.md", "LICENSE", "src/agentctx/_entry.py")
    plugin_files = (".claude-plugin/marketplace.json", "plugin/.claude-plugin/plugin.json")
    for needed in (*needed_files, *plugin_files):
        assert needed in members, needed

    venv = tmp_path / "venv"
    run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    run([uv, "pip", "install", "--quiet", "--python", str(python), str(wheels[0])])
    agentctx = venv / "bin" / "agentctx"
    assert agentctx.exists()

    home, agentctx_home, cwd = tmp_path / "home", tmp_path / "agentctx-home", tmp_path / "elsewhere"
    for folder in (home, cwd):
        folder.mkdir()
    env = {
        "PATH": os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "AGENTCTX_HOME": str(agentctx_home),
        "TMPDIR": str(tmp_path),
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",  # no model download: the demo needs no network
    }
    result = run([str(agentctx), "demo"], cwd=cwd, env=env)
    assert "LOCAL STAND-IN" in result.stdout
    assert "The next session starts" in result.stdout
    # the installed copy ran, not this tree's
    where = run([str(python), "-c", "import agentctx; print(agentctx.__file__)"], cwd=cwd, env=env)
    assert where.stdout.startswith(str(venv))
