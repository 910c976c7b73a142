"""Write the generated tables of docs/spec.md from the code: the settings and the MCP tools.

Each table sits between two marker comments in spec.md::

    <!-- generated:NAME -->
    ...
    <!-- /generated:NAME -->

``python docs/generate.py`` rewrites every block in place (``nox -s docs`` runs it);
``python docs/generate.py --check`` changes nothing and exits 1 when a block is out of date
(tests/test_docs.py runs that). The output depends only on the code, so it is the same on every
machine.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

SPEC = Path(__file__).with_name("spec.md")
BEGIN = "<!-- generated:{name} -->"
END = "<!-- /generated:{name} -->"


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _value(value: Any) -> str:
    """A default value as the spec writes it: JSON in backticks."""
    return f"`{json.dumps(value)}`"


def config_table() -> str:
    """The settings of ``config.json``: key, kind, default and meaning (``agentctx.config``)."""
    from agentctx import config

    lines = ["| Key | Kind | Default | Meaning |", "|---|---|---|---|"]
    for key, (kind, default, meaning) in config.SETTINGS.items():
        lines.append(f"| `{key}` | {_cell(kind)} | {_value(default)} | {_cell(meaning)} |")
    return "\n".join(lines)


def _schema_type(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    """A short name for a JSON schema's type: ``integer 1–15``, ``decision | convention``, …"""
    if "$ref" in schema:
        return _schema_type(defs[str(schema["$ref"]).rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        parts = [_schema_type(part, defs) for part in schema["anyOf"]]
        return " or ".join(part for part in parts if part != "null") or "null"
    if "enum" in schema:
        return " \\| ".join(f"`{item}`" for item in schema["enum"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        item = _schema_type(schema.get("items", {}), defs)
        low, high = schema.get("minItems"), schema.get("maxItems")
        size = f", {low}–{high} items" if low is not None and high is not None else ""
        if not size and high is not None:
            size = f", at most {high} items"
        return f"array of {item}{size}"
    if kind == "string" and "maxLength" in schema:
        return f"string of at most {schema['maxLength']:,} characters"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"{kind} {low}–{high}"
    return kind


def _tools() -> list[Any]:
    """The tools the MCP server registers, as ``tools/list`` publishes them."""
    from agentctx.mcp.server import create_server

    # The project folder only names the project; listing the tools opens no store.
    server = create_server(str(SPEC.parent))
    return list(anyio.run(server.list_tools))


def _inputs(schema: Mapping[str, Any]) -> str:
    """A tool's input fields for one table cell: ``name``* (type, default): meaning, one per line."""
    required = set(schema.get("required", ()))
    defs = schema.get("$defs", {})
    fields: Mapping[str, Mapping[str, Any]] = schema.get("properties", {})
    lines = []
    for name, field in fields.items():
        details = [_schema_type(field, defs)]
        if "default" in field and field["default"] is not None:
            details.append(f"default {_value(field['default'])}")
        star = "\\*" if name in required else ""
        meaning = _cell(str(field.get("description", "")))
        lines.append(f"`{name}`{star} ({', '.join(details)})" + (f": {meaning}" if meaning else ""))
    return "<br>".join(lines) or "—"


def mcp_tools_table() -> str:
    """The MCP tools: name, read-only annotation, description and input fields (``*`` required)."""
    lines = ["| Tool | Read-only | Description | Inputs (`*` required) |", "|---|---|---|---|"]
    for tool in _tools():
        read_only = "yes" if tool.annotations and tool.annotations.read_only_hint else "no"
        lines.append(
            f"| `{tool.name}` | {read_only} | {_cell(tool.description or '')} | "
            f"{_inputs(tool.input_schema)} |"
        )
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[], str]] = {"config": config_table, "mcp-tools": mcp_tools_table}


def render(text: str, blocks: Mapping[str, Callable[[], str]] = BLOCKS) -> str:
    """``text`` with every generated block rewritten; ValueError when a block's markers are
    missing or out of order."""
    for name, build in blocks.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        start = text.find(begin)
        stop = text.find(end, start + 1) if start >= 0 else -1
        if start < 0 or stop < 0:
            raise ValueError(f"spec.md lacks the markers {begin} … {end}")
        head = text[: start + len(begin)]
        text = f"{head}\n{build()}\n{text[stop:]}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=inspect.cleandoc(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a block is out of date")
    parser.add_argument("--spec", type=Path, default=SPEC, help="the file to update (spec.md)")
    args = parser.parse_args(argv)
    path: Path = args.spec
    text = path.read_text(encoding="utf-8")
    try:
        fresh = render(text)
    except ValueError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 1
    if fresh == text:
        return 0
    if args.check:
        print(f"{path}: generated tables are out of date; run `nox -s docs`", file=sys.stderr)
        return 1
    path.write_text(fresh, encoding="utf-8")
    print(f"{path}: generated tables rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
