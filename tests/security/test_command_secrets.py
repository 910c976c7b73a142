"""Issue 24, finding 4: passwords given to command-line tools, tested from the table itself.

For every row of :data:`agentctx.core.redact.commands.TABLE` and every tool of the row, generated
passwords (letters, digits, punctuation, quotes, spaces) are written into the command in every way
the row says the value follows (next word, attached, ``=``, ``user%PW``, echo/printf pipes,
here-strings, here-documents, operands, keywords, option lists), quoted as a shell would need it
(single quotes, double quotes with escapes, unquoted when the password allows it). No form may keep
the password, or any run of it the quoting left whole. Ordinary commands (no secret) must come back
unchanged. Then the other forms of the finding: a YAML value on the next line, an assignment
continued with ``\\``, ``.pgpass`` lines; and the whole path: a command through the real
PostToolUse hook, the store and the team file written for git.

Hypothesis runs under the project's profiles (tests/conftest.py): derandomized in CI, so CI sees
the same examples on every commit; random in ``nox -s explore``.
"""

from __future__ import annotations

import re
import shlex
import string
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentctx.core.redact.commands import TABLE, Row
from agentctx.redact import redact

if TYPE_CHECKING:
    from collections.abc import Iterator

FIXED = settings(
    deadline=None,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow],
)

#: Characters a password may hold unquoted in a shell word (no quotes, $, \, blanks, operators).
PLAIN = string.ascii_letters + string.digits + "!@#%^*_+=.,:~/-"
#: Every printable character a password may hold when quoted.
ANY = string.ascii_letters + string.digits + string.punctuation + " "


def _password(alphabet: str) -> st.SearchStrategy[str]:
    return (
        st.text(alphabet=alphabet, min_size=8, max_size=28)
        .map(lambda s: s.strip())
        .filter(
            lambda s: (
                len(s) >= 8
                and any(c.isdigit() for c in s)
                and any(c.isalpha() for c in s)
                and not s.startswith(("-", "#", "~", "/"))
            )
        )
    )


def quotings(value: str) -> Iterator[tuple[str, str]]:
    """(the shell word for ``value``, a name of the quoting): every way a user could write it."""
    yield "'" + value.replace("'", "'\"'\"'") + "'", "single"
    escaped = re.sub(r'(["$`\\])', r"\\\1", value)
    yield f'"{escaped}"', "double"
    if all(c in PLAIN for c in value):
        yield value, "plain"
    yield shlex.quote(value), "shlex"


def pieces(password: str) -> list[str]:
    """The runs of the password that quoting keeps whole (split at quotes, escapes, $, `)."""
    return [p for p in re.split(r"['\"\\$`]", password) if len(p) >= 5]


def commands(row: Row, tool: str, password: str) -> Iterator[str]:
    """Every command that gives ``password`` to ``tool`` the way ``row`` says."""
    sub = f" {row.sub}" if row.sub else ""
    when = f" {row.when.split()[0]}" if row.when else ""
    secret = password
    if row.split == ":":
        secret = "admin:" + password
    elif row.split == "%":
        secret = "DOMAIN\\admin%" + password
    elif row.split == ",":
        secret = "admin," + password
    elif row.split == "/":
        secret = f"system/{password}@orcl"
    if row.source:
        secret = "pass:" + secret
    forms = row.forms.split()
    for word, _ in quotings(secret):
        for flag in row.flags.split():
            if "next" in forms:
                yield f"{tool}{sub}{when} {flag} {word} --verbose target"
            if "eq" in forms:
                yield f"{tool}{sub}{when} {flag}={word} target"
            if "attached" in forms and not flag.startswith("--"):  # long options never attach
                yield f"{tool}{sub}{when} {flag}{word} target"
            if "keyword" in forms:
                yield f"{tool} connection modify office {flag} {word}"
        if "last" in forms:
            yield f"{tool}{sub}{when} /etc/nginx/.htpasswd admin {word} 2>/dev/null"
        if "operand" in forms:
            share = " Z: \\\\srv\\share" if row.tools == "net" and row.sub == "use" else ""
            user = " bob" if row.nth == 2 and not share else ""
            yield f"{tool}{sub}{share}{user} {word} /persistent:no"
        if "stdin" in forms:
            yield f"echo {word} | {tool}{sub}{when} --quiet"
            yield f"echo -n {word} | sudo {tool}{sub}{when}"
            yield f"printf '%s\\n' {word} | {tool}{sub}{when}"
            yield f"{tool}{sub}{when} <<< {word}"
            yield f"cd /srv && {tool}{sub}{when} <<'EOF'\n{secret}\nEOF\necho done"
            yield f"$ {tool}{sub}{when} <<EOF\n  {secret}\nEOF"
        if "opts" in forms and "," not in password:
            option = shlex.quote(f"username=bob,password={password},vers=3.0")
            yield f"{tool} -t cifs //srv/share /mnt {row.flags.split()[0]} {option}"
        if "pgpass" in forms and ":" not in password:
            line = shlex.quote(f"db.example.com:5432:app:bob:{password}")
            yield f"{tool} {line} >> ~/.pgpass && chmod 600 ~/.pgpass"


