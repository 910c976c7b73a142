"""Rust projects: ``Cargo.toml`` (a crate or a workspace), its binaries and library."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx.detection.readers import (
    Finding,
    exists,
    listing,
    read_toml,
    string,
    strings,
    table_at,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def detect(root: Path) -> Iterator[Finding]:
    """Facts from ``Cargo.toml`` and the crate's ``src/main.rs``, ``src/lib.rs``."""
    cargo = read_toml(root, "Cargo.toml")
    if cargo is None:
        return
    package, workspace = table_at(cargo, "package"), table_at(cargo, "workspace")
    is_workspace = isinstance(cargo.get("workspace"), dict)
    yield Finding("languages", "Rust", "Cargo.toml")
    yield Finding("package_manager", "cargo", "Cargo.toml")

    name = string(package, "name")
    parts = []
    if package:
        parts.append(" ".join(filter(None, ["Rust crate", name, string(package, "version")])))
    elif is_workspace:
        parts.append("Rust workspace")
    if edition := string(package, "edition"):
        parts.append(f"edition {edition}")
    if members := strings(workspace.get("members")):
        parts.append(f"workspace members {listing(members)}")
    dependencies = list(table_at(cargo, "dependencies")) or list(
        table_at(workspace, "dependencies")
    )
    if parts:
        stack = ", ".join(parts) + (
            f"; dependencies: {listing(dependencies)}" if dependencies else ""
        )
        yield Finding("stack", stack, "Cargo.toml")

    source = "Cargo.toml [workspace]" if is_workspace else "Cargo.toml"
    scope = " --workspace" if is_workspace else ""
    yield Finding("test_command", f"cargo test{scope}", source)
    yield Finding("build_command", f"cargo build{scope}", source)
    yield Finding("lint_command", f"cargo clippy{scope}", source)
    yield Finding("format_command", "cargo fmt --all" if is_workspace else "cargo fmt", source)

    bins: list[tuple[str, str, str]] = []  # (name, path, source)
    raw_bins = cargo.get("bin")
    for entry in raw_bins if isinstance(raw_bins, list) else []:
        bin_name = string(entry, "name") if isinstance(entry, dict) else None
        if bin_name and isinstance(entry, dict):
            path = string(entry, "path") or f"src/bin/{bin_name}.rs"
            bins.append((bin_name, path, "Cargo.toml [[bin]]"))
    if not bins and name and exists(root, "src/main.rs"):
        bins.append((name, "src/main.rs", "src/main.rs"))
    for bin_name, path, bin_source in bins:
        yield Finding("entry_points", f"bin {bin_name} ({path})", bin_source)
    if package and name and exists(root, "src/lib.rs"):
        yield Finding("entry_points", f"lib {name} (src/lib.rs)", "src/lib.rs")
    if len(bins) == 1:
        yield Finding("run_command", "cargo run", bins[0][2])
    for bin_name, _, bin_source in bins if len(bins) > 1 else []:
        yield Finding("run_command", f"cargo run --bin {bin_name}", bin_source)
