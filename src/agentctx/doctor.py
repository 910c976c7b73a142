"""Health checks behind ``agentctx doctor``: what works, what does not, and how to fix it.

Each check is independent and never raises; a failed check carries the next step to take.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentctx import config
from agentctx.core import backend, db, home, schema
from agentctx.core.errors import UPGRADE_ADVICE, AgentctxError

if TYPE_CHECKING:
    import sqlean


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: ``ok`` is True (fine), False (broken) or None (degraded but working)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""
    #: more for ``doctor --json`` (the extraction check: the backend, why, its warnings)
    data: dict[str, Any] = field(default_factory=dict)


def run_checks() -> list[Check]:
    """Every check, in the order ``doctor`` prints them."""
    checks = [_check_home(), _check_disk(), _check_config()]
    checks.extend(_check_database())
    checks.extend(_check_claude_code())
    checks.append(_check_extraction())
    checks.append(_check_model())
    checks.append(_check_vectors())
    checks.extend(_check_team_hub())
    return checks


def _check_team_hub() -> list[Check]:
    """The team hubs this home's projects are linked to (none: no check at all)."""
    from agentctx.core import hubstamp

    if not os.path.exists(hubstamp.path()) or not os.path.exists(home.db_path()):
        return []
    try:
        import anyio

        from agentctx.team.hub import doctor as hub_doctor
    except ImportError:
        from agentctx.team.hub import MISSING

        return [Check("team hub", False, MISSING, "pip install 'agentctx-cc[team]'")]
    return [Check(*found) for found in anyio.run(hub_doctor.checks)]


#: What search and consolidation do without the embedding model (doctor says so).
WITHOUT_MODEL = (
    "search is keyword-only (no ranking by meaning) and consolidation merges only near-identical "
    "wording"
)


def _check_model() -> Check:
    """Does the configured embedding model load (from local files: doctor never downloads)?"""
    from agentctx.embeddings import models

    try:
        settings = config.load()
        info = models.model_info(settings)
    except AgentctxError as exc:
        return Check("model", False, str(exc), f"fix or delete {home.config_path()}")
    data = {"model": info.to_dict()}
    if not info.enabled:
        return Check(
            "model",
            None,
            f"embeddings off: {WITHOUT_MODEL}",
            "agentctx config set embeddings on",
            data,
        )
    if not info.present:
        if info.local:
            detail = f"{info.name}: the model folder {info.folder} does not exist"
            fix = "agentctx config set embedding.path FOLDER (an existing model folder)"
        else:
            size = f", about {info.size_mb} MB" if info.size_mb else ""
            detail = f"{info.name} not downloaded yet (into {info.folder}{size})"
            fix = "agentctx model fetch (or it is fetched at the first consolidation)"
        return Check("model", None, f"{detail}: {WITHOUT_MODEL}", fix, data)
    try:
        loaded = models.load_local(settings)
    except models.ModelUnavailable as exc:
        fix = "agentctx model fetch" if not info.local else "check the files of embedding.path"
        return Check("model", None, f"{exc}: {WITHOUT_MODEL}", fix, data)
    return Check(
        "model",
        True,
        f"{loaded.name} loads ({loaded.dims} dimensions) from {info.folder}",
        "",
        data,
    )


def _check_vectors() -> Check:
    """Which model the stored vectors belong to, against the configured one; the re-embed."""
    from agentctx.core import plan, vectors
    from agentctx.embeddings import models, reembed

    path = home.db_path()
    if not os.path.exists(path):
        return Check("vectors", None, "no database yet", _CREATE_HINT)
    try:
        settings = config.load()
        conn, _caps = _open_for_checks(path)
        try:
            state = reembed.status_of(
                plan.run(conn, vectors.space()), plan.run(conn, vectors.counts())
            )
        finally:
            conn.close()
    except Exception as exc:  # the database check above says what is wrong with the file
        return Check("vectors", None, f"unreadable ({' '.join(str(exc).split())[:200]})")
    configured = models.model_id(settings)
    enabled = bool(settings.get("embeddings", True))
    data: dict[str, Any] = {**state.to_dict(), "configured": configured if enabled else None}
    stored = f"{state.model} ({state.dims} dimensions)" if state.model else None
    counted = f"{state.embedded} records with vectors, {state.pending} pending"
    reembed_cmd = "agentctx model reembed (or the next consolidation)"
    if state.dims is None:
        detail = "the store predates recorded models; any agentctx command migrates it"
        return Check("vectors", None, detail, "agentctx status", {"vectors": data})
    if enabled and state.model is not None and state.model != configured:
        data["status"] = "pending"
        detail = (
            f"stored vectors belong to {stored}, the configured model is {configured}: "
            f"re-embed pending ({counted}); until then search is keyword-only"
        )
        return Check("vectors", None, detail, reembed_cmd, {"vectors": data})
    if state.reembed_total and state.pending:
        data["status"] = "running"
        detail = (
            f"re-embedding with {stored}: {state.reembedded} of {state.reembed_total} records "
            f"done since {state.switched_at}; the rest are found by keywords until embedded"
        )
        return Check("vectors", None, detail, reembed_cmd, {"vectors": data})
    data["status"] = "current"
    if state.model is None:
        detail = (
            f"{state.dims}-dimensional vectors of an unrecorded model ({counted}); "
            f"the next embedding run records {configured} as theirs"
            if state.embedded
            else f"no vectors yet ({counted})"
        )
        return Check("vectors", True, detail, "", {"vectors": data})
    return Check("vectors", True, f"{stored}: {counted}", "", {"vectors": data})


