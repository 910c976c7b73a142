"""The precision eval's data (``data/*.json``): loading and the checks every file must pass.

Standard library only: ``tests/test_precision_eval.py`` checks the files without a store or a model,
and ``run.py`` loads them through :func:`load`. The format is described in ``README.md``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
GLOBAL = "global"
PARTS = ("tuning", "heldout")
KINDS = ("answerable", "unanswerable", "chitchat", "cross_project")
TYPES = ("decision", "convention", "preference", "discovery", "bugfix", "handover", "profile")
CONFIDENCES = ("explicit", "inferred", "reinforced")
SOURCES = ("llm_extraction", "hook_observation", "mcp_tool", "cli", "import")
CAPTURE_EVENTS = ("PostToolUse", "PostToolUseFailure")
#: Issue 25 retired the first held-out part (atlas, relay) into the tuning part; the new one
#: (tidewater, parley), written blind, was retired into it in turn once its aggregates had been read
#: and the rules were tuned on it; a second blind part (rigyard, lanternfall) replaced it, was run
#: once (stop 24) and moved into tuning too (stop 25: its per-prompt results guide the next round).
#: A third blind part (quayside: PHP/Laravel, fernweh: Flutter), written blind at stop 25, replaced
#: it, was run once (aggregates only) and moved into tuning at stop 26, so the rules are tuned on
#: six projects written blind. A fourth blind part (dockyra: Java/Spring Boot, mossbell:
#: Swift/SwiftUI), written blind at stop 26, replaced it, was run once (aggregates only) and moved
#: into tuning at stop 27 (eight of thirteen tuning projects written blind). A fifth blind part
#: (pondwick: C#/.NET 8, skarnfold: Terraform/Kubernetes), written blind at stop 27, replaced it,
#: was run once (aggregates only) and moved into tuning on 2026-12-07 (ten of fifteen tuning
#: projects written blind). A sixth blind part (ostrevane: Scala 3/Spark/Airflow/dbt, fennimay:
#: Vue 3/Nuxt), written blind on 2026-12-07, replaced it, was run once (aggregates only) and moved
#: into tuning the same day (twelve of seventeen tuning projects written blind). A seventh blind
#: part (sprigly: Kotlin/Android, rotaflow: Django/Celery), written blind at the stop before and
#: kept unopened, replaces it: a data set without one is refused.
HELDOUT_REQUIRED = True
#: The issue's minimums (issue 14), and this data set's own (larger) ones.
MIN_PROJECTS = 4
MIN_RECORDS = 180
MIN_PROMPTS = 120
MIN_UNANSWERABLE = 45
MIN_CHITCHAT = 12
#: Words too common to count as "sharing a word with the store" (a rough stand-in for stop words).
COMMON = frozenset(
    {
        *("the", "and", "for", "with", "how", "what", "whats", "does", "did", "can", "should"),
        *("this", "that", "our", "its", "when", "where", "which", "who", "are", "was", "not"),
        *("but", "you", "use", "new"),
    }
)


@dataclass(frozen=True, slots=True)
class Capture:
    """A Bash tool call whose PostToolUse event the real capture hook turns into a stub."""

    event: str
    command: str
    output: str


@dataclass(frozen=True, slots=True)
class Item:
    """One record of the data set: written through the library, or captured by the hook."""

    key: str
    project: str  # a project name, or "global"
    type: str
    title: str
    body: str
    keywords: tuple[str, ...]
    confidence: str
    source: str
    valid_from: str | None  # None for captured stubs: the hook stamps them with the run's time
    supersedes: str | None
    capture: Capture | None
    #: Optional retrieval cues, written with the record as extraction writes them (issue 14).
    cues: tuple[str, ...] = ()

    @property
    def is_global(self) -> bool:
        return self.project == GLOBAL

    @property
    def text(self) -> str:
        """Everything of the record a search could match (for a capture: its command and output)."""
        if self.capture is not None:
            return f"{self.capture.command} {self.capture.output}"
        return " ".join([self.title, self.body, *self.keywords, *self.cues])


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt, typed in ``project``, with the keys of the records that answer it."""

    id: str
    project: str
    kind: str
    text: str
    answers: tuple[str, ...]
    about: str | None  # cross_project: the project that knows the answer


