"""The SessionStart digest: what Claude should know before the first prompt, within 1,500 tokens.

Sections, in order, each with its own budget: the project profile (200 tokens), active decisions and
conventions (500), the last handover (400), reinforced global preferences (200), a one-line hint of
what ``ctx_search`` can find (100), and a CLAUDE.md drift note when two or more records are flagged.
The whole is then cut to :data:`MAX_TOKENS` and :data:`MAX_CHARS` from the bottom at a line or word
boundary, so the cap holds whatever the store holds.

Decisions and conventions come pinned first, then confirmed ones (explicit, reinforced) before
inferred ones, each group in the order consolidation ranked them (``records.digest_rank``: RRF of
keyword and vector rank against what the project works on now, see
:mod:`agentctx.consolidate.ranking`), unranked ones last by score. A line shows what the body adds to
the title, cut to 160 characters, so that about eight fit the section's 500 tokens.

The digest is pre-computed into ``digests/<project_id>.json`` so that the SessionStart hook reads a file
and imports no SQLite at all. Any write that changes a project's records removes that file
(:func:`invalidate`); the next SessionStart, or consolidation, rebuilds it. Standard library plus the
SQLite connection the caller passes: this runs inside hooks.
"""

from __future__ import annotations

import os

from agentctx import home
from agentctx.schema import GLOBAL_PROJECT_ID
from agentctx.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    import sqlean

MAX_TOKENS = 1500
MAX_CHARS = 10_000
BUDGETS = {"profile": 200, "decisions": 500, "handover": 400, "preferences": 200, "hint": 100}
DRIFT_THRESHOLD = 0.5  # the partial index records_drift (schema.py) uses this same bound
DRIFT_MIN_CANDIDATES = 2
FORMAT_VERSION = 1
_ITEM_BODY_CHARS = 160

_DECISIONS_SQL = """
SELECT id, type, title, body, confidence, pinned FROM records
WHERE project_id = ? AND type IN ('decision', 'convention') AND superseded_at IS NULL
ORDER BY pinned DESC, confidence = 'inferred', digest_rank IS NULL, digest_rank, score DESC,
  valid_from DESC, id LIMIT 60
"""
_PROFILE_SQL = """
SELECT id, title, body, key FROM records
WHERE project_id = ? AND type = 'profile' AND superseded_at IS NULL
ORDER BY pinned DESC, key, valid_from DESC LIMIT 40
"""
_HANDOVER_SQL = """
SELECT id, title, body, valid_from, confidence FROM records
WHERE project_id = ? AND type = 'handover' AND superseded_at IS NULL
ORDER BY valid_from DESC LIMIT 1
"""
_PREFERENCES_SQL = f"""
SELECT id, title, body FROM records
WHERE project_id = '{GLOBAL_PROJECT_ID}' AND type = 'preference' AND superseded_at IS NULL
  AND confidence IN ('reinforced', 'explicit')
ORDER BY pinned DESC, reinforce_count DESC, valid_from DESC LIMIT 40
"""
_COUNTS_SQL = """
SELECT type, count(*) FROM records INDEXED BY records_current
WHERE project_id IN (?, ?) AND superseded_at IS NULL GROUP BY type
"""
_DRIFT_SQL = f"""
SELECT count(*) FROM records INDEXED BY records_drift WHERE project_id = ?
  AND superseded_at IS NULL AND claudemd_drift_score >= {DRIFT_THRESHOLD}
  AND type IN ('decision', 'convention')
"""


def build(conn: sqlean.Connection, project_id: str, project_name: str = "") -> dict[str, Any]:
    """Compose the digest of a project from the store: ``{"text", "ids", "tokens", ...}``."""
    counts = dict(conn.execute(_COUNTS_SQL, (project_id, GLOBAL_PROJECT_ID)).fetchall())
    drift = conn.execute(_DRIFT_SQL, (project_id,)).fetchone()[0]
    return render(
        project_name=project_name,
        profile=conn.execute(_PROFILE_SQL, (project_id,)).fetchall(),
        decisions=conn.execute(_DECISIONS_SQL, (project_id,)).fetchall(),
        handover=conn.execute(_HANDOVER_SQL, (project_id,)).fetchone(),
        preferences=conn.execute(_PREFERENCES_SQL).fetchall(),
        counts=counts,
        drift_candidates=int(drift),
        project_id=project_id,
        mcp=_mcp_available(),
    )


