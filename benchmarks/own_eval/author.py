"""Write the eval's Claude Code transcripts (``transcripts/*.jsonl``) from the session scripts.

The scripts (``sessions/NN-*.txt``) are the readable source: a few ``key: value`` header lines,
then blocks, each opened by a marker line and holding the lines up to the next marker:

``@hook <name>`` a SessionStart ``hook_progress`` line · ``@user`` a prompt the developer typed ·
``@assistant`` / ``@thinking`` an assistant text or thinking block · ``@tool <Name> <json input>`` a
tool call · ``@result`` / ``@error`` its result · ``@interrupt`` the developer stopping a tool call ·
``@command <name>`` a slash command (with its caveat line) · ``@stdout`` the command's output.

The JSONL follows the layout of the real Claude Code 2.1.38 files in
``tests/fixtures/transcripts/`` (``spotter-tool_heavy.jsonl``): ``file-history-snapshot`` before each
prompt, ``progress`` lines for hooks, one line per content block with the blocks of one API
response sharing its ``msg_`` id and ``requestId``, ``tool_result`` lines with ``toolUseResult`` and
``sourceToolAssistantUUID``, ``system``/``local_command`` lines, the ``parentUuid`` chain. Ids and
times are derived from the session id and the line's index, so writing twice gives the same bytes
(``python benchmarks/own_eval/author.py`` rewrites them; ``--check`` only compares).

Every line's ``cwd`` is :data:`CWD`; the runner moves it to the temporary project folder. Paths in
tool calls stay as written, as in a transcript recorded on another machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SESSIONS = HERE / "sessions"
TRANSCRIPTS = HERE / "transcripts"
CWD = "/home/dev/src/shortlink"
MODEL = "claude-opus-4-6"
MARKERS = (
    "@hook", "@user", "@assistant", "@thinking", "@tool", "@result", "@error", "@interrupt",
    "@command", "@stdout",
)  # fmt: skip
#: Seconds each kind of block advances the clock (a developer types; tools are quick).
STEP = {"@user": 41.0, "@assistant": 6.5, "@thinking": 3.0, "@tool": 2.2, "@result": 1.4}
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass(slots=True)
class Block:
    """One scripted block: its marker, the marker line's argument, and its text."""

    marker: str
    arg: str
    text: str


@dataclass(slots=True)
class Script:
    """A parsed session script."""

    name: str
    header: dict[str, str]
    blocks: list[Block] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        """The Claude Code session id (the transcript's file name)."""
        return self.header["session"]


def parse_script(name: str, text: str) -> Script:
    """Header lines until the first marker, then the blocks."""
    script = Script(name, {})
    current: Block | None = None
    lines: list[str] = []
    for line in text.splitlines():
        word = line.split(" ", 1)[0]
        if word in MARKERS:
            if current is not None:
                current.text = "\n".join(lines).strip("\n")
                script.blocks.append(current)
            current = Block(word, line[len(word) :].strip(), "")
            lines = []
        elif current is None:
            key, sep, value = line.partition(":")
            if sep:
                script.header[key.strip()] = value.strip()
        else:
            lines.append(line)
    if current is not None:
        current.text = "\n".join(lines).strip("\n")
        script.blocks.append(current)
    for key in ("session", "start", "version", "branch", "slug"):
        if key not in script.header:
            raise ValueError(f"{name}: header {key!r} missing")
    return script


def load_scripts(folder: Path = SESSIONS) -> list[Script]:
    """Every session script, in file-name order (the order the sessions happened in)."""
    return [parse_script(p.name, p.read_text()) for p in sorted(folder.glob("*.txt"))]


