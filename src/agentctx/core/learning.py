"""Learning from use (issue 25): what the prompt hook injected, how each injection was judged, and
the two things the verdicts change: a per-record demotion prior and self-calibrated thresholds.

**Injections.** Every ``UserPromptSubmit`` entry of a session ledger (:mod:`agentctx.core.ledger`)
with record ids becomes one ``injection_verdicts`` row per id (:func:`from_entries`), keyed by
``(session, record, injected_at)`` where ``injected_at`` is the entry's time: SessionEnd's fold
writes them (:func:`record`, beside ``session_injections``), and so does every verdict run from
a still-open ledger. ``INSERT OR IGNORE`` on that key makes every writer idempotent. An entry may
say how each id was shown (``tiers``: ``{id: "whole" | "line"}``, default whole), its tokens
(``tokens_by_id``; else the entry's estimate split evenly) and its relevance (``relevance``);
the ids of the entry's ``lines`` (the prompt hook's one-line possible matches) are judged as tier
``line``. Older entries have none of these keys.

**Verdicts** (``used``, ``ignored``, ``wrong``) are written by the workers
(:mod:`agentctx.extract.verdicts`) with :func:`save_verdicts`, only onto rows still unjudged.

**The demotion prior** (:func:`prior`, computed at consolidation, read by the prompt hook through
:func:`priors`/:func:`demote`, one indexed ``SELECT``): with ``u`` used and ``n`` judged
injections of a record in the last :data:`PRIOR_WINDOW_DAYS` days (a ``wrong`` counts
:data:`WRONG_WEIGHT` times), ``p = (u + K·b) / (n + K)`` with ``K`` = :data:`PRIOR_SMOOTHING` and
``b`` the store's own useful rate; the prior is ``min(1, max(PRIOR_FLOOR, p / b))``, and 1 (no row)
under :data:`PRIOR_MIN_VERDICTS` verdicts. It never promotes: it only ever lowers relevance.

**Calibration** (:func:`calibrate`): with at least :data:`CALIBRATE_MIN_VERDICTS` judged
injections of known relevance, a threshold moves to the value that maximises
``Σ_{relevance ≥ f} (useful − cost · not useful)`` over a grid within
``[configured − DOWN, configured + UP]`` (and :data:`ABS_BOUNDS`), ties to the nearest of the
current value; it moves down (by :data:`EXPLORE_STEP`) only when the injections just above it were
useful at least :data:`LOWER_WHEN_USEFUL` of the time. :func:`effective` decides what a reader
uses: the tuned value only while ``retrieval.auto_calibrate`` is on and the configured value is
the default (an explicit user setting always wins).

Standard library only. What the prompt hook reads (:func:`priors`, :func:`demote`, :func:`tuned`,
:func:`effective`, :func:`effective_on`) lives in :mod:`agentctx.core.learned`, a module a tenth of
this one's size that every prompt loads (ADR-017), and is named here too.
"""

from __future__ import annotations

from agentctx.core import clock
from agentctx.core.learned import AUTO_SETTING as AUTO_SETTING
from agentctx.core.learned import demote as demote
from agentctx.core.learned import effective as effective
from agentctx.core.learned import effective_on as effective_on
from agentctx.core.learned import priors as priors
from agentctx.core.learned import tuned as tuned
from agentctx.core.plan import execute, execute_many, rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from agentctx.core.plan import Plan
    from agentctx.core.shapes import LedgerEntry

VERDICTS = ("used", "ignored", "wrong")
TIERS = ("whole", "line")
#: The ledger event whose entries are judged (SessionStart's digest and a subagent's rules are not).
JUDGED_EVENT = "UserPromptSubmit"
#: Characters of a prompt kept with its injection (redacted before it is stored).
EXCERPT_CHARS = 300

#: The prior needs this many verdicts of a record (in the window) before it moves.
PRIOR_MIN_VERDICTS = 3
#: Pseudo-verdicts at the store's useful rate that smooth a record's own rate.
PRIOR_SMOOTHING = 4.0
#: The lowest prior: a record is at most halved, never hidden for good by its past.
PRIOR_FLOOR = 0.5
#: A ``wrong`` verdict weighs as this many ignored ones.
WRONG_WEIGHT = 2.0
#: Verdicts older than this do not count (the record, or the way it is asked for, may have changed).
PRIOR_WINDOW_DAYS = 90
#: The store's useful rate assumed while it has too few verdicts to know its own.
BASE_RATE_DEFAULT = 0.5

