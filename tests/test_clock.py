"""clock: stored times and ages computed without ``datetime`` agree with ``datetime``."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from agentctx.core import clock

MOMENTS = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
)


def _reference_age(stored: str, reference: float) -> float:
    """The age as the datetime-based implementation computed it."""
    try:
        then = datetime.strptime(stored, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return 0.0
    return max(0.0, (reference - then.timestamp()) / 86400.0)


@given(MOMENTS, st.floats(min_value=-1e11, max_value=3e11, allow_nan=False))
def test_age_days_agrees_with_datetime(moment: datetime, reference: float) -> None:
    stored = clock.format_time(moment)
    assert abs(clock.age_days(stored, reference) - _reference_age(stored, reference)) < 1e-6


@given(st.text(max_size=30))
def test_age_days_of_any_text_is_a_number(text: str) -> None:
    assert clock.age_days(text, 0.0) >= 0.0


def test_impossible_dates_have_no_age() -> None:
    for stored in ("2026-02-30T00:00:00.000000Z", "2026-13-01T00:00:00.000000Z",
                   "2026-01-01T24:00:00.000000Z", "2025-02-29T00:00:00.000000Z"):  # fmt: skip
        assert clock.age_days(stored, 2e9) == 0.0
    assert clock.age_days("2024-02-29T00:00:00.000000Z", 2e9) > 0.0


def test_now_is_stored_text_of_the_current_time() -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    stamp = clock.now()
    after = datetime.now(UTC) + timedelta(seconds=1)
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert len(stamp) == 27 and before <= parsed <= after


def test_the_hot_clock_functions_import_no_datetime() -> None:
    code = (
        "import sys; from agentctx.core import clock; clock.now(); "
        "clock.age_days('2026-01-01T00:00:00.000000Z'); print('datetime' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_days_ago_is_stored_text_that_many_days_back() -> None:
    stamp = clock.days_ago(14)
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    expected = datetime.now(UTC) - timedelta(days=14)
    assert len(stamp) == 27 and abs((parsed - expected).total_seconds()) < 5
    assert 13.99 < clock.age_days(stamp) < 14.01
