"""Issue 16, finding 3: secrets that enter through other doors.

One test per kind of secret (the 14 kinds that leaked, then the kinds of gitleaks' default rules
and detect-secrets' plugins that docs/security.md lists), each with a value generated here; then
the doors: every record write (the store, the capture hooks, import, extraction's enrichment,
merges) goes through :mod:`agentctx.core.writes`, which redacts, and every model request is built
by :func:`agentctx.extract.llm.forced_tool` or sent to the ``claude`` CLI, both through
:func:`agentctx.extract.llm.outbound`, which redacts too.
"""

from __future__ import annotations

import random
import re
import string
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from anthropic import AsyncAnthropic

from agentctx.core import home, writes
from agentctx.core.driver import sqlite
from agentctx.core.observe import apply
from agentctx.extract import llm
from agentctx.redact import redact
from agentctx.store import transfer
from tests.helpers import PROJECT, new_record
from tests.messages_server import MessagesServer, ToolUseReply

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentctx.store import Store

_RNG = random.Random(16)
ALNUM = string.ascii_letters + string.digits
HEXL = "0123456789abcdef"
B64 = ALNUM + "./"


def gen(n: int, chars: str = ALNUM) -> str:
    """A random string that holds a digit, a lower- and an upper-case letter when ``chars`` can."""
    while True:
        value = "".join(_RNG.choice(chars) for _ in range(n))
        if (
            n < 6
            or chars not in (ALNUM, B64)
            or (
                any(c.isdigit() for c in value)
                and any(c.islower() for c in value)
                and any(c.isupper() for c in value)
            )
        ):
            return value


def discord() -> str:
    user_id = str(_RNG.randrange(10**17, 10**18))
    import base64

    head = base64.b64encode(user_id.encode()).decode().rstrip("=")
    return f"{head}.{gen(6)}.{gen(38)}"


