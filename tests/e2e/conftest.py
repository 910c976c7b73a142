"""The real Claude Code CLI for the end-to-end tests: a pinned npm install, cached in the repository.

``npm install @anthropic-ai/claude-code@<pin>`` goes into ``.cache/claude-code/`` (git-ignored) the
first time and is reused while ``claude --version`` reports the pinned version. The package ships a
native binary (``node_modules/.bin/claude``), so Node is needed to install it, not to run it; the
2.1.x line declares node >= 22, and npm's EBADENGINE warning on Node 20 is harmless.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: The CLI version these tests were verified with (offline, against tests/messages_server.py).
CLAUDE_CODE_VERSION = "2.1.332"
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
CACHE_DIR = Path(__file__).resolve().parents[2] / ".cache" / "claude-code"
NPM_TIMEOUT_S = 600


def installed_version(binary: Path, home: Path) -> str | None:
    """What ``claude --version`` reports ('2.1.332'), or None when it is missing or broken."""
    if not binary.exists():
        return None
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), "TMPDIR": str(home),
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
    try:
        result = subprocess.run(
            [str(binary), "--version"], env=env, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = result.stdout.split()
    return words[0] if result.returncode == 0 and words else None


#: The e2e tests that take longest (several sessions in a row, ~40% of the suite's time): first.
LONGEST = ("test_multi_session.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (a stable sort: the rest keep their order), so that under xdist
    (``nox -s e2e`` runs on every core) one worker starts them while the others take the rest,
    instead of one of them starting last."""
    items.sort(key=lambda item: Path(item.path).name not in LONGEST)


@pytest.fixture(scope="session")
def claude_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned ``claude`` binary, installed with npm into the cache when it is not there yet.

    Under a lock (``nox -s e2e`` runs the tests on every core): the first xdist worker installs,
    the others wait for it and find the binary there."""
    import fcntl

    CACHE_DIR.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR.parent / "claude-code.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _installed(tmp_path_factory)


def _installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = CACHE_DIR / "node_modules" / ".bin" / "claude"
    scratch = tmp_path_factory.mktemp("claude-version")
    if installed_version(binary, scratch) == CLAUDE_CODE_VERSION:
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            f"npm is not on PATH: the e2e tests install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}"
            f" with it into {CACHE_DIR}. Install Node.js with npm, then run again.",
            pytrace=False,
        )
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    manifest = {"private": True, "dependencies": {CLAUDE_CODE_PACKAGE: CLAUDE_CODE_VERSION}}
    (CACHE_DIR / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=CACHE_DIR,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_S,
    )
    found = installed_version(binary, scratch)
    if result.returncode != 0 or found != CLAUDE_CODE_VERSION:
        pytest.fail(
            f"npm install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} in {CACHE_DIR} failed"
            f" (exit {result.returncode}; {binary} --version: {found}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}",
            pytrace=False,
        )
    return binary
