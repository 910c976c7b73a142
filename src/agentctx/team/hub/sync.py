"""One sync of a linked project: push what waits, then pull the teammates' log after the cursor.

- **Push**: pending versions (this project's shareable records written here that the hub does not
  know, in write order), then the events (supersessions and retirements of hub-known versions,
  new cues of our own), in batches of :data:`BATCH` items. Every text is redacted again with the
  current rules before it leaves. The acks of a batch are stamped in one store transaction, so a
  crash between the hub's commit and the stamp only re-pushes, and the hub acks that as ``dup``.
- **Conflicts**: when two members supersede the same version, the hub admits the first and
  rebases the second onto the chain's tip (one linear chain); both see it in ``team conflicts``.
  Hub order decides, never a clock.
- **Pull**: ``hub_v1.pull`` after the cursor, each batch applied with the cursor in one store
  transaction. A version arrives through the import confinement (:func:`agentctx.store.confine.
  confine`: project scope, unconfirmed, never pinned, source ``import``) with its provenance
  ``hub:<team>#<seq> <author>`` (the injection labels it "team hub: <author>"), pending an
  embedding; our own versions coming back are skipped (no echo). Events set which version is
  current as the hub says; an erasure deletes the record here and its id is never written again.
- An epoch change (the hub restored from a dump, or another database) resets the cursor and
  forgets the acks, so everything is pushed and pulled again, idempotently.

One sync at a time per home (:func:`sync_lock`, an ``flock`` on a file opened without following
symlinks); an unreachable hub is one log line, and the background worker backs off.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from agentctx.core import clock, home, hubstamp, nofollow, writes
from agentctx.core.inject import HUB_PREFIX
from agentctx.store import deletion
from agentctx.store.confine import IMPORTED_TYPES, confine
from agentctx.store.transfer import record_from_data
from agentctx.team.hub import HubError, HubUnreachable, hubpause, local
from agentctx.team.hub.connect import CLIENT, Session

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctx.store import Store, Transaction

#: Items per push or pull call (the hub takes at most 500 and 4 MB).
BATCH = 500
_BATCH_BYTES = 3_500_000
#: A pulled record's ``session_id``: where it came from and who wrote it.
PREFIX = HUB_PREFIX
#: The fields of a version that travel (the fact and its history; no counters, pins or scores).
FIELDS = ("type", "title", "body", "keywords", "key", "rationale", "valid_from", "recorded_at")
_RANK = {"reader": 1, "writer": 2, "maintainer": 3, "admin": 4}
#: The background worker's backoff after failures: 5 min, 10, 20, ... at most an hour.
BACKOFF_MAX_S = 3600


@dataclass(slots=True)
class Report:
    """What one sync of one project did."""

    project_id: str
    team: str
    pushed: int = 0
    duplicates: int = 0
    events: int = 0
    refused: list[dict[str, str]] = field(default_factory=list)
    rebased: list[dict[str, str]] = field(default_factory=list)
    pulled: int = 0
    applied: int = 0
    erased: int = 0
    cursor: int = 0
    head: int = 0
    reset: bool = False
    complete: bool = True
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (``--json``)."""
        return asdict(self)

    def line(self) -> str:
        """One line for a log or the terminal."""
        if self.error:
            return f"team sync {self.team}: {self.error}"
        parts = [
            f"pushed {self.pushed} version(s), {self.events} event(s)",
            f"pulled {self.pulled} item(s) ({self.applied} applied, {self.erased} erased)",
        ]
        if self.refused:
            parts.append(f"{len(self.refused)} refused")
        if self.rebased:
            parts.append(f"{len(self.rebased)} rebased (see `agentctx team conflicts`)")
        if self.reset:
            parts.append("the hub's epoch changed: pulled again from the start")
        if not self.complete:
            parts.append("stopped at the deadline, the rest next time")
        return f"team sync {self.team}: " + "; ".join(parts) + f" (cursor {self.cursor})"


