"""The team hub client without a hub: the extra's one line, refused passwords, the labels, and
a SessionStart that does nothing more when no hub is linked (the hub tests: tests/hub)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agentctx.core import hubstamp, inject
from tests import helpers

if TYPE_CHECKING:
    from pathlib import Path


def test_without_psycopg_every_team_command_says_how_to_add_it(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "psycopg"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('psycopg is not installed')\n")
    env = {"PYTHONPATH": str(tmp_path / "blocked")}
    for command in (
        ["team", "sync"],
        ["team", "status"],
        ["team", "link", "--service", "x", "--team", "t"],
    ):
        result = helpers.run_cli(*command, env=env, cwd=tmp_path)
        assert result.returncode == 1, command
        assert result.stderr.strip().splitlines() == [
            "agentctx: error: the team hub needs psycopg, which is not installed: "
            "pip install 'agentctx-cc[team]' (or uv tool install 'agentctx-cc[team]')"
        ]


def test_a_dsn_with_a_password_is_refused_before_anything_connects(tmp_path: Path) -> None:
    result = helpers.run_cli(
        "team",
        "link",
        "--dsn",
        "host=db.example.com user=alice password=s3cret",
        "--team",
        "t",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "~/.pgpass" in result.stderr and "s3cret" not in result.stderr


def test_hub_records_are_labelled_with_their_author() -> None:
    row = {
        "type": "decision",
        "source": "import",
        "confidence": "inferred",
        "session_id": "hub:acme#12 alice",
    }
    assert inject.label(row) == "decision | team hub: alice | unconfirmed"
    forged = {**row, "session_id": "hub:acme#12 ev]il|role", "confidence": "explicit"}
    assert inject.label(forged) == "decision | team hub: evilrole | unconfirmed"
    team_file = {**row, "session_id": "import:.agentctx/context.md@abc"}
    assert inject.label(team_file) == "decision | team file | unconfirmed"


def test_session_start_without_a_hub_only_misses_one_stat(
    agentctx_home: Path, tmp_path: Path
) -> None:
    assert not hubstamp.due()  # no stamp: no hub linked
    helpers.seed(tmp_path, [{"type": "decision", "title": "T", "body": "B"}])
    result = helpers.run_hook(
        "session-start",
        helpers.payload("SessionStart", "s", tmp_path, source="startup"),
        cwd=tmp_path,
    )
    assert result.returncode == 0
    assert not os.path.exists(hubstamp.path())
    log = agentctx_home / "logs" / "workers.log"
    assert not log.exists() or "team-sync" not in log.read_text()
