"""CI runs what the README says: ``.ci/run`` runs the README's test command, which names every
session tagged ``ci`` in the noxfile."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_command(heading: str) -> str:
    """The first ``sh`` block under ``heading`` in the README."""
    section = ROOT.joinpath("README.md").read_text().split(f"## {heading}\n", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block is not None, f"no sh block in README's {heading!r} section"
    return block.group(1).strip()


def readme_test_command() -> str:
    return readme_command("Run the tests")


def ci_sessions() -> list[str]:
    """The noxfile's sessions tagged ``ci``, read from its syntax tree."""
    found = []
    for node in ast.parse(ROOT.joinpath("noxfile.py").read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            tags = [k.value for k in getattr(deco, "keywords", []) if k.arg == "tags"]
            if tags and "ci" in ast.literal_eval(tags[0]):
                found.append(node.name)
    return found


def test_ci_runs_the_readmes_command_verbatim() -> None:
    command = readme_test_command()
    assert command.startswith("python3 -m venv ") and command.endswith("nox -t ci")
    lines = ROOT.joinpath(".ci", "run").read_text().splitlines()
    assert lines[-1] == command  # the last thing CI does, so its exit status is CI's


def test_the_readme_names_every_ci_session() -> None:
    sessions = ci_sessions()
    assert {"lint", "typecheck", "tests", "slow", "browser", "e2e", "eval"} <= set(sessions)
    section = ROOT.joinpath("README.md").read_text().split("## Run the tests\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    for name in sessions:
        assert f"`{name}`" in section, name


# -- the README's two commands in a clean clone and a clean HOME ---------------------------------


def clean_clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh clone of this repository's HEAD and an environment with a new, empty HOME."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    home = tmp_path / "home"
    home.mkdir()
    dropped = (
        "AGENTCTX_HOME",
        "CLAUDE_CONFIG_DIR",
        "VIRTUAL_ENV",
        "UV_TOOL_DIR",
        "UV_TOOL_BIN_DIR",
    )
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env |= {"HOME": str(home), "XDG_DATA_HOME": str(home / ".local/share")}
    # rustup's shims (pip runs `rustc --version` for its user agent) keep their state where the
    # machine has it, not in the new HOME
    real_home = Path.home()
    env.setdefault("RUSTUP_HOME", str(real_home / ".rustup"))
    env.setdefault("CARGO_HOME", str(real_home / ".cargo"))
    env["XDG_BIN_HOME"] = str(home / ".local/bin")
    return clone, env


def path_without(*tools: str) -> str:
    """PATH without the folders holding any of ``tools`` (``python3`` must stay reachable)."""
    kept = [
        folder
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not any(shutil.which(tool, path=folder) for tool in tools)
    ]
    path = os.pathsep.join(kept)
    assert shutil.which("python3", path=path), f"no python3 outside the folders of {tools}"
    return path


def run_install(clone: Path, env: dict[str, str]) -> None:
    """The README's install command in ``clone``; then a store, the hooks and the MCP server
    registered in that HOME only, and ``agentctx`` linked into its ``~/.local/bin``."""
    command = readme_command("Install and start")
    assert command == "sh install.sh"
    result = subprocess.run(
        ["sh", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout + result.stderr
    home = Path(env["HOME"])
    assert (home / ".agentctx" / "agentctx.db").is_file()
    assert "agentctx hook session-start" in (home / ".claude" / "settings.json").read_text()
    assert '"agentctx"' in (home / ".claude.json").read_text()
    assert (home / ".local" / "bin" / "agentctx").exists()


@pytest.mark.slow
def test_the_readme_install_command_installs_and_starts_with_uv(tmp_path: Path) -> None:
    """With uv on PATH, ``uv tool install`` of the clean clone, then ``init``."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed here (nox's uv is passed as UV)"
    clone, env = clean_clone(tmp_path)
    env["PATH"] = f"{Path(uv).parent}{os.pathsep}{path_without('pipx')}"
    env.pop("UV", None)
    run_install(clone, env)
    assert not (Path(env["HOME"]) / ".local/share/agentctx-cc/uv").exists()
    # the uv cache the script chose is gone once the tool is installed (issue 27: install size)
    assert not (Path(env["HOME"]) / ".local/share/agentctx-cc").exists()


@pytest.mark.slow
def test_the_readme_install_command_needs_only_python(tmp_path: Path) -> None:
    """With neither uv nor pipx (a fresh Debian): uv goes into its own environment first."""
    clone, env = clean_clone(tmp_path)
    env["PATH"] = path_without("uv", "pipx", "agentctx")
    env.pop("UV", None)
    run_install(clone, env)
    data = Path(env["HOME"]) / ".local/share/agentctx-cc"
    assert (data / "uv/bin/uv").is_file()
    # uv is one binary: the pip and setuptools that installed it are removed, and so is the cache
    assert not list(data.glob("uv/lib/python*/site-packages/pip"))
    assert not (data / "cache").exists()
    uninstall(clone, env, cwd=clone)


def home_files(home: Path) -> list[str]:
    """Every file (not folder) under ``home``, relative, sorted."""
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if not p.is_dir())


def uninstall(clone: Path, env: dict[str, str], *, cwd: Path) -> str:
    """``sh install.sh --uninstall --yes`` from ``cwd``: no file the install made stays in HOME."""
    result = subprocess.run(
        ["sh", str(clone / "install.sh"), "--uninstall", "--yes"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert home_files(Path(env["HOME"])) == [], result.stdout + result.stderr
    assert "removed the tool" in result.stderr, result.stderr
    return result.stdout + result.stderr


@pytest.mark.slow
def test_install_project_registers_where_it_is_run_and_uninstall_takes_it_all_back(
    tmp_path: Path,
) -> None:
    """``sh <clone>/install.sh --project`` in a project registers in that project's files (not
    the clone's); ``--uninstall`` from there removes them, the home, the tool and the cache."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed here (nox's uv is passed as UV)"
    clone, env = clean_clone(tmp_path)
    env["PATH"] = f"{Path(uv).parent}{os.pathsep}{path_without('pipx', 'agentctx')}"
    env.pop("UV", None)
    shop = tmp_path / "shop"
    shop.mkdir()
    subprocess.run(["git", "init", "-q", str(shop)], check=True)
    result = subprocess.run(
        ["sh", str(clone / "install.sh"), "--project", "--no-llm", "--no-embeddings"],
        cwd=shop, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agentctx hook session-start" in (shop / ".claude" / "settings.json").read_text()
    assert '"agentctx"' in (shop / ".mcp.json").read_text()
    assert not (clone / ".claude").exists() and not (clone / ".mcp.json").exists()

    said = uninstall(clone, env, cwd=shop)
    assert sorted(p.name for p in shop.iterdir()) == [".git"], said
    assert "removed" in said and "deleted" in said, said


@pytest.mark.slow
def test_the_readme_test_command_bootstraps_nox(tmp_path: Path) -> None:
    """The test command up to nox, in a clean clone and HOME: nox installs into its own
    environment and reads the noxfile (``--list`` instead of running every session)."""
    clone, env = clean_clone(tmp_path)
    command = readme_test_command()
    assert command.endswith(" -t ci")
    result = subprocess.run(
        ["sh", "-c", command.removesuffix(" -t ci") + " --list"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ci_sessions():
        assert name in result.stdout, result.stdout
