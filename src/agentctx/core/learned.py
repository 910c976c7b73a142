"""What the verdicts changed, as the prompt hook reads it (issue 25): the records' demotion priors
and the self-calibrated thresholds. How they are computed and stored is
:mod:`agentctx.core.learning`, which names these too; they live apart so that a prompt loads a
small module rather than all of learning (ADR-017, speed pass 4). Standard library only.
"""

from __future__ import annotations

from agentctx.core.plan import rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    import sqlean

    from agentctx.core.plan import Plan

AUTO_SETTING = "retrieval.auto_calibrate"


def priors(ids: Iterable[str]) -> Plan[dict[str, float]]:
    """The demotion priors of these records (only those below 1; the rest are 1)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    marks = ", ".join("?" * len(wanted))
    found = yield rows(
        f"SELECT record_id, prior FROM record_priors WHERE record_id IN ({marks})", wanted
    )
    return {str(r[0]): float(r[1]) for r in found}


def demote(scores: Mapping[str, float]) -> Plan[dict[str, float]]:
    """Relevance by record id with each record's prior applied (the prompt hook's ranking)."""
    found = yield from priors(scores)
    return {i: value * found.get(i, 1.0) for i, value in scores.items()}


def tuned() -> Plan[dict[str, float]]:
    """The calibrated thresholds by setting key (none before a calibration)."""
    found = yield rows("SELECT key, value FROM tuned_settings")
    return {str(k): float(v) for k, v in found}


def effective(
    key: str, configured: float, default: float, auto: bool, tuned_values: Mapping[str, float]
) -> float:
    """The value a reader uses: the calibrated one while ``auto`` is on and the setting is still
    its default (an explicit setting wins), else the configured one."""
    if not auto or abs(configured - default) > 1e-9:
        return configured
    return tuned_values.get(key, configured)


def effective_on(
    conn: sqlean.Connection, key: str, configured: float, default: float, auto: bool
) -> float:
    """:func:`effective` with the tuned values read on ``conn`` (the prompt hook's floor); the
    configured value when they cannot be read (fail-open)."""
    if not auto or abs(configured - default) > 1e-9:
        return configured  # no query: nothing tuned can apply
    from agentctx.core.plan import run

    try:
        values = run(conn, tuned())
    except Exception:
        return configured
    return effective(key, configured, default, auto, values)
