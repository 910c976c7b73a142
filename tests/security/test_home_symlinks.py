"""Issue 24, finding 8: files of the home opened by a fixed name followed planted symlinks.

``sweep.stamp`` and the lock files of consolidation and extraction were created, or had their time
changed, outside the home. Every file agentctx names itself in its home now goes through
:mod:`agentctx.core.nofollow`: a symlink at the name (or a FIFO, or a folder) is refused, never
created, read, appended to or touched through. Each test plants links for the fixed names, runs
the real hooks and commands that use them, and checks the files the links point at: the same
bytes and the same modification time, and a link to a missing file creates nothing.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import pytest

from agentctx.consolidate import drift
from agentctx.core import digests, ledger, locks, pinned
from agentctx.core.project import identify
from agentctx.embeddings import thresholds
from agentctx.extract import prompt
from tests.helpers import fixtures_dir, payload, run_cli, run_hook
from tests.messages_server import MessagesServer, ToolUseReply

if TYPE_CHECKING:
    from pathlib import Path

SID = "s-links"
PAST = 1_000_000_000  # 2001: any touch through a link would move it to now
PLANTED = "PLANTED-BY-A-LINK"


def fixed_names(home: Path, project_dir: Path) -> dict[str, str]:
    """A label for each file agentctx names itself in the home, and its path."""
    project_id = identify(str(project_dir)).project_id
    return {
        "sweep.stamp": str(home / "sweep.stamp"),
        "hooks.log": str(home / "logs" / "hooks.log"),
        "consolidation lock": locks.lock_path(f"consolidate-{project_id}"),
        "extraction lock": locks.lock_path(locks.extraction_lock_name(SID)),
        "digest": digests.path_for(project_id),
        "digest marker": os.path.join(home, "digests", f"{project_id}.changed"),
        "pinned list": pinned.path_for(project_id),
        "ledger": ledger.path_for(SID),
        "spool file": str(home / "spool" / "01JAAAAAAAAAAAAAAAAAAAAAAA.json"),
        "thresholds": thresholds.state_path(),
        "drift seal": drift._seal_path(project_id),
        "installed.json": str(home / "installed.json"),
        "profile mirror": str(home / "profile" / "preferences.md"),
    }


def victim_text(label: str, project_dir: Path) -> bytes:
    """What the outside file holds: something that would show if it were read as ours."""
    project_id = identify(str(project_dir)).project_id
    if label == "digest":  # a well-formed digest: read through the link, it would be injected
        parts = {"head": PLANTED, "tail": "", "ids": []}
        data = {"version": 2, "project_id": project_id, "text": PLANTED, "ids": [], "parts": parts}
        return json.dumps(data).encode()
    if label == "pinned list":
        return json.dumps([{"id": "01JX", "title": PLANTED, "body": PLANTED}]).encode()
    if label == "spool file":
        return json.dumps([{"kind": "note", "title": PLANTED}]).encode()
    return f"{PLANTED} {label}\n".encode()


def plant(home: Path, project_dir: Path, outside: Path) -> dict[str, tuple[Path, bytes | None]]:
    """Links at every fixed name: half to an existing outside file (old time), half dangling."""
    planted: dict[str, tuple[Path, bytes | None]] = {}
    for n, (label, path) in enumerate(sorted(fixed_names(home, project_dir).items())):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        target = outside / f"{n:02d}-{label.replace(' ', '-')}"
        if n % 2 == 0:
            content: bytes | None = victim_text(label, project_dir)
            assert content is not None
            target.write_bytes(content)
            os.utime(target, (PAST, PAST))
        else:
            content = None  # dangling: following the link would create the file
        os.symlink(target, path)
        planted[label] = (target, content)
    return planted


def assert_untouched(planted: dict[str, tuple[Path, bytes | None]]) -> None:
    for label, (target, content) in planted.items():
        if content is None:
            assert not target.exists(), f"{label}: created through the link"
        else:
            assert target.read_bytes() == content, f"{label}: written through the link"
            assert target.stat().st_mtime == PAST, f"{label}: touched through the link"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


@pytest.fixture
def initialized(agentctx_home: Path, project_dir: Path) -> Path:
    (project_dir / "pyproject.toml").write_text('[project]\nname = "shop"\n')
    init = run_cli("init", "--no-mcp", "--no-llm", "--no-embeddings", cwd=project_dir)
    assert init.returncode == 0, init.stderr
    added = run_cli(
        "record", "--type", "decision", "--title", "Queue", "--body", "Use Kafka for the queue.",
        cwd=project_dir,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    return agentctx_home


def test_hooks_and_commands_never_follow_a_link_at_a_fixed_name(
    initialized: Path, project_dir: Path, outside: Path
) -> None:
    planted = plant(initialized, project_dir, outside)

    start = run_hook("session-start", payload("SessionStart", SID, project_dir, source="startup"))
    assert start.returncode == 0
    assert PLANTED not in start.stdout.decode()
    assert "Use Kafka" in start.stdout.decode()  # the digest is rebuilt from the store instead
    prompt_hook = run_hook(
        "user-prompt-submit", payload("UserPromptSubmit", SID, project_dir, prompt="Kafka queue")
    )
    assert prompt_hook.returncode == 0
    assert PLANTED not in prompt_hook.stdout.decode()
    captured = run_hook(
        "post-tool-use",
        payload(
            "PostToolUse", SID, project_dir, tool_name="Bash", tool_input={"command": "make test"},
            tool_response={"stdout": "", "stderr": "error: 3 failed", "exit_code": 2},
        ),
    )  # fmt: skip
    assert captured.returncode == 0
    assert run_hook("session-start", b"not json").returncode == 0  # a line for hooks.log
    for args in (
        ("init", "--no-mcp", "--no-llm", "--no-embeddings"),
        ("search", "Kafka"),
        ("profile", "show"),
        ("consolidate",),
    ):
        done = run_cli(*args, cwd=project_dir)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert PLANTED not in done.stdout, args
    show = run_cli("search", "PLANTED", cwd=project_dir)
    assert PLANTED not in show.stdout  # the spool file behind the link was never applied

    assert_untouched(planted)


def test_a_refused_lock_stops_consolidation_and_extraction_in_one_line(
    initialized: Path, project_dir: Path, outside: Path
) -> None:
    project_id = identify(str(project_dir)).project_id
    for name in (f"consolidate-{project_id}", locks.extraction_lock_name(SID)):
        victim = outside / name
        victim.write_bytes(b"victim\n")
        os.utime(victim, (PAST, PAST))
        os.makedirs(os.path.dirname(locks.lock_path(name)), exist_ok=True)
        os.symlink(victim, locks.lock_path(name))

    consolidated = run_cli("consolidate", "--json", cwd=project_dir)
    assert "Traceback" not in consolidated.stderr
    assert "symbolic link" in consolidated.stdout + consolidated.stderr

    assert run_cli("config", "set", "llm", "on", cwd=project_dir).returncode == 0
    transcript = fixtures_dir() / "transcripts" / "spotter-subagent.jsonl"
    reply = ToolUseReply(prompt.TOOL_NAME, {"flush_ok": True})
    with MessagesServer(replies=[reply]) as server:
        env = {"ANTHROPIC_API_KEY": "sk-test-key", "ANTHROPIC_BASE_URL": server.url}
        args = ("extract", "--session-id", SID, "--transcript", str(transcript))
        extracted = run_cli(*args, cwd=project_dir, env=env)
        assert server.messages_requests() == []  # nothing ran without its lock
    assert extracted.returncode == 1
    assert len(extracted.stderr.strip().splitlines()) == 1, extracted.stderr
    assert "symbolic link" in extracted.stderr

    for victim in outside.iterdir():
        assert victim.read_bytes() == b"victim\n"
        assert victim.stat().st_mtime == PAST


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_fifos_and_folders_at_fixed_names_do_not_block_a_hook(
    initialized: Path, project_dir: Path
) -> None:
    names = fixed_names(initialized, project_dir)
    for n, label in enumerate(("sweep.stamp", "digest", "ledger", "thresholds", "pinned list")):
        path = names[label]
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        if n % 2:
            os.mkdir(path, 0o700)
        else:
            os.mkfifo(path, 0o600)

    for event, data in (
        ("session-start", payload("SessionStart", SID, project_dir, source="startup")),
        ("user-prompt-submit", payload("UserPromptSubmit", SID, project_dir, prompt="Kafka")),
    ):
        result = run_hook(event, data, timeout=60)  # a blocked open would hang here
        assert result.returncode == 0, (event, result.stderr)


@pytest.mark.parametrize("folder", ["locks", "digests", "sessions", "spool", "logs", "state"])
def test_a_symlinked_folder_of_the_home_is_refused(
    initialized: Path, project_dir: Path, outside: Path, folder: str
) -> None:
    real = initialized / folder
    if real.exists():
        os.rename(real, outside / f"was-{folder}")
    (initialized / folder).symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())

    refused = run_cli("status", cwd=project_dir)
    assert refused.returncode == 1
    assert f"{initialized / folder} is a symlink" in refused.stderr
    for event, data in (
        ("session-start", payload("SessionStart", SID, project_dir, source="startup")),
        ("user-prompt-submit", payload("UserPromptSubmit", SID, project_dir, prompt="Kafka")),
    ):
        result = run_hook(event, data)
        assert result.returncode == 0 and result.stdout == b""
    assert sorted(p.name for p in outside.iterdir()) == before
