"""The SessionStart digest's builder: what Claude should know before the first prompt.

Sections, in order, each with its own budget: the project profile (200 tokens), active decisions and
conventions (500), the last handover (400), reinforced global preferences (200), a one-line hint of
what ``ctx_search`` can find (100), and a CLAUDE.md drift note when two or more records are flagged.
The whole is then cut to the caps (:data:`agentctx.core.digests.MAX_TOKENS`, ``MAX_CHARS``) from
the bottom at a line or word boundary, so the cap holds whatever the store holds.

Decisions and conventions come pinned first, then confirmed ones (explicit, reinforced) before
inferred ones, each group in the order consolidation ranked them (``records.digest_rank``: RRF of
keyword and vector rank against what the project works on now, see
:mod:`agentctx.consolidate.ranking`), unranked ones last by score. A line shows what the body adds to
the title, cut to 160 characters, so that about eight fit the section's 500 tokens.

Handovers are per checkout (worktree) while the rest is the project's, so the handover section
depends on where the session runs. The digest is therefore rendered in parts: the text before the
handover (``head``), the text after it (``tail``), both cut with the handover's 400 tokens reserved,
and one pre-rendered handover section per current handover keyed by its checkout ("" for the legacy,
key NULL, one). :func:`agentctx.core.digests.assemble` joins them for a checkout: its own handover, else the legacy one,
else none; every such result is within both caps.

The fence (issue 16): after its title line, the digest sits between ``<agentctx-context>`` and
``</agentctx-context>`` under a note that it is stored data, not instructions, and every record
line carries the label of :func:`agentctx.core.inject.label` (type, provenance, confidence), so
that the user's own records read apart from extracted, captured and team-file ones. Record text
cannot close the fence, start a line of its own that reads as a heading or a label, or hide
characters (:func:`agentctx.core.inject.fenced_text`, ``fenced_line`` for one-line fields: on every
line boundary ``str.splitlines()`` knows, after invisible characters are removed). The fence's
lines count against the caps. docs/security.md says what the fence does and does not protect against.

The digest's file (reading, writing, invalidation) is :mod:`agentctx.core.digests`. Standard
library plus the SQLite connection the caller passes: the SessionStart hook builds a missing digest.
"""

from __future__ import annotations

from agentctx.core import clock, essentials, inject, pinned, plan
from agentctx.core.digests import FORMAT_VERSION, MAX_CHARS, MAX_TOKENS, assemble
from agentctx.core.inject import fenced_line, fenced_text, label
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.core.tokens import estimate_tokens, truncate_to_tokens

TYPE_CHECKING = False  # typing costs milliseconds on the hook path; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    import sqlean

    from agentctx.core.shapes import Digest, DigestParts

BUDGETS = {"profile": 200, "decisions": 500, "handover": 400, "preferences": 200, "hint": 100}
DRIFT_THRESHOLD = 0.5  # the partial index records_drift (schema.py) uses this same bound
DRIFT_MIN_CANDIDATES = 2
_ITEM_BODY_CHARS = 160
#: Characters a handover section may take (a 2,000-character body plus its heading).
_HANDOVER_CHARS = 2200
#: Room kept for the handover section and its two separators when the rest is cut.
_RESERVE_TOKENS = BUDGETS["handover"] + 4
_RESERVE_CHARS = _HANDOVER_CHARS + 4
#: How many current handovers (checkouts) of one project the digest file carries.
_HANDOVERS_MAX = 64

#: The fence around the digest (after its title line, which the transcript reader looks for).
FENCE_OPEN = "<agentctx-context>"
FENCE_CLOSE = "</agentctx-context>"
FENCE_NOTE = inject.FENCE_NOTE
_CLOSE_TOKENS = estimate_tokens(FENCE_CLOSE) + 2
_CLOSE_CHARS = len(FENCE_CLOSE) + 2