def _check_claude_code() -> list[Check]:
    """Are the hooks and the MCP server registered, and do they point at a working agentctx?"""
    from pathlib import Path

    from agentctx.claude import install
    from agentctx.core.project import identify

    project = identify(os.getcwd())
    report = install.status(install.settings_paths(Path.home(), Path(project.root)))
    checks: list[Check] = []
    on_path = report["agentctx"]
    scopes = [("user", report["user"])]
    if report["project"] is not None:
        scopes.append(("project", report["project"]))
    plugin = report["plugin"]
    # what the registered hooks run, and whether Claude Code can start it
    programs = sorted({p for _, scope in scopes if scope for p in scope["programs"]})
    if plugin:
        programs = sorted({*programs, "agentctx"})  # the plugin's hooks.json names it so
    found = {p: install.runs(p) for p in programs}
    if on_path:
        checks.append(Check("on PATH", True, on_path))
    elif programs and "agentctx" not in programs and all(found.values()):
        checks.append(
            Check(
                "on PATH",
                None,
                "`agentctx` is not on PATH; the hooks run it by its full path",
                install.path_advice(),
            )
        )
    else:
        checks.append(
            Check(
                "on PATH",
                False,
                "`agentctx` is not on PATH: Claude Code cannot run the hooks",
                install.path_advice(),
            )
        )
    for name, where in found.items():
        if where is not None:
            shown = f"{name} (found at {where})" if name != where else name
            checks.append(Check("command", True, f"the hooks run {shown}", ""))
        else:
            if name == "agentctx":  # a project's files or the plugin: shared, so never a path
                missing = "is not on PATH"
                fix = (
                    f"{install.path_advice()}; or `agentctx init` (your own files get the full "
                    "path, a project's files and the plugin cannot)"
                )
            else:
                missing = "does not exist"
                fix = "run `agentctx init` again from the agentctx you use (it registers its path)"
            checks.append(
                Check(
                    "command",
                    False,
                    f"the hooks run {name}, which {missing}: every hook fails",
                    fix,
                )
            )
    registered = [
        name for name, scope in scopes if scope and all(v == "ok" for v in scope["hooks"].values())
    ]
    stale = [
        f"{name}: {', '.join(e for e, v in scope['hooks'].items() if v != 'ok')}"
        for name, scope in scopes
        if scope and any(v == "stale" for v in scope["hooks"].values())
    ]
    errors = [e for _, scope in scopes if scope for e in scope["errors"]]
    ours = [n for n, s in scopes if s and any(v != "missing" for v in s["hooks"].values())]
    if plugin and ours:
        checks.append(
            Check(
                "hooks",
                None,
                f"registered twice: by the plugin {plugin} and in {', '.join(ours)} settings",
                "`agentctx uninstall` (add --project for a project's files) removes init's; "
                "the plugin's stay",
            )
        )
    elif plugin:
        checks.append(Check("hooks", True, f"registered by the plugin {plugin}"))
    elif errors:
        checks.append(
            Check("hooks", False, "; ".join(errors), "fix the JSON, then `agentctx init`")
        )
    elif registered and not stale:
        where = ", ".join(f"{n} ({s['settings']})" for n, s in scopes if n in registered)
        disabled = any(s["hooks_disabled"] for _, s in scopes if s)
        checks.append(
            Check("hooks", None, f"registered in {where} but disableAllHooks is set", "unset it")
            if disabled
            else Check("hooks", True, f"registered in {where}")
        )
    elif stale:
        checks.append(
            Check("hooks", None, "out of date: " + "; ".join(stale), "run `agentctx init`")
        )
    else:
        checks.append(
            Check("hooks", False, "not registered with Claude Code", "run `agentctx init`")
        )
    mcp = [n for n, s in scopes if s and s["mcp"] == "ok"] + (["plugin"] if plugin else [])
    stale_mcp = [n for n, s in scopes if s and s["mcp"] == "stale"]
    checks.append(
        Check("mcp", True, "registered (" + ", ".join(mcp) + ")")
        if mcp
        else Check("mcp", None, f"out of date: {', '.join(stale_mcp)}", "run `agentctx init`")
        if stale_mcp
        else Check("mcp", None, "the MCP server is not registered", "run `agentctx init`")
    )
    return checks


