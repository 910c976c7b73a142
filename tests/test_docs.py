"""The generated tables of docs/spec.md (settings, MCP tools) match the code: docs/generate.py.

The generator runs in a subprocess, as ``nox -s docs`` runs it. A failure here means the code
changed and the spec did not: run ``nox -s docs`` (or ``python docs/generate.py``) and commit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from agentctx.config import SETTINGS
from agentctx.mcp.server import TOOLS

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "docs" / "generate.py"
SPEC = ROOT / "docs" / "spec.md"


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_spec_tables_are_up_to_date() -> None:
    result = generate("--check")
    assert result.returncode == 0, result.stderr


def test_a_stale_table_is_found_and_rewritten(tmp_path: Path) -> None:
    spec = tmp_path / "spec.md"
    stale = (
        "# spec\n\n<!-- generated:config -->\n| `llm` | bool | `false` | old |\n"
        "<!-- /generated:config -->\n\ntext kept\n\n"
        "<!-- generated:mcp-tools -->\n<!-- /generated:mcp-tools -->\n"
    )
    spec.write_text(stale, encoding="utf-8")

    check = generate("--check", "--spec", str(spec))
    assert check.returncode == 1
    assert "out of date" in check.stderr
    assert spec.read_text(encoding="utf-8") == stale

    assert generate("--spec", str(spec)).returncode == 0
    fresh = spec.read_text(encoding="utf-8")
    assert "| old |" not in fresh
    assert fresh.startswith("# spec\n\n<!-- generated:config -->\n| Key |")
    assert "\ntext kept\n" in fresh
    for key in SETTINGS:
        assert f"| `{key}` |" in fresh
    for tool, _title, _annotations in TOOLS:
        assert f"| `{tool.__name__}` |" in fresh
    assert generate("--check", "--spec", str(spec)).returncode == 0


def test_missing_markers_are_an_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.md"
    spec.write_text("# spec without markers\n", encoding="utf-8")
    result = generate("--spec", str(spec))
    assert result.returncode == 1
    assert "lacks the markers <!-- generated:config -->" in result.stderr
    assert spec.read_text(encoding="utf-8") == "# spec without markers\n"


def spec_sections() -> set[str]:
    """The section numbers of spec.md's headings: ``5``, ``5.3``, …"""
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", SPEC.read_text("utf-8"), re.MULTILINE))


def test_references_to_spec_sections_resolve() -> None:
    """Every "§N" in spec.md, "spec §N" in the other docs and "docs/spec.md, N" in the code names a
    section spec.md has, so renumbering the spec cannot leave a reference dangling."""
    sections = spec_sections()
    assert {"1", "5.3", "16"} <= sections
    found: list[tuple[str, str]] = []
    found += [("docs/spec.md", ref) for ref in re.findall(r"§(\d+(?:\.\d+)?)", SPEC.read_text())]
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path != SPEC:
            text = path.read_text("utf-8")
            found += [
                (path.name, ref) for ref in re.findall(r"spec(?:\.md\))? §(\d+(?:\.\d+)?)", text)
            ]
    for path in sorted((ROOT / "src").rglob("*.py")):
        text = path.read_text("utf-8")
        refs = re.findall(r"spec §(\d+(?:\.\d+)?)|docs/spec\.md, (\d+(?:\.\d+)?)", text)
        found += [(path.name, a or b) for a, b in refs]
    assert len(found) > 20
    dangling = [(where, ref) for where, ref in found if ref.rstrip(".") not in sections]
    assert dangling == []


def test_the_feature_table_names_tests_that_exist() -> None:
    """Every test file or folder the feature table (docs/development.md) cites is in ``tests/``
    (or, for ``benchmarks/…``, in the repository), so the table cannot point at evidence that is
    gone."""
    text = (ROOT / "docs" / "development.md").read_text("utf-8")
    table = text.split("## What works today\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 15
    cited = [name for row in rows[1:] for name in re.findall(r"`([\w/.]+(?:\.py|/))`", row)]
    assert len(cited) > 25
    missing = [
        name
        for name in cited
        if not (ROOT / "tests" / name).exists() and not (ROOT / name).exists()
    ]
    assert missing == []
