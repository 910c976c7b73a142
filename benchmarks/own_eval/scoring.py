"""How the own eval scores: the key, the matching rule, and the metrics (pure functions, no I/O).

**Matching a produced record to a key item.** A record's *text* is its title, body and keywords,
lower-cased with runs of white space made one space. A key fact is a set of alternatives
(``"postgres|postgresql"``); it is *present* when one alternative occurs as a whole word or phrase
(no letter or digit right before or after it). A record's *coverage* of an item is the share of the
item's facts present in its text; the record *covers* the item when more than half of the facts are
present (1 of 1, 2 of 2, 2 of 3, 3 of 4), and the pair is a *candidate* when it covers the item and
the record comes from the item's session. Among candidates of
the same type, pairs are assigned one to one, greedily, best first by coverage plus half the title
similarity (difflib's ratio over the lower-cased words of both titles), ties by ids. Then:

* a record left over that is a candidate of an item left over *of another type* is a **wrong type**
  (counted apart: the fact is in the store, under the wrong heading);
* a record left over that covers an item of this or an earlier session (any type) is a
  **duplicate** (it says again what another record, or an earlier session, already says);
* any other record left over is an **extra**; an item with no record is **missed**.

Precision is matched records / produced records, recall matched items / key items; the *lenient*
figures count wrong-type matches as matched too. Both are summed over sessions (micro average).

**Retrieval.** A record *answers* the item it was assigned to (matched or wrong type); a record
assigned to nothing (a duplicate, an extra, a merge survivor of a duplicate) answers every item it
covers. recall@k of a question is the share of its expected items that some record in
the top k answers; a *stale* hit is a record in the top k whose items no longer hold at that point.
"""

from __future__ import annotations

import difflib
import json
import re
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

_SPACES = re.compile(r"\s+")
_WORDS = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True, slots=True)
class KeyItem:
    """One fact a good extraction of a session should produce."""

    id: str
    session: int
    type: str
    title: str
    facts: tuple[str, ...]
    scope: str = "project"
    superseded_by: str | None = None
    valid_until: int | None = None  #: the last session after which it still holds (None: for good)


@dataclass(frozen=True, slots=True)
class Question:
    """A labelled question: asked once sessions 1..``after`` are in the store."""

    id: str
    after: int
    text: str
    expects: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Key:
    """The key file: items, and per session the earlier items it only restates."""

    project: str
    items: tuple[KeyItem, ...]
    restates: dict[int, tuple[str, ...]]
    scripts: dict[int, str]

    def by_id(self) -> dict[str, KeyItem]:
        """Items by id."""
        return {item.id: item for item in self.items}

    def of_session(self, session: int) -> list[KeyItem]:
        """The items a session should produce."""
        return [item for item in self.items if item.session == session]


@dataclass(frozen=True, slots=True)
class Produced:
    """A record as the eval sees it: which scripted session wrote it, its type and its text."""

    id: str
    session: int
    type: str
    title: str
    text: str
    superseded_by: str | None = None


@dataclass(slots=True)
class Matching:
    """The outcome of matching one session's records to its key items."""

    matched: dict[str, str] = field(default_factory=dict)  #: record id -> item id
    wrong_type: dict[str, str] = field(default_factory=dict)  #: record id -> item id
    duplicates: dict[str, str] = field(default_factory=dict)  #: record id -> item it repeats
    extras: list[str] = field(default_factory=list)  #: record ids
    missed: list[str] = field(default_factory=list)  #: item ids

    @property
    def produced(self) -> int:
        """Records considered."""
        return len(self.matched) + len(self.wrong_type) + len(self.duplicates) + len(self.extras)

    def assigned(self) -> dict[str, str]:
        """Record id -> item id, of the matched and wrong-type records."""
        return {**self.matched, **self.wrong_type}