class SyncBusy(HubError):
    """Raised by :func:`sync_lock` when another sync of this home is running."""


class sync_lock:
    """One sync at a time per home: an exclusive ``flock`` on ``locks/hub-sync.lock``."""

    def __enter__(self) -> None:
        folder = home.ensure_sub("locks")
        self._fd = nofollow.open_fd(os.path.join(folder, "hub-sync.lock"), os.O_RDWR | os.O_CREAT)
        try:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - no flock: no cross-process lock
            pass
        except OSError:
            os.close(self._fd)
            raise SyncBusy("another team sync of this home is running; try again later") from None

    def __exit__(self, *exc_info: object) -> None:
        os.close(self._fd)


def version_item(row: dict[str, Any]) -> dict[str, Any]:
    """A record as the hub stores it: its fields redacted again with the current rules, hashed."""
    fields: dict[str, Any] = {name: row.get(name) for name in FIELDS}
    fields["cues"] = writes.cues_text(writes.normalize_cues(row.get("cues")))
    writes.scrub(fields)
    cues = writes.normalize_cues(fields.pop("cues"))
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8")).hexdigest()
    return {"kind": "version", "id": row["id"], "hash": digest, "record": {**fields, "cues": cues}}


def _batches(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for item in items:
        cost = len(json.dumps(item))
        if current and (len(current) == BATCH or size + cost > _BATCH_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(item)
        size += cost
    if current:
        out.append(current)
    return out


# -- one sync --------------------------------------------------------------------------------------


async def sync_project(
    store: Store,
    project_id: str,
    *,
    deadline: float | None = None,
    log: Callable[[str], None] | None = None,
) -> Report:
    """Push then pull one linked project (see the module docstring); the report.

    ``deadline`` (``time.monotonic()``): batches stop being sent a second before it; what is left
    waits for the next sync. An unreachable hub or a refusal is the report's ``error``.
    """
    link = await local.link_of(store, project_id)
    if link is None:
        raise HubError("this project is not linked to a team hub: run `agentctx team link`")
    report = Report(project_id=project_id, team=link["team"], cursor=link["cursor"])
    error: str | None = None
    try:
        async with Session(link["conninfo"]) as hub:
            who = await hub.call("whoami", link["team"], CLIENT)
            report.head = int(who.get("head") or 0)
            if who["epoch"] != link["epoch"]:
                await _reset(store, project_id, who["epoch"])
                report.reset = link["epoch"] is not None
                report.cursor = 0
            if _RANK.get(str(who["role"]), 0) >= 2:
                await _push(store, hub, link, report, deadline)
            await _pull(store, hub, link, report, deadline)
    except HubError as exc:
        error = str(exc)
        report.error = error
        if log is not None:
            log(report.line())
    await _stamp(store, project_id, error)
    return report


def _time_left(deadline: float | None) -> bool:
    return deadline is None or deadline - time.monotonic() > 1.0


async def _stamp(store: Store, project_id: str, error: str | None) -> None:
    async with store.transaction() as tx:
        if error is None:
            await tx.execute(
                "UPDATE hub_links SET last_sync = ?, last_error = NULL, failures = 0 "
                "WHERE project_id = ?",
                (clock.now(), project_id),
            )
        else:
            await tx.execute(
                "UPDATE hub_links SET last_sync = ?, last_error = ?, failures = failures + 1 "
                "WHERE project_id = ?",
                (clock.now(), error[:500], project_id),
            )


async def _reset(store: Store, project_id: str, epoch: str) -> None:
    """Another hub (restored, or a new database): pull from the start, push everything again."""
    async with store.transaction() as tx:
        await tx.execute(
            "UPDATE hub_links SET cursor = 0, epoch = ? WHERE project_id = ?", (epoch, project_id)
        )
        await tx.execute(
            "DELETE FROM hub_items WHERE project_id = ? AND origin = 'local'", (project_id,)
        )
        await tx.execute("DELETE FROM hub_ends WHERE project_id = ?", (project_id,))


async def _push(
    store: Store, hub: Session, link: dict[str, Any], report: Report, deadline: float | None
) -> None:
    project_id = link["project_id"]
    rows = await local.pending_versions(store, project_id)
    for start in range(0, len(rows), BATCH):
        # redacted a batch at a time (the redactor is the push's main cost): a deadline stops it
        # between batches, and the rest waits for the next sync
        versions = [version_item(row) for row in rows[start : start + BATCH]]
        for batch in _batches(versions):
            if not _time_left(deadline):
                report.complete = False
                return
            result = await hub.call("push", link["team"], project_id, batch, CLIENT)
            await _stamp_acks(store, link, batch, result["acks"], report)
    events = await local.pending_events(store, project_id, set())
    for batch in _batches(events):
        if not _time_left(deadline):
            report.complete = False
            return
        result = await hub.call("push", link["team"], project_id, batch, CLIENT)
        await _stamp_acks(store, link, batch, result["acks"], report)


async def _stamp_acks(
    store: Store,
    link: dict[str, Any],
    batch: list[dict[str, Any]],
    acks: list[dict[str, Any]],
    report: Report,
) -> None:
    """A batch's acks, in one transaction (a crash before it only re-pushes: ``dup``)."""
    project_id = link["project_id"]
    me = link["role_name"] or ""
    stamps: list[tuple[Any, ...]] = []
    for item, ack in zip(batch, acks, strict=True):
        if item["kind"] == "version":
            ok = ack["status"] in ("ok", "dup")
            stamps.append(
                (
                    item["id"],
                    project_id,
                    ack.get("seq"),
                    item["hash"],
                    me,
                    "ok" if ok else "refused",
                    None if ok else ack.get("reason"),
                    writes.cues_text(item["record"]["cues"]),
                )
            )
    async with store.transaction() as tx:
        # the versions' acks in one statement (a round trip per ack was most of a 10K push)
        await tx.executemany(
            "INSERT OR REPLACE INTO hub_items(record_id, project_id, seq, hash, author, "
            "origin, status, reason, cues) VALUES (?, ?, ?, ?, ?, 'local', ?, ?, ?)",
            stamps,
        )
        if stamps:
            await hubpause.reached("push-acked")
        for item, ack in zip(batch, acks, strict=True):
            status, kind, ref = ack["status"], item["kind"], item["id"]
            if status == "refused":
                report.refused.append({"id": ref, "kind": kind, "reason": str(ack.get("reason"))})
            if kind == "version":
                report.pushed += status == "ok"
                report.duplicates += status == "dup"
                if ack.get("reason") == "erased":
                    await _erase_here(store, tx, project_id, ref, ack.get("seq"))
                    report.erased += 1
                continue
            report.events += status in ("ok", "rebased")
            if kind == "cues":
                if status == "ok":
                    await tx.execute(
                        "UPDATE hub_items SET cues = ? WHERE record_id = ?",
                        (writes.cues_text(item["cues"]), ref),
                    )
                continue
            end = kind if status != "refused" else "refused"
            await tx.execute(
                "INSERT OR REPLACE INTO hub_ends(record_id, project_id, kind, successor, seq) "
                "VALUES (?, ?, ?, ?, ?)",
                (ref, project_id, end, item.get("successor"), ack.get("seq")),
            )
            if status == "rebased":
                onto = str(ack["onto"])
                await tx.execute(
                    "INSERT OR REPLACE INTO hub_ends(record_id, project_id, kind, successor, seq) "
                    "VALUES (?, ?, 'supersede', ?, ?)",
                    (onto, project_id, item["successor"], ack.get("seq")),
                )
                report.rebased.append({"id": ref, "onto": onto, "successor": item["successor"]})


async def _pull(
    store: Store, hub: Session, link: dict[str, Any], report: Report, deadline: float | None
) -> None:
    project_id = link["project_id"]
    while True:
        if not _time_left(deadline):
            report.complete = False
            return
        page = await hub.call("pull", link["team"], project_id, report.cursor, BATCH, CLIENT)
        report.head = int(page.get("head") or 0)
        items = page["items"]
        if page["epoch"] != (await local.link_of(store, project_id) or {}).get("epoch"):
            raise HubError("the hub's epoch changed during the sync; run it again")
        if report.cursor > report.head:  # a hub restored from an older dump, same database
            await _reset(store, project_id, page["epoch"])
            report.reset = True
            report.cursor = 0
            continue
        if not items:
            return
        await _apply(store, link, items, report)
        if not page["more"]:
            return


async def _apply(
    store: Store, link: dict[str, Any], items: list[dict[str, Any]], report: Report
) -> None:
    """One page of the log and the cursor after it, in one store transaction."""
    project_id, team = link["project_id"], link["team"]
    async with store.transaction() as tx:
        tx.mark_project_changed(project_id)
        await tx.execute("PRAGMA defer_foreign_keys = ON")
        page = await _page_state(tx, items)
        for n, item in enumerate(items):
            if n == len(items) // 2:
                await hubpause.reached("pull-applying")
            report.pulled += 1
            kind, seq, record_id = item["kind"], int(item["seq"]), str(item["id"])
            if kind == "version":
                report.applied += await _apply_version(tx, project_id, team, item, page)
            elif kind == "supersede" or kind == "retire":
                report.applied += await _apply_end(tx, project_id, record_id, item)
            elif kind == "erase":
                await _erase_here(store, tx, project_id, record_id, seq)
                report.erased += 1
            elif kind == "cues":
                report.applied += await _apply_cues(tx, record_id, item)
            report.cursor = seq
        await tx.execute(
            "UPDATE hub_links SET cursor = ? WHERE project_id = ?", (report.cursor, project_id)
        )


@dataclass(slots=True)
class _Page:
    """What the store knows of a page's versions, read in three queries rather than per item.

    A version id is in the hub's log once and its erasure comes after it, so what is read before
    the page holds for each of its versions while the page is applied.
    """

    erased: set[str]
    sources: dict[str, str]
    acked: dict[str, int | None]


async def _page_state(tx: Transaction, items: list[dict[str, Any]]) -> _Page:
    ids = [str(item["id"]) for item in items if item["kind"] == "version"]
    page = _Page(set(), {}, {})
    if not ids:
        return page
    holes = ", ".join("?" * len(ids))
    for row in await tx.rows(f"SELECT record_id FROM hub_erased WHERE record_id IN ({holes})", ids):
        page.erased.add(str(row["record_id"]))
    for row in await tx.rows(
        f"SELECT id, source FROM records_archive WHERE id IN ({holes}) UNION ALL "
        f"SELECT id, source FROM records WHERE id IN ({holes})",
        (*ids, *ids),
    ):
        page.sources[str(row["id"])] = str(row["source"])
    for row in await tx.rows(
        f"SELECT record_id, seq FROM hub_items WHERE record_id IN ({holes}) AND status = 'ok'", ids
    ):
        page.acked[str(row["record_id"])] = row["seq"]
    return page


async def _apply_version(
    tx: Transaction, project_id: str, team: str, item: dict[str, Any], page: _Page
) -> int:
    record_id, seq, author = str(item["id"]), int(item["seq"]), str(item["author"])
    fields = item.get("item")
    if not isinstance(fields, dict) or record_id in page.erased:
        return 0  # erased at the hub (its erase event follows) or here
    source = page.sources.get(record_id)
    if (
        source is not None
    ):  # ours coming back (no echo), or pulled before: the hub's sequence is noted
        if page.acked.get(record_id) == seq:
            return 0  # already noted (our own push's ack)
        origin = "hub" if source == "import" else "local"
        await tx.execute(
            "INSERT INTO hub_items(record_id, project_id, seq, hash, author, origin) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(record_id) DO UPDATE SET seq = excluded.seq",
            (record_id, project_id, seq, item.get("hash"), author, origin),
        )
        return 0
    if fields.get("type") not in IMPORTED_TYPES:
        return 0
    data = {name: fields.get(name) for name in FIELDS}
    data.update(id=record_id, cues=writes.normalize_cues(fields.get("cues") or []))
    data["keywords"] = data["keywords"] or ""
    origin = f"{PREFIX}{team}#{seq} {author}"
    confined = confine({"records": [data]}, project_id, origin)["records"]
    if not confined:
        return 0
    record = record_from_data(confined[0])
    row = dict(record.to_row())
    if record.type == "profile" and record.key is not None:
        await _one_per_key(tx, project_id, row, seq)
    await tx.run(writes.store_row(row))  # the one write path: redacted here too
    await tx.execute(
        "INSERT OR REPLACE INTO hub_items(record_id, project_id, seq, hash, author, origin, "
        "cues) VALUES (?, ?, ?, ?, ?, 'hub', ?)",
        (record_id, project_id, seq, item.get("hash"), author, row["cues"]),
    )
    return 1


async def _one_per_key(tx: Transaction, project_id: str, row: dict[str, Any], seq: int) -> None:
    """One current profile fact per key here too: hub order decides which one (the later)."""
    found = await tx.rows(
        "SELECT r.id, h.status, h.seq FROM records r LEFT JOIN hub_items h ON h.record_id = r.id "
        "WHERE r.project_id = ? AND r.type = 'profile' AND r.key = ? "
        "AND r.superseded_at IS NULL",
        (project_id, row["key"]),
    )
    for current in found:
        at_hub_before = current["status"] == "ok" and (current["seq"] or 0) < seq
        if at_hub_before:  # the hub ended it when this one arrived (0002_hub_v1.sql, push)
            await tx.execute(
                "UPDATE records SET superseded_at = ?, superseded_by = ? WHERE id = ?",
                (clock.now(), row["id"], current["id"]),
            )
            await tx.execute(
                "INSERT OR REPLACE INTO hub_ends(record_id, project_id, kind, successor) "
                "VALUES (?, ?, 'supersede', ?)",
                (current["id"], project_id, row["id"]),
            )
        else:  # later at the hub, or ours not pushed yet (it will be later): it wins
            row["superseded_at"], row["superseded_by"] = clock.now(), current["id"]


async def _apply_end(tx: Transaction, project_id: str, record_id: str, item: dict[str, Any]) -> int:
    successor = item.get("successor")
    extra = item.get("item") or {}
    await tx.execute(
        "INSERT OR REPLACE INTO hub_ends(record_id, project_id, kind, successor, seq) "
        "VALUES (?, ?, ?, ?, ?)",
        (record_id, project_id, item["kind"], successor, item["seq"]),
    )
    if isinstance(extra, dict) and extra.get("rebased_from"):
        await tx.execute(
            "INSERT OR IGNORE INTO hub_conflicts(project_id, seq, record_id, onto, successor, "
            "author, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                project_id,
                item["seq"],
                str(extra["rebased_from"]),
                record_id,
                str(successor),
                str(item["author"]),
                str(item["at"]),
            ),
        )
    present = await tx.rows(
        "SELECT superseded_by FROM records WHERE id = ? AND project_id = ?",
        (record_id, project_id),
    )
    if not present:
        return 0
    here = successor is not None and bool(
        await tx.rows("SELECT 1 FROM records WHERE id = ?", (successor,))
    )
    now = clock.now()
    if here:
        await tx.execute(
            "UPDATE records SET superseded_at = coalesce(superseded_at, ?), superseded_by = ? "
            "WHERE id = ?",
            (now, successor, record_id),
        )
        await tx.execute(
            "DELETE FROM edges WHERE to_id = ? AND rel_type = 'supersedes' AND from_id <> ?",
            (record_id, successor),
        )
        await tx.run(writes.edge(str(successor), record_id, "supersedes", now))
    else:  # retired, or superseded by a version that never reached here (erased)
        await tx.execute(
            "UPDATE records SET superseded_at = coalesce(superseded_at, ?), superseded_by = NULL "
            "WHERE id = ?",
            (now, record_id),
        )
    return 1


async def _apply_cues(tx: Transaction, record_id: str, item: dict[str, Any]) -> int:
    extra = item.get("item")
    if not isinstance(extra, dict) or not await tx.rows(
        "SELECT 1 FROM hub_items WHERE record_id = ? AND origin = 'hub'", (record_id,)
    ):
        return 0  # our own cues, or erased since
    cues = writes.normalize_cues(extra.get("cues") or [])
    changed = await tx.run(writes.update_cues(record_id, cues))
    await tx.execute(
        "UPDATE hub_items SET cues = ? WHERE record_id = ?", (writes.cues_text(cues), record_id)
    )
    return changed


async def _erase_here(
    store: Store, tx: Transaction, project_id: str, record_id: str, seq: Any
) -> None:
    await deletion.erase(store, tx, [record_id])
    await tx.execute("DELETE FROM hub_items WHERE record_id = ?", (record_id,))
    await tx.execute("DELETE FROM hub_ends WHERE record_id = ?", (record_id,))
    await tx.execute(
        "INSERT OR REPLACE INTO hub_erased(record_id, project_id, seq) VALUES (?, ?, ?)",
        (record_id, project_id, seq),
    )


# -- the entry points: by hand, the workers -----------------------------------------------------


async def sync_all(
    store: Store,
    project_ids: list[str] | None = None,
    *,
    deadline: float | None = None,
    log: Callable[[str], None] | None = None,
    background: bool = False,
) -> list[Report]:
    """Sync the linked projects (all, or those given), one sync per home at a time.

    ``background``: a worker's sync: a link whose last tries failed is skipped until its backoff
    (5 minutes, doubling, at most an hour) has passed. Raises :class:`SyncBusy` when another sync
    runs (a worker logs it and leaves).
    """
    reports: list[Report] = []
    with sync_lock():
        await anyio.to_thread.run_sync(hubstamp.touch)
        for link in await local.links(store):
            if project_ids is not None and link["project_id"] not in project_ids:
                continue
            if background and _backing_off(link):
                continue
            reports.append(
                await sync_project(store, link["project_id"], deadline=deadline, log=log)
            )
    return reports


def _backing_off(link: dict[str, Any]) -> bool:
    failures = int(link.get("failures") or 0)
    if not failures or not link.get("last_sync"):
        return False
    wait = min(hubstamp.SYNC_EVERY_S * 2 ** (failures - 1), BACKOFF_MAX_S)
    return bool(clock.age_days(str(link["last_sync"])) * 86400 < wait)


async def erase(store: Store, project_id: str, record_id: str) -> dict[str, Any]:
    """Erase a record at the hub (its author or a maintainer), then here; the hub's ack."""
    link = await local.link_of(store, project_id)
    if link is None:
        raise HubError("this project is not linked to a team hub: run `agentctx team link`")
    async with Session(link["conninfo"]) as hub:
        result = await hub.call(
            "push", link["team"], project_id, [{"kind": "erase", "id": record_id}], CLIENT
        )
    ack: dict[str, Any] = result["acks"][0]
    if ack["status"] == "refused":
        raise HubError(f"the hub refused to erase {record_id}: {ack.get('reason')}")
    async with store.transaction() as tx:
        tx.mark_project_changed(project_id)
        await tx.execute("PRAGMA defer_foreign_keys = ON")
        await _erase_here(store, tx, project_id, record_id, ack.get("seq"))
    return ack


__all__ = ["HubUnreachable", "Report", "SyncBusy", "erase", "sync_all", "sync_project"]
