"""The facts a session needs first (issue 25, item 4): a project's test, lint and build commands and
its stack, from its ``profile`` records (keyed by fact, :mod:`agentctx.detection`).

Two readers, one rule each:

* **the digest** orders the profile section by :data:`PROFILE_ORDER` (these four first) and keeps
  the essential lines whatever the section's budget (:func:`agentctx.retrieval.digest.render`
  shortens them rather than drop one);
* **the prompt hook**: a prompt that asks for one of them ("how do I run the tests here?", "what is
  the lint command") is answered by that profile record (:func:`asked_keys`, :func:`answers`),
  even when its words are too common for the keyword search to tell anything (``run``, ``tests``).

An ask is a topic word of a fact (:data:`TOPICS`) with a word that asks for a command
(:data:`ASKING`), or a prompt of nothing but topic words and words of place (:data:`FILLER`).
Standard library only (the hook path).
"""

from __future__ import annotations

from agentctx.core.plan import rows
from agentctx.core.schema import GLOBAL_PROJECT_ID, RECORD_COLUMNS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from agentctx.core.plan import Plan

#: The profile facts no session should start without.
ESSENTIAL = ("test_command", "lint_command", "build_command", "stack")
#: The digest's order of profile facts: the essentials, then the rest.
PROFILE_ORDER = (
    *ESSENTIAL,
    "languages",
    "package_manager",
    "typecheck_command",
    "format_command",
    "run_command",
    "entry_points",
)
#: The words of a prompt that name a fact (query terms: lower case, no stop words).
TOPICS: dict[str, frozenset[str]] = {
    "test_command": frozenset({
        "test", "tests", "testing", "pytest", "unittest", "jest", "vitest", "specs", "testsuite",
    }),
    "lint_command": frozenset({"lint", "linter", "linting", "linters"}),
    "build_command": frozenset({"build", "builds", "building", "compile", "compiling"}),
    "stack": frozenset({"stack", "framework", "frameworks", "tech", "technologies"}),
    "typecheck_command": frozenset({"typecheck", "typechecker", "mypy", "pyright", "tsc"}),
    "format_command": frozenset({"format", "formatter", "formatting", "reformat"}),
}  # fmt: skip
#: Query terms that ask for a command (the hook sees terms: "how", "what", "do" are stop words).
ASKING = frozenset({
    "run", "running", "runs", "command", "commands", "cmd", "execute", "invoke", "script",
    "scripts", "start", "launch",
})  # fmt: skip
#: Terms that say nothing more than where: a prompt of only these and topic words asks for the
#: fact ("how do we build this", "what stack is this project").
FILLER = frozenset({
    "project", "repo", "repository", "codebase", "app", "locally", "local", "whole", "suite",
    "all", "unit", "one", "ones", "again", "properly", "correctly", "tool", "tools",
})  # fmt: skip
_COLUMNS_SQL = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


def asked_keys(terms: Iterable[str]) -> list[str]:
    """The profile facts a prompt asks for, from its query terms
    (:func:`agentctx.core.search.query_terms`)."""
    found = set(terms)
    topics = frozenset().union(*TOPICS.values())
    plain = found <= topics | ASKING | FILLER  # nothing but the fact and where
    asking = bool(found & ASKING) or plain
    keys = []
    for key, topic in TOPICS.items():
        if found & topic and asking:
            keys.append(key)
    return keys


def answers(
    keys: Sequence[str], project_id: str | None, exclude_ids: Iterable[str] = ()
) -> Plan[list[Any]]:
    """The project's current profile records of these facts (search rows, ``rank`` 0), not
    among ``exclude_ids``, in the order of ``keys``."""
    if not keys or not project_id or project_id == GLOBAL_PROJECT_ID:
        return []
    marks = ", ".join("?" * len(keys))
    found: list[Any] = yield rows(
        f"SELECT {_COLUMNS_SQL}, 0.0 AS rank FROM records AS r WHERE r.project_id = ? "
        f"AND r.type = 'profile' AND r.superseded_at IS NULL AND r.key IN ({marks})",
        (project_id, *keys),
    )
    shown = set(exclude_ids)
    order = {key: n for n, key in enumerate(keys)}
    kept = [row for row in found if row["id"] not in shown]
    kept.sort(key=lambda row: order.get(row["key"], len(order)))
    return kept