def load_key(path: Path) -> Key:
    """Read key.json."""
    data = json.loads(path.read_text())
    items = tuple(
        KeyItem(
            id=i["id"],
            session=int(i["session"]),
            type=i["type"],
            title=i["title"],
            facts=tuple(i["facts"]),
            scope=i.get("scope", "project"),
            superseded_by=i.get("superseded_by"),
            valid_until=i.get("valid_until"),
        )
        for i in data["items"]
    )
    sessions = data["sessions"]
    return Key(
        project=data["project"],
        items=items,
        restates={int(s["n"]): tuple(s.get("restates", ())) for s in sessions},
        scripts={int(s["n"]): s["script"] for s in sessions},
    )


def load_questions(path: Path) -> list[Question]:
    """Read questions.json."""
    data = json.loads(path.read_text())
    return [
        Question(q["id"], int(q["after"]), q["text"], tuple(q["expects"]))
        for q in data["questions"]
    ]


# -- text ---------------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Lower case, white space runs made one space."""
    return _SPACES.sub(" ", text.lower()).strip()


def fact_present(fact: str, text: str) -> bool:
    """Whether one alternative of ``fact`` occurs in (normalized) ``text`` as a whole word/phrase."""
    for alternative in fact.split("|"):
        needle = normalize(alternative)
        if needle and re.search(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])", text):
            return True
    return False


def coverage(item: KeyItem, text: str) -> float:
    """The share of the item's facts present in ``text`` (normalized first)."""
    if not item.facts:
        return 0.0
    flat = normalize(text)
    return sum(fact_present(fact, flat) for fact in item.facts) / len(item.facts)


def covers(item: KeyItem, text: str) -> bool:
    """Whether more than half of the item's facts are present in ``text``."""
    return coverage(item, text) > 0.5


def title_similarity(a: str, b: str) -> float:
    """difflib's ratio over the lower-cased words of two titles."""
    return difflib.SequenceMatcher(
        None, _WORDS.findall(a.lower()), _WORDS.findall(b.lower())
    ).ratio()


# -- matching -----------------------------------------------------------------------------------


def match(
    produced: Sequence[Produced], items: Sequence[KeyItem], earlier: Sequence[KeyItem] = ()
) -> Matching:
    """Match one session's records to its key items (the rule is in the module docstring)."""
    result = Matching()
    pairs: list[tuple[float, str, str, Produced, KeyItem]] = []
    for record in produced:
        for item in items:
            if record.session != item.session:
                continue
            share = coverage(item, record.text)
            if share > 0.5:
                score = share + title_similarity(record.title, item.title) / 2
                pairs.append((-score, record.id, item.id, record, item))
    pairs.sort(key=lambda p: (p[0], p[1], p[2]))
    taken_records: set[str] = set()
    taken_items: set[str] = set()
    for same_type in (True, False):
        for _score, record_id, item_id, record, item in pairs:
            if record_id in taken_records or item_id in taken_items:
                continue
            if (record.type == item.type) != same_type:
                continue
            (result.matched if same_type else result.wrong_type)[record_id] = item_id
            taken_records.add(record_id)
            taken_items.add(item_id)
    for record in produced:
        if record.id in taken_records:
            continue
        repeated = best_covered(record.text, [*items, *earlier])
        if repeated is not None:
            result.duplicates[record.id] = repeated
        else:
            result.extras.append(record.id)
    result.missed = [item.id for item in items if item.id not in taken_items]
    return result


def best_covered(text: str, items: Iterable[KeyItem]) -> str | None:
    """The item ``text`` covers with the largest share of its facts, or None."""
    best: tuple[float, str] | None = None
    for item in items:
        share = coverage(item, text)
        if share > 0.5 and (best is None or share > best[0]):
            best = (share, item.id)
    return None if best is None else best[1]


@dataclass(frozen=True, slots=True)
class PR:
    """Precision and recall with their counts."""

    matched: int
    produced: int
    items: int

    @property
    def precision(self) -> float:
        """matched / produced (1.0 when nothing was produced)."""
        return self.matched / self.produced if self.produced else 1.0

    @property
    def recall(self) -> float:
        """matched / items (1.0 when nothing was expected)."""
        return self.matched / self.items if self.items else 1.0


