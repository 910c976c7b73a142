"""Per-session hook state: an append-only, owner-only file of what was injected and when.

One JSON line per event in ``<home>/sessions/<session_id>.jsonl`` (mode 0600): the record ids injected
and the token estimate. UserPromptSubmit reads it to skip records already shown in the session, under an
exclusive ``flock`` so that concurrent hooks neither lose ids nor inject a record twice. Writing here
instead of the database keeps SessionStart free of the SQLite import; SessionEnd folds the totals into
the ``sessions`` row and removes the file. A lock that cannot be had within :data:`LOCK_WAIT_S` is
skipped (fail-open): a duplicate injection is better than a stalled prompt. A ledger that cannot be
written (a read-only or full home) is read if it exists and new entries are kept in memory only.
"""

from __future__ import annotations

import os
import time

from agentctx.core import home, jsonio, nofollow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self

    from agentctx.core.shapes import LedgerEntry

LOCK_WAIT_S = 0.3
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def safe_session_id(session_id: str) -> str:
    """A file-name-safe form of a session id (hashed when it is not plain)."""
    if session_id and len(session_id) <= 128 and set(session_id) <= _SAFE and session_id[0] != ".":
        return session_id
    from agentctx.core.project import sha256_hex

    return "h-" + sha256_hex(session_id)[:32]


def path_for(session_id: str) -> str:
    """The ledger file of a session."""
    return os.path.join(home.sub("sessions"), safe_session_id(session_id) + ".jsonl")


def read_entries(session_id: str) -> list[LedgerEntry]:
    """Every readable entry of a session's ledger (torn or foreign lines are skipped)."""
    try:
        return _parse(nofollow.read_text(path_for(session_id)))
    except OSError:
        return []


def open_sessions() -> dict[str, list[LedgerEntry]]:
    """Every session that still has a ledger (not yet folded at SessionEnd), by session id."""
    folder = home.sub("sessions")
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".jsonl")]
    except OSError:
        return {}
    found: dict[str, list[LedgerEntry]] = {}
    for name in names:
        try:
            found[name[: -len(".jsonl")]] = _parse(nofollow.read_text(os.path.join(folder, name)))
        except OSError:
            continue
    return found


def totals(entries: list[LedgerEntry]) -> tuple[int, int]:
    """``(tokens injected, injections)`` over ledger entries."""
    tokens = 0
    count = 0
    for entry in entries:
        value = entry.get("tokens")
        if isinstance(value, int) and value > 0:
            tokens += value
            count += 1
    return tokens, count


def injected_ids(entries: list[LedgerEntry], key: str = "ids") -> set[str]:
    """Every record id a session has been shown (``key`` "lines": offered as a one-line match)."""
    ids: set[str] = set()
    for entry in entries:
        value = entry.get(key)
        if isinstance(value, list):
            ids.update(v for v in value if isinstance(v, str))
    return ids


class Ledger:
    """An open, locked session ledger: ``with Ledger(session_id) as ledger: ledger.append({...})``."""

    def __init__(self, session_id: str) -> None:
        self.path = path_for(session_id)
        self.entries: list[LedgerEntry] = []
        self.locked = False
        self.writable = False
        self._fd = -1

    def __enter__(self) -> Self:
        try:
            home.ensure_sub("sessions")
            self._fd = nofollow.open_fd(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
            self.writable = True
        except OSError:  # a read-only or full home: read what is there, remember nothing new
            self.writable = False
            try:
                self._fd = nofollow.open_fd(self.path, os.O_RDONLY)
            except OSError:
                return self
        self.locked = _lock(self._fd)
        chunks = []
        os.lseek(self._fd, 0, os.SEEK_SET)
        while chunk := os.read(self._fd, 65536):
            chunks.append(chunk)
        self.entries = _parse(b"".join(chunks).decode("utf-8", "replace"))
        return self

    def append(self, entry: LedgerEntry) -> None:
        """Add one entry (one ``write`` of one line, so concurrent appends never interleave)."""
        if self.writable:
            line = jsonio.dumps({"t": round(time.time(), 3), **entry}) + "\n"
            try:
                os.write(self._fd, line.encode("utf-8"))
            except OSError:  # a full disk: the injection still goes out, unrecorded
                self.writable = False
        self.entries.append(entry)

    def __exit__(self, *exc_info: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing releases the flock
            self._fd = -1


def _lock(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: appends are still whole lines
        return False
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        except OSError:
            return False


def _parse(text: str) -> list[LedgerEntry]:
    entries: list[Any] = []  # parsed JSON: readers check each value's type
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            value = jsonio.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            entries.append(value)
    return entries
