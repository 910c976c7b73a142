"""An event of Claude Code as the capture rules read it: its name, its payload, its project.

The hooks get one per process (:class:`agentctx.hooks.runner.HookContext`, which logs to the hooks
log); ``agentctx extract --no-llm`` builds one per tool call of a transcript
(:mod:`agentctx.extract.replay`), so the rules of :mod:`agentctx.core.capture` are written once.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agentctx.core.project import ProjectIdentity


class Event:
    """The event, its payload, lazily the project it happened in, and where its notes go."""

    __slots__ = ("_project", "_say", "event", "payload")

    def __init__(
        self, event: str, payload: dict[str, Any], say: Callable[[str], None] | None = None
    ) -> None:
        self.event = event
        self.payload = payload
        self._project: ProjectIdentity | None = None
        self._say = say

    def text(self, key: str) -> str:
        """A string field of the payload ('' when absent or not a string; NULs replaced).

        These fields become paths, command lines and keys, where a NUL is refused (``ValueError:
        embedded null byte``); Claude Code never sends one, so it is only ever damage.
        """
        value = self.payload.get(key)
        if not isinstance(value, str):
            return ""
        return value.replace("\x00", "\ufffd") if "\x00" in value else value

    @property
    def session_id(self) -> str:
        """The Claude Code session id ('' when absent)."""
        return self.text("session_id")

    @property
    def cwd(self) -> str:
        """The session's working directory (payload, else CLAUDE_PROJECT_DIR, else ours)."""
        return self.text("cwd") or os.environ.get("CLAUDE_PROJECT_DIR", "") or os.getcwd()

    @property
    def project(self) -> ProjectIdentity:
        """The project the session works in."""
        if self._project is None:
            from agentctx.core.project import identify

            self._project = identify(self.cwd)
        return self._project

    def log(self, message: str) -> None:
        """A note about this event (the hooks log, for a hook)."""
        if self._say is not None:
            self._say(message)