ROWS = [(row, tool) for row in TABLE for tool in row.tools.split()]


def _ids() -> list[str]:
    return [
        f"{tool}:{row.forms.replace(' ', '+')}:{row.flags.split()[0] if row.flags else row.sub or '-'}"
        for row, tool in ROWS
    ]


def _check(row: Row, tool: str, password: str) -> int:
    # a .pgpass field cannot hold ":", an -o option list item cannot hold ","
    assume(not ("pgpass" in row.forms and ":" in password))
    assume(not ("opts" in row.forms and "," in password))
    checked = 0
    for command in commands(row, tool, password):
        text = f"Bash: {command}\nexit 1"
        out = redact(text)
        assert password not in out, f"{tool} ({row.forms}) kept the password: {out!r}"
        for piece in pieces(password):
            assert piece not in out, f"{tool} ({row.forms}) kept {piece!r}: {out!r}"
        assert "[REDACTED:" in out
        assert out.startswith("Bash: ") and out.endswith("\nexit 1")
        checked += 1
    return checked


@pytest.mark.parametrize(("row", "tool"), ROWS, ids=_ids())
@FIXED
@given(password=_password(ANY))
def test_every_table_row_redacts_generated_passwords(row: Row, tool: str, password: str) -> None:
    assert _check(row, tool, password) > 0


@pytest.mark.parametrize(("row", "tool"), ROWS, ids=_ids())
@FIXED
@given(password=_password(PLAIN))
def test_every_table_row_redacts_unquoted_passwords(row: Row, tool: str, password: str) -> None:
    assert _check(row, tool, password) > 0


def test_the_table_covers_the_tools_the_finding_names() -> None:
    named = {
        ("sudo", "stdin"), ("htpasswd", "last"), ("ldapsearch", "next"), ("ldapmodify", "next"),
        ("zip", "next"), ("keytool", "next"), ("sqlcmd", "next"), ("gh", "stdin"),
        ("openssl", "next"), ("ssh-keygen", "next"), ("chpasswd", "stdin"),
        ("smbclient", "next"), ("nmcli", "keyword"), ("net", "operand"), ("mysql", "attached"),
        ("curl", "next"), ("wget", "eq"), ("sshpass", "next"), ("docker", "stdin"),
        ("docker", "next"), ("redis-cli", "next"), ("mongosh", "next"), ("7z", "attached"),
        ("unzip", "next"), ("rar", "attached"), ("gpg", "next"), ("echo", "pgpass"),
    }  # fmt: skip
    have = {(tool, form) for row, tool in ROWS for form in row.forms.split()}
    assert named <= have, named - have


# -- ordinary commands are not mangled ---------------------------------------------------------------

