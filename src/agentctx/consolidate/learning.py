"""Consolidation's ``learning`` step (issue 25): the verdicts become priors and thresholds.

Once per run, with the global scope (both are the store's, not a project's):

* **priors**: every record's demotion prior is recomputed from its verdicts
  (:func:`agentctx.core.learning.refresh_priors`), which the prompt hook reads with one indexed
  ``SELECT`` (never a model call in the hook);
* **calibration**: with ``retrieval.auto_calibrate`` on, each threshold of
  :data:`agentctx.core.learning.CALIBRATED` that the settings know and the user left at its default
  is calibrated from the judged injections of known relevance (:func:`agentctx.core.learning.calibrate`:
  at least 50, within bounds). A change is stored with the value it replaced and the number of
  verdicts, and logged; ``config set retrieval.auto_calibrate off`` makes every reader use the
  configured values again (the tuned rows stay, unused, until it is turned back on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentctx import config
from agentctx.core import clock, learning

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentctx.store import Store

_PAIRS_SQL = """
SELECT relevance, verdict = 'used' FROM injection_verdicts
WHERE verdict IS NOT NULL AND relevance IS NOT NULL AND injected_at >= ?
"""


async def learn(
    store: Store, settings: Mapping[str, Any], log: Callable[[str], None]
) -> dict[str, Any]:
    """Refresh the priors and calibrate the thresholds; what was done."""
    result: dict[str, Any] = {"priors": await store.write(learning.refresh_priors())}
    auto = bool(settings.get(learning.AUTO_SETTING, True))
    found = await store.rows(_PAIRS_SQL, (clock.days_ago(learning.PRIOR_WINDOW_DAYS),))
    pairs = [(float(rel), bool(useful)) for rel, useful in found]
    tuned = await store.run(learning.tuned())
    calibration: dict[str, Any] = {}
    for key in learning.CALIBRATED:
        if key not in config.SETTINGS:  # the strong/possible boundary exists with the tiers
            continue
        configured = float(settings.get(key, config.SETTINGS[key][1]))
        default = float(config.SETTINGS[key][1])
        if not auto:
            calibration[key] = {"status": "off", "value": configured}
            continue
        if abs(configured - default) > 1e-9:
            calibration[key] = {"status": "explicit setting", "value": configured}
            continue
        current = tuned.get(key, configured)
        value = learning.calibrate(pairs, current, configured, learning.COSTS.get(key, 0.5))
        if value is None:
            calibration[key] = {
                "status": f"too few verdicts ({len(pairs)} of {learning.CALIBRATE_MIN_VERDICTS})",
                "value": current,
            }
            continue
        if abs(value - current) < 1e-9 and key in tuned:
            calibration[key] = {"status": "unchanged", "value": value, "verdicts": len(pairs)}
            continue
        await store.write(learning.tune(key, value, current, configured, len(pairs)))
        calibration[key] = {
            "status": "calibrated",
            "value": value,
            "previous": current,
            "verdicts": len(pairs),
        }
        if abs(value - current) >= 1e-9:
            log(f"calibrated {key}: {current:g} -> {value:g} on {len(pairs)} judged injections")
    result["calibration"] = calibration
    return result