# (kind, a generated secret, the text it stands in). The secret must not survive redaction.
KINDS: list[tuple[str, Callable[[], str], str]] = [
    # -- the 14 kinds of the finding --
    ("sshpass -p", lambda: gen(12), "sshpass -p '{s}' ssh deploy@db1"),
    ("sshpass -p (no space)", lambda: gen(12), "sshpass -p{s} ssh deploy@db1"),
    ("curl -uuser:pw", lambda: gen(14), "curl -uadmin:{s} https://api.example.com/v1"),
    ("curl --user=user:pw", lambda: gen(14), "curl --user=admin:{s} https://x.example.com"),
    ("SSHPASS=", lambda: gen(12), "SSHPASS={s} sshpass -e ssh deploy@db1"),
    (
        "openssl -pass pass:",
        lambda: gen(16),
        "openssl enc -aes-256-cbc -in a -out b -pass pass:{s}",
    ),
    ("openssl -passin", lambda: gen(16), "openssl rsa -in k.pem -passin 'pass:{s}'"),
    ("python auth=(u, pw)", lambda: gen(12), "requests.get(url, auth=('admin', '{s}'))"),
    ("HTTPBasicAuth(u, pw)", lambda: gen(12), 'httpx.get(u, auth=httpx.BasicAuth("me", "{s}"))'),
    ("mailgun key-", lambda: "key-" + gen(32, HEXL), "MAILGUN = '{s}'"),
    ("php define", lambda: gen(14), "define('DB_PASSWORD', '{s}');"),
    ("wordpress salt", lambda: gen(40, ALNUM + "!@#%^*"), "define( 'AUTH_KEY', '{s}' );"),
    ("netrc", lambda: gen(14), "machine api.example.com login octocat password {s}"),
    ("netrc multi-line", lambda: gen(14), "machine h.example.com\n  login me\n  password {s}\n"),
    ("pgpass", lambda: gen(14), "db.example.com:5432:app:admin:{s}\n"),
    ("vault hvs.", lambda: "hvs." + gen(90, ALNUM + "_-"), "VAULT_TOKEN={s}"),
    ("vault batch hvb.", lambda: "hvb." + gen(140, ALNUM + "_-"), "token {s} expires"),
    (
        "azure sas sig=",
        lambda: gen(43, ALNUM + "+/") + "%3D",
        "https://a.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig={s}",
    ),
    ("discord bot token", discord, "client.run('{s}')"),
    ("square sq0atp-", lambda: "sq0atp-" + gen(22, ALNUM + "_-"), "SQUARE={s}"),
    ("square sq0csp-", lambda: "sq0csp-" + gen(43, ALNUM + "_-"), "secret {s}"),
    ("htpasswd apr1", lambda: "$apr1$" + gen(8, B64) + "$" + gen(22, B64), "admin:{s}"),
    ("htpasswd bcrypt", lambda: "$2y$05$" + gen(53, B64), "admin:{s}"),
    ("htpasswd sha", lambda: "{SHA}" + gen(27, ALNUM + "+/") + "=", "admin:{s}"),
    ("shadow sha512", lambda: "$6$" + gen(16, B64) + "$" + gen(86, B64), "root:{s}:19000:0"),
    # -- gitleaks' default rules and detect-secrets' plugins (docs/security.md) --
    ("anthropic", lambda: "sk-ant-api03-" + gen(90, ALNUM + "_-"), "key {s}"),
    ("openai", lambda: "sk-proj-" + gen(48), "OPENAI={s}"),
    ("aws access key id", lambda: "AKIA" + gen(16, string.ascii_uppercase + "234567"), "{s}"),
    (
        "aws secret access key",
        lambda: gen(40, ALNUM + "/+"),
        "aws_secret_access_key = {s}",
    ),
    ("github pat", lambda: "ghp_" + gen(36), "{s}"),
    ("github fine-grained", lambda: "github_pat_" + gen(82, ALNUM + "_"), "{s}"),
    ("gitlab", lambda: "glpat-" + gen(20, ALNUM + "_-"), "{s}"),
    ("slack", lambda: "xoxb-" + gen(10, string.digits) + "-" + gen(24), "{s}"),
    ("stripe", lambda: "sk_live_" + gen(24), "{s}"),
    ("google api key", lambda: "AIza" + gen(35, ALNUM + "_-"), "{s}"),
    ("npm", lambda: "npm_" + gen(36), "//registry.npmjs.org/:_authToken={s}"),
    ("pypi", lambda: "pypi-AgEIcHlwaS5vcmc" + gen(60, ALNUM + "_-"), "{s}"),
    ("hugging face", lambda: "hf_" + gen(34), "{s}"),
    ("sendgrid", lambda: "SG." + gen(22, ALNUM + "_-") + "." + gen(43, ALNUM + "_-"), "{s}"),
    ("twilio", lambda: "SK" + gen(32, HEXL), "{s}"),
    ("telegram", lambda: "123456789:AA" + gen(33, ALNUM + "_-"), "bot {s}"),
    ("mailchimp", lambda: gen(32, HEXL) + "-us12", "{s}"),
    (
        "jwt",
        lambda: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx" + gen(20) + "." + gen(43, ALNUM + "_-"),
        "{s}",
    ),
    (
        "private key",
        lambda: gen(64, ALNUM + "+/"),
        "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----",
    ),
    ("basic auth in url", lambda: gen(12), "https://user:{s}@example.com/x"),
    ("keyword (api_key=)", lambda: gen(24), "api_key = '{s}'"),
    ("authorization header", lambda: gen(32), "Authorization: Bearer {s}"),
    ("artifactory", lambda: "AKC" + gen(70), "{s}"),
    ("azure storage key", lambda: gen(86, ALNUM + "+/") + "==", "AccountName=a;AccountKey={s};"),
    ("azure ad client secret", lambda: gen(3) + "8Q~" + gen(34, ALNUM + "_~.-"), "{s}"),
    ("digitalocean", lambda: "dop_v1_" + gen(64, HEXL), "{s}"),
    ("shopify", lambda: "shpat_" + gen(32, HEXL), "{s}"),
    ("databricks", lambda: "dapi" + gen(32, HEXL), "{s}"),
    ("doppler", lambda: "dp.pt." + gen(43), "{s}"),
    ("grafana", lambda: "glsa_" + gen(32) + "_" + gen(8, HEXL), "{s}"),
    ("postman", lambda: "PMAK-" + gen(24, HEXL) + "-" + gen(34, HEXL), "{s}"),
    ("sentry", lambda: "sntrys_" + gen(40), "{s}"),
    ("linear", lambda: "lin_api_" + gen(40), "{s}"),
    ("heroku", lambda: "HRKU-" + gen(36, ALNUM + "_-"), "{s}"),
    ("pulumi", lambda: "pul-" + gen(40, HEXL), "{s}"),
    ("planetscale", lambda: "pscale_tkn_" + gen(43), "{s}"),
    ("new relic", lambda: "NRAK-" + gen(27, string.ascii_uppercase + string.digits), "{s}"),
    (
        "dynatrace",
        lambda: (
            "dt0c01."
            + gen(24, "ABCDEFGHJKLMNPQRSTUVWXYZ234567")
            + "."
            + gen(64, "ABCDEFGHJKLMNPQRSTUVWXYZ234567")
        ),
        "{s}",
    ),
    ("rubygems", lambda: "rubygems_" + gen(48, HEXL), "{s}"),
    ("facebook", lambda: "EAAC" + gen(120), "{s}"),
    ("alibaba", lambda: "LTAI" + gen(20), "{s}"),
    ("sourcegraph", lambda: "sgp_" + gen(40, HEXL), "{s}"),
    ("openshift", lambda: "sha256~" + gen(43, ALNUM + "_-"), "{s}"),
    (
        "terraform cloud",
        lambda: (
            gen(14, "abcdefghijklmnopqrstuvwxyz0123456789") + ".atlasv1." + gen(67, ALNUM + "_-")
        ),
        "{s}",
    ),
    ("brevo", lambda: "xkeysib-" + gen(64, HEXL) + "-" + gen(16), "{s}"),
    ("age", lambda: "AGE-SECRET-KEY-1" + gen(58, string.ascii_uppercase + string.digits), "{s}"),
    (
        "discord webhook",
        lambda: gen(68, ALNUM + "_-"),
        "https://discord.com/api/webhooks/123456789012345678/{s}",
    ),
    (
        "teams webhook",
        lambda: gen(60, ALNUM + "-"),
        "https://acme.webhook.office.com/webhookb2/{s}",
    ),
]


