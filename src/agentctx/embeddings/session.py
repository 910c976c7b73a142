"""ONNX Runtime's session settings for memory, and freed memory handed back (issue 25).

fastembed makes its own ``onnxruntime.SessionOptions`` when it loads a model and exposes only the
CPU arena of it; :func:`lean_sessions` makes the options it creates meanwhile carry
:data:`ATTRIBUTES` and :data:`CONFIG_ENTRIES` too (the previous factory is called first, so a
second such wrapper composes with this one). Measured in docs/retrieval.md, "A lighter model":

- ``enable_mem_pattern`` off: ONNX Runtime plans and keeps a memory pattern per input shape; a
  model fed batches of texts of many lengths (consolidation, 16 texts padded to the longest)
  grows by one per shape. Off, the peak after embedding 128 records falls by about 100 MB, with
  nothing lost at load and vectors unchanged (bit for bit).
- ``session.disable_prepacking``: fp32 MatMul kernels otherwise keep a prepacked copy of the
  weights (14 MB for MiniLM). Kept on for the int8 variant (``keep_prepacking``): its
  ``MatMulNBits`` then packs its weights at every call, one prompt took 4 times as long.

:func:`release_freed` asks glibc to hand the heap's free pages back to the system
(``malloc_trim(0)``): a model's load reads and parses its whole file, and those pages stay
resident once freed unless the heap is trimmed. A no-op elsewhere than glibc.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

#: ``SessionOptions`` attributes set on every session loaded through fastembed.
ATTRIBUTES: dict[str, Any] = {"enable_mem_pattern": False}
#: ``SessionOptions.add_session_config_entry`` entries set on every such session.
CONFIG_ENTRIES: dict[str, str] = {"session.disable_prepacking": "1"}

_lock = threading.Lock()


def configure(options: Any, *, keep_prepacking: bool = False) -> Any:
    """``options`` (an ``onnxruntime.SessionOptions``) with :data:`ATTRIBUTES` and
    :data:`CONFIG_ENTRIES` set (but prepacking when ``keep_prepacking``); returned."""
    for name, value in ATTRIBUTES.items():
        setattr(options, name, value)
    for key, value in CONFIG_ENTRIES.items():
        if not (keep_prepacking and key == "session.disable_prepacking"):
            options.add_session_config_entry(key, value)
    return options


@contextmanager
def lean_sessions(*, keep_prepacking: bool = False) -> Iterator[None]:
    """While entered, the ``onnxruntime.SessionOptions()`` that fastembed makes are configured
    (:func:`configure`). One load at a time per process (a lock)."""
    import importlib

    ort: Any = importlib.import_module("onnxruntime")  # fastembed's runtime (no type stubs)
    with _lock:
        previous = ort.SessionOptions

        def lean() -> Any:
            return configure(previous(), keep_prepacking=keep_prepacking)

        ort.SessionOptions = lean
        try:
            yield
        finally:
            ort.SessionOptions = previous


def release_freed() -> bool:
    """Hand the free pages of the C heap back to the system (glibc's ``malloc_trim(0)``); True
    when it could be asked. ``libc.so.6`` by its soname: ``ctypes.util.find_library`` would run
    ``ldconfig`` in a child process (a fork of the server) at every call."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


_trim: list[Any] = []


def _malloc_trim() -> Any:
    if not _trim:
        found = None
        if sys.platform.startswith("linux"):
            try:
                found = ctypes.CDLL("libc.so.6").malloc_trim
                found.argtypes = [ctypes.c_size_t]
                found.restype = ctypes.c_int
            except (OSError, AttributeError):  # musl and others: no malloc_trim
                found = None
        _trim.append(found)
    return _trim[0]
