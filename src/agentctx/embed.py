"""Local embeddings (ADR-006): a fastembed model, vectors for pending records, cosine neighbours.

The model runs in a worker thread (``anyio.to_thread``), one call at a time, so the event loop stays
free; it is loaded once per process and settings (:func:`load_model` caches it, failures included).
When it cannot load (offline without a local folder, ``embeddings off``), :func:`load_model` logs one
line and returns None: callers then stay keyword-only.

Vectors live in the sqlite-vec table ``records_vec`` when the store's connection has sqlite-vec, or
else as float32 BLOBs in ``records_vec_blob`` (created here on first use), searched with numpy. Both
paths return the same neighbours. A record's ``pending_embedding`` flag is cleared only in the
transaction that stores its vector, and only if its text has not changed since it was embedded, so a
crash or a concurrent edit leaves it pending for the next run. The stored vectors are one model's
(:mod:`agentctx.core.vectors`): :func:`embed_pending` writes, and :func:`nearest` with ``model``
searches, only the vectors of the model the store records; a change of model is
:mod:`agentctx.reembed`. A model folder under a name fastembed does not list loads as a
sentence-transformers ONNX export (:func:`register_local`).
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.core import clock, home, vectors
from agentctx.records import Record

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

    from numpy.typing import NDArray

    from agentctx.store import Store

log = logging.getLogger("agentctx.embed")

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: What bge models expect before a search query (never before the passages themselves).
BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
BATCH_SIZE = 64
BLOB_TABLE = vectors.BLOB_TABLE
_CREATE_BLOB_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {BLOB_TABLE} (record_id TEXT PRIMARY KEY, embedding BLOB NOT NULL)"
)

_cache: dict[tuple[str, str, str], Embedder | None] = {}
_cache_lock = threading.Lock()


class Embedder:
    """A loaded embedding model. Sync methods run in the caller's thread; async ones in a worker."""

    def __init__(self, model: Any, name: str, *, query_prefix: str = "") -> None:
        self.model = model
        self.name = name
        self.query_prefix = query_prefix
        self._lock = threading.Lock()  # one embedding call at a time per model, from any loop
        self.dims = int(self.embed_sync(["dimension probe"]).shape[1])

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length float32 vectors, one row per text (blocking: call it from a thread)."""
        if not texts:
            return np.zeros((0, getattr(self, "dims", 0)), dtype=np.float32)
        with self._lock:
            rows = list(self.model.embed(list(texts), batch_size=BATCH_SIZE))
        return _normalize(np.asarray(np.stack(rows), dtype=np.float32))

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """:meth:`embed_sync` in a worker thread."""
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    async def embed_query(self, text: str) -> NDArray[np.float32]:
        """One search query's vector (with the model's query prefix, if it has one)."""
        vectors = await self.embed([self.query_prefix + text])
        return np.asarray(vectors[0], dtype=np.float32)


def load_model(settings: Mapping[str, Any]) -> Embedder | None:
    """The configured model, loaded once per process; None (logged once) when it cannot load.

    ``settings`` is :func:`agentctx.config.load`'s mapping: ``embeddings`` (off → None),
    ``embedding.model`` and ``embedding.path`` (a local folder, loaded without a download). Blocking:
    async callers use :func:`load_model_async`.
    """
    if not settings.get("embeddings", True):
        return None
    name = str(settings.get("embedding.model") or DEFAULT_MODEL)
    path = str(settings.get("embedding.path") or "")
    cache_dir = home.sub("models")
    key = (name, path, cache_dir)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = _load(name, path, cache_dir)
        return _cache[key]


async def load_model_async(settings: Mapping[str, Any]) -> Embedder | None:
    """:func:`load_model` in a worker thread."""
    return await anyio.to_thread.run_sync(load_model, settings)


def clear_model_cache() -> None:
    """Forget loaded models (and failures): the next :func:`load_model` tries again."""
    with _cache_lock:
        _cache.clear()


def _load(name: str, path: str, cache_dir: str) -> Embedder | None:
    where = path or cache_dir
    if path and not os.path.isdir(path):
        log.warning("embeddings off: model folder %s does not exist (keyword-only search)", path)
        return None
    try:
        from fastembed import TextEmbedding

        kwargs: dict[str, Any] = {"model_name": name}
        model: Any
        if path:
            kwargs["specific_model_path"] = path
            register_local(name, path)
            with _quiet_fastembed():
                model = TextEmbedding(**kwargs)
        else:
            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
            kwargs["cache_dir"] = cache_dir
            model = _cached_or_downloaded(TextEmbedding, kwargs, name, cache_dir)
            if model is None:
                return None
            if os.path.commonpath([os.path.abspath(cache_dir), home.home_dir()]) == home.home_dir():
                home.tighten(
                    cache_dir
                )  # a download takes the umask's modes: the home stays private
        prefix = BGE_QUERY_PREFIX if "bge-" in name.lower() else ""
        return Embedder(model, name, query_prefix=prefix)
    except Exception as exc:  # offline, corrupt folder, unknown name: keyword-only
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        log.warning("embeddings off: cannot load %s from %s (%s)", name, where, reason)
        return None


def _cached_or_downloaded(
    factory: Any, kwargs: dict[str, Any], name: str, cache_dir: str
) -> Any | None:
    """The model from the cache folder, else downloaded once (with a one-line notice).

    Offline, fastembed's download retries take tens of seconds before they give up, so the hub is probed
    first (a TCP connection, :data:`PROBE_TIMEOUT` seconds): unreachable means keyword-only now, and
    another try at the next run.
    """
    try:
        with _quiet_fastembed():
            return factory(**kwargs, local_files_only=True)
    except Exception:  # not in the cache yet
        pass
    if not _hub_reachable():
        log.warning(
            "embeddings off: %s is not in %s and %s cannot be reached to download it "
            "(keyword-only; set embedding.path to a local model folder, or retry online)",
            name,
            cache_dir,
            HUB_HOST,
        )
        return None
    log.warning("downloading embedding model %s (one-time) into %s", name, cache_dir)
    with _quiet_fastembed():
        return factory(**kwargs)


#: What ``init``, ``doctor`` and ``model fetch`` tell about a model before loading it: fastembed's
#: Hugging Face repository, model file and size (MB) for the default model, so that describing it
#: does not import fastembed (tests/test_first_hour.py checks these against fastembed's own list).
KNOWN_MODELS: dict[str, tuple[str, str, int]] = {
    DEFAULT_MODEL: ("Qdrant/all-MiniLM-L6-v2-onnx", "model.onnx", 90),
    "BAAI/bge-small-en-v1.5": ("Qdrant/bge-small-en-v1.5-onnx-Q", "model_optimized.onnx", 67),
}


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """The configured embedding model, described without loading it."""

    name: str
    enabled: bool  # the ``embeddings`` setting
    size_mb: int | None  # the download's size, when known
    folder: str  # ``embedding.path`` when set, else the cache folder downloads go to
    local: bool  # ``embedding.path`` is set: loaded from that folder, never downloaded
    present: bool  # the local folder exists, or the model is in the cache folder

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``init --json``, ``doctor --json``)."""
        return {
            "name": self.name,
            "enabled": self.enabled,
            "size_mb": self.size_mb,
            "folder": self.folder,
            "local": self.local,
            "present": self.present,
        }