def precision_recall(matchings: Iterable[Matching], *, lenient: bool = False) -> PR:
    """Micro-averaged precision and recall over sessions; lenient counts wrong types as matched."""
    matched = produced = items = 0
    for m in matchings:
        hits = len(m.matched) + (len(m.wrong_type) if lenient else 0)
        matched += hits
        produced += m.produced
        items += len(m.matched) + len(m.wrong_type) + len(m.missed)
    return PR(matched, produced, items)


# -- validity, supersession ---------------------------------------------------------------------


def holds(item: KeyItem, after: int, items: Mapping[str, KeyItem]) -> bool:
    """Whether ``item`` is true once sessions 1..``after`` happened."""
    if item.session > after:
        return False
    if item.valid_until is not None and after > item.valid_until:
        return False
    successor = items.get(item.superseded_by) if item.superseded_by else None
    return not (successor is not None and successor.session <= after)


@dataclass(frozen=True, slots=True)
class Supersession:
    """One supersession of the key and what the store did with it."""

    old: str
    new: str
    #: correct | not superseded | wrong successor | old not extracted | new not extracted
    status: str


def supersessions(
    key: Key, record_of: Mapping[str, str], superseded_by: Mapping[str, str | None]
) -> list[Supersession]:
    """Check each key supersession: is the old item's record superseded by the new item's record?

    ``record_of``: item id -> the record assigned to it; ``superseded_by``: record id -> the record
    that superseded it (None while current).
    """
    out = []
    for item in key.items:
        if not item.superseded_by:
            continue
        old, new = record_of.get(item.id), record_of.get(item.superseded_by)
        if old is None:
            status = "old not extracted"
        elif new is None:
            status = "new not extracted"
        elif superseded_by.get(old) == new:
            status = "correct"
        elif superseded_by.get(old) is None:
            status = "not superseded"
        else:
            status = "wrong successor"
        out.append(Supersession(item.id, item.superseded_by, status))
    return out


# -- retrieval ----------------------------------------------------------------------------------


def answers_of(
    records: Iterable[Produced], assigned: Mapping[str, str], items: Sequence[KeyItem]
) -> dict[str, frozenset[str]]:
    """Record id -> the items it answers (see the module docstring)."""
    out: dict[str, frozenset[str]] = {}
    for record in records:
        if record.id in assigned:
            out[record.id] = frozenset({assigned[record.id]})
        else:
            out[record.id] = frozenset(item.id for item in items if covers(item, record.text))
    return out


def recall_at(
    retrieved: Sequence[str], expects: Iterable[str], answers: Mapping[str, frozenset[str]], k: int
) -> float:
    """The share of expected items answered by a record in the top ``k`` (1.0 if none expected)."""
    wanted = set(expects)
    if not wanted:
        return 1.0
    found: set[str] = set()
    for record_id in retrieved[:k]:
        found |= answers.get(record_id, frozenset())
    return len(wanted & found) / len(wanted)


def stale_hits(
    retrieved: Sequence[str],
    answers: Mapping[str, frozenset[str]],
    items: Mapping[str, KeyItem],
    after: int,
    k: int,
) -> int:
    """Records in the top ``k`` that answer only items no longer true after session ``after``."""
    count = 0
    for record_id in retrieved[:k]:
        found = answers.get(record_id, frozenset())
        if found and not any(holds(items[i], after, items) for i in found):
            count += 1
    return count


def choose_n(budget: float, costs: Sequence[Sequence[int]]) -> int:
    """The largest N whose mean cost over sessions (the N newest records each) fits ``budget``.

    ``costs[s]`` holds the token cost of each record shown at the start of session ``s``, newest
    first; a session with fewer records shows them all.
    """
    if not costs:
        return 0
    best = 0
    longest = max((len(c) for c in costs), default=0)
    for n in range(1, longest + 1):
        if statistics.fmean(sum(c[:n]) for c in costs) <= budget:
            best = n
        else:
            break
    return best


def as_dict(value: Any) -> Any:
    """Dataclasses (and containers of them) as plain data, for the JSON results."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: as_dict(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_dict(v) for v in value]
    return value
