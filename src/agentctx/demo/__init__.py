"""``agentctx demo``: the whole loop, in a throwaway home, offline, in a few seconds.

Design note. Someone without Claude Code or an API key should see what agentctx does with a session,
so the demo replays a scripted one (``data/``: a transcript in Claude Code's JSONL format, the hook
payloads Claude Code would send, and the answer the stand-in gives) through the real code:

1. setup as ``agentctx init`` does it, minus the Claude Code settings files: a home, the store, a
   config with embeddings off (the model would be a download; ranking is keyword-only), and the
   project profile of a small project folder (``git init`` when git is there);
2. the first session: each hook is ``python -m agentctx hook <event>`` in a subprocess with the
   payload on stdin, as Claude Code runs it. SessionEnd is the exception: its hook would start a
   detached worker that could outlive the demo's home, so the demo does the hook's bookkeeping
   in-process (:func:`agentctx.core.sessions.end`, as the hook) and then runs the worker's work in
   the foreground:
3. extraction (:func:`agentctx.extract.extract_session`) with the real ``anthropic`` client pointed
   at :class:`~agentctx.demo.standin.StandIn`, a loopback server that is NOT Claude and says so;
4. consolidation (:func:`agentctx.consolidate.consolidate`), which writes the next digest;
5. the next session: the SessionStart digest and a follow-up prompt's injection, again through
   the hook subprocesses, and what ``ctx_search`` finds (:func:`agentctx.retrieval.hybrid.hybrid_search`,
   the MCP tool's ranking without a model).

Isolation: everything lives under one ``mkdtemp`` folder that is removed at the end (unless
``keep``). While the demo runs, this process's environment points ``AGENTCTX_HOME`` and ``HOME`` at
that folder and drops ``ANTHROPIC_*`` and ``CLAUDE_*`` variables, so neither the user's store, their
``~/.claude`` nor their API key is ever used; the environment is restored afterwards. That makes
:func:`run_demo` unfit to run twice at once in one process (the CLI runs it once per process).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio

from agentctx import config
from agentctx.core import home
from agentctx.core.errors import AgentctxError
from agentctx.core.tokens import estimate_tokens

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from agentctx.consolidate import Report as ConsolidationReport
    from agentctx.core.project import ProjectIdentity
    from agentctx.extract import Report as ExtractionReport
    from agentctx.store import Store

__all__ = ["DemoResult", "run_demo"]

#: A key the stand-in accepts; extraction refuses to run without one in the environment.
DEMO_API_KEY = "demo-key-for-the-local-stand-in"
HOOK_TIMEOUT_S = 30.0
CONSOLIDATION_TIME_BOX_S = 30.0
SESSION_END = "session-end"
_DROPPED_ENV_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "AGENTCTX_EXTRACTION_", "AGENTCTX_CLAUDE_")
_INDENT = "  │ "


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Where the demo ran, whether that folder is still there, and how long it took."""

    root: str
    home: str
    kept: bool
    seconds: float


@dataclass(frozen=True, slots=True)
class _Paths:
    root: str
    home: str
    user_home: str
    project: str
    transcript: str
    next_transcript: str


async def run_demo(
    *, keep: bool = False, write: Callable[[str], None], parent: str | None = None
) -> DemoResult:
    """Replay the scripted session through the hooks, extraction and consolidation, printing."""
    started = time.monotonic()
    script = _load("session.json")
    # ``parent``: where the temporary folder goes (None: the system's temporary folder)
    root = tempfile.mkdtemp(prefix="agentctx-demo-", dir=parent)
    paths = _paths(root, str(script["project"]["name"]), str(script["session_id"]))
    try:
        with _isolated_environment(paths):
            await _Demo(paths, script, write).run()
    finally:
        if not keep:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))
    seconds = time.monotonic() - started
    if keep:
        write(f"Kept {root}")
        write(f"  home     {paths.home}")
        write(f"  project  {paths.project}")
        write(f"  look around: cd {paths.project} && AGENTCTX_HOME={paths.home} agentctx status")
    else:
        write(f"Removed {root}: nothing outside it was touched.")
    write(f"Done in {seconds:.1f} s.")
    return DemoResult(root, paths.home, keep, seconds)


def _paths(root: str, project_name: str, session_id: str) -> _Paths:
    user_home = os.path.join(root, "user")
    project = os.path.join(root, project_name)
    # where Claude Code keeps transcripts: ~/.claude/projects/<the cwd with / as ->/<session>.jsonl
    folder = os.path.join(user_home, ".claude", "projects", project.replace(os.sep, "-"))
    return _Paths(
        root=root,
        home=os.path.join(root, "agentctx-home"),
        user_home=user_home,
        project=project,
        transcript=os.path.join(folder, f"{session_id}.jsonl"),
        next_transcript=os.path.join(folder, "next-session.jsonl"),
    )