def _mcp_available() -> bool:
    from agentctx import features

    return features.available(features.MCP_SERVER)


def render(
    *,
    project_id: str,
    project_name: str,
    profile: Iterable[Any],
    decisions: Iterable[Any],
    handover: Any,
    preferences: Iterable[Any],
    counts: dict[str, int],
    drift_candidates: int,
    mcp: bool = True,
) -> dict[str, Any]:
    """The digest text within every budget, and the ids of the records it shows.

    ``mcp`` says whether the MCP tools exist, so that the hint names something that works.
    """
    sections: list[str] = []
    shown: list[tuple[str, str]] = []  # (line, id) of every record line kept

    def section(heading: str, lines: list[tuple[str, str | None]], budget: int) -> None:
        text, ids = _fit(heading, lines, budget)
        if text:
            sections.append(text)
            shown.extend(ids)

    section(
        "## Project profile",
        [(f"- {row['title']}: {_one_line(row['body'], 160)}", row["id"]) for row in profile],
        BUDGETS["profile"],
    )
    section(
        "## Active decisions and conventions",
        [(_decision_line(row), row["id"]) for row in decisions],
        BUDGETS["decisions"],
    )
    if handover is not None:
        heading = f"## Last handover ({handover['valid_from'][:10]}, id {handover['id']})"
        room = BUDGETS["handover"] - estimate_tokens(heading) - 2
        body = truncate_to_tokens(handover["body"], max(room, 0), 2000)
        section(heading, [(body, handover["id"])] if body else [], BUDGETS["handover"])
    section(
        "## Developer preferences (all projects)",
        [(_preference_line(row), row["id"]) for row in preferences],
        BUDGETS["preferences"],
    )
    if not sections:
        return _result(project_id, "", [])
    searchable = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()) if n)
    hint = (
        f"More in the agentctx store ({searchable}): call the ctx_search tool with keywords, "
        "then ctx_get with ids for full records."
        if mcp
        else f"More in the agentctx store ({searchable}): `agentctx search <words>` finds it."
    )
    sections.append(truncate_to_tokens(hint, BUDGETS["hint"], 600))
    if drift_candidates >= DRIFT_MIN_CANDIDATES:
        sections.append(
            f"Note: {drift_candidates} decisions or conventions in the store are not reflected in "
            "CLAUDE.md; the developer can review them with `agentctx sync`."
        )
    title = f"# agentctx: context for {project_name}" if project_name else "# agentctx: context"
    text = truncate_to_tokens("\n\n".join([title, *sections]), MAX_TOKENS, MAX_CHARS)
    # A record counts as shown when its line survived the final cut (not every line prints its id).
    return _result(project_id, text, list(dict.fromkeys(i for line, i in shown if line in text)))


def _result(project_id: str, text: str, ids: list[str]) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "project_id": project_id,
        "text": text,
        "ids": ids,
        "tokens": estimate_tokens(text) if text else 0,
    }


def _fit(
    heading: str, lines: list[tuple[str, str | None]], budget: int
) -> tuple[str, list[tuple[str, str]]]:
    """The heading plus as many whole lines as fit ``budget`` tokens (a too-long line is skipped)."""
    if not lines:
        return "", []
    used = estimate_tokens(heading) + 1
    kept: list[str] = []
    ids: list[tuple[str, str]] = []
    for line, record_id in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            continue
        used += cost
        kept.append(line)
        if record_id:
            ids.append((line, record_id))
    if not kept:
        return "", []
    return "\n".join([heading, *kept]), ids


def _decision_line(row: Any) -> str:
    unconfirmed = " (inferred, unconfirmed)" if row["confidence"] == "inferred" else ""
    pin = " [pinned]" if row["pinned"] else ""
    body = _one_line(_without_title(row["title"], row["body"]), _ITEM_BODY_CHARS)
    said = f": {body}" if body else ""
    return f"- [{row['type']}]{pin} {row['title']}{said}{unconfirmed} (id {row['id']})"


