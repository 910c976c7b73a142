"""Record commands: record, search, show, edit, supersede, pin, unpin."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from typing import Annotated, Any, Literal

import anyio
from cyclopts import Parameter

from agentctx.cli import (
    LINE_LEGEND,
    Json,
    _json,
    _line,
    _out,
    _project,
    _show,
    _with_store,
    app,
)
from agentctx.core import clock
from agentctx.core.errors import ConflictError, ValidationError
from agentctx.records import NewRecord, Record
from agentctx.store import SearchHit, SearchQuery, Store

_TYPES_HELP = "decision, convention, preference, discovery, bugfix, handover, profile"
_KEY_HELP = (
    "Profile key (a new profile record supersedes the current one with the same key). "
    "A handover's key is the checkout (worktree) it belongs to: the current one by default."
)


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
    cue: Annotated[
        list[str] | None,
        Parameter(
            help="A retrieval cue: how you would ask for this later (repeat, up to 4; search text "
            "only). Without one, consolidation writes them when the LLM is on."
        ),
    ] = None,
    json: Json = False,
) -> int:
    """Record a fact explicitly (source cli).

    Example: ``agentctx record --type decision --title "Use Postgres" --body "Every service uses Postgres 16."``.
    """
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
        # handovers are per checkout: this worktree's, so the other worktrees keep theirs
        key=key if key is not None or type != "handover" else project.checkout,
        keywords=keywords,
        cues=cue or [],
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
    /,
    *,
    type: Annotated[list[str] | None, Parameter(help="Only these types (repeatable).")] = None,
    scope: Literal["all", "project", "global"] = "all",
    as_of: Annotated[str | None, Parameter(help="What was true then: ISO date or time.")] = None,
    all: Annotated[bool, Parameter(negative="", help=_ALL_HELP)] = False,
    limit: int = 10,
    explain: Annotated[
        bool,
        Parameter(
            negative="",
            help="What the UserPromptSubmit hook would inject for QUERY as a prompt in this "
            "project, each candidate's signals and why it is in or out.",
        ),
    ] = False,
    json: Json = False,
) -> int:
    """Search the current records of this project and the global ones: by keywords and, once
    consolidation has embedded them and the embedding model is downloaded, by meaning too
    (hybrid, as ``ctx_search``). A keyword-only search says why in one line on stderr.

    Example: ``agentctx search "retry backoff"``; ``agentctx search --explain "why does the token
    refresh fail?"`` shows what a prompt would get injected, and why.
    """
    if not query.strip():
        raise ValidationError(
            'search needs a query: what to look for, e.g. agentctx search "retry backoff"'
        )
    if explain:
        return await _explain(query, json)
    if limit < 1:
        raise ValidationError(f"--limit takes a number of at least 1 (got {limit})")
    as_of_value = None
    if as_of is not None:
        try:
            as_of_value = clock.parse_time(as_of)
        except ValueError:
            raise ValidationError(f"--as-of {as_of!r} is not an ISO date or time") from None
    project = _project()
    search_query = SearchQuery(
        text=query,
        project_id=project.project_id,
        types=tuple(type or ()),
        scope=scope,
        as_of=as_of_value,
        include_superseded=all,
        limit=limit,
    )

    async def action(store: Store) -> int:
        hits, degraded, keyword_only = await _ranked(store, search_query)
        if json:
            _json([{**hit.record.to_dict(), "rank_score": hit.score} for hit in hits])
        else:
            if hits:
                _out(LINE_LEGEND)
            for hit in hits:
                _out(_line(hit.record, hit.score))
            if not hits:
                _out("no matching records")
        if keyword_only:
            extra = f"; degraded: {degraded}" if degraded else ""
            sys.stderr.write(f"agentctx: keyword-only search: {keyword_only}{extra}\n")
        elif degraded:
            sys.stderr.write(f"agentctx: degraded search: {degraded}\n")
        return 0

    return await _with_store(action, read_only=True)


def _how_to_embed(settings: dict[str, Any]) -> str:
    """What can give the records vectors here: a consolidation only when it can load the model."""
    from agentctx.embeddings import backoff, models

    info = models.model_info(settings)
    if info.present:
        return "consolidation embeds them (`agentctx consolidate`)"
    if info.local:
        return f"the model folder {info.folder} (embedding.path) does not exist"
    if backoff.waiting(info.name) is not None:
        return (
            f"the embedding model is not downloaded and its download failed (offline?): "
            f"{backoff.ADVICE}"
        )
    size = f" (about {info.size_mb} MB)" if info.size_mb else ""
    return f"`agentctx consolidate` downloads the embedding model{size} and embeds them"


async def _ranked(store: Store, query: SearchQuery) -> tuple[list[SearchHit], str | None, str]:
    """The hits, the fallback the search took (if any) and why it ran on keywords alone ("" when
    it was hybrid). The model is only loaded from local files: a search never downloads it."""
    from agentctx import config
    from agentctx.retrieval import hybrid

    settings = config.load()
    why = ""
    if not settings["embeddings"]:
        why = "embeddings are off (`agentctx config set embeddings on`)"
    elif not await hybrid.has_vectors(store):
        why = "no record has a vector yet: " + _how_to_embed(settings)
    else:
        from agentctx.embeddings import models, reembed

        stored = (await reembed.status(store)).model
        configured = models.model_id(settings)
        if stored is not None and stored != configured:
            why = (
                f"the stored vectors belong to {stored}, not the configured {configured}: "
                "re-embed pending (`agentctx model reembed`)"
            )
            result = await store.search(query)
            return result.hits, result.degraded, why
        try:
            embedder = await anyio.to_thread.run_sync(models.load_local, settings)
        except models.ModelUnavailable as exc:
            why = f"{exc}; `agentctx model fetch` or `agentctx doctor`"
        else:
            floor = hybrid.floor_for(settings, embedder.name)
            ranked = await hybrid.hybrid_search(store, query, embedder, floor=floor)
            if ranked.mode == "keyword":
                return ranked.hits[: query.limit], ranked.degraded, "the vector search failed"
            return ranked.hits[: query.limit], ranked.degraded, ""
    result = await store.search(query)
    return result.hits, result.degraded, why


_HISTORY_HELP = "Show the whole supersession chain."


@app.command
async def show(
    record_id: str,
    /,
    *,
    history: Annotated[bool, Parameter(negative="", help=_HISTORY_HELP)] = False,
    json: Json = False,
) -> int:
    """Show one record (a superseded id names its successor).

    Example: ``agentctx show 01J… --history``.
    """

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

    return await _with_store(action, read_only=True)


@app.command
async def edit(
    record_id: str,
    /,
    *,
    title: str | None = None,
    body: str | None = None,
    json: Json = False,
) -> int:
    """Write a new version of a record that supersedes the old one (history is kept).

    Without --title or --body, opens $EDITOR on the record: first line the title, then a blank line,
    then the body.

    Example: ``agentctx edit 01J… --title "Use Postgres 16"``.
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
            new_title, new_body = await anyio.to_thread.run_sync(_edit_in_editor, current)
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
async def supersede(
    record_id: str,
    /,
    *,
    body: str,
    rationale: str,
    title: str | None = None,
    keep_title: Annotated[
        bool, Parameter(negative="", help="Keep the old title (it still states the new body).")
    ] = False,
    json: Json = False,
) -> int:
    """Replace a current record by a new version with a new body and a rationale.

    A title states its record's fact, so a new body gets a new title: ``--title``, or else the
    new body's first sentence (as extraction words titles); ``--keep-title`` keeps the old one.
    Example: ``agentctx supersede 01J… --body "Queue names use kebab-case." --rationale "the
    broker rejects underscores"``.
    """
    from agentctx.records import title_from_body

    if title and title.strip() and keep_title:
        raise ValidationError("give --title or --keep-title, not both")
    project = _project()

    async def action(store: Store) -> int:
        new_title = title.strip() if title and title.strip() else None
        derived = False
        if new_title is None and not keep_title:
            old_record = await store.find(record_id)
            if old_record is not None and body.strip() != old_record.body.strip():
                new_title, derived = title_from_body(body), True
        old, new = await store.supersede(
            record_id, body, rationale, project_id=project.project_id, title=new_title
        )
        if json:
            _json({"old": old.to_dict(), "new": new.to_dict()})
        else:
            _out(f"{new.id} supersedes {old.id}")
            if derived:
                _out(f"title     {new.title} (from the new body; --title sets another)")
        return 0

    return await _with_store(action)


