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

Handovers are per checkout (worktree) while the rest is the project's, so the handover section
depends on where the session runs. The digest is therefore rendered in parts: the text before the
handover (``head``), the text after it (``tail``), both cut with the handover's 400 tokens reserved,
and one pre-rendered handover section per current handover keyed by its checkout ("" for the legacy,
key NULL, one). :func:`assemble` joins them for a checkout: its own handover, else the legacy one,
else none; every such result is within both caps.

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
FORMAT_VERSION = 2
_ITEM_BODY_CHARS = 160
#: Characters a handover section may take (a 2,000-character body plus its heading).
_HANDOVER_CHARS = 2200
#: Room kept for the handover section and its two separators when the rest is cut.
_RESERVE_TOKENS = BUDGETS["handover"] + 4
_RESERVE_CHARS = _HANDOVER_CHARS + 4
#: How many current handovers (checkouts) of one project the digest file carries.
_HANDOVERS_MAX = 64

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
_HANDOVER_SQL = f"""
SELECT id, title, body, valid_from, confidence, key FROM records
WHERE project_id = ? AND type = 'handover' AND superseded_at IS NULL
ORDER BY valid_from DESC, id DESC LIMIT {_HANDOVERS_MAX}
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


def build(
    conn: sqlean.Connection,
    project_id: str,
    project_name: str = "",
    checkout: str | None = None,
) -> dict[str, Any]:
    """Compose the digest of a project from the store: ``{"text", "ids", "tokens", "parts"}``.

    ``text`` and ``ids`` are the digest as a session in ``checkout`` sees it; with no checkout,
    the project's newest current handover is shown (a view for tools that run nowhere in
    particular). ``parts`` serve every checkout (see :func:`assemble`).
    """
    counts = dict(conn.execute(_COUNTS_SQL, (project_id, GLOBAL_PROJECT_ID)).fetchall())
    drift = conn.execute(_DRIFT_SQL, (project_id,)).fetchone()[0]
    return render(
        project_name=project_name,
        profile=conn.execute(_PROFILE_SQL, (project_id,)).fetchall(),
        decisions=conn.execute(_DECISIONS_SQL, (project_id,)).fetchall(),
        handovers=conn.execute(_HANDOVER_SQL, (project_id,)).fetchall(),
        preferences=conn.execute(_PREFERENCES_SQL).fetchall(),
        counts=counts,
        drift_candidates=int(drift),
        project_id=project_id,
        mcp=_mcp_available(),
        checkout=checkout,
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
    handovers: Iterable[Any] = (),
    preferences: Iterable[Any],
    counts: dict[str, int],
    drift_candidates: int,
    mcp: bool = True,
    checkout: str | None = None,
) -> dict[str, Any]:
    """The digest within every budget, in parts per checkout, and the ids of the records it shows.

    ``handovers`` are the project's current handovers (rows with ``key``: the checkout, None for
    the legacy one), newest first. ``mcp`` says whether the MCP tools exist, so that the hint
    names something that works. ``text``/``ids`` are :func:`assemble` for ``checkout``.
    """
    head: list[str] = []
    tail: list[str] = []
    shown: list[tuple[str, str]] = []  # (line, id) of every record line kept

    def section(
        into: list[str], heading: str, lines: list[tuple[str, str | None]], budget: int
    ) -> None:
        text, ids = _fit(heading, lines, budget)
        if text:
            into.append(text)
            shown.extend(ids)

    section(
        head,
        "## Project profile",
        [(f"- {row['title']}: {_one_line(row['body'], 160)}", row["id"]) for row in profile],
        BUDGETS["profile"],
    )
    section(
        head,
        "## Active decisions and conventions",
        [(_decision_line(row), row["id"]) for row in decisions],
        BUDGETS["decisions"],
    )
    section(
        tail,
        "## Developer preferences (all projects)",
        [(_preference_line(row), row["id"]) for row in preferences],
        BUDGETS["preferences"],
    )
    sections: dict[str, list[str]] = {}
    for row in handovers:
        key = row["key"] or ""
        if key not in sections:  # newest first: an older current one of a key is not shown
            sections[key] = _handover_section(row)
    sections = {key: value for key, value in sections.items() if value[0]}
    empty = not head and not tail  # then a checkout without a handover is given nothing
    if empty and not sections:
        parts: dict[str, Any] = {"head": "", "tail": "", "ids": [], "empty": True}
        return _result(project_id, parts, checkout)
    searchable = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()) if n)
    hint = (
        f"More in the agentctx store ({searchable}): call the ctx_search tool with keywords, "
        "then ctx_get with ids for full records."
        if mcp
        else f"More in the agentctx store ({searchable}): `agentctx search <words>` finds it."
    )
    tail.append(truncate_to_tokens(hint, BUDGETS["hint"], 600))
    if drift_candidates >= DRIFT_MIN_CANDIDATES:
        tail.append(
            f"Note: {drift_candidates} decisions or conventions in the store are not reflected in "
            "CLAUDE.md; the developer can review them with `agentctx sync`."
        )
    title = f"# agentctx: context for {project_name}" if project_name else "# agentctx: context"
    head_text = "\n\n".join([title, *head])
    tail_text = "\n\n".join(tail)
    # The rest is cut first, with the handover's room kept, so that every checkout's result fits.
    whole = truncate_to_tokens(
        f"{head_text}\n\n{tail_text}", MAX_TOKENS - _RESERVE_TOKENS, MAX_CHARS - _RESERVE_CHARS
    )
    if whole.startswith(head_text + "\n\n"):
        tail_text = whole[len(head_text) + 2 :]
    else:
        head_text, tail_text = whole, ""
    # A record counts as shown when its line survived the cut (not every line prints its id).
    head_ids = list(dict.fromkeys(i for line, i in shown if line in head_text))
    tail_ids = [i for line, i in shown if line in tail_text and i not in head_ids]
    parts = {
        "head": head_text,
        "tail": tail_text,
        "ids": list(dict.fromkeys(head_ids + tail_ids)),
        "head_ids": len(head_ids),  # the handover's id goes after these: the order shown
        "empty": empty,
        "handovers": sections,
    }
    return _result(project_id, parts, checkout)


def _handover_section(row: Any) -> list[str]:
    """``[section text, record id]`` of one handover (the text is "" when nothing of it fits)."""
    heading = f"## Last handover ({row['valid_from'][:10]}, id {row['id']})"
    room = BUDGETS["handover"] - estimate_tokens(heading) - 2
    body = truncate_to_tokens(row["body"], max(room, 0), 2000)
    text, _ids = _fit(heading, [(body, row["id"])] if body else [], BUDGETS["handover"])
    return [truncate_to_tokens(text, BUDGETS["handover"], _HANDOVER_CHARS), str(row["id"])]


def assemble(parts: dict[str, Any], checkout: str | None) -> tuple[str, list[str]]:
    """The digest text a session in ``checkout`` is given, and the ids of the records it shows.

    Its own checkout's handover, else the legacy one (key ""), else none; ``checkout`` None picks
    the newest handover. Hook path: plain dict and string work only.
    """
    sections = parts.get("handovers")
    chosen: Any = None
    if isinstance(sections, dict) and sections:
        if checkout is None:
            chosen = next(iter(sections.values()))
        else:
            chosen = sections.get(checkout) or sections.get("")
    head, tail = str(parts.get("head") or ""), str(parts.get("tail") or "")
    ids = [i for i in parts.get("ids") or () if isinstance(i, str)]
    if not (isinstance(chosen, list) and len(chosen) == 2 and chosen[0]):
        if parts.get("empty"):
            return "", []
        return "\n\n".join(p for p in (head, tail) if p), ids
    section, record_id = str(chosen[0]), str(chosen[1])
    text = "\n\n".join(p for p in (head, section, tail) if p)
    if record_id in section and record_id not in ids:
        at = parts.get("head_ids")
        ids.insert(at if isinstance(at, int) else len(ids), record_id)
    return text, ids


def _result(project_id: str, parts: dict[str, Any], checkout: str | None) -> dict[str, Any]:
    text, ids = assemble(parts, checkout)
    return {
        "version": FORMAT_VERSION,
        "project_id": project_id,
        "text": text,
        "ids": ids,
        "tokens": estimate_tokens(text) if text else 0,
        "parts": parts,
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
    from agentctx.core import jsonio as fastjson

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
    from agentctx.core import jsonio as fastjson

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
        or not isinstance(data.get("parts"), dict)
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
