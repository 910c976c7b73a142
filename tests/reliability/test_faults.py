"""Faults of the machine: a damaged store, a store of a newer version, a read-only home, a full disk.

For each: every hook exits 0 with clean stdout (nothing, or exactly the contract JSON) and nothing on
stderr; ``agentctx doctor`` says what is wrong and how to fix it; CLI commands fail with one line
``agentctx: error: …`` (exit 1); once the cause is gone (following doctor's advice) the store works
again. Read-only homes and full disks are made for real where this machine allows it (a read-only
bind mount, ``chattr +i`` or permission bits; a 1 MB tmpfs), and a full disk also through the
file size limit (``RLIMIT_FSIZE``, writes fail with EFBIG) which needs no privilege. Each skip names
its reason; docs/reliability.md lists them.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pytest
import sqlean

from agentctx.core import home, schema
from tests.helpers import contract, seed
from tests.reliability.procs import EVENTS, INJECTING, every_event, wait_for_workers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

SID = "f4a1c0de-0000-4000-8000-000000000001"
Limit = int | None  # RLIMIT_FSIZE for the child, in bytes


def _run(
    argv: list[str], cwd: Path, data: bytes | None = None, fsize: Limit = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m agentctx <argv>``, optionally under a file size limit."""
    limit: Callable[[], None] | None = None
    if fsize is not None:

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "agentctx", *argv],
        input=data or b"",
        capture_output=True,
        cwd=cwd,
        timeout=120,
        check=False,
        preexec_fn=limit,  # only sets a resource limit
    )


def _seed(project: Path, count: int = 40, padding: int = 100) -> None:
    seed(
        project,
        (
            {
                "type": "decision",
                "title": f"The kestrel cache expires entries after {n + 10} minutes",
                "body": f"Entries expire after {n + 10} minutes (kestrel). " + "padding " * padding,
            }
            for n in range(count)
        ),
    )


def _transcript(tmp_path: Path, project: Path) -> Path:
    path = tmp_path / f"{SID}.jsonl"
    line = {"type": "user", "uuid": "u1", "cwd": str(project),
            "message": {"role": "user", "content": "Make the kestrel cache expire faster"}}  # fmt: skip
    path.write_text(json.dumps(line) + "\n")
    return path


def _hooks(project: Path, transcript: Path, fsize: Limit = None) -> dict[str, str | None]:
    """Every hook event once: exit 0, the contract or nothing on stdout, nothing on stderr."""
    texts = {}
    for cli, data in every_event(SID, project, transcript):
        result = _run(["hook", cli], project, json.dumps(data).encode(), fsize)
        assert result.stderr == b"", (cli, result.stderr.decode(errors="replace"))
        texts[cli] = contract(result, EVENTS[cli])
        if EVENTS[cli] not in INJECTING:
            assert texts[cli] is None, cli
    wait_for_workers(home.home_dir())
    return texts


def _doctor(project: Path, fsize: Limit = None) -> dict[str, tuple[str, str]]:
    """``agentctx doctor`` (exit 1 here): each check's mark and text (detail and fix)."""
    result = _run(["doctor"], project, fsize=fsize)
    assert result.returncode == 1 and result.stderr == b"", result.stderr
    checks: dict[str, tuple[str, str]] = {}
    name = ""
    for line in result.stdout.decode().splitlines():
        if line.startswith(("ok ", "FAIL", "warn")):
            mark, name, detail = line.split(None, 2)
            checks[name] = (mark, detail)
        else:  # the fix line below a check
            checks[name] = (checks[name][0], checks[name][1] + " " + line.strip())
    return checks


def _cli_fails(
    project: Path, commands: list[list[str]], words: tuple[str, ...], fsize: Limit = None
) -> None:
    """Each command exits 1 with exactly one line on stderr naming the cause, nothing on stdout."""
    # Together, to save time; one by one under a limit (preexec_fn is not for threads).
    with ThreadPoolExecutor(len(commands) if fsize is None else 1) as pool:
        results = list(pool.map(lambda argv: _run(argv, project, fsize=fsize), commands))
    for argv, result in zip(commands, results, strict=True):
        err = result.stderr.decode(errors="replace")
        assert result.returncode == 1, (argv, result.returncode, err)
        assert result.stdout == b"", (argv, result.stdout)
        assert err.startswith("agentctx: error: ") and err.count("\n") == 1, (argv, err)
        assert any(word in err for word in words), (argv, err)


def _nodes() -> set[str]:
    conn = sqlean.connect(home.db_path())
    with closing(conn):
        return {row[0] for row in conn.execute("SELECT name FROM nodes WHERE kind = 'file'")}