def _check_extraction() -> Check:
    """Which extraction backend runs and why (``claude auth status`` at most: no model request)."""
    try:
        settings = config.load()
    except AgentctxError as exc:
        return Check("extraction", False, str(exc), f"fix or delete {home.config_path()}")
    choice = backend.resolve(str(settings["extraction.backend"]), bool(settings["llm"]))
    data = {"extraction": choice.to_dict()}
    if choice.backend is None:
        if not settings["llm"]:
            fix = "agentctx config set llm on"
        elif choice.configured == backend.OFF:
            fix = "agentctx config set extraction.backend auto"
        else:
            fix = (
                "export ANTHROPIC_API_KEY=… where Claude Code runs, or sign in to Claude Code "
                "(`claude login`) for the claude-code backend"
            )
        return Check("extraction", None, f"none, capture only: {choice.reason}", fix, data)
    detail = f"{choice.backend}: {choice.reason}"
    if choice.backend == backend.CLAUDE_CODE:
        detail += (
            f"; at most {settings['extraction.daily_calls']} calls and "
            f"{settings['extraction.daily_tokens']:,} tokens a day, "
            f"{settings['extraction.session_calls']} a session"
        )
        if choice.auth_method == backend.HELPER_METHOD:
            detail += "; apiKeyHelper login: the user settings are read with every hook disabled"
    if choice.warnings:
        return Check(
            "extraction", None, f"{detail}; {' '.join(choice.warnings)}", "claude login", data
        )
    return Check("extraction", True, detail, "", data)


def _check_home() -> Check:
    path = home.home_dir()
    refused = home.distrust()  # another account owns it or can write to it (or a folder above)
    if refused is not None:
        detail, _, fix = refused.partition("; ")
        return Check("home", False, detail, fix)
    if not os.path.isdir(path):
        return Check("home", None, f"{path} does not exist yet", _CREATE_HINT)
    if not db.writable(path):
        return Check(
            "home",
            False,
            f"{path} is read-only or not writable: nothing can be recorded, and the hooks can "
            "only read (injection still works, capture is lost)",
            f"make it writable: chmod u+w {path} (or remount it read-write, or point "
            "AGENTCTX_HOME at a writable folder)",
        )
    exposed = home.loose()
    if exposed:
        shown = ", ".join(exposed[:3]) + (
            f" and {len(exposed) - 3} more" if len(exposed) > 3 else ""
        )
        return Check(
            "home",
            False,
            f"other accounts on this machine can read or enter {shown}",
            "run `agentctx init` (it makes the home owner-only: folders 0700, files 0600)",
        )
    return Check("home", True, path)


#: Below this, doctor warns before the disk fills (the store grows by a few MB per year of use).
LOW_DISK_WARN_BYTES = 64 * 1024 * 1024


def _check_disk() -> Check:
    path = home.home_dir()
    free = db.free_bytes(path)
    if free is None:
        return Check("disk", None, f"free space on the disk of {path} unknown")
    shown = (
        f"{free / (1024 * 1024):.1f} MB free" if free < 1024**3 else f"{free / 1024**3:.1f} GB free"
    )
    if free < db.LOW_DISK_BYTES:
        return Check(
            "disk",
            False,
            f"the disk holding {path} is full ({free // 1024} KB free): nothing can be recorded, "
            "and SQLite cannot even open the store to read it",
            "free some space on that disk (or point AGENTCTX_HOME at another disk)",
        )
    limit = db.file_size_limit()
    if limit is not None and db.unwritable_reason(home.db_path()) == "limit":
        return Check(
            "disk",
            False,
            f"the file size limit (ulimit -f) is {limit} bytes: SQLite cannot grow the store, "
            "nor even open it to read",
            "raise it: ulimit -f unlimited, in the shell or service that starts Claude Code",
        )
    if free < LOW_DISK_WARN_BYTES:
        return Check("disk", None, f"{shown} on the disk holding {path}", "free some space soon")
    return Check("disk", True, shown)