@pytest.mark.parametrize(("kind", "make", "template"), KINDS, ids=[k[0] for k in KINDS])
def test_every_kind_is_redacted(kind: str, make: Callable[[], str], template: str) -> None:
    secret = make()
    text = "context before\n" + template.replace("{s}", secret) + "\nand after"
    clean = redact(text)
    assert secret not in clean, f"{kind} leaked: {clean!r}"
    assert "[REDACTED:" in clean
    assert clean.startswith("context before") and clean.endswith("and after")


def test_pair_finders_leave_non_secrets_alone() -> None:
    for text in (
        "requests.get(url, auth=('admin', os.environ['PW']))",
        "config.set('timeout', '30')",
        "define('WP_DEBUG', 'true');",
        "docker run -u 1000:1000 image",
        "the machine learning model",
        "12:30:45:00 started",
        "sig=short",
        "$1$ is the first argument",
    ):
        assert redact(text) == text, text


# -- the doors: every write, and every model request ------------------------------------------------

SECRET = "Xk9#mPq2vLw7Tz"
LEAKY_TITLE = f"Deploy with sshpass -p '{SECRET}'"
LEAKY_BODY = f"curl -uadmin:{SECRET} https://api.example.com and SSHPASS={SECRET}"


def connect() -> Any:
    return sqlite.connect(home.db_path(), isolation_level=None)


def _stored_text(_home: Path) -> str:
    conn = connect()
    try:
        rows = conn.execute("SELECT title, body, rationale, keywords, cues FROM records").fetchall()
    finally:
        conn.close()
    return "\n".join(str(v) for row in rows for v in row)


@pytest.mark.anyio
async def test_store_writes_are_redacted(store: Store, agentctx_home: Path) -> None:
    first = await store.add(new_record(title=LEAKY_TITLE, body=LEAKY_BODY, rationale=LEAKY_BODY))
    assert SECRET not in first.title and SECRET not in first.body
    # a supersession (MCP ctx_record/supersede, dashboard edits) is an insert too
    await store.add(new_record(title=LEAKY_TITLE + " v2", body=LEAKY_BODY, supersedes=first.id))
    async with store.transaction() as tx:  # extraction's enrichment of a stub
        await tx.update_body(first.id, LEAKY_BODY, f"sshpass {SECRET}")
    await store.add(new_record(title="cued", cues=[f"how do I run sshpass -p '{SECRET}' here"]))
    async with store.transaction() as tx:  # the cues consolidation writes later
        await tx.update_cues(first.id, [f"where does curl -uadmin:{SECRET} go"])
    text = _stored_text(agentctx_home)
    assert SECRET not in text
    assert "[REDACTED:password]" in text


