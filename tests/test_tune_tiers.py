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


class _Prompt:
    def __init__(self, kind: str, answers: tuple[str, ...] = ()) -> None:
        self.kind, self.answers = kind, answers


def _near(prompt: str, pairs: list[tuple[str, float]]) -> dict[str, Any]:
    return {"prompt": prompt, "neighbours": pairs, "all": pairs, "spread": (0.2, 0.1), "rows": {}}


def test_separability_counts_the_nearest_and_orders_pairs() -> None:
    """Two answerable prompts (one answered first, one third), an unanswerable one, a
    cross-project one and chit-chat (ignored for the AUC): every figure by hand."""
    to_key = {"a": "k-a", "b": "k-b", "c": "k-c", "d": "k-d"}
    prompts = {
        "p1": _Prompt("answerable", ("k-a",)),
        "p2": _Prompt("answerable", ("k-c",)),
        "n1": _Prompt("unanswerable"),
        "n2": _Prompt("cross_project"),
        "c1": _Prompt("chitchat"),
    }
    items = [
        _near("p1", [("a", 0.7), ("b", 0.4)]),
        _near("p2", [("b", 0.5), ("d", 0.45), ("c", 0.4)]),
        _near("n1", [("b", 0.6)]),
        _near("n2", [("d", 0.3)]),
        _near("c1", [("a", 0.9)]),
    ]
    found = tune_tiers.separability(items, to_key, prompts)
    assert found["first"] == 0.5  # p1 only
    assert found["top3"] == 1.0  # p2's answer is third
    # the answered-first prompt (0.7) against the negatives (0.6, 0.3): both pairs ordered right
    assert found["auc_cosine"] == 1.0
    assert found["auc_z"] == 1.0
    items[2] = _near("n1", [("b", 0.7)])  # a tie counts half
    assert tune_tiers.separability(items, to_key, prompts)["auc_cosine"] == 0.75
