"""core.driver: the SQLite driver without sqlean's Python layer, one set of classes with it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from agentctx.core.driver import sqlite
conn = sqlite.connect(":memory:")
conn.row_factory = sqlite.Row
assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
light = [name for name in ("sqlean", "sqlean.dbapi2", "datetime", "importlib.machinery")
         if name in sys.modules]
import sqlean
try:
    sqlean.connect(":memory:").execute("SELECT * FROM missing")
except sqlite.OperationalError:
    shared = sqlean.Row is sqlite.Row and sqlean.connect is sqlite.connect
print(sqlite.__name__, light, shared)
"""


def test_the_driver_loads_without_the_package_and_shares_its_classes() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["sqlean._sqlite3", "[]", "True"]
