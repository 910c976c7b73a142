"""Precision eval: per-prompt retrieval on hand-written data nobody tuned on (issue 14).

Usage, from the repository root (``python3 -m nox -s precision_eval`` installs what it needs)::

    python benchmarks/precision_eval/run.py [--out-dir benchmarks/results]

The data (``data/*.json``, see ``README.md``) is four projects and the developer's global
preferences, split by project into a tuning part and a held-out part. Everything runs offline,
through agentctx's public interfaces only, in a temporary ``AGENTCTX_HOME``:

1. Each project is a folder with a ``.git/config`` whose ``origin`` remote names it (project
   identity reads that file). Its records are written with the public library API
   (``Store.add(NewRecord(...))``, supersession with ``supersedes=``), in the order of their
   ``valid_from``, the dates shifted so that the newest record is one day old when the eval
   runs (the recency decay is then the same on every run, as DevBench does it). The eval runs
   under a fixed clock (:func:`fixed_clock`: Debian's ``faketime`` at :data:`EVAL_CLOCK`, the
   processes it starts included), so "today" is the same day on every run: a record's embedded
   text carries its date, and a date that followed the day of the run moved every cosine, and
   the figures, from one day to the next.
2. Capture stubs: each ``capture`` item is a Bash tool call given to the real
   ``agentctx hook post-tool-use`` as a PostToolUse(Failure) payload; the stub it writes is found
   again by its session id.
3. The hook: for every prompt the real ``agentctx hook user-prompt-submit`` runs as a subprocess,
   from the project folder, with a fresh session id and the event JSON on stdin; the records
   injected whole are read from the ``id <handle>`` of each record heading of
   ``additionalContext``, the one-line entries from their ``(<handle>)``.
4. ``ctx_search``: the real ``agentctx mcp`` server over stdio (one per project, the mcp SDK's
   client), ``ctx_search`` with the prompt as query and ``limit`` 5: first with ``embeddings``
   off (keyword ranking), then, after the records are embedded with the offline all-MiniLM-L6-v2
   the tests use (``benchmarks/minilm.py``; :func:`agentctx.embeddings.vecstore.embed_pending`, as DevBench),
   with the model configured (hybrid; the run waits until the server reports ``mode: hybrid``).
   Each hit's ``match`` label (strong or weak) is kept: ``ctx_search`` *says so* for a query it
   cannot answer when it returns no strong hit (nothing, or weak hits only); for an answerable one
   the report gives the share whose answer is returned *and* labelled strong, and the strong
   non-answers, so a label that calls everything weak shows as worthless.

Figures per part (tuning, held-out) and overall are in ``score``; DevBench's are read from
``benchmarks/results/eval.json`` (written by ``benchmarks/eval.py``). Writes
``precision_eval.md`` and ``precision_eval.json`` to the out dir. Nothing here is tuned: it measures.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

import minilm  # noqa: E402
from agentctx import NewRecord, Store, identify  # noqa: E402
from agentctx.core.tokens import estimate_tokens  # noqa: E402
from precision_eval import dataset  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from precision_eval.dataset import Dataset, Item, Prompt

K_HOOK = 3
K_SEARCH = 5
WHOLE = re.compile(r"^### \[[^\]\n]*\| id ([0-9a-z]{8})[\] |]", re.MULTILINE)
#: A one-line entry ends with its handle in brackets (agentctx.core.inject.format_line).
HANDLE = re.compile(r"^- .*\(([0-9a-z]{8})\)$", re.MULTILINE)
#: The hook's wait for the server's answer in the eval (ms): the eval measures what meaning
#: brings, on a machine shared with other work; the hooks' speed is benchmarks/hooks.py's. A
#: guard, not a deadline: a warm server answers in milliseconds, and a prompt that missed a
#: tighter wait on a busy machine (CI runs the eval beside the fast tests) would fall back to
#: keywords alone and move the figures at random.
EVAL_DEADLINE_MS = 30000
#: The instant the eval's clock starts at, every run (:func:`fixed_clock`), in UTC.
EVAL_CLOCK = "2026-12-01 12:00:00"
#: The real date of the run, kept across :func:`fixed_clock`'s re-exec (the results say both).
STARTED_ENV = "AGENTCTX_EVAL_STARTED"
DEVBENCH = ROOT / "benchmarks" / "data" / "devbench" / "devbench_dataset.json"
DEVBENCH_RESULTS = ROOT / "benchmarks" / "results" / "eval.json"
#: Variables that would change what the children do (or let them reach the network).
DROPPED_ENV = ("CLAUDE_PROJECT_DIR", "ANTHROPIC_API_KEY", "PYTHONDONTWRITEBYTECODE")
MODEL_WAIT = 180.0  # seconds for the server's background model load
#: The passes without a lending server (the keyword fallback's hooks, ``ctx_search`` per project)
#: run this many at a time: their answers do not depend on each other, and CI's eval shares the
#: machine's two cores with the tests for most of its run.
PARALLEL = 2
TARGETS = {
    "hit3": 0.90,
    "full3": 0.85,
    "unanswerable_injected": 0.10,
    "chitchat_injected": 0.10,
    "search_recall5": 0.95,
    "search_unanswerable_says_so": 0.90,
}
#: What one ctx_search call answered: ids, the ids labelled strong, the note, the mode.
Answer = tuple[list[str], list[str], str | None, str]


@dataclass
class Outcome:
    """What one prompt got: injected record keys and text, and each ctx_search mode's answer."""

    injected: list[str] = field(default_factory=list)  #: shown whole
    lines: list[str] = field(default_factory=list)  #: offered as a one-line possible match
    tokens: int = 0
    meaning: bool = False  #: the hook had the server's neighbours for this prompt
    #: the same prompt with the meaning path off (no server: the keyword fallback)
    keyword_injected: list[str] = field(default_factory=list)
    keyword_tokens: int = 0
    search: dict[str, list[str]] = field(default_factory=dict)
    strong: dict[str, list[str]] = field(default_factory=dict)  #: the hits labelled strong
    notes: dict[str, str | None] = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)


