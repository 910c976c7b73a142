"""Folded capture: test outcomes both ways and git operations, as records that do not flood.

The capture rules (:mod:`agentctx.core.capture`) read a green test run or a git operation out of
a Bash call; :mod:`agentctx.core.observe` runs the plans here in its transaction. The rule, once:
a **repeat of the same fact folds** into its current record in place (a counter, the latest time,
the newest items: like ``reinforce_count``), and a **change of state is a new version** (the
record it replaces is superseded, never edited into something else).

* **A green run** of a test command (``test_pass``): one inferred ``discovery``
  ``Tests passed: <command>`` per project and command, whose body counts the green runs and names
  the first (its ``valid_from``) and the latest (time, session, summary line). Fifty green runs are
  one record with a count of 50. Before folding, every current stub ``Test failure: <command>``
  (the same command, as the failure was captured) is **closed**: superseded by a ``bugfix``
  ``Test failure fixed: <command>`` that keeps the failure's body (and files) and adds the
  evidence: which command passed, when, in which session, and its summary line.
* **Git operations** (``git``: commits, merges, rebases, pull requests opened with ``gh``): one
  inferred ``discovery`` ``Git activity on <branch>`` per project and branch, holding the newest
  :data:`ITEMS_MAX` operations (one line each: time, what, commit and subject or PR URL, files)
  and the count of all of them; a commit already listed (its hash) is not added again. The record
  is linked to the branch node and to the files the operation names. A pull request also gets its
  own ``discovery`` ``PR opened: <title>`` (once per title), linked to the branch and to the
  files of the branch's activity.

All text passes :mod:`agentctx.core.writes` (validation, redaction, limits): :func:`writes.add` for
new records and versions, :func:`writes.absorb` for a fold. The titles are what the hook computed
from the command or output, already clipped; the bodies are cut to the schema's limit here.
"""

from __future__ import annotations

from agentctx.core import clock, schema, writes
from agentctx.core.observe import STUB_NOTE as NOTE
from agentctx.core.observe import STUB_NOTE_FIX as NOTE_FIX
from agentctx.core.observe import TEST_FAILURE
from agentctx.core.plan import execute, rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agentctx.core.plan import Plan
    from agentctx.core.shapes import Observation

KINDS = frozenset({"test_pass", "git"})
FAIL_PREFIX = TEST_FAILURE
FIXED_PREFIX = "Test failure fixed: "
PASS_PREFIX = "Tests passed: "
GIT_PREFIX = "Git activity on "
PR_PREFIX = "PR opened: "
#: How many operations a branch's git activity record lists (the count covers all of them).
ITEMS_MAX = 12
#: How many files one operation links (and the session's edited files it falls back to).
FILES_MAX = 12
#: How many open failure stubs of one command one green run closes (normally one).
_CLOSE_MAX = 5
_COL = {name: i for i, name in enumerate(schema.RECORD_COLUMNS)}


def test_pass(
    project_id: str, session_id: str | None, at: str, command: str, summary: str
) -> Plan[str]:
    """A green run of ``command``: close its open failure stubs, fold the run; the green record's id."""
    for _ in range(_CLOSE_MAX):
        stub = yield from _current(project_id, "bugfix", FAIL_PREFIX + command)
        if stub is None:
            break
        yield from _close_failure(stub, command, session_id, at, summary)
    title = PASS_PREFIX + command
    found = yield from _current(project_id, "discovery", title)
    if found is None:
        row = yield from writes.add(
            {
                **_inferred(project_id, session_id, at, "discovery", title, "test pass"),
                "body": _pass_body(command, 1, at, at, session_id, summary),
            }
        )
        return str(row["id"])
    count = int(found[_COL["reinforce_count"]]) + 2  # the first run is not a reinforcement
    body = _pass_body(command, count, str(found[_COL["valid_from"]]), at, session_id, summary)
    # only the tally changed, not what the record means: no re-embedding
    yield from writes.absorb(
        str(found[_COL["id"]]), {"body": body, "reinforce_count": count - 1}, False
    )
    return str(found[_COL["id"]])


def git(
    project_id: str,
    session_id: str | None,
    at: str,
    obs: Observation,
) -> Plan[str]:
    """A git operation: folded into its branch's activity record (and a PR's own); that id.

    ``obs`` holds ``op`` (commit, merge, rebase, pull, pr), ``item`` (the line to list), ``ref``
    (a commit hash or PR URL: an item already listed with it is not added again), ``branch``
    (None when unknown or detached), ``files`` and ``session_files`` (link the session's edited
    files when the operation names none), and for a PR its ``title``.
    """
    branch = str(obs.get("branch") or "") or None
    files = [str(f) for f in obs.get("files") or []][:FILES_MAX]
    if not files and obs.get("session_files") and session_id:
        files = yield from _session_files(project_id, session_id)
    item = f"- {clock.minute(at)} {obs['item']}"
    if files:
        item += " — files: " + ", ".join(files)
    item = item[:400]
    title = GIT_PREFIX + (branch or "a detached HEAD")
    ref = str(obs.get("ref") or "")
    found = yield from _current(project_id, "discovery", title)
    if found is None:
        row = yield from writes.add(
            {
                **_inferred(project_id, session_id, at, "discovery", title, f"git {obs['op']}"),
                "body": _git_body(branch, 1, [item]),
            }
        )
        activity_id = str(row["id"])
    else:
        activity_id = str(found[_COL["id"]])
        old = [line for line in str(found[_COL["body"]]).splitlines() if line.startswith("- ")]
        if not (ref and any(ref in line for line in old)):
            count = int(found[_COL["reinforce_count"]]) + 2
            body = _git_body(branch, count, [item, *old])
            yield from writes.absorb(
                activity_id, {"body": body, "reinforce_count": count - 1}, True
            )
    yield from _link(project_id, activity_id, files, branch, at)
    if obs.get("op") != "pr":
        return activity_id
    pr_title = PR_PREFIX + str(obs.get("title") or ref or "untitled")
    pr = yield from _current(project_id, "discovery", pr_title)
    if pr is not None:
        return str(pr[_COL["id"]])
    body = (
        f"A pull request was opened in this session: {ref or 'URL not shown'}"
        + (f" (from branch `{branch}`)" if branch else "")
        + f", at {readable(at)}.\n"
        + (f"Title: {obs['title']}\n" if obs.get("title") else "")
        + NOTE
    )
    row = yield from writes.add(
        {**_inferred(project_id, session_id, at, "discovery", pr_title, "pr"), "body": body}
    )
    pr_id = str(row["id"])
    yield from _link(project_id, pr_id, [], branch, at)
    yield execute(  # the files of the branch's work, as far as the activity record knows them
        "INSERT OR IGNORE INTO record_entities(record_id, entity_id) SELECT ?, re.entity_id "
        "FROM record_entities re JOIN nodes n ON n.id = re.entity_id "
        "WHERE re.record_id = ? AND n.kind = 'file' LIMIT ?",
        (pr_id, activity_id, FILES_MAX * 2),
    )
    return pr_id