@dataclass(frozen=True, slots=True)
class Project:
    name: str
    origin: str
    part: str
    description: str


@dataclass(frozen=True, slots=True)
class Dataset:
    projects: dict[str, Project]
    items: list[Item]
    prompts: list[Prompt]

    @property
    def by_key(self) -> dict[str, Item]:
        return {item.key: item for item in self.items}

    def part_of(self, project: str) -> str:
        return self.projects[project].part

    @property
    def superseded(self) -> set[str]:
        return {item.supersedes for item in self.items if item.supersedes}


def load(folder: Path = DATA) -> Dataset:
    """Every ``*.json`` file of ``folder``; :class:`ValueError` naming the first malformed field."""
    projects: dict[str, Project] = {}
    items: list[Item] = []
    prompts: list[Prompt] = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        name = _text(data, "project", path)
        part = _text(data, "part", path)
        if name != GLOBAL:
            projects[name] = Project(name, _text(data, "origin", path), part, data["description"])
        for raw in data["records"]:
            items.append(_item(raw, name, path))
        for raw in data["prompts"]:
            prompts.append(
                Prompt(
                    id=_text(raw, "id", path),
                    project=raw.get("project", name),
                    kind=_text(raw, "kind", path),
                    text=_text(raw, "text", path),
                    answers=tuple(raw.get("answers", ())),
                    about=raw.get("about"),
                )
            )
    return Dataset(projects, items, prompts)


def _text(raw: dict[str, object], name: str, path: Path) -> str:
    value = raw.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{path.name}: {name!r} missing or empty in {raw.get('key', raw)!r}")
    return value


def _item(raw: dict[str, object], project: str, path: Path) -> Item:
    key = _text(raw, "key", path)
    capture = raw.get("capture")
    if isinstance(capture, dict):
        return Item(
            key=key,
            project=project,
            type=_text(raw, "type", path),
            title="",
            body="",
            keywords=(),
            confidence="inferred",
            source="hook_observation",
            valid_from=None,
            supersedes=None,
            capture=Capture(capture["event"], capture["command"], capture["output"]),
        )
    keywords = raw.get("keywords", [])
    assert isinstance(keywords, list)
    cues = raw.get("cues", [])
    assert isinstance(cues, list)
    supersedes = raw.get("supersedes")
    return Item(
        key=key,
        project=project,
        type=_text(raw, "type", path),
        title=_text(raw, "title", path),
        body=_text(raw, "body", path),
        keywords=tuple(str(k) for k in keywords),
        confidence=_text(raw, "confidence", path),
        source=str(raw.get("source", "cli")),
        valid_from=_text(raw, "valid_from", path),
        supersedes=supersedes if isinstance(supersedes, str) else None,
        capture=None,
        cues=tuple(str(c) for c in cues),
    )


