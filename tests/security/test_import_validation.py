"""Issue 24, finding 7: one validation for both imports, before anything is written.

Plain ``agentctx import`` (confined) stored a record that supersedes itself and supersession
cycles, which ``--restore`` refused; an import with a cue that is not a string failed with a
message naming no record, outside the all-or-nothing check, and the fuzz test found it at random.
Now both paths run :func:`agentctx.store.import_check.check` first: every member of each class
below is refused whole, by both, in one line naming the record, and nothing is written.

Also here: the property tests run under the ``ci`` hypothesis profile (tests/conftest.py), and
``nox -s explore`` runs every module that holds one.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from agentctx.core.errors import ValidationError
from agentctx.store import confine, transfer
from tests.helpers import PROJECT, run_cli

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctx.store import Store

ROOT = Path(__file__).resolve().parents[2]
AT = "2026-01-01T00:00:00.000000Z"
LATER = "2026-02-01T00:00:00.000000Z"


def _id(n: int) -> str:
    return f"01HX{n:022d}"


def _record(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": _id(n),
        "project_id": PROJECT,
        "type": "decision",
        "title": f"Decision number {n}",
        "body": "A body.",
        "scope": "project",
        "confidence": "explicit",
        "source": "cli",
        "valid_from": AT,
        "recorded_at": AT,
        **fields,
    }


def _superseded(n: int, by: int) -> dict[str, Any]:
    return _record(n, superseded_at=LATER, superseded_by=_id(by))


def _cycle(length: int) -> list[dict[str, Any]]:
    return [_superseded(i, (i + 1) % length) for i in range(length)]


#: Each class of bad file, several members each: (what, records, the record the message names).
BAD: list[tuple[str, list[dict[str, Any]], str]] = [
    ("self-supersession", [_superseded(0, 0)], _id(0)),
    ("self-supersession among others", [_record(1), _superseded(0, 0), _record(2)], _id(0)),
    *[(f"cycle of {n}", [_record(9), *_cycle(n)], _id(0)) for n in (2, 3, 5)],
    ("cycle behind a chain", [_superseded(7, 0), *_cycle(3)], _id(0)),
    *[
        (f"cue {value!r}", [_record(1), _record(0, cues=value)], _id(0))
        for value in ([1], ["ok", 2.5], [None], [["nested"]], [{"a": 1}], 7, {"cue": "x"}, True)
    ],
    ("a project record in the global namespace", [_record(0, project_id="global")], _id(0)),
    ("keywords not a string", [_record(0, keywords=["a", "b"])], _id(0)),
    ("a score that is text", [_record(0, score="1")], _id(0)),
]


def _importers(project_id: str) -> list[tuple[str, Callable[[Store, dict[str, Any]], Any]]]:
    return [
        ("restore", transfer.import_data),
        ("confined", lambda s, d: confine.import_confined(s, d, project_id, "import:team.md")),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(("what", "records", "named"), BAD, ids=[b[0] for b in BAD])
async def test_both_imports_refuse_the_same_bad_files_whole(
    store: Store, what: str, records: list[dict[str, Any]], named: str
) -> None:
    data = {"format": "agentctx-export", "version": 1, "records": records}
    for path, run in _importers(PROJECT):
        with pytest.raises(ValidationError) as refused:
            await run(store, json.loads(json.dumps(data)))
        message = str(refused.value)
        assert message.startswith("import: nothing was imported: "), (path, message)
        assert named in message and "\n" not in message, (path, message)
        assert await store.list_records(None) == [], path  # nothing written


@pytest.mark.anyio
async def test_a_good_file_still_imports_by_both_paths(store: Store) -> None:
    records = [_superseded(0, 1), _record(1, cues=["why is it so", "how do we"])]
    data = {"format": "agentctx-export", "version": 1, "records": records}
    report = await confine.import_confined(store, data, PROJECT, "import:team.md")
    assert report.added["records"] == 2
    assert len(await store.list_records(None)) == 2


def _team_file(records: list[dict[str, Any]]) -> str:
    return transfer.to_team_markdown(records, [])  # type: ignore[arg-type]


@pytest.mark.parametrize("restore", [False, True])
@pytest.mark.parametrize(
    "records",
    [[_superseded(0, 0)], _cycle(2), _cycle(4)],
    ids=["self", "cycle-2", "cycle-4"],
)
def test_the_cli_refuses_a_team_file_that_supersedes_itself(
    project_dir: Path, tmp_path: Path, records: list[dict[str, Any]], restore: bool
) -> None:
    """The issue's case through the real CLI: ``agentctx import`` of a team file, and --restore."""
    assert run_cli("init", cwd=project_dir).returncode == 0
    path = tmp_path / "context.md"
    if restore:
        data = {"format": "agentctx-export", "version": 1, "records": records}
        path = tmp_path / "export.json"
        path.write_text(json.dumps(data))
    else:
        path.write_text(_team_file(records))
    done = run_cli("import", str(path), *(["--restore"] if restore else []), cwd=project_dir)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if not line.startswith("restore: ")]
    assert len(errors) == 1 and "nothing was imported" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert _id(0) in errors[0]
    listed = run_cli("export", "--format", "json", cwd=project_dir)
    if listed.returncode == 0 and listed.stdout.strip().startswith("{"):
        assert json.loads(listed.stdout)["records"] == []


# -- the hypothesis profile -------------------------------------------------------------------------


def _modules_with_property_tests() -> list[Path]:
    return sorted(
        path
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"^@given\(", path.read_text(), re.M) or "\n@given(" in path.read_text()
    )


def test_property_tests_run_under_the_derandomized_ci_profile() -> None:
    assert settings.default is not None
    assert settings.default.derandomize is True and settings.default.database is None
    assert settings.get_profile("ci").derandomize is True
    assert settings.get_profile("explore").derandomize is False


def test_every_property_test_leaves_randomness_to_the_profile() -> None:
    """No test sets ``derandomize`` or ``database`` itself: the profile decides, so ``explore``
    explores every one and ``ci`` fixes every one."""
    offenders = []
    for path in _modules_with_property_tests():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "settings":
                names = {k.arg for k in node.keywords}
                if names & {"derandomize", "database"}:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def test_the_explore_session_runs_every_module_with_property_tests() -> None:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    listed: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PROPERTY_TESTS":
            listed = set(ast.literal_eval(node.value))
    found = {str(path.relative_to(ROOT)) for path in _modules_with_property_tests()}
    assert found and found <= listed, found - listed
    assert all((ROOT / name).exists() for name in listed)
    explore = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "explore")
    assert "tags" not in ast.unparse(explore.decorator_list[0])  # not a CI session
