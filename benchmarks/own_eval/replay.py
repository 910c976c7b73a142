"""The recorded model answers: served to the real client offline, or captured from the live API.

**Replay.** ``answers.json`` holds, per scripted session, the ``record_extraction`` tool input that
stands in for Claude Haiku's answer, and the verdicts for merge checks (``judge_pairs``).
:class:`Replay` is a script for ``tests/messages_server.MessagesServer`` (a real HTTP server on
127.0.0.1), so the real ``anthropic`` client and the real extraction and consolidation code run
unchanged. A request is matched to its answer by the SHA-256 of the transcript part of its user
message (everything after ``Transcript:``; the part before it lists record ids, which change
from run to run); when no hash matches, by the answer's *anchor*, a phrase that occurs in only
one session's transcript; that fallback is reported as drift (the rendered transcript changed since
the answers were written, e.g. after a change to ``agentctx.claude.transcript``). A ``supersedes`` value
``@title:<words>`` is resolved as the model would: the id of the first listed current record
whose title contains those words (None when none does). A merge pair without a recorded verdict
gets ``same: false`` and is reported. Consolidation's retrieval-cue requests (``write_cues``,
issue 14) are answered with no cues: the recorded answers predate cues, so the eval's store has
none but what the recorded extractions hold (none either); the records asked about are counted.

**Capture.** In live mode :class:`Capture` is an httpx response hook on the client: it keeps each
extraction request's transcript hash and the model's tool input, with ``supersedes`` ids turned back
into ``@title:`` references, in the shape of ``answers.json``, so a live run can be replayed.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.messages_server import ErrorReply, Recorded, Reply, ToolUseReply

from agentctx.consolidate import cues, merge_check
from agentctx.extract import prompt as extract_prompt

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

TRANSCRIPT_MARK = "\n\nTranscript:\n"
REF = "@title:"
_LISTED = re.compile(r"^- (\S+) \[(\w+)\] (.*)$", re.M)
_CUE_RECORD = re.compile(r'<record id="(r\d+)" type="')
_PAIR = re.compile(
    r'<pair id="([^"]+)" type="([^"]+)">\n<record>\nTitle: ([^\n]*)\nBody: .*?\n</record>\n'
    r"<record>\nTitle: ([^\n]*)\n",
    re.S,
)


def split_request(user_text: str) -> tuple[str, str] | None:
    """An extraction message as (context block, transcript part); None when it is not one."""
    context, mark, transcript = user_text.partition(TRANSCRIPT_MARK)
    return (context, transcript) if mark else None


def transcript_hash(transcript: str) -> str:
    """The stable key of an extraction request."""
    return hashlib.sha256(transcript.encode()).hexdigest()


def listed(context: str) -> list[tuple[str, str, str]]:
    """The (id, type, title) of every current record the context block lists."""
    return [(m[1], m[2], m[3]) for m in _LISTED.finditer(context)]


def resolve(output: dict[str, Any], context: str) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``output`` with ``@title:`` references made ids; the references left unresolved."""
    records = listed(context)
    unresolved: list[str] = []
    out: dict[str, Any] = json.loads(json.dumps(output))
    for group in ("decisions", "conventions"):
        for entry in out.get(group) or []:
            ref = entry.get("supersedes")
            if isinstance(ref, str) and ref.startswith(REF):
                words = ref[len(REF) :].strip().lower()
                found = next((rid for rid, _t, title in records if words in title.lower()), None)
                entry["supersedes"] = found
                if found is None:
                    unresolved.append(ref)
    return out, unresolved


def referenced(output: dict[str, Any], context: str) -> dict[str, Any]:
    """The inverse of :func:`resolve`: ids in ``supersedes`` made ``@title:`` references."""
    titles = {rid: title for rid, _t, title in listed(context)}
    out: dict[str, Any] = json.loads(json.dumps(output))
    for group in ("decisions", "conventions"):
        for entry in out.get(group) or []:
            ref = entry.get("supersedes")
            if isinstance(ref, str) and ref in titles:
                entry["supersedes"] = REF + titles[ref][:60]
    return out


@dataclass(frozen=True, slots=True)
class Answer:
    """One recorded extraction answer."""

    script: str
    session_id: str
    transcript_sha256: str
    anchor: str
    output: dict[str, Any]
    mistakes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MergeVerdict:
    """A recorded merge-check verdict for pairs whose titles contain ``a`` and ``b``."""

    a: str
    b: str
    same: bool
    title: str | None = None
    body: str | None = None

    def fits(self, title_a: str, title_b: str) -> bool:
        """Whether this verdict is for the pair of these two titles (either order)."""
        a, b, x, y = self.a.lower(), self.b.lower(), title_a.lower(), title_b.lower()
        return (a in x and b in y) or (a in y and b in x)