def problems(data: Dataset) -> list[str]:
    """Everything wrong with the data set (empty when it is sound)."""
    found: list[str] = []
    keys = [item.key for item in data.items]
    by_key = data.by_key
    if len(set(keys)) != len(keys):
        found.append(
            "duplicate record keys: " + ", ".join(sorted({k for k in keys if keys.count(k) > 1}))
        )
    ids = [p.id for p in data.prompts]
    if len(set(ids)) != len(ids):
        found.append("duplicate prompt ids")
    # the split: two parts, each of whole projects, none in both
    parts = {part: [p for p in data.projects.values() if p.part == part] for part in PARTS}
    if any(p.part not in PARTS for p in data.projects.values()):
        found.append("a project's part is neither tuning nor heldout")
    if len(parts["tuning"]) < 2:
        found.append("the tuning part needs at least two projects")
    if HELDOUT_REQUIRED and not parts["heldout"]:
        found.append("no held-out project: the blind held-out part is missing")
    origins = [p.origin for p in data.projects.values()]
    if len(set(origins)) != len(origins):
        found.append("two projects share an origin remote (they would be one project)")
    if len(data.projects) < MIN_PROJECTS:
        found.append(f"{len(data.projects)} projects, fewer than {MIN_PROJECTS}")
    if len(data.items) < MIN_RECORDS:
        found.append(f"{len(data.items)} records, fewer than {MIN_RECORDS}")
    for item in data.items:
        where = f"record {item.key}"
        if item.project != GLOBAL and item.project not in data.projects:
            found.append(f"{where}: unknown project {item.project}")
        if item.type not in TYPES:
            found.append(f"{where}: type {item.type}")
        if item.confidence not in CONFIDENCES or item.source not in SOURCES:
            found.append(f"{where}: confidence or source")
        if item.is_global and item.type != "preference":
            found.append(f"{where}: a global record must be a preference")
        if item.capture is not None:
            if item.capture.event not in CAPTURE_EVENTS or not item.capture.command.strip():
                found.append(f"{where}: capture needs a PostToolUse event and a command")
            continue
        assert item.valid_from is not None
        try:
            date.fromisoformat(item.valid_from)
        except ValueError:
            found.append(f"{where}: valid_from {item.valid_from!r} is not a date")
        if len(item.title) > 120 or len(item.keywords) > 8:
            found.append(f"{where}: title over 120 characters (TITLE_MAX) or more than 8 keywords")
        if len(item.cues) > 4 or any(len(c) > 120 for c in item.cues):
            found.append(f"{where}: more than 4 cues or a cue over 120 characters (CUES_MAX)")
        if item.supersedes is not None:
            old = by_key.get(item.supersedes)
            if old is None:
                found.append(f"{where}: supersedes unknown {item.supersedes}")
            elif old.project != item.project or old.type != item.type:
                found.append(f"{where}: supersedes a record of another project or type")
            elif old.valid_from is None or old.valid_from >= item.valid_from:
                found.append(f"{where}: supersedes a record that is not older")
    successors = [item.supersedes for item in data.items if item.supersedes]
    if len(set(successors)) != len(successors):
        found.append("a record is superseded twice (a chain must not fork)")
    superseded = data.superseded
    counts = {kind: 0 for kind in KINDS}
    for prompt in data.prompts:
        where = f"prompt {prompt.id}"
        if prompt.kind not in KINDS:
            found.append(f"{where}: kind {prompt.kind}")
            continue
        counts[prompt.kind] += 1
        if prompt.project not in data.projects:
            found.append(f"{where}: unknown project {prompt.project}")
            continue
        if prompt.kind == "answerable":
            if not prompt.answers:
                found.append(f"{where}: an answerable prompt needs answers")
            for key in prompt.answers:
                answer = by_key.get(key)
                if answer is None:
                    found.append(f"{where}: unknown answer {key}")
                elif key in superseded:
                    found.append(f"{where}: answer {key} is superseded")
                elif not answer.is_global and answer.project != prompt.project:
                    found.append(f"{where}: answer {key} belongs to another project")
        elif prompt.answers:
            found.append(f"{where}: a {prompt.kind} prompt has no answers")
        if prompt.kind == "unanswerable" and not shared_words(data, prompt):
            found.append(f"{where}: shares no word with the records of its project")
        if prompt.kind == "cross_project" and (
            prompt.about not in data.projects or prompt.about == prompt.project
        ):
            found.append(f"{where}: about must name another project")
    if len(data.prompts) < MIN_PROMPTS:
        found.append(f"{len(data.prompts)} prompts, fewer than {MIN_PROMPTS}")
    if counts["unanswerable"] < MIN_UNANSWERABLE:
        found.append(
            f"{counts['unanswerable']} unanswerable prompts, fewer than {MIN_UNANSWERABLE}"
        )
    if counts["chitchat"] < MIN_CHITCHAT:
        found.append(f"{counts['chitchat']} chit-chat prompts, fewer than {MIN_CHITCHAT}")
    return found


def words(text: str) -> set[str]:
    """The lower-case words of three or more characters of ``text``, common ones left out."""
    return set(re.findall(r"[a-z0-9_]{3,}", text.lower())) - COMMON


def shared_words(data: Dataset, prompt: Prompt) -> set[str]:
    """The words of ``prompt`` that records of its project (or global ones) also hold."""
    store = set[str]().union(
        *(words(i.text) for i in data.items if i.is_global or i.project == prompt.project)
    )
    return words(prompt.text) & store
