"""The tiers' tuning harness (benchmarks/precision_eval/tune_tiers.py): an experiment's signals join
the core's through each collected item's ``extra``. No store, no model: a collected item by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

from agentctx.core import tiers
from precision_eval import tune_tiers


def _row(rid: str, title: str) -> dict[str, Any]:
    return {"id": rid, "type": "decision", "title": title, "body": title + ".", "key": rid,
            "valid_from": "2026-01-01T00:00:00Z", "scope": "project", "source": "test",
            "confidence": 1.0}  # fmt: skip


def _item(extra: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    rows = {"A": _row("A", "eks deployment"), "B": _row("B", "helm charts")}
    item: dict[str, Any] = {
        "prompt": "p1",
        "thin": False,
        "hits": [rows["A"]],
        "relevance": {"A": 0.8},
        "neighbours": [("A", 0.6), ("B", 0.3)],
        "raw": [("A", 0.6), ("B", 0.3)],
        "spread": (0.1, 0.1),
        "rows": rows,
    }
    if extra is not None:
        item["extra"] = extra
    return item


def test_without_extra_the_signals_are_the_cores() -> None:
    item = _item()
    cands = tune_tiers._candidates(item)
    terms = ["eks", "deployment"]
    assert tune_tiers.signals_of(item, cands, terms) == tiers.signals(
        cands, terms, tune_tiers.neighbours(item)
    )


def test_extra_signals_join_and_a_missing_one_is_zero() -> None:
    item = _item({"A": {"probe": 2.0}})
    cands = tune_tiers._candidates(item)
    found = {
        c.id: s for c, s in zip(cands, tune_tiers.signals_of(item, cands, ["eks"]), strict=True)
    }
    assert found["A"]["probe"] == 2.0
    assert found["B"]["probe"] == 0.0
    assert set(found["A"]) == set(tiers.WEIGHTS) | {"probe"}


def test_an_extra_signal_counts_once_the_weights_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    terms = ["eks", "deployment"]
    before = {c.id: c.evidence for c in tune_tiers._scored(_item({"A": {"probe": 2.0}}), terms)}
    monkeypatch.setitem(tiers.WEIGHTS, "probe", 0.5)
    after = {c.id: c.evidence for c in tune_tiers._scored(_item({"A": {"probe": 2.0}}), terms)}
    assert after["A"] == pytest.approx((before["A"] or 0.0) + 1.0)
    assert after["B"] == pytest.approx(before["B"] or 0.0)