@dataclass(slots=True)
class Answers:
    """The contents of an answers file."""

    about: str
    extractions: list[Answer]
    merges: list[MergeVerdict]

    @classmethod
    def load(cls, path: Path) -> Answers:
        """Read an answers file."""
        data = json.loads(path.read_text())
        return cls(
            about=data.get("about", ""),
            extractions=[
                Answer(
                    script=e["script"],
                    session_id=e["session_id"],
                    transcript_sha256=e.get("transcript_sha256", ""),
                    anchor=e["anchor"],
                    output=e["output"],
                    mistakes=tuple(e.get("mistakes", ())),
                )
                for e in data["extractions"]
            ],
            merges=[
                MergeVerdict(m["a"], m["b"], m["same"], m.get("title"), m.get("body"))
                for m in data.get("merge_checks", [])
            ],
        )


@dataclass(slots=True)
class Served:
    """What the replay server answered, for the results."""

    extractions: list[dict[str, Any]] = field(default_factory=list)
    merge_pairs: list[dict[str, Any]] = field(default_factory=list)
    cue_records: int = 0  #: records consolidation asked cues for (answered with none)
    problems: list[str] = field(default_factory=list)


class Replay:
    """A ``MessagesServer`` script that answers from recorded answers (see the module docstring)."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.served = Served()
        self._lock = threading.Lock()

    def __call__(self, request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        tool = (body.get("tool_choice") or {}).get("name")
        text = _user_text(body)
        with self._lock:
            if tool == extract_prompt.TOOL_NAME:
                return self._extraction(text)
            if tool == merge_check.TOOL_NAME:
                return self._merge(text)
            if tool == cues.TOOL_NAME:
                keys = _CUE_RECORD.findall(text)
                self.served.cue_records += len(keys)
                return ToolUseReply(
                    cues.TOOL_NAME, {"records": [{"id": k, "cues": []} for k in keys]}
                )
            self.served.problems.append(f"unexpected request for tool {tool!r}")
            return ErrorReply(400, f"no recorded answer for tool {tool!r}")

    def _extraction(self, text: str) -> Reply:
        parts = split_request(text)
        if parts is None:
            self.served.problems.append("an extraction request without a transcript part")
            return ErrorReply(400, "no recorded answer: not a single-part extraction request")
        context, transcript = parts
        digest = transcript_hash(transcript)
        how = "sha256"
        answer = next((a for a in self.answers.extractions if a.transcript_sha256 == digest), None)
        if answer is None:
            found = [a for a in self.answers.extractions if a.anchor in transcript]
            answer = found[0] if len(found) == 1 else None
            how = "anchor"
        if answer is None:
            self.served.problems.append(f"no recorded answer for transcript {digest[:12]}")
            return ErrorReply(400, "no recorded answer for this transcript")
        output, unresolved = resolve(answer.output, context)
        self.served.extractions.append(
            {
                "script": answer.script,
                "matched_by": how,
                "transcript_sha256": digest,
                "unresolved": unresolved,
            }
        )
        return ToolUseReply(extract_prompt.TOOL_NAME, output)

    def _merge(self, text: str) -> Reply:
        verdicts = []
        for key, kind, title_a, title_b in _PAIR.findall(text):
            verdict = next((v for v in self.answers.merges if v.fits(title_a, title_b)), None)
            self.served.merge_pairs.append(
                {"type": kind, "a": title_a, "b": title_b, "recorded": verdict is not None}
            )
            if verdict is None:
                verdicts.append({"pair": key, "same": False, "title": None, "body": None})
            else:
                verdicts.append(
                    {
                        "pair": key,
                        "same": verdict.same,
                        "title": verdict.title,
                        "body": verdict.body,
                    }
                )
        return ToolUseReply(merge_check.TOOL_NAME, {"verdicts": verdicts})


def _user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    content = messages[0].get("content") if messages and isinstance(messages[0], dict) else ""
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content if isinstance(content, str) else ""


class Capture:
    """An httpx response hook that keeps the live extraction answers in the answers-file shape."""

    def __init__(self, scripts: dict[str, str]) -> None:
        self.scripts = scripts  #: anchor -> script name, to label what was captured
        self.extractions: list[dict[str, Any]] = []
        self.merges: list[dict[str, Any]] = []

    async def __call__(self, response: httpx.Response) -> None:
        """Keep the tool input of a successful /v1/messages response."""
        if not response.request.url.path.endswith("/v1/messages") or response.status_code != 200:
            return
        await response.aread()
        try:
            body = json.loads(response.request.content)
            reply = response.json()
        except ValueError:
            return
        tool_input = next(
            (b.get("input") for b in reply.get("content", []) if b.get("type") == "tool_use"),
            None,
        )
        if not isinstance(tool_input, dict):
            return
        tool = (body.get("tool_choice") or {}).get("name")
        text = _user_text(body)
        parts = split_request(text) if tool == extract_prompt.TOOL_NAME else None
        if parts is not None:
            context, transcript = parts
            script = next((s for a, s in self.scripts.items() if a in transcript), "?")
            self.extractions.append(
                {
                    "script": script,
                    "transcript_sha256": transcript_hash(transcript),
                    "output": referenced(tool_input, context),
                    "usage": reply.get("usage"),
                }
            )
        elif tool == merge_check.TOOL_NAME:
            pairs = {k: (a, b) for k, _t, a, b in _PAIR.findall(text)}
            for verdict in tool_input.get("verdicts") or []:
                a, b = pairs.get(str(verdict.get("pair")), ("?", "?"))
                self.merges.append({**verdict, "a": a, "b": b})