_DECISIONS_SQL = """
SELECT id, type, title, body, confidence, pinned, source FROM records
WHERE project_id = ? AND type IN ('decision', 'convention') AND superseded_at IS NULL
ORDER BY pinned DESC, confidence = 'inferred', digest_rank IS NULL, digest_rank, score DESC,
  valid_from DESC, id LIMIT 60
"""
_PROFILE_SQL = """
SELECT id, type, title, body, key, confidence, source FROM records
WHERE project_id = ? AND type = 'profile' AND superseded_at IS NULL
ORDER BY pinned DESC, key, valid_from DESC LIMIT 40
"""
#: The current handovers that still hold: written since the age limit (the second parameter), and
#: no later session of the same checkout (its cwd at or below the handover's ``key``, the worktree;
#: any checkout for a legacy, key NULL, handover) has ended since: that session took the work on.
_HANDOVER_SQL = f"""
SELECT h.id, h.type, h.title, h.body, h.valid_from, h.confidence, h.key, h.source
FROM records AS h
WHERE h.project_id = ? AND h.type = 'handover' AND h.superseded_at IS NULL AND h.valid_from >= ?
  AND NOT EXISTS (
    SELECT 1 FROM sessions AS s
    WHERE s.project_id = h.project_id AND s.ended_at IS NOT NULL
      AND s.started_at > h.valid_from AND s.session_id IS NOT h.session_id
      AND (h.key IS NULL OR s.cwd = h.key OR substr(s.cwd, 1, length(h.key) + 1) = h.key || '/'))
ORDER BY h.valid_from DESC, h.id DESC LIMIT {_HANDOVERS_MAX}
"""
_PREFERENCES_SQL = f"""
SELECT id, type, title, body, confidence, source FROM records
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
    *,
    offer_sync: bool = False,
) -> Digest:
    """Compose the digest of a project from the store: ``{"text", "ids", "tokens", "parts"}``.

    ``text`` and ``ids`` are the digest as a session in ``checkout`` sees it; with no checkout,
    the project's newest current handover is shown (a view for tools that run nowhere in
    particular). ``parts`` serve every checkout (see :func:`assemble`). ``offer_sync``: the
    project has no CLAUDE.md and was never offered one (consolidation decides; the digest then
    says once that ``agentctx sync --apply`` writes one).
    """
    counts = dict(conn.execute(_COUNTS_SQL, (project_id, GLOBAL_PROJECT_ID)).fetchall())
    drift = conn.execute(_DRIFT_SQL, (project_id,)).fetchone()[0]
    built = render(
        project_name=project_name,
        profile=conn.execute(_PROFILE_SQL, (project_id,)).fetchall(),
        decisions=conn.execute(_DECISIONS_SQL, (project_id,)).fetchall(),
        handovers=conn.execute(_HANDOVER_SQL, (project_id, _handover_horizon())).fetchall(),
        preferences=conn.execute(_PREFERENCES_SQL).fetchall(),
        counts=counts,
        drift_candidates=int(drift),
        project_id=project_id,
        checkout=checkout,
        offer_sync=offer_sync,
    )
    built["pinned"] = plan.run(conn, pinned.current(project_id))
    return built


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
    offer_sync: bool = False,
    mcp: bool = True,
    checkout: str | None = None,
) -> Digest:
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

    section(head, "## Project profile", _profile_lines(profile), BUDGETS["profile"])
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
        parts: DigestParts = {"head": "", "tail": "", "ids": [], "empty": True}
        return _result(project_id, parts, checkout)
    searchable = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()) if n)
    hint = (
        f"More in the agentctx store ({searchable}): call the ctx_search tool with keywords, "
        "then ctx_get with ids for full records."
        if mcp
        else f"More in the agentctx store ({searchable}): `agentctx search <words>` finds it."
    )
    tail.append(truncate_to_tokens(hint, BUDGETS["hint"], 600))
    if offer_sync and counts.get("decision", 0) + counts.get("convention", 0) >= (
        DRIFT_MIN_CANDIDATES
    ):
        tail.append(
            "Note: this project has no CLAUDE.md; the developer can create one from its decisions "
            "and conventions with `agentctx sync --apply` (said once)."
        )
    elif drift_candidates >= DRIFT_MIN_CANDIDATES:
        tail.append(
            f"Note: {drift_candidates} decisions or conventions in the store are not reflected in "
            "CLAUDE.md; the developer can review them with `agentctx sync`."
        )
    name = fenced_line(project_name)
    title = f"# agentctx: context for {name}" if name else "# agentctx: context"
    head_text = "\n\n".join([f"{title}\n{FENCE_OPEN}\n{FENCE_NOTE}", *head])
    tail_text = "\n\n".join(tail)
    # The rest is cut first, with the handover's and the closing tag's room kept, so that every
    # checkout's result fits.
    whole = truncate_to_tokens(
        f"{head_text}\n\n{tail_text}",
        MAX_TOKENS - _RESERVE_TOKENS - _CLOSE_TOKENS,
        MAX_CHARS - _RESERVE_CHARS - _CLOSE_CHARS,
    )
    if whole.startswith(head_text + "\n\n"):
        tail_text = whole[len(head_text) + 2 :]
    else:
        head_text, tail_text = whole, ""
    tail_text = f"{tail_text}\n{FENCE_CLOSE}" if tail_text else FENCE_CLOSE
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


def _handover_horizon() -> str:
    """The oldest ``valid_from`` a handover of the digest may have (``digest.handover_max_age_days``;
    the default when the config file cannot be read)."""
    from agentctx import config
    from agentctx.core.errors import ConfigError

    try:
        days = int(config.get("digest.handover_max_age_days"))
    except ConfigError:
        days = int(config.SETTINGS["digest.handover_max_age_days"][1])
    return clock.days_ago(days)


def _handover_section(row: Any) -> list[str]:
    """``[section text, record id]`` of one handover (the text is "" when nothing of it fits)."""
    when = fenced_line(row["valid_from"][:10])
    heading = f"## Last handover ({when}, id {inject.handle_of(row)})\n[{label(row)}]"
    room = BUDGETS["handover"] - estimate_tokens(heading) - 2
    body = truncate_to_tokens(fenced_text(row["body"]), max(room, 0), 2000)
    text, _ids = _fit(heading, [(body, row["id"])] if body else [], BUDGETS["handover"])
    return [truncate_to_tokens(text, BUDGETS["handover"], _HANDOVER_CHARS), str(row["id"])]


def _result(project_id: str, parts: DigestParts, checkout: str | None) -> Digest:
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
    pin = " | pinned" if row["pinned"] else ""
    body = _one_line(_without_title(row["title"], row["body"]), _ITEM_BODY_CHARS)
    said = f": {fenced_text(body)}" if body else ""
    return f"- [{label(row)}{pin}] {fenced_line(row['title'])}{said} (id {inject.handle_of(row)})"


def _profile_line(row: Any, limit: int = 160, *, compact: bool = False) -> str:
    text = _without_provenance(row["body"]) if compact else row["body"]
    body = fenced_text(_one_line(text, limit))
    return f"- [{label(row)}] {fenced_line(row['title'])}: {body}"


def _without_provenance(text: str) -> str:
    """``text`` without its "(from Makefile target 'test')" groups: where a detected command came
    from, the first thing a tight budget drops (by hand: the hook path does not import ``re``)."""
    out: list[str] = []
    at = 0
    while (start := text.find(" (from ", at)) >= 0:
        depth, end = 0, -1
        for index in range(start + 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            if depth == 0:
                end = index
                break
        if end < 0:
            break
        out.append(text[at:start])
        at = end + 1
    out.append(text[at:])
    return "".join(out)


#: The ways an essential fact's line is shortened, longest first, until all of them fit.
_ESSENTIAL_FORMS = ((160, False), (160, True), (90, True), (48, True), (32, True), (20, True))


def _profile_lines(profile: Iterable[Any]) -> list[tuple[str, str | None]]:
    """The profile section's lines (issue 25, item 4): the test, lint and build commands and the
    stack first (:data:`agentctx.core.essentials.ESSENTIAL`), shortened (provenance dropped, then
    cut) rather than dropped when the budget is tight; the other facts after them, as they fit."""
    order = {key: n for n, key in enumerate(essentials.PROFILE_ORDER)}
    rows = sorted(profile, key=lambda row: order.get(row["key"] or "", len(order)))
    first = [row for row in rows if row["key"] in essentials.ESSENTIAL]
    rest = [(_profile_line(row), row["id"]) for row in rows if row not in first]
    room = BUDGETS["profile"] - estimate_tokens("## Project profile") - 1
    for limit, compact in _ESSENTIAL_FORMS:
        lines = [(_profile_line(row, limit, compact=compact), row["id"]) for row in first]
        if sum(estimate_tokens(line) + 1 for line, _id in lines) <= room:
            break
    return [*lines, *rest]


def _preference_line(row: Any) -> str:
    body = _one_line(_without_title(row["title"], row["body"]), 160)
    title = fenced_line(row["title"])
    return f"- [{label(row)}] {title}: {fenced_text(body)}" if body else f"- [{label(row)}] {title}"


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
