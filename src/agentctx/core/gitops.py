"""Git operations in a Bash call, for the capture hook (:mod:`agentctx.core.capture`).

Loaded only when a command names ``git`` or ``gh pr``: its patterns cost a few milliseconds to
compile. Commits, merges, pulls, rebases and ``gh pr create`` are read from the command and
confirmed by git's (or gh's) own output lines; a command that only mentions git records nothing.
The observations are folded per branch by :mod:`agentctx.core.activity` (docs/spec.md, §11.5).
"""

from __future__ import annotations

import re

from agentctx.core.capture import clip, relative
from agentctx.core.project import head_branch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.capture import Scrub
    from agentctx.core.event import Event
    from agentctx.core.shapes import Observation

#: A git (or gh) command at the start of a command segment, not one merely quoted or echoed.
_AT_START = r"(?:^|&&|\|\||[;|&\n(]|\$\()\s*(?:\w+=\S*\s+)*"
_GIT_OP = re.compile(
    _AT_START + r"git\s+(?:-[Cc]\s+\S+\s+|--?[\w-]+(?:=\S+)?\s+)*"
    r"(commit|merge|rebase|pull|cherry-pick|revert)\b([^;&|\n]*)"
)
_GH_PR = re.compile(_AT_START + r"gh\s+pr\s+create\b([^;&|\n]*)")
_GIT_ADD = re.compile(_AT_START + r"git\s+add\s+([^;&|\n]+)")
_COMMIT_LINE = re.compile(
    r"(?m)^\[(detached HEAD|[^\s\]]+) (?:\(root-commit\) )?([0-9a-f]{7,40})\] (.+)$"
)
_STAT_LINE = re.compile(r"(?m)^ (\d+ files? changed.*)$")
_MODE_LINE = re.compile(r"(?m)^ (?:create|delete) mode \d+ (.+)$")
_DIFFSTAT = re.compile(r"(?m)^ (\S[^|\n]*?)\s+\|\s+(?:\d+|Bin)")
_CONFLICT = re.compile(r"(?m)^CONFLICT \([^)\n]*\): Merge conflict in (.+)$")
_MERGED = re.compile(r"(?m)^(?:Fast-forward|Merge made by the '[\w-]+' strategy\.)")
_REBASED = re.compile(r"(?m)Successfully rebased and updated (?:refs/heads/)?(\S+?)\.?$")
_NOT_APPLIED = re.compile(r"(?m)could not apply ([0-9a-f]{7,40})\.\.\. (.*)$")
_PR_URL = re.compile(r"(?m)^(https?://[^\s/]+/\S+/pull/\d+)\s*$")
_PR_FOR = re.compile(r"Creating pull request for (\S+) into (\S+) in \S+")
_PR_TITLE = re.compile(r"""(?:--title|-t)(?:\s+|=)(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;&|]+))""")
_PR_HEAD = re.compile(r"(?:--head|-H)(?:\s+|=)([^\s;&|'\"]+)")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
#: How many commits one Bash call may record (a chain of commits in one command).
COMMITS_MAX = 3
#: How many files one operation names.
FILES_MAX = 12


