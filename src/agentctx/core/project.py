"""Project identity: which project a Claude Code session works in, computed from its ``cwd``.

Records are namespaced by ``project_id`` so that every checkout of one repository shares its
memory: clones on other machines, linked worktrees and subfolders all map to the same id.

* With an ``origin`` remote the id is ``sha256("remote:" + normalize_remote(url))``: the URL is
  reduced to ``host/owner/repo`` (scheme, credentials, port and ``.git`` dropped, lower-cased),
  so ssh, scp-like and https spellings agree. Local remotes become ``file:/abs/path`` (also
  lower-cased, ``.git`` dropped); a relative one is resolved against the main worktree root.
  Only ``origin`` counts: another remote name says nothing about which project this is.
* Otherwise ``sha256("path:" + root)`` where ``root`` is the top-level of the MAIN worktree, so
  linked worktrees share the id; outside git, ``root`` is the realpath of ``cwd`` itself.

The *checkout* is where, not which project: the realpath of the top-level of the worktree ``cwd`` is
in (a linked worktree's own top-level, not the main one's; outside git the same root as above). It
keys the handovers, which are per checkout while everything else is shared (docs/spec.md, 5.3).

This runs in latency-critical hook processes: standard library only, cheap imports (no
``typing``, ``pathlib``, ``subprocess``...), and git is never spawned; the few files under
``.git`` that matter are read directly. Not read: global/system config, ``include`` files,
``url.*.insteadOf`` rewrites and ``GIT_DIR``-style variables. Nothing here raises: unreadable
or garbage files fall back to the next rule (a broken ``.git`` file means "not a repository",
as git treats it too). A ``cwd`` that is not an existing directory is identified by its own
path, never by an enclosing repository.
"""

from __future__ import annotations

import os

from agentctx.core import nofollow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GLOBAL_PROJECT_ID = "global"  # reserved namespace for scope=global records

_MAX_READ = 1 << 20  # config and pointer files are tiny; never slurp a huge file in a hook
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-_~%")
_IPV6_CHARS = frozenset("0123456789abcdef:.%")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+-.")
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b"}


