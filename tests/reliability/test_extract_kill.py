"""``kill -9`` of ``agentctx extract`` at random points, then a rerun: nothing lost, nothing doubled.

One session, a real Claude Code transcript from the shared fixtures. Each trial appends a turn
("Trial k: ...") to the transcript, starts ``agentctx extract`` against the loopback Messages API
server (which answers with one decision naming the newest trial it was sent) and kills it: at a
random moment of the run on even trials (imports, store, transcript, request), and at a random
moment after the request reached the server on odd ones (the call, the answer, the write). A rerun
must then complete (never ``locked``: the flock dies with its holder), every trial's decision must
be in the store exactly once, and the session's position must be the transcript's last line.
Consolidation has its own kill trials in ``tests/test_consolidate.py``.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from contextlib import closing
from typing import TYPE_CHECKING, Any

import sqlean

from agentctx.claude.transcript import read_transcript
from agentctx.core import clock, home
from agentctx.core.locks import extraction_lock
from agentctx.extract import prompt
from tests.messages_server import MessagesServer, Recorded, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

TRIALS = 10
SID = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # the fixture's own session id
LATENCY = 0.3
_TRIAL = re.compile(r"Trial (\d+): ")


def _answer(request: Recorded) -> ToolUseReply:
    """One decision for the newest trial in the request (the part not yet extracted)."""
    found = [int(n) for text in request.texts() for n in _TRIAL.findall(text)]
    decisions = [
        {"what": f"Trial {max(found)} decision: shard the cache by tenant", "rationale": "isolation",
         "supersedes": None, "confidence": "explicit", "keywords": ["cache", f"trial{max(found)}"]}
    ] if found else []  # fmt: skip
    return ToolUseReply(prompt.TOOL_NAME, {"flush_ok": not decisions, "decisions": decisions})


def _append_trial(path: Path, trial: int) -> None:
    lines: list[dict[str, Any]] = []
    for role, text in (
        ("user", f"Trial {trial}: let's shard the cache by tenant, decided."),
        ("assistant", f"Noted for trial {trial}; sharding the cache by tenant."),
    ):
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        lines.append({
            "type": role, "uuid": f"7{trial:03d}{len(lines)}-0000-4000-8000-000000000000",
            "sessionId": SID, "cwd": str(path.parent), "timestamp": clock.now(),
            "isSidechain": False, "message": {"role": role, "content": content},
        })  # fmt: skip
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(line) + "\n" for line in lines)


def _extract(path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentctx", "extract", "--session-id", SID,
         "--transcript", str(path), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **env},
    )  # fmt: skip


def _state() -> tuple[list[str], str | None]:
    """The current decisions' titles and the session's extraction position."""
    conn = sqlean.connect(home.db_path())
    with closing(conn):
        if not conn.execute("PRAGMA user_version").fetchone()[0]:
            return [], None  # killed while creating the store: the migrations rolled back
        titles = [r[0] for r in conn.execute("SELECT title FROM records WHERE type = 'decision'")]
        row = conn.execute(
            "SELECT extracted_uuid FROM sessions WHERE session_id = ?", (SID,)
        ).fetchone()
    return sorted(titles), (row[0] if row else None)


def test_kill_9_of_extraction_loses_and_doubles_nothing(
    transcripts: list[Path], tmp_path: Path
) -> None:
    (fixture,) = [p for p in transcripts if p.name == "spotter-tool_heavy.jsonl"]
    path = tmp_path / f"{SID}.jsonl"
    shutil.copyfile(fixture, path)
    rng = random.Random(7)
    phases: list[str] = []
    with MessagesServer(_answer, latency=LATENCY) as server:
        env = {"ANTHROPIC_API_KEY": "sk-fake", "ANTHROPIC_BASE_URL": server.url}
        for trial in range(TRIALS):
            _append_trial(path, trial)
            sent = len(server.messages_requests())
            before, _ = _state() if os.path.exists(home.db_path()) else ([], None)
            proc = _extract(path, env)
            # Not a wait for something: the kill lands at a random moment, which is the trial.
            kind = trial % 4
            if kind == 0:  # anywhere: imports, the store, the transcript, the request
                time.sleep(rng.uniform(0.05, 2.0))
            elif kind == 3:  # as soon as the write committed, before the process is done
                _wait_for_decision(trial)
            else:  # once the request is at the server: during the call, or after the answer
                (request,) = server.wait_for(_more_than(sent), timeout=60)[sent:]
                answered = request.received + LATENCY
                target = (
                    answered - rng.uniform(0.05, LATENCY) if kind == 1
                    else answered + rng.uniform(0.0, 0.3)
                )  # fmt: skip
                time.sleep(max(0.0, target - time.monotonic()))
            killed_at = time.monotonic()
            alive = proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            killed, _ = _state() if os.path.exists(home.db_path()) else ([], None)
            requests = server.messages_requests()[sent:]
            phases.append(
                "after exit" if not alive
                else "after commit" if killed != before
                else "before the call" if not requests
                else "during the call" if killed_at < requests[0].received + LATENCY
                else "after the answer, before commit"
            )  # fmt: skip

            with extraction_lock(SID) as held:
                assert held, f"trial {trial}: the killed run left its lock held"
            rerun = _extract(path, env)
            out, err = rerun.communicate(timeout=120)
            assert rerun.returncode == 0 and b"Traceback" not in err, err.decode(errors="replace")
            report = json.loads(out)
            assert report["status"] in ("extracted", "nothing_new"), (trial, phases[-1], report)

            titles, position = _state()
            want = [f"Trial {k} decision: shard the cache by tenant" for k in range(trial + 1)]
            assert titles == sorted(want), (trial, phases[-1], titles)  # each once
            assert (
                position
                == read_transcript(path).last_uuid
                == f"7{trial:03d}1-0000-4000-8000-000000000000"
            )
    sys.stderr.write(f"\nextraction kill points: {phases}\n")


def _more_than(count: int) -> Callable[[list[Recorded]], bool]:
    return lambda requests: len(requests) > count


def _wait_for_decision(trial: int) -> None:
    """Poll the store (with a deadline) until the trial's decision is committed."""
    deadline = time.monotonic() + 60
    want = f"Trial {trial} decision: shard the cache by tenant"
    while time.monotonic() < deadline:
        if os.path.exists(home.db_path()) and want in _state()[0]:
            return
        time.sleep(0.005)
    raise AssertionError(f"trial {trial}: the decision was never written")
