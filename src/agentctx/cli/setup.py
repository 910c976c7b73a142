"""Setup commands: ``init`` registers agentctx with Claude Code, ``uninstall`` removes exactly that."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from cyclopts import Parameter

from agentctx import config, detection
from agentctx.claude import install
from agentctx.cli import Json, _json, _out, _project, app
from agentctx.core import files, home, manifests, nofollow
from agentctx.core.errors import AgentctxError, ValidationError
from agentctx.core.project import find_git_dir
from agentctx.store import Store
from agentctx.team import export_team, team_path

if TYPE_CHECKING:
    from agentctx.core.project import ProjectIdentity

Flag = Annotated[bool, Parameter(negative="")]


@app.command
async def init(
    *,
    project: Annotated[
        bool,
        Parameter(
            negative="",
            help="Register in this project's .claude/settings.json and .mcp.json instead of the user's files.",
        ),
    ] = False,
    no_mcp: Annotated[bool, Parameter(negative="", help="Do not register the MCP server.")] = False,
    no_llm: Annotated[
        bool, Parameter(negative="", help="Turn LLM extraction off (config llm off).")
    ] = False,
    no_embeddings: Annotated[
        bool, Parameter(negative="", help="Turn local embeddings off.")
    ] = False,
    team: Annotated[
        bool,
        Parameter(
            negative="",
            help="Turn team export on: share this project's records in .agentctx/context.md.",
        ),
    ] = False,
    no_profile: Annotated[
        bool, Parameter(negative="", help="Do not record this project's profile (stack, commands).")
    ] = False,
    json: Json = False,
) -> int:
    """Set agentctx up: home, database, config, Claude Code hooks, MCP server, project profile.

    Safe to run again: files already right are not rewritten, and profile facts that did not
    change are not recorded again. The project of the current folder is profiled (its stack and
    commands): nothing is profiled outside a project, or in agentctx's own clone.

    Example: ``cd ~/src/shop && agentctx init``; ``agentctx init --project --no-llm``;
    ``agentctx init --no-profile`` (hooks and MCP only).
    """
    identity = _project()
    skipped = not_a_project(Path(identity.root))
    if project and skipped:
        raise ValidationError(f"--project registers in a project's own files, but {skipped}")
    home.ensure_home()
    tightened = home.tighten()  # a home left readable by other accounts (an older agentctx, a copy)
    config_added = await anyio.to_thread.run_sync(config.write_defaults)
    if no_llm:
        await anyio.to_thread.run_sync(config.set_value, "llm", False)
    if no_embeddings:
        await anyio.to_thread.run_sync(config.set_value, "embeddings", False)
    if team:
        await anyio.to_thread.run_sync(config.set_value, "team_export", True)
    paths = install.settings_paths(Path.home(), Path(identity.root))
    settings = paths.project_settings if project else paths.user_settings
    mcp_file = paths.project_mcp if project else paths.user_mcp
    assert settings is not None and mcp_file is not None
    inside = Path(identity.root) if project else None  # a project's files: no symlink followed
    # ``agentctx`` through PATH, or (the user's own files only) this agentctx's absolute path
    program = install.program(project=project)
    plugin = install.active_plugin(paths, Path(identity.root))
    mcp_note = ""
    edit = anyio.to_thread.run_sync  # the Claude Code files are written in a worker thread
    if plugin is not None:  # it registers both: init adds none and takes back its own, if any
        changes = [await edit(lambda: install.uninstall_hooks(settings, root=inside))]
        changes.append(
            await edit(lambda: install.uninstall_mcp(mcp_file, project=project, root=inside))
        )
    else:
        changes = [
            await edit(lambda: install.install_hooks(settings, root=inside, program=program))
        ]
        if no_mcp:
            mcp_note = "not registered (--no-mcp)"
        else:
            changes.append(
                await edit(
                    lambda: install.install_mcp(
                        mcp_file, project=project, root=inside, program=program
                    )
                )
            )
    await edit(_remember_created, [c.path for c in changes if c.action == "created"])
    recorded: list[str] = []
    async with await Store.open() as store:
        team_file, team_note = None, ""
        if not skipped:
            if not no_profile:
                recorded = await _profile(store, identity)
            if team:
                team_file, team_note = await team_export_now(store, identity)
        elif team:
            team_note = "nothing written: not in a project"
    on_path = install.which_agentctx()
    extraction, extraction_note = await anyio.to_thread.run_sync(_extraction_note)
    model, model_note = await anyio.to_thread.run_sync(_model_note)
    if json:
        _json(
            {
                "home": home.home_dir(),
                "tightened": tightened,
                "changes": [
                    {
                        "path": str(c.path),
                        "action": c.action,
                        "description": c.description,
                        "details": list(c.details),
                    }
                    for c in changes
                ],
                "profiled": not skipped and not no_profile,
                "profile_skipped": skipped or ("--no-profile" if no_profile else None),
                "profile_recorded": recorded,
                "config": {"path": home.config_path(), "defaults_added": config_added},
                "team_export": config.get("team_export"),
                "team_file": team_file,
                "agentctx_on_path": on_path,
                "registered_program": program,
                "plugin": plugin.describe() if plugin else None,
                "extraction": extraction,
                "embedding_model": model,
                "project": {
                    "id": identity.project_id,
                    "name": identity.name,
                    "root": identity.root,
                },
            }
        )
    else:
        _out(f"home      {home.home_dir()}")
        if tightened:
            _out(
                f"tightened {len(tightened)} path{'' if len(tightened) == 1 else 's'} other "
                "accounts could read or enter (now owner-only: folders 0700, files 0600)"
            )
        if plugin is not None:
            _out(
                f"plugin    {plugin.describe()} registers the hooks and the MCP server: "
                "init registers none (`claude plugin uninstall` it to let init register them)"
            )
        for change in changes:
            _out(f"{change.action:<9} {change.path} ({change.description})")
            for detail in change.details:  # one line per key a repair dropped or replaced
                _out(f"{'':<9} {detail}")
        if mcp_note:
            _out(f"mcp       {mcp_note}")
        if config_added:
            _out(f"config    {home.config_path()} (defaults written: `agentctx config get`)")
        if skipped:
            _out(f"profile   nothing profiled: {skipped}")
        elif no_profile:
            _out("profile   nothing profiled: --no-profile")
        else:
            facts = ", ".join(recorded) if recorded else "unchanged"
            _out(f"profile   profiled {identity.name} ({identity.root}): {facts}")
        if team:
            _out(f"team      team_export on: {team_note}")
        _out(f"llm       {extraction_note}")
        _out(f"model     {model_note}")
        if model["enabled"] and not model["local"] and not model["present"]:
            await _offer_fetch()
    if program != "agentctx" and plugin is None:
        _out_or_err(
            json,
            f"command   {program} ("
            + (
                f"`agentctx` on PATH is another one, {on_path}"
                if on_path
                else "no `agentctx` on PATH"
            )
            + "): the hooks and the MCP server run it by its full path; `agentctx init` again "
            "after a change of PATH"
            + ("" if on_path else f"; to type `agentctx` in a shell, {install.path_advice()}"),
        )
    elif on_path is None:
        if plugin is not None:
            why = f" (the plugin {plugin.describe()} names it so)"
        elif project:
            why = (
                " (a project's files are shared, so they never hold this machine's path; "
                "`agentctx init` without --project registers the full path in your own files)"
            )
        else:
            why = ""
        sys.stderr.write(
            "agentctx: warning: `agentctx` is not on PATH, but Claude Code runs `agentctx hook …` "
            f"through PATH{why}: {install.path_advice()}.\n"
        )
    return 0


def _out_or_err(as_json: bool, line: str) -> None:
    """A line for the user: stdout, or stderr when stdout holds JSON."""
    if as_json:
        sys.stderr.write(f"agentctx: {line}\n")
    else:
        _out(line)


async def _profile(store: Store, identity: ProjectIdentity) -> list[str]:
    """Record the project's detected profile facts that changed; return their keys."""
    await store.touch_project(identity)
    recorded: list[str] = []
    current = {
        r.key: r
        for r in await store.list_records(
            identity.project_id, types=("profile",), include_superseded=False
        )
        if r.key
    }
    signature = manifests.signature(identity.checkout)  # before the files are read
    facts = detection.detect(Path(identity.root))
    for fact in facts:
        existing = current.get(fact.key)
        if existing is not None and existing.body == fact.body.strip():
            continue
        await store.add(fact.record(identity.project_id))
        recorded.append(fact.key)
    # the hooks detect again when the manifests change (agentctx.core.manifests), not before
    await anyio.to_thread.run_sync(
        manifests.record, identity.project_id, signature, {f.key: f.body for f in facts}
    )
    return recorded


