"""The hook latency benchmark's meaning phase (issue 25): UserPromptSubmit with a real server.

``benchmarks/hooks.py`` times every hook with no MCP server first (the keyword path, as before);
then this module gives the store vectors, starts a real ``agentctx mcp`` (its stdio handshake done
by hand: ``initialize``, ``tools/list``), waits until its socket answers with the model loaded, and
times ``python -c pass`` and UserPromptSubmit in interleaved rounds again, now with the meaning path
on. It also reads the server's resident memory (``VmRSS``, ``VmHWM`` of ``/proc/<pid>/status``)
and, untimed, how many prompts got the server's answer within the hook's deadline.

The vectors: embedding 100K records with the model takes longer than the benchmark may, so the
records matching the prompt's terms (the keyword candidates, up to :data:`EMBEDDED` with a random
sample of the rest) are embedded with the offline all-MiniLM-L6-v2 for real, and every other record
gets one of those vectors with Gaussian noise (normalized). Which record holds which vector does not
change what the hook or the server does per prompt: the index's size and the scan are the same.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import minilm
from agentctx.core import clock, db, meaning, plan, search, vectors
from agentctx.embeddings import models

EMBEDDED = 500
NOISE = 0.35
READY_WAIT = 600.0


def add_vectors(db_path: str, prompt: str, model_dir: Path, seed: int) -> tuple[int, float]:
    """Give every current and superseded record a vector; (records embedded for real, seconds)."""
    began = time.perf_counter()
    model = models.load_model(minilm.settings(model_dir))
    if model is None:
        raise SystemExit("the offline MiniLM did not load")
    conn, caps = db.connect(db_path, create=False)
    try:
        if not caps.vec_version:
            raise SystemExit(f"sqlite-vec does not load here: {caps.vec_error}")
        terms = search.query_terms(prompt)
        query = search.fts_query(terms)
        matched = [
            int(r[0])
            for r in conn.execute(
                "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rank LIMIT ?",
                (query, EMBEDDED),
            )
        ]
        everyone = [int(r[0]) for r in conn.execute("SELECT seq FROM records ORDER BY seq")]
        rng = random.Random(seed)
        others = [s for s in rng.sample(everyone, min(len(everyone), EMBEDDED)) if s not in matched]
        chosen = (matched + others)[:EMBEDDED]
        texts: dict[int, str] = {}
        for seq, kind, title, body in conn.execute(
            f"SELECT seq, type, title, body FROM records WHERE seq IN ({','.join('?' * len(chosen))})",
            chosen,
        ):
            texts[int(seq)] = f"[{kind}] {title} — {body}"[:600]  # the model reads ~256 tokens
        order = sorted(texts)
        real = model.embed_sync([texts[s] for s in order])
        by_seq = dict(zip(order, real, strict=True))
        conn.execute("BEGIN IMMEDIATE")
        plan.run(conn, vectors.guard(model.name, model.dims))
        plan.run(conn, vectors.settle(model.name, model.dims, vec=True, now=clock.now()))
        gen = np.random.default_rng(seed)
        batch: list[tuple[str, bytes]] = []
        for seq, record_id in conn.execute("SELECT seq, id FROM records").fetchall():
            vector = by_seq.get(int(seq))
            if vector is None:
                base = real[int(gen.integers(len(real)))]
                vector = base + gen.normal(0, NOISE / np.sqrt(base.shape[0]), base.shape[0])
                vector = vector / np.linalg.norm(vector)
            batch.append((str(record_id), np.asarray(vector, dtype=np.float32).tobytes()))
            if len(batch) >= 4096:
                conn.executemany(
                    "INSERT INTO records_vec(record_id, embedding) VALUES (?, ?)", batch
                )
                batch.clear()
        if batch:
            conn.executemany("INSERT INTO records_vec(record_id, embedding) VALUES (?, ?)", batch)
        conn.execute("UPDATE records SET pending_embedding = 0")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return len(order), time.perf_counter() - began


class Server:
    """A real ``agentctx mcp`` for the project, its handshake done, its socket answering."""

    def __init__(self, exe: str, env: dict[str, str], project: Path) -> None:
        self.err = tempfile.TemporaryFile()  # noqa: SIM115  # closed by stop()
        self.proc = subprocess.Popen(
            [exe, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env={**env, "CLAUDE_PROJECT_DIR": str(project), "HF_HUB_OFFLINE": "1"},
            cwd=project,
        )
        self.began = time.monotonic()
        self._send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})  # fmt: skip
        self._read(1)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        self._read(2)
        self.listed = time.monotonic() - self.began

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _read(self, wanted: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.err.seek(0)
                raise SystemExit(f"agentctx mcp ended: {self.err.read()[-2000:]!r}")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == wanted:
                return message

    def wait_ready(self, home: Path) -> float:
        """Until the socket answers with the model loaded and the index built: seconds since start."""
        saved = os.environ.get("AGENTCTX_HOME")
        os.environ["AGENTCTX_HOME"] = str(home)
        try:
            while True:
                pending = meaning.ask("warm up", "none")
                if pending is not None and pending.hits(time.monotonic() + 30) is not None:
                    return time.monotonic() - self.began
                if time.monotonic() - self.began > READY_WAIT or self.proc.poll() is not None:
                    self.err.seek(0)
                    raise SystemExit(
                        f"the server's socket never got ready: {self.err.read()[-2000:]!r}"
                    )
                time.sleep(0.25)
        finally:
            if saved is None:
                del os.environ["AGENTCTX_HOME"]
            else:
                os.environ["AGENTCTX_HOME"] = saved

    def memory_mib(self) -> tuple[float, float]:
        """The server's resident set now and its peak (MiB)."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = {
            line.split(":")[0]: int(line.split()[1]) / 1024
            for line in status.splitlines()
            if line.startswith(("VmRSS", "VmHWM"))
        }
        return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)

    def stop(self) -> None:
        """Close stdin (the client leaves) and wait for the server to end."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
