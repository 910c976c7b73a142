"""Shared by the reliability tests: hook payloads of every event, and waiting for detached workers."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from tests.helpers import payload

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

#: CLI name -> the Claude Code event it serves.
EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "subagent-start": "SubagentStart",
    "post-tool-use": "PostToolUse",
    "pre-compact": "PreCompact",
    "stop": "Stop",
    "session-end": "SessionEnd",
    "cwd-changed": "CwdChanged",
}
INJECTING = frozenset({"SessionStart", "UserPromptSubmit", "SubagentStart"})


def every_event(
    session_id: str, project: Path, transcript: Path
) -> list[tuple[str, dict[str, Any]]]:
    """One realistic payload per hook event, in a session's order."""
    fields: dict[str, dict[str, Any]] = {
        "session-start": {"source": "startup"},
        "user-prompt-submit": {"prompt": "how does the kestrel cache expire entries?"},
        "subagent-start": {"agent_type": "Explore"},
        "post-tool-use": {
            "tool_name": "Write",
            "tool_input": {"file_path": str(project / "src" / "cache.py"), "content": "x = 1\n"},
            "tool_response": {"filePath": str(project / "src" / "cache.py"), "success": True},
        },
        "pre-compact": {"trigger": "manual", "custom_instructions": ""},
        "stop": {"stop_hook_active": False},
        "session-end": {"reason": "prompt_input_exit"},
        "cwd-changed": {"new_cwd": str(project)},
    }
    out = []
    for cli, event in EVENTS.items():
        data = payload(event, session_id, project, **fields[cli])
        data["transcript_path"] = str(transcript)
        out.append((cli, data))
    return out


def workers_of(home_dir: str) -> list[int]:
    """Pids of the detached agentctx workers running for ``home_dir`` (Linux /proc; else none)."""
    return workers_where(lambda home: home == home_dir)


def workers_under(folder: str) -> list[int]:
    """Pids of the detached agentctx workers whose home is ``folder`` or lies under it."""
    inside = folder.rstrip(os.sep) + os.sep
    return workers_where(lambda home: home == folder or home.startswith(inside))


def workers_where(wanted: Callable[[str], bool]) -> list[int]:
    """Pids of the running ``python -m agentctx worker ...`` processes (and extraction
    children) whose ``AGENTCTX_HOME`` passes ``wanted`` (Linux /proc; else none). A zombie's
    command line reads empty: it counts as gone."""
    found = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            if b"agentctx" not in argv or not ({b"worker", b"extract"} & set(argv)):
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        homes = [v[len(b"AGENTCTX_HOME=") :] for v in env if v.startswith(b"AGENTCTX_HOME=")]
        if homes and wanted(os.fsdecode(homes[0])):
            found.append(pid)
    return found


def end_workers_under(folder: str, deadline_s: float = 30.0) -> list[int]:
    """Kill (SIGKILL) every detached worker whose home lies under ``folder`` and wait until each
    is gone; the pids killed. What the test that started them left running: a worker must not
    write into a folder its test is done with (or removes), nor take CPU from later tests."""
    import signal

    killed = workers_under(folder)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # exited meanwhile
            pass
    deadline = time.monotonic() + deadline_s
    while left := [p for p in workers_under(folder) if p in killed]:
        if time.monotonic() > deadline:  # SIGKILL cannot be ignored: only a stuck kernel
            raise AssertionError(f"killed workers still running after {deadline_s}s: {left}")
        time.sleep(0.01)
    return killed


def wait_for_workers(home_dir: str, deadline_s: float = 60.0) -> None:
    """Poll (with a deadline) until no detached worker of ``home_dir`` is left running."""
    deadline = time.monotonic() + deadline_s
    while running := workers_of(home_dir):
        if time.monotonic() > deadline:
            raise AssertionError(f"workers still running after {deadline_s}s: {running}")
        time.sleep(0.05)


def run_timed(cli: str, data: dict[str, Any], cwd: Path) -> tuple[bytes, bytes, float]:
    """``python -m agentctx hook <cli>``: (stdout, stderr, own seconds), asserting exit 0.

    Own seconds: the wall time less the time the process sat runnable in the CPU queue (Linux
    ``schedstat``, read before the exited child is reaped), i.e. what the hook itself took on a
    machine others load; the plain wall time where the OS does not say.
    """
    import json
    import subprocess
    import sys
    import tempfile

    with (
        tempfile.TemporaryFile() as fin,
        tempfile.TemporaryFile() as fout,
        tempfile.TemporaryFile() as ferr,
    ):
        fin.write(json.dumps(data).encode())
        fin.seek(0)
        began = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentctx", "hook", cli],
            stdin=fin,
            stdout=fout,
            stderr=ferr,
            cwd=cwd,
        )
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        seconds = time.monotonic() - began
        try:
            with open(f"/proc/{proc.pid}/schedstat") as fh:
                seconds -= int(fh.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            pass
        assert proc.wait() == 0
        fout.seek(0)
        ferr.seek(0)
        return fout.read(), ferr.read(), seconds