#: Files that make a folder outside git a project (init profiles it).
PROJECT_MARKERS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "Makefile",
    "CMakeLists.txt",
    "pom.xml",
    "build.gradle",
    "Gemfile",
    "composer.json",
    "CLAUDE.md",
    ".claude",
    ".agentctx",
    ".git",
)


def not_a_project(root: Path) -> str:
    """Why ``root`` is not a project to profile, or "" when it is one."""
    if _is_agentctx_clone(root):
        return (
            f"{root} is agentctx's own clone, not your project; run `agentctx init` again "
            "from your project's folder to profile it"
        )
    if find_git_dir(str(root)) is None and not any((root / m).exists() for m in PROJECT_MARKERS):
        return (
            f"{root} is not inside a project (no git work tree, no project files); run "
            "`agentctx init` again from your project's folder to profile it"
        )
    return ""


def _is_agentctx_clone(root: Path) -> bool:
    """Whether ``root`` is a clone of agentctx itself (its pyproject names agentctx's package)."""
    import tomllib

    try:
        raw = files.read_inside(root, root / "pyproject.toml", 4 * 1024 * 1024)
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, ValueError, AgentctxError):  # missing, not a file inside the root, not TOML
        return False
    table = data.get("project")
    if not isinstance(table, dict):
        return False
    scripts = table.get("scripts")
    entry = scripts.get("agentctx") if isinstance(scripts, dict) else None
    return table.get("name") == "agentctx-cc" or (
        isinstance(entry, str) and entry.startswith("agentctx.")
    )