@contextlib.contextmanager
def _isolated_environment(paths: _Paths) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        for name in list(os.environ):
            if name.startswith(_DROPPED_ENV_PREFIXES):
                del os.environ[name]
        os.environ[home.HOME_ENV] = paths.home
        os.environ["HOME"] = paths.user_home
        os.environ["ANTHROPIC_API_KEY"] = DEMO_API_KEY
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _load(name: str) -> Any:
    return json.loads(resources.files(__name__).joinpath("data", name).read_text("utf-8"))


class _Demo:
    def __init__(self, paths: _Paths, script: dict[str, Any], write: Callable[[str], None]) -> None:
        self.paths = paths
        self.script = script
        self.write = write
        self.values = {
            "cwd": paths.project,
            "transcript": paths.transcript,
            "next_transcript": paths.next_transcript,
            "session": str(script["session_id"]),
            "next_session": str(script["next_session_id"]),
        }
        # The hooks get no extraction backend: Stop must not start a detached extraction worker
        # (nor run the user's own `claude`).
        self.hook_env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
        self.hook_env["AGENTCTX_EXTRACTION_BACKEND"] = "off"

    async def run(self) -> None:
        from agentctx.core.project import identify
        from agentctx.store import Store

        self.write("agentctx demo: one scripted session through the real hooks, extraction and")
        self.write("consolidation, in a temporary home. Nothing here touches your ~/.agentctx,")
        self.write("~/.claude or API key, and nothing leaves this machine.")
        self.write(f"  temporary folder  {self.paths.root}")
        # The anthropic SDK takes a second or more to import: do it while the hooks run.
        threading.Thread(target=_warm_imports, name="agentctx-demo-imports", daemon=True).start()
        await anyio.to_thread.run_sync(self._setup_files)
        project = identify(self.paths.project)
        async with await Store.open() as store:
            await self._setup_store(store, project)
            await self._first_session(self.script["first_session"])
            await self._captured(store, project)
            extraction, consolidation = await self._session_end_work(store, project)
            self._show_extraction(extraction)
            self._show_consolidation(consolidation, project)
            await self._next_session(self.script["next_session"])
            await self._search(store, project, str(self.script["search"]))

    # -- setup -------------------------------------------------------------------------------------

    def _setup_files(self) -> None:
        home.ensure_home()
        config.set_value("embeddings", False)
        os.makedirs(self.paths.user_home, mode=0o700, exist_ok=True)
        os.makedirs(self.paths.project, exist_ok=True)
        for name, text in self.script["project"]["files"].items():
            target = os.path.join(self.paths.project, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(str(text))
        git = shutil.which("git")
        if git:  # the project root is then this folder, even inside another repository
            subprocess.run(
                [git, "-c", "init.defaultBranch=main", "init", "-q"],
                cwd=self.paths.project,
                env=self.hook_env,
                capture_output=True,
                timeout=HOOK_TIMEOUT_S,
                check=False,
            )
        os.makedirs(os.path.dirname(self.paths.transcript), mode=0o700, exist_ok=True)
        transcript = resources.files(__name__).joinpath("data", "transcript.jsonl")
        with open(self.paths.transcript, "w", encoding="utf-8") as fh:
            fh.write(self._fill(transcript.read_text("utf-8")))

    async def _setup_store(self, store: Store, project: ProjectIdentity) -> None:
        from pathlib import Path

        from agentctx import detection
        from agentctx.core import manifests

        await store.touch_project(project)
        signature = manifests.signature(project.checkout)
        facts = detection.detect(Path(project.root))
        for fact in facts:
            await store.add(fact.record(project.project_id))
        # as init: SessionStart then starts no detached detection that could outlive the demo
        await anyio.to_thread.run_sync(
            manifests.record, project.project_id, signature, {f.key: f.body for f in facts}
        )
        self.write(
            f"  project           {project.name}: profile {', '.join(f.key for f in facts)} "
            "(as `agentctx init` records it)"
        )
        self.write("  embeddings        off in this home (no model download): keyword ranking")

    # -- the first session -------------------------------------------------------------------------

    async def _first_session(self, events: list[dict[str, Any]]) -> None:
        self._heading(
            1, "A session, replayed through the hooks (agentctx hook <event>, JSON on stdin)"
        )
        for event in events:
            payload = self._payload(event)
            if event["hook"] == SESSION_END:
                tokens = await anyio.to_thread.run_sync(self._close_session, payload)
                self.write(f"  {'SessionEnd':<50} session closed; {tokens} tokens injected in all")
                self.write(
                    "  (in Claude Code, SessionEnd now starts a detached worker; "
                    "the demo runs its work below)"
                )
                continue
            context = await self._hook(str(event["hook"]), payload)
            line = f"  {_label(payload, self.paths.project):<50} {_injected(payload, context)}"
            self.write(line.rstrip())

    async def _hook(self, name: str, payload: dict[str, Any]) -> str | None:
        """Run one hook as Claude Code does; its additionalContext, or None."""
        try:
            with anyio.fail_after(HOOK_TIMEOUT_S):
                result = await anyio.run_process(
                    [sys.executable, "-m", "agentctx", "hook", name],
                    input=json.dumps(payload).encode(),
                    env=self.hook_env,
                    cwd=self.paths.project,
                    check=False,
                )
        except TimeoutError as exc:
            raise AgentctxError(
                f"the demo's `agentctx hook {name}` took over {HOOK_TIMEOUT_S:g} s"
            ) from exc
        except OSError as exc:
            raise AgentctxError(f"the demo could not run `agentctx hook {name}`: {exc}") from exc
        if result.returncode != 0:
            raise AgentctxError(f"`agentctx hook {name}` exited with {result.returncode}")
        if not result.stdout.strip():
            return None
        try:
            data = json.loads(result.stdout)
            text = data["hookSpecificOutput"]["additionalContext"]
        except (ValueError, KeyError, TypeError) as exc:
            raise AgentctxError(f"`agentctx hook {name}` printed no hook JSON: {exc}") from exc
        return str(text)

    def _close_session(self, payload: dict[str, Any]) -> int:
        """SessionEnd's bookkeeping, in-process, without the detached worker; tokens injected."""
        from agentctx.core import ledger, sessions, spool
        from agentctx.core.connect import open_db
        from agentctx.core.project import identify

        session_id = str(payload["session_id"])
        cwd = str(payload.get("cwd") or self.paths.project)
        tokens = ledger.totals(ledger.read_entries(session_id))[0]
        problems: list[str] = []
        conn = open_db(problems.append, write=True)
        if conn is None:
            raise AgentctxError(f"the demo's store is missing at SessionEnd: {'; '.join(problems)}")
        try:
            spool.drain(conn, problems.append)
            sessions.end(
                conn,
                session_id,
                identify(cwd).project_id,
                cwd,
                str(payload.get("transcript_path") or ""),
            )
        finally:
            conn.close()
        return int(tokens)

    async def _captured(self, store: Store, project: ProjectIdentity) -> None:
        nodes = await store.rows(
            "SELECT kind, name FROM nodes WHERE project_id = ? ORDER BY kind, name",
            (project.project_id,),
        )
        files = [str(n["name"]) for n in nodes if n["kind"] == "file"]
        captured = await store.list_records(
            project.project_id, types=("bugfix", "discovery"), include_superseded=False
        )
        parts = [f"{len(files)} files ({', '.join(files)})"] if files else []
        parts += [f'a {r.type} stub "{r.title}"' for r in captured if r.type == "bugfix"]
        parts += [f'a test pass "{r.title}"' for r in captured if r.type == "discovery"]
        self.write(f"  captured without an LLM: {'; '.join(parts) or 'nothing'}")

    # -- what the SessionEnd worker does -----------------------------------------------------------

    async def _session_end_work(
        self, store: Store, project: ProjectIdentity
    ) -> tuple[ExtractionReport, list[ConsolidationReport]]:
        from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

        from agentctx.consolidate import consolidate
        from agentctx.demo.standin import LABEL, StandIn
        from agentctx.extract import extract_session
        from agentctx.extract.prompt import TOOL_NAME

        self._heading(2, "Extraction: the transcript becomes typed records")
        with StandIn(TOOL_NAME, _load("extraction.json")) as api:
            self.write(f"  Messages API: a {LABEL}")
            self.write(f"  at {api.url}: it answers with a canned extraction written for this")
            self.write(
                "  session. Real sessions are read by Claude Haiku with your ANTHROPIC_API_KEY."
            )
            client = AsyncAnthropic(
                base_url=api.url,
                api_key=DEMO_API_KEY,
                max_retries=0,
                http_client=DefaultAsyncHttpxClient(trust_env=False),  # never a proxy
            )
            lines: list[str] = []
            try:
                extraction = await extract_session(
                    store,
                    str(self.script["session_id"]),
                    transcript=self.paths.transcript,
                    client=client,
                    log=lines.append,
                )
                if extraction.status != "extracted":
                    raise AgentctxError(
                        f"the demo's extraction ended {extraction.status}: "
                        f"{extraction.error or '; '.join(lines) or 'no detail'}"
                    )
                sent = len(api.requests)
                consolidation = await consolidate(
                    store,
                    project.project_id,
                    time_box=CONSOLIDATION_TIME_BOX_S,
                    client=client,
                    log=lines.append,
                )
            finally:
                await client.close()
            asked = len(api.requests) - sent
        self.write(
            f"  sent: {sent} request{'s' * (sent != 1)}, the redacted transcript "
            f"(~{extraction.tokens_estimated} tokens) and the project's current records"
        )
        if asked:
            self.write(
                f"  and consolidation {asked} request{'s' * (asked != 1)} for retrieval cues, which "
                "the stand-in\n  does not answer (in real sessions Haiku writes them)"
            )
        return extraction, consolidation

    def _show_extraction(self, report: ExtractionReport) -> None:
        written = ", ".join(f"{n} {kind}" for kind, n in sorted(report.written.items()))
        enriched = f"; {report.enriched} capture stub explained" if report.enriched else ""
        self.write(f"  written: {written or 'nothing'}{enriched}")

    def _show_consolidation(
        self, reports: list[ConsolidationReport], project: ProjectIdentity
    ) -> None:
        self._heading(3, "Consolidation (what the SessionEnd worker runs next)")
        for report in reports:
            if report.status not in ("done", "unfinished"):
                raise AgentctxError(
                    f"the demo's consolidation ended {report.status}: {'; '.join(report.errors)}"
                )
        mine = next(r for r in reports if r.project_id == project.project_id)
        digest_step = mine.steps.get("digest", {}).get("result") or {}
        self.write(
            f"  {mine.status} in {mine.elapsed_s:.2f} s, {mine.mode} mode; digest for the next "
            f"session: {digest_step.get('records', 0)} records, ~{digest_step.get('tokens', 0)} "
            "tokens"
        )

    # -- the next session --------------------------------------------------------------------------

    async def _next_session(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            payload = self._payload(event)
            context = await self._hook(str(event["hook"]), payload)
            if event["hook"] == "session-start":
                self._heading(4, "The next session starts: SessionStart injects")
            else:
                self._heading(5, f'A prompt in it: "{payload.get("prompt", "")}"')
                self.write("  UserPromptSubmit injects:")
            self.write(_indented(context) if context else f"{_INDENT}(nothing)")
        await anyio.to_thread.run_sync(self._close_session, self._payload(events[0]))

    async def _search(self, store: Store, project: ProjectIdentity, text: str) -> None:
        from agentctx.core import clock
        from agentctx.retrieval import hybrid
        from agentctx.store import SearchQuery

        self._heading(6, f'ctx_search "{text}" (the MCP tool\'s ranking, called in-process)')
        query = SearchQuery(text=text, project_id=project.project_id, scope="all", limit=5)
        ranked = await hybrid.hybrid_search(store, query, None)
        for hit in ranked.hits:
            record = hit.record
            self.write(
                f"  {record.id}  {record.type:<10} {record.title}  "
                f"[{record.confidence}, {clock.age_label(record.valid_from)}, {hit.score:.2f}]"
            )
        if not ranked.hits:
            self.write("  (no hits)")
        self.write(f"  mode: {ranked.mode}")
        self.write("")

    # -- helpers -----------------------------------------------------------------------------------

    def _heading(self, number: int, title: str) -> None:
        self.write("")
        self.write(f"{number}. {title}")

    def _payload(self, event: dict[str, Any]) -> dict[str, Any]:
        payload = json.loads(self._fill(json.dumps(event["payload"])))
        if not isinstance(payload, dict):
            raise AgentctxError("the demo's script holds a payload that is not an object")
        return payload

    def _fill(self, text: str) -> str:
        """``{{name}}`` placeholders replaced, JSON-escaped (the text is JSON or JSON lines)."""
        for name, value in self.values.items():
            text = text.replace("{{" + name + "}}", json.dumps(value)[1:-1])
        return text


def _warm_imports() -> None:
    try:
        import anthropic  # noqa: F401

        import agentctx.consolidate  # noqa: F401
    except Exception:  # the import in the main thread raises it where it can be reported
        pass


def _label(payload: dict[str, Any], project: str) -> str:
    event = str(payload.get("hook_event_name", "?"))
    if event == "UserPromptSubmit":
        return f'{event} "{_clip(str(payload.get("prompt", "")), 28)}"'
    if event.startswith("PostToolUse"):
        tool_input = payload.get("tool_input") or {}
        target = str(tool_input.get("file_path") or tool_input.get("command") or "")
        if os.path.isabs(target):
            target = os.path.relpath(target, project)
        return f"{event} {payload.get('tool_name', '')} {_clip(target, 28)}"
    return event


def _injected(payload: dict[str, Any], context: str | None) -> str:
    if payload.get("hook_event_name") not in ("SessionStart", "UserPromptSubmit"):
        return ""
    if context is None:
        return "nothing to inject"
    return f"injected ~{estimate_tokens(context)} tokens"


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _indented(text: str) -> str:
    return "\n".join(f"{_INDENT}{line}".rstrip() for line in text.splitlines())
