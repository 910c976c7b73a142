"""Go projects: ``go.mod`` (module, go version, direct requirements) and ``main`` packages."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentctx.detection.readers import Finding, clean, exists, glob, listing, read_text

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_GO_MAIN = re.compile(r"^package\s+main\b", re.MULTILINE)


def detect(root: Path) -> Iterator[Finding]:
    """Facts from ``go.mod`` and the ``main`` packages (none without a readable go.mod)."""
    text = read_text(root, "go.mod")
    if text is None:
        return
    module = version = None
    requires: list[str] = []
    in_require = False
    for raw in text.splitlines():
        indirect = "// indirect" in raw
        words = raw.split("//", 1)[0].split()
        if not words:
            continue
        if in_require:
            if words[0] == ")":
                in_require = False
            elif not indirect:
                requires.append(words[0])
        elif words[0] == "module" and len(words) > 1:
            module = clean(words[1].strip('"`'))
        elif words[0] == "go" and len(words) > 1:
            version = clean(words[1])
        elif words[0] == "require" and len(words) > 1:
            if words[1] == "(":
                in_require = True
            elif not indirect:
                requires.append(words[1])
    if module is None:
        return  # not a go.mod we can read
    yield Finding("languages", "Go", "go.mod")
    yield Finding("package_manager", "Go modules", "go.mod")
    stack = f"Go module {module}" + (f", go {version}" if version else "")
    if requires:
        stack += f"; dependencies: {listing(clean(r) for r in requires)}"
    yield Finding("stack", stack, "go.mod")
    yield Finding("test_command", "go test ./...", "go.mod")
    yield Finding("build_command", "go build ./...", "go.mod")
    linter = exists(root, ".golangci.yml", ".golangci.yaml", ".golangci.toml", ".golangci.json")
    if linter:
        yield Finding("lint_command", "golangci-lint run", linter)
    yield Finding("lint_command", "go vet ./...", "go.mod")
    yield Finding("format_command", "gofmt -l -w .", "go.mod")

    mains = []
    for path in ["main.go", *glob(root, "cmd/*/main.go")]:
        source = read_text(root, path)
        if source is not None and _GO_MAIN.search(source):
            mains.append(path)
    for path in mains:
        package_dir = "./" + path.rpartition("/")[0] if "/" in path else "."
        yield Finding("entry_points", f"main package {package_dir}", path)
    if len(mains) == 1:
        package_dir = "./" + mains[0].rpartition("/")[0] if "/" in mains[0] else "."
        yield Finding("run_command", f"go run {package_dir}", mains[0])
