"""Project profile detection: the stack, package manager and commands of a repository, by rule.

``agentctx init`` (and a CwdChanged refresh) stores what :func:`detect` finds as keyed ``profile``
records, one per :class:`ProfileFact` key, so a newer detection supersedes the older one by key.

Design notes:

- Rules only, no model and no subprocess: the manifest files at the repository root are parsed
  (``Makefile``, ``pyproject.toml`` with the nox/tox/pytest/ruff/mypy files beside it,
  ``package.json`` with its lock files, ``Cargo.toml``, ``go.mod``), nothing is executed.
- A repository may hold several ecosystems; every candidate is kept and each fact lists them, task
  runners that wrap the others (``make``, ``nox``, ``tox``) first, each with where it came from.
- Never raises on a malformed, unreadable or oversized file (it is skipped) or on values of the
  wrong kind. The same tree always gives the same facts in the same order.
- Standard library only (``tomllib``, ``json``, ``ast`` for the noxfile, ``configparser``).

Layout: ``readers.py`` (the lenient file readers), one module per ecosystem (``python.py``,
``node.py``, ``rust.py``, ``go.py``) and ``runners.py`` (the task runners: make, nox, tox).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from agentctx.detection import go, node, python, runners, rust
from agentctx.detection.readers import clip

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.detection.readers import Finding
    from agentctx.records import NewRecord

__all__ = ["FACT_TITLES", "ProfileFact", "detect"]

#: fact key -> title, in the order :func:`detect` returns facts
FACT_TITLES: Final[dict[str, str]] = {
    "languages": "Languages",
    "stack": "Stack",
    "package_manager": "Package manager",
    "test_command": "Test command",
    "build_command": "Build command",
    "lint_command": "Lint command",
    "format_command": "Format command",
    "typecheck_command": "Type-check command",
    "run_command": "Run command",
    "entry_points": "Entry points",
}

TITLE_MAX: Final = 120  # the record limits of schema.py, repeated to keep this package stdlib-only
BODY_MAX: Final = 2000


@dataclass(frozen=True, slots=True)
class ProfileFact:
    """One keyed fact about a project: ``key`` (e.g. ``test_command``), a title and a body."""

    key: str
    title: str
    body: str

    def record(self, project_id: str) -> NewRecord:
        """The keyed profile record of this fact, as ``init`` and the demo store it."""
        from agentctx.records import NewRecord

        return NewRecord(
            type="profile",
            key=self.key,
            title=self.title,
            body=self.body,
            project_id=project_id,
            confidence="explicit",
            source="cli",
        )


def detect(root: Path) -> list[ProfileFact]:
    """The profile facts of the repository at ``root`` (empty when nothing is recognized)."""
    findings: list[Finding] = []
    for detector in (runners.make, python.detect, node.detect, rust.detect, go.detect):
        findings.extend(detector(root))
    return _combine(findings)


def _combine(findings: list[Finding]) -> list[ProfileFact]:
    facts = []
    for key, title in FACT_TITLES.items():
        merged: dict[str, list[str]] = {}  # value -> sources, first-seen order after ranking
        for finding in sorted((f for f in findings if f.key == key), key=lambda f: f.rank):
            sources = merged.setdefault(finding.value, [])
            if finding.source not in sources:
                sources.append(finding.source)
        if merged:
            body = "; ".join(f"{value} (from {' / '.join(src)})" for value, src in merged.items())
            facts.append(ProfileFact(key, title[:TITLE_MAX], clip(body, BODY_MAX)))
    return facts
