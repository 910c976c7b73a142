"""Tests for agentctx.core.project: remote normalization and project identity from git repos."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentctx.core.project import (
    GLOBAL_PROJECT_ID,
    ProjectIdentity,
    checkout_key,
    find_git_dir,
    identify,
    normalize_remote,
)

SRC = Path(__file__).resolve().parents[1] / "src"
GH = "github.com/owner/repo"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def path_id(path: Path) -> str:
    return sha("path:" + os.path.realpath(path))


class Git:
    """The git CLI run in ``tmp_path``, isolated from the user's and the system's config."""

    def __init__(self, tmp_path: Path) -> None:
        home = tmp_path / "home"
        home.mkdir()
        self.cwd = tmp_path
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
        )

    def __call__(self, *args: str | Path, cwd: Path | None = None) -> str:
        cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
        cmd += ["-c", "protocol.file.allow=always", *map(str, args)]
        done = subprocess.run(
            cmd, cwd=cwd or self.cwd, env=self.env, check=True, capture_output=True, text=True
        )
        return done.stdout.strip()


@pytest.fixture
def git(tmp_path: Path) -> Git:
    return Git(tmp_path)


def make_repo(git: Git, path: Path, remote: str | None = None) -> Path:
    git("init", "-q", path)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=path)
    if remote is not None:
        git("remote", "add", "origin", remote, cwd=path)
    return path


# --- normalize_remote ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:Owner/Repo.git", GH),
        ("ssh://git@github.com:22/Owner/Repo.git", GH),
        ("https://user:token@GitHub.com/Owner/Repo.git/", GH),
        ("http://github.com/owner/repo", GH),
        ("git://github.com/owner/repo.git", GH),
        ("git+ssh://git@github.com/owner/repo", GH),
        ("ssh+git://git@github.com/owner/repo.git", GH),
        ("  https://github.com/owner/repo  ", GH),
        ("https://github.com//owner//repo///", GH),
        ("github.com:owner/repo", GH),
        ("ssh://git@github.com:Owner/Repo.git", GH),  # wrong-but-common scp-in-ssh spelling
        ("https://x-access-token:ghp_abc@github.com:443/owner/repo.git", GH),
        ("git@gitlab.com:owner/repo.git", "gitlab.com/owner/repo"),
        ("git@github.com:other/repo.git", "github.com/other/repo"),
        ("ssh://git@host.example:2222/team/sub/proj.git", "host.example/team/sub/proj"),
        ("https://[::1]:8080/x/y.git", "[::1]/x/y"),
        ("https://dev.azure.com/org/proj/_git/Repo", "dev.azure.com/org/proj/_git/repo"),
        ("/srv/git/repo.git", "file:/srv/git/repo"),
        ("/srv/git/repo/.git/", "file:/srv/git/repo"),
        ("file:///srv/git/repo.git", "file:/srv/git/repo"),
        ("file://localhost/srv/git/repo", "file:/srv/git/repo"),
        ("/srv/git/../git/Repo", "file:/srv/git/repo"),
        ("../other", None),  # relative: only identify() knows the root to resolve it against
        ("repo", None),
        ("", None),
        ("   ", None),
        ("not a url", None),
        ("https://", None),
        ("https:///owner/repo", None),
        ("ssh://host", None),
        ("git@github.com:", None),
        ("git@github.com:.git", None),
        ("://github.com/owner/repo", None),
        ("1http://github.com/owner/repo", None),
        ("::::", None),
        ("bad host:owner/repo", None),
        ("https://github.com/owner/repo\n", GH),
        ("https://github.com/own\x00er/repo", None),
    ],
)
def test_normalize_remote(url: str, expected: str | None) -> None:
    assert normalize_remote(url) == expected


def test_normalize_remote_distinguishes_projects() -> None:
    urls = [
        "git@github.com:owner/repo.git",
        "git@github.com:owner/repo2.git",
        "git@github.com:owner2/repo.git",
        "git@gitlab.com:owner/repo.git",
        "/srv/owner/repo.git",
    ]
    assert len({normalize_remote(u) for u in urls}) == len(urls)


# --- ProjectIdentity ------------------------------------------------------------------------


def test_identity_value_semantics() -> None:
    a = ProjectIdentity("x" * 64, "repo", "/r", None)
    b = ProjectIdentity("x" * 64, "repo", "/r", None)
    c = ProjectIdentity("x" * 64, "repo", "/r", "github.com/o/repo")
    assert a == b
    assert hash(a) == hash(b)
    assert a != c
    assert a != "repo"
    assert repr(c) == (
        "ProjectIdentity(project_id='" + "x" * 64 + "', name='repo', root='/r', "
        "remote='github.com/o/repo')"
    )
    assert not hasattr(a, "__dict__")
    assert GLOBAL_PROJECT_ID == "global"


# --- identify on real repositories ---------------------------------------------------------


def test_clone_and_original_share_id_across_url_forms(git: Git, tmp_path: Path) -> None:
    orig = make_repo(git, tmp_path / "orig", "https://user:tok@GitHub.com/Owner/Repo.git")
    git("clone", "-q", orig, tmp_path / "clone")
    git("remote", "set-url", "origin", "git@github.com:owner/repo", cwd=tmp_path / "clone")
    a, b = identify(str(orig)), identify(str(tmp_path / "clone"))
    assert a.project_id == b.project_id == sha("remote:" + GH)
    assert a.remote == b.remote == GH
    assert a.name == "Repo"
    assert b.name == "repo"
    assert a.root == os.path.realpath(orig)
    assert b.root == os.path.realpath(tmp_path / "clone")


def test_clones_of_local_bare_repo_share_id(git: Git, tmp_path: Path) -> None:
    src = make_repo(git, tmp_path / "src")
    git("clone", "-q", "--bare", src, tmp_path / "bare.git")
    git("clone", "-q", tmp_path / "bare.git", tmp_path / "c1")
    git("clone", "-q", "file://" + str(tmp_path / "bare.git"), tmp_path / "c2")
    a, b = identify(str(tmp_path / "c1")), identify(str(tmp_path / "c2"))
    assert a.project_id == b.project_id
    assert a.remote == "file:" + str(tmp_path / "bare").lower()
    assert a.name == b.name == "bare"


def test_relative_remote_resolved_against_root(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo", "../upstream.git")
    ident = identify(str(repo))
    assert ident.remote == "file:" + str(tmp_path / "upstream").lower()
    assert ident.name == "upstream"


@pytest.mark.parametrize("remote", [None, "git@github.com:Owner/Repo.git"])
def test_linked_worktree_shares_id(git: Git, tmp_path: Path, remote: str | None) -> None:
    main = make_repo(git, tmp_path / "main", remote)
    git("worktree", "add", "-q", "-b", "feature", tmp_path / "wt", cwd=main)
    (tmp_path / "wt" / "pkg").mkdir()
    a = identify(str(main))
    assert identify(str(tmp_path / "wt")) == a
    assert identify(str(tmp_path / "wt" / "pkg")) == a
    assert a.root == os.path.realpath(main)
    assert a.name == ("Repo" if remote else "main")
    expected = sha("remote:" + GH) if remote else path_id(main)
    assert a.project_id == expected


def test_checkout_is_the_worktree_the_cwd_is_in(git: Git, tmp_path: Path) -> None:
    main = make_repo(git, tmp_path / "main")
    git("worktree", "add", "-q", "-b", "feature", tmp_path / "wt", cwd=main)
    (tmp_path / "wt" / "pkg").mkdir()
    (tmp_path / "plain").mkdir()
    assert identify(str(main)).checkout == os.path.realpath(main)
    assert identify(str(tmp_path / "wt" / "pkg")).checkout == os.path.realpath(tmp_path / "wt")
    assert checkout_key(str(tmp_path / "wt")) == os.path.realpath(tmp_path / "wt")
    assert checkout_key(str(tmp_path / "plain")) == os.path.realpath(tmp_path / "plain")
    assert identify(str(tmp_path / "wt")) == identify(str(main))  # still one project


def test_find_git_dir_matches_git(git: Git, tmp_path: Path) -> None:
    main = make_repo(git, tmp_path / "main")
    git("worktree", "add", "-q", tmp_path / "wt", cwd=main)
    (main / "a" / "b").mkdir(parents=True)
    for start in (main, main / "a" / "b", tmp_path / "wt"):
        top, common = git("rev-parse", "--show-toplevel", "--git-common-dir", cwd=start).split()
        common = os.path.realpath(os.path.join(start, common))
        assert find_git_dir(str(start)) == (os.path.realpath(top), common)
    assert find_git_dir(str(tmp_path / "home")) is None


def test_subdirectory_gets_repo_id(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo")
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    assert identify(str(sub)) == identify(str(repo))
    assert identify(str(sub)).root == os.path.realpath(repo)


def test_submodule_uses_its_own_origin_and_folder(git: Git, tmp_path: Path) -> None:
    lib = make_repo(git, tmp_path / "lib")
    app = make_repo(git, tmp_path / "app")
    git("submodule", "add", "-q", lib, "vendor/lib", cwd=app)
    git("worktree", "add", "-q", tmp_path / "libwt", cwd=app / "vendor" / "lib")
    ident = identify(str(app / "vendor" / "lib"))
    assert ident.remote == "file:" + str(lib).lower()
    assert ident.root == os.path.realpath(app / "vendor" / "lib")
    assert identify(str(tmp_path / "libwt")) == ident
    assert identify(str(app)).project_id == path_id(app)


def test_non_git_dirs(tmp_path: Path) -> None:
    if find_git_dir(str(tmp_path)) is not None:
        pytest.skip("tmp_path lies inside a git repository")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    ia = identify(str(a))
    assert ia == ProjectIdentity(path_id(a), "a", os.path.realpath(a), None)
    assert identify(str(b)).project_id != ia.project_id
    assert identify(str(a) + "/./") == ia


def test_nonexistent_dir_hashes_given_path(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    assert identify(str(missing)).project_id == path_id(missing)
    assert identify(str(missing)).root == os.path.realpath(missing)


def test_nonexistent_dir_inside_repo_is_not_the_repo(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo", "git@github.com:o/r")
    assert identify(str(repo / "gone")).project_id == path_id(repo / "gone")


def test_symlink_equals_target(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo")
    (tmp_path / "link").symlink_to(repo, target_is_directory=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "plain-link").symlink_to(plain, target_is_directory=True)
    assert identify(str(tmp_path / "link")) == identify(str(repo))
    assert identify(str(tmp_path / "plain-link")) == identify(str(plain))


def test_relative_cwd(git: Git, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(git, tmp_path / "repo")
    monkeypatch.chdir(repo)
    assert identify(".") == identify(str(repo))
    assert identify("") == identify(str(repo))


def test_git_file_with_relative_gitdir(git: Git, tmp_path: Path) -> None:
    work = make_repo(git, tmp_path / "work", "https://example.org/Team/Tool.git")
    (tmp_path / "store").mkdir()
    (work / ".git").rename(tmp_path / "store" / "work.git")
    (work / ".git").write_text("gitdir: ../store/work.git\n")
    (work / "sub").mkdir()
    ident = identify(str(work / "sub"))
    assert ident.project_id == sha("remote:example.org/team/tool")
    assert ident.name == "Tool"
    assert ident.root == os.path.realpath(work)
    assert find_git_dir(str(work)) == (
        os.path.realpath(work),
        os.path.realpath(tmp_path / "store" / "work.git"),
    )
    assert git("rev-parse", "--show-toplevel", cwd=work / "sub") == str(work)


ODD_CONFIG = """\ufeff# leading comment
[core]
\trepositoryformatversion = 0
[remote "upstream"]
\turl = https://github.com/wrong/one
[Remote "origin"]   ; a comment after the header
\t\t  URL   =   "git@GitHub.com:Owner/"Repo.git  # trailing comment
\turl = https://github.com/second/url
\tfetch = +refs/heads/*:refs/remotes/origin/*
"""


@pytest.mark.parametrize(
    ("config", "remote"),
    [
        (ODD_CONFIG, GH),
        ('[remote "origin"] url = git@github.com:owner/repo\n', GH),
        ("[remote.origin]\n  url = git@github.com:owner/repo ;c\n", GH),
        ('[remote "origin"]\n url = "https://h.io/a;b/c#d"\n', "h.io/a;b/c#d"),
        ('[remote "origin"]\n url = https://h.io/a/\\\nb.git\n', "h.io/a/b"),
        (
            '[remote "origin"]\nurl=https://h.io/a/b\n[remote "origin"]\nurl=https://x.io/y\n',
            "h.io/a/b",
        ),
        ('[remote "Origin"]\n url = git@github.com:owner/repo\n', None),  # subsection is exact
        ('[remote "upstream"]\n url = git@github.com:owner/repo\n', None),  # only origin counts
        ('[remote "origin"]\n fetch = +refs/heads/*:refs/remotes/origin/*\n', None),
        ('[remote "origin"]\n url\n', None),
        ('[remote "origin"]\n url = \n', None),
        ('[remote "origin"\n url = git@github.com:owner/repo\n', None),  # broken header
        ("url = git@github.com:owner/repo\n", None),  # outside any section
        ("\x00\xff garbage \x01", None),
    ],
)
def test_config_parsing(git: Git, tmp_path: Path, config: str, remote: str | None) -> None:
    repo = make_repo(git, tmp_path / "repo")
    (repo / ".git" / "config").write_bytes(config.encode("utf-8", "surrogateescape"))
    ident = identify(str(repo))
    assert ident.remote == remote
    assert ident.project_id == (sha("remote:" + remote) if remote else path_id(repo))


def test_odd_config_is_readable_by_git(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo")
    (repo / ".git" / "config").write_text(ODD_CONFIG)
    urls = git("config", "--get-all", "remote.origin.url", cwd=repo).splitlines()
    assert urls == ["git@GitHub.com:Owner/Repo.git", "https://github.com/second/url"]


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage", b"gitdir:", b"gitdir: does/not/exist", b"\xff\xfe\x00", b"gitdir: \x00"],
)
def test_garbage_git_file_falls_back_to_cwd(tmp_path: Path, content: bytes) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / ".git").write_bytes(content)
    assert find_git_dir(str(work / "sub")) is None
    assert identify(str(work / "sub")).project_id == path_id(work / "sub")


def test_git_dir_without_head_is_skipped(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo")
    (repo / "inner" / ".git").mkdir(parents=True)
    assert identify(str(repo / "inner")).root == os.path.realpath(repo)


def test_unreadable_config_does_not_raise(git: Git, tmp_path: Path) -> None:
    repo = make_repo(git, tmp_path / "repo", "git@github.com:o/r")
    config = repo / ".git" / "config"
    config.unlink()
    config.mkdir()  # reading a directory fails even for root, unlike chmod 000
    assert identify(str(repo)).project_id == path_id(repo)
    config.rmdir()
    config.write_text('[remote "origin"]\n url = git@github.com:o/r\n')
    config.chmod(0)
    try:
        readable = os.access(config, os.R_OK)  # root reads it anyway
        ident = identify(str(repo))
    finally:
        config.chmod(0o644)
    assert ident.project_id == (sha("remote:github.com/o/r") if readable else path_id(repo))


def test_broken_commondir_does_not_raise(git: Git, tmp_path: Path) -> None:
    main = make_repo(git, tmp_path / "main")
    git("worktree", "add", "-q", tmp_path / "wt", cwd=main)
    gitdir = tmp_path / "wt" / git("rev-parse", "--git-dir", cwd=tmp_path / "wt")
    (gitdir / "commondir").write_bytes(b"\xff/nowhere\n")
    assert identify(str(tmp_path / "wt")).root == os.path.realpath(tmp_path / "wt")


@pytest.mark.parametrize("cwd", ["", ".", "/", "//", "\x00", "a\x00b", "/no/such/dir", "~"])
def test_identify_never_raises(cwd: str) -> None:
    ident = identify(cwd)
    assert len(ident.project_id) == 64
    assert ident.name


# --- import cost --------------------------------------------------------------------------


def test_import_is_cheap() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    code = "import sys, agentctx.core.project; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout.split()
    assert "agentctx.core.project" in out
    for heavy in ("typing", "dataclasses", "subprocess", "pathlib", "configparser", "re"):
        assert heavy not in out, heavy
