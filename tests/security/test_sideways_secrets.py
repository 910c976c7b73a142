"""Issue 24, finding 11: secrets that arrive sideways.

The class: a value the rules find secret in one place of an event must not be kept in another
place of it (the failing test's output that echoes the password of the command, a branch named
after it), node names (file paths, branch names) go through the redactor like record text, and a
token is found wherever it stands: after ``test_``, inside an identifier, in a URL's path or query
string, in a file name. The values are generated (a seeded generator); the events go through the
real PostToolUse hook in a subprocess and the real store; the team file written for git is read
back too.
"""

from __future__ import annotations

import random
import string
import subprocess
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from agentctx import team
from agentctx.core import writes
from agentctx.core.project import identify
from agentctx.core.redact import redact_all
from agentctx.core.redact.engine import plainly_clean
from agentctx.redact import redact
from tests.helpers import new_record, payload, query, run_hook, seed
from tests.security.test_redaction_kinds import KINDS

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.store import Store

_RNG = random.Random(2411)
ALNUM = string.ascii_letters + string.digits
SID = "5e1c67ab-53e7-4862-81ae-d0e013e3270b"


def gen(n: int, chars: str = ALNUM) -> str:
    """A random string; a digit and a letter in it when ``chars`` has both."""
    mixed = any(c.isdigit() for c in chars) and any(c.isalpha() for c in chars)
    while True:
        value = "".join(_RNG.choice(chars) for _ in range(n))
        if not mixed or (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
            return value


def password() -> str:
    """A realistic password: letters, digits and a little punctuation, no shell quoting needed."""
    return gen(6) + _RNG.choice("!@#%^*_+=.") + gen(5)


def tokens() -> list[tuple[str, str]]:
    """(kind, value): provider tokens of several shapes, generated."""
    return [
        ("github", "ghp_" + gen(36)),
        ("anthropic", "sk-ant-api03-" + gen(90, ALNUM + "_-") + "AA"),
        ("openai", "sk-proj-" + gen(48)),
        ("slack", "xoxb-" + gen(12, string.digits) + "-" + gen(24)),
        ("hugging face", "hf_" + gen(34)),
        ("gitlab", "glpat-" + gen(20)),
        ("stripe", "sk_live_" + gen(24)),
        ("npm", "npm_" + gen(36)),
    ]


# -- a token wherever it stands ----------------------------------------------------------------------

PLACES = [
    "test_{t}",
    "tests/test_{t}.py",
    "TOKEN_{t}",
    "my_api_key_{t}_backup",
    "backup-{t}.json",
    "feature/{t}",
    "fix-{t}-retry",
    "https://api.example.com/v1/keys/{t}/items",
    "https://example.com/hook?key={t}&a=1",
    "https://example.com/hook?a=1&t={t}",
    "src/{t}/config.py",
    "C:\\Users\\me\\{t}.txt",
    "{t}.env",
    "refs/heads/{t}",
]


@pytest.mark.parametrize("place", PLACES)
def test_a_token_is_found_wherever_it_stands(place: str) -> None:
    for kind, token in tokens():
        text = place.replace("{t}", token)
        out = redact(text)
        assert token not in out, f"{kind} kept in {out!r}"
        assert "[REDACTED:" in out


# -- every occurrence of a value found secret ----------------------------------------------------------

COMMANDS = [
    "mysql -h db -u root -p{p} app < seed.sql && pytest -q",
    "echo '{p}' | sudo -S pytest -q",
    "sshpass -p '{p}' ssh ci@build1 true && pytest",
    "ldapsearch -x -D cn=admin -w {p} -b dc=example,dc=com && pytest",
    "htpasswd -b .htpasswd admin {p} && npm test",
    "DB_PASSWORD={p} pytest -q tests/test_db.py",
]
OUTPUTS = [
    "FAILED tests/test_db.py::test_login - AssertionError: assert '{p}' == 'x'",
    "E   sqlalchemy.exc.OperationalError: password authentication failed for {p}",
    "1 failed: got {p}",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_password_redacted_in_the_command_is_masked_in_its_output(command: str) -> None:
    for output in OUTPUTS:
        secret = password()
        text = command.format(p=secret) + "\n" + output.format(p=secret)
        out = redact(text)
        assert secret not in out, out
        # and as one event of several texts (the hook's title, body, names)
        texts = [command.format(p=secret), output.format(p=secret), f"wip-{secret}"]
        assert all(secret not in t for t in redact_all(texts))


def test_short_values_are_masked_as_whole_words_only() -> None:
    out = redact("mysql -pab12 db\nab12 failed; ab123 and xab12 are other words")
    assert out == (
        "mysql -p[REDACTED:password] db\n[REDACTED:password] failed; ab123 and xab12 are other words"
    )


def test_the_name_gate_passes_every_kind_of_secret_to_the_rules() -> None:
    """``redact_name`` skips the rules only for plainly clean names: no secret may look clean."""
    for kind, make, template in KINDS:
        secret = make()
        for text in (secret, template.replace("{s}", secret), f"src/{secret}.py"):
            if redact(text) != text:
                assert not plainly_clean(text), (kind, text)
    for _, token in tokens():
        assert not plainly_clean(f"feature/{token}")
    for clean in ("src/app/main.py", "tests/test_api.py", "main", "fix/login-retry"):
        assert plainly_clean(clean)


# -- through the real hook, the store and the team file --------------------------------------------------


def _post(cwd: Path, command: str, output: str, *, failed: bool) -> None:
    extra: dict[str, Any] = (
        {"error": "Exit code 1\n" + output}
        if failed
        else {"tool_response": {"stdout": output, "stderr": "", "interrupted": False}}
    )
    event = "PostToolUseFailure" if failed else "PostToolUse"
    data = payload(
        event,
        SID,
        cwd,
        tool_name="Bash",
        tool_input={"command": command, "description": "run"},
        tool_use_id=f"toolu_{uuid.uuid4().hex}",
        **extra,
    )
    result = run_hook("post-tool-use", data, cwd=cwd)
    assert result.returncode == 0 and result.stdout == b"", result.stderr


def _edit(cwd: Path, path: str) -> None:
    data = payload(
        "PostToolUse",
        SID,
        cwd,
        tool_name="Edit",
        tool_input={"file_path": path, "old_string": "a", "new_string": "b"},
        tool_use_id=f"toolu_{uuid.uuid4().hex}",
        tool_response={"filePath": path},
    )
    result = run_hook("post-tool-use", data, cwd=cwd)
    assert result.returncode == 0 and result.stdout == b"", result.stderr


def _everything_stored() -> str:
    rows = query("SELECT title, body, coalesce(rationale, ''), keywords, cues FROM records")
    names = query("SELECT name FROM nodes")
    return "\n".join(str(v) for row in rows + names for v in row)


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout + done.stderr


def test_sideways_secrets_through_the_real_hook(project_dir: Path) -> None:
    seed(project_dir, [])
    kept: list[str] = []
    for command in COMMANDS:
        secret = password()
        kept.append(secret)
        output = "\n".join(o.format(p=secret) for o in OUTPUTS) + "\n1 failed in 0.1s\n"
        _post(project_dir, command.format(p=secret), output, failed=True)
    # branch names and file paths: tokens, and a password the same command redacted
    _git(project_dir, "init", "-q", "-b", "main")
    (project_dir / "README.md").write_text("x\n")
    _git(project_dir, "add", "README.md")
    _git(project_dir, "commit", "-q", "-m", "init")
    for _, token in tokens()[:4]:
        kept.append(token)
        branch = f"feature/{token}"
        out = _git(project_dir, "checkout", "-b", branch)
        _post(project_dir, f"git checkout -b {branch}", out, failed=False)
        _edit(project_dir, str(project_dir / "src" / f"test_{token}.py"))
        _edit(project_dir, str(project_dir / f"backup-{token}" / "settings.py"))
    secret = password()
    kept.append(secret)
    _post(
        project_dir,
        f"git checkout -b wip-{secret} ; sshpass -p {secret} ssh ci true",
        "",
        failed=False,
    )
    stored = _everything_stored()
    for value in kept:
        assert value not in stored
    assert "[REDACTED:" in stored
    names = [r[0] for r in query("SELECT name FROM nodes")]
    assert any(n.startswith("feature/[REDACTED:github]") for n in names), names
    assert any(n.startswith("wip-[REDACTED:password]") for n in names), names


@pytest.mark.anyio
async def test_the_write_path_and_the_team_file_never_hold_the_values(
    store: Store, project_dir: Path
) -> None:
    project = identify(str(project_dir))
    await store.touch_project(project)
    kept: list[str] = []
    for command in COMMANDS:
        secret = password()
        kept.append(secret)
        record = await store.add(
            new_record(
                type="bugfix",
                title=f"Deploy fails: {command.format(p=secret)}",
                body=f"The output said: {OUTPUTS[0].format(p=secret)}\nand {secret} again.",
                project_id=project.project_id,
            )
        )
        assert secret not in record.title + record.body
    token = tokens()[0][1]
    kept.append(token)
    async with store.transaction() as tx:  # extraction's entities: node names
        await tx.run(
            writes.relate(record.id, project.project_id, "file", f"src/test_{token}.py", "2026")
        )
    path = await team.export_team(
        store, project.project_id, str(project_dir), settings={"team_export": True}
    )
    assert path is not None
    exported = (project_dir / ".agentctx" / "context.md").read_text()
    assert "Deploy fails" in exported
    stored = _everything_stored()
    for value in kept:
        assert value not in exported
        assert value not in stored