def _check_config() -> Check:
    found = config.problems()
    if found:
        return Check("config", False, "; ".join(found), f"edit or delete {home.config_path()}")
    return Check("config", True, home.config_path())


def _check_database() -> list[Check]:
    path = home.db_path()
    checks = [Check("python", True, f"{sys.version.split()[0]} at {sys.executable}")]
    if not os.path.exists(path):
        checks.append(Check("database", None, f"{path} does not exist yet", _CREATE_HINT))
        try:  # read-only: the write policy asks for WAL, which an in-memory database refuses
            probe, caps = db.connect(":memory:", readonly=True)
        except AgentctxError as exc:
            fix = "reinstall the driver: pip install -U --force-reinstall sqlean.py"
            return [*checks, Check("sqlite", False, str(exc), fix)]
        probe.close()
    else:
        try:
            conn, caps = _open_for_checks(path)
        except AgentctxError as exc:
            return [*checks, _database_failure(path, exc)]
        try:
            version = schema.schema_version(conn)
            integrity = conn.execute("PRAGMA quick_check").fetchone()[0]
            records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        except Exception as exc:
            return [*checks, _database_failure(path, exc)]
        finally:
            conn.close()
        if version > schema.SCHEMA_VERSION:
            checks.append(
                Check(
                    "database",
                    False,
                    f"schema version {version} is newer than this agentctx "
                    f"({schema.SCHEMA_VERSION})",
                    UPGRADE_ADVICE,
                )
            )
        elif integrity != "ok":
            found = " ".join(str(integrity).split())[:300]
            checks.append(
                Check("database", False, f"damaged: integrity check: {found}", _repair_hint(path))
            )
        else:
            checks.append(Check("database", True, f"{path} (schema {version}, {records} records)"))
    checks.append(Check("sqlite", True, f"SQLite {caps.sqlite_version} (sqlean.py)"))
    checks.append(
        Check("fts5", True, "available")
        if caps.fts5
        else Check("fts5", None, "missing: search uses LIKE", "install a sqlean.py wheel with FTS5")
    )
    checks.append(
        Check("sqlite-vec", True, caps.vec_version or "")
        if caps.vec_version
        else Check(
            "sqlite-vec",
            None,
            f"not loaded ({caps.vec_error}): vectors use numpy",
            "pip install -U sqlite-vec",
        )
    )
    return checks


def _open_for_checks(path: str) -> tuple[sqlean.Connection, db.Capabilities]:
    """A read connection; where no WAL index can be made (read-only, full) an immutable one."""
    try:
        return db.connect(path, create=False, readonly=True)
    except AgentctxError as exc:
        if db.unwritable_reason(path) is None or db.fault(exc.__cause__ or exc, path) == "damaged":
            raise
    return db.connect(path, create=False, immutable=True)


def _database_failure(path: str, exc: BaseException) -> Check:
    """The database check for a store that cannot be read, with the fix for its cause."""
    cause = exc.__cause__ if isinstance(exc, AgentctxError) and exc.__cause__ else exc
    kind = db.fault(cause, path)
    folder = os.path.dirname(path)
    fixes = {
        "full": "free some space on its disk (see the disk check above), then run doctor again",
        "limit": "raise the file size limit (see the disk check above), then run doctor again",
        "readonly": f"make {folder} writable (see the home check above), then run doctor again",
        "busy": "another agentctx process holds the store: retry in a moment",
        "io": "check the disk (dmesg, fsck); if the file itself is damaged: " + _repair_hint(path),
    }
    detail = str(exc).split("; see `agentctx doctor`")[0]
    return Check("database", False, detail, fixes.get(kind, _repair_hint(path)))


# Any command that opens the store (``status``, ``record``, ...) creates the home and the database.
_CREATE_HINT = "run `agentctx init` (or any command creates it)"


def _repair_hint(path: str) -> str:
    # The -wal file goes too: SQLite would replay a stale one into the new, empty store.
    return (
        f"move it aside: mv {path} {path}.broken (and {path}-wal and {path}-shm likewise, if "
        "present); the next agentctx command creates a new, empty store; then restore your "
        "records with `agentctx import FILE` from an earlier `agentctx export`, if you have one"
    )
