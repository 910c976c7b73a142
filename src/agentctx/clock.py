"""Timestamps and ids: ISO-8601 UTC text that sorts as it reads, and ULIDs.

Standard library only (the hook path uses it). Every stored time is ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` so
that string comparison in SQL is time comparison.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_FMT = "%Y-%m-%dT%H:%M:%S.%fZ"


def now() -> str:
    """The current UTC time as stored text."""
    return format_time(datetime.now(UTC))


def format_time(moment: datetime) -> str:
    """A datetime as stored text (naive datetimes are taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(_FMT)


def parse_time(text: str) -> str:
    """Normalize a user-given time to stored text, or raise ``ValueError``.

    Accepts ISO-8601 datetimes (``2026-04-01T12:00``, with ``Z`` or an offset; naive means UTC) and bare
    dates. A bare date means the end of that day, so ``--as-of 2026-04-01`` answers what was true on it.
    """
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
    try:  # by hand: datetime.strptime imports _strptime, re and locale (milliseconds on the hook path)
        then = datetime(
            int(stored[0:4]),
            int(stored[5:7]),
            int(stored[8:10]),
            int(stored[11:13]),
            int(stored[14:16]),
            int(stored[17:19]),
            int((stored[20:26] or "0").ljust(6, "0")),
            tzinfo=UTC,
        ).timestamp()
    except (TypeError, ValueError, IndexError):
        return 0.0
    ref = time.time() if reference is None else reference
    return max(0.0, (ref - then) / 86400.0)


def age_label(stored: str) -> str:
    """A short age for people: ``5m``, ``3h``, ``12d``."""
    days = age_days(stored)
    if days < 1 / 24:
        return f"{max(1, int(days * 1440))}m"
    if days < 1:
        return f"{int(days * 24)}h"
    return f"{int(days)}d"


def ulid() -> str:
    """A new ULID: 48 bits of milliseconds, 80 random bits, 26 Crockford base32 characters."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))
