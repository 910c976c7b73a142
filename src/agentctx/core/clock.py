"""Timestamps and ids: ISO-8601 UTC text that sorts as it reads, and ULIDs.

Standard library only (the hook path uses it). Every stored time is ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` so
that string comparison in SQL is time comparison.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_FMT = "%Y-%m-%dT%H:%M:%S.%fZ"


def now() -> str:
    """The current UTC time as stored text (without ``datetime``: the hooks do not import it)."""
    return _stored(time.time_ns())


def days_ago(days: float) -> str:
    """The UTC time ``days`` before now, as stored text."""
    return _stored(time.time_ns() - int(days * 86_400_000_000_000))


def from_epoch(seconds: float) -> str:
    """Epoch seconds (a ledger entry's ``t``) as stored text."""
    return _stored(round(seconds * 1000) * 1_000_000)


def _stored(epoch_ns: int) -> str:
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos // 1000:06d}Z"


def format_time(moment: datetime) -> str:
    """A datetime as stored text (naive datetimes are taken as UTC)."""
    from datetime import UTC

    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(_FMT)


def minute(stored: str) -> str:
    """A stored time to the minute, as lists and pages show it: ``2026-12-07 09:41``."""
    return stored[:16].replace("T", " ")


def parse_time(text: str) -> str:
    """Normalize a user-given time to stored text, or raise ``ValueError``.

    Accepts ISO-8601 datetimes (``2026-04-01T12:00``, with ``Z`` or an offset; naive means UTC) and bare
    dates. A bare date means the end of that day, so ``--as-of 2026-04-01`` answers what was true on it.
    """
    from datetime import UTC, datetime, timedelta

    value = text.strip()
    if not value:
        raise ValueError("empty time")
    if len(value) == 10 and value[4] == "-" and value[7] == "-":
        day = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        return format_time(day + timedelta(days=1, microseconds=-1))
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    return format_time(datetime.fromisoformat(value))


def age_days(stored: str, reference: float | None = None) -> float:
    """Days between a stored time and ``reference`` (epoch seconds, default now); never negative."""
    try:  # by hand: datetime costs the hook path its import, strptime also re and locale
        year, month, day = int(stored[0:4]), int(stored[5:7]), int(stored[8:10])
        hour, minute, second = int(stored[11:13]), int(stored[14:16]), int(stored[17:19])
        micros = int((stored[20:26] or "0").ljust(6, "0"))
        if year < 1 or not (1 <= month <= 12 and 1 <= day <= _month_days(year, month)):
            return 0.0
        if hour > 23 or minute > 59 or second > 59:
            return 0.0
    except (TypeError, ValueError, IndexError):
        return 0.0
    then = _epoch_days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    ref = time.time() if reference is None else reference
    return max(0.0, (ref - then - micros / 1e6) / 86400.0)


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _epoch_days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil)."""
    year -= month <= 2
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719468


def age_label(stored: str) -> str:
    """A short age for people: ``5m``, ``3h``, ``12d``."""
    days = age_days(stored)
    if days < 1 / 24:
        return f"{max(1, int(days * 1440))}m"
    if days < 1:
        return f"{int(days * 24)}h"
    return f"{int(days)}d"


#: The last ULID's millisecond and random part in this process: the next one in the same
#: millisecond increments it (the ULID spec's monotonic mode), so ids made in one millisecond
#: sort in the order they were made.
_last: list[int] = [0, 0]


def ulid() -> str:
    """A new ULID: 48 bits of milliseconds, 80 random bits, 26 Crockford base32 characters.

    Monotonic within a process and millisecond: in the same millisecond the random part of the
    previous id is incremented instead of drawn again.
    """
    millis = int(time.time() * 1000)
    if millis == _last[0] and _last[1] < (1 << 80) - 1:
        rand = _last[1] + 1
    else:
        rand = int.from_bytes(os.urandom(10), "big")
    _last[0], _last[1] = millis, rand
    value = (millis << 80) | rand
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))