def _write_hook(project: Path, name: str) -> None:
    data = dict(every_event(SID, project, project / "none.jsonl"))["post-tool-use"]
    data["tool_input"] = {"file_path": str(project / name), "content": ""}
    result = _run(["hook", "post-tool-use"], project, json.dumps(data).encode())
    assert result.returncode == 0 and result.stdout == result.stderr == b""


def _spooled() -> list[str]:
    folder = home.sub("spool")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


# -- a damaged store --------------------------------------------------------------------------------


def _damage(path: str, how: str) -> None:
    if how == "garbage":
        Path(path).write_bytes(os.urandom(64 * 1024))
    elif how == "truncated":
        os.truncate(path, os.path.getsize(path) // 2)
    else:  # pages in the middle of a real store overwritten: the header and schema still read
        pages = os.path.getsize(path) // 4096
        with open(path, "r+b") as fh:
            for page in range(pages // 2, pages // 2 + 4):
                fh.seek(page * 4096)
                fh.write(os.urandom(4096))


@pytest.mark.parametrize("how", ["garbage", "truncated", "damaged_pages"])
def test_damaged_store(how: str, project_dir: Path, tmp_path: Path) -> None:
    _seed(project_dir)
    db = home.db_path()
    _damage(db, how)
    _hooks(project_dir, _transcript(tmp_path, project_dir))

    mark, text = _doctor(project_dir)["database"]
    assert mark == "FAIL" and "damaged" in text, text
    assert f"mv {db} {db}.broken" in text and "agentctx import" in text  # how to fix
    # export reads every page, so it meets the damage whatever pages it hit
    commands = [["export", "--format", "json"]]
    if how != "damaged_pages":
        commands += [["status"], ["record", "--type", "decision", "--title", "t", "--body", "b"]]
    _cli_fails(project_dir, commands, ("is damaged",))

    # doctor's advice works: move it aside, the next command starts a new store
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.replace(db + suffix, f"{db}.broken{suffix}")
    # (a write: a read-only command such as status no longer creates a store, issue 16)
    assert (
        _run(
            ["record", "--type", "decision", "--title", "t", "--body", "b"], project_dir
        ).returncode
        == 0
    )
    _write_hook(project_dir, "after.py")
    assert "after.py" in _nodes()
    if how != "damaged_pages":  # (there the write may have landed in pages left intact)
        assert "src/cache.py" in _nodes()  # the write made while the store was unusable waited
    assert not [n for n in _spooled() if not n.endswith(".bad")]


# -- a store from a newer agentctx ------------------------------------------------------------------


def _fingerprint(path: str) -> tuple[str, list[str]]:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return digest, sorted(
        n for n in os.listdir(os.path.dirname(path)) if n.startswith("agentctx.db")
    )


def test_store_of_a_newer_version_is_left_alone(project_dir: Path, tmp_path: Path) -> None:
    _seed(project_dir)
    db = home.db_path()
    conn = sqlean.connect(db, isolation_level=None)
    with closing(conn):
        # a rollback journal too: switching it to WAL would be the first write a hook could do
        assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    before = _fingerprint(db)
    texts = _hooks(project_dir, _transcript(tmp_path, project_dir))
    assert texts["user-prompt-submit"] is None  # nothing read from a schema it does not know

    mark, text = _doctor(project_dir)["database"]
    assert mark == "FAIL" and "newer" in text and "uv tool install --reinstall" in text
    _cli_fails(
        project_dir,
        [["status"], ["search", "kestrel"], ["record", "--type", "decision", "--title", "t", "--body", "b"]],
        ("newer than this agentctx",),
    )  # fmt: skip
    assert _fingerprint(db) == before  # byte for byte, and no -wal or -shm beside it
    assert [n for n in _spooled() if n.endswith(".json")]  # the write waits for the newer agentctx


# -- a read-only home -------------------------------------------------------------------------------


def _sh(*argv: str | Path) -> bool:
    try:
        return (
            subprocess.run([str(a) for a in argv], capture_output=True, check=False).returncode == 0
        )
    except OSError:
        return False


@contextmanager
def _read_only(folder: Path) -> Iterator[str]:
    """Make ``folder`` unwritable for real; yield how it was done (or skip, saying why)."""
    if os.geteuid() != 0:  # permission bits stop everyone but root
        paths = [folder, *sorted(folder.rglob("*"))]
        modes = {p: p.stat().st_mode & 0o7777 for p in paths}
        for p in paths:
            p.chmod(0o500 if p.is_dir() else 0o400)
        try:
            yield "permission bits (chmod a-w)"
        finally:
            for p in reversed(paths):
                p.chmod(modes[p])
        return
    # root ignores permission bits: a read-only bind mount, else immutable files
    if _sh("mount", "--bind", folder, folder):
        if _sh("mount", "-o", "remount,bind,ro", folder):
            try:
                yield "a read-only bind mount"
            finally:
                assert _sh("umount", folder)
            return
        assert _sh("umount", folder)
    if shutil.which("chattr") and _sh("chattr", "-R", "+i", folder):
        try:
            yield "chattr -R +i"
        finally:
            assert _sh("chattr", "-R", "-i", folder)
        return
    pytest.skip(
        "running as root, where permission bits do not stop writes, and neither a read-only bind "
        "mount (mount needs CAP_SYS_ADMIN) nor chattr +i (needs a file system with attributes) "
        "works here"
    )


def test_read_only_home(project_dir: Path, tmp_path: Path) -> None:
    _seed(project_dir)
    folder = Path(home.home_dir())
    transcript = _transcript(tmp_path, project_dir)
    with _read_only(folder) as how:
        sys.stderr.write(f"\nread-only home made with {how}\n")
        probe = folder / "probe"
        with pytest.raises(OSError, match=r"Read-only|Permission denied|not permitted"):
            probe.write_text("x")  # really read-only for this process
        texts = _hooks(project_dir, transcript)
        # reads still work (an immutable open where SQLite cannot make its WAL index)
        assert texts["session-start"] and "kestrel cache" in texts["session-start"]
        assert texts["user-prompt-submit"] and "kestrel cache" in texts["user-prompt-submit"]

        checks = _doctor(project_dir)
        mark, text = checks["home"]
        assert mark == "FAIL" and "read-only or not writable" in text and "chmod u+w" in text
        assert checks["database"][0] == "ok", checks["database"]  # the store itself is fine
        _cli_fails(
            project_dir,
            [["status"], ["record", "--type", "decision", "--title", "t", "--body", "b"],
             ["config", "set", "llm", "off"]],
            ("read-only", "not writable", "Permission denied", "not permitted"),
        )  # fmt: skip
    _write_hook(project_dir, "after.py")  # writable again: writes land
    assert "after.py" in _nodes()


# -- a full disk --------------------------------------------------------------------------------------


@contextmanager
def _full_disk(folder: Path, project: Path, how: str) -> Iterator[Limit]:
    """A seeded home whose writes fail: a full 1 MB tmpfs, or a file size limit for children.

    Yields the limit to run the children with (None on the tmpfs); on leaving, space is back.
    """
    if how == "rlimit":
        _seed(project, 3, 0)
        yield 0  # every write that grows a file fails with EFBIG
        return
    folder.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and _sh(
        "mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", folder
    )
    if not mounted:
        pytest.skip(
            "cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN); the file size limit "
            "variant (rlimit) stands in for a full disk"
        )
    try:
        _seed(project, 3, 0)
        _fill(folder / "filler")
        yield None
    finally:
        assert _sh("umount", folder)


def _fill(path: Path) -> None:
    """Write ``path`` until its disk is full."""

    def forever(fh: BinaryIO) -> None:
        while True:
            fh.write(b"\0" * 4096)

    with open(path, "wb", buffering=0) as fh, pytest.raises(OSError, match="No space left"):
        forever(fh)


@pytest.mark.parametrize("how", ["tmpfs", "rlimit"])
def test_full_disk(how: str, project_dir: Path, tmp_path: Path) -> None:
    folder = Path(home.home_dir())
    transcript = _transcript(tmp_path, project_dir)
    with _full_disk(folder, project_dir, how) as fsize:
        texts = _hooks(project_dir, transcript, fsize)
        # reads still work: the digest file, and an immutable open of the store
        assert texts["session-start"] and "kestrel cache" in texts["session-start"]
        assert texts["user-prompt-submit"] and "kestrel cache" in texts["user-prompt-submit"]
        assert not [n for n in _spooled() if n.endswith(".tmp")]  # no half-written spool file

        mark, text = _doctor(project_dir, fsize)["disk"]
        assert mark == "FAIL", text
        assert ("is full" in text and "free some space" in text) if how == "tmpfs" else (
            "file size limit" in text and "ulimit -f unlimited" in text
        )  # fmt: skip
        _cli_fails(
            project_dir,
            [["status"], ["record", "--type", "decision", "--title", "t", "--body", "b"],
             ["config", "set", "llm", "off"]],
            ("is full", "No space left", "file size limit", "File too large"),
            fsize,
        )  # fmt: skip
        assert not list(folder.glob("config.json.*.tmp"))

        # space again: everything works, nothing left stuck
        if how == "tmpfs":
            (folder / "filler").unlink()
        assert _run(["status"], project_dir).returncode == 0
        _write_hook(project_dir, "after.py")
        assert "after.py" in _nodes()