#: Judged injections of known relevance a calibration needs.
CALIBRATE_MIN_VERDICTS = 50
#: How far a threshold may move from its configured value, down and up.
DOWN = 0.1
UP = 0.15
ABS_BOUNDS = (0.05, 0.8)
GRID_STEP = 0.01
#: A downward move is one step of this size, when the injections within it above the current
#: value were useful at least :data:`LOWER_WHEN_USEFUL` of the time (at least
#: :data:`LOWER_MIN_SAMPLES` of them): the data show no injection below the floor, so they cannot
#: say more than "the floor cuts off matches that would have helped".
EXPLORE_STEP = 0.05
LOWER_WHEN_USEFUL = 0.7
LOWER_MIN_SAMPLES = 10
#: What an injection that did not help costs against one that did, per threshold: a whole record
#: shown by mistake costs its body; a one-line entry very little.
COSTS = {"retrieval.min_relevance": 0.5, "retrieval.strong_relevance": 1.0}
#: The thresholds calibration may tune (those the settings have; ``retrieval.strong_relevance`` is
#: the strong/possible boundary of the prompt hook's tiers).
CALIBRATED = ("retrieval.min_relevance", "retrieval.strong_relevance")


# -- injections ---------------------------------------------------------------------------------


def from_entries(entries: Iterable[LedgerEntry]) -> list[dict[str, Any]]:
    """One row per record a ledger's prompt entries injected (see the module docstring)."""
    found: list[dict[str, Any]] = []
    project_id: str | None = None
    for entry in entries:
        if isinstance(entry.get("project_id"), str):
            project_id = entry.get("project_id")
        ids = entry.get("ids")
        moment = entry.get("t")
        if entry.get("event") != JUDGED_EVENT or not isinstance(ids, list):
            continue
        if not isinstance(moment, int | float) or isinstance(moment, bool):
            continue
        raw: Any = entry
        # one-line possible matches (the hook's ``lines``) are judged too, as tier "line"
        lines = raw.get("lines") if isinstance(raw.get("lines"), list) else []
        ids = [i for i in dict.fromkeys([*ids, *lines]) if isinstance(i, str) and i]
        if not ids:
            continue
        tiers = raw.get("tiers") if isinstance(raw.get("tiers"), dict) else {}
        tiers = {**{i: "line" for i in lines if isinstance(i, str)}, **tiers}
        by_id = raw.get("tokens_by_id") if isinstance(raw.get("tokens_by_id"), dict) else {}
        rel = raw.get("relevance") if isinstance(raw.get("relevance"), dict) else {}
        total = entry.get("tokens")
        share = total // len(ids) if isinstance(total, int) and total > 0 else 0
        at = clock.from_epoch(float(moment))
        for record_id in ids:
            tier = tiers.get(record_id)
            tokens = by_id.get(record_id)
            relevance = rel.get(record_id)
            found.append({
                "record_id": record_id,
                "injected_at": at,
                "project_id": project_id,
                "tier": tier if tier in TIERS else "whole",
                "tokens": tokens if isinstance(tokens, int) and tokens >= 0 else share,
                "relevance": float(relevance)
                if isinstance(relevance, int | float) and not isinstance(relevance, bool)
                else None,
            })  # fmt: skip
    return found


def record(session_id: str, injections: Sequence[Mapping[str, Any]]) -> Plan[None]:
    """Note a session's injections (rows of :func:`from_entries`); already noted ones are kept."""
    if not injections:
        return
    yield execute_many(
        "INSERT OR IGNORE INTO injection_verdicts(session_id, record_id, injected_at, project_id, "
        "event, tier, tokens, relevance) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (session_id, i["record_id"], i["injected_at"], i.get("project_id"), JUDGED_EVENT,
             i.get("tier", "whole"), int(i.get("tokens") or 0), i.get("relevance"))
            for i in injections
        ],
    )  # fmt: skip


