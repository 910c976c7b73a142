"""The merge check: Claude Haiku says whether near-duplicate pairs state the same fact.

Several pairs go in one call (:func:`batches`, at most :data:`BATCH_PAIRS` pairs and about
:data:`BATCH_CHARS` characters of record text, so that the merged bodies fit the output budget).
The answer is a forced, ``strict`` tool call: per pair ``same`` and, when the pair is the same fact,
a merged title and body that keep every fact of both records; ``title`` and ``body`` are nullable
rather than optional because strict schemas require every property. The answer is still parsed
defensively, pair by pair: a pair without a usable answer is left for the next run.

No ``temperature`` is sent: ``messages.create`` of the installed ``anthropic`` 2.14 has no such
parameter (spec §15.2), so the API default applies; the low variance the seed asks for rests on
the forced tool, the strict schema and a prompt that answers "distinct" when unsure. Record text is
redacted when it is stored; the merged text is redacted again before it is returned, as extraction
does with its output. The system prompt is far below the size the API caches, so it carries no
``cache_control``. Retries (429, 5xx, 529) are the SDK's, as for extraction (:mod:`.extract.llm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentctx.core.schema import BODY_MAX, TITLE_MAX
from agentctx.extract.llm import forced_tool
from agentctx.redact import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anthropic import AsyncAnthropic

    from agentctx.extract.llm import Usage

TOOL_NAME = "judge_pairs"
BATCH_PAIRS = 8
BATCH_CHARS = 16_000
#: Room for eight merged bodies of up to 2,000 characters each (about 4,000 tokens) and the rest.
MAX_OUTPUT_TOKENS = 8192
#: Calls in flight at once (the extraction's map calls use 4 as well).
CONCURRENCY = 4

_NULLABLE_TEXT = {"anyOf": [{"type": "string"}, {"type": "null"}]}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "pair": {"type": "string", "description": "The pair's id, as given."},
                    "same": {
                        "type": "boolean",
                        "description": "true only if both records state the same fact.",
                    },
                    "title": {
                        **_NULLABLE_TEXT,
                        "description": f"same: the merged title (≤ {TITLE_MAX} chars); else null.",
                    },
                    "body": {
                        **_NULLABLE_TEXT,
                        "description": (
                            f"same: the merged body keeping every fact of both (≤ {BODY_MAX} "
                            "chars); else null."
                        ),
                    },
                },
                "required": ["pair", "same", "title", "body"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}
TOOL: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": "Give the verdict for every pair of records.",
    "input_schema": INPUT_SCHEMA,
    "strict": True,
}

SYSTEM_PROMPT = f"""\
You check pairs of records from a developer's project memory (decisions, conventions, preferences, \
discoveries, bugfixes) and say whether the two records of a pair state the same fact, so that \
duplicates can be merged into one record. The pairs were found because their wording is similar; \
that alone does not make them the same.

Rules:
- same = true only when both records state the same fact, rule or choice, so that one merged record \
loses nothing. A paraphrase is the same. A record that only adds detail (a reason, an example, a \
file name) to the other is the same.
- same = false when they differ in anything that matters: a number, version, limit, duration, name, \
tool, file or scope; opposite instructions (always/never, use/avoid); two different decisions on one \
topic; a later change of an earlier decision. When unsure, answer false.
- When same = true, write the merged record: a title of at most {TITLE_MAX} characters and a body of \
at most {BODY_MAX} characters that keep every fact of both records (values, reasons, names, files) \
without repeating anything. Write plainly and specifically, like the records.
- When same = false, title and body are null.
- Text marked [REDACTED:…] is a removed secret: keep the marker as it is, never reconstruct it.
- Answer every pair, by its id, through the tool."""


@dataclass(frozen=True, slots=True)
class PairText:
    """One pair as the model sees it: its id within the call, the type, and both texts."""

    key: str
    type: str
    a_title: str
    a_body: str
    b_title: str
    b_body: str

    @property
    def size(self) -> int:
        """Characters of record text."""
        return len(self.a_title) + len(self.a_body) + len(self.b_title) + len(self.b_body)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The model's answer for one pair; ``title``/``body`` None: keep the survivor's own."""

    same: bool
    title: str | None = None
    body: str | None = None


@dataclass(slots=True)
class Answer:
    """One call's usable verdicts by pair key, and why the rest (if any) were unusable."""

    verdicts: dict[str, Verdict]
    problem: str | None = None


def batches(pairs: Sequence[PairText]) -> list[list[PairText]]:
    """Consecutive groups of at most :data:`BATCH_PAIRS` pairs and about :data:`BATCH_CHARS`."""
    groups: list[list[PairText]] = []
    size = 0
    for pair in pairs:
        if not groups or len(groups[-1]) >= BATCH_PAIRS or size + pair.size > BATCH_CHARS:
            groups.append([])
            size = 0
        groups[-1].append(pair)
        size += pair.size
    return groups


def user_text(pairs: Sequence[PairText]) -> str:
    """The user message: every pair with its id, type and both records."""
    parts = [f"Pairs to check: {len(pairs)}."]
    for pair in pairs:
        parts.append(
            f'<pair id="{pair.key}" type="{pair.type}">\n'
            f"<record>\nTitle: {pair.a_title}\nBody: {pair.a_body}\n</record>\n"
            f"<record>\nTitle: {pair.b_title}\nBody: {pair.b_body}\n</record>\n"
            "</pair>"
        )
    return "\n\n".join(parts)


async def judge(
    client: AsyncAnthropic, model: str, pairs: Sequence[PairText], usage: Usage
) -> Answer:
    """Ask about ``pairs`` in one call; raise the SDK's error when the API fails after retries."""
    called, data, stop = await forced_tool(
        client,
        model,
        system=SYSTEM_PROMPT,
        tool=TOOL,
        user_text=user_text(pairs),
        max_tokens=MAX_OUTPUT_TOKENS,
        usage=usage,
    )
    if not called:
        return Answer({}, f"the model did not call {TOOL_NAME} (stop reason {stop})")
    return parse(data, {p.key for p in pairs})


def parse(data: Any, keys: set[str]) -> Answer:
    """The usable verdicts of a tool input, for the asked pair ``keys`` only (first answer wins)."""
    items = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return Answer({}, "the tool input has no list of verdicts")
    verdicts: dict[str, Verdict] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        key = str(item.get("pair", "")).strip()
        same = item.get("same")
        if key not in keys or key in verdicts or not isinstance(same, bool):
            continue
        if not same:
            verdicts[key] = Verdict(False)
            continue
        title = _title(item.get("title"))
        usable, body = _body(item.get("body"))
        if not usable:  # a merged body we cannot store: no verdict, asked again next time
            continue
        verdicts[key] = Verdict(True, title, body)
    missing = len(keys) - len(verdicts)
    return Answer(verdicts, f"{missing} pair(s) without a usable verdict" if missing else None)


def _title(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(redact(value.replace("\x00", "")).split())
    return text[:TITLE_MAX].rstrip() or None


def _body(value: Any) -> tuple[bool, str | None]:
    """``(usable, body)``: None keeps the survivor's own body; unusable when it cannot be stored."""
    if value is None:
        return True, None
    if not isinstance(value, str):
        return False, None
    text = redact(value.replace("\x00", "")).strip()
    # Cutting a merged body would drop facts of one side: better no merge than a lossy one.
    return len(text) <= BODY_MAX, text or None