# -- the store -------------------------------------------------------------------------------------


def make_project(folder: Path, origin: str) -> None:
    """A git work tree with an ``origin`` remote (the files project identity reads, no git needed)."""
    git = folder / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
    )


def fixed_clock() -> None:
    """Run this script again under Debian's ``faketime`` at :data:`EVAL_CLOCK` (UTC), unless it
    runs under it already: every process the eval starts (the hooks, the MCP servers) inherits
    the clock, each starting at that instant. Without ``faketime`` on PATH the eval says so in one
    line and runs on the real clock (its figures then follow the day of the run); the ``eval`` and
    ``precision_eval`` nox sessions install it."""
    import shutil

    if os.environ.get("FAKETIME"):
        return
    started = _now()
    tool = shutil.which("faketime")
    if tool is None:
        print(
            "precision eval: no faketime on PATH (`apt-get install faketime`): the real clock, "
            "so the figures follow today's date",
            file=sys.stderr,
        )
        return
    env = {**os.environ, "TZ": "UTC", STARTED_ENV: started}
    argv = [tool, EVAL_CLOCK, sys.executable, *sys.argv]
    os.execve(tool, argv, env)


def clock_note() -> str:
    """What the results say of the run's date and clock."""
    if os.environ.get("FAKETIME"):
        real = os.environ.get(STARTED_ENV, "unknown")
        return f"{real} (the eval's clock: fixed at {EVAL_CLOCK} UTC)"
    return f"{_now()} (the real clock)"


def _now() -> str:
    """This process's clock, as the results print it."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def shifted_dates(items: list[Item]) -> dict[str, str]:
    """Each written record's ``valid_from``, moved so that the newest is one day before today."""
    days = {i.key: date.fromisoformat(i.valid_from) for i in items if i.valid_from is not None}
    delta = datetime.now(UTC).date() - timedelta(days=1) - max(days.values())
    return {key: f"{(day + delta).isoformat()}T12:00:00Z" for key, day in days.items()}


async def write_records(data: Dataset, folders: dict[str, Path]) -> dict[str, str]:
    """The records through the library, oldest first: record id -> key."""
    when = shifted_dates(data.items)
    written = sorted((i for i in data.items if i.capture is None), key=lambda i: when[i.key])
    ids: dict[str, str] = {}
    any_project = identify(str(next(iter(folders.values())))).project_id
    async with await Store.open() as store:
        for folder in folders.values():
            await store.touch_project(identify(str(folder)))
        for item in written:
            project_id = (
                any_project if item.is_global else identify(str(folders[item.project])).project_id
            )
            record = await store.add(
                NewRecord(
                    type=item.type,
                    title=item.title,
                    body=item.body,
                    project_id=project_id,
                    scope="global" if item.is_global else "project",
                    confidence=item.confidence,
                    source=item.source,
                    keywords=list(item.keywords),
                    cues=list(item.cues),
                    valid_from=when[item.key],
                    supersedes=ids[item.supersedes] if item.supersedes else None,
                )
            )
            ids[item.key] = record.id
    return {record_id: key for key, record_id in ids.items()}