class ModelUnavailable(Exception):
    """The model cannot be loaded (or fetched) now; the message says why in one line."""


def model_info(settings: Mapping[str, Any]) -> ModelInfo:
    """What the settings name: which model, how big, where it is (or will be) stored."""
    name = str(settings.get("embedding.model") or DEFAULT_MODEL)
    path = str(settings.get("embedding.path") or "")
    enabled = bool(settings.get("embeddings", True))
    if path:
        return ModelInfo(name, enabled, None, path, True, os.path.isdir(path))
    cache_dir = home.sub("models")
    repo, model_file, size = _describe(name)
    snapshots = os.path.join(cache_dir, "models--" + repo.replace("/", "--"), "snapshots")
    present = bool(repo) and any(
        os.path.isfile(os.path.join(snapshots, rev, model_file)) for rev in _listdir(snapshots)
    )
    return ModelInfo(name, enabled, size, cache_dir, False, present)


def _describe(name: str) -> tuple[str, str, int | None]:
    """(Hugging Face repository, model file, size in MB) of a fastembed model name."""
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name]
    try:
        from fastembed import TextEmbedding

        for entry in TextEmbedding.list_supported_models():
            if str(entry.get("model", "")).lower() == name.lower():
                repo = str((entry.get("sources") or {}).get("hf") or "")
                size = entry.get("size_in_GB")
                mb = round(float(size) * 1000) if isinstance(size, int | float) else None
                return repo, str(entry.get("model_file") or ""), mb
    except Exception:  # an unusable fastembed: nothing more to say about the model
        pass
    return "", "", None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def load_local(settings: Mapping[str, Any]) -> Embedder:
    """The configured model from local files only (never a download): ``doctor`` and ``search``.

    Raises :class:`ModelUnavailable` with the reason (off, not downloaded, does not load).
    """
    info = model_info(settings)
    if not info.enabled:
        raise ModelUnavailable("embeddings are off (`agentctx config set embeddings on`)")
    if not info.present:
        where = "the model folder " + info.folder if info.local else info.folder
        raise ModelUnavailable(
            f"{info.name} is not downloaded ({where} does not hold it)"
            if not info.local
            else f"{where} does not exist"
        )
    try:
        from fastembed import TextEmbedding

        kwargs: dict[str, Any] = {"model_name": info.name}
        if info.local:
            kwargs["specific_model_path"] = info.folder
            register_local(info.name, info.folder)
        else:
            kwargs.update(cache_dir=info.folder, local_files_only=True)
        with _quiet_fastembed():
            model = TextEmbedding(**kwargs)
        prefix = BGE_QUERY_PREFIX if "bge-" in info.name.lower() else ""
        return Embedder(model, info.name, query_prefix=prefix)
    except Exception as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise ModelUnavailable(f"{info.name} does not load from {info.folder} ({reason})") from exc


