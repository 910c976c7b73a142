"""The MCP server lends its warm embedding model to the prompt hook over a Unix socket (issue 25).

Claude Code keeps one ``agentctx mcp`` per session; it loads the embedding model for ``ctx_search``
anyway. Once ``tools/list`` is answered (never before: ADR-008), :func:`serve` starts the model's
background load and listens on ``<home>/run/embed-<pid>.sock`` (the protocol and the hook's client:
:mod:`agentctx.core.meaning`). Each request is answered with the prompt's nearest current records of
the project and the global ones, with their cosines; the hook fuses them with its keyword
candidates under the core's rules (:mod:`agentctx.core.tiers`), which check every id again against
the store (scope, current, not shown yet). The socket is served by one plain thread
(:meth:`Lender.serve_forever`), not the MCP server's event loop: an answer costs no hop between
threads, and the loop never waits for it.

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
when the store changes (``PRAGMA data_version``), no sooner than :data:`REBUILD_SPACING` times the
last rebuild's length after it; meanwhile the old one answers.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.core import home, meaning, plan, vectors
from agentctx.core.schema import GLOBAL_PROJECT_ID
from agentctx.embeddings import session

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from numpy.typing import NDArray

    from agentctx.embeddings.models import Embedder
    from agentctx.retrieval.hybrid import QueryModel

log = logging.getLogger("agentctx.mcp")

READ_TIMEOUT = 2.0
#: How often the lending thread looks whether the server is ending (seconds).
_STOP_POLL = 0.25
#: Set (to anything) to log the time of every answer (never the prompt).
DEBUG_ENV = "AGENTCTX_DEBUG"
#: Above this many rows, the sign bits narrow the search to :data:`PREFILTER` rows first (an exact
#: scan of 9,000 int8 rows took 36 ms under load, the narrowing 0.4 ms, same neighbours).
EXACT_MAX = 2_000
PREFILTER = 1_000
#: The prompt's cosine spread (:meth:`VectorIndex.spread`) is read from at most this many rows of
#: the scope, evenly spaced: enough for a mean and a deviation to about 0.01.
SPREAD_ROWS = 512
#: The longest socket path (bytes): ``sun_path`` holds 108 on Linux, 104 on macOS, with its NUL.
MAX_PATH = 107 if sys.platform.startswith("linux") else 103
_BATCH = 2048
#: After a rebuild, the next one in the background waits this many times its length (at least
#: :data:`REBUILD_GAP_MIN` seconds): captures write the store between most prompts, and a rebuild
#: after every answer took 7-11 s of a core at 100K records, beside the hooks. At most a tenth of
#: a core goes to rebuilds; a record stays out of the meaning answers that long at most (the
#: keyword path finds it meanwhile).
REBUILD_SPACING = 10.0
REBUILD_GAP_MIN = 1.0


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
    and each row's project (an index into ``projects``).

    The sign bits are kept transposed, as ``words`` × rows of uint64 (384 dimensions: 6 rows of
    words), so the Hamming distance of every record to the query is a handful of whole-array
    ``xor`` and ``bitwise_count`` passes (under a millisecond at 100K records) rather than a
    per-record reduction.
    """

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.projects: list[str] = []
        self.rows: NDArray[np.int8] = np.zeros((0, 0), dtype=np.int8)
        self.scales: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self.bits: NDArray[np.uint64] = np.zeros((0, 0), dtype=np.uint64)
        self.owner: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.model: str | None = None
        #: per project id: the rows in scope (None: all of them), built on first use
        self._scopes: dict[str, NDArray[np.intp] | None] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def load(cls, conn: Any, vec: bool) -> VectorIndex:
        """The index of the store on ``conn`` (sqlite-vec's table when ``vec``, else the BLOBs).

        Read and quantized :data:`_BATCH` rows at a time, whole-array: no float32 matrix of the
        store is ever held, and the Python work per record is one tuple, so a rebuild in the
        background holds the GIL in short slices and the requests' embedding is not held up.
        """
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
        cursor = conn.execute(f"SELECT v.record_id, v.embedding, r.project_id {select}")
        loaded = cls.from_rows(iter(lambda: cursor.fetchmany(_BATCH), []), total)
        loaded.model = index.model
        return loaded

    @classmethod
    def from_rows(cls, batches: Iterable[Sequence[Any]], total: int) -> VectorIndex:
        """The index of at most ``total`` rows ``(record id, float32 vector BLOB, project id)``,
        given in batches (a BLOB of another size than the first is skipped)."""
        index = cls()
        dims = 0
        words = 0
        codes: dict[str, int] = {}
        filled = 0
        bits = np.zeros((0, 0), dtype=np.uint8)
        for batch in batches:
            if filled >= total:
                break
            if not dims:
                first = next((len(b[1]) for b in batch if b[1] and not len(b[1]) % 4), 0)
                if not first:
                    continue
                dims = first // 4
                words = (dims + 63) // 64
                index.rows = np.zeros((total, dims), dtype=np.int8)
                index.scales = np.zeros(total, dtype=np.float32)
                bits = np.zeros((total, 8 * words), dtype=np.uint8)
                index.owner = np.zeros(total, dtype=np.int32)
            # another size, or rows committed since the count: left to the next rebuild
            kept = [b for b in batch if b[1] and len(b[1]) == 4 * dims][: total - filled]
            if not kept:
                continue
            block = np.frombuffer(b"".join(b[1] for b in kept), dtype=np.float32).reshape(-1, dims)
            norms = np.linalg.norm(block, axis=1)
            norms[norms == 0] = 1.0
            unit = block / norms[:, None]
            peaks = np.abs(unit).max(axis=1)
            peaks[peaks == 0] = 1.0
            end = filled + len(kept)
            index.rows[filled:end] = np.round(unit * (127.0 / peaks)[:, None]).astype(np.int8)
            index.scales[filled:end] = peaks / 127.0
            bits[filled:end, : (dims + 7) // 8] = np.packbits(unit > 0, axis=1)
            index.owner[filled:end] = [codes.setdefault(str(b[2]), len(codes)) for b in kept]
            index.ids.extend(str(b[0]) for b in kept)
            filled = end
        index.projects = list(codes)
        index.rows = index.rows[:filled]
        index.scales = index.scales[:filled]
        index.owner = index.owner[:filled]
        if words:
            index.bits = np.ascontiguousarray(bits[:filled].view(np.uint64).T)
        return index

    def scope(self, project_id: str) -> NDArray[np.intp] | None:
        """The rows of the project and the global records (None: every row), cached per project."""
        if project_id not in self._scopes:
            wanted = [
                i for i, p in enumerate(self.projects) if p in (project_id, GLOBAL_PROJECT_ID)
            ]
            if len(wanted) == len(self.projects):
                self._scopes[project_id] = None
            else:
                self._scopes[project_id] = np.flatnonzero(np.isin(self.owner, wanted))
        return self._scopes[project_id]

    def hamming(self, query: NDArray[np.float32]) -> NDArray[np.uint16]:
        """The Hamming distance of every row's sign bits to the query's."""
        packed = np.zeros(8 * self.bits.shape[0], dtype=np.uint8)
        signs = np.packbits(query > 0)
        packed[: signs.size] = signs
        mine = packed.view(np.uint64)
        distance = np.zeros(self.bits.shape[1], dtype=np.uint16)
        for word in range(self.bits.shape[0]):
            distance += np.bitwise_count(self.bits[word] ^ mine[word])
        return distance

    @staticmethod
    def closest(distance: NDArray[np.uint16]) -> NDArray[np.intp]:
        """The rows within the smallest distance that takes :data:`PREFILTER` of them, ties
        included (a count of the distances, cheaper than a partition); a partition when the ties
        would take more than twice as many."""
        counts = np.cumsum(np.bincount(distance))
        cut = int(np.searchsorted(counts, PREFILTER))
        if counts[min(cut, counts.size - 1)] <= 2 * PREFILTER:
            return np.flatnonzero(distance <= cut)
        return np.argpartition(distance, PREFILTER)[:PREFILTER]

    def nearest(
        self, vector: NDArray[np.float32], project_id: str, k: int
    ) -> list[tuple[str, float]]:
        """The ``k`` rows of the project and the global records nearest ``vector`` (cosine)."""
        if not self.ids:
            return []
        query = np.asarray(vector, dtype=np.float32)
        query = query / (float(np.linalg.norm(query)) or 1.0)
        if query.shape[0] != self.rows.shape[1]:
            return []
        rows = self.scope(project_id)
        if rows is not None and rows.size == 0:
            return []
        count = len(self.ids) if rows is None else rows.size
        if count > EXACT_MAX:
            distance = self.hamming(query)
            if rows is not None:
                distance = distance[rows]
            near = self.closest(distance)
            rows = near if rows is None else rows[near]
        elif rows is None:
            rows = np.arange(count)
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

    def spread(self, vector: NDArray[np.float32], project_id: str) -> tuple[float, float] | None:
        """The mean and standard deviation of the cosines of ``vector`` to the project's and the
        global records (at most :data:`SPREAD_ROWS` of them, evenly spaced, when there are more):
        the prompt's own scale, against which the tiers read a cosine. None without rows."""
        if not self.ids:
            return None
        query = np.asarray(vector, dtype=np.float32)
        query = query / (float(np.linalg.norm(query)) or 1.0)
        if query.shape[0] != self.rows.shape[1]:
            return None
        rows = self.scope(project_id)
        count = len(self.ids) if rows is None else rows.size
        if count < 2:
            return None
        picked = np.linspace(0, count - 1, min(count, SPREAD_ROWS)).astype(np.intp)
        if rows is not None:
            picked = rows[picked]
        scores = (self.rows[picked].astype(np.float32) @ query) * self.scales[picked]
        return float(scores.mean()), float(scores.std())


class Lender:
    """What the socket answers with: the server's query model and an index of the store."""

    def __init__(self, model: QueryModel, db_path: str) -> None:
        self.model = model
        self.db_path = db_path
        self.index: VectorIndex | None = None
        self._conn: Any = None
        self._version: int | None = None
        self._rebuilding = False
        #: ``time.monotonic()`` before which no rebuild starts in the background
        self._next_build = 0.0
        self._lock = threading.Lock()

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
            if not wait and self.index is not None and time.monotonic() < self._next_build:
                return  # changed, but rebuilt only a moment ago: a later answer rebuilds it
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
            took = time.monotonic() - began
            self._next_build = time.monotonic() + max(REBUILD_GAP_MIN, REBUILD_SPACING * took)
            session.release_freed()  # the build's blocks and the index it replaced
            log.info("agentctx: vector index of %d records built in %.2f s", len(index), took)
        except Exception as exc:  # the socket then answers without neighbours
            log.warning("agentctx: the vector index failed (%s: %s)", type(exc).__name__, exc)
        finally:
            self._rebuilding = False

    def neighbours(
        self,
        embedder: Embedder,
        text: str,
        project_id: str,
        k: int,
        spent: list[float] | None = None,
    ) -> meaning.Neighbours:
        """The prompt's nearest current records, with the spread of its cosines (``spread``).
        ``spent`` gets the seconds of the embedding and of the search, for the debug log."""
        index = self.index
        if index is None or (index.model is not None and index.model != embedder.name):
            return meaning.Neighbours()  # another model's vectors must not be compared
        began = time.perf_counter()
        vector = embedder.embed_sync([embedder.query_prefix + text])[0]
        embedded = time.perf_counter()
        hits = meaning.Neighbours(index.nearest(vector, project_id, k))
        hits.spread = index.spread(vector, project_id)
        if spent is not None:
            spent += [embedded - began, time.perf_counter() - embedded]
        return hits

    def answer(self, line: bytes, spent: list[float] | None = None) -> bytes:
        """The answer line to one request line (``spent``: see :meth:`neighbours`)."""
        try:
            text, project_id, k = meaning.parse_request(line.rstrip(b"\n"))
        except (ValueError, UnicodeDecodeError):
            return meaning.answer_line("error")
        embedder = self.model.get()
        if embedder is None:  # its load was asked for at start (prepare)
            return meaning.answer_line("off" if self.model.state == "off" else "loading")
        if self.index is None:
            return meaning.answer_line("loading")
        hits = self.neighbours(embedder, text, project_id, k, spent)
        return meaning.answer_line("ready", embedder.name, hits, hits.spread)

    def handle(self, conn: socket.socket) -> None:
        """Read one request from ``conn``, answer it, then check the store for changes (the
        ``data_version`` check is off the prompt's path: this answer used the index as it was,
        the next ones get the new one once it is built)."""
        if not same_user(conn):
            return
        until = time.monotonic() + READ_TIMEOUT
        line = b""
        while not line.endswith(b"\n") and len(line) <= meaning.MAX_REQUEST:
            left = until - time.monotonic()
            if left <= 0:
                return
            conn.settimeout(left)
            chunk = conn.recv(meaning.MAX_REQUEST + 1)
            if not chunk:
                return
            line += chunk
        if not line.endswith(b"\n") or _gone(conn):
            return  # cut short, too long, or the hook gave up already: no embedding for nobody
        read = time.perf_counter()
        spent: list[float] = []
        conn.settimeout(READ_TIMEOUT)
        conn.sendall(self.answer(line, spent))
        if os.environ.get(DEBUG_ENV):
            # no prompt text: the timings only (embedding, search, the rest: parsing and sending)
            total = time.perf_counter() - read
            embed, search = [*spent, 0.0, 0.0][:2]
            log.info(
                "agentctx: lent an answer in %.1f ms (embedding %.1f, search %.1f, rest %.1f)",
                1000 * total, 1000 * embed, 1000 * search, 1000 * (total - embed - search),
            )  # fmt: skip
        if self.index is not None:
            self.refresh(wait=False)

    def serve_forever(self, listener: socket.socket, stop: threading.Event) -> None:
        """Answer the socket's connections one at a time, in this thread, until ``stop``.

        One plain thread, no event loop: a request costs no hop between the loop and a worker
        thread, each a wait for the scheduler on a busy machine, and the MCP server's loop never
        waits for it. Prompts of one session come one at a time; a second one waits in the
        backlog (its hook's deadline bounds the wait).
        """
        listener.settimeout(_STOP_POLL)
        while not stop.is_set():
            try:
                conn, _address = listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if not stop.is_set():
                    log.warning("agentctx: the embedding socket stopped (%s)", exc)
                return
            try:
                with conn:
                    self.handle(conn)
            except OSError:
                continue  # the hook gave up (its deadline passed): nothing to answer
            except Exception as exc:  # a bug must not end the lending for the session
                log.warning("agentctx: a lent answer failed (%s: %s)", type(exc).__name__, exc)

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


def _gone(conn: socket.socket) -> bool:
    """Whether the peer closed its end already (a hook past its deadline)."""
    try:
        conn.setblocking(False)
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


async def serve(model: QueryModel, db_path: str, *, ready: anyio.Event | None = None) -> None:
    """Serve the socket until cancelled; start the model's load. Never raises: a socket that
    cannot be served leaves the hook keyword-only (one log line)."""
    lender = Lender(model, db_path)
    if os.environ.get(DEBUG_ENV):
        log.setLevel(logging.INFO)  # the answers' timings and the index builds, on stderr
    try:
        path = socket_path()
        await anyio.to_thread.run_sync(_make_room, path)
        listener = await anyio.to_thread.run_sync(_listen, path)
    except Exception as exc:
        log.warning("agentctx: the prompt hook's embedding socket is off (%s)", exc)
        if ready is not None:
            ready.set()
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=lender.serve_forever, args=(listener, stop), name="agentctx-lend", daemon=True
    )
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lender.prepare)
            thread.start()
            if ready is not None:
                ready.set()
            await anyio.sleep_forever()
    finally:
        stop.set()
        with anyio.CancelScope(shield=True):
            if thread.is_alive():
                await anyio.to_thread.run_sync(thread.join, 5 * _STOP_POLL)
            listener.close()
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


def _listen(path: str) -> socket.socket:
    """A listening Unix socket at ``path``, 0600 (its folder is 0700). Blocking: a worker thread."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(16)
    except OSError:
        listener.close()
        raise
    return listener


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