def capture_stubs(data: Dataset, folders: dict[str, Path], env: dict[str, str]) -> dict[str, str]:
    """Each capture item through the real PostToolUse hook: session id -> key."""
    sessions: dict[str, str] = {}
    for item in data.items:
        if item.capture is None:
            continue
        folder = folders[item.project]
        session = str(uuid.uuid5(uuid.NAMESPACE_URL, f"agentctx-precision-eval/{item.key}"))
        extra: dict[str, Any]
        if item.capture.event == "PostToolUseFailure":
            extra = {"error": "Exit code 1\n" + item.capture.output, "is_interrupt": False}
        else:
            extra = {
                "tool_response": {
                    "stdout": item.capture.output,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                }
            }
        payload = event_payload(
            item.capture.event,
            session,
            folder,
            tool_name="Bash",
            tool_input={"command": item.capture.command, "description": "Run it"},
            tool_use_id=f"toolu_{session[:8]}",
            **extra,
        )
        result = run_hook("post-tool-use", payload, folder, env)
        if result.returncode != 0 or result.stdout.strip():
            raise SystemExit(f"post-tool-use broke its contract for {item.key}: {result}")
        sessions[session] = item.key
    return sessions


#: Capture items the hook wrote nothing for (a command it does not record: the store simply
#: lacks them, as a user's would); counted in the report. One that answers a prompt is not
#: refused: that answer cannot be found, and the prompt counts it as missed (a capture gap is a
#: finding about the hook; the data is not changed to fit it).
UNCAPTURED: list[str] = []
UNCAPTURED_ANSWERS: list[str] = []


async def stub_ids(sessions: dict[str, str], needed: set[str]) -> dict[str, str]:
    """The captured stubs' record ids -> key (the stub's session is the one that captured it)."""
    found: dict[str, str] = {}
    async with await Store.open() as store:
        for record in await store.list_records(types=["bugfix", "discovery"]):
            if record.session_id in sessions and record.source == "hook_observation":
                found[record.id] = sessions[record.session_id]
    missing = set(sessions.values()) - set(found.values())
    UNCAPTURED[:] = sorted(missing)
    UNCAPTURED_ANSWERS[:] = sorted(missing & needed)
    return found


async def embed_all(model_dir: Path, name: str = minilm.NAME) -> int:
    """Embed every record with the offline MiniLM (or ``name``, a local sentence-transformers ONNX
    folder: the tuning harness's ``--model``), as consolidation would (DevBench does the same)."""
    from agentctx.embeddings import models, reembed, vecstore

    settings = {**minilm.settings(model_dir), "embedding.model": name}
    model = await models.load_model_async(settings)
    if model is None:
        raise SystemExit(f"the model {name} did not load (see the log line above)")
    switch = name != minilm.NAME  # another space than the fresh store's: switch it, as reembed
    async with await Store.open() as store:
        if switch:
            await reembed.prepare(store, model)
        count = await vecstore.embed_pending(store, model)
        if switch:
            await reembed.finish(store)
        return count


# -- the hook and the server -----------------------------------------------------------------------


def agentctx_command() -> list[str]:
    """This venv's console script (what Claude Code runs), else ``python -m agentctx``."""
    script = Path(sys.executable).with_name("agentctx")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentctx"]


