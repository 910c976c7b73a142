"""From the model's output to records: defensive parsing, then one transaction.

Each entry is checked on its own; a bad one is dropped and counted, the rest are kept. Mapping:
decisions → ``decision``, preferences → ``preference`` (scope project, or global into the global
namespace), conventions → ``convention``, gotchas → ``discovery``, bugfixes → ``bugfix`` (enriching
the session's PostToolUse stub when one matches), active_work → the ``handover`` of the session's
checkout (its worktree, the record's ``key``), superseding that checkout's previous one and the
legacy (key NULL) one, never another worktree's. ``handover_done`` with no active work closes the
open handover the model was shown: a short "no open work" handover of the checkout supersedes it, so
the next session is not handed a finished task (history keeps the old one; a handover written
meanwhile by another session is left alone). An entry identical (type and title) to a current record is not
added again: from the same session it is dropped; from another session it reinforces the record.
A ``supersedes`` id must name a current record of the same project and type, else the entry is
added plainly and the id logged.

An entry's ``entities`` (and a bugfix's ``files``) say what code it is about: each becomes a graph
node of its kind with an edge from the record (:func:`agentctx.core.writes.relate`: ``scoped_to`` a
package, ``applies_to`` a file, module or symbol), also when the entry reinforces, repeats or
explains (a stub) a record already there. Names are untrusted: one of another kind, empty, over the
length limit, with a control character, a secret in it, or a relative path out of the project is
dropped and counted (``entities_dropped``), the entry kept. An absolute path inside the project's
root is stored relative to it, as capture stores files.

What the model says is not what the developer said (issue 24, #6): a transcript's tool results
(a fetched web page, a file, a command's output) can ask the model to "record" anything. So the
model's output alone never makes a record ``explicit`` nor a preference global: an entry is
``explicit`` only when its statement is found in the developer's own messages (``user_text``: the
transcript's developer turns, :func:`stated_in`), else it is written ``inferred`` (shown as
unconfirmed until reinforced); a ``global`` preference needs the same evidence, else it reinforces
the current global record of that rule if there is one (written earlier with evidence, or by the
user) and is otherwise written into the project, never the global namespace.

An entry's ``cues`` (issue 14: requests a developer would type when the entry is what they need)
go with the record it writes, and to the stub it explains; an entry that repeats or reinforces a
record gives that record its cues when it has none. The write path normalizes and redacts them
(:func:`agentctx.core.writes.normalize_cues`); they are search text only, never injected.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentctx.core import clock
from agentctx.core.observe import STUB_NOTE, STUB_NOTE_FIX
from agentctx.core.schema import BODY_MAX, CHECKOUT_HANDOVERS, GLOBAL_PROJECT_ID
from agentctx.core.search import query_terms
from agentctx.core.writes import CUES_MAX, entity_problem, relate
from agentctx.extract.prompt import ENTITIES_MAX, PREFERENCE_CATEGORIES
from agentctx.records import NewRecord, title_from
from agentctx.redact import redact

if TYPE_CHECKING:
    from agentctx.store import Transaction


@dataclass(slots=True)
class Entry:
    """One extracted fact, normalized."""

    type: str
    title: str
    body: str
    confidence: str = "inferred"
    scope: str = "project"
    keywords: list[str] = field(default_factory=list)
    supersedes: str | None = None
    files: list[str] = field(default_factory=list)
    #: (kind, name) of the code entities the entry is about, checked (:func:`_entities`)
    entities: list[tuple[str, str]] = field(default_factory=list)
    #: retrieval cues: what a developer would ask when this is what they need (search text only)
    cues: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Parsed:
    """The entries of one output, what was dropped, and whether the model said flush."""

    entries: list[Entry] = field(default_factory=list)
    dropped: int = 0
    entities_dropped: int = 0
    flush_ok: bool = False
    handover_done: bool = False
    problems: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Applied:
    """What writing an extraction did."""

    added: dict[str, int] = field(default_factory=dict)
    reinforced: int = 0
    duplicates: int = 0
    enriched: int = 0
    superseded: int = 0
    linked: int = 0  #: ``applies_to``/``scoped_to`` edges added from records to code entities
    unknown_supersedes: list[str] = field(default_factory=list)
    closed_handover: str | None = None  #: the id of the handover this session finished
    #: entries the model called explicit, or global, that the developer's messages do not state:
    #: written inferred, or into the project (:func:`ground`)
    unstated: int = 0

    @property
    def written(self) -> int:
        """Records added."""
        return sum(self.added.values())


def parse(output: Any) -> Parsed:
    """Normalize the tool input of the model; never raises."""
    result = Parsed()
    if not isinstance(output, dict):
        result.problems.append("the output is not an object; nothing written")
        result.flush_ok = True
        return result
    result.handover_done = output.get("handover_done") is True
    if output.get("flush_ok") is True:
        result.flush_ok = True
        return result
    makers = {
        "decisions": _decision,
        "preferences": _preference,
        "conventions": _convention,
        "gotchas": _gotcha,
        "bugfixes": _bugfix,
    }
    for key, make in makers.items():
        items = output.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            result.dropped += 1
            continue
        for item in items:
            if not isinstance(item, dict) or (entry := make(item)) is None:
                result.dropped += 1
                continue
            entry.entities, bad = _entities(item, entry.files)
            result.entities_dropped += bad
            entry.cues = _cues(item)
            result.entries.append(entry)
    work = output.get("active_work")
    if isinstance(work, dict):
        handover = _handover(work)
        if handover is not None:
            result.entries.append(handover)
    elif work is not None:
        result.dropped += 1
    return result


async def write(
    tx: Transaction,
    parsed: Parsed,
    *,
    project_id: str,
    session_id: str,
    threshold: int,
    open_handover: str | None = None,
    checkout: str | None = None,
    root: str | None = None,
    user_text: str | None = None,
) -> Applied:
    """Write the parsed entries inside the caller's transaction.

    ``open_handover`` is the id of the handover the model was shown, the only one it may close;
    ``checkout`` keys the handovers written (None: a legacy one, for an unknown checkout);
    ``root``: the project's root, that absolute file names inside it are made relative to;
    ``user_text``: the developer's own messages of the transcript (redacted as the transcript
    sent was), the only evidence that makes an entry explicit or a preference global (None: no
    entry is, see :func:`ground`).
    """
    applied = Applied()
    said = _words(user_text or "")
    for entry in parsed.entries:
        global_wanted = ground(entry, said, applied)
        record_id = await _write_entry(
            tx, entry, applied, project_id, session_id, threshold, checkout, global_wanted
        )
        if entry.scope == "global" or not entry.entities:
            continue  # a global record is about no one project's code
        at = clock.now()
        for kind, name in entry.entities:
            if kind == "file":
                name = _under_root(name, root)
            applied.linked += await tx.run(relate(record_id, project_id, kind, name, at))
    work_left = any(entry.type == "handover" for entry in parsed.entries)
    if parsed.handover_done and open_handover is not None and not work_left:
        applied.closed_handover = await _close_handover(
            tx, open_handover, project_id, session_id, checkout
        )
    return applied


#: The share of an entry's statement words that the developer's messages must hold for the entry
#: to count as stated by them (:func:`stated_in`).
STATED_SHARE = 0.6


def _stem(word: str) -> str:
    """A crude stem: ``commits``, ``committing`` and ``commit`` meet (a prefix of six letters)."""
    return word[:6] if len(word) > 6 else word.removesuffix("s")


def _words(text: str) -> set[str]:
    """The stems of every word of ``text`` (lower-cased; the search's word characters)."""
    flat = "".join(c if c.isalnum() or c == "_" else " " for c in text.lower())
    return {_stem(word) for word in flat.split()}


def stated_in(statement: str, said: set[str]) -> bool:
    """Whether the developer's words (``said``, from :func:`_words`) state ``statement``: at least
    :data:`STATED_SHARE` of its distinct search terms (stop words left out) are among them."""
    terms = query_terms(statement, max_terms=64)
    if not terms:
        return False
    found = sum(_stem(term) in said for term in terms)
    return found >= STATED_SHARE * len(terms)


def ground(entry: Entry, said: set[str], applied: Applied) -> bool:
    """Hold an entry to what the developer's own messages state; True when it wanted the global
    namespace but is not stated (it may then only reinforce a current global record).

    An ``explicit`` entry whose statement (its title) they do not state becomes ``inferred``; a
    global preference they do not state becomes a project one.
    """
    if entry.confidence != "explicit" and entry.scope != "global":
        return False
    if stated_in(entry.title, said):
        return False
    applied.unstated += 1
    entry.confidence = "inferred"
    global_wanted = entry.scope == "global"
    entry.scope = "project"
    return global_wanted


async def _write_entry(
    tx: Transaction,
    entry: Entry,
    applied: Applied,
    project_id: str,
    session_id: str,
    threshold: int,
    checkout: str | None,
    global_wanted: bool = False,
) -> str:
    """Write one entry (or count it again); the id of the record it is now.

    ``global_wanted``: the model called the entry global without the developer's words for it;
    a current global record of its title is reinforced, else it is written into the project.
    """
    target = GLOBAL_PROJECT_ID if entry.scope == "global" else project_id
    if entry.type != "handover":
        existing = None
        if global_wanted:
            existing = await tx.find_current(GLOBAL_PROJECT_ID, entry.type, entry.title)
        if existing is None:
            existing = await tx.find_current(target, entry.type, entry.title)
        if existing is not None:
            if entry.cues and not existing.cues:  # the same fact, asked for in these words
                await tx.update_cues(existing.id, entry.cues)
            # Once per session: each session that shows the record again counts one time.
            if existing.session_id == session_id or not await tx.mark_seen_in(
                existing.id, session_id
            ):
                applied.duplicates += 1
            else:
                await tx.reinforce(
                    existing.id, explicit=entry.confidence == "explicit", threshold=threshold
                )
                applied.reinforced += 1
            return existing.id
    if entry.type == "bugfix":
        stub_id = await _enrich_stub(tx, entry, project_id, session_id)
        if stub_id is not None:
            if entry.cues:  # the explained stub is asked for as the entry is
                await tx.update_cues(stub_id, entry.cues)
            applied.enriched += 1
            return stub_id
    supersedes = await _valid_supersedes(tx, entry, target)
    if entry.supersedes and supersedes is None:
        applied.unknown_supersedes.append(entry.supersedes)
    record = await tx.add(
        NewRecord(
            type=entry.type,
            title=entry.title,
            body=_clip_body(entry.body),
            project_id=target,
            scope=entry.scope,
            confidence=entry.confidence,
            source="llm_extraction",
            keywords=entry.keywords,
            cues=entry.cues,
            session_id=session_id,
            supersedes=supersedes,
            key=checkout if entry.type == "handover" else None,
        )
    )
    applied.added[entry.type] = applied.added.get(entry.type, 0) + 1
    applied.superseded += supersedes is not None
    return record.id


CLOSED_HANDOVER_TITLE = "Handover: no open work"


async def _close_handover(
    tx: Transaction, handover_id: str, project_id: str, session_id: str, checkout: str | None
) -> str | None:
    """Supersede the open handover by a "no open work" one of the checkout, if it is still the
    one this checkout is handed (its own current one, else the legacy one)."""
    rows = await tx.rows(f"SELECT id, title {CHECKOUT_HANDOVERS} LIMIT 1", (project_id, checkout))
    if not rows or rows[0]["id"] != handover_id or rows[0]["title"] == CLOSED_HANDOVER_TITLE:
        return None
    task = str(rows[0]["title"]).removeprefix("Handover: ")
    await tx.add(
        NewRecord(
            type="handover",
            title=CLOSED_HANDOVER_TITLE,
            body=_clip_body(f"Nothing is left open. Finished: {task}"),
            project_id=project_id,
            source="llm_extraction",
            session_id=session_id,
            supersedes=handover_id,
            key=checkout,
        )
    )
    return handover_id


def _clip_body(body: str) -> str:
    """Bodies are capped at the schema's limit: a long entry is kept, cut, never lost whole."""
    return body if len(body) <= BODY_MAX else body[: BODY_MAX - 1].rstrip() + "…"


async def _valid_supersedes(tx: Transaction, entry: Entry, project_id: str) -> str | None:
    if not entry.supersedes:
        return None
    rows = await tx.rows(
        "SELECT id FROM records WHERE id = ? AND project_id = ? AND type = ? "
        "AND superseded_at IS NULL",
        (entry.supersedes, project_id, entry.type),
    )
    return entry.supersedes if rows else None


async def _enrich_stub(
    tx: Transaction, entry: Entry, project_id: str, session_id: str
) -> str | None:
    """Explain a PostToolUse stub of this session that names one of the entry's files; its id."""
    stubs = await tx.rows(
        "SELECT r.id, r.body, group_concat(n.name, '\n') AS files FROM records r "
        "LEFT JOIN record_entities re ON re.record_id = r.id "
        "LEFT JOIN nodes n ON n.id = re.entity_id "
        "WHERE r.project_id = ? AND r.session_id = ? AND r.type = 'bugfix' "
        "AND r.source = 'hook_observation' AND r.superseded_at IS NULL GROUP BY r.id",
        (project_id, session_id),
    )
    wanted = {f.strip("./") for f in entry.files}
    for stub in stubs:
        files = {f.strip("./") for f in (stub["files"] or "").split("\n") if f}
        if wanted & files or (not wanted and len(stubs) == 1):
            observed = str(stub["body"]).removesuffix(STUB_NOTE_FIX).removesuffix(STUB_NOTE)
            body = f"{entry.body}\n\nObserved: {observed.rstrip()}"[:2000]
            await tx.update_body(stub["id"], body, " ".join(entry.keywords))
            return str(stub["id"])
    return None


def _entities(item: dict[str, Any], files: list[str]) -> tuple[list[tuple[str, str]], int]:
    """The code entities an entry names (its ``entities``, a bugfix's ``files`` as files), checked
    and normalized, and how many were dropped (at most :data:`ENTITIES_MAX` named ones count)."""
    named = item.get("entities")
    raw: list[Any] = []
    dropped = 0
    if isinstance(named, list):
        raw = named[:ENTITIES_MAX]
        dropped = len(named) - len(raw)
    elif named is not None:
        dropped = 1
    raw += [{"kind": "file", "name": name} for name in files]
    kept: list[tuple[str, str]] = []
    for value in raw:
        entity = _entity(value)
        if entity is None:
            dropped += 1
        elif entity not in kept:
            kept.append(entity)
    return kept, dropped


def _entity(value: Any) -> tuple[str, str] | None:
    """One checked entity (kind, name), or None: the write rule's check, no secret, no ``..``."""
    if not isinstance(value, dict):
        return None
    kind, name = value.get("kind"), value.get("name")
    if not isinstance(name, str):
        return None
    name = name.strip()
    if entity_problem(kind, name) is not None or redact(name) != name:
        return None
    if kind == "file" and not os.path.isabs(name):
        name = posixpath.normpath(name.replace("\\", "/"))
        if name == ".." or name.startswith("../") or name == ".":
            return None
    return str(kind), name


def _under_root(name: str, root: str | None) -> str:
    """A file's name as capture stores it: relative to the project root when it lies inside it."""
    if root is None or not os.path.isabs(name):
        return name
    try:
        rel = os.path.relpath(os.path.normpath(name), root)
    except ValueError:  # another drive on Windows
        return name
    return name if rel == ".." or rel.startswith(".." + os.sep) else rel


# -- one maker per output field ---------------------------------------------------------------------


def _text(item: dict[str, Any], key: str, limit: int = 1500) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        return ""
    return redact(value.strip())[:limit]


_title = title_from  # the one rule for a title stating a text (records.title_from)


def _confidence(item: dict[str, Any]) -> str:
    return "explicit" if item.get("confidence") == "explicit" else "inferred"


def _keywords(item: dict[str, Any]) -> list[str]:
    """The entry's keywords that are strings; the write path caps, normalizes and redacts them
    (:func:`agentctx.core.writes.normalize_keywords`), as it does every other writer's."""
    value = item.get("keywords")
    if not isinstance(value, list):
        return []
    return [k for k in value if isinstance(k, str)]


def _cues(item: dict[str, Any]) -> list[str]:
    """The entry's retrieval cues that are strings (the write path normalizes and redacts them)."""
    value = item.get("cues")
    if not isinstance(value, list):
        return []
    return [cue for cue in value if isinstance(cue, str)][: 2 * CUES_MAX]


def _supersedes(item: dict[str, Any]) -> str | None:
    value = item.get("supersedes")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _decision(item: dict[str, Any]) -> Entry | None:
    what = _text(item, "what")
    if not what:
        return None
    rationale = _text(item, "rationale")
    body = what + (f"\nRationale: {rationale}" if rationale else "")
    return Entry(
        "decision",
        _title(what),
        body,
        _confidence(item),
        "project",
        _keywords(item),
        _supersedes(item),
    )


def _preference(item: dict[str, Any]) -> Entry | None:
    rule = _text(item, "rule")
    if not rule:
        return None
    scope = "global" if item.get("scope") == "global" else "project"
    category = item.get("category")
    if category is not None and category not in PREFERENCE_CATEGORIES:
        return None  # outside the schema's enum ("mood"): dropped and counted, as the seed says
    body = rule + (f"\n(category: {category})" if category else "")
    return Entry("preference", _title(rule), body, _confidence(item), scope, _keywords(item))


def _convention(item: dict[str, Any]) -> Entry | None:
    text = _text(item, "convention")
    if not text:
        return None
    scope = item.get("scope") if item.get("scope") in ("file", "module", "project") else "project"
    return Entry(
        "convention",
        _title(text),
        f"{text}\n(applies to: {scope})",
        _confidence(item),
        "project",
        _keywords(item),
        _supersedes(item),
    )


def _gotcha(item: dict[str, Any]) -> Entry | None:
    pattern = _text(item, "pattern")
    why = _text(item, "why_it_matters")
    if not pattern:
        return None
    body = pattern + (f"\nWhy it matters: {why}" if why else "")
    return Entry("discovery", _title(pattern), body, "inferred", "project", _keywords(item))


def _bugfix(item: dict[str, Any]) -> Entry | None:
    problem = _text(item, "problem")
    fix = _text(item, "fix")
    if not problem or not fix:
        return None
    files_value = item.get("files")
    files: list[str] = []
    if isinstance(files_value, list):
        files = [redact(f) for f in files_value if isinstance(f, str)][:10]
    body = f"Problem: {problem}\nFix: {fix}" + (f"\nFiles: {', '.join(files)}" if files else "")
    return Entry(
        "bugfix", _title(problem), body, "inferred", "project", _keywords(item), files=files
    )


def _handover(work: dict[str, Any]) -> Entry | None:
    task = _text(work, "current_task")
    parts = [f"Current task: {task}"] if task else []
    for key, label in (
        ("blockers", "Blockers"),
        ("next_steps", "Next steps"),
        ("open_questions", "Open questions"),
    ):
        items = work.get(key)
        if isinstance(items, list):
            clean = [redact(" ".join(i.split())) for i in items if isinstance(i, str) and i.strip()]
            if clean:
                parts.append(f"{label}:\n" + "\n".join(f"- {i}" for i in clean[:10]))
    if not parts:
        return None
    title = _title("Handover: " + (task or "work in progress"))
    return Entry("handover", title, "\n".join(parts)[:2000], "inferred", "project")