def _preference_line(row: Any) -> str:
    body = _one_line(_without_title(row["title"], row["body"]), 160)
    return f"- {row['title']}: {body}" if body else f"- {row['title']}"


def _without_title(title: str, body: str) -> str:
    """What the body adds to the title: extraction often writes "Title. Rationale…" or
    "Title\n(applies to: project)", which would say the title twice or only a tag."""
    flat = " ".join(body.split())
    if flat[: len(title)].lower() != title.lower():
        return flat
    rest = flat[len(title) :].lstrip(" .:;,-—–")
    if rest.startswith("(") and rest.endswith(")") and rest.count("(") == 1:
        return ""  # only a tag such as "(applies to: project)"
    return rest


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] or flat[: limit - 1]
    return cut + "…"


# -- the pre-computed file ------------------------------------------------------------------------


def path_for(project_id: str) -> str:
    """The digest file of a project."""
    return os.path.join(home.sub("digests"), f"{project_id}.json")


def write(digest: dict[str, Any], generated_at: str, read_started_ns: int) -> str | None:
    """Write a digest file atomically unless the project changed since ``read_started_ns``.

    ``read_started_ns`` is ``time.time_ns()`` taken before the store was read. Writers mark a change
    (:func:`invalidate`) after they commit, so a digest built from older data is never installed.
    """
    from agentctx.hooks import fastjson

    project_id = str(digest["project_id"])
    path = path_for(project_id)
    home.ensure_sub("digests")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(fastjson.dumps({**digest, "generated_at": generated_at}))
    if _changed_since(project_id, read_started_ns):
        os.unlink(tmp)
        return None
    os.replace(tmp, path)
    if _changed_since(project_id, read_started_ns):  # a writer slipped in between: drop it again
        with _quiet():
            os.unlink(path)
        return None
    return path


class _quiet:
    """``contextlib.suppress(OSError)`` without importing contextlib on the hook path."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, OSError)


def _changed_since(project_id: str, started_ns: int) -> bool:
    # The marker holds the writer's time.time_ns(): file mtimes come from a coarser kernel clock.
    for name in (project_id, GLOBAL_PROJECT_ID):
        try:
            with open(_marker(name), encoding="ascii") as fh:
                changed_ns = int(fh.read().strip() or 0)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return True  # unreadable: assume the worst, the next build tries again
        if changed_ns >= started_ns:
            return True
    return False


def _marker(project_id: str) -> str:
    return os.path.join(home.sub("digests"), f"{project_id}.changed")


def read(project_id: str) -> dict[str, Any] | None:
    """A valid pre-computed digest, or None when it is missing, stale-marked or corrupt."""
    from agentctx.hooks import fastjson

    try:
        with open(path_for(project_id), encoding="utf-8") as fh:
            data = fastjson.loads(fh.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if (
        not isinstance(data, dict)
        or data.get("version") != FORMAT_VERSION
        or not isinstance(data.get("text"), str)
        or not isinstance(data.get("ids"), list)
    ):
        return None
    return data


def invalidate(project_ids: Iterable[str]) -> None:
    """Mark these projects changed and drop their digests (a global change stales them all).

    Called after a write commits: first the change marker (so a concurrent builder that read older
    data will not install its digest), then the digest file itself.
    """
    folder = home.sub("digests")
    targets = set(project_ids)
    if not targets:
        return
    import time

    stamp = str(time.time_ns())
    for project_id in targets:
        try:
            home.ensure_sub("digests")
            tmp = f"{_marker(project_id)}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="ascii") as fh:
                fh.write(stamp)
            os.replace(tmp, _marker(project_id))
        except OSError:
            pass
    try:
        names = (
            os.listdir(folder) if GLOBAL_PROJECT_ID in targets else [f"{p}.json" for p in targets]
        )
    except OSError:
        return
    for name in names:
        if name.endswith(".json"):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
