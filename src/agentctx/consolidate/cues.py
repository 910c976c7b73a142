"""Retrieval cues for the records that have none (issue 14): Claude Haiku writes them at consolidation.

A cue is a short request a developer would type in a later session when the record is what they
need, in their own words ("why are the dashboards behind" for "The metrics exporter refreshes its
cache hourly"). Cues are search text only: indexed with the record (the FTS index's ``cues``
column), never embedded and never injected. Extraction writes them for the records it makes
(:mod:`agentctx.extract.prompt`); this step gives cues to the others: records written before cues
existed, by hand (CLI, ``ctx_record``), imported, or explained capture stubs.

Which records: the project's current ones of the types in :data:`CUE_TYPES` whose ``cues`` is
empty, not handovers (they change every session) nor profile facts, and not a capture stub that
extraction never explained (its body still ends with the capture note: a tool call's trace, not a
fact yet). At most :data:`MAX_RECORDS` a run, pinned and high-scored first; the rest wait for the
next run. They go :data:`BATCH_RECORDS` to a call, :data:`CONCURRENCY` calls at a time, within the
consolidation's time box (checked before each call, as the merge checks do).

The call is a forced, ``strict`` tool answering ``{records: [{id, cues}]}``, built by
:func:`agentctx.extract.llm.forced_tool` like extraction's and the merge checks' (so the record
text is redacted on its way out, in that one place). An id that was not asked about is ignored; a
record the model gave no usable cue keeps none and is asked again next run. Each answer is written
with :func:`agentctx.core.writes.update_cues` (normalized, redacted, the embedding untouched), only
while the record is still current and still has no cues (extraction may have written some
meanwhile). An API error leaves the batch's records as they were; the step reports it and the
consolidation goes on. Without an LLM client (``llm`` off, no API key) nothing is sent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio

from agentctx.core import errors, writes
from agentctx.core.observe import STUB_NOTE, STUB_NOTE_FIX
from agentctx.core.schema import CUE_MAX, CUES_MAX
from agentctx.extract.llm import Usage, forced_tool

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from anthropic import AsyncAnthropic

    from agentctx.consolidate.timebox import TimeBox
    from agentctx.store import Store

TOOL_NAME = "write_cues"
#: The record types that get cues (handovers and profile facts do not).
CUE_TYPES = ("decision", "convention", "preference", "discovery", "bugfix")
#: Records given cues per run and project; the others wait for the next run.
MAX_RECORDS = 40
#: Records per call.
BATCH_RECORDS = 10
#: Calls in flight at once (as the merge checks).
CONCURRENCY = 4
#: Characters of a record's body shown to the model (a long body's start says what it is about).
BODY_CHARS = 800
#: Room for ten records' cues and the JSON around them.
MAX_OUTPUT_TOKENS = 2048

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "records": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The record's id, as given."},
                    "cues": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": f"1 to {CUES_MAX} cues, each under {CUE_MAX} characters.",
                    },
                },
                "required": ["id", "cues"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["records"],
    "additionalProperties": False,
}
TOOL: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": "Give the retrieval cues of every record.",
    "input_schema": INPUT_SCHEMA,
    "strict": True,
}

SYSTEM_PROMPT = f"""\
You write retrieval cues for records of a developer's project memory (decisions, conventions, \
preferences, discoveries, bugfixes). A later session finds a record by keyword search over its \
text and its cues, so the cues are how a developer asks for it when they no longer remember its \
wording.

Rules:
- A cue is a short request or question a developer of this project would type in a later session \
when this record is exactly what they need: "why are the dashboards behind", "which package \
manager do we use", "the login test fails after an hour".
- Write the developer's everyday words, not only the record's own: the symptom they see, the task \
they are doing, the question they ask. Keep the names a developer would type (tools, files, error \
names).
- Each cue must be answered by the record as it stands. No cue about something the record does \
not say.
- 1 to {CUES_MAX} cues per record, each under {CUE_MAX} characters, no two alike: every record gets \
at least one (a record left without cues is sent again at the next consolidation).
- Text marked [REDACTED:…] is a removed secret: never reconstruct it, and never put it in a cue.
- Answer every record, by its id, through the tool."""


@dataclass(slots=True)
class CuesReport:
    """What the cue step did for one project."""

    candidates: int = 0  #: records without cues this run looked at (at most MAX_RECORDS)
    asked: int = 0  #: records sent to the model
    written: int = 0  #: records given cues
    skipped: int = 0  #: left for the next run (no usable answer, API error, time box, changed)
    calls: int = 0
    llm_errors: int = 0
    cost_usd: float = 0.0
    unfinished: bool = False
    llm: bool = True  #: False: no LLM client, nothing was sent

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Item:
    """One record as the model sees it: its key within the call, type, title and body."""

    key: str
    record_id: str
    type: str
    title: str
    body: str


_WITHOUT_CUES = f"""
SELECT id, type, title, body FROM records
WHERE project_id = ? AND superseded_at IS NULL AND cues = ''
  AND type IN ({", ".join("?" * len(CUE_TYPES))})
  AND NOT (source = 'hook_observation' AND (substr(body, -?) = ? OR substr(body, -?) = ?))