def unjudged(session_id: str, limit: int) -> Plan[list[Any]]:
    """A session's injections without a verdict, oldest first."""
    found: list[Any] = yield rows(
        "SELECT record_id, injected_at, tier, tokens, relevance FROM injection_verdicts "
        "WHERE session_id = ? AND verdict IS NULL ORDER BY injected_at, record_id LIMIT ?",
        (session_id, limit),
    )
    return found


def describe(
    session_id: str,
    record_id: str,
    injected_at: str,
    *,
    prompt_hash: str,
    prompt_excerpt: str,
    relevance: float | None,
) -> Plan[None]:
    """Attach what the prompt was (a hash and a short, redacted excerpt) and the record's relevance
    to it (kept when already known) to an injection."""
    yield execute(
        "UPDATE injection_verdicts SET prompt_hash = ?, prompt_excerpt = ?, "
        "relevance = coalesce(relevance, ?) "
        "WHERE session_id = ? AND record_id = ? AND injected_at = ?",
        (prompt_hash, prompt_excerpt[:EXCERPT_CHARS], relevance, session_id, record_id,
         injected_at),
    )  # fmt: skip


def save_verdicts(
    session_id: str,
    verdicts: Iterable[tuple[str, str, str, str]],
    *,
    model: str,
    backend: str,
) -> Plan[int]:
    """Write ``(record_id, injected_at, verdict, reason)`` onto still unjudged injections; how many
    were written (a verdict already there is never replaced nor counted again)."""
    written = 0
    now = clock.now()
    for record_id, injected_at, verdict, reason in verdicts:
        if verdict not in VERDICTS:
            continue
        changed = yield execute(
            "UPDATE injection_verdicts SET verdict = ?, reason = ?, judged_at = ?, model = ?, "
            "backend = ? WHERE session_id = ? AND record_id = ? AND injected_at = ? "
            "AND verdict IS NULL",
            (verdict, reason[:300], now, model, backend, session_id, record_id, injected_at),
        )
        written += int(changed or 0)
    return written


# -- precision ----------------------------------------------------------------------------------

_PRECISION_SQL = """
SELECT count(*), coalesce(sum(verdict IS NOT NULL), 0), coalesce(sum(verdict = 'used'), 0),
  coalesce(sum(verdict = 'ignored'), 0), coalesce(sum(verdict = 'wrong'), 0),
  coalesce(sum(tokens), 0),
  coalesce(sum(CASE WHEN verdict IN ('ignored', 'wrong') THEN tokens ELSE 0 END), 0),
  coalesce(sum(tier = 'line'), 0)
FROM injection_verdicts WHERE injected_at >= ?
"""


def precision(days: int, pending: Sequence[Mapping[str, Any]] = ()) -> Plan[dict[str, Any]]:
    """The store's own precision over the last ``days``: injections, judged, the share judged
    useful (None before any verdict), tokens in all and on ignored or wrong ones; ``pending``:
    injections of open sessions not noted yet (:func:`from_entries` rows), counted unjudged."""
    since = clock.days_ago(days)
    row = yield rows(_PRECISION_SQL, (since,))
    total, judged, used, ignored, wrong, tokens, wasted, lines = (int(v) for v in row[0])
    for item in pending:
        if str(item.get("injected_at", "")) >= since:
            total += 1
            tokens += int(item.get("tokens") or 0)
            lines += item.get("tier") == "line"
    return {
        "days": days,
        "injections": total,
        "judged": judged,
        "unjudged": total - judged,
        "used": used,
        "ignored": ignored,
        "wrong": wrong,
        "useful_share": round(used / judged, 3) if judged else None,
        "tokens": tokens,
        "tokens_ignored": wasted,
        "one_line": lines,
    }


def noted_keys(session_ids: Sequence[str]) -> Plan[set[tuple[str, str, str]]]:
    """``(session, record, injected_at)`` of the noted injections of these sessions."""
    if not session_ids:
        return set()
    marks = ", ".join("?" * len(session_ids))
    found = yield rows(
        "SELECT session_id, record_id, injected_at FROM injection_verdicts "
        f"WHERE session_id IN ({marks})",
        list(session_ids),
    )
    return {(str(a), str(b), str(c)) for a, b, c in found}