def operations(
    ctx: Event, base: Observation, command: str, output: str, failed: bool, scrub: Scrub
) -> list[Observation]:
    """Commits, merges, pulls, rebases and opened pull requests that git's output confirms.

    Every text and name is redacted with the event's ``scrub`` (branch names and file paths too).
    """
    found: list[Observation] = []
    ops = {m.group(1): m.group(2) for m in _GIT_OP.finditer(command)}
    if ops:
        paths = [scrub.name(p) for p in _command_paths(ctx, command)]
        for match in list(_COMMIT_LINE.finditer(output))[:COMMITS_MAX]:
            branch, sha, subject = match.groups()
            op = next((o for o in ("cherry-pick", "revert") if o in ops), "commit")
            stat = _STAT_LINE.search(output, match.end())
            files = paths or [scrub.name(relative(ctx, f)) for f in _MODE_LINE.findall(output)]
            branch = None if branch == "detached HEAD" else scrub.name(branch)
            item = f'{op} {sha} "{clip(scrub(subject.strip()), 100)}"' + (
                f" ({clip(stat.group(1).strip(), 80)})" if stat else ""
            )
            found.append(_git(base, op, item, sha, branch, files))
        for op in ("merge", "pull"):
            if op not in ops or (op == "pull" and "--rebase" in ops[op]):  # a rebase: below
                continue
            conflicts = [scrub.name(relative(ctx, f.strip())) for f in _CONFLICT.findall(output)]
            ref = scrub(_first_argument(ops[op]))
            what = op + (f" of {ref}" if ref and op == "merge" else f" from {ref}" if ref else "")
            if conflicts:
                item = f"{what} stopped on conflicts"
            elif _MERGED.search(output) and not failed:
                ff = " (fast-forward)" if "Fast-forward" in output else ""
                item = what + ff
            else:
                continue
            files = conflicts or [
                scrub.name(relative(ctx, f.strip())) for f in _DIFFSTAT.findall(output)
            ]
            found.append(_git(base, op, item, "", _branch(scrub, head_branch(ctx.cwd)), files))
        if "rebase" in ops or ("pull" in ops and "--rebase" in ops["pull"]):
            rebased = _REBASED.search(output)
            stopped = _NOT_APPLIED.search(output)
            upstream = scrub(_first_argument(ops.get("rebase", "")))
            if rebased:
                item = "rebase" + (f" onto {upstream}" if upstream else "")
                found.append(_git(base, "rebase", item, "", scrub.name(rebased.group(1)), []))
            elif stopped:
                conflicts = [
                    scrub.name(relative(ctx, f.strip())) for f in _CONFLICT.findall(output)
                ]
                subject = clip(scrub(stopped.group(2).strip()), 100)
                item = f'rebase stopped on conflicts at {stopped.group(1)} "{subject}"'
                at = _branch(scrub, head_branch(ctx.cwd))
                found.append(_git(base, "rebase", item, "", at, conflicts))
    pr = _GH_PR.search(command)
    url = _PR_URL.search(output) if pr else None
    if pr and url and not failed:
        args = pr.group(1)
        title_match = _PR_TITLE.search(args)
        title = next((g for g in title_match.groups() if g), "") if title_match else ""
        title = clip(" ".join(scrub(title).split()), 90)
        source = _PR_FOR.search(output)
        head = _PR_HEAD.search(args)
        branch = source.group(1) if source else head.group(1) if head else head_branch(ctx.cwd)
        branch = _branch(scrub, branch)
        link = clip(scrub(url.group(1)), 200)
        item = f"PR opened: {link}" + (f' "{title}"' if title else "")
        if source:
            item += f" into {scrub.name(source.group(2))}"
        found.append({**_git(base, "pr", item, link, branch, []), "title": title})
    for obs in list(found):
        if obs.get("branch"):
            found.append({**base, "kind": "branch", "name": str(obs["branch"])})
    return found


def _branch(scrub: Scrub, branch: str | None) -> str | None:
    return scrub.name(branch) if branch else branch


def _git(
    base: Observation, op: str, item: str, ref: str, branch: str | None, files: list[str]
) -> Observation:
    return {
        **base,
        "kind": "git",
        "op": op,
        "item": item,
        "ref": ref,
        "branch": clip(branch, 90) if branch else None,
        "files": files[:FILES_MAX],
        "session_files": op == "commit",
    }


def _first_argument(args: str) -> str:
    """The first word of git arguments that is not an option or its value (a ref), or ""."""
    skip = False
    for word in _QUOTED.sub(" \x00 ", args).split():  # a quoted message is one word, never a ref
        if skip:
            skip = False
        elif word in ("-m", "-s", "-X", "--strategy", "--onto", "-F"):
            skip = True
        elif word != "\x00" and not word.startswith(("-", "$", "'", '"')):
            return clip(word, 80)
    return ""


def _command_paths(ctx: Event, command: str) -> list[str]:
    """The files a command stages or commits by name (``git add a b``, ``git commit -- a b``)."""
    words: list[str] = []
    for match in _GIT_ADD.finditer(command):
        words.extend(match.group(1).split())
    for match in _GIT_OP.finditer(command):
        if match.group(1) == "commit" and " -- " in match.group(2) + " ":
            words.extend(match.group(2).partition(" -- ")[2].split())
    paths = []
    for word in words:
        word = word.strip("'\"")
        if word and not word.startswith("-") and not word.endswith(("/", ".")) and "*" not in word:
            paths.append(relative(ctx, word))
    return list(dict.fromkeys(paths))[:FILES_MAX]