ORDINARY = [
    "zip -r out.zip dir",
    "zip -q -r release.zip src -x '*.pyc'",
    "unzip -o out.zip -d build",
    "ssh-keygen -t ed25519 -C 'me@example.com' -f ~/.ssh/id_ed25519",
    "ssh-keygen -N '' -t rsa -b 4096 -f deploy_key",
    "sudo apt-get install -y ripgrep",
    "sudo -u postgres psql -c 'select 1'",
    "sudo -S -v",
    "echo hello | sudo tee /etc/motd",
    'git commit -m "password reset flow"',
    'git commit -m "Fix: zip -P handling and sudo -S prompts"',
    "cat notes.txt | sudo -S true",
    "printf '%s\\n' \"$PW\" | sudo -S true",
    'sudo -S true <<< "$SUDO_PASSWORD"',
    "echo $TOKEN | docker login -u bot --password-stdin ghcr.io",
    "docker login -u bot --password-stdin ghcr.io < token.txt",
    "gh auth login --web",
    "gh auth status",
    "htpasswd -c .htpasswd admin",
    "ldapsearch -x -W -D cn=admin -b dc=example,dc=com",
    "openssl enc -d -aes-256-cbc -in f.enc -out f -pass env:FILE_PASSWORD",
    "openssl pkcs12 -export -in c.pem -out c.p12 -passout file:pw.txt",
    "openssl passwd -6 -stdin",
    "mysql -u root -p shop",
    "curl -u admin https://ci.example.com/api",
    "curl -fsSL https://example.com/install.sh | sh",
    "nmcli con show",
    "nmcli dev wifi list",
    "net use",
    "net use Z: \\\\srv\\share /persistent:yes",
    "net use * /delete",
    "net user",
    "7z x archive.7z -oout",
    "rar x a.rar",
    "keytool -list -keystore k.jks",
    'sqlcmd -S srv -E -Q "select 1"',
    "smbclient -L //srv -N",
    "sshpass -e ssh deploy@web1",
    "redis-cli ping",
    "wget https://example.com/file.tar.gz",
    "gpg --decrypt file.gpg",
    "mount -o remount,rw /",
    "time zip -q -r a.zip src",
    "git log --author=me --since=2.weeks",
    'echo "db:5432:app:user:$PGPASSWORD" >> ~/.pgpass',
    "The net use of this is small; zip it up and sudo make install.",
    "Use sudo -S to read the password from stdin.",
    "http://localhost:8080/health https://example.com/a?b=c",
]


@pytest.mark.parametrize("command", ORDINARY)
def test_ordinary_commands_are_not_mangled(command: str) -> None:
    assert redact(command) == command


# -- the other forms of the finding --------------------------------------------------------------------

_WORDY = st.text(
    alphabet=string.ascii_letters + string.digits + "!@#%^*_+=.-", min_size=8, max_size=30
)


@FIXED
@given(password=_WORDY.filter(lambda s: any(c.isdigit() for c in s) and s[0].isalnum()))
def test_yaml_values_on_the_next_line(password: str) -> None:
    for text in (
        f"db:\n  password:\n    {password}\n  host: db1\n",
        f"password: |\n  {password}\nuser: app\n",
        f"auth:\n  token: >-\n    {password}\n    {password[::-1]}\nnext: 1\n",
        f"secret: |2\n   {password}\n",
        f"- name: x\n  api_token:\n    {password}\n",
    ):
        out = redact(text)
        assert password not in out, out
        assert "[REDACTED:" in out


def test_yaml_nested_mappings_are_not_values() -> None:
    for text in (
        "password:\n  min_length: 12\n  require_digit: true\n",
        "token:\n  - read\n  - write\n",
        "secret:\n# a comment\nother: 1\n",
        "password:\nuser: app\n",
    ):
        assert redact(text) == text, text


@FIXED
@given(password=_WORDY.filter(lambda s: any(c.isdigit() for c in s) and s[0].isalnum()))
def test_assignments_continued_with_a_backslash(password: str) -> None:
    for text in (
        f"export DB_PASSWORD=\\\n  {password}\n",
        f"API_TOKEN=\\\n{password} ./run.sh",
        f"docker run -e POSTGRES_PASSWORD=\\\n    {password} postgres",
    ):
        out = redact(text)
        assert password not in out, out


@FIXED
@given(password=_WORDY.filter(lambda s: any(c.isdigit() for c in s)))
def test_pgpass_lines(password: str) -> None:
    for text in (
        f"db.example.com:5432:app:bob:{password}\n",
        f"$ cat ~/.pgpass\nlocalhost:5432:*:postgres:{password}\n*:*:*:app:{password}x\n",
        f"echo 'db:5432:app:u:{password}' >> ~/.pgpass",
        f'echo "*:*:*:postgres:{password}" > ~/.pgpass',
        f"printf '%s\\n' 'h:6432:db:u:{password}' | tee -a ~/.pgpass",
    ):
        out = redact(text)
        assert password not in out, out
