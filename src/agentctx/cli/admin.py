"""Whole-store and settings commands: export, import, status, doctor, reset, config."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Literal

import anyio
from cyclopts import App, Parameter

from agentctx import config, doctor
from agentctx.cli import Json, _json, _out, _project, _with_store, app
from agentctx.core import home
from agentctx.core.errors import ValidationError
from agentctx.store import deletion, inventory, transfer

if TYPE_CHECKING:
    from agentctx.store import Store

config_app = App(name="config", help="Read or change settings (config.json in the agentctx home).")
app.command(config_app)


@app.command
async def export(
    *,
    format: Literal["md", "json"] = "md",
    out: Annotated[str | None, Parameter(help="Write to this file instead of stdout.")] = None,
    project: Annotated[bool, Parameter(negative="", help="Only the current project.")] = False,
) -> int:
    """Export the whole store as organized Markdown or JSON."""
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
    tmp = f"{path}.{os.getpid()}.tmp"
    await anyio.Path(tmp).write_bytes(payload)
    os.replace(tmp, path)


@app.command(name="import")
async def import_(file: str, *, json: Json = False) -> int:
    """Import a JSON or Markdown export; records already present (same id) are left as they are."""
    try:
        # bytes, then decoded: read_text would turn \r\n into \n (a round trip keeps the bytes)
        text = (await anyio.Path(file).read_bytes()).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read {file}: {exc}") from exc
    data = transfer.parse(text)

    async def action(store: Store) -> int:
        report = await transfer.import_data(store, data)
        if json:
            _json(
                {
                    "added": report.added,
                    "skipped": report.skipped,
                    "superseded_on_conflict": report.superseded_on_conflict,
                }
            )
        else:
            added = report.added.get("records", 0)
            skipped = report.skipped.get("records", 0)
            _out(f"imported {added} records ({skipped} already present)")
        return 0

    return await _with_store(action)


@app.command
async def status(*, json: Json = False) -> int:
    """Counts by type for this project (and global records), history and sessions."""
    project = _project()

    async def action(store: Store) -> int:
        info = await inventory.status(store, project.project_id)
        info["project"] = {"id": project.project_id, "name": project.name, "root": project.root}
        if json:
            _json(info)
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
        months = info["extraction_cost_by_month"]
        if months:
            _out("cost      " + ", ".join(f"{m} ${c:.4f}" for m, c in months.items()))
        return 0

    return await _with_store(action, read_only=True)


@app.command(name="doctor")
def doctor_command(*, json: Json = False) -> int:
    """Check the installation: home, config, database, SQLite, FTS5, sqlite-vec, PATH, hooks, MCP, API key."""
    checks = doctor.run_checks()
    if json:
        _json([{"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix} for c in checks])
    else:
        for check in checks:
            mark = {True: "ok  ", False: "FAIL", None: "warn"}[check.ok]
            _out(f"{mark}  {check.name:<11} {check.detail}")
            if check.fix:
                _out(f"      {'':<11} → {check.fix}")
    return 1 if any(c.ok is False for c in checks) else 0


@app.command
def reset(*, force: Annotated[bool, Parameter(negative="")] = False) -> int:
    """Delete the current project's records (global records are kept). Asks first unless --force."""
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


@config_app.command(name="get")
def config_get(key: str | None = None, *, json: Json = False) -> int:
    """Print one setting, or all of them."""
    values = config.load() if key is None else {key: config.get(key)}
    if json:
        _json(values)
    else:
        for name, value in values.items():
            shown = ("on" if value else "off") if isinstance(value, bool) else value
            _out(f"{name} = {shown}")
    return 0


@config_app.command(name="set")
def config_set(key: str, value: str) -> int:
    """Change one setting (on/off for switches)."""
    stored = config.set_value(key, value)
    shown = ("on" if stored else "off") if isinstance(stored, bool) else stored
    _out(f"{key} = {shown}  ({home.config_path()})")
    return 0
