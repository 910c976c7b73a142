"""The Claude Code plugin in the repository, and ``init`` / ``uninstall`` / ``doctor`` beside it.

The plugin's files must register exactly what ``agentctx init`` registers (the same hooks, the same
MCP entry); a plugin install is detected from Claude Code's own files, and ``init`` then registers
nothing. The real CLI validates and installs the plugin in tests/e2e/test_plugin.py.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agentctx.claude import install
from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugin"
PLUGIN_ID = "agentctx@agentctx-local"


def read(path: Path) -> Any:
    return json.loads(path.read_text())


# -- the files -------------------------------------------------------------------------------------


def test_the_plugin_registers_what_init_registers() -> None:
    hooks = read(PLUGIN / "hooks" / "hooks.json")["hooks"]
    expected: dict[str, list[dict[str, Any]]] = {}
    for event, reg in install.HOOK_EVENTS.items():
        expected.setdefault(event, []).append(reg.group())
    assert hooks == expected
    assert read(PLUGIN / ".mcp.json") == {"mcpServers": {"agentctx": dict(install.MCP_ENTRY)}}


def test_manifest_and_marketplace_name_the_plugin_and_its_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    manifest = read(PLUGIN / ".claude-plugin" / "plugin.json")
    assert manifest["name"] == install.PLUGIN_NAME and manifest["version"] == version
    assert (PLUGIN / manifest["hooks"]).resolve() == PLUGIN / "hooks" / "hooks.json"
    assert (PLUGIN / manifest["mcpServers"]).resolve() == PLUGIN / ".mcp.json"
    marketplace = read(ROOT / ".claude-plugin" / "marketplace.json")
    assert f"{install.PLUGIN_NAME}@{marketplace['name']}" == PLUGIN_ID
    (entry,) = marketplace["plugins"]
    assert (entry["name"], entry["version"]) == (install.PLUGIN_NAME, version)
    assert (ROOT / entry["source"]).resolve() == PLUGIN


# -- detection -------------------------------------------------------------------------------------


def installed(
    user_home: Path, scope: str, project: Path | None = None, *, enabled_in: Path | None = None
) -> None:
    """Write what ``claude plugin install`` leaves (CLI 2.1.332): the listing and the switch."""
    entry: dict[str, Any] = {
        "scope": scope,
        "installPath": str(user_home / "cache"),
        "version": "0.1.0",
    }
    if project is not None:
        entry["projectPath"] = str(project)
    listing = user_home / ".claude" / "plugins" / "installed_plugins.json"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps({"version": 2, "plugins": {PLUGIN_ID: [entry]}}))
    if enabled_in is not None:
        enabled_in.parent.mkdir(parents=True, exist_ok=True)
        data = read(enabled_in) if enabled_in.exists() else {}
        data.setdefault("enabledPlugins", {})[PLUGIN_ID] = True
        enabled_in.write_text(json.dumps(data))


def switch(settings: Path, value: bool) -> None:
    settings.parent.mkdir(parents=True, exist_ok=True)
    data = read(settings) if settings.exists() else {}
    data.setdefault("enabledPlugins", {})[PLUGIN_ID] = value
    settings.write_text(json.dumps(data))


def test_a_user_install_applies_everywhere_and_a_switch_turns_it_off(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    paths = install.settings_paths(home, project, environ={})
    assert install.plugin_installs(paths, project) == []
    installed(home, "user", enabled_in=paths.user_settings)
    active = install.active_plugin(paths, project)
    assert active is not None and active.describe() == f"{PLUGIN_ID} (user scope, enabled)"
    # the project's local settings win over the user's
    switch(project / ".claude" / "settings.local.json", False)
    assert install.active_plugin(paths, project) is None
    (found,) = install.plugin_installs(paths, project)
    assert not found.enabled


def test_a_project_install_applies_to_its_project_only(tmp_path: Path) -> None:
    home, project, other = tmp_path / "home", tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    installed(home, "project", project, enabled_in=project / ".claude" / "settings.json")
    here = install.settings_paths(home, project, environ={})
    there = install.settings_paths(home, other, environ={})
    assert install.active_plugin(here, project) is not None
    assert install.active_plugin(there, other) is None
    assert install.plugin_installs(there, None) == []


def test_claude_config_dir_moves_the_listing(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    paths = install.settings_paths(
        tmp_path / "home", None, environ={"CLAUDE_CONFIG_DIR": str(config_dir)}
    )
    listing = config_dir / "plugins" / "installed_plugins.json"
    listing.parent.mkdir(parents=True)
    listing.write_text(json.dumps({"plugins": {PLUGIN_ID: [{"scope": "user"}]}}))
    switch(config_dir / "settings.json", True)
    assert install.active_plugin(paths, None) is not None


@pytest.mark.parametrize(
    "listing",
    ["", "not json", "[]", '{"plugins": []}', '{"plugins": {"agentctx@x": {"scope": "user"}}}'],
)
def test_unreadable_listings_count_as_no_plugin(tmp_path: Path, listing: str) -> None:
    paths = install.settings_paths(tmp_path, None, environ={})
    path = tmp_path / ".claude" / "plugins" / "installed_plugins.json"
    path.parent.mkdir(parents=True)
    path.write_text(listing)
    switch(paths.user_settings, True)
    assert install.plugin_installs(paths, None) == []


def test_another_plugin_is_not_ours(tmp_path: Path) -> None:
    paths = install.settings_paths(tmp_path, None, environ={})
    path = tmp_path / ".claude" / "plugins" / "installed_plugins.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"plugins": {"agentctx-extra@x": [{"scope": "user"}]}}))
    paths.user_settings.write_text(json.dumps({"enabledPlugins": {"agentctx-extra@x": True}}))
    assert install.plugin_installs(paths, None) == []


# -- init, uninstall, doctor -----------------------------------------------------------------------


def cli_json(*args: str, cwd: Path) -> Any:
    result = run_cli(*args, "--json", cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def our_hooks(settings: Path) -> list[str]:
    if not settings.exists():
        return []
    data = read(settings)
    return [
        h["command"]
        for groups in data.get("hooks", {}).values()
        for g in groups
        for h in g["hooks"]
        if h["command"].startswith("agentctx hook")
    ]


def test_init_defers_to_the_plugin_and_takes_its_own_back(
    agentctx_home: Path, project_dir: Path
) -> None:
    user_home = Path.home()  # the agentctx_home fixture points HOME at a fresh folder
    settings = user_home / ".claude" / "settings.json"
    user_mcp = user_home / ".claude.json"

    first = cli_json("init", "--no-llm", "--no-embeddings", cwd=project_dir)
    assert first["plugin"] is None and len(our_hooks(settings)) == len(install.HOOK_EVENTS)
    assert "agentctx" in read(user_mcp)["mcpServers"]

    installed(user_home, "user", enabled_in=settings)
    again = cli_json("init", "--no-llm", "--no-embeddings", cwd=project_dir)
    assert again["plugin"] == f"{PLUGIN_ID} (user scope, enabled)"
    assert {c["action"] for c in again["changes"]} == {"updated"}  # init's own, removed
    assert our_hooks(settings) == []
    assert "agentctx" not in read(user_mcp).get("mcpServers", {})
    assert read(settings)["enabledPlugins"] == {PLUGIN_ID: True}  # the plugin's switch stays

    text = run_cli("init", "--no-llm", "--no-embeddings", cwd=project_dir)
    assert text.returncode == 0, text.stderr
    assert f"plugin    {PLUGIN_ID} (user scope, enabled) registers the hooks" in text.stdout
    assert our_hooks(settings) == []

    doctor = {c["name"]: c for c in cli_json("doctor", cwd=project_dir)}
    assert doctor["hooks"]["ok"] is True
    assert (
        doctor["hooks"]["detail"] == f"registered by the plugin {PLUGIN_ID} (user scope, enabled)"
    )
    assert doctor["mcp"]["ok"] is True and "plugin" in doctor["mcp"]["detail"]

    listing = user_home / ".claude" / "plugins" / "installed_plugins.json"
    before = (listing.read_bytes(), settings.read_bytes())
    removed = cli_json("uninstall", cwd=project_dir)
    assert removed["plugins_left"] == [PLUGIN_ID]
    assert (listing.read_bytes(), settings.read_bytes()) == before  # not init's: left alone


def test_doctor_flags_a_double_registration(agentctx_home: Path, project_dir: Path) -> None:
    user_home = Path.home()
    settings = user_home / ".claude" / "settings.json"
    assert run_cli("init", "--no-llm", "--no-embeddings", cwd=project_dir).returncode == 0
    installed(user_home, "user", enabled_in=settings)  # the plugin installed after init
    doctor = {c["name"]: c for c in cli_json("doctor", cwd=project_dir)}
    assert doctor["hooks"]["ok"] is None
    assert doctor["hooks"]["detail"].startswith(f"registered twice: by the plugin {PLUGIN_ID}")
    assert "agentctx uninstall" in doctor["hooks"]["fix"]
    # the remedy doctor names works, and leaves the plugin
    assert run_cli("uninstall", cwd=project_dir).returncode == 0
    doctor = {c["name"]: c for c in cli_json("doctor", cwd=project_dir)}
    assert doctor["hooks"]["ok"] is True
