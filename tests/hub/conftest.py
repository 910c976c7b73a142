"""A real PostgreSQL for the team hub tests, started once per run (``nox -s hub``).

The server binaries are Debian's (``pg_config --bindir``, or ``AGENTCTX_PGBIN``); the noxfile's
``hub`` session installs them as root when missing, else stops with the ``apt-get`` line, and a
test run without them fails here with the same line (never a silent skip). ``initdb`` refuses to
run as root, so as root the cluster is made and started as the ``postgres`` user, in a temporary
folder it owns, on a unix socket folder and 127.0.0.1 at a free port, with ``fsync`` off (the
tests' data need not survive a power cut). Every test gets its own database with the hub schema
applied by the real ``agentctx team hub-init`` code; login roles are cluster-wide and made once.

Every test in this folder is marked ``hub`` (pyproject's addopts deselects it from the fast set).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

INSTALL = "sudo apt-get install postgresql"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder ``hub`` (before ``-m`` selects; pyproject registers it)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.hub)


def pg_bindir() -> str | None:
    """The folder of ``initdb`` and ``pg_ctl``: AGENTCTX_PGBIN, pg_config's, or Debian's newest."""
    candidates = []
    if os.environ.get("AGENTCTX_PGBIN"):
        candidates.append(os.environ["AGENTCTX_PGBIN"])
    if shutil.which("pg_config"):
        done = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=False
        )
        candidates.append(done.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if shutil.which("initdb"):
        candidates.append(str(Path(shutil.which("initdb") or "").parent))
    for folder in candidates:
        if folder and os.access(os.path.join(folder, "initdb"), os.X_OK):
            return folder
    return None


def held_port() -> socket.socket:
    """A TCP port on 127.0.0.1 held for the server's life: bound with ``SO_REUSEADDR`` and never
    listening, so PostgreSQL (which binds with ``SO_REUSEADDR`` too) can listen on it, at every
    restart of the hub-down tests, while no other process can take it meanwhile (a port probed
    and freed could be, between the probe and the server's start)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class Server:
    """A running PostgreSQL: its socket folder, port and superuser."""

    bindir: str
    folder: str
    sockets: str
    port: int
    as_postgres: bool
    #: the port's holder (:func:`held_port`), closed when the server is stopped for good
    holder: socket.socket | None = None

    def dsn(self, user: str = "postgres", dbname: str = "postgres") -> str:
        """A DSN over the unix socket (trust authentication: no password)."""
        return f"host={self.sockets} port={self.port} user={user} dbname={dbname}"

    def tcp_dsn(self, user: str = "postgres", dbname: str = "postgres") -> str:
        """A DSN over TCP on 127.0.0.1."""
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname}"

    def admin(self, sql: str, dbname: str = "postgres") -> None:
        """Run SQL as the superuser (autocommit)."""
        with psycopg.connect(self.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute(sql)

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A server binary, as the postgres user when the tests run as root."""
        command = [os.path.join(self.bindir, argv[0]), *argv[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def ctl(self, action: str) -> None:
        """``pg_ctl start|stop`` for the hub-down tests."""
        data = os.path.join(self.folder, "data")
        if action == "start":
            opts = (
                f"-k {self.sockets} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=60"
            )
            self.run(
                "pg_ctl",
                "-D",
                data,
                "-l",
                os.path.join(self.folder, "log", "pg.log"),
                "-w",
                "-t",
                "60",
                "start",
                "-o",
                opts,
            )
        else:
            self.run("pg_ctl", "-D", data, "-w", "-t", "60", "-m", "fast", "stop")


def start_server() -> Server:
    """initdb and start a cluster in a new temporary folder (as ``postgres`` when root)."""
    bindir = pg_bindir()
    if bindir is None:
        raise RuntimeError(f"PostgreSQL's server binaries are missing: run `{INSTALL}`")
    as_postgres = hasattr(os, "geteuid") and os.geteuid() == 0
    folder = tempfile.mkdtemp(prefix="agentctx-pg-")
    for sub in ("data", "sock", "log"):
        os.mkdir(os.path.join(folder, sub), 0o700)
    if as_postgres:
        os.chmod(folder, 0o755)
        for path in (folder, *(os.path.join(folder, s) for s in ("data", "sock", "log"))):
            shutil.chown(path, "postgres", "postgres")
    holder = held_port()
    port = int(holder.getsockname()[1])
    server = Server(bindir, folder, os.path.join(folder, "sock"), port, as_postgres, holder)
    try:
        server.run(
            "initdb",
            "-D",
            os.path.join(folder, "data"),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        )
        server.ctl("start")
        server.admin(
            "DO $$ DECLARE r text; BEGIN FOREACH r IN ARRAY "
            "ARRAY['alice', 'bob', 'carol', 'dave', 'eve', 'hubadmin'] LOOP "
            "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN "
            "EXECUTE format('CREATE ROLE %I LOGIN', r); END IF; END LOOP; END $$"
        )
        server.admin("ALTER ROLE hubadmin CREATEROLE CREATEDB")
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: Server) -> None:
    """Stop the cluster at once and remove its folder."""
    server.run(
        "pg_ctl", "-D", os.path.join(server.folder, "data"), "-m", "immediate", "stop", check=False
    )
    shutil.rmtree(server.folder, ignore_errors=True)
    if server.holder is not None:
        server.holder.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """A PostgreSQL cluster for the run, stopped and removed at the end."""
    if pg_bindir() is None:
        pytest.fail(
            f"the hub tests need PostgreSQL's server binaries: run `{INSTALL}` (or nox -s hub)"
        )
    server = start_server()
    try:
        yield server
    finally:
        stop_server(server)


_numbers = itertools.count()


@pytest.fixture
def hub_db(pg_server: Server) -> Iterator[str]:
    """A fresh, empty database for one test (its name); dropped afterwards."""
    name = f"hub_{os.getpid()}_{next(_numbers)}"
    pg_server.admin(f"CREATE DATABASE {name} OWNER hubadmin")
    try:
        yield name
    finally:
        pg_server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
