"""Whole-store and settings commands: export, import, status, doctor, reset, config."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from cyclopts import App, Parameter

from agentctx import config, doctor
from agentctx.cli import Json, _err, _json, _out, _project, _with_store, app
from agentctx.core import files, home
from agentctx.core.errors import ValidationError
from agentctx.store import confine, deletion, inventory, transfer

if TYPE_CHECKING:
    from agentctx.store import Store

config_app = App(
    name="config",
    help="Read or change settings (config.json in the agentctx home).\n\n"
    "Example: agentctx config get; agentctx config set llm off",
)
app.command(config_app)


@app.command
async def export(
    *,
    format: Literal["md", "json"] = "md",
    out: Annotated[str | None, Parameter(help="Write to this file instead of stdout.")] = None,
    project: Annotated[bool, Parameter(negative="", help="Only the current project.")] = False,
) -> int:
    """Export the whole store as organized Markdown or JSON.

    Example: ``agentctx export --format json --out backup.json``.
    """
    project_id = _project().project_id if project else None

    async def action(store: Store) -> int:
        data = await transfer.export_data(store, project_id)
        if format == "json":
            payload = transfer.to_json(data)
        else:
            payload = transfer.to_markdown(data).encode()
        if out:
            await _write_file(out, payload)
            sys.stderr.write(f"exported {len(data['records'])} records to {out}\n")
        else:
            sys.stdout.buffer.write(payload)
            sys.stdout.flush()
        return 0

    return await _with_store(action, read_only=True)


async def _write_file(path: str, payload: bytes) -> None:
    # the whole store: private to the user, like the database it comes from
    await anyio.to_thread.run_sync(lambda: files.write_atomic(path, payload, mode=0o600))


#: The largest file ``import`` reads (a whole store's export is a few MB).
IMPORT_MAX_BYTES = 256 * 1024 * 1024


@app.command(name="import")
async def import_(
    file: str,
    /,
    *,
    restore: Annotated[
        bool,
        Parameter(
            negative="",
            help="Restore your own full export as written (projects, scopes, pins); "
            "says what it changes first.",
        ),
    ] = False,
    json: Json = False,
) -> int:
    """Import an export or a team file as team context of this project (records already present
    are left as they are); --restore brings back your own full export as written.

    Example: ``agentctx import .agentctx/context.md``; ``agentctx import backup.json --restore``.
    """
    try:
        # bounded, and bytes then decoded: read_text would turn \r\n into \n (a round trip
        # keeps the bytes)
        raw = await anyio.to_thread.run_sync(files.read_bounded, file, IMPORT_MAX_BYTES + 1)
        if len(raw) > IMPORT_MAX_BYTES:
            raise ValidationError(f"cannot read {file}: larger than {IMPORT_MAX_BYTES:,} bytes")
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read {file}: {exc}") from exc
    project = _project()
    data = transfer.parse(text, project_id=project.project_id)

    async def action(store: Store) -> int:
        if restore:
            for line in await confine.restore_plan(store, data):
                _err(f"restore: {line}")
            report = await transfer.import_data(store, data)
        else:
            origin = await anyio.to_thread.run_sync(confine.provenance, file)
            report = await confine.import_confined(store, data, project.project_id, origin)
        if json:
            _json(
                {
                    "added": report.added,
                    "skipped": report.skipped,
                    "superseded_on_conflict": report.superseded_on_conflict,
                    "kept_local": report.kept_local,
                    "restored": restore,
                }
            )
        else:
            added = report.added.get("records", 0)
            skipped = report.skipped.get("records", 0)
            _out(f"imported {added} records ({skipped} already present)")
            if not restore and added:
                shown = origin.removeprefix(confine.PREFIX)
                _out(f"  as team context of {project.name}, unconfirmed, from {shown}")
            if report.kept_local:
                _out(
                    f"  {len(report.kept_local)} left out: they would change records "
                    "this import did not create"
                )
        return 0

    return await _with_store(action)


@app.command
async def status(*, json: Json = False) -> int:
    """Counts by type for this project (and global records), history and sessions.

    Example: ``agentctx status``.
    """
    project = _project()

    async def action(store: Store) -> int:
        info = await inventory.status(store, project.project_id)
        info["project"] = {"id": project.project_id, "name": project.name, "root": project.root}
        engines = await anyio.to_thread.run_sync(_engines)
        if json:
            _json({**info, **{name: data for name, (data, _) in engines.items()}})
            return 0
        _out(f"project   {project.name} ({project.project_id[:12]})  {project.root}")
        store_info = info["store"]
        _out(
            f"store     {store_info['path']}: {store_info['records']} records, "
            f"{store_info['projects']} project{'' if store_info['projects'] == 1 else 's'}"
        )
        _out("current   " + ", ".join(f"{t} {n}" for t, n in info["counts"].items()))
        _out(f"history   {info['superseded']} superseded records, {info['archived']} archived")
        prune = info["prune_candidates"]
        if prune["count"]:
            _out(
                f"prune     {prune['count']} candidates (score below 0.1 for over 60 days; "
                "nothing is deleted: review with `agentctx show <id>`)"
            )
            for item in prune["records"]:
                _out(f"  {item['id']}  {item['type']:<10} {item['title'][:60]}")
        _out(
            f"sessions  {info['sessions']}, {info['tokens_injected']} tokens injected, "
            f"${info['extraction_cost_usd']:.4f} extraction cost "
            f"(all projects: {store_info['tokens_injected']} tokens in "
            f"{store_info['sessions']} sessions)"
        )
        for session in info["recent_sessions"]:
            state = "open" if not session["ended_at"] else "ended"
            _out(
                f"  {session['session_id'][:36]:<36} {(session['started_at'] or '')[:16]:<16} "
                f"{state:<5} {session['tokens_injected']:>6} tokens in "
                f"{session['injections']} injections, ${session['extraction_cost_usd']:.4f}"
            )
        for name, spent in info["extraction_today"].items():
            _out(
                f"today     {name}: {int(spent['calls'])} calls, "
                f"{int(spent['input_tokens'] + spent['output_tokens']):,} tokens "
                f"({int(spent['cache_read_tokens']):,} cache reads, "
                f"{int(spent['cache_creation_tokens']):,} cache writes), ${spent['cost_usd']:.4f}"
                + (
                    f", {int(spent['deferred'])} runs deferred by a cap"
                    if spent["deferred"]
                    else ""
                )
            )
        months = info["extraction_cost_by_month"]
        if months:
            _out("cost      " + ", ".join(f"{m} ${c:.4f}" for m, c in months.items()))
        for line in precision_lines(info["precision"]):
            _out(line)
        _out(f"llm       {engines['llm'][1]}")
        _out(f"embedding {engines['embeddings'][1]}")
        return 0

    return await _with_store(action, read_only=True)


def _engines() -> dict[str, tuple[dict[str, Any], str]]:
    """Whether the LLM (the extraction backend) and the embeddings are on: data and a line each.

    No model request and no download: ``claude auth status`` at most (as ``doctor``).
    """
    from agentctx.core import backend
    from agentctx.embeddings import backoff, models

    settings = config.load()
    choice = backend.resolve(str(settings["extraction.backend"]), bool(settings["llm"]))
    llm = {"on": choice.backend is not None, **choice.to_dict()}
    if choice.backend is not None:
        llm_line = f"on: extraction through {choice.backend} ({choice.reason})"
    elif not settings["llm"]:
        llm_line = "off: capture only (`agentctx config set llm on`)"
    else:
        llm_line = f"off: no extraction backend ({choice.reason}); capture only"
    info = models.model_info(settings)
    failed = None if info.local else backoff.waiting(info.name)
    ready = info.enabled and info.present
    embeddings = {
        "on": ready,
        **info.to_dict(),
        "download_failed": None
        if failed is None
        else {"failures": failed.failures, "next_try": failed.next_try(), "reason": failed.reason},
    }
    if not info.enabled:
        line = "off: keyword-only search (`agentctx config set embeddings on`)"
    elif ready:
        line = f"on: {info.name} ({info.folder})"
    elif info.local:
        line = f"off: the model folder {info.folder} (embedding.path) does not exist"
    elif failed is not None:
        line = f"off until the model is downloaded: {failed.note()}"
    else:
        line = (
            f"off until {info.name} is downloaded: the next consolidation does it "
            "(`agentctx model fetch` now)"
        )
    return {"llm": (llm, llm_line), "embeddings": (embeddings, line)}


def precision_lines(found: dict[str, Any]) -> list[str]:
    """``status``'s lines on the store's own precision (issue 25)."""
    lines = []
    for window in ("7d", "30d"):
        p = found[window]
        share = "no verdict yet" if p["useful_share"] is None else f"{p['useful_share']:.0%} useful"
        lines.append(
            f"precision {window:<4} {p['injections']} injections, {p['judged']} judged ({share}: "
            f"{p['used']} used, {p['ignored']} ignored, {p['wrong']} wrong), {p['unjudged']} "
            f"unjudged; {p['tokens_ignored']:,} of {p['tokens']:,} tokens on ignored or wrong"
        )
    if found["judging"] != "on":
        lines.append(f"verdicts  none are made: {found['judging']} (see `agentctx doctor`)")
    demoted = found["demoted"]
    if demoted["records"]:
        lines.append(
            f"demoted   {demoted['records']} records judged ignored again and again "
            f"(lowest prior {demoted['lowest_prior']:g})"
        )
    calibration = found["calibration"]
    for key, t in calibration["thresholds"].items():
        lines.append(
            f"tuned     {key} {t['tuned']:g} (was {t['previous']:g}, configured "
            f"{t['configured']:g}, {t['verdicts']} verdicts); in use {t['in_use']:g}"
            + ("" if calibration["auto"] else " (retrieval.auto_calibrate is off)")
        )
    return lines


@app.command(name="doctor")
def doctor_command(*, json: Json = False) -> int:
    """Check the installation: home, config, database, SQLite, FTS5, sqlite-vec, PATH, hooks, MCP, and
    the extraction backend (which one runs and why; no model request).

    Example: ``agentctx doctor``.
    """
    checks = doctor.run_checks()
    if json:
        _json(
            [
                {"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix, **c.data}
                for c in checks
            ]
        )
    else:
        for check in checks:
            mark = {True: "ok  ", False: "FAIL", None: "warn"}[check.ok]
            _out(f"{mark}  {check.name:<11} {check.detail}")
            if check.fix:
                _out(f"      {'':<11} → {check.fix}")
    return 1 if any(c.ok is False for c in checks) else 0


@app.command
def reset(*, force: Annotated[bool, Parameter(negative="")] = False) -> int:
    """Delete the current project's records (global records are kept). Asks first unless --force.

    Example: ``agentctx reset --force``.
    """
    project = _project()
    if not force:
        if not sys.stdin.isatty():
            raise ValidationError("reset deletes records: confirm interactively or pass --force")
        try:  # asked before the event loop starts, so Ctrl-C interrupts the question at once
            answer = input(f"Delete every record of {project.name} ({project.root})? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            _out("nothing deleted")
            return 1

    async def action(store: Store) -> int:
        deleted = await deletion.reset(store, project.project_id)
        _out(f"deleted {deleted} records of {project.name}")
        return 0

    return anyio.run(_with_store, action)


# -- config ----------------------------------------------------------------------------------------


#: The design's spelling (seed ADR-009), answered with the one way to do it.
NO_LLM_HINT = (
    "agentctx: `config --no-llm` is spelled `agentctx config set llm off` "
    "(`agentctx config set llm on` turns extraction back on)\n"
)


@config_app.default
def config_flags(
    *,
    no_llm: Annotated[
        bool, Parameter(negative="", help="Not a setting: says to use `config set llm off`.")
    ] = False,
) -> int:
    """Without a command: the help; ``--no-llm`` says how it is spelled.

    Example: ``agentctx config set llm off``.
    """
    if no_llm:
        sys.stderr.write(NO_LLM_HINT)
        return 2
    config_app.help_print([])
    return 0


@config_app.command(name="get")
def config_get(key: str | None = None, /, *, json: Json = False) -> int:
    """Print one setting's value, or every setting with its value, default and source.

    The source is ``default`` (not in config.json), ``config file`` or ``environment $NAME`` (a
    variable that overrides the file).

    Example: ``agentctx config get`` lists them all; ``agentctx config get llm`` prints
    ``llm = on``.
    """
    if key is not None:
        value = config.get(key)
        if json:
            _json({key: value})
        else:
            _out(f"{key} = {_shown(value)}")
        return 0
    rows = config.explain()
    if json:
        _json({r["key"]: {k: r[k] for k in ("value", "default", "source")} for r in rows})
        return 0
    width = max(len(r["key"]) + len(_shown(r["value"])) for r in rows) + 3
    for r in rows:
        head = f"{r['key']} = {_shown(r['value'])}"
        _out(f"{head:<{width}}  (default {_shown(r['default'])}; {r['source']})")
    return 0


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return '""' if value == "" else str(value)


@config_app.command(name="set")
async def config_set(key: str, value: str, /) -> int:
    """Change one setting (on/off for switches).

    Example: ``agentctx config set llm off``.
    """
    stored = await anyio.to_thread.run_sync(config.set_value, key, value)
    _out(f"{key} = {_shown(stored)}  ({home.config_path()})")
    if key == "team_export" and stored is True:
        _out(f"team file {await _team_file_now()}")
    return 0


async def _team_file_now() -> str:
    """Team export just turned on: this project's team file written now, or when it will be."""
    from pathlib import Path

    from agentctx.cli.setup import not_a_project, team_export_now
    from agentctx.store import Store

    identity = _project()
    skipped = not_a_project(Path(identity.root))
    if skipped:
        return (
            f"not written here ({skipped.split(';')[0]}); run `agentctx consolidate` in a project"
        )
    if not await anyio.Path(home.db_path()).exists():  # nothing to share, no store to make
        return "nothing to share yet: consolidation writes .agentctx/context.md once there is"
    async with await Store.open() as store:
        return (await team_export_now(store, identity))[1]