# -- helpers ---------------------------------------------------------------------------------------


def _current(project_id: str, record_type: str, title: str) -> Plan[Any]:
    """The current record of this type and title, compared as it would be stored (redacted)."""
    clean = writes.scrub({"title": " ".join(title.split())[: schema.TITLE_MAX]})["title"]
    found = yield from writes.current_by_title(project_id, record_type, clean)
    return found


def _inferred(
    project_id: str, session_id: str | None, at: str, record_type: str, title: str, words: str
) -> dict[str, Any]:
    return {
        "type": record_type,
        "title": " ".join(title.replace("\x00", "").split())[: schema.TITLE_MAX],
        "project_id": project_id,
        "confidence": "inferred",
        "source": "hook_observation",
        "keywords": words,
        "session_id": session_id,
        "valid_from": at,
    }


def _close_failure(
    stub: Any, command: str, session_id: str | None, at: str, summary: str
) -> Plan[str]:
    """Supersede a failure stub with its closed version: its text plus the green run's evidence."""
    old = str(stub[_COL["body"]]).removesuffix(NOTE_FIX).removesuffix(NOTE).rstrip()
    evidence = (
        f"Fixed: `{command}` passed at {readable(at)}"
        + (f" in session {session_id}" if session_id else "")
        + (f": {summary}" if summary else ".")
    )
    tail = f"\n{evidence}\n{NOTE_FIX}"
    room = schema.BODY_MAX - len(tail)
    body = (old if len(old) <= room else old[: room - 1].rstrip() + "…") + tail
    keywords = f"{stub[_COL['keywords']]} fixed"
    new = {
        **_inferred(
            str(stub[_COL["project_id"]]), session_id, at, "bugfix", FIXED_PREFIX + command, ""
        ),
        "body": body,
        "keywords": keywords,
        "supersedes": str(stub[_COL["id"]]),
    }
    row = yield from writes.add(new)  # the files of the failure carry over to the new version
    return str(row["id"])


def readable(at: str) -> str:
    """A stored time as a record's body shows it: to the minute, ``2026-12-07 09:41 UTC`` (the
    stored ``…T09:41:38.826230Z`` cost about 15 estimated tokens and, embedded, moved the record's
    vector with every microsecond)."""
    return f"{clock.minute(at)} UTC" if len(at) >= 16 and at[10:11] == "T" else at


def _pass_body(
    command: str, count: int, first: str, latest: str, session_id: str | None, summary: str
) -> str:
    runs = "1 green run" if count == 1 else f"{count} green runs"
    text = (
        f"The test command `{command}` passed in this project: {runs} seen, "
        f"the first at {readable(first)}, the latest at {readable(latest)}"
        + (f" (session {session_id})" if session_id else "")
        + "."
        + (f"\nLatest result: {summary}" if summary else "")
        + f"\n{NOTE}"
    )
    return text[: schema.BODY_MAX]


def _git_body(branch: str | None, count: int, items: Iterable[str]) -> str:
    kept = list(items)[:ITEMS_MAX]
    head = (
        f"Git operations seen on branch `{branch}`"
        if branch
        else "Git operations on a detached HEAD"
    ) + f" (newest first; {count} in all, the last {len(kept)} listed):"
    lines = [head]
    size = len(head) + len(NOTE) + 2
    for line in kept:
        if size + len(line) + 1 > schema.BODY_MAX:
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join([*lines, NOTE])


def _session_files(project_id: str, session_id: str) -> Plan[list[str]]:
    found = yield rows(
        "SELECT n.name FROM nodes n JOIN edges e ON e.from_id = n.id "
        "WHERE n.project_id = ? AND n.kind = 'file' AND e.rel_type = 'observed_in' "
        "AND e.to_id = ? ORDER BY e.created_at DESC, n.name LIMIT ?",
        (project_id, session_id, FILES_MAX),
    )
    return sorted(str(r[0]) for r in found)


def _link(
    project_id: str, record_id: str, files: list[str], branch: str | None, at: str
) -> Plan[None]:
    names = [("file", name) for name in files]
    if branch:
        names.append(("branch", branch))
    for kind, name in names:
        node_id = yield from writes.node(project_id, kind, name, at)
        yield from writes.link_entity(record_id, node_id)