def event_payload(event: str, session: str, folder: Path, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(folder / ".transcripts" / f"{session}.jsonl"),
        "cwd": str(folder),
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


def run_hook(
    event: str, payload: dict[str, Any], folder: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*agentctx_command(), "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        cwd=folder,
        env=env,
        timeout=60,
        check=False,
    )


def hook_prompt(
    prompt: Prompt, folder: Path, env: dict[str, str]
) -> tuple[list[str], list[str], str, str]:
    """What the real UserPromptSubmit hook injects for ``prompt`` (fresh session): the handles of
    the records shown whole and of the one-line entries, the text, and the session id."""
    session = str(uuid.uuid4())
    payload = event_payload("UserPromptSubmit", session, folder, prompt=prompt.text)
    result = run_hook("user-prompt-submit", payload, folder, env)
    if result.returncode != 0:
        raise SystemExit(f"the hook exited {result.returncode} for {prompt.id}")
    out = result.stdout.decode().strip()
    if not out:
        return [], [], "", session
    contract = json.loads(out)["hookSpecificOutput"]
    assert contract["hookEventName"] == "UserPromptSubmit", contract
    text = str(contract["additionalContext"])
    return WHOLE.findall(text), HANDLE.findall(text), text, session


def key_of(record_id: str, to_key: dict[str, str]) -> str:
    """The data key of a record the store returned; a record the data does not hold (one the
    hooks wrote on their own, e.g. a capture's stub of a passing run) is a non-answer."""
    return to_key.get(record_id, f"unknown:{record_id}")


def by_handle(handles: list[str], to_key: dict[str, str]) -> list[str]:
    """The dataset keys of the records injected text names by handle (the end of a record id;
    ``core/handles.py``); one the data does not hold is a non-answer (:func:`key_of`)."""
    keys = []
    for handle in handles:
        found = [key for rid, key in to_key.items() if rid.lower().endswith(handle)]
        if len(found) > 1:
            raise SystemExit(f"the handle {handle} names {len(found)} records")
        keys.append(found[0] if found else f"unknown:{handle}")
    return keys


@asynccontextmanager
async def lending_server(folder: Path, env: dict[str, str], errlog: Path) -> AsyncIterator[float]:
    """A real ``agentctx mcp`` for ``folder`` (stdio, the SDK's client), kept open until its
    socket answers with its model loaded: the seconds that took."""
    from agentctx.core import meaning

    params = StdioServerParameters(
        command=agentctx_command()[0],
        args=[*agentctx_command()[1:], "mcp"],
        env={**env, "CLAUDE_PROJECT_DIR": str(folder)},
        cwd=str(folder),
    )
    with errlog.open("a") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            began = time.monotonic()
            await session.list_tools()  # the server starts lending once its tools are listed
            while True:
                pending = meaning.ask("warm up", "none")
                if pending is not None and pending.hits(time.monotonic() + 5) is not None:
                    break
                if time.monotonic() - began > MODEL_WAIT:
                    raise SystemExit("the MCP server's socket never answered with its model")
                await anyio.sleep(0.25)
            yield time.monotonic() - began


def config_set(key: str, value: str, env: dict[str, str]) -> None:
    subprocess.run([*agentctx_command(), "config", "set", key, value], env=env, check=True,
                   capture_output=True)  # fmt: skip


async def search_project(
    folder: Path, prompts: list[Prompt], env: dict[str, str], errlog: Path, *, hybrid: bool
) -> dict[str, Answer]:
    """ctx_search over the real stdio server of ``folder``'s project: prompt id -> its Answer.

    A query the tool refuses (no searchable words) answers nothing; its message is the note.
    """
    params = StdioServerParameters(
        command=agentctx_command()[0],
        args=[*agentctx_command()[1:], "mcp"],
        env={**env, "CLAUDE_PROJECT_DIR": str(folder)},
        cwd=str(folder),
    )
    found: dict[str, Answer] = {}
    with errlog.open("a") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def search(text: str) -> Answer:
                result = await session.call_tool("ctx_search", {"query": text, "limit": K_SEARCH})
                if result.is_error:
                    block = result.content[0]
                    return [], [], block.text if isinstance(block, TextContent) else "error", "-"
                data = result.structured_content
                assert data is not None
                hits = data["results"]
                assert all(hit["match"] in ("strong", "weak") for hit in hits), hits
                strong = [hit["id"] for hit in hits if hit["match"] == "strong"]
                return [hit["id"] for hit in hits], strong, data.get("note"), data["mode"]

            if hybrid:  # the first search starts the model's background load: wait for it
                began = time.monotonic()
                while (await search(prompts[0].text))[3] != "hybrid":
                    if time.monotonic() - began > MODEL_WAIT:
                        raise SystemExit("the MCP server never answered in hybrid mode")
                    await anyio.sleep(0.5)
            for prompt in prompts:
                found[prompt.id] = await search(prompt.text)
    return found


# -- scoring ---------------------------------------------------------------------------------------


def share(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def score(data: Dataset, prompts: list[Prompt], outcomes: dict[str, Outcome]) -> dict[str, Any]:
    """Every figure of the report for ``prompts``."""
    by_key = data.by_key
    superseded = data.superseded

    def foreign(key: str, p: Prompt) -> bool:
        """A record of another project (global ones excepted); one the data does not hold
        counts as foreign too, so nothing unknown can pass unseen."""
        item = by_key.get(key)
        return item is None or (not item.is_global and item.project != p.project)

    answerable = [p for p in prompts if p.kind == "answerable"]
    of_kind = {kind: [p for p in prompts if p.kind == kind] for kind in dataset.KINDS}
    figures: dict[str, Any] = {
        "prompts": len(prompts),
        "counts": {kind: len(ps) for kind, ps in of_kind.items()},
    }
    hook: dict[str, Any] = {}
    hook["hit3"] = share([bool(set(p.answers) & set(outcomes[p.id].injected)) for p in answerable])
    hook["full3"] = share([set(p.answers) <= set(outcomes[p.id].injected) for p in answerable])
    hook["recall3"] = mean(
        [len(set(p.answers) & set(outcomes[p.id].injected)) / len(p.answers) for p in answerable]
    )
    hook["answerable_extra"] = mean(
        [float(len(set(outcomes[p.id].injected) - set(p.answers))) for p in answerable]
    )
    for kind in ("unanswerable", "chitchat", "cross_project"):
        hook[f"{kind}_injected"] = share([bool(outcomes[p.id].injected) for p in of_kind[kind]])
    leaks: list[str] = []
    stale: list[str] = []
    for p in prompts:
        for key in outcomes[p.id].injected:
            if foreign(key, p):
                leaks.append(f"{p.id}:{key}")
            if key in superseded:
                stale.append(f"{p.id}:{key}")
    hook["leaks"] = leaks
    hook["superseded"] = stale
    for name, group in (("answerable", answerable), ("unanswerable", of_kind["unanswerable"]),
                        ("chitchat", of_kind["chitchat"])):  # fmt: skip
        hook[f"tokens_{name}"] = mean([float(outcomes[p.id].tokens) for p in group])
        got = [float(outcomes[p.id].tokens) for p in group if outcomes[p.id].injected]
        hook[f"tokens_{name}_when_injected"] = mean(got)
    hook["records_per_prompt"] = mean([float(len(outcomes[p.id].injected)) for p in prompts])
    # issue 25's tiers: an answer named (whole or one line) in the top 3; what a miss costs
    named = {p.id: set(outcomes[p.id].injected) | set(outcomes[p.id].lines) for p in prompts}
    negatives = [p for p in prompts if p.kind != "answerable"]
    hook["named3"] = share([bool(set(p.answers) & named[p.id]) for p in answerable])
    hook["whole3"] = hook["hit3"]
    hook["lines_per_prompt"] = mean([float(len(outcomes[p.id].lines)) for p in prompts])
    hook["tokens_negative"] = mean([float(outcomes[p.id].tokens) for p in negatives])
    hook["tokens_cross_project"] = mean(
        [float(outcomes[p.id].tokens) for p in of_kind["cross_project"]]
    )
    hook["meaning_share"] = share([outcomes[p.id].meaning for p in prompts])
    for p in prompts:
        for key in outcomes[p.id].lines:
            if foreign(key, p):
                leaks.append(f"{p.id}:{key} (line)")
            if key in superseded:
                stale.append(f"{p.id}:{key} (line)")
    figures["hook"] = hook
    # the fallback: the same hook with no server (keywords alone)
    alone: dict[str, Any] = {}
    alone_got = {p.id: set(outcomes[p.id].keyword_injected) for p in prompts}
    alone["hit3"] = share([bool(set(p.answers) & alone_got[p.id]) for p in answerable])
    alone["full3"] = share([set(p.answers) <= alone_got[p.id] for p in answerable])
    alone["unanswerable_injected"] = share([bool(alone_got[p.id]) for p in of_kind["unanswerable"]])
    alone["chitchat_injected"] = share([bool(alone_got[p.id]) for p in of_kind["chitchat"]])
    alone["tokens_negative"] = mean([float(outcomes[p.id].keyword_tokens) for p in negatives])
    alone["tokens_unanswerable"] = mean(
        [float(outcomes[p.id].keyword_tokens) for p in of_kind["unanswerable"]]
    )
    alone["tokens_chitchat"] = mean(
        [float(outcomes[p.id].keyword_tokens) for p in of_kind["chitchat"]]
    )
    alone["leaks"] = [
        f"{p.id}:{key}" for p in prompts for key in alone_got[p.id]
        if foreign(key, p)
    ]  # fmt: skip
    alone["superseded"] = [
        f"{p.id}:{k}" for p in prompts for k in alone_got[p.id] if k in superseded
    ]
    figures["keywords_alone"] = alone
    for mode in ("keyword", "hybrid"):
        if not all(mode in outcomes[p.id].search for p in prompts):
            continue  # a hook-only run
        search: dict[str, Any] = {}
        search["recall5"] = mean(
            [len(set(p.answers) & set(outcomes[p.id].search[mode])) / len(p.answers)
             for p in answerable]
        )  # fmt: skip
        search["hit5"] = share(
            [bool(set(p.answers) & set(outcomes[p.id].search[mode])) for p in answerable]
        )
        # the labels: an answer labelled strong; strong hits that answer nothing
        search["answer_strong"] = share(
            [bool(set(p.answers) & set(outcomes[p.id].strong[mode])) for p in answerable]
        )
        search["strong_extra"] = mean(
            [float(len(set(outcomes[p.id].strong[mode]) - set(p.answers))) for p in answerable]
        )
        for kind in ("unanswerable", "chitchat", "cross_project"):
            group = of_kind[kind]
            # says so: no hit labelled strong (nothing returned, or weak hits only)
            search[f"{kind}_says_so"] = share([not outcomes[p.id].strong[mode] for p in group])
            search[f"{kind}_empty"] = share([not outcomes[p.id].search[mode] for p in group])
            search[f"{kind}_note"] = share([bool(outcomes[p.id].notes[mode]) for p in group])
        search["leaks"] = [
            f"{p.id}:{key}"
            for p in prompts
            for key in outcomes[p.id].search[mode]
            if foreign(key, p)
        ]
        search["superseded"] = [
            f"{p.id}:{key}" for p in prompts for key in outcomes[p.id].search[mode]
            if key in superseded
        ]  # fmt: skip
        search["modes"] = sorted({outcomes[p.id].modes[mode] for p in prompts})
        figures[f"search_{mode}"] = search
    return figures


def devbench_figures() -> dict[str, Any] | None:
    """DevBench's figures in this eval's terms, from benchmarks/results/eval.json (eval.py's)."""
    if not DEVBENCH_RESULTS.exists():
        return None
    results = json.loads(DEVBENCH_RESULTS.read_text())["with_keywords"]
    queries = json.loads(DEVBENCH.read_text())["queries"]
    expected = {q["id"]: set(q["expected_tags"]) for q in queries if q["category"] != "negative"}
    negatives = [q["id"] for q in queries if q["category"] == "negative"]
    injected = results["answers"]["hook_injected"]
    # says so: no strong hit (eval.py records the strong ones; before it did, nothing returned)
    hybrid = results["answers"].get("hybrid_strong", results["answers"]["hybrid"])
    keyword = results["answers"].get("keyword_strong", results["answers"]["keyword"])
    return {
        "source": "benchmarks/results/eval.json (benchmarks/eval.py), 'with_keywords'",
        "questions": len(queries),
        "negatives": len(negatives),
        "hook": {
            "hit3": share([bool(e & set(injected[q][:K_HOOK])) for q, e in expected.items()]),
            "full3": share([e <= set(injected[q][:K_HOOK]) for q, e in expected.items()]),
            "unanswerable_injected": share([bool(injected[q]) for q in negatives]),
        },
        "search_keyword": {
            "recall5": results["scores"]["keyword"]["overall"]["recall"],
            "unanswerable_says_so": share([not keyword[q] for q in negatives]),
            "answer_strong": share([bool(e & set(keyword[q])) for q, e in expected.items()]),
        },
        "search_hybrid": {
            "recall5": results["scores"]["hybrid"]["overall"]["recall"],
            "unanswerable_says_so": share([not hybrid[q] for q in negatives]),
            "answer_strong": share([bool(e & set(hybrid[q])) for q, e in expected.items()]),
        },
    }


# -- the run ---------------------------------------------------------------------------------------


async def build(
    data: Dataset, work: Path
) -> tuple[dict[str, str], dict[str, Path], dict[str, str]]:
    """A home in ``work`` (this process's too), a git folder per project, the records written and
    the capture stubs made by the real hook: the hooks' environment, the folders and record id ->
    dataset key."""
    home = work / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env |= {"AGENTCTX_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    os.environ["AGENTCTX_HOME"] = str(home)
    folders: dict[str, Path] = {}
    for name, project in data.projects.items():
        folders[name] = work / "src" / name
        folders[name].mkdir(parents=True)
        make_project(folders[name], project.origin)
    to_key = await write_records(data, folders)
    needed = {key for prompt in data.prompts for key in prompt.answers}
    to_key |= await stub_ids(capture_stubs(data, folders, env), needed)
    return env, folders, to_key


async def evaluate(
    data: Dataset, *, search: bool = True
) -> tuple[dict[str, Outcome], dict[str, Any]]:
    """Build the store, run every prompt through the hook (meaning on, a real server lending its
    model; then meaning off) and, with ``search``, through ``ctx_search``; the outcomes."""
    with tempfile.TemporaryDirectory(prefix="agentctx-precision-") as tmp:
        work = Path(tmp)
        home = work / "home"
        env, folders, to_key = await build(data, work)
        outcomes = {p.id: Outcome() for p in data.prompts}
        errlog = work / "mcp-stderr.txt"
        embedded = await embed_all(minilm.assemble_int8(work / "minilm"))
        config_set("embedding.model", minilm.NAME, env)
        config_set("embedding.path", str(work / "minilm"), env)
        hook_env = {**env, "AGENTCTX_MEANING_DEADLINE_MS": str(EVAL_DEADLINE_MS),
                    "AGENTCTX_DEBUG": "1"}  # fmt: skip
        sessions: dict[str, str] = {}
        async with lending_server(next(iter(folders.values())), env, errlog) as warm:
            for prompt in data.prompts:
                ids, handles, text, session = hook_prompt(prompt, folders[prompt.project], hook_env)
                outcome = outcomes[prompt.id]
                outcome.injected = by_handle(ids, to_key)
                outcome.lines = by_handle(handles, to_key)
                outcome.tokens = estimate_tokens(text) if text else 0
                sessions[session] = prompt.id
        log = home / "logs" / "hooks.log"
        debug = log.read_text() if log.exists() else ""
        alone = {
            line.split()[2] for line in debug.splitlines() if "meaning: keywords alone" in line
        }
        for session, prompt_id in sessions.items():
            outcomes[prompt_id].meaning = session not in alone
        meaningful = sum(1 for o in outcomes.values() if o.meaning)
        keyword_env = {**env, "AGENTCTX_MEANING": "off"}

        def keywords_alone(prompt: Prompt) -> tuple[list[str], list[str], str, str]:
            return hook_prompt(prompt, folders[prompt.project], keyword_env)

        # No server takes part: the prompts are independent, so two hooks run at a time (the
        # meaning pass above stays one at a time: a server answers one prompt at a time and a
        # busy one sends the hook back to keywords).
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            answers = list(pool.map(keywords_alone, data.prompts))
        for prompt, (ids, handles, text, _session) in zip(data.prompts, answers, strict=True):
            outcomes[prompt.id].keyword_injected = by_handle(ids, to_key)
            outcomes[prompt.id].keyword_tokens = estimate_tokens(text) if text else 0
            assert not handles, "keywords alone offer no one-line entry"
        hook_log = "\n".join(
            line for line in (log.read_text() if log.exists() else "").splitlines()
            if " explain: " not in line and "meaning: " not in line
        )  # fmt: skip
        if search:
            config_set("embeddings", "off", env)
            await search_all(data, folders, env, errlog, outcomes, to_key, hybrid=False)
            config_set("embeddings", "on", env)
            await search_all(data, folders, env, errlog, outcomes, to_key, hybrid=True)
        run = {
            "records": len(to_key),
            "embedded": embedded,
            "hook_log": hook_log,
            "model_ready_seconds": round(warm, 1),
            "eval_deadline_ms": EVAL_DEADLINE_MS,
            "prompts_with_meaning": meaningful,
        }
    return outcomes, run


async def search_all(
    data: Dataset,
    folders: dict[str, Path],
    env: dict[str, str],
    errlog: Path,
    outcomes: dict[str, Outcome],
    to_key: dict[str, str],
    *,
    hybrid: bool,
) -> None:
    mode = "hybrid" if hybrid else "keyword"
    answers: dict[str, Answer] = {}
    limiter = anyio.Semaphore(PARALLEL)  # one server per project, two projects at a time

    async def one(name: str, folder: Path) -> None:
        prompts = [p for p in data.prompts if p.project == name]
        async with limiter:
            answers.update(await search_project(folder, prompts, env, errlog, hybrid=hybrid))

    async with anyio.create_task_group() as group:
        for name, folder in folders.items():
            group.start_soon(one, name, folder)
    for prompt_id, (ids, strong, note, served) in sorted(answers.items()):
        outcomes[prompt_id].search[mode] = [key_of(i, to_key) for i in ids]
        outcomes[prompt_id].strong[mode] = [key_of(i, to_key) for i in strong]
        outcomes[prompt_id].notes[mode] = note
        outcomes[prompt_id].modes[mode] = served


def tuning_only(data: Dataset) -> Dataset:
    """The data set without its held-out projects (their records and prompts)."""
    import dataclasses

    names = {n for n, p in data.projects.items() if p.part == "tuning"}
    return dataclasses.replace(
        data,
        projects={n: p for n, p in data.projects.items() if n in names},
        items=[i for i in data.items if i.is_global or i.project in names],
        prompts=[p for p in data.prompts if p.project in names],
    )


def without_cues(data: Dataset) -> Dataset:
    """The data set with every record's hand-written retrieval cues stripped (issue 25: real
    stores of users without an LLM have none)."""
    import dataclasses

    return dataclasses.replace(data, items=[dataclasses.replace(i, cues=()) for i in data.items])


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True, text=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT,
                           capture_output=True, text=True, check=False)  # fmt: skip
    return out.stdout.strip() + (" (src/ modified)" if dirty.stdout.strip() else "")


def main() -> None:
    fixed_clock()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--cues",
        choices=("both", "with", "without"),
        default="both",
        help="run with the records' hand-written retrieval cues, without them (stripped), or "
        "both (default: the full run with cues, then the hook again without)",
    )
    parser.add_argument(
        "--no-search",
        action="store_true",
        help="the hook only: skip the ctx_search passes (a quicker run)",
    )
    parser.add_argument(
        "--tuning-only",
        action="store_true",
        help="leave the held-out projects out (a run while tuning: no held-out figure is made; "
        "write it to another --out-dir)",
    )
    args = parser.parse_args()
    data = dataset.load()
    wrong = dataset.problems(data)
    if wrong:
        raise SystemExit("the data set is not sound:\n" + "\n".join(wrong))
    if args.tuning_only:
        data = tuning_only(data)
    began = time.perf_counter()
    if args.cues == "without":
        data = without_cues(data)
    outcomes, run = anyio.run(functools.partial(evaluate, data, search=not args.no_search))
    run["search"] = not args.no_search
    parts = {
        part: [p for p in data.prompts if data.part_of(p.project) == part] for part in dataset.PARTS
    }
    figures = {part: score(data, prompts, outcomes) for part, prompts in parts.items()}
    figures["overall"] = score(data, data.prompts, outcomes)
    run["cues"] = args.cues
    run["tuning_only"] = args.tuning_only
    if args.cues == "both":
        stripped = without_cues(data)
        bare, bare_run = anyio.run(functools.partial(evaluate, stripped, search=False))
        figures["no_cues"] = {
            part: {k: v for k, v in score(stripped, prompts, bare).items()
                   if k in ("counts", "prompts", "hook", "keywords_alone")}
            for part, prompts in [*parts.items(), ("overall", stripped.prompts)]
        }  # fmt: skip
        run["no_cues_prompts_with_meaning"] = bare_run["prompts_with_meaning"]
    seconds = time.perf_counter() - began
    meta = {
        "date": clock_note(),
        "revision": git_revision(),
        "python": platform.python_version(),
        "seconds": round(seconds, 1),
        "command": "python benchmarks/precision_eval/run.py (nox -s precision_eval)",
        "uncaptured": len(UNCAPTURED),
        "uncaptured_answers": len(UNCAPTURED_ANSWERS),
        **run,
    }
    devbench = devbench_figures()
    from precision_eval.report import markdown

    text = markdown(data, figures, devbench, outcomes, meta)
    payload = {
        "meta": meta,
        "targets": TARGETS,
        "split": {name: p.part for name, p in data.projects.items()},
        "figures": figures,
        "devbench": devbench,
        "prompts": {
            p.id: {
                "project": p.project,
                "part": data.part_of(p.project),
                "kind": p.kind,
                "text": p.text,
                "answers": list(p.answers),
                "injected": outcomes[p.id].injected,
                "lines": outcomes[p.id].lines,
                "meaning": outcomes[p.id].meaning,
                "tokens": outcomes[p.id].tokens,
                "keywords_alone": outcomes[p.id].keyword_injected,
                "search": outcomes[p.id].search,
                "strong": outcomes[p.id].strong,
                "notes": outcomes[p.id].notes,
            }
            for p in data.prompts
            if data.part_of(p.project) != "heldout"  # aggregates only (README: the split)
        },
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "precision_eval.md").write_text(text)
    (args.out_dir / "precision_eval.json").write_text(
        json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )
    print(text)


if __name__ == "__main__":
    main()
