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


def test_init_no_profile_registers_but_records_no_profile(tmp_path: Path) -> None:
    """``init --no-profile`` (the seed's flag): hooks and config as usual, no profile record."""
    shop = git_repo(tmp_path / "shop")
    (shop / "pyproject.toml").write_text('[project]\nname = "shop"\n', encoding="utf-8")

    text = ok("init", "--no-mcp", "--no-profile", cwd=shop)

    assert "profile   nothing profiled: --no-profile" in text
    assert profile_count(shop) == 0
    setup = json.loads(ok("init", "--no-mcp", "--no-profile", "--json", cwd=shop))
    assert (setup["profiled"], setup["profile_skipped"]) == (False, "--no-profile")
    assert any("settings.json" in c["path"] for c in setup["changes"])


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


def test_the_seeds_config_no_llm_says_how_it_is_spelled(tmp_path: Path) -> None:
    """``agentctx config --no-llm`` (the design's spelling) changes nothing and names the one way."""
    ok("init", "--no-mcp", cwd=tmp_path)
    result = run_cli("config", "--no-llm", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "agentctx: `config --no-llm` is spelled `agentctx config set llm off` "
        "(`agentctx config set llm on` turns extraction back on)"
    ]
    assert ok("config", "get", "llm", cwd=tmp_path).strip() == "llm = on"
    ok("config", "set", "llm", "off", cwd=tmp_path)
    assert ok("config", "get", "llm", cwd=tmp_path).strip() == "llm = off"
    assert "get" in ok("config", cwd=tmp_path)  # no flag: the help


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
    assert lines[0] == "store: 7 records embedded"  # the store's, once, not a project's
    assert not any("embedded" in line for line in lines[1:])
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


# -- no surprise about the embedding model ---------------------------------------------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network for the hub: a download fails at once (no proxy to go through)."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def doctor_line(cwd: Path, name: str) -> str:
    result = run_cli("doctor", cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line[6:].startswith(f"{name} ")]
    return line


@pytest.mark.parametrize(
    "name", ["sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-small-en-v1.5"]
)
def test_the_fastembed_facts_of_the_known_models_are_fastembeds(name: str) -> None:
    from fastembed import TextEmbedding

    from agentctx.embeddings import models

    assert models.DEFAULT_MODEL in models.KNOWN_MODELS
    (entry,) = [m for m in TextEmbedding.list_supported_models() if m["model"] == name]
    repo, model_file, size_mb = models.KNOWN_MODELS[name]
    assert (repo, model_file) == (entry["sources"]["hf"], entry["model_file"])
    assert size_mb == round(entry["size_in_GB"] * 1000)


def test_init_says_which_model_where_and_when(
    tmp_path: Path, agentctx_home: Path, minilm_dir: Path
) -> None:
    project = git_repo(tmp_path / "shop")

    text = ok("init", "--no-mcp", cwd=project)

    (line,) = [line for line in text.splitlines() if line.startswith("model     ")]
    assert line == (
        f"model     sentence-transformers/all-MiniLM-L6-v2 (about 90 MB) will be downloaded into "
        f"{agentctx_home / 'models'} at the first consolidation or hybrid search (search is "
        "keyword-only until then); `agentctx model fetch` downloads it now"
    )
    setup = json.loads(ok("init", "--no-mcp", "--json", cwd=project))
    assert setup["embedding_model"] == {
        "name": "sentence-transformers/all-MiniLM-L6-v2",
        "enabled": True,
        "size_mb": 90,
        "folder": str(agentctx_home / "models"),
        "local": False,
        "present": False,
        "fetch": "agentctx model fetch",
    }
    ok("config", "set", "embedding.path", str(minilm_dir), cwd=project)
    assert f"from {minilm_dir}, no download" in ok("init", "--no-mcp", cwd=project)
    assert "embeddings off: consolidation and search are keyword-only" in ok(
        "init", "--no-mcp", "--no-embeddings", cwd=project
    )


def test_model_fetch_offline_fails_in_one_line(tmp_path: Path, offline: None) -> None:
    message = one_line_error("model", "fetch", cwd=tmp_path)
    assert message == (
        "agentctx: error: cannot download sentence-transformers/all-MiniLM-L6-v2: huggingface.co "
        "cannot be "
        "reached (offline?); search stays keyword-only: retry online, or set embedding.path to a "
        "local model folder"
    )


def test_model_fetch_loads_a_local_folder(tmp_path: Path, minilm_dir: Path) -> None:
    ok("config", "set", "embedding.path", str(minilm_dir), cwd=tmp_path)
    ok("config", "set", "embedding.model", "sentence-transformers/all-MiniLM-L6-v2", cwd=tmp_path)
    assert ok("model", "fetch", cwd=tmp_path) == (
        # the int8 variant, by default (``embedding.int8``)
        f"sentence-transformers/all-MiniLM-L6-v2:int8v2 ready in {minilm_dir} (384 dimensions)\n"
    )


