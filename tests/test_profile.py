"""The developer profile: show with evidence, edit by supersession, clear by retirement, the mirror.

Library tests run on the real store of the test's home; the CLI tests run ``agentctx profile`` in a
subprocess (a pseudo-terminal where a confirmation is asked).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pytest

from agentctx import preferences
from agentctx.core import clock, db, digests
from agentctx.core.errors import ConflictError, NotFoundError, ValidationError
from agentctx.records import Record
from agentctx.retrieval import digest
from agentctx.store import SearchQuery, Store, transfer
from tests.helpers import new_record, run_cli

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.records import Record

P = "c" * 64


async def pref(
    store: Store,
    title: str,
    body: str,
    *,
    confidence: str = "inferred",
    session: str | None = None,
    scope: str = "global",
    type_: str = "preference",
) -> Record:
    """A preference as extraction or the CLI writes it."""
    return await store.add(
        new_record(
            type=type_,
            title=title,
            body=body,
            project_id=P,
            scope=scope,
            confidence=confidence,
            source="llm_extraction" if session else "cli",
            session_id=session,
        )
    )


async def seen_in(store: Store, record_id: str, *sessions: str) -> None:
    """Later sessions that showed the record again (as extraction links them)."""
    async with store.transaction() as tx:
        for session in sessions:
            await tx.mark_seen_in(record_id, session)


def digest_text(store: Store) -> str:
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        return str(digest.build(conn, P, "proj")["text"])


def mirror_text() -> str:
    with open(preferences.mirror_path(), encoding="utf-8") as fh:
        return fh.read()


# -- show ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_show_lists_current_global_preferences_with_confidence_and_evidence(
    store: Store,
) -> None:
    tabs = await pref(store, "Tabs over spaces", "Indent with tabs.", session="s1")
    await seen_in(store, tabs.id, "s2", "s3", "s1")  # its own session counts once
    typed = await pref(store, "Short commits", "One change per commit.", confidence="explicit")
    confirmed = await pref(
        store, "Prefers pytest", "Tests in pytest.", confidence="reinforced", session="s4"
    )
    await pref(store, "Project pref", "Only here.", scope="project")
    await pref(store, "Global convention", "Not a preference.", type_="convention")
    old = await pref(store, "Dark theme", "Use a dark theme.", confidence="explicit")
    await store.supersede(old.id, "Use a light theme.", "changed mind", title="Light theme")

    entries = await preferences.show(store)

    by_title = {e.title: e for e in entries}
    assert set(by_title) == {"Tabs over spaces", "Short commits", "Prefers pytest", "Light theme"}
    assert (by_title["Tabs over spaces"].confidence, by_title["Tabs over spaces"].evidence) == (
        "inferred",
        3,
    )
    assert (by_title["Short commits"].confidence, by_title["Short commits"].evidence) == (
        "explicit",
        0,
    )
    assert by_title["Prefers pytest"].evidence == 1
    assert by_title["Tabs over spaces"].id == tabs.id
    # Digest-bound first (by evidence, then title), the inferred one last.
    assert [e.id for e in entries][:2] == [confirmed.id, by_title["Light theme"].id]
    assert entries[2].id == typed.id
    assert entries[-1].id == tabs.id
    assert [e.in_digest for e in entries] == [True, True, True, False]
    shape = entries[-1].to_dict()
    assert set(shape) == {
        "id",
        "title",
        "body",
        "confidence",
        "evidence",
        "reinforce_count",
        "source",
        "pinned",
        "valid_from",
        "recorded_at",
        "keywords",
        "in_digest",
    }
    assert shape["in_digest"] is False


@pytest.mark.anyio
async def test_evidence_counts_every_version_of_the_preference(store: Store) -> None:
    first = await pref(store, "Tabs", "Indent with tabs.", session="s1")
    await seen_in(store, first.id, "s2")
    edited = await preferences.edit(store, first.id, body="Indent with tabs, width 4.")
    await seen_in(store, edited.id, "s3", "s2")

    (entry,) = await preferences.show(store)

    assert entry.id == edited.id
    assert entry.evidence == 3  # s1 and s2 from the first version, s3 from the new one


# -- edit ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_edit_supersedes_with_source_cli_and_explicit_confidence(store: Store) -> None:
    old = await pref(store, "Tabs", "Indent with tabs.", session="s1")

    new = await preferences.edit(
        store, old.id, title="Tabs, width 4", body="Indent with 4-wide tabs."
    )

    assert (new.title, new.body) == ("Tabs, width 4", "Indent with 4-wide tabs.")
    assert (new.source, new.confidence, new.scope, new.project_id) == (
        "cli",
        "explicit",
        "global",
        "global",
    )
    assert new.rationale == preferences.EDIT_RATIONALE
    history = await store.history(new.id)
    assert [r.id for r in history] == [old.id, new.id]
    assert history[0].superseded_by == new.id
    assert [e.id for e in await preferences.show(store)] == [new.id]
    text = mirror_text()
    assert "### Tabs, width 4" in text
    assert "Indent with tabs." not in text

    only_body = await preferences.edit(store, new.id, body="Tabs.")
    assert (only_body.title, only_body.body) == ("Tabs, width 4", "Tabs.")


@pytest.mark.anyio
async def test_edit_refuses_what_is_not_a_current_global_preference(store: Store) -> None:
    local = await pref(store, "Local", "Project preference.", scope="project")
    convention = await pref(store, "Conv", "A global convention.", type_="convention")
    old = await pref(store, "Old", "Old text.", confidence="explicit")
    _, successor = await store.supersede(old.id, "New text.", "changed")
    current = await pref(store, "Current", "Current text.")
    before = await transfer.export_data(store)

    with pytest.raises(ValidationError, match="is a project preference, not a global preference"):
        await preferences.edit(store, local.id, body="x")
    with pytest.raises(ValidationError, match="is a global convention, not a global preference"):
        await preferences.edit(store, convention.id, body="x")
    with pytest.raises(NotFoundError, match="no record with id"):
        await preferences.edit(store, "01NOSUCHRECORD0000000000000", body="x")
    with pytest.raises(ConflictError, match=f"was replaced by {successor.id}"):
        await preferences.edit(store, old.id, body="x")
    with pytest.raises(ValidationError, match="nothing to change"):
        await preferences.edit(store, current.id, title=" Current ", body="Current text.\n")
    with pytest.raises(ValidationError, match="give a new title, a new body, or both"):
        await preferences.edit(store, current.id)
    with pytest.raises(ValidationError, match="body is empty"):
        await preferences.edit(store, current.id, body="   ")

    assert await transfer.export_data(store) == before


# -- clear -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_clear_retires_the_preference_from_profile_mirror_and_digest(store: Store) -> None:
    keep = await pref(store, "Short commits", "One change per commit.", confidence="explicit")
    gone = await pref(store, "Vim keys", "Uses vim keybindings everywhere.", confidence="explicit")
    await preferences.sync_mirror(store)
    assert "Vim keys" in mirror_text()
    assert "Vim keys" in digest_text(store)
    before_clear = clock.now()

    cleared = await preferences.clear(store, gone.id)

    assert cleared.superseded_at is not None and cleared.superseded_by is None
    assert [e.id for e in await preferences.show(store)] == [keep.id]
    assert "Vim keys" not in mirror_text()
    assert "Short commits" in mirror_text()
    text = digest_text(store)
    assert "Vim keys" not in text
    assert "Short commits" in text
    # Retired, not deleted: history and --as-of still answer.
    assert [r.id for r in await store.history(gone.id)] == [gone.id]
    query = SearchQuery(text="vim keybindings", scope="global")
    assert (await store.search(query)).hits == []
    then = await store.search(
        SearchQuery(text="vim keybindings", scope="global", as_of=before_clear)
    )
    assert [h.record.id for h in then.hits] == [gone.id]
    with pytest.raises(ConflictError, match="already cleared from the profile"):
        await preferences.clear(store, gone.id)


@pytest.mark.anyio
async def test_clear_invalidates_the_precomputed_digests(store: Store) -> None:
    gone = await pref(store, "Vim keys", "Uses vim keybindings.", confidence="explicit")
    started = time.time_ns()
    conn, _ = db.connect(store.path, load_vec=False)
    with closing(conn):
        built = digest.build(conn, P, "proj")
    written = digests.write(built, clock.now(), started)
    assert written is not None and "Vim keys" in digests.read(P)["text"]  # type: ignore[index]

    await preferences.clear(store, gone.id)

    assert digests.read(P) is None  # the file is gone


# -- the mirror ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mirror_is_private_atomic_and_stable(store: Store, agentctx_home: Path) -> None:
    folder = agentctx_home / "profile"
    path = folder / "preferences.md"
    empty = await preferences.sync_mirror(store)
    assert empty == str(path)
    assert path.read_text() == (
        "# Developer profile\n\n"
        "<!-- Written by agentctx from the global preferences in its database, never read back.\n"
        "     Change it with `agentctx profile edit <id>` or `agentctx profile clear <id>`. -->\n\n"
        "No global preferences yet.\n"
    )
    os.chmod(path, 0o644)  # a hand-loosened mode is tightened by the next write
    tabs = await pref(store, "Tabs", "Indent with tabs.", session="s1")
    await seen_in(store, tabs.id, "s2")
    pinned = await pref(store, "Short commits", "One change per commit.", confidence="explicit")
    await store.set_pinned(pinned.id, True)

    await preferences.sync_mirror(store)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert path.read_text().split("-->\n\n", 1)[1] == (
        "## In every session's digest\n\n"
        "### Short commits\n\n"
        "One change per commit.\n\n"
        f"_explicit · 0 sessions · pinned · id `{pinned.id}`_\n\n"
        "## Inferred, not confirmed yet\n\n"
        "### Tabs\n\n"
        "Indent with tabs.\n\n"
        f"_inferred · 2 sessions · id `{tabs.id}`_\n"
    )
    stamp = path.stat().st_mtime_ns
    await preferences.sync_mirror(store)
    assert path.stat().st_mtime_ns == stamp  # unchanged profile: the file is not rewritten
    assert [p.name for p in folder.iterdir()] == ["preferences.md"]  # no temporary left


# -- the command line ------------------------------------------------------------------------------


def cli(*args: str, cwd: Path, input: str = "") -> subprocess.CompletedProcess[str]:
    result = run_cli(*args, cwd=cwd, input=input)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def ok(*args: str, cwd: Path, input: str = "") -> str:
    result = cli(*args, cwd=cwd, input=input)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def record(cwd: Path, title: str, body: str, *extra: str) -> dict[str, Any]:
    created: dict[str, Any] = json.loads(
        ok(
            "record",
            "--type",
            "preference",
            "--title",
            title,
            "--body",
            body,
            *extra,
            "--json",
            cwd=cwd,
        )
    )
    return created


def shown(cwd: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(ok("profile", "show", "--json", cwd=cwd))
    return entries


def test_cli_show_and_edit(project_dir: Path) -> None:
    assert ok("profile", "show", cwd=project_dir) == "no global preferences yet\n"
    tabs = record(project_dir, "Tabs", "Indent with tabs.", "--scope", "global")
    local = record(project_dir, "Local", "Project only.")

    (entry,) = shown(project_dir)
    assert (entry["id"], entry["confidence"], entry["evidence"], entry["in_digest"]) == (
        tabs["id"],
        "explicit",
        0,
        True,
    )
    text = ok("profile", "show", cwd=project_dir)
    assert f"{tabs['id']}  Tabs  [explicit, 0 sessions, every digest]" in text

    edited = json.loads(
        ok("profile", "edit", tabs["id"], "--title", "Tabs (4 wide)", "--json", cwd=project_dir)
    )
    assert edited["old"]["superseded_by"] == edited["new"]["id"]
    assert (edited["new"]["title"], edited["new"]["body"]) == ("Tabs (4 wide)", "Indent with tabs.")
    assert (edited["new"]["source"], edited["new"]["confidence"]) == ("cli", "explicit")

    from_stdin = ok(
        "profile", "edit", edited["new"]["id"], "--body", "-", cwd=project_dir, input="Tabs, 4.\n"
    )
    assert from_stdin.endswith("supersedes " + edited["new"]["id"] + "  Tabs (4 wide)\n")
    (entry,) = shown(project_dir)
    assert entry["body"] == "Tabs, 4."
    history = json.loads(ok("show", entry["id"], "--history", "--json", cwd=project_dir))
    assert [r["id"] for r in history][:2] == [tabs["id"], edited["new"]["id"]]

    usage = cli("profile", "edit", entry["id"], cwd=project_dir)
    assert usage.returncode == 2
    assert usage.stderr == (
        "agentctx: error: give --title and/or --body (--body - reads the body from stdin)\n"
    )
    wrong = cli("profile", "edit", local["id"], "--body", "x", cwd=project_dir)
    assert wrong.returncode == 1
    assert wrong.stderr.startswith(
        f"agentctx: error: record {local['id']} is a project preference, not a global preference"
    )
    assert len(wrong.stderr.splitlines()) == 1
    assert [e["id"] for e in shown(project_dir)] == [entry["id"]]


def test_cli_clear_without_a_terminal_needs_yes(project_dir: Path, agentctx_home: Path) -> None:
    tabs = record(project_dir, "Tabs", "Indent with tabs.", "--scope", "global")
    ok("profile", "edit", tabs["id"], "--body", "Tabs.", cwd=project_dir)  # writes the mirror
    current = shown(project_dir)[0]["id"]
    mirror = (agentctx_home / "profile" / "preferences.md").read_bytes()

    refused = cli("profile", "clear", current, cwd=project_dir)

    assert refused.returncode == 2
    assert refused.stderr == (
        "agentctx: error: profile clear asks for confirmation on a terminal; "
        "pass --yes to clear without asking\n"
    )
    assert [e["id"] for e in shown(project_dir)] == [current]
    assert (agentctx_home / "profile" / "preferences.md").read_bytes() == mirror

    cleared = json.loads(ok("profile", "clear", current, "--yes", "--json", cwd=project_dir))
    assert cleared["id"] == current
    assert cleared["superseded_at"] is not None and cleared["superseded_by"] is None
    assert shown(project_dir) == []
    assert "Tabs" not in (agentctx_home / "profile" / "preferences.md").read_text()

    again = cli("profile", "clear", current, "--yes", cwd=project_dir)
    assert again.returncode == 1
    assert "already cleared from the profile" in again.stderr


def _on_a_terminal(args: list[str], answer: bytes, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run agentctx with a pseudo-terminal as stdin and type ``answer`` into it."""
    primary, secondary = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentctx", *args],
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            text=True,
        )
        os.close(secondary)
        os.write(primary, answer)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(primary)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_cli_clear_asks_on_a_terminal(project_dir: Path) -> None:
    tabs = record(project_dir, "Tabs", "Indent with tabs.", "--scope", "global")

    declined = _on_a_terminal(["profile", "clear", tabs["id"]], b"n\n", project_dir)
    assert declined.returncode == 1, declined.stderr
    assert f"Remove 'Tabs' ({tabs['id']}) from your profile? [y/N] " in declined.stdout
    assert declined.stdout.endswith("nothing changed\n")
    assert [e["id"] for e in shown(project_dir)] == [tabs["id"]]

    wrong = record(project_dir, "Local", "Project only.")
    refused = _on_a_terminal(["profile", "clear", wrong["id"]], b"y\n", project_dir)
    assert refused.returncode == 1
    assert "not a global preference" in refused.stderr
    assert "Remove" not in refused.stdout  # a bad id is refused before the question

    accepted = _on_a_terminal(["profile", "clear", tabs["id"]], b"y\n", project_dir)
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.endswith(f"cleared {tabs['id']}  Tabs\n")
    assert shown(project_dir) == []
