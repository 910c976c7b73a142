"""Node projects: ``package.json``, its lock files and scripts (npm, pnpm, yarn, bun)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agentctx.detection.readers import (
    Finding,
    clean,
    exists,
    listing,
    read_json,
    string,
    strings,
    table_at,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_NODE_LOCKS: Final = (
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lock", "bun"),
    ("bun.lockb", "bun"),
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
)
_NODE_SCRIPTS: Final = {
    "test": "test_command",
    "build": "build_command",
    "lint": "lint_command",
    "format": "format_command",
    "fmt": "format_command",
    "typecheck": "typecheck_command",
    "type-check": "typecheck_command",
    "dev": "run_command",
    "start": "run_command",
}


def _node_run(manager: str, script: str) -> str:
    if manager == "npm":
        return f"npm {script}" if script in ("test", "start") else f"npm run {script}"
    if manager == "yarn":
        return f"yarn {script}"
    if manager == "pnpm" and script == "test":
        return "pnpm test"
    return f"{manager} run {script}"  # "bun test" would run bun's own runner, not the script


def detect(root: Path) -> Iterator[Finding]:
    """Facts from ``package.json``, its lock files and scripts."""
    package = read_json(root, "package.json")
    if package is None:
        return
    manager, source = "npm", "package.json, no lock file"
    declared = string(package, "packageManager")
    lock = next(((f, m) for f, m in _NODE_LOCKS if exists(root, f)), None)
    if declared and declared.split("@")[0] in ("npm", "pnpm", "yarn", "bun"):
        manager, source = declared.split("@")[0], f'package.json "packageManager": {declared}'
    elif lock:
        manager, source = lock[1], lock[0]
    yield Finding("package_manager", manager, source)

    dependencies, dev = table_at(package, "dependencies"), table_at(package, "devDependencies")
    if exists(root, "tsconfig.json"):
        yield Finding("languages", "TypeScript", "tsconfig.json")
    elif "typescript" in dependencies or "typescript" in dev:
        yield Finding("languages", "TypeScript", "package.json dependencies")
    else:
        yield Finding("languages", "JavaScript", "package.json")

    name = string(package, "name")
    parts = [" ".join(filter(None, ["Node package", name, string(package, "version")]))]
    if node := string(table_at(package, "engines"), "node"):
        parts.append(f"Node {node}")
    if string(package, "type") == "module":
        parts.append("ES modules")
    workspaces = package.get("workspaces")
    if isinstance(workspaces, dict):  # yarn's {"packages": [...], "nohoist": [...]}
        workspaces = workspaces.get("packages")
    if members := strings(workspaces):
        parts.append(f"workspaces {listing(members)}")
    stack = ", ".join(parts)
    if dependencies:
        stack += f"; dependencies: {listing(dependencies)}"
    if dev:
        stack += f"; dev dependencies: {listing(dev)}"
    yield Finding("stack", stack, "package.json")

    scripts = table_at(package, "scripts")
    for script, key in _NODE_SCRIPTS.items():
        body = scripts.get(script)
        if not isinstance(body, str) or not body.strip() or "no test specified" in body:
            continue
        command = _node_run(manager, script)
        yield Finding(key, command, f"package.json scripts.{script}: {clean(body, 100)}")

    if main := string(package, "main"):
        yield Finding("entry_points", f"main {main}", "package.json main")
    bins = package.get("bin")
    if isinstance(bins, str) and name:  # "bin": "./cli.js" names the command after the package
        bins = {name: bins}
    for command, target in (bins if isinstance(bins, dict) else {}).items():
        if isinstance(target, str) and target.strip():
            yield Finding(
                "entry_points", f"bin {clean(command, 60)} = {clean(target)}", "package.json bin"
            )
