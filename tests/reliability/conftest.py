"""Proof under real use: kill -9 trials, 16 concurrent sessions, machine faults.

Every test here takes many seconds (real processes by the hundred, killed and rerun), so each is
marked ``slow``: not in the quick loop (``nox``), in its own session ``nox -s slow`` that CI runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder ``slow`` (before ``-m`` selects)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.slow)
