"""The facts a session needs first (issue 25, item 4): a real project folder through ``agentctx
init`` and the real SessionStart and UserPromptSubmit hooks (subprocesses)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentctx.core import essentials, search
from agentctx.retrieval import digest
from tests.helpers import contract, payload, run_cli, run_hook

if TYPE_CHECKING:
    from pathlib import Path

PYPROJECT = """\
[project]
name = "ledgerly"
version = "0.3.1"
dependencies = ["fastapi>=0.110", "sqlalchemy>=2", "pydantic>=2", "httpx", "alembic", "celery"]

[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.ruff]
line-length = 100

[tool.mypy]
strict = true
"""
MAKEFILE = "test:\n\tpytest -q\nlint:\n\truff check .\nbuild:\n\tpython -m build\n"
PACKAGE_JSON = {
    "name": "ledgerly-ui",
    "scripts": {"test": "vitest run", "lint": "eslint .", "build": "vite build",
                "dev": "vite", "format": "prettier -w ."},
    "dependencies": {"react": "18", "react-dom": "18", "zustand": "4"},
    "devDependencies": {"vite": "5", "vitest": "1", "eslint": "8", "typescript": "5"},
}  # fmt: skip


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "Makefile").write_text(MAKEFILE)
    (root / "package.json").write_text(json.dumps(PACKAGE_JSON))
    (root / "package-lock.json").write_text("{}")
    (root / "noxfile.py").write_text(
        "import nox\n\n@nox.session\ndef tests(session):\n    session.run('pytest')\n"
    )
    return root


def init(root: Path) -> None:
    done = run_cli("init", "--no-mcp", "--no-llm", "--no-embeddings", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "profiled" in done.stdout


def test_the_digest_keeps_test_lint_build_and_stack(tmp_path: Path) -> None:
    root = make_project(tmp_path / "ledgerly")
    init(root)
    text = contract(
        run_hook("session-start", payload("SessionStart", "s-1", root, source="startup"), cwd=root),
        "SessionStart",
    )
    assert text is not None
    profile = text.split("## Project profile\n", 1)[1].split("\n\n", 1)[0]
    lines = profile.splitlines()
    # the four essentials, first and in this order, each with its command or stack
    assert [line.split("] ", 1)[1].split(":", 1)[0] for line in lines[:4]] == [
        "Test command", "Lint command", "Build command", "Stack",
    ]  # fmt: skip
    assert "make test" in lines[0] and "make lint" in lines[1] and "make build" in lines[2]
    assert "ledgerly" in lines[3]


def test_a_tight_budget_shortens_the_essentials_instead_of_dropping_them() -> None:
    def row(key: str, title: str, body: str) -> dict[str, str]:
        return {"id": f"id-{key}", "type": "profile", "title": title, "body": body, "key": key,
                "confidence": "explicit", "source": "cli"}  # fmt: skip

    long = "; ".join(f"tool{n} run --all (from Makefile target 'x{n}')" for n in range(12))
    rows = [row(k, essentials_title(k), long) for k in reversed(essentials.PROFILE_ORDER)]
    lines = digest._profile_lines(rows)
    fitted, _ids = digest._fit("## Project profile", lines, digest.BUDGETS["profile"])
    for key in essentials.ESSENTIAL:
        assert f"] {essentials_title(key)}: tool0 run --all" in fitted  # shortened, not dropped
    assert "(from Makefile" not in fitted.split("\n", 5)[1]


def essentials_title(key: str) -> str:
    from agentctx.detection import FACT_TITLES

    return FACT_TITLES[key]


def test_a_prompt_asking_for_the_tests_gets_the_test_command(tmp_path: Path) -> None:
    root = make_project(tmp_path / "ledgerly")
    init(root)
    asked = run_hook(
        "user-prompt-submit",
        payload("UserPromptSubmit", "s-2", root, prompt="how do I run the tests here?"),
        cwd=root,
    )
    text = contract(asked, "UserPromptSubmit")
    assert text is not None and "] Test command\n" in text and "make test" in text
    lint = contract(
        run_hook(
            "user-prompt-submit",
            payload("UserPromptSubmit", "s-3", root, prompt="what's the lint command?"),
            cwd=root,
        ),
        "UserPromptSubmit",
    )
    assert lint is not None and "] Lint command\n" in lint
    # a prompt that only shares a word with them asks for none
    other = run_hook(
        "user-prompt-submit",
        payload("UserPromptSubmit", "s-4", root, prompt="add tests for the parser edge cases"),
        cwd=root,
    )
    assert contract(other, "UserPromptSubmit") is None


def test_which_prompts_ask_for_a_fact() -> None:
    def asked(prompt: str) -> list[str]:
        return essentials.asked_keys(search.query_terms(prompt))

    assert asked("how do I run the tests here?") == ["test_command"]
    assert asked("How do we build this?") == ["build_command"]
    assert asked("what stack is this project") == ["stack"]
    assert asked("run pytest on the parser module") == ["test_command"]
    assert asked("build a new endpoint for invoices") == []
    assert asked("the build fails with a linker error") == []
    assert asked("thanks, that works") == []
