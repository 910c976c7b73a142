"""The store's own precision (issue 25): what the prompt hook injected and how it was judged.

:func:`summary` is what ``agentctx status`` (``precision`` in ``--json``) and the dashboard show:
for the last 7 and 30 days, the injections (noted ones, plus those still only in open sessions'
ledgers), how many were judged, the share judged useful, the tokens spent on ignored or wrong
ones; whether verdicts are being made at all (``judging``: ``on``, or why not: ``llm off``, ``no
backend``; no process is started to find out), how many records the prior demotes, and the
thresholds calibration tuned (with what a reader uses now: :func:`agentctx.core.learning.effective`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from agentctx import config
from agentctx.core import backend, learning, ledger

if TYPE_CHECKING:
    from agentctx.store import Store

WINDOWS = (7, 30)


async def summary(store: Store) -> dict[str, Any]:
    """Precision over :data:`WINDOWS`, judging state, demotions and calibrated thresholds."""
    pending = await _pending(store)
    found: dict[str, Any] = {}
    for days in WINDOWS:
        found[f"{days}d"] = await store.run(learning.precision(days, pending))
    settings = config.load()
    chosen = backend.quick(str(settings["extraction.backend"]), bool(settings["llm"]))
    found["judging"] = (
        "on" if chosen is not None else "llm off" if not settings["llm"] else "no backend"
    )
    row = await store.row("SELECT count(*), coalesce(min(prior), 1) FROM record_priors")
    found["demoted"] = {"records": int(row[0]), "lowest_prior": float(row[1])}
    auto = bool(settings[learning.AUTO_SETTING])
    thresholds: dict[str, Any] = {}
    for tuned in await store.rows(
        "SELECT key, value, previous, configured, verdicts, tuned_at FROM tuned_settings ORDER BY key"
    ):
        key = str(tuned["key"])
        configured = float(settings.get(key, tuned["configured"]))
        default = float(config.SETTINGS[key][1]) if key in config.SETTINGS else configured
        thresholds[key] = {
            "tuned": float(tuned["value"]),
            "previous": float(tuned["previous"]),
            "configured": configured,
            "verdicts": int(tuned["verdicts"]),
            "tuned_at": str(tuned["tuned_at"]),
            "in_use": learning.effective(key, configured, default, auto, {key: tuned["value"]}),
        }
    found["calibration"] = {"auto": auto, "thresholds": thresholds}
    return found


async def _pending(store: Store) -> list[dict[str, Any]]:
    """Injections of open sessions' ledgers not noted in the store yet."""
    opened = await anyio.to_thread.run_sync(ledger.open_sessions)
    if not opened:
        return []
    noted = await store.run(learning.noted_keys(sorted(opened)))
    pending = []
    for session_id, entries in opened.items():
        for item in learning.from_entries(entries):
            if (session_id, item["record_id"], item["injected_at"]) not in noted:
                pending.append(item)
    return pending