class _Writer:
    """Turns blocks into transcript lines, keeping the uuid chain, the clock and the open call."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.sid = script.session_id
        self.clock = datetime.fromisoformat(script.header["start"].replace("Z", "+00:00"))
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.count = 0
        self.response: tuple[str, str] | None = None  # (msg id, request id) of the open response
        self.pending_tool: tuple[str, str, str, dict[str, Any]] | None = None
        self.prompted = False

    # -- ids and time --------------------------------------------------------------------------

    def _digest(self, label: str) -> bytes:
        self.count += 1
        return hashlib.sha256(f"{self.sid}:{self.count}:{label}".encode()).digest()

    def uuid(self) -> str:
        h = self._digest("uuid").hex()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"

    def token(self, prefix: str, size: int) -> str:
        value = int.from_bytes(self._digest(prefix), "big")
        chars = []
        for _ in range(size):
            value, rest = divmod(value, 62)
            chars.append(_B62[rest])
        return prefix + "".join(chars)

    def tick(self, seconds: float) -> str:
        self.clock += timedelta(seconds=seconds)
        return self.clock.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{self.clock.microsecond // 1000:03d}Z"
        )

    # -- lines ---------------------------------------------------------------------------------

    def base(self, kind: str) -> dict[str, Any]:
        line: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": self.sid,
            "version": self.script.header["version"],
            "gitBranch": self.script.header["branch"],
        }
        if self.prompted:
            line["slug"] = self.script.header["slug"]
        line["type"] = kind
        return line

    def emit(self, line: dict[str, Any], stamp: str, *, chain: bool = True) -> str:
        uuid = self.uuid()
        line["uuid"] = uuid
        line["timestamp"] = stamp
        self.lines.append(line)
        if chain:
            self.parent = uuid
        return uuid

    def hook(self, name: str) -> None:
        event = name.split(":", 1)[0]
        line = self.base("progress")
        tool_use = self.uuid()
        line["data"] = {
            "type": "hook_progress",
            "hookEvent": event,
            "hookName": name,
            "command": "agentctx hook session-start",
        }
        line["parentToolUseID"] = tool_use
        line["toolUseID"] = tool_use
        self.emit(line, self.tick(0.3))

    def prompt(self, content: str | list[dict[str, Any]], *, kind: str = "typed") -> str:
        """A user line: ``typed`` by the developer, ``meta`` (a caveat) or ``plain`` (command I/O)."""
        self.response = None
        stamp = self.tick(STEP["@user"] if kind == "typed" else 0.0)
        line = self.base("user")
        line["message"] = {"role": "user", "content": content}
        if kind == "meta":
            line["isMeta"] = True
        if kind != "typed":
            return self.emit(line, stamp)
        message_id = self.uuid()
        self.lines.append(
            {
                "type": "file-history-snapshot",
                "messageId": message_id,
                "snapshot": {
                    "messageId": message_id,
                    "trackedFileBackups": {},
                    "timestamp": stamp,
                },
                "isSnapshotUpdate": False,
            }
        )
        line["thinkingMetadata"] = {"maxThinkingTokens": 31999}
        line["todos"] = []
        line["permissionMode"] = "acceptEdits"
        uuid = self.emit(line, stamp)
        self.prompted = True
        return uuid

    def assistant(self, block: dict[str, Any], seconds: float) -> str:
        if self.response is None:
            self.response = (self.token("msg_01", 22), self.token("req_011C", 18))
        message_id, request_id = self.response
        size = len(json.dumps(block))
        usage = {
            "input_tokens": 3 + self.count % 7,
            "cache_creation_input_tokens": 180 + (self.count * 37) % 900,
            "cache_read_input_tokens": 18000 + self.count * 211,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 0,
                "ephemeral_1h_input_tokens": 180 + (self.count * 37) % 900,
            },
            "output_tokens": max(1, size // 4),
            "service_tier": "standard",
            "inference_geo": "not_available",
        }
        line = self.base("assistant")
        line["message"] = {
            "model": MODEL,
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        line["requestId"] = request_id
        # the real files put "type" after requestId on assistant lines
        line["type"] = line.pop("type")
        return self.emit(line, self.tick(seconds))

    def tool(self, arg: str) -> None:
        name, _, raw = arg.partition(" ")
        tool_input = json.loads(raw) if raw.strip() else {}
        tool_id = self.token("toolu_01", 22)
        block = {
            "type": "tool_use",
            "id": tool_id,
            "name": name,
            "input": tool_input,
            "caller": {"type": "direct"},
        }
        source = self.assistant(block, STEP["@tool"])
        self.pending_tool = (tool_id, source, name, tool_input)

    def result(self, text: str, *, error: bool) -> None:
        if self.pending_tool is None:
            raise ValueError(f"{self.script.name}: a result without a tool call")
        tool_id, source, name, tool_input = self.pending_tool
        self.pending_tool = None
        self.response = None
        content = text
        if name == "Read" and not error:  # Read results carry line numbers, as Claude Code prints
            content = "\n".join(
                f"{n:>6}\u2192{line}" for n, line in enumerate(text.split("\n"), start=1)
            )
        line = self.base("user")
        line["message"] = {
            "role": "user",
            "content": [
                {
                    "tool_use_id": tool_id,
                    "type": "tool_result",
                    "content": content,
                    "is_error": error,
                }
            ],
        }
        self.emit(line, self.tick(STEP["@result"]))
        line["toolUseResult"] = _tool_use_result(name, tool_input, text, error)
        line["sourceToolAssistantUUID"] = source

    def interrupt(self) -> None:
        if self.pending_tool is not None:
            self.result("[Request interrupted by user for tool use]", error=True)
        self.prompt([{"type": "text", "text": "[Request interrupted by user for tool use]"}])

    def command(self, name: str) -> None:
        caveat = (
            "<local-command-caveat>Caveat: The messages below were generated by the user while "
            "running local commands. DO NOT respond to these messages or otherwise consider them "
            "in your response unless the user explicitly asks you to.</local-command-caveat>"
        )
        self.prompt(caveat, kind="meta")
        call = (
            f"<command-name>/{name}</command-name>\n            "
            f"<command-message>{name}</command-message>\n            <command-args></command-args>"
        )
        self.prompt(call, kind="plain")
        line = self.base("system")
        line["subtype"] = "local_command"
        line["content"] = call
        line["level"] = "info"
        line["isMeta"] = False
        self.emit(line, self.tick(0.8))

    def stdout(self, text: str) -> None:
        self.prompt(f"<local-command-stdout>{text}</local-command-stdout>", kind="plain")

    def write(self) -> list[dict[str, Any]]:
        for block in self.script.blocks:
            if block.marker == "@hook":
                self.hook(block.arg or "SessionStart:startup")
            elif block.marker == "@user":
                self.prompt(block.text)
            elif block.marker == "@assistant":
                self.assistant({"type": "text", "text": block.text}, STEP["@assistant"])
            elif block.marker == "@thinking":
                signature = self.token("Es", 120)
                thinking = {"type": "thinking", "thinking": block.text, "signature": signature}
                self.assistant(thinking, STEP["@thinking"])
            elif block.marker == "@tool":
                self.tool(block.arg)
            elif block.marker in ("@result", "@error"):
                self.result(block.text, error=block.marker == "@error")
            elif block.marker == "@interrupt":
                self.interrupt()
            elif block.marker == "@command":
                self.command(block.arg)
            elif block.marker == "@stdout":
                self.stdout(block.text)
        if self.pending_tool is not None:
            raise ValueError(f"{self.script.name}: the last tool call has no result")
        return self.lines


def _tool_use_result(name: str, tool_input: dict[str, Any], text: str, error: bool) -> Any:
    if error:
        return f"Error: {text}"
    if name == "Bash":
        return {
            "stdout": text,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
    if name == "Read":
        return {
            "type": "text",
            "file": {
                "filePath": tool_input.get("file_path", ""),
                "content": text,
                "numLines": text.count("\n") + 1,
                "startLine": 1,
                "totalLines": text.count("\n") + 1,
            },
        }
    if name in ("Grep", "Glob"):
        found = [line.split(":", 1)[0] for line in text.splitlines() if line]
        return {"mode": "content", "filenames": sorted(set(found)), "numFiles": len(set(found))}
    if name == "Write":
        return {"type": "create", "filePath": tool_input.get("file_path", "")}
    return {"filePath": tool_input.get("file_path", ""), "userModified": False}


def render_jsonl(script: Script) -> bytes:
    """The transcript file of one script."""
    lines = _Writer(script).write()
    return b"".join(
        json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        for line in lines
    )


def transcript_path(script: Script, folder: Path = TRANSCRIPTS) -> Path:
    """Where a script's transcript lives: ``<session id>.jsonl``, as Claude Code names it."""
    return folder / f"{script.session_id}.jsonl"


def stale(folder: Path = TRANSCRIPTS) -> list[str]:
    """The transcripts that differ from what their scripts give (empty: all up to date)."""
    out = []
    for script in load_scripts():
        path = transcript_path(script, folder)
        if not path.is_file() or path.read_bytes() != render_jsonl(script):
            out.append(path.name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="only say which files are stale")
    args = parser.parse_args()
    if args.check:
        behind = stale()
        print("\n".join(behind) or "all transcripts are up to date")
        sys.exit(1 if behind else 0)
    TRANSCRIPTS.mkdir(exist_ok=True)
    for script in load_scripts():
        path = transcript_path(script)
        path.write_bytes(render_jsonl(script))
        print(f"{path.relative_to(HERE)}: {script.name}")


if __name__ == "__main__":
    main()
