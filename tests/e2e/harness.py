"""What both end-to-end tests share: an isolated machine running the real ``claude`` and ``agentctx``.

:class:`Machine` lays out HOME, TMPDIR, an agentctx home and a project folder under one root, builds
the environment (``ANTHROPIC_BASE_URL`` at the loopback model server, this interpreter's ``agentctx``
first on PATH), and runs commands there; each test adds its own checks and diagnostics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.messages_server import MessagesServer


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


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content blocks (a string content is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]