class ProjectIdentity:
    """A project's stable id plus its human name, root folder, normalized remote and checkout.

    ``checkout`` (the worktree top-level the cwd is in, :func:`checkout_key`) is not part of the
    equality: two worktrees of one repository are one project.
    """

    __slots__ = ("checkout", "name", "project_id", "remote", "root")

    project_id: str
    name: str
    root: str
    remote: str | None
    checkout: str

    def __init__(
        self,
        project_id: str,
        name: str,
        root: str,
        remote: str | None,
        checkout: str | None = None,
    ) -> None:
        self.project_id = project_id
        self.name = name
        self.root = root
        self.remote = remote
        self.checkout = root if checkout is None else checkout

    def __repr__(self) -> str:
        return (
            f"ProjectIdentity(project_id={self.project_id!r}, name={self.name!r}, "
            f"root={self.root!r}, remote={self.remote!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProjectIdentity):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[str, str, str, str | None]:
        return (self.project_id, self.name, self.root, self.remote)


def normalize_remote(url: str) -> str | None:
    """Canonical ``host/path`` (or ``file:/abs/path``) form of a git URL; None if unusable."""
    return _normalize(url, None)


def _normalize(url: str, base: str | None) -> str | None:
    url = url.strip()
    if not url or any(ord(c) < 32 or ord(c) == 127 for c in url):
        return None
    scheme, sep, rest = url.partition("://")
    if sep:
        scheme = scheme.lower()
        if not scheme[:1].isalpha() or not set(scheme) <= _SCHEME_CHARS:
            return None
        if scheme == "file":
            # file:///p and file://localhost/p both name the local path /p
            path = rest if rest.startswith("/") else "/" + rest.partition("/")[2]
            if path[2:3] == ":":  # file:///C:/x on Windows
                path = path[1:]
            return _local(path, base)
        authority, _, path = rest.partition("/")
        hostport = authority.rpartition("@")[2]  # credentials never identify a project
        if hostport.startswith("["):  # [v6:addr]:port
            host = hostport.partition("]")[0] + "]"
        else:
            host, _, port = hostport.partition(":")
            if port and not port.isdigit():
                # ssh://git@host:owner/repo is wrong but common: read it like scp syntax
                path = port + "/" + path
        return _network(host, path)
    colon, slash = url.find(":"), url.find("/")
    if colon == 1 and url[0].isalpha():  # C:\repo, a Windows drive, not scp's host:path
        return _local(url, base)
    if colon >= 0 and (slash < 0 or colon < slash):  # scp-like [user@]host:path
        return _network(url[:colon].rpartition("@")[2], url[colon + 1 :])
    return _local(url, base)


def _network(host: str, path: str) -> str | None:
    host = host.lower().rstrip(".")
    if host[:1] == "[" and host[-1:] == "]":
        valid = len(host) > 2 and set(host[1:-1]) <= _IPV6_CHARS
    else:
        valid = bool(host) and set(host) <= _HOST_CHARS
    if not valid:
        return None
    path = path.lower().replace("\\", "/").strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    parts = [p for p in path.split("/") if p]  # also collapses doubled slashes
    return host + "/" + "/".join(parts) if parts else None


def _local(path: str, base: str | None) -> str | None:
    drive = path[1:2] == ":" and path[:1].isalpha()
    if not (drive or os.path.isabs(path)):
        if base is None:  # relative paths only mean something against a repo root
            return None
        path = os.path.join(base, path)
    path = os.path.normpath(path).replace("\\", "/").rstrip("/").lower()
    if path.endswith("/.git"):  # /srv/repo/.git and /srv/repo are the same repository
        path = path[:-5]
    elif path.endswith(".git"):
        path = path[:-4]
    return "file:" + (path or "/")


def _read_text(path: str) -> str | None:
    try:  # a FIFO or a device planted in a repository would block or flood a plain open
        # "utf-8-sig" would import its codec module on every hook: the same, by hand
        return (
            nofollow.read_bounded(path, _MAX_READ).decode("utf-8", "replace").removeprefix("\ufeff")
        )
    except (OSError, ValueError):
        return None


def _pointer(path: str, prefix: str, folder: str) -> str | None:
    """Resolve a git pointer file (``gitdir: x`` in ``.git``, or bare ``commondir``)."""
    line = (_read_text(path) or "").strip().partition("\n")[0]
    target = line[len(prefix) :].strip() if line.startswith(prefix) else ""
    if not target:
        return None
    target = os.path.realpath(os.path.join(folder, target))  # join keeps absolute targets
    return target if os.path.isdir(target) else None


def _locate(start: str) -> tuple[str, str, str] | None:
    """(worktree top-level, git dir, common git dir) found walking up from ``start``."""
    d = start
    while True:
        dot_git = os.path.join(d, ".git")
        if os.path.isdir(dot_git):
            # git ignores a .git folder without HEAD and keeps walking; so do we
            if os.path.isfile(os.path.join(dot_git, "HEAD")):
                return d, dot_git, dot_git
        elif os.path.isfile(dot_git):
            # a broken gitfile makes git give up rather than look further up: same here
            gitdir = _pointer(dot_git, "gitdir:", d)
            if gitdir is None:
                return None
            common = _pointer(os.path.join(gitdir, "commondir"), "", gitdir) or gitdir
            return d, gitdir, common
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def find_git_dir(start: str) -> tuple[str, str] | None:
    """(worktree top-level, common git dir) for ``start``, walking up; None outside git."""
    try:
        found = _locate(_real(start))
    except (OSError, ValueError):
        return None
    return None if found is None else (found[0], found[2])


def head_branch(start: str) -> str | None:
    """The branch checked out in the worktree ``start`` is in (its ``HEAD`` file), or None.

    None outside git and on a detached HEAD. A file read, no ``git`` process (the hook path).
    """
    try:
        found = _locate(_real(start))
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    head = (_read_text(os.path.join(found[1], "HEAD")) or "").strip()
    prefix = "ref: refs/heads/"
    return (head[len(prefix) :] or None) if head.startswith(prefix) else None


def _parse_value(raw: str) -> str:
    # git semantics: quotes toggle, backslash escapes, # or ; outside quotes starts a comment,
    # outer whitespace is dropped and inner whitespace kept
    out: list[str] = []
    quoted = False
    spaces = 0
    i = 0
    while i < len(raw):
        c = raw[i]
        i += 1
        if not quoted and c in " \t":
            spaces += 1 if out else 0
            continue
        if not quoted and c in "#;":
            break
        if spaces:
            out.append(" " * spaces)
            spaces = 0
        if c == "\\" and i < len(raw):
            out.append(_ESCAPES.get(raw[i], raw[i]))
            i += 1
        elif c == '"':
            quoted = not quoted
        else:
            out.append(c)
    return "".join(out)


def _parse_header(line: str) -> tuple[str, str] | None:
    """``[section "sub"] rest`` -> (``section.sub``, rest); None if malformed."""
    head = line[1:]
    close, quote = head.find("]"), head.find('"')
    if quote < 0 or 0 <= close < quote:  # [section] or legacy [section.sub]: no case
        return (head[:close].strip().lower(), head[close + 1 :]) if close >= 0 else None
    sub: list[str] = []  # quoted subsection: case kept, a backslash escapes the next char
    i = quote + 1
    while i < len(head) and head[i] != '"':
        i += head[i] == "\\"
        sub.append(head[i : i + 1])
        i += 1
    close = head.find("]", i)
    section = head[:quote].strip().lower()
    return (section + "." + "".join(sub), head[close + 1 :]) if close > 0 and section else None


def _read_config(path: str) -> dict[str, list[str]]:
    """Every ``section[.sub].key`` of a git config file mapped to its values, in file order."""
    values: dict[str, list[str]] = {}
    text = _read_text(path)
    if text is None:
        return values
    section = ""
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        line = lines[n].strip()
        n += 1
        if line.startswith("["):
            header = _parse_header(line)
            section, line = header if header else ("", "")
            line = line.strip()
        if not line or line[0] in "#;" or not section:
            continue
        key, eq, raw = line.partition("=")
        while eq and n < len(lines) and (len(raw) - len(raw.rstrip("\\"))) % 2:
            raw = raw[:-1] + lines[n]  # an odd trailing backslash continues the value
            n += 1
        key = key.strip().lower()
        if key and key[0].isalpha() and all(c.isalnum() or c == "-" for c in key):
            values.setdefault(section + "." + key, []).append(_parse_value(raw) if eq else "")
    return values


def _real(path: str) -> str:
    for resolve in (os.path.realpath, os.path.abspath):
        try:
            return resolve(os.path.abspath(path))
        except (OSError, ValueError):  # deleted process cwd, embedded NUL...
            pass
    return path


def _remote_name(url: str) -> str:
    # from the URL as written, so the human name keeps its case
    s = url.strip().rstrip("/\\")
    s = s[:-4].rstrip("/\\") if s.lower().endswith(".git") else s
    return s.replace("\\", "/").replace(":", "/").rpartition("/")[2]


def _hash(text: str) -> str:
    return sha256_hex(text)


def identify(cwd: str) -> ProjectIdentity:
    """The identity of the project that ``cwd`` belongs to; never raises."""
    path = _real(cwd)
    root, remote, url = path, None, ""
    checkout = path
    try:
        found = _locate(path) if os.path.isdir(path) else None
        if found is not None:
            top, gitdir, common = found
            config = _read_config(os.path.join(common, "config"))
            root = checkout = top
            if gitdir != common:  # linked worktree: name the main worktree instead
                worktree = config.get("core.worktree")
                if os.path.basename(common) == ".git":
                    root = os.path.dirname(common)
                elif worktree and worktree[-1]:  # submodule worktrees set core.worktree
                    root = os.path.realpath(os.path.join(common, worktree[-1]))
                else:  # bare repository: the common dir is all there is
                    root = common
            urls = config.get("remote.origin.url")
            url = urls[0] if urls else ""  # git fetches from the first url
            remote = _normalize(url, root) if url else None
    except (OSError, ValueError):
        root, remote, checkout = path, None, path
    if remote is not None:
        name = _remote_name(url) or remote.rpartition("/")[2]
        return ProjectIdentity(_hash("remote:" + remote), name, root, remote, checkout)
    key = "path:" + os.path.normcase(root)  # case-insensitive on Windows, as its paths are
    return ProjectIdentity(_hash(key), os.path.basename(root) or root, root, None, checkout)


def checkout_key(cwd: str) -> str:
    """The checkout ``cwd`` is in: its worktree's top-level (realpath), else ``identify``'s root."""
    return identify(cwd).checkout


def sha256_hex(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8) as hex, without hashlib's OpenSSL load when CPython has its own."""
    global _sha256
    if _sha256 is None:
        _sha256 = _find_sha256()
    return str(_sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


_sha256: Any = None


def _find_sha256() -> Any:
    """CPython's built-in SHA-256 (a fraction of a millisecond to import; hashlib loads OpenSSL).

    Looked up once: a failed import is not cached, and each try searches the whole path.
    """
    import sys

    # the module of this version first: a failed import searches the whole path (0.45M
    # instructions on every hook, ADR-017)
    names = ("_sha2", "_sha256") if sys.version_info >= (3, 12) else ("_sha256", "_sha2")
    for name in names:
        try:
            return __import__(name).sha256
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256

    return sha256
