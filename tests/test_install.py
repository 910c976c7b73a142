"""Tests for agentctx.claude.install: surgical, idempotent, reversible edits of Claude Code's JSON files.

Every test edits real files in a tmp folder, starting from the fixtures in ``tests/data/settings``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.claude.install import (
    HOOK_EVENTS,
    KNOWN_HOOK_NAMES,
    ClaudePaths,
    install_hooks,
    install_mcp,
    settings_paths,
    status,
    uninstall_hooks,
    uninstall_mcp,
    which_agentctx,
)
from agentctx.claude.install.hooks import our_name
from agentctx.core.errors import ConfigError
from agentctx.hooks.runner import EVENTS as RUNNER_EVENTS

DATA = Path(__file__).parent / "data" / "settings"
SETTINGS_FIXTURES = ["empty", "other_keys", "foreign_hooks", "old_broken"]
#: fixtures already in the normalized layout and without a ``hooks`` key
NORMALIZED_NO_HOOKS = ["empty", "other_keys"]

Json = dict[str, Any]


def fixture_copy(name: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / f"{name}.json", dest)
    return dest


def load(path: Path) -> Json:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def is_ours(handler: object) -> bool:
    return our_name(handler) is not None


def strip_ours(data: Json) -> Json:
    """The settings without any handler of ours, pruning containers only our removal emptied."""
    out = copy.deepcopy(data)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = hooks[event]
        new_groups = []
        for group in groups:
            handlers = group["hooks"]
            kept = [h for h in handlers if not is_ours(h)]
            if handlers and not kept:
                continue
            new_groups.append({**group, "hooks": kept})
        if groups and not new_groups:
            del hooks[event]
        else:
            hooks[event] = new_groups
    if data["hooks"] and not hooks:
        del out["hooks"]
    return out


def ours_in(data: Json) -> list[tuple[str, Json, Json]]:
    """Every (event, group, handler) of ours in parsed settings."""
    found: list[tuple[str, Json, Json]] = []
    for event, groups in data.get("hooks", {}).items():
        for group in groups:
            found.extend((event, group, h) for h in group["hooks"] if is_ours(h))
    return found


def assert_canonical(data: Json) -> None:
    """Each of our events has exactly one handler of ours, canonical, in a correct group."""
    found = ours_in(data)
    assert sorted(event for event, _, _ in found) == sorted(HOOK_EVENTS)
    for event, group, handler in found:
        reg = HOOK_EVENTS[event]
        assert handler == reg.handler()
        if len(group["hooks"]) == 1:
            assert group.get("matcher") == reg.matcher
            assert ("matcher" in group) == (reg.matcher is not None)


def dump(data: object) -> str:
    """Order-sensitive, type-exact comparison key."""
    return json.dumps(data, ensure_ascii=False)


# --------------------------------------------------------------------------- the table


def test_hook_events_table_is_exactly_ours() -> None:
    table = {
        event: (reg.command, reg.matcher, reg.is_async, reg.timeout)
        for event, reg in HOOK_EVENTS.items()
    }
    assert table == {
        "SessionStart": ("agentctx hook session-start", "startup|resume|clear|compact", False, 10),
        "UserPromptSubmit": ("agentctx hook user-prompt-submit", None, False, 10),
        "PostToolUse": (
            "agentctx hook post-tool-use",
            "Write|Edit|MultiEdit|NotebookEdit|Bash",
            True,
            30,
        ),
        "PostToolUseFailure": ("agentctx hook post-tool-use", "Bash", True, 30),
        "PreCompact": ("agentctx hook pre-compact", None, False, 30),
        "Stop": ("agentctx hook stop", None, False, 30),
        "SessionEnd": ("agentctx hook session-end", None, False, 5),
        "CwdChanged": ("agentctx hook cwd-changed", None, False, 10),
        "SubagentStart": ("agentctx hook subagent-start", None, False, 10),
    }
    assert HOOK_EVENTS["PostToolUse"].handler() == {
        "type": "command",
        "command": "agentctx hook post-tool-use",
        "timeout": 30,
        "async": True,
    }
    assert HOOK_EVENTS["Stop"].group() == {
        "hooks": [{"type": "command", "command": "agentctx hook stop", "timeout": 30}]
    }


def test_known_names_match_the_hook_runner() -> None:
    assert set(RUNNER_EVENTS) == KNOWN_HOOK_NAMES
    for reg in HOOK_EVENTS.values():
        assert reg.event in RUNNER_EVENTS[reg.name][1]


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("agentctx hook stop", "stop"),
        ("  agentctx hook session-start\n", "session-start"),
        ("/usr/local/bin/agentctx hook stop", "stop"),
        ("/home/dev/.local/share/agentctx/0.0.9/bin/agentctx hook pre-compact", "pre-compact"),
        ("agentctx hook stop --verbose", None),
        ("agentctx hook unknown-event", None),
        ("agentctx-lookalike hook post-tool-use", None),
        ("myagentctx hook stop", None),
        ("python -m agentctx hook stop", None),
        ("agentctx  hook stop", None),
        ("agentctx hook", None),
        ("mytool-hook stop", None),
    ],
)
def test_what_counts_as_ours(command: str, name: str | None) -> None:
    assert our_name({"type": "command", "command": command}) == name


def test_non_handlers_are_not_ours() -> None:
    assert our_name("agentctx hook stop") is None
    assert our_name({"type": "command", "command": ["agentctx", "hook", "stop"]}) is None
    assert our_name({"type": "command"}) is None


# --------------------------------------------------------------------------- hooks round trips


@pytest.mark.parametrize("name", SETTINGS_FIXTURES)
def test_install_is_idempotent_and_keeps_everything_foreign(name: str, tmp_path: Path) -> None:
    path = fixture_copy(name, tmp_path / ".claude" / "settings.json")
    original = load(path)

    first = install_hooks(path)
    assert first.action == "updated"
    assert first.path == path
    installed_bytes = path.read_bytes()
    installed = load(path)
    assert_canonical(installed)
    # deep, order-sensitive equality of everything that is not ours
    assert dump(strip_ours(installed)) == dump(strip_ours(original))

    before = path.stat()
    second = install_hooks(path)
    assert second.action == "unchanged"
    assert path.read_bytes() == installed_bytes
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    removed = uninstall_hooks(path)
    assert removed.action == "updated"
    assert dump(load(path)) == dump(strip_ours(original))
    assert ours_in(load(path)) == []
    assert uninstall_hooks(path).action == "unchanged"


@pytest.mark.parametrize("name", NORMALIZED_NO_HOOKS)
def test_install_then_uninstall_restores_the_bytes(name: str, tmp_path: Path) -> None:
    path = fixture_copy(name, tmp_path / "settings.json")
    original = path.read_bytes()
    install_hooks(path)
    assert path.read_bytes() != original
    uninstall_hooks(path)
    assert path.read_bytes() == original


def test_foreign_only_file_in_its_own_layout_is_not_rewritten(tmp_path: Path) -> None:
    path = fixture_copy("foreign_hooks", tmp_path / "settings.json")
    original = path.read_bytes()
    assert b'    "model"' in original  # 4-space indent, not our layout
    assert uninstall_hooks(path).action == "unchanged"
    assert path.read_bytes() == original


def test_canonical_file_in_its_own_layout_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install_hooks(path)
    compact = json.dumps(load(path), separators=(",", ":"))
    path.write_text(compact)
    assert install_hooks(path).action == "unchanged"
    assert path.read_text() == compact


def test_install_creates_the_file_and_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".claude" / "settings.json"
    change = install_hooks(path)
    assert change.action == "created"
    assert "added 9 hook registrations" in change.description
    data = load(path)
    assert list(data) == ["hooks"]
    assert list(data["hooks"]) == list(HOOK_EVENTS)
    assert_canonical(data)
    assert path.read_text(encoding="utf-8") == json.dumps(data, indent=2) + "\n"


def test_uninstall_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "settings.json"
    assert uninstall_hooks(path).action == "unchanged"
    assert not path.parent.exists()


def test_foreign_groups_keep_their_place_and_ours_are_appended(tmp_path: Path) -> None:
    path = fixture_copy("foreign_hooks", tmp_path / "settings.json")
    original = load(path)
    install_hooks(path)
    data = load(path)
    assert list(data) == ["model", "hooks", "disableAllHooks"]
    hooks = data["hooks"]
    # existing events first, in their order; ours that were missing follow in HOOK_EVENTS order
    assert list(hooks) == [
        "SessionStart",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "Notification",
        "UserPromptSubmit",
        "PostToolUseFailure",
        "PreCompact",
        "SessionEnd",
        "CwdChanged",
        "SubagentStart",
    ]
    assert hooks["SessionStart"][0] == original["hooks"]["SessionStart"][0]
    assert hooks["SessionStart"][1] == HOOK_EVENTS["SessionStart"].group()
    assert hooks["PostToolUse"][0] == original["hooks"]["PostToolUse"][0]
    assert hooks["PostToolUse"][0]["matcher"] == "Edit|Write"
    assert hooks["PostToolUse"][1] == HOOK_EVENTS["PostToolUse"].group()
    # "agentctx hook stop --verbose" is not ours, so it stays in the foreign group
    assert hooks["Stop"][0] == original["hooks"]["Stop"][0]
    assert hooks["Stop"][1] == HOOK_EVENTS["Stop"].group()


def test_old_broken_entries_are_repaired_in_place(tmp_path: Path) -> None:
    path = fixture_copy("old_broken", tmp_path / "settings.json")
    change = install_hooks(path)
    assert change.action == "updated"
    hooks = load(path)["hooks"]
    assert list(hooks) == [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Stop",
        "PostToolUseFailure",
        "PreCompact",
        "SessionEnd",
        "CwdChanged",
        "SubagentStart",
    ]
    # our group was first and stays first: matcher fixed, absolute path and timeout repaired
    assert hooks["SessionStart"] == [
        HOOK_EVENTS["SessionStart"].group(),
        {
            "matcher": "startup|resume",
            "hooks": [{"type": "command", "command": "direnv export json"}],
        },
    ]
    # the duplicate group (same command with stray spaces) is gone
    assert hooks["UserPromptSubmit"] == [HOOK_EVENTS["UserPromptSubmit"].group()]
    # ours shared a foreign group with another matcher: it moves out, the foreign handler stays
    assert hooks["PostToolUse"] == [
        {
            "matcher": "Edit|Write",
            "hooks": [{"type": "command", "command": "ruff format --quiet", "timeout": 20}],
        },
        HOOK_EVENTS["PostToolUse"].group(),
    ]
    # "/usr/local/bin/agentctx hook stop" with a matcher and async: back to the canonical form
    assert hooks["Stop"] == [HOOK_EVENTS["Stop"].group()]
    # ours under an event we no longer register is removed with the group and event it emptied
    assert "SubagentStop" not in hooks
    assert "added 5" in change.description
    assert "repaired 3" in change.description
    assert "removed 2" in change.description


def test_repair_of_a_group_without_matcher_puts_the_matcher_first(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    handler = {"type": "command", "command": "agentctx hook session-start", "timeout": 10}
    path.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [handler]}]}}))
    install_hooks(path)
    group = load(path)["hooks"]["SessionStart"][0]
    assert list(group) == ["matcher", "hooks"]
    assert group == HOOK_EVENTS["SessionStart"].group()


def test_ours_in_a_shared_group_with_an_equivalent_matcher_stays(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    foreign = {"type": "command", "command": "mytool-hook stop"}
    ours = {"type": "command", "command": "/opt/bin/agentctx hook stop"}
    path.write_text(json.dumps({"hooks": {"Stop": [{"matcher": "*", "hooks": [foreign, ours]}]}}))
    install_hooks(path)
    stop = load(path)["hooks"]["Stop"]
    assert stop == [{"matcher": "*", "hooks": [foreign, HOOK_EVENTS["Stop"].handler()]}]
    uninstall_hooks(path)
    assert load(path)["hooks"]["Stop"] == [{"matcher": "*", "hooks": [foreign]}]


def test_uninstall_keeps_foreign_empty_groups_and_prunes_only_what_it_emptied(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    data = {
        "hooks": {
            "Stop": [
                {"hooks": []},
                {"hooks": [{"type": "command", "command": "agentctx hook stop"}]},
            ],
            "SessionEnd": [
                {"hooks": [{"type": "command", "command": "agentctx hook session-end"}]}
            ],
        },
        "model": "opus",
    }
    path.write_text(json.dumps(data))
    change = uninstall_hooks(path)
    assert change.description == "removed 2 agentctx hook handlers"
    assert load(path) == {"hooks": {"Stop": [{"hooks": []}]}, "model": "opus"}


def test_uninstall_removes_the_hooks_key_it_emptied(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"hooks": {"Stop": [{"hooks": [{"command": "agentctx hook stop"}]}]}}')
    uninstall_hooks(path)
    assert path.read_text() == "{}\n"


def test_uninstall_leaves_malformed_foreign_parts_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    data = {"hooks": {"Weird": "not a list", "Stop": ["not a group", {"hooks": "nope"}]}}
    path.write_text(json.dumps(data))
    assert uninstall_hooks(path).action == "unchanged"
    install_hooks(path)
    installed = load(path)
    assert installed["hooks"]["Weird"] == "not a list"
    assert installed["hooks"]["Stop"][:2] == ["not a group", {"hooks": "nope"}]
    uninstall_hooks(path)
    assert load(path) == data


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "not valid JSON"),  # the invalid.json fixture: a trailing comma
        ('{"model": "opus",}', "not valid JSON"),
        ('{"a": NaN}', "not valid JSON"),
        (b'{"a": "\xff"}', "not valid JSON"),
        ("[]", "top level is a JSON array"),
        ('"hooks"', "top level is a JSON string"),
        ('{"hooks": []}', "'hooks' is a JSON array"),
        ('{"hooks": null}', "'hooks' is a JSON null"),
        ('{"hooks": {"Stop": {"hooks": []}}}', "'hooks.Stop' is a JSON object"),
    ],
)
def test_bad_settings_raise_and_stay_untouched(
    content: str | bytes | None, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "settings.json"
    if content is None:
        fixture_copy("invalid", path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    original = path.read_bytes()
    with pytest.raises(ConfigError, match=message) as info:
        install_hooks(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == original
    if "hooks.Stop" not in message:  # uninstall does not need our events to be lists
        with pytest.raises(ConfigError, match=message):
            uninstall_hooks(path)
        assert path.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temp file left


def test_invalid_json_message_carries_the_parse_error(tmp_path: Path) -> None:
    path = fixture_copy("invalid", tmp_path / "settings.json")
    with pytest.raises(ConfigError, match=r"line 6 column 5"):
        install_hooks(path)


def test_blank_file_counts_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("  \n")
    assert uninstall_hooks(path).action == "unchanged"
    assert install_hooks(path).action == "updated"
    assert_canonical(load(path))


def test_a_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b'\xef\xbb\xbf{"model": "opus"}')
    install_hooks(path)
    assert load(path)["model"] == "opus"


# --------------------------------------------------------------------------- file handling


def test_file_mode_is_preserved(tmp_path: Path) -> None:
    path = fixture_copy("other_keys", tmp_path / "settings.json")
    path.chmod(0o640)
    install_hooks(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    uninstall_hooks(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_symlinked_settings_keep_their_link(tmp_path: Path) -> None:
    dotfiles = fixture_copy("other_keys", tmp_path / "dotfiles" / "claude-settings.json")
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    install_hooks(link)
    assert link.is_symlink()
    assert_canonical(load(dotfiles))
    uninstall_hooks(link)
    assert link.is_symlink()
    assert dotfiles.read_bytes() == (DATA / "other_keys.json").read_bytes()


def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    path = fixture_copy("foreign_hooks", tmp_path / "settings.json")
    install_hooks(path)
    uninstall_hooks(path)
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_change_renders_as_one_line(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    change = install_hooks(path)
    assert str(change) == f"created: {path} (added 9 hook registrations)"
    assert "\n" not in str(change)


# --------------------------------------------------------------------------- MCP


def test_user_claude_json_keeps_all_its_state(tmp_path: Path) -> None:
    path = fixture_copy("claude_json", tmp_path / ".claude.json")
    original_bytes = path.read_bytes()
    original = load(path)

    change = install_mcp(path, project=False)
    assert change.action == "updated"
    data = load(path)
    assert list(data) == list(original)
    assert list(data["mcpServers"]) == ["github", "agentctx"]
    assert data["mcpServers"]["agentctx"] == {
        "type": "stdio",
        "command": "agentctx",
        "args": ["mcp"],
    }
    data["mcpServers"].pop("agentctx")
    assert dump(data) == dump(original)  # every other key, value and order

    assert install_mcp(path, project=False).action == "unchanged"
    assert uninstall_mcp(path, project=False).action == "updated"
    assert path.read_bytes() == original_bytes  # it was in the normalized layout
    assert uninstall_mcp(path, project=False).action == "unchanged"


def test_user_claude_json_is_never_deleted(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    assert install_mcp(path, project=False).action == "created"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 & ~_umask()
    assert uninstall_mcp(path, project=False).action == "updated"
    assert path.read_text() == "{}\n"


def test_local_scope_entries_are_not_ours(tmp_path: Path) -> None:
    path = fixture_copy("claude_json", tmp_path / ".claude.json")
    project_servers = load(path)["projects"]["/home/dev/src/shop"]["mcpServers"]
    install_mcp(path, project=False)
    uninstall_mcp(path, project=False)
    assert load(path)["projects"]["/home/dev/src/shop"]["mcpServers"] == project_servers


def test_project_mcp_json_is_created_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "repo" / ".mcp.json"
    assert install_mcp(path, project=True).action == "created"
    assert load(path) == {
        "mcpServers": {"agentctx": {"type": "stdio", "command": "agentctx", "args": ["mcp"]}}
    }
    assert install_mcp(path, project=True).action == "unchanged"
    change = uninstall_mcp(path, project=True)
    assert change.action == "removed"
    assert not path.exists()
    assert uninstall_mcp(path, project=True).action == "unchanged"


def test_project_mcp_json_with_other_servers_is_kept(tmp_path: Path) -> None:
    path = fixture_copy("mcp_project", tmp_path / ".mcp.json")
    original = path.read_bytes()
    install_mcp(path, project=True)
    assert list(load(path)["mcpServers"]) == ["postgres", "agentctx"]
    assert uninstall_mcp(path, project=True).action == "updated"
    assert path.read_bytes() == original


def test_mcp_entry_is_repaired_and_keeps_env_in_the_users_own_file(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    old = {
        "command": "/opt/agentctx/0.0.9/bin/agentctx",
        "args": ["mcp", "--debug"],
        "env": {"AGENTCTX_HOME": "/data/agentctx"},
        "cwd": "/tmp",
    }
    path.write_text(json.dumps({"mcpServers": {"agentctx": old}}))
    change = install_mcp(path, project=False)
    assert change.description.startswith("repaired MCP server 'agentctx'")
    assert load(path)["mcpServers"]["agentctx"] == {
        "type": "stdio",
        "command": "agentctx",
        "args": ["mcp"],
        "env": {"AGENTCTX_HOME": "/data/agentctx"},
    }
    assert [line.split(":")[0] for line in change.details] == [
        "replaced 'command' of MCP server 'agentctx'",
        "replaced 'args' of MCP server 'agentctx'",
        "dropped 'cwd' from MCP server 'agentctx'",
    ]
    assert install_mcp(path, project=False).action == "unchanged"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"mcpServers": ["agentctx"]}', "'mcpServers' is a JSON array"),
        ("1", "top level is a JSON number"),
    ],
)
def test_bad_mcp_files_raise_and_stay_untouched(content: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    path.write_text(content)
    for call in (install_mcp, uninstall_mcp):
        with pytest.raises(ConfigError, match=message):
            call(path, project=False)
        assert path.read_text() == content


# --------------------------------------------------------------------------- paths, status, PATH


def test_settings_paths_default(tmp_path: Path) -> None:
    paths = settings_paths(tmp_path / "home", tmp_path / "repo", environ={})
    assert paths == ClaudePaths(
        user_settings=tmp_path / "home" / ".claude" / "settings.json",
        user_mcp=tmp_path / "home" / ".claude.json",
        project_settings=tmp_path / "repo" / ".claude" / "settings.json",
        project_mcp=tmp_path / "repo" / ".mcp.json",
    )
    user_only = settings_paths(tmp_path / "home", None, environ={"CLAUDE_CONFIG_DIR": "  "})
    assert user_only.project_settings is None
    assert user_only.project_mcp is None
    assert user_only.user_mcp == tmp_path / "home" / ".claude.json"


def test_settings_paths_honor_claude_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    paths = settings_paths(tmp_path / "home", tmp_path / "repo")
    assert paths.user_settings == tmp_path / "cc" / "settings.json"
    assert paths.user_mcp == tmp_path / "cc" / ".claude.json"
    assert paths.project_settings == tmp_path / "repo" / ".claude" / "settings.json"


def test_status_reports_ok_stale_missing_and_errors(tmp_path: Path) -> None:
    paths = settings_paths(tmp_path / "home", tmp_path / "repo", environ={})
    report = status(paths)
    assert set(report["user"]["hooks"].values()) == {"missing"}
    assert report["user"]["mcp"] == "missing"
    assert report["user"]["errors"] == []
    assert report["project"] is not None
    assert report["project"]["settings"] == str(paths.project_settings)

    install_hooks(paths.user_settings)
    install_mcp(paths.user_mcp, project=False)
    report = status(paths)
    assert set(report["user"]["hooks"].values()) == {"ok"}
    assert report["user"]["mcp"] == "ok"
    assert report["user"]["hooks_disabled"] is False
    assert report["project"] is not None
    assert set(report["project"]["hooks"].values()) == {"missing"}

    data = load(paths.user_settings)
    data["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = 1
    del data["hooks"]["Stop"]
    data["disableAllHooks"] = True
    paths.user_settings.write_text(json.dumps(data))
    report = status(paths)
    assert report["user"]["hooks"]["SessionEnd"] == "stale"
    assert report["user"]["hooks"]["Stop"] == "missing"
    assert report["user"]["hooks"]["SessionStart"] == "ok"
    assert report["user"]["hooks_disabled"] is True

    assert paths.project_mcp is not None
    paths.project_mcp.parent.mkdir(parents=True)
    paths.project_mcp.write_text('{"mcpServers": {"agentctx": {"command": "agentctx"}}}')
    assert paths.project_settings is not None
    paths.project_settings.parent.mkdir(parents=True)
    paths.project_settings.write_text("{oops")
    report = status(paths)
    assert report["project"] is not None
    assert report["project"]["mcp"] == "stale"
    assert set(report["project"]["hooks"].values()) == {"error"}
    assert len(report["project"]["errors"]) == 1
    assert str(paths.project_settings) in report["project"]["errors"][0]


def test_status_without_a_project(tmp_path: Path) -> None:
    report = status(settings_paths(tmp_path, None, environ={}))
    assert report["project"] is None


def test_which_agentctx_follows_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert which_agentctx() is None
    assert status(settings_paths(tmp_path, None, environ={}))["agentctx"] is None
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "agentctx"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(empty), str(bindir)]))
    assert which_agentctx() == str(exe)


# --------------------------------------------------------------------------- property test

FOREIGN_COMMANDS = [
    "mytool-hook stop",
    "agentctx hook stop --verbose",
    "agentctx hook unknown",
    "agentctx-lookalike hook stop",
    "~/.claude/hooks/guard.sh",
    "python -m agentctx hook stop",
]
OUR_COMMANDS = [
    "agentctx hook stop",
    "agentctx hook session-start",
    " /usr/local/bin/agentctx hook post-tool-use",
    "/opt/agentctx/bin/agentctx hook user-prompt-submit",
]
EVENTS = [*HOOK_EVENTS, "PreToolUse", "Notification", "SubagentStop"]

keys = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=10)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)
handlers = st.fixed_dictionaries(
    {"type": st.just("command"), "command": st.sampled_from(FOREIGN_COMMANDS + OUR_COMMANDS)},
    optional={"timeout": st.integers(1, 600), "async": st.booleans(), "statusMessage": keys},
)
groups = st.fixed_dictionaries(
    {"hooks": st.lists(handlers, min_size=1, max_size=3)},
    optional={"matcher": st.sampled_from(["", "*", "Bash", "Edit|Write", "startup"])},
)
hook_maps = st.dictionaries(
    st.sampled_from(EVENTS), st.lists(groups, min_size=1, max_size=3), min_size=1, max_size=5
)
settings_docs = st.dictionaries(keys.filter(lambda k: k != "hooks"), values, max_size=4).flatmap(
    lambda top: st.one_of(st.just(top), hook_maps.map(lambda hooks: {**top, "hooks": hooks}))
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=settings_docs)
def test_property_install_uninstall_round_trip(doc: Json) -> None:
    """uninstall(install(x)) == x without ours; install is idempotent; foreign parts never move."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "settings.json"
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        install_hooks(path)
        installed = path.read_bytes()
        assert_canonical(load(path))
        assert dump(strip_ours(load(path))) == dump(strip_ours(doc))
        assert install_hooks(path).action == "unchanged"
        assert path.read_bytes() == installed
        uninstall_hooks(path)
        assert dump(load(path)) == dump(strip_ours(doc))


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def test_unreachable_paths_raise_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot read it"):
        install_hooks(blocker / "settings.json")
    with pytest.raises(ConfigError, match="cannot read it"):
        install_mcp(blocker / ".mcp.json", project=True)
    report = status(settings_paths(blocker, None, environ={}))
    assert set(report["user"]["hooks"].values()) == {"error"}
    assert report["user"]["mcp"] == "error"
    assert len(report["user"]["errors"]) == 2


def test_a_wrong_handler_of_ours_is_replaced_where_it_was(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    wrong = {"hooks": [{"type": "command", "command": "agentctx hook session-start"}]}
    path.write_text(json.dumps({"hooks": {"Stop": [wrong], "PreToolUse": []}}))
    change = install_hooks(path)
    hooks = load(path)["hooks"]
    assert list(hooks)[:2] == ["Stop", "PreToolUse"]  # Stop keeps its place
    assert hooks["Stop"] == [HOOK_EVENTS["Stop"].group()]
    assert hooks["PreToolUse"] == []
    assert "removed 1 duplicate or stale handler" in change.description
