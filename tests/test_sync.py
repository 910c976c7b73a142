"""CLAUDE.md sync: ``agentctx sync`` through real subprocesses, and :mod:`agentctx.claude.claudemd`.

The store is seeded through the library in the test's home (the subprocesses inherit
AGENTCTX_HOME); the project is a plain folder, so its root is the folder itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from agentctx import config
from agentctx.claude import claudemd
from agentctx.claude.claudemd import SYNC_BEGIN, SYNC_END
from agentctx.core.errors import ValidationError
from agentctx.core.project import identify
from tests.helpers import new_record, run_cli

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

pytestmark = pytest.mark.anyio

USER_TEXT = (
    "# My project\r\n\r\n"  # CRLF and non-ASCII bytes must survive untouched
    "- Pytest for every test: run `pytest -q` — always.\n"
    "- Sessions use **JWT access tokens** signed with RS256.\n"
    "No trailing newline here"
).encode()


@dataclass(frozen=True)
class Seed:
    project_id: str
    jwt_old: str
    jwt: str
    auth: str
    pytest: str
    inferred: str


@pytest.fixture
async def seed(store: Store, project_dir: Path) -> Seed:
    pid = identify(str(project_dir)).project_id
    old = await store.add(
        new_record(
            title="Use JWT for auth",
            body="Sessions use JWT access tokens signed with RS256.",
            project_id=pid,
        )
    )
    _, jwt = await store.supersede(
        old.id, "Sessions use opaque tokens stored in Redis.", "revocable", project_id=pid
    )
    auth = await store.add(
        new_record(
            type="convention",
            title="Auth handlers live in one module",
            body="See the title.",
            project_id=pid,
        )
    )
    pytest_ = await store.add(
        new_record(
            type="convention", title="Pytest for every test", body="See the title.", project_id=pid
        )
    )
    inferred = await store.add(
        new_record(
            type="convention",
            title="Maybe tabs for indentation",
            body="See the title.",
            project_id=pid,
            confidence="inferred",
        )
    )
    return Seed(pid, old.id, jwt.id, auth.id, pytest_.id, inferred.id)


def _added(diff: str) -> list[str]:
    return [line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]


# -- the command ---------------------------------------------------------------------------------


async def test_diff_lists_missing_records_and_strikes_superseded_text(
    seed: Seed, project_dir: Path
) -> None:
    claude_md = project_dir / "CLAUDE.md"
    claude_md.write_bytes(USER_TEXT)
    result = run_cli("sync", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    diff = result.stdout
    assert diff.startswith("--- a/CLAUDE.md\n+++ b/CLAUDE.md\n@@ ")
    added = _added(diff)
    assert SYNC_BEGIN in added and added[-1] == SYNC_END
    # missing: the current JWT decision and the auth convention, grouped by type, with ids
    assert "### Decisions" in added and "### Conventions" in added
    assert added.index("### Decisions") < added.index("### Conventions")
    assert any(seed.jwt in line and "Use JWT for auth" in line for line in added)
    assert any(seed.auth in line for line in added)
    # covered by the user's own phrasing, or not explicit: not flagged
    assert not any(seed.pytest in line or seed.inferred in line for line in added)
    # the old JWT text still in CLAUDE.md: a strikethrough suggestion citing both ids
    [strike] = [line for line in added if line.startswith("- ~~")]
    assert "JWT access tokens" in strike and seed.jwt_old in strike and seed.jwt in strike
    assert "line 4" in strike
    # one summary line per drift candidate on stderr; nothing removed, nothing written
    assert f"missing     {seed.jwt}" in result.stderr
    assert f"superseded  {seed.jwt_old}" in result.stderr
    # the last line gains a newline (shown as - / + with git's marker); no text is removed
    removed = [line[1:] for line in diff.splitlines()[1:] if line.startswith("-")]
    assert removed == ["No trailing newline here"] and removed[0] in added
    assert "\\ No newline at end of file" in diff
    assert claude_md.read_bytes() == USER_TEXT


async def test_without_a_claude_md_nothing_is_created(seed: Seed, project_dir: Path) -> None:
    result = run_cli("sync", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--- /dev/null\n+++ b/CLAUDE.md\n@@ -0,0 +1,")
    assert not (project_dir / "CLAUDE.md").exists()


async def test_apply_yes_appends_one_block_then_is_idempotent(
    seed: Seed, project_dir: Path
) -> None:
    claude_md = project_dir / "CLAUDE.md"
    claude_md.write_bytes(USER_TEXT)
    first = run_cli("sync", "--apply", "--yes", cwd=project_dir)
    assert first.returncode == 0, first.stderr
    written = claude_md.read_bytes()
    assert written.startswith(USER_TEXT)  # every user byte kept, before the block
    text = written.decode()
    assert text.count("<!-- agentctx:begin") == 1 and text.count(SYNC_END) == 1
    assert text.endswith(SYNC_END + "\n")
    assert written[len(USER_TEXT) :].startswith(b"\n\n" + SYNC_BEGIN.encode())
    second = run_cli("sync", "--apply", "--yes", cwd=project_dir)
    assert second.returncode == 0, second.stderr
    assert claude_md.read_bytes() == written
    assert second.stdout == "" and "up to date" in second.stderr
    # the report still sees the block's records as missing from the user's own text
    again = json.loads(run_cli("sync", "--json", cwd=project_dir).stdout)
    assert again["missing_total"] == 2 and again["diff"] == "" and again["changed"] is False


async def test_apply_replaces_only_its_own_block(
    seed: Seed, store: Store, project_dir: Path
) -> None:
    claude_md = project_dir / "CLAUDE.md"
    claude_md.write_bytes(USER_TEXT)
    assert run_cli("sync", "--apply", "--yes", cwd=project_dir).returncode == 0
    after = b"\n## Notes added later by hand\n"
    claude_md.write_bytes(claude_md.read_bytes() + after)
    # the user now mentions the auth convention: it leaves the block
    head = USER_TEXT + b"\n- Auth handlers live in one module.\n"
    body = claude_md.read_bytes()[len(USER_TEXT) :]
    claude_md.write_bytes(head + body)
    result = run_cli("sync", "--apply", "--yes", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    final = claude_md.read_bytes()
    assert final.startswith(head) and final.endswith(after)
    assert seed.auth.encode() not in final and seed.jwt.encode() in final
    assert final.decode().count(SYNC_END) == 1


async def test_apply_creates_the_file_with_yes(seed: Seed, project_dir: Path) -> None:
    result = run_cli("sync", "--apply", "--yes", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    text = (project_dir / "CLAUDE.md").read_text()
    assert text.startswith(SYNC_BEGIN + "\n") and text.endswith(SYNC_END + "\n")


async def test_apply_without_yes_and_no_tty_refuses(seed: Seed, project_dir: Path) -> None:
    claude_md = project_dir / "CLAUDE.md"
    claude_md.write_bytes(USER_TEXT)
    result = run_cli("sync", "--apply", cwd=project_dir, input="y\n")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--yes" in lines[0] and lines[0].startswith("agentctx: error:")
    assert claude_md.read_bytes() == USER_TEXT
    missing = run_cli("sync", "--apply", cwd=project_dir, input="y\n")
    assert missing.returncode == 1


async def test_claude_md_option_and_json_shape(
    seed: Seed, project_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere.md"
    other.write_text("Auth handlers live in one module.\nJWT for auth.\nPytest everywhere.\n")
    result = run_cli("sync", "--claude-md", str(other), "--json", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {
        "target",
        "files",
        "checked",
        "missing",
        "missing_total",
        "candidates",
        "contradictions",
        "diff",
        "changed",
        "applied",
        "method",
    }
    assert data["candidates"] == data["missing_total"]  # none contradicted here
    assert data["target"] == str(other) and data["files"] == [str(other)]
    assert data["checked"] == 3 and data["applied"] is False
    [missing] = data["missing"]
    assert set(missing) == {"id", "type", "title", "coverage", "missing_words"}
    assert missing["id"] == seed.pytest and missing["missing_words"] == ["every", "test"]
    assert data["contradictions"] == [] and data["changed"] is True
    assert data["diff"].startswith(f"--- a/{other}\n+++ b/{other}\n")
    assert other.read_text().startswith("Auth handlers")
    applied = json.loads(
        run_cli(
            "sync", "--claude-md", str(other), "--json", "--apply", "--yes", cwd=project_dir
        ).stdout
    )
    assert applied["applied"] is True and SYNC_BEGIN in other.read_text()


# -- the library ---------------------------------------------------------------------------------


async def test_library_report_and_apply(seed: Seed, store: Store, project_dir: Path) -> None:
    path = project_dir / "CLAUDE.md"
    path.write_bytes(USER_TEXT)
    current = await claudemd.read(str(path))
    assert current is not None and current.exact
    root = identify(str(project_dir)).root
    sync = await claudemd.report(
        store, seed.project_id, files=[current], target=str(path), root=root
    )
    assert sync.checked == 3 and {m.id for m in sync.missing} == {seed.jwt, seed.auth}
    [stale] = sync.contradictions
    assert (stale.id, stale.superseded_by, stale.line) == (seed.jwt_old, seed.jwt, 4)
    assert sync.changed and sync.label == "CLAUDE.md"
    assert path.read_bytes() == USER_TEXT  # report never writes
    assert await claudemd.apply(sync) is True
    written = path.read_bytes()
    reread = await claudemd.read(str(path))
    assert reread is not None
    again = await claudemd.report(
        store, seed.project_id, files=[reread], target=str(path), root=root
    )
    assert not again.changed and again.diff == ""
    assert await claudemd.apply(again) is False and path.read_bytes() == written
    # a record covered by the user's phrasing is not missing (same keywords, other words around)
    covered = await claudemd.report(
        store,
        seed.project_id,
        files=[
            claudemd.ClaudeMd(
                str(path), "Auth handlers: all of them live in one module (src/app/auth.py).\n"
            )
        ],
        target=str(path),
        root=root,
    )
    assert seed.auth not in {m.id for m in covered.missing}


async def test_library_refuses_an_unclosed_block_and_a_changed_file(
    seed: Seed, store: Store, project_dir: Path
) -> None:
    path = project_dir / "CLAUDE.md"
    root = identify(str(project_dir)).root
    broken = claudemd.ClaudeMd(str(path), f"mine\n{SYNC_BEGIN}\nhalf a block\n")
    with pytest.raises(ValidationError, match="without"):
        await claudemd.report(store, seed.project_id, files=[broken], target=str(path), root=root)
    sync = await claudemd.report(store, seed.project_id, files=[], target=str(path), root=root)
    path.write_text("written meanwhile\n")
    with pytest.raises(ValidationError, match="changed"):
        await claudemd.apply(sync)
    assert path.read_text() == "written meanwhile\n"


async def test_the_claude_dir_file_counts_and_embeddings_judge_like_consolidation(
    seed: Seed, project_dir: Path, minilm_dir: Path
) -> None:
    (project_dir / "CLAUDE.md").write_bytes(USER_TEXT)
    claude_dir = project_dir / ".claude"
    claude_dir.mkdir()
    # the auth convention in other words (2 of its 5 title keywords; MiniLM cosine 0.70 measured)
    (claude_dir / "CLAUDE.md").write_text(
        "- Authentication request handlers are grouped in a single Python module.\n"
    )
    config.set_value("embedding.model", "sentence-transformers/all-MiniLM-L6-v2")
    config.set_value("embedding.path", str(minilm_dir))
    keywords = json.loads(run_cli("sync", "--json", "--keywords-only", cwd=project_dir).stdout)
    assert str(claude_dir / "CLAUDE.md") in keywords["files"]
    assert seed.auth in {m["id"] for m in keywords["missing"]}
    assert keywords["method"] == claudemd.METHOD
    meaning = json.loads(run_cli("sync", "--json", cwd=project_dir).stdout)
    assert meaning["method"].startswith("keyword coverage and embedding similarity")
    assert seed.auth not in {m["id"] for m in meaning["missing"]}
    assert meaning["candidates"] < keywords["candidates"]
