"""Finding 1: writes through planted symlinks.

A cloned repository may ship symlinks where agentctx writes: at the team folder, at the file itself,
or at a predictable temporary name next to it. Every write goes through
:func:`agentctx.core.files.write_atomic`, which never follows one inside a repository.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import pytest

from agentctx import team
from agentctx.claude import claudemd, install
from agentctx.core import files
from agentctx.core.errors import UnsafePathError
from agentctx.core.project import identify
from tests.helpers import new_record, run_cli

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

SECRET = b"the victim's own bytes\n"


def victim(tmp_path: Path) -> Path:
    """A file outside the repository that an attack would overwrite."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(SECRET)
    return path


async def seeded(store: Store, root: Path) -> str:
    project = identify(str(root))
    await store.touch_project(project)
    await store.add(new_record(title="Queue", body="Use Kafka.", project_id=project.project_id))
    return project.project_id


@pytest.mark.anyio
async def test_team_export_refuses_a_symlinked_team_folder(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / ".agentctx").symlink_to(outside, target_is_directory=True)
    project_id = await seeded(store, root)

    with pytest.raises(UnsafePathError, match="symlink"):
        await team.export_team(store, project_id, str(root), settings={"team_export": True})
    assert list(outside.iterdir()) == []


@pytest.mark.anyio
async def test_team_export_ignores_a_planted_temporary_name(store: Store, tmp_path: Path) -> None:
    """The old code wrote ``<path>.<pid>.tmp`` with O_TRUNC, following a link planted there."""
    root = tmp_path / "repo"
    (root / ".agentctx").mkdir(parents=True)
    target = victim(tmp_path)
    planted = root / ".agentctx" / f"context.md.{os.getpid()}.tmp"
    planted.symlink_to(target)
    project_id = await seeded(store, root)

    written = await team.export_team(store, project_id, str(root), settings={"team_export": True})

    assert written == str(root / ".agentctx" / "context.md")
    assert target.read_bytes() == SECRET
    assert "Use Kafka." in (root / ".agentctx" / "context.md").read_text()
    assert planted.is_symlink()  # left alone, never written through


@pytest.mark.anyio
async def test_team_export_refuses_a_symlinked_team_file(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".agentctx").mkdir(parents=True)
    target = victim(tmp_path)
    (root / ".agentctx" / "context.md").symlink_to(target)
    project_id = await seeded(store, root)

    with pytest.raises(UnsafePathError):
        await team.export_team(store, project_id, str(root), settings={"team_export": True})
    assert target.read_bytes() == SECRET
    assert (root / ".agentctx" / "context.md").is_symlink()


def test_init_team_in_a_hostile_clone_fails_with_one_line(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / ".agentctx").symlink_to(outside, target_is_directory=True)
    ok = run_cli("record", "--type", "decision", "--title", "Q", "--body", "Use Kafka.", cwd=root)
    assert ok.returncode == 0, ok.stderr

    result = run_cli("init", "--team", "--no-mcp", cwd=root)

    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "symlink" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert list(outside.iterdir()) == []


@pytest.mark.anyio
async def test_sync_apply_ignores_a_planted_temporary_name(tmp_path: Path) -> None:
    """The old ``sync --apply`` wrote ``.CLAUDE.md.<pid>.tmp`` through whatever was there."""
    root = tmp_path / "repo"
    root.mkdir()
    target = victim(tmp_path)
    (root / f".CLAUDE.md.{os.getpid()}.tmp").symlink_to(target)
    sync = report_for(root / "CLAUDE.md", root)

    assert await claudemd.apply(sync)

    assert target.read_bytes() == SECRET
    assert (root / "CLAUDE.md").read_text() == sync.proposed


@pytest.mark.anyio
async def test_sync_apply_refuses_a_symlinked_claude_md(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".claude").mkdir(parents=True)
    target = victim(tmp_path)
    (root / ".claude" / "CLAUDE.md").symlink_to(target)
    sync = report_for(root / ".claude" / "CLAUDE.md", root, current=SECRET.decode())

    with pytest.raises(UnsafePathError):
        await claudemd.apply(sync)
    assert target.read_bytes() == SECRET


def report_for(target: Path, root: Path, current: str | None = None) -> claudemd.SyncReport:
    proposed = (current or "") + "## Decisions\n- Use Kafka.\n"
    return claudemd.SyncReport(
        files=[str(target)] if current is not None else [],
        target=str(target),
        label="CLAUDE.md",
        checked=1,
        missing=[],
        missing_total=0,
        contradictions=[],
        current=current,
        proposed=proposed,
        diff="",
        root=str(root),
    )


def test_project_settings_behind_a_symlinked_folder_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / ".claude").symlink_to(outside, target_is_directory=True)

    with pytest.raises(UnsafePathError):
        install.install_hooks(root / ".claude" / "settings.json", root=root)
    assert list(outside.iterdir()) == []


def test_user_settings_symlinked_to_dotfiles_keep_their_link(tmp_path: Path) -> None:
    """The rule for the user's own config: write the link's target, keep the link."""
    dotfiles = tmp_path / "dotfiles" / "settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text("{}\n")
    link = tmp_path / "claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)

    install.install_hooks(link)

    assert link.is_symlink()
    assert "agentctx hook" in dotfiles.read_text()


# -- the helper itself ------------------------------------------------------------------------------


def test_write_atomic_refuses_paths_that_leave_the_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for bad in (tmp_path / "outside.txt", root / ".." / "outside.txt", root):
        with pytest.raises(UnsafePathError):
            files.write_atomic(bad, b"x", root=root)
    assert not (tmp_path / "outside.txt").exists()


def test_write_atomic_refuses_a_symlink_anywhere_on_the_way(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "a").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "a" / "b").symlink_to(outside, target_is_directory=True)

    with pytest.raises(UnsafePathError):
        files.write_atomic(root / "a" / "b" / "c" / "file.md", b"x", root=root)
    assert list(outside.iterdir()) == []


def test_write_atomic_creates_missing_folders_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    files.write_atomic(root / "a" / "b" / "file.md", b"x", root=root, mode=None)
    assert (root / "a" / "b" / "file.md").read_bytes() == b"x"


def test_write_atomic_replaces_a_home_symlink_instead_of_following_it(tmp_path: Path) -> None:
    target = victim(tmp_path)
    link = tmp_path / "home" / "config.json"
    link.parent.mkdir()
    link.symlink_to(target)

    files.write_atomic(link, b"{}")

    assert target.read_bytes() == SECRET
    assert not link.is_symlink()
    assert link.read_bytes() == b"{}"


def test_write_atomic_sets_the_mode_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        files.write_atomic(tmp_path / "private", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o600


def test_write_atomic_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    for n in range(3):
        files.write_atomic(path, str(n).encode())
    assert not files.write_atomic(path, b"dropped", before_replace=lambda: False)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    assert path.read_bytes() == b"2"