ORDER BY pinned DESC, score DESC, valid_from DESC, id
LIMIT ?
"""


async def without_cues(store: Store, project_id: str, limit: int = MAX_RECORDS) -> list[Item]:
    """The project's current records that should have cues and have none, best first."""
    rows = await store.rows(
        _WITHOUT_CUES,
        (
            project_id,
            *CUE_TYPES,
            len(STUB_NOTE),
            STUB_NOTE,
            len(STUB_NOTE_FIX),
            STUB_NOTE_FIX,
            limit,
        ),
    )
    return [
        Item(f"r{n}", str(row["id"]), str(row["type"]), str(row["title"]), str(row["body"]))
        for n, row in enumerate(rows, start=1)
    ]


def user_text(items: Sequence[Item]) -> str:
    """The user message: every record with its key, type, title and (the start of its) body."""
    parts = [f"Records: {len(items)}."]
    for item in items:
        body = item.body if len(item.body) <= BODY_CHARS else item.body[:BODY_CHARS] + "…"
        parts.append(
            f'<record id="{item.key}" type="{item.type}">\n'
            f"Title: {item.title}\nBody: {body}\n</record>"
        )
    return "\n\n".join(parts)


def parse(data: Any, keys: set[str]) -> dict[str, list[str]]:
    """The usable cues of a tool input by asked key (first answer wins; unknown keys ignored)."""
    items = data.get("records") if isinstance(data, dict) else None
    found: dict[str, list[str]] = {}
    if not isinstance(items, list):
        return found
    for item in items:
        if not isinstance(item, dict):
            continue
        key = str(item.get("id", "")).strip()
        cues = item.get("cues")
        if key not in keys or key in found or not isinstance(cues, list):
            continue
        clean = writes.normalize_cues([cue for cue in cues if isinstance(cue, str)])
        if clean:
            found[key] = clean
    return found


async def write_cues(
    store: Store,
    project_id: str,
    *,
    client: AsyncAnthropic | None,
    model: str,
    timebox: TimeBox,
    log: Callable[[str], None],
) -> CuesReport:
    """Give cues to up to :data:`MAX_RECORDS` of the project's records that have none."""
    if client is None:
        return CuesReport(llm=False)
    report = CuesReport()
    items = await without_cues(store, project_id)
    report.candidates = len(items)
    usage = Usage()
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def ask(batch: list[Item]) -> None:
        from anthropic import APIError

        async with limiter:
            if timebox.expired():  # checked here: batches wait for the limiter
                report.unfinished = True
                report.skipped += len(batch)
                return
            report.asked += len(batch)
            try:
                called, data, stop = await forced_tool(
                    client,
                    model,
                    system=SYSTEM_PROMPT,
                    tool=TOOL,
                    user_text=user_text(batch),
                    max_tokens=MAX_OUTPUT_TOKENS,
                    usage=usage,
                )
            except APIError as exc:
                report.llm_errors += 1
                report.skipped += len(batch)
                reason = errors.one_line(exc)
                log(
                    f"cues {project_id[:12]}: {len(batch)} record(s) not given cues ({reason}); "
                    "asked again next run"
                )
                return
        if not called:
            report.llm_errors += 1
            report.skipped += len(batch)
            log(f"cues {project_id[:12]}: the model did not call {TOOL_NAME} (stop reason {stop})")
            return
        answers = parse(data, {item.key for item in batch})
        written = await _store(store, batch, answers) if answers else 0
        report.written += written
        report.skipped += len(batch) - written

    async with anyio.create_task_group() as group:
        for start in range(0, len(items), BATCH_RECORDS):
            group.start_soon(ask, items[start : start + BATCH_RECORDS])
    report.calls = usage.calls
    report.cost_usd = usage.cost_usd
    return report


async def _store(store: Store, batch: Sequence[Item], answers: dict[str, list[str]]) -> int:
    """Write the answered cues in one transaction; how many records got them."""
    written = 0
    async with store.transaction() as tx:
        for item in batch:
            cues = answers.get(item.key)
            if cues is not None:  # only while it is current and still has none
                written += await tx.run(writes.update_cues(item.record_id, cues, only_if_none=True))
    return written