# -- the demotion prior -------------------------------------------------------------------------


def prior(used: int, ignored: int, wrong: int, base: float) -> float:
    """A record's demotion prior from its verdicts (the module docstring's formula)."""
    judged = used + ignored + wrong
    if judged < PRIOR_MIN_VERDICTS or base <= 0:
        return 1.0
    weighted = used + ignored + WRONG_WEIGHT * wrong
    rate = (used + PRIOR_SMOOTHING * base) / (weighted + PRIOR_SMOOTHING)
    return round(min(1.0, max(PRIOR_FLOOR, rate / base)), 4)


def refresh_priors() -> Plan[dict[str, Any]]:
    """Recompute every record's prior from its verdicts in the window (consolidation's step):
    rows only for records demoted (prior < 1)."""
    since = clock.days_ago(PRIOR_WINDOW_DAYS)
    counts = yield rows(
        "SELECT record_id, sum(verdict = 'used'), sum(verdict = 'ignored'), "
        "sum(verdict = 'wrong') FROM injection_verdicts "
        "WHERE verdict IS NOT NULL AND injected_at >= ? GROUP BY record_id",
        (since,),
    )
    used_all = sum(int(r[1]) for r in counts)
    judged_all = sum(int(r[1]) + int(r[2]) + int(r[3]) for r in counts)
    base = used_all / judged_all if judged_all >= CALIBRATE_MIN_VERDICTS else BASE_RATE_DEFAULT
    base = max(base, 0.05)
    now = clock.now()
    demoted = []
    for record_id, used, ignored, wrong in counts:
        value = prior(int(used), int(ignored), int(wrong), base)
        if value < 1.0:
            total = int(used) + int(ignored) + int(wrong)
            demoted.append((str(record_id), value, total, int(used), now))
    yield execute("DELETE FROM record_priors")
    if demoted:
        yield execute_many(
            "INSERT INTO record_priors(record_id, prior, verdicts, useful, computed_at) "
            "VALUES (?, ?, ?, ?, ?)",
            demoted,
        )
    return {
        "records_judged": len(counts),
        "demoted": len(demoted),
        "base_rate": round(base, 3),
        "verdicts": judged_all,
    }


# -- calibration --------------------------------------------------------------------------------


def calibrate(
    pairs: Sequence[tuple[float, bool]], current: float, configured: float, cost: float
) -> float | None:
    """The calibrated value of a threshold from ``(relevance, useful)`` pairs, or None when there
    are too few (:data:`CALIBRATE_MIN_VERDICTS`). Bounded around ``configured``."""
    if len(pairs) < CALIBRATE_MIN_VERDICTS:
        return None
    low = max(ABS_BOUNDS[0], round(configured - DOWN, 2))
    high = min(ABS_BOUNDS[1], round(configured + UP, 2))
    current = min(high, max(low, current))
    steps = round((high - low) / GRID_STEP)
    grid = [round(low + GRID_STEP * k, 2) for k in range(steps + 1)]

    def gain(level: float) -> float:
        return sum((1.0 if useful else -cost) for rel, useful in pairs if rel >= level - 1e-9)

    best = max(grid, key=lambda level: (round(gain(level), 6), -abs(level - current)))
    if abs(best - current) < GRID_STEP / 2:  # no raise pays: maybe the floor is too high
        near = [useful for rel, useful in pairs if current - 1e-9 <= rel < current + EXPLORE_STEP]
        if len(near) >= LOWER_MIN_SAMPLES and sum(near) / len(near) >= LOWER_WHEN_USEFUL:
            best = max(low, round(current - EXPLORE_STEP, 2))
    return round(best, 2)


def tune(key: str, value: float, previous: float, configured: float, verdicts: int) -> Plan[None]:
    """Store a calibrated threshold with the value it replaced and on how many verdicts."""
    yield execute(
        "INSERT INTO tuned_settings(key, value, previous, configured, verdicts, tuned_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
        "previous = excluded.previous, configured = excluded.configured, "
        "verdicts = excluded.verdicts, tuned_at = excluded.tuned_at",
        (key, value, previous, configured, verdicts, clock.now()),
    )
