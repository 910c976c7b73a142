"""Derive (text, true token count) candidates from real Claude Code transcripts.

Standard library only. Usage, from the repository root::

    python benchmarks/tokens/derive_calibration.py OUT.jsonl TRANSCRIPT_OR_DIR [...]

Every assistant line of a transcript carries the API ``usage`` of a real Claude model. Two kinds of
sample come out of it (docs/token-estimate.md explains the method and its noise):

``output``
    One API message (all lines sharing ``message.id``), no thinking block: its visible payload
    (text blocks, tool-call parameter values) against ``output_tokens`` of the message's LAST line.
    Claude Code writes one line per content block and often copies the ``message_start`` snapshot
    (1..31 tokens) into them, so a count is only kept when it is plausibly final (see
    ``_plausibly_final``).
``input``
    Two consecutive requests A -> B of one conversation thread (same model): the growth of the total
    prompt (``input + cache_creation + cache_read``) is the cost of A's reply replayed plus every
    user/tool_result block added before B. Pairs whose A holds thinking (replayed at a cost the
    transcript does not show) or whose added lines are not all tool results / plain prompts are
    dropped.

Each sample keeps its payload ``parts`` (each part is tokenized separately by the API, so an
estimate is the sum over parts), a ``structure`` key (what wrapper tokens the API adds around the
parts: tool names and parameter names, number of blocks) and a ``category``.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any

Json = dict[str, Any]

#: Tools whose parameters/results are source code.
CODE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "Read"})
#: Tools whose results are shell-like output (command output, file lists, grep hits).
SHELL_TOOLS = frozenset({"Bash", "BashOutput", "KillBash", "KillShell", "Grep", "Glob", "LS"})
#: Tools whose payload is natural-language prose.
PROSE_TOOLS = frozenset({"Task", "TaskOutput", "WebFetch", "AskUserQuestion", "ExitPlanMode"})
#: Tools whose parameters are JSON structures.
JSON_TOOLS = frozenset({"TodoWrite", "WebSearch"})

#: Stale usage snapshots copied from ``message_start`` are at most a few dozen tokens.
STALE_MAX = 40
#: No tokenizer packs more than 8 characters of real text into one token on average.
MAX_CHARS_PER_TOKEN = 8


def _params_text(inp: object) -> tuple[list[str], list[str]]:
    """(parameter names, parameter payloads) of a tool call as the model writes it."""
    if not isinstance(inp, dict):
        return [], []
    names: list[str] = []
    values: list[str] = []
    for key, value in inp.items():
        names.append(str(key))
        if isinstance(value, str):
            values.append(value)
        else:
            values.append(json.dumps(value, ensure_ascii=False))
    return names, values


def _result_text(block: Json) -> str | None:
    """Text of a tool_result block, None when it holds something else (an image)."""
    content = block.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for item in content:
            if not isinstance(item, dict) or item.get("type") != "text":
                return None
            texts.append(str(item.get("text") or ""))
        return "\n".join(texts)
    return None


def _total_input(usage: Json) -> int:
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _threads(lines: list[Json]) -> dict[str, list[tuple[int, Json]]]:
    """user/assistant lines grouped by conversation (root of the parentUuid chain), file order."""
    by_uuid = {str(line["uuid"]): line for line in lines if line.get("uuid")}
    memo: dict[str, str] = {}

    def root(line: Json) -> str:
        path: list[str] = []
        current = line
        while True:
            uid = str(current["uuid"])
            if uid in memo:
                found = memo[uid]
                break
            path.append(uid)
            parent = current.get("parentUuid")
            if not parent or parent not in by_uuid:
                found = uid
                break
            current = by_uuid[parent]
        for uid in path:
            memo[uid] = found
        return found

    threads: dict[str, list[tuple[int, Json]]] = defaultdict(list)
    for index, line in enumerate(lines):
        if line.get("type") in ("user", "assistant") and line.get("uuid"):
            threads[root(line)].append((index, line))
    return threads


def _category(kinds: list[tuple[str, int]]) -> str:
    """Category of a sample from its (payload kind, chars) parts: the kind holding >= 70 %."""
    total = sum(chars for _, chars in kinds) or 1
    by_kind: dict[str, int] = defaultdict(int)
    for kind, chars in kinds:
        by_kind[kind] += chars
    kind, chars = max(by_kind.items(), key=lambda item: item[1])
    return kind if chars >= 0.7 * total else "mixed"


def _payload_kind(tool: str | None, text: str, default: str) -> str:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            json.loads(stripped)
        except ValueError:
            pass
        else:
            return "json"
    if tool is None:
        return default
    if tool in CODE_TOOLS:
        return "code"
    if tool in SHELL_TOOLS:
        return "shell"
    if tool in JSON_TOOLS:
        return "json"
    if tool in PROSE_TOOLS:
        return "prose"
    return "mixed"


def _assistant_parts(blocks: list[Json]) -> tuple[list[str], list[tuple[str, int]], list[str]]:
    """(payload parts, (kind, chars) per part, structure tokens) of an assistant message."""
    parts: list[str] = []
    kinds: list[tuple[str, int]] = []
    structure: list[str] = []
    for block in blocks:
        btype = block.get("type")
        if btype == "text":
            text = str(block.get("text") or "")
            parts.append(text)
            kinds.append(("prose", len(text)))
            structure.append("text")
        elif btype == "tool_use":
            name = str(block.get("name"))
            names, values = _params_text(block.get("input"))
            for key, value in zip(names, values, strict=True):
                # A Bash command is shell; its description is prose; a Write's path is a path.
                if name == "Bash" and key == "command":
                    kind = "shell"
                elif key in ("description", "prompt"):
                    kind = "prose"
                elif key in ("file_path", "path", "pattern", "notebook_path"):
                    kind = "shell"
                else:
                    kind = _payload_kind(name, value, "mixed")
                parts.append(value)
                kinds.append((kind, len(value)))
            structure.append("call:" + name + "(" + ",".join(sorted(names)) + ")")
        else:
            structure.append("other:" + str(btype))
    return parts, kinds, structure


def _plausibly_final(output_tokens: int, chars: int) -> bool:
    """A copied message_start snapshot is small; a final count is not absurdly small."""
    return output_tokens > STALE_MAX and output_tokens * MAX_CHARS_PER_TOKEN >= chars


def samples_from(path: Path) -> list[Json]:
    """All candidate samples of one transcript file."""
    lines: list[Json] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                lines.append(value)
    tool_names: dict[str, str] = {}
    for line in lines:
        message = line.get("message")
        if line.get("type") == "assistant" and isinstance(message, dict):
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tool_names[str(block.get("id"))] = str(block.get("name"))

    out: list[Json] = []
    for thread in _threads(lines).values():
        requests: OrderedDict[str, list[tuple[int, Json]]] = OrderedDict()
        for index, line in thread:
            if line["type"] == "assistant" and isinstance(line.get("message"), dict):
                requests.setdefault(str(line["message"].get("id")), []).append((index, line))
        ids = list(requests)
        for position, message_id in enumerate(ids):
            a_lines = requests[message_id]
            seen: set[str] = set()
            blocks: list[Json] = []
            for _, line in a_lines:
                if str(line["uuid"]) in seen:
                    continue
                seen.add(str(line["uuid"]))
                blocks.extend(
                    b for b in line["message"].get("content") or [] if isinstance(b, dict)
                )
            first = a_lines[0][1]
            model = str(first["message"].get("model"))
            if model == "<synthetic>":
                continue
            has_thinking = any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks)
            parts, kinds, structure = _assistant_parts(blocks)
            base = {
                "source": path.name,
                "model": model,
                "version": first.get("version"),
                "message_id": message_id,
            }
            usage_last = a_lines[-1][1]["message"].get("usage") or {}
            output_tokens = int(usage_last.get("output_tokens") or 0)
            chars = sum(len(p) for p in parts)
            if not has_thinking and parts and _plausibly_final(output_tokens, chars):
                out.append(
                    base
                    | {
                        "side": "output",
                        "parts": parts,
                        "tokens": output_tokens,
                        "structure": "out|" + "|".join(structure),
                        "category": _category(kinds),
                    }
                )
            if position + 1 >= len(ids) or has_thinking:
                continue
            b_lines = requests[ids[position + 1]]
            b_first = b_lines[0][1]
            if str(b_first["message"].get("model")) != model:
                continue
            a_start, b_start = a_lines[0][0], b_lines[0][0]
            if any(index > b_start for index, _ in a_lines):
                continue
            between = [line for index, line in thread if a_start < index < b_start]
            users = [line for line in between if line["type"] == "user"]
            # Anything Claude Code logs between the two requests that is not a plain prompt or a
            # tool result (compaction, slash commands, meta lines) changes the prompt invisibly.
            skipped = any(
                line.get("type") not in ("user", "assistant", "progress", "file-history-snapshot")
                for line in lines[a_start:b_start]
            )
            clean = not skipped
            in_parts = list(parts)
            in_kinds = list(kinds)
            in_structure = list(structure)
            result_ids: set[str] = set()
            for user in users:
                if user.get("isMeta") or user.get("isCompactSummary"):
                    clean = False
                content = user["message"].get("content")
                if isinstance(content, str):
                    content = [{"type": "text", "text": content}]
                for block in content or []:
                    btype = block.get("type")
                    if btype == "text":
                        text = str(block.get("text") or "")
                        if text.startswith(("<command-", "<local-command", "[Request interrupted")):
                            clean = False
                        in_parts.append(text)
                        in_kinds.append(("prose", len(text)))
                        in_structure.append("prompt")
                    elif btype == "tool_result":
                        text_or_none = _result_text(block)
                        if text_or_none is None:
                            clean = False
                            continue
                        tool = tool_names.get(str(block.get("tool_use_id")))
                        result_ids.add(str(block.get("tool_use_id")))
                        in_parts.append(text_or_none)
                        in_kinds.append(
                            (_payload_kind(tool, text_or_none, "mixed"), len(text_or_none))
                        )
                        in_structure.append(
                            "result:" + str(tool) + (":error" if block.get("is_error") else "")
                        )
                    else:
                        clean = False
            call_ids = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            if not clean or call_ids != result_ids:
                continue
            delta = _total_input(b_first["message"].get("usage") or {}) - _total_input(
                first["message"].get("usage") or {}
            )
            if delta <= 0:
                continue
            out.append(
                base
                | {
                    "side": "input",
                    "parts": in_parts,
                    "tokens": delta,
                    "structure": "in|" + "|".join(in_structure),
                    "category": _category(in_kinds),
                }
            )
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    files: list[Path] = []
    for arg in argv[2:]:
        path = Path(arg)
        files.extend(sorted(path.glob("*.jsonl")) if path.is_dir() else [path])
    count = 0
    with Path(argv[1]).open("w", encoding="utf-8") as handle:
        for file in files:
            for sample in samples_from(file):
                handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
                count += 1
    print(f"{count} candidate samples from {len(files)} transcripts -> {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
