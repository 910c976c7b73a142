"""The ``uv`` the benchmarks that build environments run (nox passes its own in ``UV``)."""

from __future__ import annotations

import os
import shutil


def uv() -> str:
    """``UV``, else ``uv`` on PATH; exits with the way to get it when there is neither."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found is None:
        raise SystemExit("uv is not on PATH: `pipx install uv` (nox[uv] brings it)")
    return found