def fetch(
    settings: Mapping[str, Any], announce: Callable[[ModelInfo], None] | None = None
) -> Embedder:
    """Download the configured model now (the Hugging Face hub shows its progress bars on stderr)
    and load it; a local folder or a model already downloaded is only loaded.

    ``announce`` is called just before a download starts. :class:`ModelUnavailable` when the
    model cannot be had (offline: at once, after one connection attempt)."""
    info = model_info(settings)
    if info.local or info.present:
        return load_local({**settings, "embeddings": True})
    if not _hub_reachable():
        raise ModelUnavailable(
            f"cannot download {info.name}: {HUB_HOST} cannot be reached (offline?); search "
            "stays keyword-only: retry online, or set embedding.path to a local model folder"
        )
    if announce is not None:
        announce(info)
    os.makedirs(info.folder, mode=0o700, exist_ok=True)
    try:
        from fastembed import TextEmbedding

        model = TextEmbedding(model_name=info.name, cache_dir=info.folder)
    except Exception as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise ModelUnavailable(f"cannot download {info.name} ({reason})") from exc
    if os.path.commonpath([os.path.abspath(info.folder), home.home_dir()]) == home.home_dir():
        home.tighten(info.folder)
    clear_model_cache()  # a failure remembered earlier in this process is stale now
    prefix = BGE_QUERY_PREFIX if "bge-" in info.name.lower() else ""
    return Embedder(model, info.name, query_prefix=prefix)


#: Where a local folder's ONNX file may be, for a model fastembed does not list.
LOCAL_MODEL_FILES = ("model.onnx", "onnx/model.onnx", "model_optimized.onnx")
_registered: set[str] = set()


def register_local(name: str, folder: str) -> bool:
    """Let fastembed load ``folder`` under ``name`` when ``name`` is none of its own models.

    A sentence-transformers ONNX export (mean pooling, normalized vectors): the first of
    :data:`LOCAL_MODEL_FILES` in the folder is its model file. True when registered now.
    """
    from fastembed import TextEmbedding

    if name in _registered or any(
        str(entry.get("model", "")).lower() == name.lower()
        for entry in TextEmbedding.list_supported_models()
    ):
        return False
    model_file = next(
        (f for f in LOCAL_MODEL_FILES if os.path.isfile(os.path.join(folder, f))), None
    )
    if model_file is None:
        return False  # fastembed then says which file it missed
    from fastembed.common.model_description import ModelSource, PoolingType

    TextEmbedding.add_custom_model(
        model=name,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf=name),
        dim=0,  # unknown until loaded: Embedder probes it
        model_file=model_file,
    )
    _registered.add(name)
    return True


HUB_HOST = "huggingface.co"
PROBE_TIMEOUT = 3.0


def _hub_reachable() -> bool:
    """Whether a download could start: a proxy is configured, or the hub accepts a connection."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    if os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0"):
        return False
    import socket

    try:
        with socket.create_connection((HUB_HOST, 443), timeout=PROBE_TIMEOUT):
            return True
    except OSError:
        return False


@contextmanager
def _quiet_fastembed() -> Iterator[None]:
    """Mute fastembed's own (loguru) error lines while loading: a failure is logged once, here."""
    try:
        from loguru import logger
    except ImportError:  # a fastembed without loguru
        yield
        return
    logger.disable("fastembed")
    try:
        yield
    finally:
        logger.enable("fastembed")


def record_text(record: Record, project: str | None = None) -> str:
    """The text embedded for a record: ``[type] [date] [project] title — body``."""
    label = project or record.project_id
    return f"[{record.type}] [{record.valid_from[:10]}] [{label}] {record.title} — {record.body}"


def uses_vec(store: Store) -> bool:
    """True when this store's connection has sqlite-vec (vectors in ``records_vec``)."""
    return bool(store.capabilities.vec_version)


async def embed_pending(store: Store, embedder: Embedder, *, limit: int | None = None) -> int:
    """Embed every record flagged ``pending_embedding`` (at most ``limit``); return how many.

    The stored vectors must be ``embedder``'s (:func:`agentctx.reembed.prepare` makes them so;
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
    while limit is None or done < limit:
        size = BATCH_SIZE if limit is None else min(BATCH_SIZE, limit - done)
        rows = await store.rows(
            "SELECT r.*, p.name AS project_name FROM records r "
            "LEFT JOIN projects p ON p.project_id = r.project_id "
            "WHERE r.pending_embedding = 1 AND r.seq > ? ORDER BY r.seq LIMIT ?",
            (last_seq, size),
        )
        if not rows:
            break
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
    query = _normalize(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
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
        vectors.update(zip(ids, _normalize(flat.reshape(len(ids), -1)), strict=True))
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
    matrix = _normalize(np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]))
    sims = matrix @ query
    top = np.argsort(-sims, kind="stable")[:k]
    return [(ids[i], float(sims[i])) for i in top]


def _normalize(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(matrix / norms, dtype=np.float32)
