"""The MCP server lends its warm embedding model to the prompt hook over a Unix socket (issue 25).

Claude Code keeps one ``agentctx mcp`` per session; it loads the embedding model for ``ctx_search``
anyway. Once ``tools/list`` is answered (never before: ADR-008), :func:`serve` starts the model's
background load and listens on ``<home>/run/embed-<pid>.sock`` (the protocol and the hook's client:
:mod:`agentctx.core.meaning`). Each request is answered with the prompt's nearest current records of
the project and the global ones, with their cosines; the hook fuses them with its keyword
candidates under the core's rules (:mod:`agentctx.core.tiers`), which check every id again against
the store (scope, current, not shown yet).

Safety: the folder is made 0700 and checked (a directory of this user, not a symlink) before the
socket is bound in it, the socket is 0600, and a peer of another user is refused (``SO_PEERCRED``
where the platform has it). Requests are bounded (:data:`~agentctx.core.meaning.MAX_REQUEST`, one
line, read within :data:`READ_TIMEOUT`). The socket is removed when the server ends, cancelled or
not; a server killed outright leaves it behind, and the next server removes the sockets of dead
pids.

The neighbours: the server holds the current records' vectors as int8 rows with a scale each
(:class:`VectorIndex`: 384 bytes a record, 38 MB at 100K; no float32 matrix) plus their sign bits.
A small store is scanned exactly; a large one is narrowed first by the Hamming distance of the sign
bits, then the :data:`PREFILTER` nearest are scored exactly. The index is rebuilt in the background
when the store changes (``PRAGMA data_version``); meanwhile the old one answers.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
from anyio.abc import SocketAttribute

from agentctx.core import home, meaning, plan, vectors
from agentctx.core.schema import GLOBAL_PROJECT_ID

if TYPE_CHECKING:
    from anyio.abc import SocketStream
    from numpy.typing import NDArray

    from agentctx.embeddings.models import Embedder
    from agentctx.retrieval.hybrid import QueryModel

log = logging.getLogger("agentctx.mcp")

READ_TIMEOUT = 2.0
#: Above this many rows, the sign bits narrow the search to :data:`PREFILTER` rows first.
EXACT_MAX = 20_000
PREFILTER = 1_000
#: The longest socket path (bytes): ``sun_path`` holds 108 on Linux, 104 on macOS, with its NUL.
MAX_PATH = 107 if sys.platform.startswith("linux") else 103
_BATCH = 2048


def socket_path(pid: int | None = None) -> str:
    """This process's socket path."""
    return os.path.join(meaning.run_dir(), meaning.socket_name(pid or os.getpid()))


