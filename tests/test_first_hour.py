"""What a new user meets in the first hour (issue 17): ``init`` names the project it profiles (and
profiles nothing outside a project or in agentctx's own clone), writes the config with its
defaults, ``config get`` says where each value comes from, ``consolidate`` speaks plainly, the
embedding model is named before it is fetched, and every CLI error is one line.

Every command runs in a real subprocess (``tests.helpers.run_cli``) against the test's own home.
"""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentctx.config import SETTINGS
from tests.helpers import run_cli

REPO_ROOT = Path(__file__).resolve().parents[1]


def ok(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = run_cli(*args, cwd=cwd, env=env)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def one_line_error(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command that must fail with exactly one stderr line and no traceback."""
    result = run_cli(*args, cwd=cwd, env=env)
    assert result.returncode != 0, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, (args, result.stderr)
    return lines[0]


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def profile_count(cwd: Path) -> int:
    info: dict[str, Any] = json.loads(ok("status", "--json", cwd=cwd))
    return int(info["counts"]["profile"])


# -- init: which project ---------------------------------------------------------------------------


def test_init_names_the_project_it_profiled(tmp_path: Path) -> None:
    shop = git_repo(tmp_path / "shop")
    (shop / "pyproject.toml").write_text('[project]\nname = "shop"\n', encoding="utf-8")

    text = ok("init", "--no-mcp", cwd=shop)

    assert f"profile   profiled shop ({shop.resolve()}): " in text
    assert profile_count(shop) >= 1
    setup = json.loads(ok("init", "--no-mcp", "--json", cwd=shop))
    assert (setup["profiled"], setup["profile_skipped"]) == (True, None)
    assert setup["project"]["name"] == "shop"


def test_init_outside_a_project_profiles_nothing_and_says_so(tmp_path: Path) -> None:
    loose = tmp_path / "downloads"
    loose.mkdir()

    text = ok("init", "--no-mcp", cwd=loose)

    assert "profile   nothing profiled: " in text
    assert "is not inside a project (no git work tree, no project files)" in text
    assert "registered" in text or "created" in text  # the hooks are still set up
    assert profile_count(loose) == 0
    setup = json.loads(ok("init", "--no-mcp", "--json", cwd=loose))
    assert setup["profiled"] is False
    assert "not inside a project" in setup["profile_skipped"]
    # --project writes into a project's own files: refused, in one line, before anything is written
    message = one_line_error("init", "--project", cwd=loose)
    assert "--project registers in a project's own files" in message
    assert not (loose / ".claude").exists()


def test_a_folder_with_project_files_is_a_project(tmp_path: Path) -> None:
    folder = tmp_path / "tool"
    folder.mkdir()
    (folder / "package.json").write_text('{"name": "tool"}', encoding="utf-8")
    assert "profile   profiled tool (" in ok("init", "--no-mcp", cwd=folder)


def test_init_in_agentctx_own_clone_does_not_profile_it(tmp_path: Path) -> None:
    clone = git_repo(tmp_path / "agentctx")
    (clone / "pyproject.toml").write_text(
        '[project]\nname = "agentctx-cc"\n[project.scripts]\nagentctx = "agentctx.cli:main"\n',
        encoding="utf-8",
    )
    (clone / "src").mkdir()

    text = ok("init", "--no-mcp", cwd=clone / "src")

    assert "profile   nothing profiled: " in text
    assert "is agentctx's own clone, not your project" in text
    assert profile_count(clone) == 0


def test_this_repository_is_recognised_as_agentctx() -> None:
    from agentctx.cli.setup import _is_agentctx_clone

    assert _is_agentctx_clone(REPO_ROOT)
    assert not _is_agentctx_clone(REPO_ROOT / "tests")


# -- init writes the config; config get says where each value comes from -------------------------


def test_init_writes_the_config_with_its_defaults(tmp_path: Path, agentctx_home: Path) -> None:
    project = git_repo(tmp_path / "shop")
    ok("config", "set", "llm", "off", cwd=project)

    ok("init", "--no-mcp", cwd=project)

    path = agentctx_home / "config.json"
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert set(stored) == set(SETTINGS)
    assert stored["llm"] is False  # a value already set is kept
    assert stored["embeddings"] == SETTINGS["embeddings"][1]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = path.read_bytes()
    again = ok("init", "--no-mcp", cwd=project)
    assert path.read_bytes() == before
    assert "config    " not in again  # nothing added the second time


def test_config_get_shows_value_default_and_source(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    ok("config", "set", "reinforcement_threshold", "5", cwd=project)
    env = {"AGENTCTX_EXTRACTION_BACKEND": "off"}

    listing = ok("config", "get", cwd=project, env=env).splitlines()
    assert [line.split(" = ")[0] for line in listing] == list(SETTINGS)
    by_key = {line.split(" = ")[0]: line for line in listing}
    assert by_key["reinforcement_threshold"].split()[2] == "5"
    assert by_key["reinforcement_threshold"].endswith("(default 3; config file)")
    assert by_key["llm"].endswith("(default on; default)")
    assert by_key["extraction.backend"].endswith(
        "(default auto; environment $AGENTCTX_EXTRACTION_BACKEND)"
    )
    values = json.loads(ok("config", "get", "--json", cwd=project, env=env))
    assert list(values) == list(SETTINGS)
    assert values["reinforcement_threshold"] == {
        "value": 5,
        "default": 3,
        "source": "config file",
    }
    assert values["extraction.backend"] == {
        "value": "off",
        "default": "auto",
        "source": "environment $AGENTCTX_EXTRACTION_BACKEND",
    }
    assert values["embedding.path"] == {"value": "", "default": "", "source": "default"}


@pytest.mark.parametrize("key", ["llm", "team_export"])
def test_config_get_one_key_stays_plain(tmp_path: Path, key: str) -> None:
    assert ok("config", "get", key, cwd=tmp_path) == f"{key} = {'on' if key == 'llm' else 'off'}\n"


# -- consolidate speaks in project names and plain sentences --------------------------------------

CLAUDE_MD = """# Shop

## Conventions
- All tests use pytest; run pytest -q.
- Sessions use JWT access tokens signed with RS256.
"""


def record(cwd: Path, type_: str, title: str, body: str) -> str:
    created: dict[str, Any] = json.loads(
        ok("record", "--type", type_, "--title", title, "--body", body, "--json", cwd=cwd)
    )
    return str(created["id"])


def test_consolidate_speaks_plainly(tmp_path: Path, minilm_dir: Path) -> None:
    shop = git_repo(tmp_path / "shop")
    (shop / "CLAUDE.md").write_text(CLAUDE_MD, encoding="utf-8")
    for key, value in (("embedding.path", str(minilm_dir)), ("llm", "off")):
        ok("config", "set", key, value, cwd=shop)
    ok("config", "set", "embedding.model", "sentence-transformers/all-MiniLM-L6-v2", cwd=shop)
    record(shop, "decision", "Use gRPC for internal services", "Services talk over gRPC.")
    record(shop, "decision", "Store money as integer cents", "Amounts are integer cents.")
    old = record(
        shop, "decision", "Use JWT for auth", "Sessions use JWT access tokens signed with RS256."
    )
    ok(
        "supersede",
        old,
        "--body",
        "Sessions use opaque tokens in Redis.",
        "--rationale",
        "revoke",
        cwd=shop,
    )
    record(shop, "convention", "Pytest for every test", "All tests use pytest; run pytest -q.")
    for _ in range(2):  # the same text twice: merged without an LLM
        record(shop, "discovery", "Slow CI", "CI is slow because the Docker layer cache is off.")

    result = run_cli("consolidate", cwd=shop)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("global records: 7 records embedded")  # the store's, first
    (line,) = [text for text in lines if text.startswith("shop: ")]
    assert line == "shop: 1 record merged, digest rebuilt; CLAUDE.md: 3 decisions missing, 1 stale"
    # no project hash anywhere, on stdout or in the progress lines
    project_id = json.loads(ok("status", "--json", cwd=shop))["project"]["id"]
    assert project_id[:12] not in result.stdout + result.stderr
    assert "{" not in result.stdout  # no raw dict

    raw = json.loads(ok("consolidate", "--json", cwd=shop))
    assert [r["project_id"] for r in raw] == ["global", project_id]
    assert set(raw[1]) == {"project_id", "status", "mode", "elapsed_s", "steps", "errors"}
    again = ok("consolidate", cwd=shop).splitlines()
    assert again[1].startswith("shop: digest rebuilt; CLAUDE.md: ")