def test_doctor_checks_that_the_model_loads(
    tmp_path: Path, agentctx_home: Path, minilm_dir: Path, offline: None
) -> None:
    line = doctor_line(tmp_path, "model")
    assert line.startswith(
        "warn  model       sentence-transformers/all-MiniLM-L6-v2 not downloaded yet (into "
    )
    assert line.endswith(
        ": search is keyword-only (no ranking by meaning) and consolidation "
        "merges only near-identical wording"
    )
    ok("config", "set", "embedding.model", "sentence-transformers/all-MiniLM-L6-v2", cwd=tmp_path)
    ok("config", "set", "embedding.path", str(tmp_path / "nowhere"), cwd=tmp_path)
    line = doctor_line(tmp_path, "model")
    assert line.startswith(
        "warn  model       sentence-transformers/all-MiniLM-L6-v2: the model "
        f"folder {tmp_path / 'nowhere'} does not exist: search is keyword-only"
    )
    ok("config", "set", "embedding.path", str(minilm_dir), cwd=tmp_path)
    assert doctor_line(tmp_path, "model") == (
        "ok    model       sentence-transformers/all-MiniLM-L6-v2:int8v2 loads (384 dimensions) "
        "from "
        f"{minilm_dir}"
    )
    checks = json.loads(run_cli("doctor", "--json", cwd=tmp_path).stdout)  # 1: no hooks yet
    (model,) = [c for c in checks if c["name"] == "model"]
    assert model["ok"] is True and model["model"]["local"] is True


def test_search_says_when_it_ran_keyword_only(
    tmp_path: Path, minilm_dir: Path, offline: None
) -> None:
    shop = git_repo(tmp_path / "shop")
    ok("config", "set", "embedding.model", "sentence-transformers/all-MiniLM-L6-v2", cwd=shop)
    ok("config", "set", "llm", "off", cwd=shop)
    ci = record(shop, "discovery", "Slow CI", "CI is slow because the Docker layer cache is off.")

    def search(query: str) -> tuple[list[str], list[str]]:
        result = run_cli("search", query, "--json", cwd=shop)
        assert result.returncode == 0, result.stderr
        return [hit["id"] for hit in json.loads(result.stdout)], result.stderr.splitlines()

    found, err = search("docker cache")
    assert found == [ci]
    assert err == [
        "agentctx: keyword-only search: no record has a vector yet: `agentctx consolidate` "
        "downloads the embedding model (about 90 MB) and embeds them"
    ]
    ok("config", "set", "embedding.path", str(minilm_dir), cwd=shop)
    ok("consolidate", cwd=shop)
    found, err = search("the continuous integration build takes forever")
    assert (found, err) == ([ci], [])  # hybrid: found by meaning, no word in common
    ok("config", "set", "embedding.path", str(tmp_path / "gone"), cwd=shop)
    found, err = search("docker cache")
    assert found == [ci]
    assert err == [
        f"agentctx: keyword-only search: the model folder {tmp_path / 'gone'} does not exist; "
        "`agentctx model fetch` or `agentctx doctor`"
    ]
    ok("config", "set", "embeddings", "off", cwd=shop)
    assert search("docker cache")[1] == [
        "agentctx: keyword-only search: embeddings are off (`agentctx config set embeddings on`)"
    ]


@pytest.mark.anyio
async def test_ctx_search_says_why_it_ran_keyword_only(
    tmp_path: Path, minilm_settings: dict[str, Any]
) -> None:
    from mcp import Client

    from agentctx.core.project import identify
    from agentctx.mcp.server import create_server
    from agentctx.retrieval import hybrid
    from agentctx.store import Store
    from tests.helpers import new_record

    project = tmp_path / "shop"
    project.mkdir()
    async with await Store.open() as store:
        await store.add(
            new_record(
                type="discovery",
                title="Slow CI",
                body="CI is slow because the Docker layer cache is off.",
                project_id=identify(str(project)).project_id,
            )
        )

    async def note(settings: dict[str, Any]) -> tuple[str, str | None]:
        model = hybrid.QueryModel(settings)
        async with Client(create_server(str(project), model=model)) as client:
            result = await client.call_tool("ctx_search", {"query": "docker cache"})
        data: dict[str, Any] = result.structured_content or {}
        return data["mode"], data["note"]

    assert await note(minilm_settings) == (
        "keyword",
        "keyword-only search: no record has a vector yet (consolidation embeds them)",
    )
    assert await note({**minilm_settings, "embeddings": False}) == (
        "keyword",
        "keyword-only search: embeddings are off (`agentctx config set embeddings on`)",
    )


