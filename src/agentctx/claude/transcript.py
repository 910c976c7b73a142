"""Read a Claude Code session transcript (JSONL) into the compact text the extraction LLM sees.

Design note. The format is internal to Claude Code and changes between versions, so each line is
parsed on its own; what is unusable is skipped and counted in ``Transcript.skipped``, never raised:
``corrupt`` (not JSON / not an object; invalid UTF-8 is replaced), ``truncated`` (an unparsable
last line without newline: still being written, so not in ``last_uuid`` and read again next time),
``unknown_type``, and each known non-message type under its own name (``progress``, ``system`` incl.
``compact_boundary``, ``attachment`` = hook output, agentctx's injected context included, ...).
Those count lines; ``thinking``, ``empty`` and ``unknown_block`` count content blocks.

Turns are content blocks. ``developer`` is only what the person typed: not ``isMeta`` (expanded
skills), caveats, command output or ``[Request interrupted by user]``; a slash command is kept as
``/name args`` (``/compact`` is context; a skill's args are the request). A compact summary becomes
an ``assistant`` turn "Summary of earlier conversation: ...", and the prompt that opens a subagent
(written by the main agent) an ``assistant`` turn "Subagent task: ...". Tool calls are one line
(``Bash: <command>``, ``Write: <path> (N lines)``; MCP and unknown tools: compact JSON input); tool
results are ``result: ``/``error: `` plus at most ``tool_result_chars`` characters (ANSI removed).
``<system-reminder>``/``<...-hook>`` elements and agentctx's own injected context (from its header
line to the end) are cut from user content so extraction never re-extracts what it injected.

Subagents: v1.0 inline ``isSidechain`` lines become ``sidechain`` turns; v2.1 files
``<dir>/<session>/subagents/agent-*.jsonl`` beside ``<dir>/<session>.jsonl`` are read too, each
folded in as one block after the last parent turn not newer than its first turn (ISO timestamps).
``after_uuid`` keeps the main file's lines after that line (and subagent lines newer than it); if
it is missing (file rewritten) all is read and ``skipped["resume_uuid_missing"] = 1``. A missing
main file raises ``OSError``; an unreadable subagent file is counted.

Bounded (docs/security.md, "Bounded inputs"): only regular files are opened (a FIFO, a device or a
folder counts as ``not_a_regular_file``, no turns), at most :data:`MAX_FILE_BYTES` of each file are
read (the newest part; ``before_window`` = 1 when older lines were left out), a line over
:data:`MAX_LINE_BYTES` is skipped as ``too_long``, and blank lines are counted without being kept.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agentctx.core import files, inject

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Line types that carry no conversation text, each counted under its own name.
DROPPED_TYPES = frozenset({
    "progress", "file-history-snapshot", "queue-operation", "system", "summary", "custom-title",
    "ai-title", "last-prompt", "attachment", "agent-name", "permission-mode", "pr-link",
    "worktree-state", "bridge-session", "agent-setting", "tag",
})  # fmt: skip
TOOL_CALL_CHARS = 300
#: The most of one transcript file read (its newest part) and the longest line parsed.
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 8 * 1024 * 1024
_NON_EMPTY = re.compile(rb"[^\n]+")
SUMMARY_PREFIX = "Summary of earlier conversation: "
SUBAGENT_PREFIX = "Subagent task: "

_BLANK_RUNS = re.compile(r"\n(?:[ \t]*\n){2,}")
_LEADING_BLANKS = re.compile(r"\A(?:[ \t]*\n)+")
_HOOK_ELEMENTS = re.compile(r"<(system-reminder|[a-z][a-z-]*-hook)>.*?</\1>", re.S)
_INJECTED = re.compile(  # what the hooks inject (and the prompt's headers of before)
    rf"^{re.escape(inject.FENCE_OPEN)}$|^{re.escape(inject.RULES_HEADER)}|^# agentctx: context\b|"
    + "|".join(rf"^[^\n]*{re.escape(old)}" for old in inject.OLD_HEADERS),
    re.M,
)
_NOISE = re.compile(  # ANSI escapes and tool_use_error tags in tool results
    r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])|</?tool_use_error>"
)
_NOT_SPOKEN = {  # user text that the developer did not type, by its start
    "interrupted": ("[Request interrupted by user",),
    "command_output": ("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>",
                       "<bash-stderr>"),
    "meta": ("<local-command-caveat>", "Caveat:"),
}  # fmt: skip
_SIMPLE_TOOLS = {  # tool name -> the input key that says the most about the call
    "Bash": "command", "Read": "file_path", "Edit": "file_path", "NotebookEdit": "notebook_path",
    "NotebookRead": "notebook_path", "WebFetch": "url", "WebSearch": "query", "LS": "path",
    "BashOutput": "bash_id", "KillBash": "shell_id", "KillShell": "shell_id",
    "ExitPlanMode": "plan", "Skill": "skill", "SlashCommand": "command",
}  # fmt: skip
_TODO_MARKS = {"completed": "x", "in_progress": "~"}


@dataclass(frozen=True, slots=True)
class Turn:
    """One block of the conversation."""

    uuid: str  # the line's uuid ('' if none)
    role: str  # "developer" | "assistant" | "tool"
    text: str
    timestamp: str  # as in the line ('' if none)
    sidechain: bool  # from a subagent


@dataclass(slots=True)
class Transcript:
    """The turns of one transcript and what was left out."""

    path: str
    turns: list[Turn]
    lines_total: int
    skipped: dict[str, int]
    last_uuid: str
    bytes_read: int


_Line = tuple[str, list[Turn]]  # a line's uuid and its turns


def read_transcript(
    path: str | os.PathLike[str],
    *,
    after_uuid: str | None = None,
    include_subagents: bool = True,
    tool_result_chars: int = 600,
) -> Transcript:
    """Parse a transcript (and its subagents' files) into turns; see the module docstring."""
    reader = _Reader(tool_result_chars, include_subagents)
    try:
        data = reader.load(path)
    except files.NotRegularFileError:
        return Transcript(
            path=os.fspath(path),
            turns=[],
            lines_total=0,
            skipped={"not_a_regular_file": 1},
            last_uuid=after_uuid or "",
            bytes_read=0,
        )
    raw, partial, ends = _split(data)
    start, newer_than = 0, None  # resuming: the resume line's timestamp, for subagent lines
    if after_uuid:
        found = _find(raw, after_uuid)
        if found is None:
            reader.skipped["resume_uuid_missing"] = 1
        else:
            start, newer_than = found[0] + 1, found[1]
    reader.blank(data, raw, ends, start, partial)
    lines = reader.read(raw[start:], partial=partial, sidechain=False)
    turns = [turn for _uuid, line_turns in lines for turn in line_turns]
    if include_subagents:
        turns = _fold(turns, _subagent_blocks(Path(path), reader, newer_than))
    resumed_at = after_uuid or "" if newer_than is not None else ""
    return Transcript(
        path=os.fspath(path),
        turns=turns,
        lines_total=reader.lines,
        skipped=dict(sorted(reader.skipped.items())),
        last_uuid=next((uuid for uuid, _turns in reversed(lines) if uuid), resumed_at),
        bytes_read=len(data),
    )


def render(turns: Sequence[Turn]) -> str:
    """The prompt text: one ``[role] text`` block per turn (``[subagent role]`` for sidechains)."""
    return "\n\n".join(
        f"[{'subagent ' if turn.sidechain else ''}{turn.role}] {turn.text}" for turn in turns
    )


class _Reader:
    def __init__(self, tool_result_chars: int, include_sidechains: bool) -> None:
        self.skipped: Counter[str] = Counter()
        self.seen: set[str] = set()
        self.limit = max(0, tool_result_chars)
        self.include_sidechains = include_sidechains
        self.lines = 0

    def load(self, path: str | os.PathLike[str]) -> bytes:
        """A file's bytes, bounded (:data:`MAX_FILE_BYTES`, its newest part); regular files only."""
        data, cut = files.read_tail(path, MAX_FILE_BYTES)
        if cut:
            self.skipped["before_window"] += 1
        return data

    def blank(
        self, data: bytes, raw: list[bytes], ends: list[int], start: int, partial: bool
    ) -> None:
        """Count the blank lines after line ``start`` (they are not kept in ``raw``)."""
        offset = ends[start - 1] if start else 0
        lines = data.count(b"\n", offset) + (1 if partial else 0) - (1 if start else 0)
        empty = lines - (len(raw) - start)
        self.lines += empty
        if empty:
            self.skipped["empty"] += empty

    def read(
        self, raw: list[bytes], *, partial: bool, sidechain: bool, newer_than: str | None = None
    ) -> list[_Line]:
        out: list[_Line] = []
        for index, chunk in enumerate(raw):
            if len(chunk) > MAX_LINE_BYTES:
                self.lines += 1
                self.skipped["too_long"] += 1
                continue
            entry = _parse(chunk)
            stamp = _text(entry.get("timestamp")) if entry is not None else ""
            if entry is not None and newer_than is not None and stamp <= newer_than:
                continue  # a subagent line from before the resume point
            self.lines += 1
            if entry is not None:
                out.append(self.entry(entry, sidechain))
            elif not chunk.strip():
                self.skipped["empty"] += 1
            else:
                self.skipped["truncated" if partial and index == len(raw) - 1 else "corrupt"] += 1
        return out

    def entry(self, entry: dict[str, Any], forced_sidechain: bool) -> _Line:
        uuid, stamp = _text(entry.get("uuid")), _text(entry.get("timestamp"))
        kind = entry.get("type")
        if kind not in ("user", "assistant"):
            name = kind if isinstance(kind, str) and kind in DROPPED_TYPES else "unknown_type"
            self.skipped[name] += 1
            return uuid, []
        if uuid in self.seen:
            self.skipped["duplicate"] += 1
            return uuid, []
        if uuid:
            self.seen.add(uuid)
        side = forced_sidechain or entry.get("isSidechain") is True
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if side and not self.include_sidechains:
            self.skipped["sidechain"] += 1
            return uuid, []
        if not isinstance(content, (str, list)):
            self.skipped["malformed"] += 1
            return uuid, []
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        pieces = (
            self.assistant(entry, blocks) if kind == "assistant" else self.user(entry, blocks, side)
        )
        return uuid, [Turn(uuid, role, text, stamp, side) for role, text in pieces]

    def assistant(self, entry: dict[str, Any], blocks: list[Any]) -> list[tuple[str, str]]:
        if entry.get("isApiErrorMessage"):
            self.skipped["api_error"] += 1
            return []
        out: list[tuple[str, str]] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                text = _tidy(_text(block.get("text")))
                if text:
                    out.append(("assistant", text))
                else:
                    self.skipped["empty"] += 1
            elif kind in ("thinking", "redacted_thinking"):
                self.skipped["thinking"] += 1
            elif kind == "tool_use":
                out.append(
                    ("tool", _tool_call(_text(block.get("name")) or "?", block.get("input")))
                )
            else:
                self.skipped["unknown_block"] += 1
        return out

    def user(self, entry: dict[str, Any], blocks: list[Any], side: bool) -> list[tuple[str, str]]:
        if entry.get("isMeta"):
            self.skipped["meta"] += 1
            return []
        out: list[tuple[str, str]] = []
        texts: list[str] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                out.append(("tool", self.result(block)))
            elif kind == "text":
                texts.append(_text(block.get("text")))
            elif kind == "image":
                texts.append("[image]")
            else:
                self.skipped["unknown_block"] += 1
        if texts:
            prompt = self.prompt("\n\n".join(texts), entry.get("isCompactSummary") is True, side)
            if prompt is not None:
                out.append(prompt)
        return out

    def prompt(self, text: str, summary: bool, side: bool) -> tuple[str, str] | None:
        head = text.lstrip()
        if not summary:
            for reason, starts in _NOT_SPOKEN.items():
                if head.startswith(starts):
                    self.skipped[reason] += 1
                    return None
            if head.startswith(("<command-", "<bash-input>")):
                text = _command(text)
        text = _tidy(self.strip_injected(text))
        if not text:
            self.skipped["empty"] += 1
            return None
        if summary:
            return "assistant", SUMMARY_PREFIX + text
        return ("assistant", SUBAGENT_PREFIX + text) if side else ("developer", text)

    def result(self, block: dict[str, Any]) -> str:
        content = block.get("content")
        if isinstance(content, list):
            parts = [
                "[image]" if part.get("type") == "image" else _text(part.get("text"))
                for part in content
                if isinstance(part, dict)
            ]
            content = "\n".join(part for part in parts if part)
        text = _tidy(_NOISE.sub("", self.strip_injected(_text(content))))
        label = "error" if block.get("is_error") is True else "result"
        return f"{label}: {_clip(text, self.limit) if text else '(no output)'}"

    def strip_injected(self, text: str) -> str:
        text = _HOOK_ELEMENTS.sub("", text)
        found = _INJECTED.search(text)
        if found is None:
            return text
        self.skipped["agentctx_context"] += 1
        return text[: found.start()]


def _subagent_blocks(main: Path, reader: _Reader, newer_than: str | None) -> list[list[Turn]]:
    """The turns of each ``<session>/subagents/agent-*.jsonl`` beside the main file."""
    blocks: list[list[Turn]] = []
    for file in sorted((main.with_suffix("") / "subagents").glob("agent-*.jsonl")):
        try:
            data = reader.load(file)
        except OSError:
            reader.skipped["subagent_unreadable"] += 1
            continue
        raw, partial, ends = _split(data)
        reader.blank(data, raw, ends, 0, partial)
        lines = reader.read(raw, partial=partial, sidechain=True, newer_than=newer_than)
        turns = [turn for _uuid, line_turns in lines for turn in line_turns]
        if turns:
            blocks.append(turns)
    return blocks


def _fold(parent: list[Turn], blocks: list[list[Turn]]) -> list[Turn]:
    """Insert each block after the last parent turn not newer than its first turn."""
    order: list[tuple[tuple[int, int, str], list[Turn]]] = [
        ((index, 0, ""), [turn]) for index, turn in enumerate(parent)
    ]
    for block in blocks:
        first = block[0].timestamp
        after = len(parent)  # no timestamp: at the end
        if first:
            older = (
                i for i, turn in enumerate(parent) if turn.timestamp and turn.timestamp <= first
            )
            after = max(older, default=-1)
        order.append(((after, 1, first), block))
    order.sort(key=lambda item: item[0])  # stable: blocks with equal keys keep their file order
    return [turn for _key, group in order for turn in group]


def _split(data: bytes) -> tuple[list[bytes], bool, list[int]]:
    """The non-empty lines of a JSONL file, whether the last one lacks its newline (still being
    written), and where each line ends.

    Blank lines are not kept (:meth:`_Reader.blank` counts them): a file of millions of newlines
    costs one scan in C, not a list of millions of entries.
    """
    raw: list[bytes] = []
    ends: list[int] = []
    for match in _NON_EMPTY.finditer(data):
        raw.append(match.group())
        ends.append(match.end())
    partial = bool(data) and not data.endswith(b"\n")
    return raw, partial, ends


def _find(raw: list[bytes], uuid: str) -> tuple[int, str] | None:
    """The index and timestamp of the (last) line whose uuid is ``uuid``."""
    needle = uuid.encode("utf-8", "replace")
    for index in range(len(raw) - 1, -1, -1):
        if needle in raw[index]:
            entry = _parse(raw[index])
            if entry is not None and entry.get("uuid") == uuid:
                return index, _text(entry.get("timestamp"))
    return None


def _parse(raw: bytes) -> dict[str, Any] | None:
    """One line as a JSON object, or None. Invalid UTF-8 and lone surrogates are replaced."""
    try:
        value = orjson.loads(raw)
    except ValueError:
        try:  # the stdlib takes lone surrogate escapes; the round trip turns them into "?"
            loose = json.loads(raw.decode("utf-8", "replace"))
            value = json.loads(json.dumps(loose, ensure_ascii=False).encode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _command(text: str) -> str:
    """``<command-name>`` wrappers as ``/name args``, ``<bash-input>`` as ``! command``."""
    name, args, bash = (
        _element(tag, text) for tag in ("command-name", "command-args", "bash-input")
    )
    if name is not None:
        return f"/{name.lstrip('/')} {args or ''}".strip()
    return f"! {bash}" if bash is not None else text


def _element(tag: str, text: str) -> str | None:
    found = re.search(f"<{tag}>(.*?)</{tag}>", text, re.S)
    return found.group(1).strip() if found else None


def _tool_call(name: str, args: Any) -> str:
    """One line: the tool name and its most informative input."""
    arg: dict[str, Any] = args if isinstance(args, dict) else {}
    if name in _SIMPLE_TOOLS:
        detail = _text(arg.get(_SIMPLE_TOOLS[name]))
    elif name == "Write":
        content = _text(arg.get("content"))
        count = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        detail = f"{_text(arg.get('file_path'))} ({count} lines)"
    elif name == "MultiEdit" and isinstance(arg.get("edits"), list):
        detail = f"{_text(arg.get('file_path'))} ({len(arg['edits'])} edits)"
    elif name in ("Grep", "Glob"):
        where = _text(arg.get("path")) or _text(arg.get("glob"))
        detail = _text(arg.get("pattern")) + (f" in {where}" if where else "")
    elif name in ("Task", "Agent"):
        kind = _text(arg.get("subagent_type"))
        detail = _text(arg.get("description")) + (f" ({kind})" if kind else "")
    elif name == "TodoWrite" and isinstance(arg.get("todos"), list):
        todos = [todo for todo in arg["todos"] if isinstance(todo, dict)]
        detail = "; ".join(
            f"[{_TODO_MARKS.get(_text(t.get('status')), ' ')}] {_text(t.get('content'))}"
            for t in todos
        )
    elif name == "AskUserQuestion" and isinstance(arg.get("questions"), list):
        asked = [_text(q.get("question")) for q in arg["questions"] if isinstance(q, dict)]
        detail = " | ".join(asked)
    else:  # MCP (mcp__server__tool) and unknown tools: the input as compact JSON
        try:
            detail = json.dumps(arg, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        except (ValueError, RecursionError):  # nested deeper than the encoder goes
            detail = "{…}"
        detail = "" if detail == "{}" else detail
    detail = _clip(" ".join(detail.split()), TOOL_CALL_CHARS)
    return f"{name}: {detail}" if detail else name


def _tidy(text: str) -> str:
    """Runs of blank lines collapsed to one, outer blank lines dropped; indentation kept."""
    return _LEADING_BLANKS.sub("", _BLANK_RUNS.sub("\n\n", text.replace("\r\n", "\n"))).rstrip()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(slots=True)
class ToolCall:
    """One tool call of a transcript and its result, shaped like a PostToolUse payload's fields.

    ``response`` is the line's ``toolUseResult`` object when it has one (Claude Code writes the
    tool's structured result there: Bash's ``stdout``/``stderr``), else ``{"stdout": <the result
    text>}``; ``failed`` is the result block's ``is_error``.
    """

    id: str
    name: str
    input: dict[str, Any]
    response: dict[str, Any]
    failed: bool
    cwd: str
    session_id: str
    timestamp: str


def tool_calls(path: str | os.PathLike[str]) -> list[ToolCall]:
    """The main file's tool calls that got a result, in order (bounded as :func:`read_transcript`;
    what is unusable is skipped). Subagents' own files are not read: their tool calls ran in the
    subagent's session."""
    data, _cut = files.read_tail(path, MAX_FILE_BYTES)
    pending: dict[str, tuple[str, dict[str, Any]]] = {}  # tool_use id -> (name, input)
    calls: list[ToolCall] = []
    for chunk in _split(data)[0]:
        if len(chunk) > MAX_LINE_BYTES:
            continue
        entry = _parse(chunk)
        message = entry.get("message") if entry is not None else None
        content = message.get("content") if isinstance(message, dict) else None
        if entry is None or not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                args = block.get("input")
                pending[block["id"]] = (
                    _text(block.get("name")),
                    args if isinstance(args, dict) else {},
                )
            elif block.get("type") == "tool_result":
                use_id = _text(block.get("tool_use_id"))
                call = pending.pop(use_id, None)
                if call is None:
                    continue
                structured = entry.get("toolUseResult")
                response = (
                    structured
                    if isinstance(structured, dict)
                    else {"stdout": _NOISE.sub("", _result_text(block.get("content")))}
                )
                calls.append(
                    ToolCall(
                        id=use_id,
                        name=call[0],
                        input=call[1],
                        response=response,
                        failed=block.get("is_error") is True,
                        cwd=_text(entry.get("cwd")),
                        session_id=_text(entry.get("sessionId")),
                        timestamp=_text(entry.get("timestamp")),
                    )
                )
    return calls


def _result_text(content: Any) -> str:
    """A tool result's content as text (a list of parts: their texts joined)."""
    if isinstance(content, list):
        return "\n".join(
            _text(part.get("text"))
            for part in content
            if isinstance(part, dict) and part.get("text")
        )
    return _text(content)
