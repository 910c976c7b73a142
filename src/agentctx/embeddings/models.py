"""The embedding model (ADR-006): a fastembed model, loaded once, described, fetched.

The model runs in a worker thread (``anyio.to_thread``), one call at a time, so the event loop stays
free; it is loaded once per process and settings (:func:`load_model` caches it, failures included).
When it cannot load (offline without a local folder, ``embeddings off``), :func:`load_model` logs one
line and returns None: callers then stay keyword-only. all-MiniLM-L6-v2 runs as its int8 variant
with ``embedding.int8`` on (the default; off runs it in fp32; docs/retrieval.md, "Memory"):
derived once from the downloaded or local model by
:mod:`agentctx.embeddings.quantize` into the cache folder, loaded in its place, and named apart
(:data:`INT8_VARIANTS`), so that vectors of the fp32 model are re-embedded, never mixed. A model folder under a name fastembed does
not list loads as a sentence-transformers ONNX export (:func:`register_local`). What is done with the
vectors in the store is :mod:`agentctx.embeddings.vecstore`; a change of model is
:mod:`agentctx.embeddings.reembed`.
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

from agentctx.core import home
from agentctx.embeddings import backoff, session

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from numpy.typing import NDArray

log = logging.getLogger("agentctx.embed")

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: What bge models expect before a search query (never before the passages themselves).
BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
#: Texts per model call, and records per embedding transaction: 16 is as fast as 64 and keeps
#: consolidation's peak memory low (docs/retrieval.md, "A lighter model").
BATCH_SIZE = 16
#: Tokens embedded per text (MiniLM's own limit is 256): a record's first 128 tokens carry its
#: title and the start of its body (docs/retrieval.md, "A lighter model": 1.14× less CPU on the
#: precision eval's tuning texts, calibration-set vectors unchanged).
MAX_TOKENS = 128

#: Models run as an int8 variant (:mod:`agentctx.embeddings.quantize`) when ``embedding.int8`` is
#: on (the default): the model's name -> the variant's, which its vectors and thresholds carry
#: (docs/retrieval.md, "Memory": the MCP server at 188 MiB against 246 at 10K records, cosine
#: 0.9995 to the fp32 model's vectors). Only models whose variant was measured on the eval are listed.
INT8_VARIANTS: dict[str, str] = {DEFAULT_MODEL: DEFAULT_MODEL + ":int8v2"}

_cache: dict[tuple[str, str, str], Embedder | None] = {}
_cache_lock = threading.Lock()
#: ONNX Runtime intra-op threads of the models this process loads from now on; None: its default
#: (one per core, the extra ones spinning while they wait). See :func:`use_one_thread`.
_threads: int | None = None


def use_one_thread() -> None:
    """Load this process's models on one ONNX Runtime thread from now on (ADR-017).

    For a process that embeds one query at a time beside the prompt hook (the MCP server): a second
    intra-op thread, and its spinning, took the hook's core and doubled the query's CPU (one
    MiniLM prompt at load 12: 33-40 ms wall and 17-18 ms CPU with the default, 20-22 and 9-10 with
    one thread). With one intra-op thread ONNX Runtime starts no pool that could spin. Batch
    embedding (consolidation, re-embedding) keeps the default.
    """
    global _threads
    _threads = 1


class Embedder:
    """A loaded embedding model. Sync methods run in the caller's thread; async ones in a worker."""

    def __init__(self, model: Any, name: str, *, query_prefix: str = "") -> None:
        self.model = model
        self.name = name
        self.query_prefix = query_prefix
        self.lock = threading.Lock()  # one model call at a time per model, from any loop or thread
        cap_tokens(model, MAX_TOKENS)
        self.dims = int(self.embed_sync(["dimension probe"]).shape[1])
        session.release_freed()  # the model file's pages, read and parsed at load, freed since

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length float32 vectors, one row per text (blocking: call it from a thread)."""
        if not texts:
            return np.zeros((0, getattr(self, "dims", 0)), dtype=np.float32)
        with self.lock:
            rows = list(self.model.embed(list(texts), batch_size=BATCH_SIZE))
        return normalize(np.asarray(np.stack(rows), dtype=np.float32))

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """:meth:`embed_sync` in a worker thread."""
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    async def embed_query(self, text: str) -> NDArray[np.float32]:
        """One search query's vector (with the model's query prefix, if it has one)."""
        vectors = await self.embed([self.query_prefix + text])
        return np.asarray(vectors[0], dtype=np.float32)


def cap_tokens(model: Any, limit: int) -> bool:
    """Truncate the texts ``model`` (fastembed's ``TextEmbedding``) embeds at ``limit`` tokens, or
    its own limit when lower; True when its tokenizer was found and capped."""
    tokenizer = getattr(getattr(model, "model", None), "tokenizer", None)
    if tokenizer is None or not hasattr(tokenizer, "enable_truncation"):
        return False
    current = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=min(limit, int(current.get("max_length") or limit)),
        direction=current.get("direction", "right"),
    )
    return True


def model_id(settings: Mapping[str, Any]) -> str:
    """The name the configured model's vectors are stored under: its int8 variant's when it has
    one and ``embedding.int8`` is on (what :attr:`Embedder.name` of the loaded model says)."""
    name = str(settings.get("embedding.model") or DEFAULT_MODEL)
    if name not in INT8_VARIANTS:
        return name
    path = str(settings.get("embedding.path") or "")
    if settings.get("embedding.int8", _int8_default()) or (path and _is_variant(path)):
        return INT8_VARIANTS[name]  # a folder holding a derived variant is the variant, whatever
    return name


def _int8_default() -> bool:
    """``embedding.int8``'s default, for settings that do not name it (a mapping of the caller's)."""
    from agentctx.config import SETTINGS

    return bool(SETTINGS["embedding.int8"][1])


def _is_variant(folder: str) -> bool:
    from agentctx.embeddings import quantize

    return quantize.is_variant(folder)


def _variant_of(settings: Mapping[str, Any]) -> bool:
    return model_id(settings) != str(settings.get("embedding.model") or DEFAULT_MODEL)


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
    key = (model_id(settings), path, cache_dir)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = _load(name, path, cache_dir, int8=_variant_of(settings))
        return _cache[key]


async def load_model_async(settings: Mapping[str, Any]) -> Embedder | None:
    """:func:`load_model` in a worker thread."""
    return await anyio.to_thread.run_sync(load_model, settings)


def clear_model_cache() -> None:
    """Forget loaded models (and failures): the next :func:`load_model` tries again."""
    with _cache_lock:
        _cache.clear()


def _load(name: str, path: str, cache_dir: str, *, int8: bool = False) -> Embedder | None:
    where = path or cache_dir
    if path and not os.path.isdir(path):
        log.warning("embeddings off: model folder %s does not exist (keyword-only search)", path)
        return None
    failed = None if path else backoff.waiting(name)
    if failed is not None and not model_info({"embedding.model": name}).present:
        # offline: neither fastembed's import nor a probe of the hub, until the back-off ends
        log.info("embeddings off: %s", failed.note())
        return None
    if int8:
        source = path or _snapshot(name, cache_dir)
        variant = _load_int8(name, source, cache_dir) if source else None
        if variant is not None:
            return variant
    try:
        from fastembed import TextEmbedding

        kwargs: dict[str, Any] = {"model_name": name, "threads": _threads}
        model: Any
        if path:
            kwargs["specific_model_path"] = path
            register_local(name, path)
            with _quiet_fastembed(), session.lean_sessions():
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
        if int8 and not path:  # downloaded just now: the variant is derived from it
            source = _snapshot(name, cache_dir)
            variant = _load_int8(name, source, cache_dir) if source else None
            if variant is not None:
                del model
                return variant
        prefix = BGE_QUERY_PREFIX if "bge-" in name.lower() else ""
        return Embedder(model, name, query_prefix=prefix)
    except Exception as exc:  # offline, corrupt folder, unknown name: keyword-only
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        log.warning("embeddings off: cannot load %s from %s (%s)", name, where, reason)
        return None


def _snapshot(name: str, cache_dir: str) -> str | None:
    """The folder of fastembed's cache that holds ``name``'s downloaded files, if any."""
    repo, model_file, _size = _describe(name)
    if not repo:
        return None
    snapshots = os.path.join(cache_dir, "models--" + repo.replace("/", "--"), "snapshots")
    for rev in sorted(_listdir(snapshots)):
        if os.path.isfile(os.path.join(snapshots, rev, model_file)):
            return os.path.join(snapshots, rev)
    return None


def int8_folder(name: str, source: str, cache_dir: str) -> str:
    """Where the int8 variant of the model in folder ``source`` is (or will be) derived: under
    the cache folder, one folder per source file (:func:`agentctx.embeddings.quantize.source_key`)."""
    from agentctx.embeddings import quantize

    model_file = next(
        (f for f in LOCAL_MODEL_FILES if os.path.isfile(os.path.join(source, f))), "model.onnx"
    )
    key = quantize.source_key(os.path.join(source, model_file))
    slug = name.rsplit("/", 1)[-1].lower()
    return os.path.join(cache_dir, "int8", f"{slug}-{key}")


def _load_int8(name: str, source: str, cache_dir: str) -> Embedder | None:
    """``name``'s int8 variant, derived from the model in ``source`` unless it is already; None
    (logged) when it cannot be derived or loaded: the caller then runs the model as it is."""
    variant = INT8_VARIANTS[name]
    try:
        from fastembed import TextEmbedding

        from agentctx.embeddings import quantize

        model_file = next(
            (f for f in LOCAL_MODEL_FILES if os.path.isfile(os.path.join(source, f))), None
        )
        if model_file is None:
            raise quantize.QuantizeError(f"no model file in {source}")
        folder = source if quantize.is_variant(source) else int8_folder(name, source, cache_dir)
        if not os.path.isfile(os.path.join(folder, quantize.MODEL_FILE)):
            if os.path.commonpath([os.path.abspath(cache_dir), home.home_dir()]) == home.home_dir():
                home.ensure_sub(os.path.relpath(cache_dir, home.home_dir()))
            log.info("deriving the int8 variant of %s into %s (one-time)", name, folder)
            quantize.derive_apart(source, folder, model_file=model_file)
        register_local(variant, folder)
        with _quiet_fastembed(), session.lean_sessions(keep_prepacking=True):
            model = TextEmbedding(model_name=variant, specific_model_path=folder, threads=_threads)
        prefix = BGE_QUERY_PREFIX if "bge-" in name.lower() else ""
        return Embedder(model, variant, query_prefix=prefix)
    except Exception as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        log.warning("int8 variant of %s unavailable, running it as it is (%s)", name, reason)
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
        with _quiet_fastembed(), session.lean_sessions():
            model = factory(**kwargs, local_files_only=True)
    except Exception:  # not in the cache yet
        pass
    else:
        backoff.clear()  # put there by hand, or by another process
        return model
    if not _hub_reachable():
        failed = backoff.record_failure(name, f"{HUB_HOST} cannot be reached")
        log.warning(
            "embeddings off: %s is not in %s and %s cannot be reached to download it "
            "(keyword-only; no new try before %s): %s",
            name,
            cache_dir,
            HUB_HOST,
            failed.next_try(),
            backoff.ADVICE,
        )
        return None
    log.warning("downloading embedding model %s (one-time) into %s", name, cache_dir)
    try:
        with _quiet_fastembed(), session.lean_sessions():
            model = factory(**kwargs)
    except Exception as exc:
        failed = backoff.record_failure(name, f"{type(exc).__name__}: {exc}")
        log.warning("no new download try before %s: %s", failed.next_try(), backoff.ADVICE)
        raise
    backoff.clear()
    return model


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
    if _variant_of(settings):
        source = info.folder if info.local else _snapshot(info.name, info.folder)
        variant = _load_int8(info.name, source, home.sub("models")) if source else None
        if variant is not None:
            return variant
    try:
        from fastembed import TextEmbedding

        kwargs: dict[str, Any] = {"model_name": info.name}
        if info.local:
            kwargs["specific_model_path"] = info.folder
            register_local(info.name, info.folder)
        else:
            kwargs.update(cache_dir=info.folder, local_files_only=True)
        with _quiet_fastembed(), session.lean_sessions():
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
        backoff.record_failure(info.name, f"{HUB_HOST} cannot be reached")
        raise ModelUnavailable(
            f"cannot download {info.name}: {HUB_HOST} cannot be reached (offline?); search "
            "stays keyword-only: retry online, or set embedding.path to a local model folder"
        )
    if announce is not None:
        announce(info)
    os.makedirs(info.folder, mode=0o700, exist_ok=True)
    try:
        from fastembed import TextEmbedding

        with session.lean_sessions():
            model = TextEmbedding(model_name=info.name, cache_dir=info.folder)
    except Exception as exc:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        backoff.record_failure(info.name, reason)
        raise ModelUnavailable(f"cannot download {info.name} ({reason})") from exc
    backoff.clear()
    if os.path.commonpath([os.path.abspath(info.folder), home.home_dir()]) == home.home_dir():
        home.tighten(info.folder)
    clear_model_cache()  # a failure remembered earlier in this process is stale now
    if _variant_of(settings):
        source = _snapshot(info.name, info.folder)
        variant = _load_int8(info.name, source, info.folder) if source else None
        if variant is not None:
            del model
            return variant
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


def normalize(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    """Each row scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(matrix / norms, dtype=np.float32)