# -- every error one line; every help an example ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(["nosuch"], 2, id="unknown-command"),
        pytest.param(["search"], 2, id="missing-argument"),
        pytest.param(["search", "x", "--limit", "many"], 2, id="bad-number"),
        pytest.param(["export", "--format", "pdf"], 2, id="bad-choice"),
        pytest.param(["config", "set", "llm", "maybe"], 1, id="bad-setting"),
        pytest.param(["config", "get", "nosuch"], 1, id="unknown-setting"),
        pytest.param(["show", "NOPE"], 1, id="no-store-yet"),
        pytest.param(["import", "/nonexistent/file.json"], 1, id="missing-file"),
        pytest.param(["consolidate", "--time-box", "0"], 1, id="bad-time-box"),
        pytest.param(["profile", "edit", "NOPE"], 2, id="profile-usage"),
    ],
)
def test_every_error_is_one_line(tmp_path: Path, args: list[str], code: int) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentctx: error: "), lines[0]


def test_an_unexpected_error_is_one_line_and_its_traceback_is_logged(
    tmp_path: Path, agentctx_home: Path
) -> None:
    """A bug (here: an exception the CLI has no rule for) still ends in one line."""
    import contextlib
    import io

    from agentctx import cli

    @cli.app.command(name="test-crash")
    def crash() -> int:
        raise LookupError("something nobody expected\nover two lines")

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            code = cli.run(["test-crash"])
    finally:
        del cli.app["test-crash"]
    assert code == 1
    log = agentctx_home / "logs" / "cli.log"
    assert err.getvalue() == (
        "agentctx: error: unexpected LookupError: something nobody expected over two lines "
        f"(a bug in agentctx; the traceback is in {log})\n"
    )
    assert "Traceback" in log.read_text(encoding="utf-8")


def _commands(app: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of a cyclopts app (groups included), help and version left out."""
    found = []
    for name in app:
        if name.startswith("-"):
            continue
        sub = app[name]
        found.append((*prefix, name))
        if any(not n.startswith("-") for n in sub):
            found.extend(_commands(sub, (*prefix, name)))
    return found


def test_every_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    import contextlib

    from agentctx.cli import app

    commands = _commands(app)
    assert {("init",), ("search",), ("model", "fetch"), ("config", "get")} <= set(commands)
    assert len(commands) >= 30
    missing = []
    for path in [(), *commands]:
        with contextlib.suppress(SystemExit):
            app([*path, "--help"], exit_on_error=False, result_action="return_value")
        text = capsys.readouterr().out
        assert text.startswith("Usage: agentctx"), (path, text)
        if "Example" not in text:
            missing.append(" ".join(path) or "agentctx")
    assert missing == []


def init_at_a_terminal(cwd: Path, answer: str) -> str:
    """``agentctx init --no-mcp`` with a terminal for stdin and stdout (a pseudo-terminal), the
    answer typed when it asks; everything it printed."""
    import os
    import pty
    import select
    import sys

    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentctx", "init", "--no-mcp"],
        cwd=cwd, stdin=child, stdout=child, stderr=child, close_fds=True,
    )  # fmt: skip
    os.close(child)
    seen, typed = b"", False
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            process.kill()
            raise AssertionError(f"init hung at a terminal: {seen!r}")
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
        if not typed and b"[y/N]" in seen:
            os.write(main, answer.encode() + b"\n")
            typed = True
    os.close(main)
    assert process.wait(timeout=60) == 0, seen
    return seen.decode(errors="replace").replace("\r\n", "\n")


def test_init_at_a_terminal_offers_to_download_the_model(tmp_path: Path, offline: None) -> None:
    project = git_repo(tmp_path / "shop")

    declined = init_at_a_terminal(project, "n")
    assert "will be downloaded into" in declined and "Download it now? [y/N]" in declined
    assert "model     not downloaded now: `agentctx model fetch` does it later" in declined

    accepted = init_at_a_terminal(project, "y")
    assert "Download it now? [y/N]" in accepted
    # offline here: the download fails in one line and init goes on (exit 0, checked above)
    assert "model     not downloaded: cannot download sentence-transformers/all-MiniLM-L6-v2" in (
        accepted
    )
    assert "Traceback" not in accepted


def test_init_without_a_terminal_asks_nothing(tmp_path: Path) -> None:
    text = ok("init", "--no-mcp", cwd=git_repo(tmp_path / "shop"))
    assert "[y/N]" not in text and "not downloaded" not in text