async def _explain(prompt: str, json: bool) -> int:
    """``search --explain``: the hook's injection for a prompt, candidate by candidate."""
    from agentctx import config
    from agentctx.core.explain import explain

    project = _project()
    settings = config.load()
    key = "retrieval.min_relevance"

    from agentctx.core import meaning

    def ask() -> tuple[Any, str]:
        """The hook's own way to meaning: a live `agentctx mcp` lends its model (a longer wait
        here); blocking socket work, so it runs in a worker thread."""
        pending = meaning.ask(prompt, project.project_id)
        if pending is None:
            return None, "no live agentctx mcp server"
        return pending.hits(pending.sent_at + 2.0), pending.why

    neighbours, why = await anyio.to_thread.run_sync(ask)

    async def action(store: Store) -> int:
        from agentctx.core import learning

        # the floor the hook uses: the calibrated one while it applies (issue 25)
        floor = learning.effective(
            key,
            float(settings[key]),
            float(config.SETTINGS[key][1]),
            bool(settings[learning.AUTO_SETTING]),
            await store.run(learning.tuned()),
        )
        report = await store.run(explain(prompt, project.project_id, floor, (), neighbours))
        report["meaning_note"] = "" if neighbours is not None else why
        if json:
            _json(report)
            return 0
        searched = [t["term"] for t in report["terms"] if t["searched"]]
        others = [f"{t['term']} ({t['records']})" for t in report["terms"] if not t["searched"]]
        _out(f"searched terms: {', '.join(searched) or 'none'}")
        if others:
            _out(f"not searched (too common or absent): {', '.join(others)}")
        _out(
            f"relevance floor: {report['floor']:g}; injected whole: {len(report['injected'])}; "
            f"one-line: {len(report['lines'])}"
        )
        _out(
            "meaning: on (nearest records from the MCP server's model)"
            if report["meaning"]
            else f"meaning: off, keywords alone ({report['meaning_note']})"
        )
        for rank, c in enumerate(report["candidates"], start=1):
            cosine = "-" if c["cosine"] is None else f"{c['cosine']:.2f}"
            _out(
                f"{rank:>2}. {c['id']}  {c['type']}: {c['title']}\n"
                f"    bm25 {c['bm25']:.2f}  score {c['score']:.2f}  "
                f"relevance {c['relevance']:.2f}  cosine {cosine}  fused {c['fused']:.4f}  "
                f"tier {c['tier']}  -> {c['verdict']}"
            )
        if not report["candidates"]:
            _out("no candidates: nothing would be injected")
        if "degraded" in report:
            sys.stderr.write(f"agentctx: degraded search: {report['degraded']}\n")
        return 0

    return await _with_store(action, read_only=True)


@app.command
async def pin(record_id: str, /, *, json: Json = False) -> int:
    """Pin a record: it ranks higher in search and the digest.

    Example: ``agentctx pin 01J…``.
    """
    return await _set_pin(record_id, True, json)


@app.command
async def unpin(record_id: str, /, *, json: Json = False) -> int:
    """Unpin a record.

    Example: ``agentctx unpin 01J…``.
    """
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