def prepare_dir() -> str:
    """The run folder, made 0700 if missing; OSError when it is not a private folder of ours."""
    folder = meaning.run_dir()
    home.ensure_sub(meaning.RUN_DIR)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{folder} is not a folder of this user")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def clean_stale(folder: str) -> list[str]:
    """Remove the sockets of server processes that no longer run; their names."""
    removed = []
    for name in os.listdir(folder):
        pid = meaning.socket_pid(name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        path = os.path.join(folder, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
                removed.append(name)
        except OSError:
            continue
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: not ours to judge
        return True
    return True


def same_user(sock: Any) -> bool:
    """Whether the peer of a connected Unix socket runs as this user (True where it cannot be
    told: the folder's and the socket's modes then keep others out)."""
    import socket
    import struct

    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return False
    _pid, uid, _gid = struct.unpack("3i", raw)
    return bool(uid == os.getuid())


class VectorIndex:
    """The current records' vectors, compact: int8 rows and a scale each, the sign bits, the ids
    and each row's project (an index into ``projects``)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.projects: list[str] = []
        self.rows: NDArray[np.int8] = np.zeros((0, 0), dtype=np.int8)
        self.scales: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self.bits: NDArray[np.uint8] = np.zeros((0, 0), dtype=np.uint8)
        self.owner: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.model: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def load(cls, conn: Any, vec: bool) -> VectorIndex:
        """The index of the store on ``conn`` (sqlite-vec's table when ``vec``, else the BLOBs)."""
        index = cls()
        space = plan.run(conn, vectors.space())
        index.model = space.model if space is not None else None
        table = "records_vec" if vec else vectors.BLOB_TABLE
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if not exists:
            return index
        select = (
            f"FROM {table} AS v JOIN records AS r ON r.id = v.record_id "
            "WHERE r.superseded_at IS NULL"
        )
        total = int(conn.execute(f"SELECT count(*) {select}").fetchone()[0])
        dims = 0
        codes: dict[str, int] = {}
        filled = 0
        for row in conn.execute(f"SELECT v.record_id, v.embedding, r.project_id {select}"):
            blob = row[1]
            if not blob or len(blob) % 4:
                continue
            vector = np.frombuffer(blob, dtype=np.float32)
            if not dims:
                dims = vector.shape[0]
                index.rows = np.zeros((total, dims), dtype=np.int8)
                index.scales = np.zeros(total, dtype=np.float32)
                index.bits = np.zeros((total, (dims + 7) // 8), dtype=np.uint8)
                index.owner = np.zeros(total, dtype=np.int32)
            if vector.shape[0] != dims or filled >= total:
                continue  # another size, or rows committed since the count: the next rebuild
            norm = float(np.linalg.norm(vector)) or 1.0
            unit = vector / norm
            peak = float(np.abs(unit).max()) or 1.0
            index.rows[filled] = np.round(unit * (127.0 / peak)).astype(np.int8)
            index.scales[filled] = peak / 127.0
            index.bits[filled] = np.packbits(unit > 0)
            index.owner[filled] = codes.setdefault(str(row[2]), len(codes))
            index.ids.append(str(row[0]))
            filled += 1
        index.projects = list(codes)
        index.rows = index.rows[:filled]
        index.scales = index.scales[:filled]
        index.bits = index.bits[:filled]
        index.owner = index.owner[:filled]
        return index

    def nearest(
        self, vector: NDArray[np.float32], project_id: str, k: int
    ) -> list[tuple[str, float]]:
        """The ``k`` rows of the project and the global records nearest ``vector`` (cosine)."""
        if not self.ids:
            return []
        query = np.asarray(vector, dtype=np.float32)
        query = query / (float(np.linalg.norm(query)) or 1.0)
        wanted = [i for i, p in enumerate(self.projects) if p in (project_id, GLOBAL_PROJECT_ID)]
        if not wanted or query.shape[0] != self.rows.shape[1]:
            return []
        mask = np.isin(self.owner, wanted)
        rows = np.flatnonzero(mask)
        if rows.size > EXACT_MAX:
            distance = np.bitwise_count(np.bitwise_xor(self.bits[rows], np.packbits(query > 0)))
            near = np.argpartition(distance.sum(axis=1, dtype=np.int32), PREFILTER)[:PREFILTER]
            rows = rows[near]
        scores = np.empty(rows.size, dtype=np.float32)
        for start in range(0, rows.size, 8192):
            part = rows[start : start + 8192]
            scores[start : start + 8192] = (
                self.rows[part].astype(np.float32) @ query
            ) * self.scales[part]
        take = min(k, rows.size)
        top = np.argpartition(-scores, take - 1)[:take]
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), self.ids[rows[i]]))
        return [(self.ids[rows[i]], float(scores[i])) for i in order]


class Lender:
    """What the socket answers with: the server's query model and an index of the store."""

    def __init__(self, model: QueryModel, db_path: str) -> None:
        self.model = model
        self.db_path = db_path
        self.index: VectorIndex | None = None
        self._conn: Any = None
        self._version: int | None = None
        self._rebuilding = False
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self.waiting = 0

    def _connection(self) -> Any:
        """The connection that watches the store's ``data_version`` (worker threads, locked)."""
        if self._conn is None:
            from agentctx.core import db

            self._conn, _caps = db.connect(
                self.db_path, create=False, readonly=True, load_vec=False, check_same_thread=False
            )
        return self._conn

    def refresh(self, *, wait: bool) -> None:
        """Rebuild the index when the store changed since it was built (in this thread when
        ``wait`` or when there is none yet, else in a background thread)."""
        with self._lock:
            conn = self._connection()
            version = int(conn.execute("PRAGMA data_version").fetchone()[0])
            if self.index is not None and version == self._version:
                return
            if self._rebuilding:
                return
            self._rebuilding = True
            self._version = version
        if wait or self.index is None:
            self._rebuild()
        else:
            threading.Thread(target=self._rebuild, name="agentctx-index", daemon=True).start()

    def _rebuild(self) -> None:
        # its own connection: a rebuild of a large store takes seconds, and the requests' cheap
        # data_version check must not wait for it
        from agentctx.core import db

        try:
            began = time.monotonic()
            conn, caps = db.connect(self.db_path, create=False, readonly=True)
            try:
                conn.execute("BEGIN")  # one snapshot for the count and the rows
                index = VectorIndex.load(conn, bool(caps.vec_version))
                conn.execute("COMMIT")
            finally:
                conn.close()
            self.index = index
            log.info(
                "agentctx: vector index of %d records built in %.2f s",
                len(index),
                time.monotonic() - began,
            )
        except Exception as exc:  # the socket then answers without neighbours
            log.warning("agentctx: the vector index failed (%s: %s)", type(exc).__name__, exc)
        finally:
            self._rebuilding = False

    def neighbours(
        self, embedder: Embedder, text: str, project_id: str, k: int
    ) -> list[tuple[str, float]]:
        """The prompt's nearest current records (blocking: a worker thread)."""
        self.refresh(wait=False)
        index = self.index
        if index is None or (index.model is not None and index.model != embedder.name):
            return []  # another model's vectors must not be compared with this one's
        vector = embedder.embed_sync([embedder.query_prefix + text])[0]
        return index.nearest(vector, project_id, k)

    async def answer(self, line: bytes) -> bytes:
        """The answer line to one request line."""
        try:
            text, project_id, k = meaning.parse_request(line.rstrip(b"\n"))
        except (ValueError, UnicodeDecodeError):
            return meaning.answer_line("error")
        embedder = self.model.get()
        if embedder is None:
            self.model.request()
            return meaning.answer_line("off" if self.model.state == "off" else "loading")
        if self.index is None:
            return meaning.answer_line("loading")
        if self.waiting >= 2:  # a queue of prompts: the later ones would miss their deadline
            return meaning.answer_line("busy")
        self.waiting += 1
        try:
            hits = await anyio.to_thread.run_sync(
                self.neighbours, embedder, text, project_id, k, limiter=self._limiter
            )
        finally:
            self.waiting -= 1
        return meaning.answer_line("ready", embedder.name, hits)

    async def prepare(self) -> None:
        """Load the model, then build the index (both in worker threads)."""
        if await self.model.wait() is None:
            return
        try:
            await anyio.to_thread.run_sync(lambda: self.refresh(wait=True))
        except Exception as exc:
            log.warning("agentctx: no vector index (%s: %s)", type(exc).__name__, exc)

    def close(self) -> None:
        """Close the index's connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def _handle(lender: Lender, stream: SocketStream) -> None:
    async with stream:
        try:
            if not same_user(stream.extra(SocketAttribute.raw_socket)):
                return
            line = b""
            with anyio.move_on_after(READ_TIMEOUT):
                while not line.endswith(b"\n") and len(line) <= meaning.MAX_REQUEST:
                    line += await stream.receive(meaning.MAX_REQUEST + 1)
            if not line.endswith(b"\n"):
                return
            await stream.send(await lender.answer(line))
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return  # the hook gave up (its deadline passed): nothing to answer


async def serve(model: QueryModel, db_path: str, *, ready: anyio.Event | None = None) -> None:
    """Serve the socket until cancelled; start the model's load. Never raises: a socket that
    cannot be served leaves the hook keyword-only (one log line)."""
    lender = Lender(model, db_path)
    try:
        path = socket_path()
        await anyio.to_thread.run_sync(_make_room, path)
        listener = await anyio.create_unix_listener(path, mode=0o600)
    except Exception as exc:
        log.warning("agentctx: the prompt hook's embedding socket is off (%s)", exc)
        if ready is not None:
            ready.set()
        return
    try:
        async with listener, anyio.create_task_group() as tasks:
            tasks.start_soon(lender.prepare)
            if ready is not None:
                ready.set()
            await listener.serve(lambda stream: _handle(lender, stream), task_group=tasks)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, path)
        lender.close()


def _make_room(path: str) -> None:
    """The socket folder ready, stale sockets gone, ``path`` short enough and free (a socket
    left there by a pid reused after a crash is removed). Blocking: run in a worker thread."""
    clean_stale(prepare_dir())
    if len(path.encode()) > MAX_PATH:
        raise OSError(f"the socket path {path} is too long for a Unix socket")
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
