"""What the end-to-end tests share: an isolated machine running the real ``claude`` and ``agentctx``.

:class:`Machine` lays out HOME, TMPDIR, an agentctx home and a project folder under one root, builds
the environment (``ANTHROPIC_BASE_URL`` at the loopback model server, this interpreter's ``agentctx``
first on PATH), runs commands there and reads what they left (the store, agentctx's logs); each
test adds its own checks and diagnostics. :func:`hook_contexts` reads the context a hook injected
out of a model request, :func:`wait_until` polls with a deadline (the tests never sleep a fixed time).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlean

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.messages_server import MessagesServer, Recorded


class Machine:
    """HOME, TMPDIR, agentctx home and a project under ``root``; the model server; commands."""

    claude_timeout_s = 120

    def __init__(
        self,
        root: Path,
        claude: Path,
        server: MessagesServer,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.claude = claude
        self.server = server
        self.home = root / "home"
        self.project = root / "project"
        self.agentctx_home = root / "agentctx"
        self.runs: list[subprocess.CompletedProcess[str]] = []
        self.last_started = datetime.now(UTC)
        tmp = root / "tmp"
        self.env = {
            # Claude Code runs `agentctx …` through PATH: this interpreter's console script first
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            "HOME": str(self.home),
            "TMPDIR": str(tmp),
            "CLAUDE_CODE_TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "AGENTCTX_HOME": str(self.agentctx_home),
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "GIT_AUTHOR_NAME": "Test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
            **(extra_env or {}),
        }
        for folder in (self.home, tmp, self.project):
            folder.mkdir()

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command in the project folder; the test fails (with its output) unless it exits 0."""
        result = subprocess.run(
            list(argv),
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"{argv}: exit {result.returncode}\n{result.stderr}"
        return result

    def agentctx(self, *args: str) -> Any:
        """The ``agentctx`` console script found on PATH, with ``--json``; its parsed output."""
        return json.loads(self.run("agentctx", *args, "--json").stdout)

    def commit_project(self) -> None:
        """Make the project a git repository with an origin remote and one commit."""
        self.run("git", "init", "-q", "-b", "main")
        self.run("git", "remote", "add", "origin", "git@github.com:acme/shop.git")
        self.run("git", "add", "-A")
        self.run("git", "commit", "-q", "-m", "Initial commit")

    def claude_p(self, prompt: str, *args: str) -> dict[str, Any]:
        """``claude -p PROMPT --output-format json ARGS``; the result object it prints."""
        self.last_started = datetime.now(UTC)
        result = subprocess.run(
            [str(self.claude), "-p", prompt, "--output-format", "json", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=self.claude_timeout_s,
            check=False,
        )
        self.runs.append(result)
        assert result.returncode == 0, self.diagnostics()
        output = json.loads(result.stdout)
        assert isinstance(output, dict) and output.get("is_error") is False, self.diagnostics()
        return output

    def claude_turns(
        self,
        prompts: list[str],
        *args: str,
        between: Callable[[int], object] = lambda index: None,
    ) -> list[dict[str, Any]]:
        """Several prompts in ONE ``claude -p`` process (``--input-format stream-json``): one
        session, one SessionEnd; the result object of each turn, in order.

        ``between(i)`` runs before prompt ``i`` (from 1) is written to Claude Code's stdin, so a
        test can hold the next turn back until something has happened.
        """
        self.last_started = datetime.now(UTC)
        argv = [str(self.claude), "-p", "--input-format", "stream-json"]
        argv += ["--output-format", "stream-json", "--verbose", *args]
        out_path, err_path = self.root / "claude.out", self.root / "claude.err"
        with out_path.open("w") as out, err_path.open("w") as err:
            process = subprocess.Popen(
                argv, cwd=self.project, env=self.env, stdin=subprocess.PIPE, stdout=out,
                stderr=err, text=True,
            )  # fmt: skip
            assert process.stdin is not None
            try:
                for index, prompt in enumerate(prompts):
                    if index:
                        between(index)
                    message = {"type": "user", "message": {"role": "user", "content": prompt}}
                    process.stdin.write(json.dumps(message) + "\n")
                    process.stdin.flush()
                process.stdin.close()
                process.wait(timeout=self.claude_timeout_s)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        result = subprocess.CompletedProcess(
            argv, process.returncode, out_path.read_text(), err_path.read_text()
        )
        self.runs.append(result)
        assert result.returncode == 0, self.diagnostics()
        events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        outputs = [e for e in events if isinstance(e, dict) and e.get("type") == "result"]
        assert len(outputs) == len(prompts), self.diagnostics()
        assert all(o.get("is_error") is False for o in outputs), self.diagnostics()
        return outputs

    def last_run(self) -> list[str]:
        """The last ``claude`` run's arguments, exit code and output tails, for diagnostics."""
        if not self.runs:
            return []
        last = self.runs[-1]
        return [
            f"{last.args[1:]} exited {last.returncode}",
            f"stdout: {last.stdout[-2000:]}\nstderr: {last.stderr[-2000:]}",
        ]

    def diagnostics(self) -> str:
        """What to read when a step fails (tests add their own logs)."""
        return "\n".join(self.last_run())

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows from the store, read-only."""
        path = self.agentctx_home / "agentctx.db"
        conn = sqlean.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [tuple(row) for row in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        """The one row a query returns; the test fails (with the rows and diagnostics) otherwise."""
        rows = self.query(sql, params)
        assert len(rows) == 1, f"{len(rows)} rows: {rows}\n{self.diagnostics()}"
        return rows[0]

    def log(self, name: str) -> list[str]:
        """The lines of one of agentctx's logs (``hooks.log``, ``workers.log``); [] before any."""
        path = self.agentctx_home / "logs" / name
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    def hooks_log(self) -> list[str]:
        """agentctx's hooks log (hooks never print errors; they log them here)."""
        return self.log("hooks.log")


#: Where Claude Code 2.1.332 starts a hook's ``additionalContext`` in the text it sends the model.
_CONTEXT_START = re.compile(r"(\w+) hook additional context: ")


def hook_contexts(request: Recorded, event: str) -> list[str]:
    """Every ``additionalContext`` of ``event`` in a model request, in order.

    Claude Code puts each in a ``role: "system"`` entry of ``messages`` after the words
    "<event> hook additional context: ", often in one text with other context of its own or of
    another hook. Each runs to the next hook's context or the end of the text, so it may end with
    Claude Code's own context ("# Environment …", "Today's date is …").
    """
    found: list[str] = []
    for message in request.body["messages"]:
        for block in blocks(message):
            text = block.get("text")
            if not isinstance(text, str):
                continue
            starts = list(_CONTEXT_START.finditer(text))
            for index, match in enumerate(starts):
                if match.group(1) != event:
                    continue
                end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
                found.append(text[match.end() : end])
    return found


def texts(message: dict[str, Any]) -> list[str]:
    """The texts of a message's text blocks."""
    return [b["text"] for b in blocks(message) if isinstance(b.get("text"), str)]


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content blocks (a string content is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]
