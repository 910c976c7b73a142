"""The profile detected on SessionStart and CwdChanged, not only at ``init`` (issue 27, item 15).

The hooks run as Claude Code runs them (``agentctx hook session-start`` / ``cwd-changed``, real
subprocesses) and start the real detached ``agentctx worker profile``; the tests wait for what it
records in the real store. The worker's rules (which facts it writes) are also run in-process.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from agentctx import workers
from agentctx.core import manifests
from agentctx.core.project import identify
from tests.helpers import contract, payload, query, run_cli, run_hook, seed
from tests.test_hooks import _modules

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

SID = "7a1b2c3d-4e5f-4a6b-8c7d-0123456789ab"
WAIT_S = 60.0


def _package(folder: Path, test: str = "vitest run") -> None:
    scripts = {"test": test, "build": "vite build", "lint": "eslint ."}
    (folder / "package.json").write_text(json.dumps({"name": "shop", "scripts": scripts}))
    (folder / "pnpm-lock.yaml").write_text("lockfileVersion: '9.0'\n")


def _facts(project: Path) -> dict[str, str]:
    rows = query(
        "SELECT key, body FROM records WHERE type = 'profile' AND superseded_at IS NULL "
        "AND project_id = ?",
        (identify(str(project)).project_id,),
    )
    return {str(k): str(b) for k, b in rows}


def _wait(condition: Any) -> None:
    ends = time.monotonic() + WAIT_S
    while time.monotonic() < ends:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("the detached profile worker did not finish in time")


def _stamp(project: Path) -> tuple[str, str, float, str]:
    return manifests.read(identify(str(project)).project_id)


def _start(project: Path, source: str = "startup") -> str | None:
    data = payload("SessionStart", SID, project, source=source)
    return contract(run_hook("session-start", data, cwd=project), "SessionStart")


def test_a_new_project_is_profiled_after_its_first_session_start(project_dir: Path) -> None:
    seed(project_dir, [])  # a store, and nothing of this project's profile
    _package(project_dir)
    _start(project_dir)
    _wait(lambda: _stamp(project_dir)[1] == "done")
    facts = _facts(project_dir)
    assert facts["test_command"].startswith("pnpm test (from package.json")
    assert facts["package_manager"].startswith("pnpm")
    # the next session's digest shows it (the profile write invalidated the digest file)
    text = _start(project_dir)
    assert text and "## Project profile" in text and "pnpm test" in text


def test_unchanged_manifests_start_no_worker(project_dir: Path, agentctx_home: Path) -> None:
    seed(project_dir, [])
    _package(project_dir)
    _start(project_dir)
    _wait(lambda: _stamp(project_dir)[1] == "done")
    done_at = _stamp(project_dir)[2]
    for _ in range(3):
        _start(project_dir, "resume")
    time.sleep(1.0)  # a worker, had one been started, would have rewritten the stamp by now
    assert _stamp(project_dir)[2] == done_at
    log = (agentctx_home / "logs" / "workers.log").read_text()
    assert log.count("profile project: ") == 1, log


def test_a_changed_manifest_is_detected_again_and_supersedes_by_key(project_dir: Path) -> None:
    seed(project_dir, [])
    _package(project_dir)
    _start(project_dir)
    _wait(lambda: _stamp(project_dir)[1] == "done")
    before = _stamp(project_dir)[0]
    (project_dir / "pnpm-lock.yaml").unlink()
    (project_dir / "package-lock.json").write_text("{}")
    _start(project_dir)
    _wait(lambda: _stamp(project_dir)[1] == "done" and _stamp(project_dir)[0] != before)
    facts = _facts(project_dir)
    assert facts["test_command"].startswith("npm test (from package.json")
    assert facts["package_manager"].startswith("npm")
    versions = query("SELECT count(*) FROM records WHERE type = 'profile' AND key = 'test_command'")
    assert versions == [(2,)]  # the old one superseded, not edited


def test_cwd_changed_profiles_the_new_directory(project_dir: Path, tmp_path: Path) -> None:
    seed(project_dir, [])
    other = tmp_path / "api"
    other.mkdir()
    (other / "go.mod").write_text("module example.com/api\n\ngo 1.22\n")
    data = payload("CwdChanged", SID, other, old_cwd=str(project_dir), new_cwd=str(other))
    result = run_hook("cwd-changed", data, cwd=project_dir)
    assert result.returncode == 0 and result.stdout == b""
    _wait(lambda: _stamp(other)[1] == "done")
    assert _facts(other)["test_command"].startswith("go test ./...")


def test_a_folder_without_manifests_starts_nothing(project_dir: Path, agentctx_home: Path) -> None:
    seed(project_dir, [])
    _start(project_dir)
    assert _stamp(project_dir) == ("", "", 0.0, "")
    assert not (agentctx_home / "logs" / "workers.log").exists()


def test_the_fast_path_with_a_profiled_project_stays_light(project_dir: Path) -> None:
    seed(project_dir, [])
    _package(project_dir)
    _start(project_dir)
    _wait(lambda: _stamp(project_dir)[1] == "done")
    _start(project_dir)  # builds the digest file
    data = payload("SessionStart", SID, project_dir, source="startup")
    loaded = _modules("session-start", data, project_dir)
    for name in ("sqlean", "sqlite3", "json", "re", "typing", "dataclasses", "tomllib"):
        assert name not in loaded, f"SessionStart imported {name}"


def test_a_dead_worker_is_retried_later(project_dir: Path) -> None:
    _package(project_dir)
    project_id = identify(str(project_dir)).project_id
    signature = manifests.signature(str(project_dir))
    manifests.claim(project_id, signature)
    assert manifests.due(project_id, str(project_dir)) is None  # a worker runs
    path = manifests.stamp_path(project_id)
    with open(path, encoding="utf-8") as fh:
        text = fh.read().split("\n")
    text[1] = f"started {time.time() - manifests.RETRY_S - 1:.3f}"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(text))
    assert manifests.due(project_id, str(project_dir)) == signature


def test_symlinked_and_odd_manifests_are_not_read(project_dir: Path, tmp_path: Path) -> None:
    """Only regular files reached without a symlink: a link, even inside the repo, is skipped."""
    (project_dir / "config").mkdir()
    (project_dir / "config" / "package.json").write_text(json.dumps({"scripts": {"test": "x"}}))
    (project_dir / "package.json").symlink_to(project_dir / "config" / "package.json")
    os.mkfifo(project_dir / "go.mod")
    (project_dir / "Cargo.toml").mkdir()
    assert manifests.signature(str(project_dir)) == ""
    assert anyio.run(workers.profile, str(project_dir)) == []


@pytest.mark.anyio
async def test_a_hand_correction_stays_until_the_manifests_say_something_new(
    project_dir: Path, store: Store
) -> None:
    _package(project_dir)
    assert "test_command" in await workers.profile(str(project_dir))
    project_id = identify(str(project_dir)).project_id
    (old,) = [
        r
        for r in await store.list_records(project_id, types=("profile",))
        if r.key == "test_command"
    ]
    await store.supersede(old.id, "pnpm test -- --run (the CI form)", "the CI runs it so")
    assert await workers.profile(str(project_dir)) == []  # detection found the same as before
    scripts = {"test": "vitest run", "build": "vite build --mode prod", "lint": "eslint ."}
    (project_dir / "package.json").write_text(json.dumps({"name": "shop", "scripts": scripts}))
    assert await workers.profile(str(project_dir)) == ["build_command"]
    facts = _facts(project_dir)
    assert facts["test_command"] == "pnpm test -- --run (the CI form)"  # the correction stays
    (project_dir / "pnpm-lock.yaml").unlink()
    assert "test_command" in await workers.profile(str(project_dir))  # now `npm test`
    assert _facts(project_dir)["test_command"].startswith("npm test")


def test_after_init_session_start_detects_nothing_again(
    project_dir: Path, agentctx_home: Path
) -> None:
    _package(project_dir)
    done = run_cli("init", "--project", "--no-llm", "--no-embeddings", cwd=project_dir)
    assert done.returncode == 0, done.stderr
    assert _stamp(project_dir)[1] == "done"
    assert _facts(project_dir)["test_command"].startswith("pnpm test")
    _start(project_dir)
    log = agentctx_home / "logs" / "workers.log"
    assert not log.exists() or "profile " not in log.read_text()
