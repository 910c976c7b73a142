"""doctor on a hub with TLS: the certificate verified (verify-full), or only encrypted (require)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import psycopg
import pytest

from tests import helpers
from tests.hub.members import make_team

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.hub.conftest import Server


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def tls(pg_server: Server, tmp_path: Path) -> Iterator[Path]:
    """A CA and a server certificate for localhost; TLS on for the test, off again after."""
    if not shutil.which("openssl"):
        pytest.fail("the TLS test needs openssl: run `sudo apt-get install openssl`")
    ca_key, ca = tmp_path / "ca.key", tmp_path / "ca.pem"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "2",
        "-subj",
        "/CN=agentctx test CA",
    )
    key = os.path.join(pg_server.folder, "data", "server.key")
    csr, crt = tmp_path / "server.csr", os.path.join(pg_server.folder, "data", "server.crt")
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        str(csr),
        "-subj",
        "/CN=localhost",
    )
    openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        crt,
        "-days",
        "2",
        "-extfile",
        str(ext),
    )
    os.chmod(key, 0o600)
    if pg_server.as_postgres:
        for path in (key, crt):
            shutil.chown(path, "postgres", "postgres")
    pg_server.admin("ALTER SYSTEM SET ssl = on")
    pg_server.admin("SELECT pg_reload_conf()")
    try:
        yield ca
    finally:
        pg_server.admin("ALTER SYSTEM RESET ssl")
        pg_server.admin("SELECT pg_reload_conf()")


@pytest.mark.anyio
async def test_doctor_says_whether_the_hubs_certificate_is_verified(
    pg_server: Server, hub_db: str, tmp_path: Path, tls: Path
) -> None:
    alice, _bob, _carol = await make_team(
        pg_server, hub_db, tmp_path, names=("alice", "bob", "carol")
    )
    verified = f"host=localhost port={pg_server.port} dbname={hub_db} user=alice sslmode=verify-full sslrootcert={tls}"
    with psycopg.connect(verified) as conn:  # the server really speaks TLS now
        assert conn.pgconn.ssl_in_use
    for info, ok, words in (
        (verified, True, "TLS on, certificate verified"),
        (verified.replace("verify-full", "require"), None, "the certificate is not verified"),
    ):
        async with alice.store() as store, store.transaction() as tx:
            await tx.execute("UPDATE hub_links SET conninfo = ?", (info,))
        found = [
            c
            for c in json.loads(alice.cli("doctor", "--json").stdout)
            if c["name"] == "team hub acme"
        ]
        assert len(found) == 1 and found[0]["ok"] is ok and words in found[0]["detail"], found
    # a ~/.pgpass that others can read is ignored by libpq: doctor says so
    pgpass = tmp_path / "pgpass"
    pgpass.write_text("localhost:*:*:alice:unused\n")
    pgpass.chmod(0o644)
    checks = helpers.run_cli(
        "doctor", "--json", cwd=alice.checkout, env={**alice.env, "PGPASSFILE": str(pgpass)}
    )
    found = [c for c in json.loads(checks.stdout) if c["name"] == "pgpass"]
    assert found and found[0]["ok"] is False and "chmod 600" in found[0]["fix"]