async def team_export_now(store: Store, identity: ProjectIdentity) -> tuple[str | None, str]:
    """Write this project's team file now (consolidation keeps it current); path and a note."""
    try:
        written = await export_team(store, identity.project_id, identity.root)
    except OSError as exc:  # the setting is on; the next consolidation tries again
        return None, f"{team_path(identity.root)} not written ({exc})"
    if written is None:
        return None, (
            "nothing to share yet: consolidation (at the end of each session, or "
            "`agentctx consolidate`) writes .agentctx/context.md once there is"
        )
    return written, f"wrote {written} (commit it; teammates run `agentctx import` on it)"


@app.command
def uninstall(
    *,
    project: Annotated[
        bool,
        Parameter(negative="", help="Also remove the registrations from this project's files."),
    ] = False,
    purge: Annotated[
        bool, Parameter(negative="", help="Also delete the agentctx home (all data).")
    ] = False,
    everything: Annotated[
        bool,
        Parameter(
            name="--all",
            negative="",
            help="Everything the install added: registrations in your files and this project's, "
            "the home and all its data (asks first), the agentctx plugin and its local "
            "marketplace; then names the command that removes the tool itself.",
        ),
    ] = False,
    yes: Annotated[bool, Parameter(negative="", help="Do not ask before deleting data.")] = False,
    json: Json = False,
) -> int:
    """Remove exactly what init added to Claude Code's files; data only with --purge or --all.

    Example: ``agentctx uninstall --project``; ``agentctx uninstall --all`` (or, from the clone,
    ``sh install.sh --uninstall``, which also removes the tool).
    """
    project, purge = project or everything, purge or everything
    identity = _project()
    paths = install.settings_paths(Path.home(), Path(identity.root))
    targets = [(paths.user_settings, paths.user_mcp, False)]
    if project and paths.project_settings and paths.project_mcp:
        targets.append((paths.project_settings, paths.project_mcp, True))
    changes = []
    for settings, mcp_file, is_project in targets:
        inside = Path(identity.root) if is_project else None
        changes.append(install.uninstall_hooks(settings, root=inside))
        changes.append(install.uninstall_mcp(mcp_file, project=is_project, root=inside))
    changes = _forget_created_if_empty(changes)
    plugins = install.plugin_installs(paths, Path(identity.root))  # not init's: left installed
    plugin_notes = _remove_plugin(paths, [p.id for p in plugins]) if everything else []
    if everything:
        plugins = install.plugin_installs(paths, Path(identity.root))
    purged = False
    if purge:
        folder = home.home_dir()
        if not yes:
            if not sys.stdin.isatty():
                raise ValidationError(
                    "deleting all agentctx data needs a yes: confirm or pass --yes"
                )
            answer = input(f"Delete {folder} and every record in it? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                raise ValidationError("nothing deleted")
        if os.path.isdir(folder):
            shutil.rmtree(folder)
            purged = True
    # install.sh --uninstall removes the tool itself right after this
    tool = _tool_removal() if everything and not os.environ.get("AGENTCTX_INSTALL_SCRIPT") else None
    if json:
        _json(
            {
                "changes": [{"path": str(c.path), "action": c.action} for c in changes],
                "plugins_left": [p.id for p in plugins],
                "plugin": plugin_notes,
                "purged": purged,
                "tool": tool,
            }
        )
    else:
        for change in changes:
            _out(f"{change.action:<9} {change.path} ({change.description})")
            for detail in change.details:  # one line per key a repair dropped or replaced
                _out(f"{'':<9} {detail}")
        for note in plugin_notes:
            _out(f"plugin    {note}")
        if not everything:
            for plugin in plugins:
                _out(
                    f"plugin    {plugin.describe()} stays installed (init did not add it): "
                    f"`claude plugin uninstall {plugin.id}` removes it"
                )
        if purged:
            _out(f"deleted   {home.home_dir()}")
        if tool:
            _out(f"tool      the agentctx command stays until you run: {tool}")
    return 0


#: The marketplace this repository is registered as (``.claude-plugin/marketplace.json``).
MARKETPLACE = "agentctx-local"


def _remove_plugin(paths: install.ClaudePaths, plugin_ids: list[str]) -> list[str]:
    """Uninstall the agentctx plugin and remove its local marketplace through Claude Code's own
    CLI (its files are Claude Code's to edit); without the CLI, the commands to run."""
    import subprocess

    from agentctx.core import backend

    known = paths.user_settings.parent / "plugins" / "known_marketplaces.json"
    try:
        listed = MARKETPLACE in json_object(known)
    except (OSError, ValueError):
        listed = False
    commands = [["plugin", "uninstall", plugin_id] for plugin_id in sorted(set(plugin_ids))]
    if listed:
        commands.append(["plugin", "marketplace", "remove", MARKETPLACE])
    binary = backend.claude_binary()
    notes = []
    for command in commands:
        shown = "claude " + " ".join(command)
        if binary is None:
            notes.append(f"run `{shown}` (no claude CLI found here)")
            continue
        try:
            done = subprocess.run(
                [binary, *command], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"`{shown}` did not finish ({type(exc).__name__}): run it again")
            continue
        if done.returncode == 0:
            notes.append(f"removed: {shown}")
        else:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            notes.append(f"`{shown}` failed ({last[0][:200]}): run it again")
    return notes


def json_object(path: Path) -> dict[str, Any]:
    """A JSON file's top-level object ({} when absent); ValueError when it is something else."""
    import orjson

    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def _tool_removal() -> str:
    """The command that removes the installed ``agentctx`` tool (not done from inside it)."""
    prefix = Path(sys.prefix)
    own_uv = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local/share")
    own_uv = own_uv / "agentctx-cc" / "uv" / "bin" / "uv"
    if prefix.parent.name == "tools":  # uv tool install: <uv data>/tools/agentctx-cc
        uv = str(own_uv) if own_uv.is_file() else "uv"
        return f"{uv} tool uninstall agentctx-cc (or `sh install.sh --uninstall` from the clone)"
    if "pipx" in prefix.parts:
        return "pipx uninstall agentctx-cc"
    return f"{Path(sys.executable).parent / 'pip'} uninstall agentctx-cc"


@app.command
def hook(event: str, /) -> int:
    """Run a Claude Code hook (reads the event JSON on stdin; Claude Code calls this, not you).

    Events: session-start, user-prompt-submit, post-tool-use, pre-compact, stop, session-end,
    cwd-changed, subagent-start. Always exits 0; problems go to logs/hooks.log in the home.

    Example: ``echo '{"cwd": "/tmp"}' | agentctx hook session-start`` (what Claude Code runs)``.
    """
    from agentctx._entry import hook as run_hook

    return run_hook([event])


_STATE = "installed.json"


def _remember_created(paths: list[Path]) -> None:
    """Note the files init created, so that uninstall can remove them again when left empty."""
    import orjson

    state_path = Path(home.home_dir()) / _STATE
    try:
        known = set(orjson.loads(nofollow.read_bytes(str(state_path))).get("created", []))
    except (OSError, ValueError, AttributeError):
        known = set()
    known.update(str(p) for p in paths)
    files.write_atomic(state_path, orjson.dumps({"created": sorted(known)}))


def _forget_created_if_empty(changes: list[install.Change]) -> list[install.Change]:
    """Delete the settings files that init created and that our removal left as ``{}`` (and a
    project's ``.claude/`` folder left empty by that); ``changes`` with those said as removed."""
    import orjson

    state_path = Path(home.home_dir()) / _STATE
    try:
        created = set(orjson.loads(nofollow.read_bytes(str(state_path))).get("created", []))
    except (OSError, ValueError, AttributeError):
        return changes
    said = []
    for change in changes:
        path = change.path
        if change.action == "removed" or str(path) not in created or not path.exists():
            said.append(change)
            continue
        try:
            empty = orjson.loads(path.read_bytes()) == {}
        except (OSError, ValueError):
            said.append(change)
            continue
        if not empty:
            said.append(change)
            continue
        path.unlink()
        created.discard(str(path))
        note = "deleted the file: init created it and nothing else was in it"
        folder = path.parent
        try:  # a folder left empty (never a link: os.rmdir refuses one)
            if folder.name == ".claude" and not folder.is_symlink() and not any(folder.iterdir()):
                folder.rmdir()
                note += f"; {folder} was left empty and is deleted too"
        except OSError:
            pass
        said.append(install.Change(path, "removed", note))
    files.write_atomic(state_path, orjson.dumps({"created": sorted(created)}))
    return said


async def _offer_fetch() -> None:
    """At a terminal, offer to download the embedding model now (with the hub's progress bars);
    a refusal or a failure leaves it to the first consolidation, and init goes on."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return
    try:
        answer = await anyio.to_thread.run_sync(input, "Download it now? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        _out("model     not downloaded now: `agentctx model fetch` does it later")
        return
    from agentctx.cli.model import fetch_model
    from agentctx.core.errors import AgentctxError

    try:
        loaded = await fetch_model(config.load())
    except AgentctxError as exc:
        _out(f"model     not downloaded: {exc}")
        return
    _out(f"model     {loaded.name} ready ({loaded.dims} dimensions)")


def _model_note() -> tuple[dict[str, Any], str]:
    """The embedding model consolidation and hybrid search will use: which, how big, where, when."""
    from agentctx.embeddings import models

    info = models.model_info(config.load())
    data = {**info.to_dict(), "fetch": "agentctx model fetch"}
    if not info.enabled:
        return data, "embeddings off: consolidation and search are keyword-only (no model)"
    if info.local:
        state = "" if info.present else " (that folder does not exist: keyword-only until it does)"
        return data, f"{info.name} from {info.folder}, no download{state}"
    if info.present:
        return data, f"{info.name}, downloaded in {info.folder}"
    size = f"about {info.size_mb} MB" if info.size_mb else "size unknown"
    return data, (
        f"{info.name} ({size}) will be downloaded into {info.folder} at the first "
        "consolidation or hybrid search (search is keyword-only until then); "
        "`agentctx model fetch` downloads it now"
    )


def _extraction_note() -> tuple[dict[str, Any], str]:
    """The extraction backend init leaves in place, and what it will spend (no model request)."""
    from agentctx.core import backend

    settings = config.load()
    choice = backend.resolve(str(settings["extraction.backend"]), bool(settings["llm"]))
    data = choice.to_dict()
    if choice.backend is None:
        if not settings["llm"]:
            return data, "off"
        return data, f"on, but no extraction backend: {choice.reason} (extraction waits for one)"
    if choice.backend == backend.API:
        return data, "on, extraction through the Anthropic API (ANTHROPIC_API_KEY)"
    data["caps"] = {
        key: settings[key]
        for key in ("extraction.daily_calls", "extraction.daily_tokens", "extraction.session_calls")
    }
    note = (
        f"on, extraction through your Claude Code login ({choice.binary}): Claude Haiku calls "
        f"count against your plan's usage, at most {settings['extraction.daily_calls']} calls and "
        f"{settings['extraction.daily_tokens']:,} tokens a day "
        f"({settings['extraction.session_calls']} a session); "
        "turn it off with `agentctx config set extraction.backend off`"
    )
    if choice.warnings:
        note += "; " + " ".join(choice.warnings)
    return data, note
