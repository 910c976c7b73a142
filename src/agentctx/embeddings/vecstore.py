"""The store's vectors (ADR-006): embed pending records, nearest neighbours, stored vectors by id.

Vectors live in the sqlite-vec table ``records_vec`` when the store's connection has sqlite-vec, or
else as float32 BLOBs in ``records_vec_blob`` (created here on first use), searched with numpy. Both
paths return the same neighbours. A record's ``pending_embedding`` flag is cleared only in the
transaction that stores its vector, and only if its text has not changed since it was embedded, so a
crash or a concurrent edit leaves it pending for the next run. The stored vectors are one model's
(:mod:`agentctx.core.vectors`): :func:`embed_pending` writes, and :func:`nearest` with ``model``
searches, only the vectors of the model the store records; a change of model is
:mod:`agentctx.embeddings.reembed`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.core import clock, vectors
from agentctx.embeddings.models import BATCH_SIZE, normalize
from agentctx.records import Record

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from numpy.typing import NDArray

    from agentctx.embeddings.models import Embedder
    from agentctx.store import Store

BLOB_TABLE = vectors.BLOB_TABLE
_CREATE_BLOB_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {BLOB_TABLE} (record_id TEXT PRIMARY KEY, embedding BLOB NOT NULL)"
)


def record_text(record: Record, project: str | None = None) -> str:
    """The text embedded for a record: ``[type] [date] [project] title — body``."""
    label = project or record.project_id
    return f"[{record.type}] [{record.valid_from[:10]}] [{label}] {record.title} — {record.body}"


def uses_vec(store: Store) -> bool:
    """True when this store's connection has sqlite-vec (vectors in ``records_vec``)."""
    return bool(store.capabilities.vec_version)


async def embed_pending(store: Store, embedder: Embedder, *, limit: int | None = None) -> int:
    """Embed every record flagged ``pending_embedding`` (at most ``limit``); return how many.

    Current records first (``superseded_at`` NULL), then superseded ones, each in write order.

    The stored vectors must be ``embedder``'s (:func:`agentctx.embeddings.reembed.prepare` makes them so;
    unrecorded vectors of its dimension it adopts here): each batch checks
    it in the transaction that stores the batch, and raises
    :class:`~agentctx.core.vectors.ModelMismatchError` when another model took over meanwhile.
    """
    vec = uses_vec(store)
    async with store.transaction() as tx:
        await tx.run(vectors.guard(embedder.name, embedder.dims))
        # past the guard, settling only records the model of a store that had none (no switch)
        await tx.run(vectors.settle(embedder.name, embedder.dims, vec=vec, now=clock.now()))
        if not vec:
            await tx.execute(_CREATE_BLOB_TABLE)
        elif await _has_blob_table(store):
            # vectors stored while this store had no sqlite-vec join records_vec now
            await tx.execute(
                f"INSERT INTO records_vec(record_id, embedding) "
                f"SELECT b.record_id, b.embedding FROM {BLOB_TABLE} b "
                "JOIN records r ON r.id = b.record_id AND r.pending_embedding = 0 "
                "WHERE length(b.embedding) = ? "
                "AND b.record_id NOT IN (SELECT record_id FROM records_vec)",
                (4 * embedder.dims,),
            )
    done = 0
    last_seq = -1
    # current versions first, then the superseded ones (a new team member's thousands of pulled
    # versions are searchable by meaning where it matters first); in write order within each
    current = True
    while limit is None or done < limit:
        size = BATCH_SIZE if limit is None else min(BATCH_SIZE, limit - done)
        rows = await store.rows(
            "SELECT r.*, p.name AS project_name FROM records r "
            "LEFT JOIN projects p ON p.project_id = r.project_id "
            "WHERE r.pending_embedding = 1 AND r.seq > ? "
            f"AND r.superseded_at IS {'' if current else 'NOT '}NULL ORDER BY r.seq LIMIT ?",
            (last_seq, size),
        )
        if not rows:
            if not current:
                break
            current, last_seq = False, -1
            continue
        last_seq = int(rows[-1]["seq"])
        records = [Record.from_row(row) for row in rows]
        embedded = await embedder.embed(
            [record_text(r, row["project_name"]) for r, row in zip(records, rows, strict=True)]
        )
        async with store.transaction() as tx:
            await tx.run(vectors.guard(embedder.name, embedder.dims))  # never a mixed table
            for record, vector in zip(records, embedded, strict=True):
                # Only if the text is still what was embedded (an edit re-flags it meanwhile).
                cleared = await tx.execute(
                    "UPDATE records SET pending_embedding = 0 WHERE id = ? "
                    "AND pending_embedding = 1 AND type = ? AND title = ? AND body = ? "
                    "AND valid_from = ? AND project_id = ?",
                    (
                        record.id,
                        record.type,
                        record.title,
                        record.body,
                        record.valid_from,
                        record.project_id,
                    ),
                )
                if cleared != 1:
                    continue
                blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
                if vec:
                    await tx.execute("DELETE FROM records_vec WHERE record_id = ?", (record.id,))
                    await tx.execute(
                        "INSERT INTO records_vec(record_id, embedding) VALUES (?, ?)",
                        (record.id, blob),
                    )
                else:
                    await tx.execute(
                        f"INSERT OR REPLACE INTO {BLOB_TABLE}(record_id, embedding) VALUES (?, ?)",
                        (record.id, blob),
                    )
                done += 1
    return done


