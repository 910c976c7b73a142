"""``agentctx sync``: the CLAUDE.md drift report and, with consent, its marked block.

Stdout carries the proposed change as a unified diff (so it can be piped to ``patch``); the
summary, one line per drift candidate, goes to stderr. With ``--json``, stdout carries one object.
Nothing is written without ``--apply`` and a confirmation (interactive, or ``--yes``); the write
appends or replaces only agentctx's own marked block (:mod:`agentctx.claude.claudemd`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

from cyclopts import Parameter

from agentctx.claude import claudemd
from agentctx.cli import Json, _err, _json, _project, _with_store, app
from agentctx.core.errors import ValidationError
from agentctx.core.text import reveal

if TYPE_CHECKING:
    from agentctx.store import Store


def _confirm(target: str) -> bool:
    sys.stderr.write(f"Write the agentctx block to {target}? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _summary(sync: claudemd.SyncReport) -> None:
    err = _err
    for m in sync.missing:
        err(f"missing     {m.id}  {m.type:<10} {m.title}  (coverage {m.coverage:.0%})")
    if sync.missing_total > len(sync.missing):
        err(f"missing     … and {sync.missing_total - len(sync.missing)} more")
    for c in sync.contradictions:
        err(
            f"superseded  {c.id}  {c.file}:{c.line}: {c.text}  (now {c.superseded_by}: "
            f"{c.current_title})"
        )
    err(
        f"{sync.checked} records checked, {sync.missing_total} missing, "
        f"{len(sync.contradictions)} superseded snippets in {sync.target} "
        f"({sync.candidates} drift candidates; {sync.method})"
    )


def _target(claude_md: str | None, root: str) -> str:
    return os.path.abspath(claude_md) if claude_md else os.path.join(root, "CLAUDE.md")


@app.command
async def sync(
    *,
    claude_md: Annotated[
        str | None,
        Parameter(
            name="--claude-md", help="The CLAUDE.md to compare (default: the project root's)."
        ),
    ] = None,
    apply_: Annotated[
        bool,
        Parameter(
            name="--apply", negative="", help="Write the marked block (asks first unless --yes)."
        ),
    ] = False,
    yes: Annotated[bool, Parameter(negative="", help="Do not ask before --apply writes.")] = False,
    keywords_only: Annotated[
        bool,
        Parameter(
            negative="", help="Judge by keywords alone (no embedding model, as without one)."
        ),
    ] = False,
    json: Json = False,
) -> int:
    """Compare CLAUDE.md with the recorded decisions and conventions and print the proposed change
    as a unified diff. Writes only with --apply, and only agentctx's own marked block.

    Example: ``agentctx sync``; ``agentctx sync --apply --yes``.
    """
    project = _project()
    target = _target(claude_md, project.root)
    if apply_ and not yes and not sys.stdin.isatty():
        raise ValidationError("sync --apply needs confirmation: run it in a terminal or add --yes")
    if claude_md:
        # a path under the project is the repository's file: read only if it stays inside
        inside = claudemd.is_inside(project.root, target)
        current = await claudemd.read(target, project.root if inside else None)
        files = [current] if current is not None else []
    else:  # the root's CLAUDE.md and .claude/CLAUDE.md, as consolidation reads them
        files = await claudemd.discover(os.getcwd(), project.root)
    embedder = None
    if not keywords_only:
        from agentctx import config
        from agentctx.embeddings import models

        embedder = await models.load_model_async(config.load())

    async def action(store: Store) -> int:
        sync = await claudemd.report(
            store,
            project.project_id,
            files=files,
            target=target,
            root=project.root,
            embedder=embedder,
        )
        if not json:
            sys.stdout.write(reveal(sync.diff))  # reviewed before --apply: nothing hidden
            sys.stdout.flush()
            _summary(sync)
        applied = False
        if apply_ and sync.changed:
            if not yes and not _confirm(target):
                sys.stderr.write("nothing written\n")
                return 1
            applied = await claudemd.apply(sync)
        if json:
            _json(
                {
                    "target": sync.target,
                    "files": sync.files,
                    "checked": sync.checked,
                    "missing": [asdict(m) for m in sync.missing],
                    "missing_total": sync.missing_total,
                    "candidates": sync.candidates,
                    "contradictions": [asdict(c) for c in sync.contradictions],
                    "diff": sync.diff,
                    "changed": sync.changed,
                    "applied": applied,
                    "method": sync.method,
                }
            )
        elif applied:
            sys.stderr.write(f"wrote {target}\n")
        elif apply_:
            sys.stderr.write(f"{target} is up to date: nothing written\n")
        elif sync.changed:
            sys.stderr.write("nothing written: run `agentctx sync --apply` to append the block\n")
        return 0

    return await _with_store(action)