@pytest.mark.anyio
async def test_capture_stubs_are_redacted(store: Store, agentctx_home: Path) -> None:
    conn = connect()
    try:
        obs: dict[str, Any] = {
            "kind": "stub",
            "project_id": PROJECT,
            "title": LEAKY_TITLE,
            "body": LEAKY_BODY,
        }
        apply(conn, [obs])  # type: ignore[list-item]
        apply(conn, [obs])  # type: ignore[list-item]  # deduplicated by its stored (redacted) title
        count = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    finally:
        conn.close()
    assert count == 1
    assert SECRET not in _stored_text(agentctx_home)


@pytest.mark.anyio
async def test_imported_records_are_redacted(store: Store, agentctx_home: Path) -> None:
    await store.add(new_record(title="plain", body="plain"))
    data = await transfer.export_data(store)
    for record in data["records"]:
        record["title"] = LEAKY_TITLE
        record["body"] = LEAKY_BODY
        record["id"] = "01" + record["id"][2:-1] + "Z"
    await transfer.import_data(store, data)
    assert SECRET not in _stored_text(agentctx_home)


@pytest.mark.anyio
async def test_merges_are_redacted(store: Store, agentctx_home: Path) -> None:
    survivor = await store.add(new_record(title="a", body="b"))
    async with store.transaction() as tx:
        changed = await tx.run(
            writes.absorb(survivor.id, {"title": LEAKY_TITLE, "body": LEAKY_BODY}, True)
        )
    assert changed == 1
    assert SECRET not in _stored_text(agentctx_home)


def test_no_other_module_writes_record_text() -> None:
    """The class, not the case: only core/writes.py inserts records or updates their text."""
    src = Path(__file__).resolve().parents[2] / "src" / "agentctx"
    insert = re.compile(r"INSERT\s+(?:OR\s+\w+\s+)?INTO\s+records\s*\(|INSERT_RECORD_SQL")
    update = re.compile(
        r"UPDATE\s+records\s+SET\s+[^\"']*\b(?:title|body|rationale|keywords|cues)\b"
    )
    allowed = {src / "core" / "writes.py", src / "core" / "schema.py"}
    offenders = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if path not in allowed and (insert.search(text := path.read_text()) or update.search(text))
    ]
    assert offenders == []


@pytest.mark.anyio
async def test_every_model_request_is_redacted() -> None:
    tool = {"name": "note", "input_schema": {"type": "object", "properties": {}}}
    with MessagesServer(default=ToolUseReply("note", {})) as server:
        async with AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0) as client:
            called, _, _ = await llm.forced_tool(
                client,
                "claude-haiku-4-5",
                system="s",
                tool=tool,
                user_text=f"Existing records:\n- {LEAKY_TITLE}\n{LEAKY_BODY}",
                max_tokens=16,
                usage=llm.Usage(),
            )
        sent = str(server.messages_requests()[0].body)
    assert called
    assert SECRET not in sent
    assert "[REDACTED:password]" in sent


def test_hook_path_compiles_nothing_until_a_write() -> None:
    """core.writes imports the rules lazily: importing it does not import ``re`` patterns."""
    import subprocess
    import sys

    code = (
        "import sys; import agentctx.core.writes, agentctx.core.observe;"
        "print('agentctx.core.redact.engine' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.anyio
async def test_the_claude_code_transport_sends_redacted_text(tmp_path: Path) -> None:
    """The second transport (the ``claude`` CLI, issue 15) sends what :func:`llm.outbound` makes of
    the text too. What is checked is our side of the pipe: a script in the CLI's place keeps its
    stdin and answers like a failing CLI (the real CLI's runs are in tests/e2e)."""
    from agentctx.extract.claude_code import ClaudeCodeCaller, ClaudeCodeError

    secret = "sk-ant-api03-" + "".join(_RNG.choice(ALNUM) for _ in range(90)) + "AA"
    kept = tmp_path / "stdin.txt"
    script = tmp_path / "claude"
    script.write_text(f"#!/bin/sh\ncat > {kept}\necho 'not json'\nexit 1\n")
    script.chmod(0o700)
    caller = ClaudeCodeCaller(str(script), attempts=1, retry_pause=0)
    with pytest.raises(ClaudeCodeError):
        await caller("claude-haiku-4-5", f"record title: deploy with {secret}", llm.Usage())
    sent = kept.read_text()
    assert "record title: deploy with" in sent
    assert secret not in sent and sent == llm.outbound(f"record title: deploy with {secret}")
