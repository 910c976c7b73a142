"""Helpers to run agentctx as users and Claude Code do: real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

FORBIDDEN = ("cyclopts", "anthropic", "mcp", "fastembed", "numpy", "pydantic")


def run_hook(
    event: str,
    payload: dict[str, Any] | bytes | str | None,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m agentctx hook <event>`` with ``payload`` on stdin (dicts are JSON-encoded)."""
    if isinstance(payload, dict):
        data = json.dumps(payload).encode()
    elif isinstance(payload, str):
        data = payload.encode()
    else:
        data = payload or b""
    return subprocess.run(
        [sys.executable, "-m", "agentctx", "hook", event],
        input=data,
        capture_output=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def contract(result: subprocess.CompletedProcess[bytes], event: str) -> str | None:
    """The additionalContext of a hook's stdout, asserting the exact contract shape (None if empty)."""
    assert result.returncode == 0, result.stderr
    if not result.stdout:
        return None
    data = json.loads(result.stdout)
    assert set(data) == {"hookSpecificOutput"}
    inner = data["hookSpecificOutput"]
    assert set(inner) == {"hookEventName", "additionalContext"}
    assert inner["hookEventName"] == event
    assert isinstance(inner["additionalContext"], str)
    return str(inner["additionalContext"])


def payload(event: str, session_id: str, cwd: Path, **extra: Any) -> dict[str, Any]:
    """A payload with the common fields Claude Code sends."""
    return {
        "session_id": session_id,
        "transcript_path": str(cwd / ".transcript.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


def run_cli(
    *args: str,
    cwd: Path | str | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``agentctx`` console entry point in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agentctx", *args],
        cwd=cwd,
        input=input,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
