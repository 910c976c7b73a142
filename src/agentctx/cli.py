"""The ``agentctx`` command line: a thin adapter over the library.

Each command opens the store, awaits one library call and renders the result as text or, with
``--json``, as objects keyed by the record fields. Library errors (:class:`AgentctxError`) and
database errors become one line on stderr and exit code 1; usage errors are cyclopts' own messages
with exit code 2; an interrupt exits with 130.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import orjson
import sqlean
from cyclopts import App, CycloptsError, Parameter

from agentctx import __version__, clock, config, doctor, home, transfer
from agentctx.errors import AgentctxError, ConflictError, ValidationError
from agentctx.project import ProjectIdentity, identify
from agentctx.records import NewRecord, Record
from agentctx.store import SearchQuery, Store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

app = App(
    name="agentctx",
    help="A structured, versioned context layer for Claude Code.",
    version=__version__,
    help_format="plaintext",
)
config_app = App(name="config", help="Read or change settings (config.json in the agentctx home).")
app.command(config_app)

Json = Annotated[bool, Parameter(name="--json", negative="", help="Print JSON.")]


def run(argv: list[str]) -> int:
    """Run the CLI on ``argv``; return the process exit code."""
    try:
        result = app(argv, exit_on_error=False, print_error=True, result_action="return_value")
    except AgentctxError as exc:
        return _error(str(exc))
    except sqlean.Error as exc:  # a damaged or unreadable file surfacing mid-query
        return _error(
            f"the database at {home.db_path()} failed ({exc}); run `agentctx doctor` for a fix"
        )
    except CycloptsError:  # usage errors, already printed by cyclopts
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("agentctx: interrupted\n")
        return 130
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return result if isinstance(result, int) else 0


def _error(message: str) -> int:
    sys.stderr.write(f"agentctx: error: {message}\n")
    return 1


# -- helpers ---------------------------------------------------------------------------------------


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _project() -> ProjectIdentity:
    return identify(os.getcwd())


async def _with_store(action: Callable[[Store], Awaitable[int | None]]) -> int:
    store = await Store.open()
    try:
        return (await action(store)) or 0
    finally:
        await store.close()


def _age(stamp: str) -> str:
    days = clock.age_days(stamp)
    if days < 1 / 24:
        return f"{max(1, int(days * 1440))}m"
    if days < 1:
        return f"{int(days * 24)}h"
    return f"{int(days)}d"


def _line(record: Record, score: float | None = None) -> str:
    flags = ("*" if record.pinned else "") + ("" if record.is_current else " superseded")
    extra = f" {score:.2f}" if score is not None else ""
    return (
        f"{record.id}  {record.type:<10} {record.title}  "
        f"[{record.scope}, {record.confidence}, {_age(record.valid_from)}{extra}{flags}]"
    )


def _show(record: Record) -> None:
    _out(f"{record.title}")
    _out(f"  id          {record.id}")
    _out(f"  type        {record.type} ({record.scope}, {record.confidence})")
    session = f", session {record.session_id}" if record.session_id else ""
    _out(f"  source      {record.source}{session}")
    _out(f"  valid from  {record.valid_from}   recorded {record.recorded_at}")
    if record.pinned:
        _out("  pinned      yes")
    if record.key:
        _out(f"  key         {record.key}")
    if record.keywords:
        _out(f"  keywords    {record.keywords}")
    if record.rationale:
        _out(f"  rationale   {record.rationale}")
    if record.superseded_by:
        successor = record.superseded_by
        _out(f"  SUPERSEDED  at {record.superseded_at} by {successor} (agentctx show {successor})")
    _out()
    _out(record.body)


# -- records ---------------------------------------------------------------------------------------


_TYPES_HELP = "decision, convention, preference, discovery, bugfix, handover, profile"
_KEY_HELP = "Profile key (a new profile record supersedes the current one with the same key)."


@app.command
async def record(
    *,
    type: Annotated[str, Parameter(help=_TYPES_HELP)],
    title: str,
    body: str,
    scope: Literal["project", "global"] = "project",
    confidence: Literal["explicit", "inferred", "reinforced"] = "explicit",
    pin: Annotated[bool, Parameter(negative="")] = False,
    supersedes: str | None = None,
    key: Annotated[str | None, Parameter(help=_KEY_HELP)] = None,
    keywords: Annotated[str, Parameter(help="Extra search words, space-separated (up to 8).")] = "",
    json: Json = False,
) -> int:
    """Record a fact explicitly (source cli)."""
    project = _project()
    new = NewRecord(
        type=type,
        title=title,
        body=body,
        project_id=project.project_id,
        scope=scope,
        confidence=confidence,
        source="cli",
        pinned=pin,
        supersedes=supersedes,
        key=key,
        keywords=keywords,
    )

    async def action(store: Store) -> int:
        created = await store.add(new)
        # Only after a successful write: a refused record leaves no trace, not even a project row.
        await store.touch_project(project)
        if json:
            _json(created.to_dict())
        else:
            _out(f"recorded {created.id}  {created.type}: {created.title}")
        return 0

    return await _with_store(action)


_ALL_HELP = "Include superseded records (history)."


@app.command
async def search(
    query: str,
    *,
    type: Annotated[list[str] | None, Parameter(help="Only these types (repeatable).")] = None,
    scope: Literal["all", "project", "global"] = "all",
    as_of: Annotated[str | None, Parameter(help="What was true then: ISO date or time.")] = None,
    all: Annotated[bool, Parameter(negative="", help=_ALL_HELP)] = False,
    limit: int = 10,
    json: Json = False,
) -> int:
    """Keyword search over current records of this project and the global ones."""
    if limit < 1:
        raise ValidationError(f"--limit takes a number of at least 1 (got {limit})")
    as_of_value = None
    if as_of is not None:
        try:
            as_of_value = clock.parse_time(as_of)
        except ValueError:
            raise ValidationError(f"--as-of {as_of!r} is not an ISO date or time") from None
    project = _project()

    async def action(store: Store) -> int:
        result = await store.search(
            SearchQuery(
                text=query,
                project_id=project.project_id,
                types=tuple(type or ()),
                scope=scope,
                as_of=as_of_value,
                include_superseded=all,
                limit=limit,
            )
        )
        if json:
            _json([{**hit.record.to_dict(), "rank_score": hit.score} for hit in result.hits])
        else:
            for hit in result.hits:
                _out(_line(hit.record, hit.score))
            if not result.hits:
                _out("no matching records")
        if result.degraded:
            sys.stderr.write(f"agentctx: degraded search: {result.degraded}\n")
        return 0

    return await _with_store(action)


_HISTORY_HELP = "Show the whole supersession chain."


@app.command
async def show(
    record_id: str,
    *,
    history: Annotated[bool, Parameter(negative="", help=_HISTORY_HELP)] = False,
    json: Json = False,
) -> int:
    """Show one record (a superseded id names its successor)."""

    async def action(store: Store) -> int:
        records = await store.history(record_id) if history else [await store.get(record_id)]
        if json:
            _json([r.to_dict() for r in records] if history else records[0].to_dict())
            return 0
        for index, rec in enumerate(records):
            if index:
                _out("\n" + "-" * 60)
            _show(rec)
        return 0

    return await _with_store(action)


@app.command
async def edit(
    record_id: str,
    *,
    title: str | None = None,
    body: str | None = None,
    json: Json = False,
) -> int:
    """Write a new version of a record that supersedes the old one (history is kept).

    Without --title or --body, opens $EDITOR on the record: first line the title, then a blank line,
    then the body.
    """

    async def action(store: Store) -> int:
        new_title, new_body = title, body
        if new_title is None and new_body is None:
            current = await store.get(record_id)
            if not current.is_current:  # refuse before the user spends time in the editor
                raise ConflictError(
                    f"record {record_id} is already superseded by {current.superseded_by}; "
                    f"edit the current version ({current.superseded_by}) instead"
                )
            new_title, new_body = _edit_in_editor(current)
        old, new = await store.edit(record_id, title=new_title, body=new_body)
        if json:
            _json({"old": old.to_dict(), "new": new.to_dict()})
        else:
            _out(f"{new.id} supersedes {old.id}")
        return 0

    return await _with_store(action)


def _edit_in_editor(current: Record) -> tuple[str, str]:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise ValidationError("give --title and/or --body, or set $EDITOR to edit interactively")
    with tempfile.NamedTemporaryFile("w+", suffix=".md", delete=False, encoding="utf-8") as fh:
        fh.write(f"{current.title}\n\n{current.body}\n")
        path = fh.name
    try:
        subprocess.run([*shlex.split(editor), path], check=True)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ValidationError(f"the editor failed ({exc}); nothing was changed") from exc
    finally:
        os.unlink(path)
    head, _, rest = text.partition("\n")
    return head.strip(), rest.strip()


@app.command
async def supersede(record_id: str, *, body: str, rationale: str, json: Json = False) -> int:
    """Replace a current record by a new version with a new body and a rationale."""
    project = _project()

    async def action(store: Store) -> int:
        old, new = await store.supersede(record_id, body, rationale, project_id=project.project_id)
        if json:
            _json({"old": old.to_dict(), "new": new.to_dict()})
        else:
            _out(f"{new.id} supersedes {old.id}")
        return 0

    return await _with_store(action)


@app.command
async def pin(record_id: str, *, json: Json = False) -> int:
    """Pin a record: it ranks higher in search and the digest."""
    return await _set_pin(record_id, True, json)


@app.command
async def unpin(record_id: str, *, json: Json = False) -> int:
    """Unpin a record."""
    return await _set_pin(record_id, False, json)


async def _set_pin(record_id: str, pinned: bool, as_json: bool) -> int:
    async def action(store: Store) -> int:
        updated = await store.set_pinned(record_id, pinned)
        if as_json:
            _json(updated.to_dict())
        else:
            _out(f"{'pinned' if pinned else 'unpinned'} {updated.id}")
        return 0

    return await _with_store(action)


# -- whole store -----------------------------------------------------------------------------------


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
        data = await store.export_data(project_id)
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

    return await _with_store(action)


async def _write_file(path: str, payload: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    await anyio.Path(tmp).write_bytes(payload)
    os.replace(tmp, path)


@app.command(name="import")
async def import_(file: str, *, json: Json = False) -> int:
    """Import a JSON or Markdown export; records already present (same id) are left as they are."""
    try:
        text = await anyio.Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read {file}: {exc}") from exc
    data = transfer.parse(text)

    async def action(store: Store) -> int:
        report = await store.import_data(data)
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
        info = await store.status(project.project_id)
        info["project"] = {"id": project.project_id, "name": project.name, "root": project.root}
        if json:
            _json(info)
            return 0
        _out(f"project   {project.name} ({project.project_id[:12]})  {project.root}")
        store_info = info["store"]
        _out(
            f"store     {store_info['path']}: {store_info['records']} records, "
            f"{store_info['projects']} projects"
        )
        _out("current   " + ", ".join(f"{t} {n}" for t, n in info["counts"].items()))
        _out(f"history   {info['superseded']} superseded records")
        _out(
            f"sessions  {info['sessions']}, {info['tokens_injected']} tokens injected, "
            f"${info['extraction_cost_usd']:.4f} extraction cost"
        )
        return 0

    return await _with_store(action)


@app.command(name="doctor")
def doctor_command(*, json: Json = False) -> int:
    """Check the installation: SQLite, FTS5, sqlite-vec, home, config."""
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
        deleted = await store.reset(project.project_id)
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
