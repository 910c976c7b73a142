"""The ``agentctx`` command line end to end: every command runs in a real subprocess.

Each test works in its own project folder and its own agentctx home (the autouse
``agentctx_home`` fixture sets ``AGENTCTX_HOME``; another home is passed through ``env``). Failures
must be clean: exit code 1 with one ``agentctx: error:`` line for a refused operation, exit code 2
for a usage error, never a Python traceback, and nothing written.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import sqlean

from agentctx import __version__, config
from agentctx.config import SETTINGS
from agentctx.core import home
from agentctx.core.schema import RECORD_TYPES, SCHEMA_VERSION
from agentctx.records import COLUMNS
from tests.helpers import run_cli, seed

if TYPE_CHECKING:
    import subprocess

DB_NAME = "agentctx.db"


# -- helpers ---------------------------------------------------------------------------------------


def cli(
    *args: str, cwd: Path, input: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``agentctx`` with a non-tty stdin (so nothing can wait for an answer)."""
    result = run_cli(*args, cwd=cwd, input=input, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def ok(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command that must succeed; return its stdout."""
    result = cli(*args, cwd=cwd, env=env)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def ok_json(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """Run a command with ``--json`` that must succeed; return the parsed output."""
    return json.loads(ok(*args, "--json", cwd=cwd, env=env))


def fails(*args: str, cwd: Path, input: str = "", env: dict[str, str] | None = None) -> str:
    """Run a command that must be refused cleanly; return its one-line error message."""
    result = cli(*args, cwd=cwd, input=input, env=env)
    assert result.returncode == 1, (args, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentctx: error: "), result.stderr
    return lines[0]


def add(
    cwd: Path, type_: str, title: str, body: str, *extra: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Record one fact through the CLI; return it as JSON."""
    created: dict[str, Any] = ok_json(
        "record", "--type", type_, "--title", title, "--body", body, *extra, cwd=cwd, env=env
    )
    return created


def status(cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``status --json`` of the project at ``cwd``."""
    info: dict[str, Any] = ok_json("status", cwd=cwd, env=env)
    return info


def home_env(path: Path) -> dict[str, str]:
    """Environment override pointing agentctx at another home."""
    return {"AGENTCTX_HOME": str(path)}


# -- record ----------------------------------------------------------------------------------------


def test_record_with_every_option(project_dir: Path) -> None:
    prior = add(project_dir, "decision", "Use REST for the API", "Public endpoints speak REST.")
    assert set(prior) == set(COLUMNS)
    assert prior["type"] == "decision"
    assert prior["title"] == "Use REST for the API"
    assert prior["body"] == "Public endpoints speak REST."
    assert (prior["scope"], prior["source"], prior["confidence"]) == ("project", "cli", "explicit")
    assert prior["pinned"] is False
    assert prior["superseded_by"] is None

    created = add(
        project_dir,
        "decision",
        "  Use   gRPC internally ",
        "Services talk gRPC.\n",
        "--pin",
        "--supersedes",
        prior["id"],
        "--keywords",
        "RPC Protobuf rpc",
        "--confidence",
        "inferred",
    )
    assert created["title"] == "Use gRPC internally"
    assert created["body"] == "Services talk gRPC."
    assert created["pinned"] is True
    assert created["keywords"] == "rpc protobuf"
    assert created["confidence"] == "inferred"
    assert ok_json("show", prior["id"], cwd=project_dir)["superseded_by"] == created["id"]

    profile = add(
        project_dir,
        "profile",
        "Prefers tabs",
        "Indent with tabs.",
        "--scope",
        "global",
        "--key",
        "indent",
    )
    assert (profile["scope"], profile["project_id"], profile["key"]) == (
        "global",
        "global",
        "indent",
    )
    again = add(
        project_dir,
        "profile",
        "Prefers spaces",
        "Indent with 4 spaces.",
        "--scope",
        "global",
        "--key",
        "indent",
    )
    assert ok_json("show", profile["id"], cwd=project_dir)["superseded_by"] == again["id"]

    text = ok(
        "record",
        "--type",
        "bugfix",
        "--title",
        "Fix the leak",
        "--body",
        "Closed handles.",
        cwd=project_dir,
    )
    assert text.startswith("recorded ")
    assert "bugfix: Fix the leak" in text

    info = status(project_dir)
    assert info["counts"]["decision"] == 1
    assert info["counts"]["profile"] == 1
    assert info["counts"]["bugfix"] == 1
    assert info["superseded"] == 2


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        pytest.param({"--type": "bogus"}, "type 'bogus' is not one of: decision", id="bad-type"),
        pytest.param({"--title": ""}, "title is empty", id="empty-title"),
        pytest.param(
            {"--body": "x" * 2001},
            "body is 2001 characters, over the limit of 2000",
            id="long-body",
        ),
        pytest.param({"--supersedes": "01NOSUCHRECORD"}, "no record with id", id="bad-supersedes"),
    ],
)
def test_record_refused_writes_nothing(
    project_dir: Path, override: dict[str, str], expected: str
) -> None:
    options = {"--type": "decision", "--title": "A title", "--body": "A body", **override}
    message = fails("record", *(part for item in options.items() for part in item), cwd=project_dir)
    assert expected in message
    info = status(project_dir)
    assert info["store"] == {**info["store"], "records": 0, "projects": 0}
    assert info["current"] == 0


# -- search ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """A store shared by the search tests (they only read it)."""

    env: dict[str, str]
    project: Path
    ids: dict[str, str]
    old_valid_from: str


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("corpus")
    env = home_env(root / "home")
    project, other = root / "project", root / "other"
    project.mkdir()
    other.mkdir()
    old = add(project, "decision", "Storage engine", "We store data in PostgreSQL.", env=env)
    new = ok_json(
        "supersede",
        old["id"],
        "--body",
        "We store data in SQLite, one file per user.",
        "--rationale",
        "simpler deployment",
        "--keep-title",  # "Storage engine" still names what the new body states
        cwd=project,
        env=env,
    )["new"]
    bug = add(
        project, "bugfix", "Storage handle leak", "Close storage handles per request.", env=env
    )
    conv = add(
        project,
        "convention",
        "Storage naming",
        "Storage buckets use kebab-case.",
        "--scope",
        "global",
        env=env,
    )
    add(project, "preference", "Terse commits", "Keep commit subjects short.", env=env)
    add(other, "discovery", "Storage quota", "The storage quota is 5 GB.", env=env)
    ids = {"old": old["id"], "new": new["id"], "bug": bug["id"], "conv": conv["id"]}
    return Corpus(env, project, ids, old["valid_from"])


def _as_of_values(corpus: Corpus) -> dict[str, str]:
    today = datetime.now(UTC).date()
    moment = datetime.fromisoformat(corpus.old_valid_from.replace("Z", "+00:00"))
    return {
        "yesterday": (today - timedelta(days=1)).isoformat(),
        "tomorrow": (today + timedelta(days=1)).isoformat(),
        "then_utc": corpus.old_valid_from,
        "then_plus2": moment.astimezone(timezone(timedelta(hours=2))).isoformat(),
    }


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param([], {"new", "bug", "conv"}, id="current-only"),
        pytest.param(["--type", "decision", "--type", "bugfix"], {"new", "bug"}, id="types"),
        pytest.param(["--type", "convention"], {"conv"}, id="one-type"),
        pytest.param(["--scope", "project"], {"new", "bug"}, id="scope-project"),
        pytest.param(["--scope", "global"], {"conv"}, id="scope-global"),
        pytest.param(["--all"], {"old", "new", "bug", "conv"}, id="all-history"),
        pytest.param(["--as-of", "{yesterday}"], set(), id="as-of-date-before"),
        pytest.param(["--as-of", "{tomorrow}"], {"new", "bug", "conv"}, id="as-of-date-after"),
        pytest.param(["--as-of", "{then_utc}"], {"old"}, id="as-of-datetime"),
        pytest.param(["--as-of", "{then_plus2}"], {"old"}, id="as-of-datetime-offset"),
    ],
)
def test_search_filters(corpus: Corpus, options: list[str], expected: set[str]) -> None:
    values = _as_of_values(corpus)
    args = [option.format(**values) for option in options]
    hits = ok_json("search", "storage", *args, cwd=corpus.project, env=corpus.env)
    assert isinstance(hits, list)
    for hit in hits:
        assert set(COLUMNS) <= set(hit)
    names = {
        name for name, record_id in corpus.ids.items() for hit in hits if hit["id"] == record_id
    }
    assert names == expected
    assert len(hits) == len(expected)  # nothing from the other project


def test_search_limit_and_text(corpus: Corpus) -> None:
    hits = ok_json("search", "storage", "--limit", "1", cwd=corpus.project, env=corpus.env)
    assert len(hits) == 1
    text = ok("search", "storage", cwd=corpus.project, env=corpus.env)
    for name in ("new", "bug", "conv"):
        assert corpus.ids[name] in text
    assert corpus.ids["old"] not in text
    nothing = ok("search", "zebra", cwd=corpus.project, env=corpus.env)
    assert nothing.strip() == "no matching records"
    # the columns are explained once, above the lines
    lines = text.splitlines()
    assert lines[0] == "id  type  title  [scope, confidence, age, rank score; * pinned]"
    assert sum("rank score" in line for line in lines) == 1


@pytest.mark.parametrize("query", ["", "   "])
def test_search_without_a_query_fails_in_one_line(corpus: Corpus, query: str) -> None:
    message = fails("search", query, cwd=corpus.project, env=corpus.env)
    assert message.startswith("agentctx: error: search needs a query")


def test_a_toolchain_command_is_searchable(corpus: Corpus) -> None:
    recorded = ok_json(
        "record", "--type", "convention", "--title", "Run the tests with make test",
        "--body", "make test runs pytest with the fixtures; make lint runs ruff",
        cwd=corpus.project, env=corpus.env,
    )  # fmt: skip
    hits = ok_json("search", "make", cwd=corpus.project, env=corpus.env)
    assert [hit["id"] for hit in hits] == [recorded["id"]]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            ["--as-of", "2026-13-45"], "--as-of '2026-13-45' is not an ISO date", id="date"
        ),
        pytest.param(["--as-of", "yesterday"], "--as-of 'yesterday' is not an ISO", id="word"),
        pytest.param(["--as-of", "2026-04-01T25:00"], "is not an ISO date or time", id="time"),
        pytest.param(["--type", "nope"], "type 'nope' is not one of", id="type"),
        pytest.param(["--limit", "0"], "--limit takes a number of at least 1", id="limit"),
    ],
)
def test_search_refuses_bad_filters(corpus: Corpus, options: list[str], expected: str) -> None:
    message = fails("search", "storage", *options, cwd=corpus.project, env=corpus.env)
    assert expected in message


# -- show, supersede, edit, pin --------------------------------------------------------------------


def test_supersede_show_and_history(project_dir: Path) -> None:
    first = add(project_dir, "decision", "Cache layer", "Redis caches sessions.")
    result = ok_json(
        "supersede",
        first["id"],
        "--body",
        "Memcached caches sessions.",
        "--rationale",
        "cheaper to run",
        cwd=project_dir,
    )
    old, new = result["old"], result["new"]
    assert old["id"] == first["id"]
    assert old["superseded_by"] == new["id"]
    assert old["superseded_at"] is not None
    # a new body states a new fact: its title comes from it, not from the old version
    assert (new["type"], new["title"]) == ("decision", "Memcached caches sessions")
    assert new["body"] == "Memcached caches sessions."
    assert new["rationale"] == "cheaper to run"

    message = fails(
        "supersede", first["id"], "--body", "Again.", "--rationale", "why", cwd=project_dir
    )
    assert "already superseded" in message
    assert f"supersede the current version ({new['id']})" in message
    message = fails(
        "supersede", new["id"], "--body", "Again.", "--rationale", "  ", cwd=project_dir
    )
    assert "rationale is required" in message

    shown = ok("show", first["id"], cwd=project_dir)
    assert "SUPERSEDED" in shown
    assert f"agentctx show {new['id']}" in shown
    assert "Redis caches sessions." in shown
    assert "SUPERSEDED" not in ok("show", new["id"], cwd=project_dir)

    said = ok(
        "supersede", new["id"], "--body", "No cache. Rationale: fast enough without one.",
        "--rationale", "fast enough", cwd=project_dir,
    )  # fmt: skip
    third = said.split()[0]
    assert "title     No cache (from the new body; --title sets another)" in said
    chain = [first["id"], new["id"], third]
    assert ok_json("show", third, cwd=project_dir)["title"] == "No cache"
    for record_id in (chain[0], chain[-1]):  # from either end of the chain
        history = ok_json("show", record_id, "--history", cwd=project_dir)
        assert [r["id"] for r in history] == chain
    assert [r["body"] for r in history] == [
        "Redis caches sessions.",
        "Memcached caches sessions.",
        "No cache. Rationale: fast enough without one.",
    ]
    assert ok("show", third, "--history", cwd=project_dir).count("SUPERSEDED") == 2

    assert "no record with id '01UNKNOWN'" in fails("show", "01UNKNOWN", cwd=project_dir)
    assert "no record with id" in fails("show", "01UNKNOWN", "--history", cwd=project_dir)
    retitled = ok_json(
        "supersede",
        third,
        "--title",
        "No cache layer",
        "--body",
        "Sessions are not cached.",
        "--rationale",
        "the title no longer held",
        cwd=project_dir,
    )
    assert (retitled["old"]["title"], retitled["new"]["title"]) == ("No cache", "No cache layer")
    kept = ok_json(
        "supersede", retitled["new"]["id"], "--keep-title", "--body", "Sessions are never cached.",
        "--rationale", "same fact, said better", cwd=project_dir,
    )  # fmt: skip
    assert kept["new"]["title"] == "No cache layer"
    assert "not both" in fails(
        "supersede", kept["new"]["id"], "--keep-title", "--title", "T", "--body", "B",
        "--rationale", "r", cwd=project_dir,
    )  # fmt: skip


def test_edit_with_options(project_dir: Path) -> None:
    first = add(project_dir, "convention", "Old title", "Old body.")
    result = ok_json("edit", first["id"], "--title", "New title", cwd=project_dir)
    assert result["old"]["id"] == first["id"]
    assert result["old"]["superseded_by"] == result["new"]["id"]
    second = result["new"]
    assert (second["title"], second["body"], second["type"]) == (
        "New title",
        "Old body.",
        "convention",
    )

    text = ok("edit", second["id"], "--body", "New body.", cwd=project_dir)
    third_id, _, old_id = text.split()
    assert old_id == second["id"]
    third = ok_json("show", third_id, cwd=project_dir)
    assert (third["title"], third["body"]) == ("New title", "New body.")

    assert "nothing to change" in fails("edit", third_id, "--title", "New title", cwd=project_dir)
    assert "already superseded" in fails("edit", first["id"], "--title", "X", cwd=project_dir)
    assert "no record with id" in fails("edit", "01UNKNOWN", "--title", "X", cwd=project_dir)
    info = status(project_dir)
    assert (info["counts"]["convention"], info["superseded"]) == (1, 2)


_REWRITE = """\
import pathlib, sys
path = pathlib.Path(sys.argv[1])
assert path.read_text(encoding="utf-8") == "Original title\\n\\nOriginal body.\\n"
path.write_text("Edited title\\n\\nEdited body,\\nover two lines.\\n", encoding="utf-8")
"""


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param(_REWRITE, None, id="rewrites"),
        pytest.param("pass\n", "nothing to change", id="unchanged"),
        pytest.param("import sys\nsys.exit(3)\n", "the editor failed", id="editor-fails"),
        pytest.param(
            "import pathlib, sys\npathlib.Path(sys.argv[1]).write_text('')\n",
            "title is empty",
            id="emptied",
        ),
        pytest.param(None, "set $EDITOR", id="no-editor"),
    ],
)
def test_edit_in_editor(
    project_dir: Path, tmp_path: Path, script: str | None, expected: str | None
) -> None:
    first = add(project_dir, "discovery", "Original title", "Original body.")
    editor = ""
    if script is not None:
        path = tmp_path / "editor.py"
        path.write_text(script, encoding="utf-8")
        editor = shlex.join([sys.executable, str(path)])
    env = {"EDITOR": editor, "VISUAL": ""}
    if expected is None:
        result = ok_json("edit", first["id"], cwd=project_dir, env=env)
        assert result["old"]["superseded_by"] == result["new"]["id"]
        assert result["new"]["title"] == "Edited title"
        assert result["new"]["body"] == "Edited body,\nover two lines."
    else:
        assert expected in fails("edit", first["id"], cwd=project_dir, env=env)
        assert status(project_dir)["superseded"] == 0


def test_edit_in_editor_refuses_a_superseded_record_before_opening(
    project_dir: Path, tmp_path: Path
) -> None:
    first = add(project_dir, "discovery", "A title", "A body.")
    new_id = ok_json("edit", first["id"], "--body", "Another body.", cwd=project_dir)["new"]["id"]
    marker = tmp_path / "editor-ran"
    script = tmp_path / "editor.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    env = {"EDITOR": shlex.join([sys.executable, str(script)]), "VISUAL": ""}
    message = fails("edit", first["id"], cwd=project_dir, env=env)
    assert f"edit the current version ({new_id})" in message
    assert not marker.exists()


def test_pin_and_unpin(project_dir: Path) -> None:
    record_id = add(project_dir, "preference", "Short answers", "Keep replies brief.")["id"]
    assert ok("pin", record_id, cwd=project_dir).strip() == f"pinned {record_id}"
    assert ok_json("show", record_id, cwd=project_dir)["pinned"] is True
    assert ok_json("unpin", record_id, cwd=project_dir)["pinned"] is False
    assert ok_json("show", record_id, cwd=project_dir)["pinned"] is False
    assert ok_json("pin", record_id, cwd=project_dir)["pinned"] is True
    assert "no record with id" in fails("unpin", "01UNKNOWN", cwd=project_dir)


# -- export, import, status ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_export_import_round_trip(project_dir: Path, tmp_path: Path, fmt: str) -> None:
    other = tmp_path / "other"
    other.mkdir()
    first = add(project_dir, "decision", "Queue", "Use RabbitMQ -- for now.\n\nSecond paragraph.")
    ok("supersede", first["id"], "--body", "Use NATS.", "--rationale", "lighter", cwd=project_dir)
    add(project_dir, "convention", "Line length", "Wrap at 100.", "--scope", "global", "--pin")
    add(other, "bugfix", "Off by one", "The pager skipped the last page.", "--keywords", "pager")

    original = ok("export", "--format", "json", cwd=project_dir)
    assert len(json.loads(original)["records"]) == 4
    printed = original if fmt == "json" else ok("export", "--format", fmt, cwd=project_dir)
    path = tmp_path / f"context.{fmt}"
    result = cli("export", "--format", fmt, "--out", str(path), cwd=project_dir)
    assert result.returncode == 0
    assert result.stdout == ""
    assert "exported 4 records" in result.stderr
    assert path.read_text(encoding="utf-8") == printed
    if fmt == "md":
        assert printed.startswith("# agentctx context export")
        assert "#### Queue (superseded)" in printed
        assert "## Global (every project)" in printed

    fresh = home_env(tmp_path / "second-home")
    assert ok("import", "--restore", str(path), cwd=project_dir, env=fresh).strip() == (
        "imported 4 records (0 already present)"
    )
    assert ok("export", "--format", "json", cwd=project_dir, env=fresh) == original

    again = ok("import", str(path), cwd=project_dir)
    assert again.strip() == "imported 0 records (4 already present)"
    report = ok_json("import", str(path), cwd=project_dir)
    assert report["added"] == {}
    assert report["skipped"]["records"] == 4


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(None, "cannot read", id="missing"),
        pytest.param('{"records": []}', "not an agentctx export", id="foreign-json"),
        pytest.param("# My notes\n\nNothing here.\n", "not an agentctx export", id="foreign-md"),
        pytest.param("{not json", "not valid JSON", id="broken-json"),
    ],
)
def test_import_refuses_bad_files(
    project_dir: Path, tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "input.txt"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert expected in fails("import", str(path), cwd=project_dir)
    assert not Path(home.db_path()).exists()  # a refused file creates no store


def test_status(project_dir: Path) -> None:
    assert "run `agentctx init` first" in fails("status", cwd=project_dir)  # creates nothing
    seed(project_dir, [])  # an empty store
    info = status(project_dir)
    assert info["counts"] == dict.fromkeys(RECORD_TYPES, 0)
    assert list(info["counts"]) == list(RECORD_TYPES)
    assert (info["superseded"], info["sessions"], info["current"]) == (0, 0, 0)
    assert info["project"]["name"] == "project"

    handover = add(project_dir, "handover", "Where we stopped", "Half-way through the parser.")
    add(project_dir, "handover", "Where we stopped", "Parser done, tests next.")  # supersedes
    add(project_dir, "profile", "Uses vim", "Edits with vim.", "--scope", "global")
    info = status(project_dir)
    assert info["counts"] == {**dict.fromkeys(RECORD_TYPES, 0), "handover": 1, "profile": 1}
    assert (info["superseded"], info["sessions"], info["current"]) == (1, 0, 2)
    assert ok_json("show", handover["id"], cwd=project_dir)["superseded_by"] is not None

    text = ok("status", cwd=project_dir)
    assert "project   project" in text
    assert "handover 1" in text
    assert "1 superseded records" in text


# -- doctor ----------------------------------------------------------------------------------------


def test_doctor_on_a_healthy_home(project_dir: Path, agentctx_home: Path) -> None:
    on_path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    fresh = cli("doctor", cwd=project_dir, env=on_path)
    assert fresh.returncode == 1  # not set up: the hooks are not registered
    assert "does not exist yet" in fresh.stdout
    assert "run `agentctx init`" in fresh.stdout
    assert not agentctx_home.exists()  # doctor only looks

    ok("init", cwd=project_dir, env=on_path)
    add(project_dir, "decision", "Something", "Worth remembering.")
    text = ok("doctor", cwd=project_dir, env=on_path)
    assert "ok    hooks" in text
    assert "FAIL" not in text
    assert f"(schema {SCHEMA_VERSION}, 1 records)" in text
    checks = json.loads(ok("doctor", "--json", cwd=project_dir, env=on_path))
    assert isinstance(checks, list)
    for check in checks:
        assert set(check) - {"extraction", "model", "vectors"} == {"name", "ok", "detail", "fix"}
        assert check["ok"] is not False
    names = [check["name"] for check in checks]
    assert {"home", "config", "database", "sqlite", "fts5", "extraction"} <= set(names)
    (extraction,) = [c["extraction"] for c in checks if c["name"] == "extraction"]
    # no API key and no claude CLI (tests/conftest.py): capture only, and doctor says why
    assert extraction["configured"] == "auto" and extraction["backend"] is None
    assert "no claude CLI found" in extraction["reason"]


def _garbage(size: int) -> bytes:
    return bytes(range(256)) * (size // 256 + 1)


@pytest.mark.parametrize("damage", ["not-a-database", "damaged-pages"])
def test_doctor_reports_a_corrupt_database(
    project_dir: Path, agentctx_home: Path, damage: str
) -> None:
    db = agentctx_home / DB_NAME
    if damage == "not-a-database":
        agentctx_home.mkdir()
        db.write_bytes(b"this is not a database\n" * 200)
    else:
        add(project_dir, "decision", "Something", "Worth remembering.")
        for suffix in ("-wal", "-shm"):
            assert not (agentctx_home / (DB_NAME + suffix)).exists()
        # Destroy the pages of the records table and its indexes; the schema stays readable, so
        # the store opens and the damage surfaces in the middle of a query.
        conn = sqlean.connect(str(db))
        try:
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            pages = [
                row[0]
                for row in conn.execute(
                    "SELECT rootpage FROM sqlite_master WHERE tbl_name = 'records' AND rootpage > 0"
                )
            ]
        finally:
            conn.close()
        assert pages
        with db.open("r+b") as fh:
            for page in pages:
                fh.seek((page - 1) * page_size)
                fh.write(_garbage(page_size)[:page_size])

    result = cli("doctor", cwd=project_dir)
    assert result.returncode == 1
    assert "FAIL  database" in result.stdout
    assert f"mv {db} {db}.broken" in result.stdout  # how to fix
    checks = ok_json_failing("doctor", cwd=project_dir)
    database = next(check for check in checks if check["name"] == "database")
    assert database["ok"] is False
    assert database["detail"]
    assert "agentctx import" in database["fix"]

    for args in (["status"], ["search", "something"]):
        message = fails(*args, cwd=project_dir)
        assert str(db) in message


def ok_json_failing(*args: str, cwd: Path) -> Any:
    """``--json`` output of a command that reports a problem with exit code 1."""
    result = cli(*args, "--json", cwd=cwd)
    assert result.returncode == 1, result.stderr
    return json.loads(result.stdout)


# -- config ----------------------------------------------------------------------------------------


def test_config_get_and_set(project_dir: Path, agentctx_home: Path) -> None:
    listing = ok("config", "get", cwd=project_dir)
    assert [line.split(" = ")[0] for line in listing.splitlines()] == list(SETTINGS)
    assert any(
        line.startswith("llm = on ") and "(default on; default)" in line
        for line in listing.splitlines()
    )
    assert ok("config", "get", "llm", cwd=project_dir) == "llm = on\n"

    assert ok("config", "set", "llm", "off", cwd=project_dir).startswith("llm = off")
    assert ok("config", "get", "llm", cwd=project_dir) == "llm = off\n"
    ok("config", "set", "reinforcement_threshold", "5", cwd=project_dir)
    values = ok_json("config", "get", cwd=project_dir)
    assert values["llm"] == {"value": False, "default": True, "source": "config file"}
    assert values["reinforcement_threshold"]["value"] == 5
    assert values["embeddings"] == {"value": True, "default": True, "source": "default"}
    assert ok_json("config", "get", "llm", cwd=project_dir) == {"llm": False}
    stored = json.loads((agentctx_home / "config.json").read_text(encoding="utf-8"))
    assert stored == {"llm": False, "reinforcement_threshold": 5}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["set", "llm", "maybe"], "llm takes on or off (got 'maybe')", id="bad-bool"),
        pytest.param(["set", "reinforcement_threshold", "0"], "at least 1", id="zero"),
        pytest.param(["set", "reinforcement_threshold", "many"], "at least 1", id="not-number"),
        pytest.param(["set", "nosuch", "1"], "unknown setting 'nosuch'; known: llm", id="set-key"),
        pytest.param(["get", "nosuch"], "unknown setting 'nosuch'", id="get-key"),
        pytest.param(["set", "llm.model", " "], "llm.model takes a non-empty name", id="blank"),
    ],
)
def test_config_refuses_bad_input(
    project_dir: Path, agentctx_home: Path, args: list[str], expected: str
) -> None:
    config.set_value("llm", "off")  # in-process: AGENTCTX_HOME points at this test's home
    path = agentctx_home / "config.json"
    before = path.read_bytes()
    assert expected in fails("config", *args, cwd=project_dir)
    assert path.read_bytes() == before


# -- reset -----------------------------------------------------------------------------------------


def test_reset_deletes_only_this_project(project_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    first = add(project_dir, "decision", "Framework", "Use Flask.")
    ok("supersede", first["id"], "--body", "Use FastAPI.", "--rationale", "async", cwd=project_dir)
    add(project_dir, "bugfix", "Timeout", "Raise the client timeout.")
    kept_global = add(project_dir, "convention", "Tabs", "Indent with tabs.", "--scope", "global")
    kept_other = add(other, "discovery", "Framework docs", "The framework docs live in /docs.")
    before = status(project_dir)
    assert before["store"]["records"] == 5

    for answer in ("", "y\n"):  # stdin is not a terminal: piped answers are not consent
        message = fails("reset", cwd=project_dir, input=answer)
        assert "--force" in message
    assert status(project_dir) == before

    assert ok("reset", "--force", cwd=project_dir).strip() == "deleted 3 records of project"
    after = status(project_dir)
    assert after["counts"] == {**dict.fromkeys(RECORD_TYPES, 0), "convention": 1}
    assert (after["superseded"], after["store"]["records"]) == (0, 2)
    assert ok_json("show", kept_global["id"], cwd=project_dir)["id"] == kept_global["id"]
    hits = ok_json("search", "framework", cwd=other)
    assert [hit["id"] for hit in hits] == [kept_other["id"]]
    assert status(other)["counts"]["discovery"] == 1


# -- usage -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["--help"], ["-h"], ["record", "--help"], ["search", "--help"], ["config", "set", "--help"]],
)
def test_help(project_dir: Path, args: list[str]) -> None:
    assert ok(*args, cwd=project_dir).startswith("Usage: agentctx")


def test_version(project_dir: Path) -> None:
    assert ok("--version", cwd=project_dir).strip() == __version__


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["nosuch"], id="unknown-command"),
        pytest.param(["record", "--title", "t", "--body", "b"], id="missing-type"),
        pytest.param(["search"], id="missing-query"),
        pytest.param(["supersede", "01ABC", "--body", "b"], id="missing-rationale"),
        pytest.param(
            ["record", "--type", "decision", "--title", "t", "--body", "b", "--confidence", "sure"],
            id="bad-choice",
        ),
        pytest.param(["search", "x", "--limit", "many"], id="bad-number"),
        pytest.param(["export", "--format", "pdf"], id="bad-format"),
        pytest.param(["record", "--type", "decision", "--bogus"], id="unknown-option"),
    ],
)
def test_usage_errors(project_dir: Path, agentctx_home: Path, args: list[str]) -> None:
    result = cli(*args, cwd=project_dir)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.strip()
    assert result.stdout == ""
    assert not (agentctx_home / DB_NAME).exists()


# -- a database from a newer agentctx --------------------------------------------------------------


@pytest.fixture(scope="module")
def newer_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    root = tmp_path_factory.mktemp("newer")
    project, home = root / "project", root / "home"
    project.mkdir()
    env = home_env(home)
    add(project, "decision", "Kept", "Must survive.", env=env)
    conn = sqlean.connect(str(home / DB_NAME))
    try:
        conn.execute("PRAGMA user_version = 999")
    finally:
        conn.close()
    return project, env, home / DB_NAME


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["search", "kept"],
        ["record", "--type", "decision", "--title", "t", "--body", "b"],
        ["show", "01ABC"],
        ["edit", "01ABC", "--title", "t"],
        ["supersede", "01ABC", "--body", "b", "--rationale", "r"],
        ["pin", "01ABC"],
        ["export", "--format", "json"],
        ["reset", "--force"],
    ],
    ids=lambda args: args[0],
)
def test_newer_database_is_refused(
    newer_store: tuple[Path, dict[str, str], Path], args: list[str]
) -> None:
    project, env, _ = newer_store
    message = fails(*args, cwd=project, env=env)
    assert "schema version 999" in message
    assert "upgrade agentctx" in message


def test_newer_database_doctor(newer_store: tuple[Path, dict[str, str], Path]) -> None:
    project, env, db = newer_store
    result = cli("doctor", cwd=project, env=env)
    assert result.returncode == 1
    assert "schema version 999 is newer" in result.stdout
    assert "upgrade agentctx" in result.stdout
    conn = sqlean.connect(str(db))
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 999
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 1
    finally:
        conn.close()