async def nearest(
    store: Store,
    vector: Any,
    k: int,
    *,
    exclude: Collection[str] | None = None,
    model: str | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` stored vectors most cosine-similar to ``vector``: ``(record_id, similarity)``.

    Highest similarity first (ties by id). sqlite-vec's exact KNN when the store has it, numpy
    brute force over ``records_vec_blob`` otherwise; both give the same neighbours. ``model``:
    the model that made ``vector``; the stored vectors must be its own, else
    :class:`~agentctx.core.vectors.ModelMismatchError` (a ``ValueError``). None: the caller
    embedded the store with the same model it queries with (benchmarks, tests).
    """
    skip = set(exclude or ())
    if k <= 0:
        return []
    query = normalize(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
    if model is not None:
        await store.run(vectors.guard(model, int(query.shape[0])))
    if uses_vec(store):
        rows = await store.rows(
            "SELECT record_id, distance FROM records_vec WHERE embedding MATCH ? AND k = ?",
            (query.tobytes(), k + len(skip)),
        )
        found = [(str(r[0]), 1.0 - float(r[1])) for r in rows if r[0] not in skip]
    else:
        if not await _has_blob_table(store):
            return []
        rows = await store.rows(  # only records that still exist, and vectors of this size
            f"SELECT b.record_id, b.embedding FROM {BLOB_TABLE} b "
            "JOIN records r ON r.id = b.record_id WHERE length(b.embedding) = ?",
            (query.nbytes,),
        )
        rows = [r for r in rows if r[0] not in skip]
        if not rows:
            return []
        found = await anyio.to_thread.run_sync(_brute_force, query, rows, k)
    found.sort(key=lambda item: (-item[1], item[0]))
    return found[:k]


async def load_vectors(store: Store, record_ids: Collection[str]) -> dict[str, NDArray[np.float32]]:
    """The stored vectors (unit length) of these records, by id; a record without one is absent.

    From ``records_vec`` when the store has sqlite-vec, else from ``records_vec_blob``. vec0 answers
    an ``IN`` list by scanning its whole table, so a large set is read in one streamed scan instead
    rather than one scan per chunk of ids.
    """
    wanted = set(record_ids)
    if not wanted:
        return {}
    found: dict[str, bytes] = {}
    if uses_vec(store):
        if len(wanted) <= _IN_MAX:
            found = await _blobs_in(store, "records_vec", sorted(wanted))
        else:
            scan = store.scan("SELECT record_id, embedding FROM records_vec", batch=_FETCH)
            async for batch in scan:
                found.update((str(r[0]), r[1]) for r in batch if r[0] in wanted)
    elif await _has_blob_table(store):
        ids = sorted(wanted)
        for start in range(0, len(ids), _IN_MAX):
            found |= await _blobs_in(store, BLOB_TABLE, ids[start : start + _IN_MAX])
    by_size: dict[int, list[str]] = {}
    for rid in sorted(found):
        if found[rid] and len(found[rid]) % 4 == 0:
            by_size.setdefault(len(found[rid]), []).append(rid)
    vectors: dict[str, NDArray[np.float32]] = {}
    for ids in by_size.values():  # one matrix per vector size: normalized in one numpy call
        flat = np.frombuffer(b"".join(found[rid] for rid in ids), dtype=np.float32)
        vectors.update(zip(ids, normalize(flat.reshape(len(ids), -1)), strict=True))
    return vectors


_IN_MAX = 900  # ids per IN list (SQLite allows 32,766 variables; smaller lists plan faster)
_FETCH = 2048


async def _blobs_in(store: Store, table: str, ids: Sequence[str]) -> dict[str, bytes]:
    rows = await store.rows(
        f"SELECT record_id, embedding FROM {table} WHERE record_id IN ({', '.join('?' * len(ids))})",
        ids,
    )
    return {str(r[0]): bytes(r[1]) for r in rows}


async def _has_blob_table(store: Store) -> bool:
    rows = await store.rows(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (BLOB_TABLE,)
    )
    return bool(rows)


def _brute_force(query: NDArray[np.float32], rows: list[Any], k: int) -> list[tuple[str, float]]:
    ids = [str(r[0]) for r in rows]
    matrix = normalize(np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]))
    sims = matrix @ query
    top = np.argsort(-sims, kind="stable")[:k]
    return [(ids[i], float(sims[i])) for i in top]
