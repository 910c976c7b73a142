"""CI runs what the README says: ``.ci/run`` runs the README's test command, which names every
session tagged ``ci`` in the noxfile."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    section = ROOT.joinpath("README.md").read_text().split("## Run the tests\n", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block is not None, "no sh block in README's test section"
    return block.group(1).strip()


def ci_sessions() -> list[str]:
    """The noxfile's sessions tagged ``ci``, read from its syntax tree."""
    found = []
    for node in ast.parse(ROOT.joinpath("noxfile.py").read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            tags = [k.value for k in getattr(deco, "keywords", []) if k.arg == "tags"]
            if tags and "ci" in ast.literal_eval(tags[0]):
                found.append(node.name)
    return found


def test_ci_runs_the_readmes_command_verbatim() -> None:
    command = readme_test_command()
    assert command.endswith("python3 -m nox -t ci")
    lines = ROOT.joinpath(".ci", "run").read_text().splitlines()
    assert lines[-1] == command  # the last thing CI does, so its exit status is CI's


def test_the_readme_names_every_ci_session() -> None:
    sessions = ci_sessions()
    assert {"lint", "typecheck", "tests", "slow", "browser", "e2e", "eval"} <= set(sessions)
    section = ROOT.joinpath("README.md").read_text().split("## Run the tests\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    for name in sessions:
        assert f"`{name}`" in section, name
