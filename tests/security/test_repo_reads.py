"""Issue 24, finding 9: a CLAUDE.md that is a symlink out of the repository was read.

``sync``, the MCP tool ``ctx_sync_claudemd`` and the dashboard showed what the link pointed at
(``/proc/self/environ``: the MCP server's environment, keys included). Reads from a repository now
obey the rule writes do, through :func:`agentctx.core.files.read_inside`: only a regular file whose
resolved path stays inside the repository. A link to another file of the repository
(``CLAUDE.md -> AGENTS.md``) is still read; a link out of it, a FIFO or a folder reads as missing.
The same helper reads the manifests profile detection looks at and a project's ``.mcp.json``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import anyio
import pytest
from mcp import ClientSession, stdio_client

from agentctx import detection
from agentctx.claude import claudemd
from agentctx.core import files
from agentctx.core.errors import UnsafePathError
from agentctx.core.project import ProjectIdentity, identify
from tests.helpers import run_cli, server_params
from tests.test_web import serving

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

MARKER = "sk-ant-api03-OUTSIDE-THE-REPOSITORY-0123456789"
ENV_MARKER = "AGENTCTX_PROBE_ENVIRON_6d1f"


def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "elsewhere" / "secret.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"# Secrets\n\n- ANTHROPIC_API_KEY={MARKER}\n")
    return path


def hostile(kind: str, repo: Path, tmp_path: Path) -> None:
    """Put a hostile CLAUDE.md of ``kind`` in the repository."""
    secret = secret_file(tmp_path)
    if kind == "link-out":
        (repo / "CLAUDE.md").symlink_to(secret)
    elif kind == "relative-link-out":
        (repo / "CLAUDE.md").symlink_to(os.path.relpath(secret, repo))
    elif kind == "dotclaude-link-out":
        (repo / ".claude").mkdir()
        (repo / ".claude" / "CLAUDE.md").symlink_to(secret)
    elif kind == "folder-link-out":  # .claude itself leaves the repository
        (repo / ".claude").symlink_to(secret.parent, target_is_directory=True)
        (secret.parent / "CLAUDE.md").write_text(secret.read_text())
    elif kind == "proc-environ":
        (repo / "CLAUDE.md").symlink_to("/proc/self/environ")
    elif kind == "fifo":
        os.mkfifo(repo / "CLAUDE.md")
    elif kind == "folder":
        (repo / "CLAUDE.md").mkdir()
        (repo / "CLAUDE.md" / "x.md").write_text(MARKER)
    else:  # pragma: no cover - a typo in the parameters
        raise AssertionError(kind)


KINDS = [
    "link-out",
    "relative-link-out",
    "dotclaude-link-out",
    "folder-link-out",
    "proc-environ",
    "fifo",
    "folder",
]


@pytest.fixture
def repo(project_dir: Path) -> Path:
    (project_dir / "pyproject.toml").write_text('[project]\nname = "shop"\n')
    added = run_cli(
        "record", "--type", "convention", "--title", "Tests", "--body", "Run pytest -q.",
        cwd=project_dir,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    return project_dir


@pytest.mark.parametrize("kind", KINDS)
def test_sync_reads_nothing_from_outside_the_repository(
    repo: Path, tmp_path: Path, kind: str
) -> None:
    hostile(kind, repo, tmp_path)
    env = {ENV_MARKER: MARKER}
    shown = run_cli("sync", "--keywords-only", cwd=repo, env=env)
    assert shown.returncode == 0, shown.stderr
    as_json = run_cli("sync", "--keywords-only", "--json", cwd=repo, env=env)
    assert as_json.returncode == 0, as_json.stderr
    for output in (shown.stdout, shown.stderr, as_json.stdout, as_json.stderr):
        assert MARKER not in output
        assert ENV_MARKER not in output
    assert json.loads(as_json.stdout)["files"] == []


def test_sync_apply_does_not_write_through_the_link(repo: Path, tmp_path: Path) -> None:
    hostile("link-out", repo, tmp_path)
    before = secret_file(tmp_path).read_bytes()
    applied = run_cli("sync", "--keywords-only", "--apply", "--yes", cwd=repo)
    assert applied.returncode != 0
    assert "symlink" in applied.stderr and MARKER not in applied.stderr
    assert secret_file(tmp_path).read_bytes() == before


def test_a_link_inside_the_repository_is_still_read(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("# Agents\n\n- INSIDE-THE-REPOSITORY note\n")
    (repo / "CLAUDE.md").symlink_to("AGENTS.md")
    as_json = run_cli("sync", "--keywords-only", "--json", cwd=repo)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["files"] == [str(repo / "CLAUDE.md")]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["proc-environ", "link-out", "fifo"])
async def test_the_mcp_tool_reads_nothing_from_outside(
    repo: Path, agentctx_home: Path, tmp_path: Path, kind: str
) -> None:
    hostile(kind, repo, tmp_path)
    params = server_params(repo, agentctx_home)
    assert params.env is not None
    params.env[ENV_MARKER] = MARKER  # in the server's /proc/self/environ
    with (tmp_path / "stderr.txt").open("w") as errlog, anyio.fail_after(60):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("ctx_sync_claudemd", {})
    assert not result.is_error
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert MARKER not in text and ENV_MARKER not in text
    assert '"files": []' in text or '"files":[]' in text


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["link-out", "folder-link-out", "fifo"])
async def test_the_dashboard_shows_nothing_from_outside(
    store: Store, repo: Path, tmp_path: Path, kind: str
) -> None:
    hostile(kind, repo, tmp_path)
    identity = identify(str(repo))
    await store.touch_project(ProjectIdentity(identity.project_id, "shop", str(repo), None))
    async with serving(store) as (_dash, client):
        page = await client.get("/sync", params={"project": identity.project_id})
    assert page.status_code == 200
    assert MARKER not in page.text
    assert "Run pytest -q." in page.text  # the report itself is there, from the store


def test_the_reader_refuses_each_way_out(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "sub").mkdir()
    (repo / "sub" / "ok.md").write_text("inside")
    secret = secret_file(tmp_path)
    (repo / "out.md").symlink_to(secret)
    (repo / "sub" / "up.md").symlink_to("../../elsewhere/secret.md")
    (repo / "door").symlink_to(secret.parent, target_is_directory=True)
    os.mkfifo(repo / "pipe")

    assert files.read_inside(repo, repo / "sub" / "ok.md", 100) == b"inside"
    assert files.read_inside(repo, "sub/ok.md", 100) == b"inside"
    for name in ("out.md", "sub/up.md", "door/secret.md", "../elsewhere/secret.md"):
        with pytest.raises(UnsafePathError, match="outside"):
            files.read_inside(repo, repo / name, 100)
    for name in ("pipe", "sub"):
        with pytest.raises(files.NotRegularFileError):
            files.read_inside(repo, repo / name, 100)
    with pytest.raises(FileNotFoundError):
        files.read_inside(repo, repo / "missing.md", 100)


def test_claudemd_discovery_skips_links_out(repo: Path, tmp_path: Path) -> None:
    hostile("link-out", repo, tmp_path)
    found = anyio.run(claudemd.discover, str(repo), str(repo))
    assert found == []
    (repo / "CLAUDE.md").unlink()
    (repo / "CLAUDE.md").write_text("- Run pytest -q.\n")
    assert [f.path for f in anyio.run(claudemd.discover, str(repo), str(repo))] == [
        str(repo / "CLAUDE.md")
    ]


@pytest.mark.parametrize(
    ("manifest", "content"),
    [
        ("package.json", json.dumps({"name": "shop", "scripts": {"test": f"jest {MARKER}"}})),
        ("pyproject.toml", f'[project]\nname = "shop"\n[tool.poe.tasks]\ntest = "{MARKER}"\n'),
        ("Makefile", f"test:\n\techo {MARKER}\n"),
        ("Cargo.toml", f'[package]\nname = "shop"\ndescription = "{MARKER}"\n'),
    ],
)
def test_profile_detection_reads_no_manifest_from_outside(
    tmp_path: Path, manifest: str, content: str
) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / manifest).write_text(content)
    reference = detection.detect(inside)  # what the same file yields when it is the repo's own

    outside = tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    (outside / manifest).write_text(content)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / manifest).symlink_to(outside / manifest)

    assert detection.detect(repo) == []
    assert reference != []  # the control: read inside, the manifest is profiled


def test_a_project_mcp_json_linked_out_is_neither_read_nor_written(
    repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere" / "mcp.json"
    outside.parent.mkdir(exist_ok=True)
    outside.write_text(json.dumps({"mcpServers": {"agentctx": {"env": {"K": MARKER}}}}))
    before = outside.read_bytes()
    (repo / ".mcp.json").symlink_to(outside)
    done = run_cli("init", "--project", "--no-llm", "--no-embeddings", "--no-profile", cwd=repo)
    assert done.returncode != 0
    assert MARKER not in done.stdout + done.stderr
    assert outside.read_bytes() == before


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="symlinks and FIFOs are POSIX here")
