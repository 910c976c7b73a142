"""Redaction: planted secrets of every kind disappear, non-secrets survive, ``redact`` is idempotent.

Every secret here is fake but has the real format, and is built at runtime by concatenation so that
no secret scanner flags this file (and so that a real-looking token never sits in the repository).
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentctx.redact import MARKER_PATTERN, find_secrets, redact

if TYPE_CHECKING:
    from pathlib import Path

# -- fake secrets ------------------------------------------------------------------------------------

ALNUM = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0"  # 40 mixed characters to cut fakes from
ANTHROPIC = "sk-" + "ant-" + "api03-" + "Fake" + ALNUM * 2 + "-" + ALNUM[:40] + "AA"
OPENAI_PROJECT = "sk-" + "proj-" + "Fake" + ALNUM * 3 + "_" + ALNUM[:20]
OPENAI_LEGACY = "sk-" + ALNUM[:20] + "T3Blbk" + "FJ" + ALNUM[20:40]
AWS_KEY_ID = "AKIA" + "IOSFODNN7" + "EXAMPLE"
AWS_TEMP_KEY_ID = "ASIA" + "Y34FZKBOKMUTVV7A"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_CLASSIC = {p: p + "_" + "Fake" + ALNUM[:32] for p in ("ghp", "gho", "ghu", "ghs", "ghr")}
GITHUB_FINE = "github_" + "pat_" + "11AB2CDEF0" + ALNUM[:12] + "_" + ALNUM * 2 + "Xy"
GITLAB = {
    p: p + "-" + "Fake" + ALNUM[:16] for p in ("glpat", "gldt", "glrt", "glcbt", "glptt", "glft")
}
SLACK_BOT = "xox" + "b-" + "123456789012-1234567890123-" + "Fake" + ALNUM[:20]
SLACK_USER = "xox" + "p-" + "123456789012-1234567890123-1234567890123-" + "f" * 32
SLACK_WEBHOOK_PATH = "services/" + "T00000000/B00000000/" + "Fake" + ALNUM[:20]
STRIPE_SECRET = "sk_" + "live_" + "51Fake" + ALNUM[:24]
STRIPE_RESTRICTED = "rk_" + "test_" + "51Fake" + ALNUM[:24]
STRIPE_WEBHOOK = "whsec_" + "Fake" + ALNUM[:28]
GOOGLE_API_KEY = "AIza" + "SyFake" + ALNUM[:29]
GOOGLE_OAUTH = "ya29." + "a0AfH6SMB" + "Fake" + ALNUM[:30] + "-x_y"
GOOGLE_CLIENT_SECRET = "GOCSPX-" + "Fake" + ALNUM[:24]
NPM = "npm_" + "Fake" + ALNUM[:32]
PYPI = "pypi-" + "AgEIcHlwaS5vcmc" + "CJDk1ZTdmYzIwLWI2ZDEtNDYxMS1" + "Fake" + ALNUM * 2
HUGGINGFACE = "hf_" + "Fake" + ALNUM[:30]
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    "." + "eyJ" + "zdWIiOiJmYWtlLXVzZXIiLCJpYXQiOjE1MTYyMzkwMjJ9"
    "." + "Fake" + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQ"
)
PASSWORD = "Tr0ub4dor" + "&3xQ"  # a password with shell-unfriendly characters
DB_PASSWORD = "Pg" + "Pa55w0rd" + "2024"
ENV_SECRET = "s3cr3t" + "Value" + "9f8e7d"
HIGH_ENTROPY = "Zx8" + "Qm2Lp9" + "Rt4Vw7Ks1Nb6Hd3Gf5Jc0"


def _pem(label: str) -> str:
    body = "\n".join(
        ["MIIEow" + "IBAAKCAQEA" + ALNUM[:48], ALNUM * 1 + "Fake" + ALNUM[:20], "AbCd=="]
    )
    dashes = "-" * 5
    return f"{dashes}BEGIN {label}{dashes}\n{body}\n{dashes}END {label}{dashes}"


PEM_KINDS = {
    "rsa": "RSA " + "PRIVATE KEY",
    "ec": "EC " + "PRIVATE KEY",
    "openssh": "OPENSSH " + "PRIVATE KEY",
    "pgp": "PGP " + "PRIVATE KEY BLOCK",
    "encrypted": "ENCRYPTED " + "PRIVATE KEY",
    "pkcs8": "PRIVATE " + "KEY",
    "dsa": "DSA " + "PRIVATE KEY",
}

# Secret substrings that must never survive, by planted kind (for the property test).
TOKENS: dict[str, tuple[str, str]] = {
    "anthropic": ("anthropic", ANTHROPIC),
    "openai-project": ("openai", OPENAI_PROJECT),
    "openai-legacy": ("openai", OPENAI_LEGACY),
    "aws-key-id": ("aws-access-key-id", AWS_KEY_ID),
    "aws-temp-key-id": ("aws-access-key-id", AWS_TEMP_KEY_ID),
    **{f"github-{p}": ("github", token) for p, token in GITHUB_CLASSIC.items()},
    "github-fine-grained": ("github", GITHUB_FINE),
    **{f"gitlab-{p}": ("gitlab", token) for p, token in GITLAB.items()},
    "slack-bot": ("slack", SLACK_BOT),
    "slack-user": ("slack", SLACK_USER),
    "stripe-secret": ("stripe", STRIPE_SECRET),
    "stripe-restricted": ("stripe", STRIPE_RESTRICTED),
    "stripe-webhook": ("stripe", STRIPE_WEBHOOK),
    "google-api-key": ("google-api-key", GOOGLE_API_KEY),
    "google-oauth": ("google-oauth", GOOGLE_OAUTH),
    "google-client-secret": ("google-oauth", GOOGLE_CLIENT_SECRET),
    "npm": ("npm", NPM),
    "pypi": ("pypi", PYPI),
    "huggingface": ("huggingface", HUGGINGFACE),
    "jwt": ("jwt", JWT),
}

# Places a self-identifying token turns up; {s} is the token.
TOKEN_CONTEXTS = {
    "shell": "$ export SERVICE_CREDENTIAL={s}\n$ ./deploy.sh --verbose\n",
    "env-file": "# .env\nDEBUG=true\nSERVICE_CREDENTIAL={s}\nPORT=8080\n",
    "json": '{{"service": "billing", "credential": "{s}", "retries": 3}}',
    "python": 'client = Client(credential="{s}", timeout=30)\n',
    "log": "2024-05-01T12:00:00Z INFO connected with {s} as user=alice\n",
    "markdown": "Here is the value I used:\n\n```\n{s}\n```\n\nand it worked.",
    "prose": "I rotated it; the new one is {s}. Let me know if it fails.",
    "header": 'curl -H "X-Service: {s}" https://api.example.com/v1/items',
}


def _check(text: str, secret: str, kind: str) -> str:
    out = redact(text)
    assert secret not in out, out
    assert f"[REDACTED:{kind}]" in out, out
    return out


# -- planted secrets: provider tokens ------------------------------------------------------------------


@pytest.mark.parametrize("context", sorted(TOKEN_CONTEXTS))
@pytest.mark.parametrize("name", sorted(TOKENS))
def test_provider_token_is_redacted_in_context(name: str, context: str) -> None:
    kind, secret = TOKENS[name]
    template = TOKEN_CONTEXTS[context]
    out = _check(template.format(s=secret), secret, kind)
    # the surroundings survive
    for word in re.findall(r"[a-z]{5,}", template.replace("{s}", "")):
        assert word in out


def test_fake_tokens_have_the_real_shapes() -> None:
    assert len(AWS_KEY_ID) == len(AWS_TEMP_KEY_ID) == 20
    assert len(AWS_SECRET) == 40
    assert all(len(t) == 40 for t in GITHUB_CLASSIC.values())
    assert len(GOOGLE_API_KEY) == 39
    assert len(NPM) == 40
    assert len(OPENAI_LEGACY) == 51
    assert len(SLACK_WEBHOOK_PATH.split("/")[-1]) == 24


def test_anthropic_key_in_the_hook_shape() -> None:
    command = f"ANTHROPIC_API_KEY={ANTHROPIC} python run.py"
    assert redact(command) == "ANTHROPIC_API_KEY=[REDACTED:anthropic] python run.py"


def test_slack_webhook_keeps_the_host() -> None:
    url = "https://hooks.slack.com/" + SLACK_WEBHOOK_PATH
    text = f'requests.post("{url}", json={{"text": "deployed"}})'
    out = _check(text, SLACK_WEBHOOK_PATH, "slack-webhook")
    assert "https://hooks.slack.com/[REDACTED:slack-webhook]" in out


def test_stripe_publishable_key_is_redacted_too() -> None:
    key = "pk_" + "live_" + "51Fake" + ALNUM[:24]
    _check(f"Stripe('{key}')", key, "stripe")


# -- planted secrets: AWS secret access keys ---------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "[default]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\nregion = eu-west-1\n",
        'export AWS_ACCESS_KEY_ID={id}\nexport AWS_SECRET_ACCESS_KEY="{secret}"\n',
        '{{"Credentials": {{"AccessKeyId": "{id}", "SecretAccessKey": "{secret}", "Expiration": "2024"}}}}',
        "User name,Password,Access key ID,Secret access key\nci-bot,,{id},{secret}\n",
        "$ aws configure\nAWS Access Key ID [None]: {id}\nAWS Secret Access Key [None]: {secret}\n",
        's3 = boto3.client("s3", aws_access_key_id="{id}",\n    aws_secret_access_key="{secret}")',
        "the key {id} goes with {secret} (rotate both)",
    ],
)
def test_aws_secret_access_key_in_context(template: str) -> None:
    text = template.format(id=AWS_KEY_ID, secret=AWS_SECRET)
    out = _check(text, AWS_SECRET, "aws-secret-access-key")
    assert AWS_KEY_ID not in out


def test_aws_secret_without_a_key_id_but_named() -> None:
    _check(f"secret_access_key: {AWS_SECRET}\n", AWS_SECRET, "aws-secret-access-key")


# -- planted secrets: private keys -------------------------------------------------------------------


@pytest.mark.parametrize("label", sorted(PEM_KINDS))
def test_private_key_block_is_redacted_whole(label: str) -> None:
    pem = _pem(PEM_KINDS[label])
    text = f"$ cat ~/.ssh/id_{label}\n{pem}\n$ echo done\n"
    out = redact(text)
    assert out == f"$ cat ~/.ssh/id_{label}\n[REDACTED:private-key]\n$ echo done\n"


def test_private_key_in_a_service_account_json() -> None:
    pem = _pem(PEM_KINDS["pkcs8"])
    account = {
        "type": "service_account",
        "project_id": "demo-project",
        "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": pem + "\n",
        "client_email": "bot@demo-project.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    text = json.dumps(account, indent=2)  # the PEM's line breaks become \n escapes
    out = redact(text)
    assert "BEGIN PRIVATE" not in out and ALNUM[:48] not in out
    assert '"private_key": "[REDACTED:private-key]' in out
    assert "https://oauth2.googleapis.com/token" in out
    assert "bot@demo-project.iam.gserviceaccount.com" in out


def test_truncated_private_key_is_redacted_to_the_end_of_its_body() -> None:
    pem = _pem(PEM_KINDS["rsa"])
    truncated = "\n".join(pem.splitlines()[:3])
    text = f"$ head -3 server.key\n{truncated}\n\n$ ls\nREADME.md\n"
    out = redact(text)
    assert ALNUM[:48] not in out and "BEGIN RSA" not in out
    assert out.endswith("\n$ ls\nREADME.md\n")


def test_encrypted_pem_headers_are_inside_the_block() -> None:
    dashes = "-" * 5
    pem = (
        f"{dashes}BEGIN RSA " + f"PRIVATE KEY{dashes}\nProc-Type: 4,ENCRYPTED\n"
        "DEK-Info: AES-128-CBC,0123456789ABCDEF\n\n" + ALNUM + "\n"
        f"{dashes}END RSA " + f"PRIVATE KEY{dashes}"
    )
    assert redact(pem) == "[REDACTED:private-key]"


def test_other_private_key_formats() -> None:
    putty = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n" + ALNUM
    putty += "\nPrivate-MAC: " + "0a1b2c3d" * 8
    assert redact(putty) == "[REDACTED:private-key]"
    age = "AGE-SECRET-KEY-" + "1QYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQY"
    assert redact(f"# identity\n{age}\n") == "# identity\n[REDACTED:private-key]\n"


# -- planted secrets: passwords in URLs, connection strings and commands -----------------------------


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("postgres://app:{p}@db.example.com:5432/app", DB_PASSWORD),
        ("postgresql+psycopg://app:{p}@localhost/app?sslmode=require", DB_PASSWORD),
        ("mysql://root:{p}@127.0.0.1:3306/shop", DB_PASSWORD),
        ("mongodb+srv://admin:{p}@cluster0.ab1cd.mongodb.net/test?retryWrites=true", DB_PASSWORD),
        ("redis://:{p}@cache.internal:6379/0", DB_PASSWORD),
        ("rediss://default:{p}@cache.internal:6380", DB_PASSWORD),
        ("amqp://guest:{p}@rabbitmq:5672/vhost", DB_PASSWORD),
        ("https://deploy:{p}@git.example.com/org/repo.git", PASSWORD),
        ("ftp://user:{p}@files.example.com/pub", PASSWORD),
        ("postgres://app:{p}@db.example.com/app", "p@ss" + "W0rd"),  # an unescaped '@'
    ],
)
@pytest.mark.parametrize(
    "context",
    [
        "DATABASE_URL={u}\n",
        'engine = create_engine("{u}")',
        "2024-05-01 ERROR could not connect to {u}: timeout",
        "- url: {u}\n",
        "psql '{u}' -c 'select 1'",
    ],
)
def test_password_in_url(url: str, password: str, context: str) -> None:
    full = url.format(p=password)
    out = _check(context.format(u=full), password, "password")
    host = full.split("@")[-1].split("/")[0].split("?")[0]
    assert host in out  # the host survives


@pytest.mark.parametrize(
    ("text", "password"),
    [
        (
            "Server=tcp:db.example.com,1433;Database=shop;User ID=sa;Password={p};Encrypt=True;",
            PASSWORD,
        ),
        (
            "Driver={{ODBC Driver 18 for SQL Server}};Server=db;Uid=sa;Pwd={{{p}}};",
            "p@ss;" + "w0rd",
        ),
        ("Data Source=db;Initial Catalog=shop;User Id=app;Password='{p}';", "with space " + "Pw1"),
        ("Host=db;Port=5432;Username=app;Password={p};Database=shop", DB_PASSWORD),
        ('conn = "server=db;database=shop;uid=app;pwd={p};"', DB_PASSWORD),
    ],
)
def test_password_in_connection_string(text: str, password: str) -> None:
    out = _check(text.format(p=password), password, "password")
    assert "Server=" in out or "server=" in out or "Data Source=" in out or "Host=" in out


@pytest.mark.parametrize(
    ("command", "password"),
    [
        ("mysql -h db -u root -p{p} shop < dump.sql", PASSWORD),
        ("mysqldump -uroot -p{p} --all-databases > all.sql", DB_PASSWORD),
        ("curl -u admin:{p} https://ci.example.com/api/json", PASSWORD),
        ("docker login -u bot -p {p} registry.example.com", DB_PASSWORD),
        ("sshpass -p {p} ssh deploy@web1", DB_PASSWORD),
        ("redis-cli -h cache -a {p} ping", DB_PASSWORD),
        ("psql --host=db --password={p}", DB_PASSWORD),
        ("./manage.py createsuperuser --password {p}", DB_PASSWORD),
    ],
)
def test_password_on_a_command_line(command: str, password: str) -> None:
    _check(command.format(p=password), password, "password")


@pytest.mark.parametrize(
    "text",
    [
        'curl -H "Authorization: Bearer {s}" https://api.example.com',
        "Authorization: Basic {s}",
        '{{"headers": {{"Authorization": "Token {s}"}}}}',
        "requests.get(url, headers={{'authorization': 'bearer {s}'}})",
    ],
)
def test_authorization_header(text: str) -> None:
    credential = "dXNlcjpw" + "YXNzd29yZA1" + "x9Y"
    _check(text.format(s=credential), credential, "auth-header")


def test_cookie_header() -> None:
    session = "sessionid=" + "k3j4h5g6" + "f7d8s9a0" + "; csrftoken=" + ALNUM[:16]
    out = _check(f'curl -H "Cookie: {session}" https://app.example.com', session, "cookie")
    assert out.startswith('curl -H "Cookie: ')


# -- planted secrets: env files and secret-named assignments -----------------------------------------


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("DB_PASSWORD={s}\n", ENV_SECRET, "password"),
        ("export JWT_SECRET={s}\n", ENV_SECRET, "secret"),
        ('SECRET_KEY="{s}"\n', ENV_SECRET, "secret"),
        ("MYSQL_ROOT_PASSWORD='{s}'\n", ENV_SECRET, "password"),
        ("STRIPE_KEY={s}\n", ENV_SECRET, "secret"),
        ("GITHUB_PAT={s}\n", ENV_SECRET, "secret"),
        ("SMTP_PASS={s}\n", ENV_SECRET, "password"),
        ("MYSQL_PWD={s} mysql -u root\n", ENV_SECRET, "password"),
        ("API_TOKEN={s} ./run.sh", ENV_SECRET, "secret"),
        ("docker run -e POSTGRES_PASSWORD={s} postgres:16", ENV_SECRET, "password"),
        ("$env:CLIENT_SECRET = '{s}'", ENV_SECRET, "secret"),
        ("DB_PASSWORD=letmein\n", "letmein", "password"),  # weak, but an env value is a literal
    ],
)
def test_env_file_style_secret(text: str, secret: str, kind: str) -> None:
    out = _check(text.format(s=secret), secret, kind)
    assert "=" in out


def test_dotenv_file_keeps_its_non_secret_lines() -> None:
    env = (
        "# app settings\nNODE_ENV=production\nPORT=3000\nLOG_LEVEL=debug\n"
        f"DATABASE_URL=postgres://app:{DB_PASSWORD}@db:5432/app\n"
        f"SESSION_SECRET={ENV_SECRET}\nREDIS_PASSWORD=\nAPI_KEY=${{VAULT_API_KEY}}\n"
        "ALLOWED_HOSTS=example.com,api.example.com\n"
    )
    out = redact(env)
    assert DB_PASSWORD not in out and ENV_SECRET not in out
    for line in ("NODE_ENV=production", "PORT=3000", "LOG_LEVEL=debug", "REDIS_PASSWORD=\n"):
        assert line in out
    assert "API_KEY=${VAULT_API_KEY}" in out  # a reference, not a secret
    assert "ALLOWED_HOSTS=example.com,api.example.com" in out


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ('password = "{s}"', PASSWORD, "password"),
        ("self.api_key = '{s}'", ENV_SECRET, "secret"),
        ('{{"client_secret": "{s}", "client_id": "web-app"}}', ENV_SECRET, "secret"),
        ("config = {{'db_password': '{s}'}}", PASSWORD, "password"),
        ('const apiKey = "{s}";', ENV_SECRET, "secret"),
        ('auth_token := "{s}"', ENV_SECRET, "secret"),
        ("$password = '{s}';", PASSWORD, "password"),
        ("password: {s}\n", PASSWORD, "password"),  # YAML
        ("  secret: {s}  # rotate monthly\n", ENV_SECRET, "secret"),
        ("spring.datasource.password={s}\n", PASSWORD, "password"),  # .properties
        ("[pypi]\nusername = __token__\npassword = {s}\n", ENV_SECRET, "password"),  # INI
        ('token = "{s}"\n', ENV_SECRET, "secret"),  # TOML
        ("<password>{s}</password>", PASSWORD, "secret"),  # Maven settings.xml
        ("https://api.example.com/v1/items?api_key={s}&page=2", ENV_SECRET, "secret"),
        (
            '{{"auths": {{"ghcr.io": {{"auth": "{s}"}}}}}}',
            "Ym90OmdocF9" + "Fake" + "MTIz",
            "secret",
        ),
        ("the password is {s}", DB_PASSWORD, "password"),
        (
            "AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
            HIGH_ENTROPY + "==",
            "secret",
        ),
        ('signing_key = "{s}"', HIGH_ENTROPY, "secret"),
        ('SECRET_KEY = "{s}"', "e3b0c44298fc1c149afbf4c8996fb92427ae41e4", "secret"),  # hex
        ('"session_key": "{s}"', HIGH_ENTROPY, "high-entropy"),
        ("signature: {s}", HIGH_ENTROPY, "high-entropy"),
        ("CACHE_SALT = '{s}'", HIGH_ENTROPY, "high-entropy"),
    ],
)
def test_secret_assigned_to_a_secret_name(text: str, secret: str, kind: str) -> None:
    _check(text.format(s=secret), secret, kind)


def test_yaml_passphrase_with_spaces_is_redacted_whole() -> None:
    out = redact("vault:\n  passphrase: correct horse battery staple\n  user: ops\n")
    assert out == "vault:\n  passphrase: [REDACTED:password]\n  user: ops\n"


def test_json_escaped_text_is_redacted_too() -> None:
    inner = (
        f'DB_PASSWORD={ENV_SECRET}\nconfig:\n  token: {DB_PASSWORD}\n{{"password": "{PASSWORD}"}}'
    )
    escaped = json.dumps({"stdout": inner})
    out = redact(escaped)
    for secret in (ENV_SECRET, DB_PASSWORD, PASSWORD):
        assert secret not in out
    assert json.loads(out)["stdout"].startswith("DB_PASSWORD=[REDACTED:password]\nconfig:\n")


def test_long_single_line_key_is_redacted_whole() -> None:
    der = ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + ALNUM * 40)[:1624]  # a PKCS#8 RSA key, one line
    out = redact(f"PRIVATE_KEY={der}\nPORT=8080\n")
    assert out == "PRIVATE_KEY=[REDACTED:secret]\nPORT=8080\n"


# -- <private> blocks ----------------------------------------------------------------------------------


def test_private_block_multiline() -> None:
    text = "before <private>line one\nline two with sk-whatever\n</private> after"
    assert redact(text) == "before [REDACTED:private] after"


def test_private_tag_any_case_and_spacing() -> None:
    assert redact("a <PRIVATE>x</Private> b < private >y</ private> c") == (
        "a [REDACTED:private] b [REDACTED:private] c"
    )


def test_unclosed_private_tag_runs_to_the_end() -> None:
    assert redact("keep this\n<private>my notes\nmore notes") == "keep this\n[REDACTED:private]"


def test_nested_private_tags_count() -> None:
    text = "a <private>x <private>y</private> still private</private> b"
    assert redact(text) == "a [REDACTED:private] b"


def test_stray_closing_private_tag_is_left() -> None:
    assert redact("no secret </private> here") == "no secret </private> here"


# -- non-secrets survive ---------------------------------------------------------------------------------

NON_SECRETS = [
    # git
    "commit e83c5163316f89bfbde7d9ab23ca2e25604af290\nAuthor: Jane Doe <jane@example.com>",
    "HEAD is now at 3f78685 Fix the parser",
    "git checkout 3f786850e387550fdab836ed7e6dc881de23001b",
    '{"sha": "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12", "ref": "refs/heads/main"}',
    "https://github.com/agentctx/agentctx-cc/commit/e83c5163316f89bfbde7d9ab23ca2e25604af290",
    # UUIDs and ids
    '{"sessionId": "fe5e1c67-53e7-4862-81ae-d0e013e3270b", "uuid": "258c7280-ae70-4798-800f-63464d01a85d"}',
    "session_id: 550e8400-e29b-41d4-a716-446655440000",
    "request_id=req_011CUYw2eJzDjvGAu1nA3H7q msg_01XFDUDYJgAACzvnptvVoYEL",
    "toolu_01A2b3C4d5E6f7G8h9I0j1K2 srvtoolu_0144bXnppE6U18uiotfvYPTa",
    "sha256:036f9a476f513bb56bad7b9e8d15826aacc8515a57d531487799a51deb41d8cb",
    '"integrity": "sha512-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=="',
    # paths
    "/home/marco/projects/spotter/lib/spotter/transcripts/parser.ex:42",
    "C:\\Users\\me\\AppData\\Local\\agentctx\\store.db",
    "ssh -i ~/.ssh/id_ed25519 deploy@web1",
    'private_key_path = "/etc/ssl/private/server.key"',
    "GOOGLE_APPLICATION_CREDENTIALS=/secrets/service-account.json",
    "PWD=/home/user/project OLDPWD=/home/user",
    "token_file: ./secrets/token.txt",
    # URLs without credentials
    "https://docs.python.org/3/library/re.html#re.Pattern",
    "http://localhost:8080/api/v1/users?id=42&sort=desc",
    "git@github.com:agentctx/agentctx-cc.git",
    "ssh://git@github.com/agentctx/agentctx-cc.git",
    "https://oauth2.googleapis.com/token",
    "postgres://localhost:5432/app",
    # versions
    "anthropic==0.40.0, mcp>=2.3,<3, v2.14.0-rc.1, Python 3.11.7, node@20.11.1",
    '{"version": "2.1.38", "cli_version": "1.0.98"}',
    # base64-looking identifiers not assigned to secret names
    'const id = "dGhpcyBpcyBhbiBpZGVudGlmaWVyIG9ubHk0MjQy";',
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    'etag = "W/\\"5e1f3c8a9b2d4e6f7a8b9c0d1e2f3a4b\\""',
    # code that names secrets without holding one
    'api_key = os.environ["ANTHROPIC_API_KEY"]',
    "token = get_token()",
    "password: str",
    "token: Optional[str] = None",
    "def login(username: str, password: str) -> Token:",
    "headers = {'Authorization': f'Bearer {token}'}",
    "Authorization: Bearer $GITHUB_TOKEN",
    "export GITHUB_TOKEN=$(gh auth token)",
    "password = getpass.getpass('Password: ')",
    "secret = secrets.token_hex(32)",
    "csrfToken = document.querySelector('meta[name=csrf-token]').content",
    "params: { _csrf_token: csrfToken }",
    "const STORAGE_KEY = 'todos'",
    "max_tokens=4096, input_tokens: 1234, cache_read_input_tokens: 0",
    '{"input_tokens": 3, "output_tokens": 140, "token_count": 12}',
    '"token_type": "Bearer"',
    "self.password = password",
    "client = Anthropic(api_key=api_key, auth_token=auth_token)",
    "sorted(items, key=lambda x: x[1])",
    "id = Column(Integer, primary_key=True)",
    'user_id = ForeignKey("users.id")',
    'author = "Jane Doe"',
    "docker run -p 8080:80 -v $PWD:/app nginx",
    "Use the --token flag or set GITHUB_TOKEN.",
    "The password is stored in the keychain.",
    'DB_PASSWORD="${DB_PASSWORD:-}"',
    "password: ${{ secrets.DB_PASSWORD }}",
    "API_KEY=<your-api-key>",
    'api_key="YOUR_API_KEY"',
    "token = tokens[idx]",
    "pad_token = '[PAD]'",
]


@pytest.mark.parametrize("text", NON_SECRETS)
def test_non_secret_is_left_alone(text: str) -> None:
    assert redact(text) == text
    assert find_secrets(text) == []


# -- idempotence and find_secrets ------------------------------------------------------------------------

PLANTED = [secret for _, secret in TOKENS.values()] + [
    f"aws_secret_access_key = {AWS_SECRET}",
    f"postgres://app:{DB_PASSWORD}@db.example.com:5432/app",
    f"DB_PASSWORD={ENV_SECRET}",
    f'{{"client_secret": "{HIGH_ENTROPY}"}}',
    _pem(PEM_KINDS["openssh"]),
    f"Server=db;Database=shop;User ID=sa;Password={PASSWORD};",
    f"<private>{PASSWORD}</private>",
]
# the part of each planted string that must not survive
PLANTED_SECRET = {
    planted: next(
        (s for s in (AWS_SECRET, DB_PASSWORD, ENV_SECRET, HIGH_ENTROPY, PASSWORD) if s in planted),
        ALNUM[:48] if "BEGIN" in planted else planted,
    )
    for planted in PLANTED
}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(st.text(max_size=60), min_size=1, max_size=8),
    st.lists(st.sampled_from(PLANTED), min_size=1, max_size=5),
    st.randoms(use_true_random=False),
)
def test_no_planted_secret_survives_and_redact_is_idempotent(
    noise: list[str], planted: list[str], rnd: object
) -> None:
    import random

    assert isinstance(rnd, random.Random)
    pieces = list(noise)
    for secret in planted:
        pieces.insert(rnd.randrange(len(pieces) + 1), f"\n{secret}\n")
    text = " ".join(pieces)
    once = redact(text)
    for secret in planted:
        assert PLANTED_SECRET[secret] not in once
    assert redact(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_redact_is_idempotent_on_any_text(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(
    st.text(alphabet=st.sampled_from("ab=: \n\"'-_[]<>/@:.;KEYpasswordtokenPRIVATEsk"), max_size=80)
)
@settings(max_examples=300, deadline=None)
def test_redact_is_idempotent_on_secretish_noise(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_markers_are_never_redacted_again() -> None:
    for text in (
        "password=[REDACTED:password]",
        'token: "[REDACTED:secret]"',
        "postgres://u:[REDACTED:password]@h/db",
        "Authorization: Bearer [REDACTED:auth-header]",
        "[REDACTED:private]",
    ):
        assert redact(text) == text
        assert find_secrets(text) == []


def test_find_secrets_reports_sorted_disjoint_spans() -> None:
    text = (
        f"DB_PASSWORD={ENV_SECRET}\nkey id {AWS_KEY_ID} and {AWS_SECRET}\n"
        f"token = '{GITHUB_CLASSIC['ghp']}'\n<private>x</private>"
    )
    spans = find_secrets(text)
    assert [kind for kind, _, _ in spans] == [
        "password",
        "aws-access-key-id",
        "aws-secret-access-key",
        "github",
        "private",
    ]
    ends = [0]
    for _, start, end in spans:
        assert ends[-1] <= start < end
        ends.append(end)
    assert text[spans[3][1] : spans[3][2]] == GITHUB_CLASSIC["ghp"]


def test_empty_and_plain_text() -> None:
    assert redact("") == ""
    assert find_secrets("") == []
    assert redact("nothing to see here\n") == "nothing to see here\n"


# -- the real transcripts: false-positive budget and speed -------------------------------------------------

# git SHAs (short or full) and digests
HEX = re.compile(r"(?<![0-9a-zA-Z])[0-9a-f]{7,64}(?![0-9a-zA-Z])")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PATH = re.compile(r"(?<![\w:/.])(?:~|\.{1,2})?(?:/[\w.\-@+]+){2,}")
IDS = re.compile(r"\b(?:msg|req|toolu|srvtoolu)_[A-Za-z0-9]{16,}")  # API ids: base64-looking
FALSE_POSITIVE_BUDGET = 3  # redactions in all the fixture transcripts together (today: 0)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _transcript_text(paths: list[Path]) -> list[str]:
    texts: list[str] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.extend(_strings(json.loads(line)))
    return texts


def test_false_positive_budget_on_real_transcripts(transcripts: list[Path]) -> None:
    texts = _transcript_text(transcripts)
    assert sum(len(t) for t in texts) > 500_000
    redactions: list[str] = []
    for text in texts:
        spans = find_secrets(text)
        redactions.extend(text[start:end] for _, start, end in spans)
        if not spans:
            continue
        out = redact(text)
        for pattern in (HEX, UUID, PATH, IDS):
            for match in pattern.finditer(text):
                assert match.group(0) in out, f"non-secret {match.group(0)!r} was redacted"
    assert len(redactions) <= FALSE_POSITIVE_BUDGET, redactions


def test_shas_uuids_and_paths_in_real_transcripts_survive(transcripts: list[Path]) -> None:
    text = "\n".join(_transcript_text(transcripts))
    out = redact(text)
    for pattern in (HEX, UUID, PATH, IDS):
        found = pattern.findall(text)
        assert found, pattern.pattern
        assert sorted(found) == sorted(pattern.findall(out))


HOSTILE = {
    "one long word": "a" * 100_000,
    "dash words": "-a" * 50_000,
    "sk- run": "sk-" * 33_000,
    "pass run": "pass" * 25_000,
    "name= run": "secret_access_key=" * 5_500,
    "key= run": "key=" * 25_000,
    "eyJ run": "eyJ" * 33_000,
    "BEGIN without END": "-----BEGIN PRIVATE KEY-----" * 3_000,
    "unclosed quotes": '"password":"' * 8_000,
    "connection string": "Password=a;" * 9_000,
    "mysql without -p": "mysql " * 16_000,
    "url colons": "://a:" * 20_000,
    "flags": "--pass" * 16_000,
    "base64url": (ALNUM + "-_") * 2_400,
    "escaped newlines": "\\n" * 50_000,
}


#: CPU seconds within which a linear scan of the inputs below ends by a wide margin.
LINEAR_CPU_S = 3.0


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_stays_linear(name: str) -> None:
    text = HOSTILE[name]
    start = time.process_time()
    out = redact(text)
    elapsed = time.process_time() - start
    # A guard against catastrophic backtracking, not a speed figure: this process's CPU time (a
    # busy machine does not count), typically 0.1-0.4 s; a superlinear pattern takes minutes.
    assert elapsed < LINEAR_CPU_S, f"{elapsed:.2f}s CPU for {len(text):,} characters"
    assert redact(out) == out


def test_a_megabyte_of_transcript_in_linear_time(transcripts: list[Path]) -> None:
    text = "\n".join(_transcript_text(transcripts))
    plants = "\n".join(PLANTED)
    while len(text) < 1_000_000:
        text += "\n" + plants + "\n" + text[:200_000]
    text = text[:1_000_000]
    start = time.process_time()
    out = redact(text)
    elapsed = time.process_time() - start
    assert ENV_SECRET not in out
    assert elapsed < LINEAR_CPU_S, f"{elapsed:.2f}s CPU for 1 MB"  # typically 0.2 s
    assert MARKER_PATTERN.search(out)
