"""Secret redaction: applied to any text before it is stored or sent off the machine.

``redact(text)`` replaces every secret the rules recognize with ``[REDACTED:<kind>]`` and keeps the
surrounding text; ``find_secrets(text)`` returns the spans it would replace as ``(kind, start, end)``.
docs/redaction.md lists the rules and their kinds, the non-secrets they must leave alone, the
measurements, and why these are our own rules rather than a secret-scanner library. In short:

* blocks: ``<private>…</private>`` (nested tags count; an unclosed tag runs to the end of the text) and
  private-key blocks (PEM, OpenSSH, PGP, SSH2, PuTTY, age; closed, or truncated after BEGIN);
* provider tokens with a recognizable shape (Anthropic, OpenAI, AWS, GitHub, GitLab, Slack, Stripe,
  Google, npm, PyPI, Hugging Face and more) and JWTs;
* AWS secret access keys, named or as a 40-character base64 string near an access key id;
* passwords in URLs and connection strings, after ``mysql -p``/``curl -u``/``docker login -p``;
  ``Authorization``, ``Bearer``/``Basic`` and ``Cookie`` credentials;
* values assigned to secret-looking names: ``KEY=value`` (env files, shell), ``key: value`` (YAML,
  JSON, code), ``--password value``, ``?token=…``, ``<password>…</password>``, "the password is …".
  A value is redacted unless it is plainly not a literal (a reference, a call, a type, a path, a
  placeholder); names that are only weakly secret (``cache_key``, ``signature``…) need high entropy.

Every pattern starts with a literal so that ``re`` can skip ahead (a leading look-behind or ``\\b``
makes a scan 20-40x slower); case-insensitive rules run on an ASCII-lowercased copy of the text,
which has the same length, so that offsets carry over. ``redact`` is idempotent: markers are never
reported, and it re-applies the rules until nothing changes.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    _Add = Callable[[int, str, int, int], None]

__all__ = ["MARKER_PATTERN", "find_secrets", "redact"]

MARKER_PATTERN = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
"""A redaction marker, ``[REDACTED:<kind>]``."""

_MAX_PASSES = 8
# Bounds that keep every scan linear on hostile input (a 1 MB line, a run of "passpass…"): how far a
# name, a value or a line is followed. Longer names are not matched; longer values are cut there.
_MAX_NAME = 64
_MAX_VALUE = 8192
_MAX_LINE = 4096


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

# Priorities: when findings overlap, the merged span takes the kind of the lowest number.
_P_BLOCK = 0
_P_KEY = 1
_P_TOKEN = 100  # + the rule's index in _TOKEN_RULES
_P_AWS_SECRET = 200
_P_PASSWORD = 300
_P_HEADER = 400
_P_ASSIGN = 500


class _Lazy:
    """A finder's pattern, compiled with all the others on the first ``find_secrets`` call.

    Compiling them costs ~10 ms. The PostToolUse hook imports this module on every tool call but
    redacts only when it records something, so importing stays cheap (~3 ms).
    """

    __slots__ = ("flags", "pattern", "source")
    pattern: re.Pattern[str]

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        _LAZY.append(self)


_LAZY: list[_Lazy] = []
_compiled: list[bool] = []  # [True] once every _Lazy is compiled


def _compile_all() -> None:
    for lazy in _LAZY:
        lazy.pattern = re.compile(lazy.source, lazy.flags)
    _compiled.append(True)


# -- blocks ----------------------------------------------------------------------------------------

_PRIVATE_TAG = _Lazy(r"<\s{0,8}(/?)\s{0,8}private\s{0,8}>")  # on the lowercased text
_KEY_BEGIN = _Lazy(r"-{4,5} ?BEGIN [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_KEY_END = _Lazy(r"-{4,5} ?END [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
# After a BEGIN line with no END (a truncated key): the body that follows — base64 lines,
# ``Header: value`` lines and blank lines, with real or JSON-escaped line breaks.
_KEY_BODY = _Lazy(
    r"(?:(?:[ \t]*(?:\r?\n|\\r\\n|\\n)){1,2}[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z][\w-]*:[ \t][^\n\\\"']*))*"
)
_PUTTY_KEY = _Lazy(r"PuTTY-User-Key-File-\d:[\s\S]*?(?:Private-MAC:\s*[0-9a-fA-F]+|\Z)")
_AGE_KEY = _Lazy(r"AGE-SECRET-KEY-1[0-9A-Z]{58}")

# -- provider tokens -------------------------------------------------------------------------------
# (kind, pattern, characters that must not come just before the match). The whole match is the
# secret. Each pattern starts with a literal.

_TOKEN_RULES = tuple(
    (kind, _Lazy(pattern), before)
    for kind, pattern, before in (
        ("anthropic", r"sk-ant-(?:[a-z]+\d*-)?[A-Za-z0-9_\-]{20,}", _TOKEN_CHARS),
        # Legacy sk-…, sk-proj-/sk-svcacct-/sk-admin-, and OpenAI-compatible providers' sk-…; a digit
        # or capital letter is required (see _find_tokens) so that kebab-case words never match.
        ("openai", r"sk-[A-Za-z0-9_\-]{20,}", _TOKEN_CHARS),
        (
            "aws-access-key-id",
            r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
            _ALNUM,
        ),
        ("github", r"g(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})", _TOKEN_CHARS),
        (
            "gitlab",
            r"gl(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|oas|ffct|wt|sa)-[A-Za-z0-9_\-]{20,}"
            r"(?:\.[A-Za-z0-9_\-]+)*",
            _TOKEN_CHARS,
        ),
        ("gitlab", r"GR1348941[A-Za-z0-9_\-]{20,}", _TOKEN_CHARS),
        ("slack", r"x(?:ox[a-z](?:\.xox[a-z])?|app-\d)-[A-Za-z0-9\-]{10,}", _TOKEN_CHARS),
        (
            "slack-webhook",
            r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{8,}",
            frozenset(),
        ),
        ("stripe", r"whsec_[A-Za-z0-9]{20,}", _TOKEN_CHARS),
        ("google-api-key", r"AIza[0-9A-Za-z_\-]{35}", _TOKEN_CHARS),
        ("google-oauth", r"ya29\.[0-9A-Za-z_\-]{20,}", _TOKEN_CHARS),
        ("google-oauth", r"GOCSPX-[0-9A-Za-z_\-]{20,}", _TOKEN_CHARS),
        ("google-oauth", r"1//0[0-9A-Za-z_\-]{30,}", frozenset("0123456789/:")),
        ("npm", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", _TOKEN_CHARS),
        ("pypi", r"pypi-Ag[A-Za-z0-9_\-]{40,}", _TOKEN_CHARS),
        ("huggingface", r"hf_[A-Za-z0-9]{30,}", _TOKEN_CHARS),
        ("sendgrid", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", _TOKEN_CHARS),
        ("twilio", r"(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])", _TOKEN_CHARS),
        ("digitalocean", r"do[pro]_v1_[a-f0-9]{64}", _TOKEN_CHARS),
        ("shopify", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", _TOKEN_CHARS),
        ("databricks", r"dapi[a-f0-9]{32}(?![A-Za-z0-9])", _TOKEN_CHARS),
        ("sentry", r"sntr[ysu]_[A-Za-z0-9_=\-]{30,}", _TOKEN_CHARS),
        ("grafana", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", _TOKEN_CHARS),
        ("postman", r"PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}", _TOKEN_CHARS),
        ("atlassian", r"ATATT3[A-Za-z0-9_\-=]{100,}", _TOKEN_CHARS),
        ("groq", r"gsk_[A-Za-z0-9]{40,}", _TOKEN_CHARS),
        ("replicate", r"r8_[A-Za-z0-9]{30,}", _TOKEN_CHARS),
        ("xai", r"xai-[A-Za-z0-9]{40,}", _TOKEN_CHARS),
        ("perplexity", r"pplx-[A-Za-z0-9]{40,}", _TOKEN_CHARS),
        ("linear", r"lin_(?:api|oauth)_[A-Za-z0-9]{30,}", _TOKEN_CHARS),
        ("notion", r"ntn_[A-Za-z0-9]{40,}", _TOKEN_CHARS),
        ("supabase", r"sbp_[a-f0-9]{40}", _TOKEN_CHARS),
        ("doppler", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", _TOKEN_CHARS),
        (
            "jwt",
            # the header run is matched whole even with no dots after it (then rejected in
            # _find_tokens), so that "eyJeyJeyJ…" is not rescanned from every "eyJ"
            r"eyJ[A-Za-z0-9_\-]{5,}(?:\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+)?)?",
            _TOKEN_CHARS,
        ),
    )
)
# Anchored on a literal inside the token (a leading character class would be slow); _find_tokens
# checks the characters before it.
_STRIPE = _Lazy(r"k_(?:live|test)_[A-Za-z0-9]{10,}")  # sk_/rk_/pk_
_TELEGRAM = _Lazy(r":AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])")  # <bot id>:AA…
_TELEGRAM_ID = _Lazy(r"\d{8,10}\Z")
_MAILCHIMP = _Lazy(r"-us\d{1,2}(?![A-Za-z0-9])")  # <32 hex>-us<n>
_MAILCHIMP_KEY = _Lazy(r"[0-9a-f]{32}\Z")

# -- AWS secret access keys ------------------------------------------------------------------------

_AWS_NAMED = _Lazy(  # on the lowercased text
    r"secret[_\-.]?(?:access)?[_\-.]?key[\"'\]]*\s*(?:[:=]|:=|=>)\s*[\"']?"
    r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+])"
)
_AWS_CANDIDATE = _Lazy(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_WINDOW = 400

# -- passwords and credentials in URLs, connection strings, commands and headers -------------------

# ://user:password@host — the password may hold '@' (the last '@' before the host wins) but not '/',
# so that host:port/path@x is not read as credentials.
_URL_PASSWORD = _Lazy(
    r"://[^\s:/?#@'\"<>\[\]\\]{0,256}:(?P<v>[^\s/'\"<>\\]{1,256}?)@"
    r"(?=[^\s@/'\"<>\\?#]{0,256}(?:[\s/'\"<>\\?#]|$))"
)
_URL_USER_TOKEN = _Lazy(r"://(?P<v>[A-Za-z0-9_\-]{20,})@")  # ://TOKEN@host
# ADO.NET / ODBC / JDBC ``Password=…;`` (on the lowercased text; values may be {braced}, quoted, or
# hold spaces).
_DSN_PASSWORD = _Lazy(
    r"p(?:assword|wd|asswd)\s*=\s*"
    r"(?P<v>\{[^}\n]*\}|\"[^\"\n]*\"|'[^'\n]*'|[^;\n\"']*[^;\n\"'\s])(?=\s*(?:;|$|[\"']))",
    re.MULTILINE,
)
_CLI_PASSWORDS = (
    ("mysql", _Lazy(r"mysql(?:dump|admin)?\b[^\n|;&]{0,200}?\s-p(?P<v>[^\s'\"\-][^\s'\"]*)")),
    ("mariadb", _Lazy(r"mariadb\b[^\n|;&]{0,200}?\s-p(?P<v>[^\s'\"\-][^\s'\"]*)")),
    (
        "login",
        _Lazy(r"login\b[^\n|;&]{0,200}?\s(?:-p|--password)[ \t=]+(?P<v>[^\s'\"\-$][^\s'\"]*)"),
    ),
    ("sshpass", _Lazy(r"sshpass\s+-p\s*(?P<v>[^\s'\"\-][^\s'\"]*)")),
    ("redis-cli", _Lazy(r"redis-cli\b[^\n|;&]{0,200}?\s-a\s+(?P<v>[^\s'\"\-][^\s'\"]*)")),
    ("-u", _Lazy(r"-(?:u|-user)\s+[\"']?[^\s:'\"\-][^\s:'\"]*:(?P<v>[^\s'\"]+)")),
)
_AUTH_HEADER = _Lazy(  # on the lowercased text
    r"authorization[\"']?\s*[:=]\s*[\"']?\s*"
    r"(?:(?:bearer|basic|token|apikey|api-key|key|sso-key|otp|digest|negotiate)\s+)?"
    r"(?P<v>[^\s\"'`,;]{4,})"
)
_BEARER = _Lazy(r"b(?:earer|asic)\s+(?P<v>[a-z0-9._~+/\-]{8,}=*)")  # on the lowercased text
# ``Cookie: name=value; …`` (on the lowercased text; ``set-cookie`` ends in ``cookie``).
_COOKIE = _Lazy(r"cookie\s*:\s*(?P<v>[^\s=;\"'\\]+=[^\n\"'\\]*)")

# -- assignments -----------------------------------------------------------------------------------

# Hint words that a secret-looking name contains. Each hint gets its own pattern on the lowercased
# text: the hint, the rest of the name, an optional closing quote, and a separator (an optional type
# annotation, then ``=``, ``:``, ``:=`` or ``=>``). The start of the name is found by scanning back.
_HINTS = sorted(
    _wordset(
        """
    pass pwd secret token key auth cred bearer cookie session salt sig otp hmac csrf xsrf sid pat
    """
    )
)
_SEPARATOR = (
    r"[\w.\-]{0,64}+(?P<close>\\?[\"'`])?\]?(?P<sep>[ \t]*"
    r"(?::[ \t]*[a-z_][\w.]*(?:\[[^\]\n]*\])?(?:[ \t]*\|[ \t]*[a-z_][\w.]*(?:\[[^\]\n]*\])?)*[ \t]*(?==))?"
    r"(?:=>|:=|(?<![=!<>])=(?![=>~])|:(?![:/\\]))[ \t]*)"
)
_ASSIGN_PATTERNS = tuple((hint, _Lazy(hint + _SEPARATOR)) for hint in _HINTS)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_XML_SECRET = _Lazy(  # on the lowercased text
    r"<(?P<tag>[\w:.\-]{0,32}?(?:password|passwd|passphrase|secret|token|apikey|api_key|api-key)[\w:.\-]{0,32}+)>"
    r"(?P<v>[^<\n]{1,500})</(?P=tag)>"
)
_FLAG = _Lazy(  # on the lowercased text
    r"-(?P<name>-?(?:[a-z][\w\-]{0,40}?)?(?:pass|pwd|secret|token|key|auth|cred|bearer)[\w\-]{0,40}+)[ \t]+"
    r"(?P<v>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"\-<>|&;$`][^\s'\"|&;`]*)"
)
_PROSE = tuple(  # on the lowercased text: "the password is …", "API key: …"
    _Lazy(word + r"\s+(?:is|was|:)\s+[\"'`]?(?P<v>[^\s\"'`,;]{6,})")
    for word in (r"pass(?:word|phrase|wd)", "secret", "token", "key")
)
_PROSE_KEY_BEFORE = _Lazy(r"(?:api|secret|access|private|auth)[ _\-]?\Z")

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# The last word of a name (after dropping _KEEP_SUFFIX words) decides: a name is secret when it
# *ends* in a secret word — token_count, next_token_logits, password_url are about secrets.
_STRONG_LAST = _wordset(
    """
    password passwd passphrase secret token credential credentials creds apikey bearer auth
    authorization otp totp pwd
    """
)
_COMPOUND_LAST = ("password", "passwd", "secret", "token")  # dbpassword, clientsecret, authtoken
_KEY_PREFIXES = _wordset(
    """
    api access secret private auth master account signing encryption encrypt app license licence
    deploy ssh gpg pgp shared subscription admin hmac jwt webhook consumer decryption aes rsa
    ed25519 ecdsa sas
    """
)
# Secret only when set as an environment variable or a flag: DB_PASS=…, GITHUB_PAT=…, STRIPE_KEY=….
_ENV_ONLY_LAST = frozenset({"pass", "pat", "key", "keys"})
_WEAK_LAST = frozenset(
    {"key", "keys", "signature", "sig", "salt", "hmac", "cookie", "session", "sid", "csrf", "xsrf"}
)
# Words that may follow the secret word and keep the name secret: password_confirmation, SecretString.
_KEEP_SUFFIX = _wordset(
    """
    value val string data raw plain plaintext b64 base64 hex bytes confirm confirmation again
    encoded enc base new old current prod production dev staging live
    """
)
# Tokens that are not credentials: NLP special tokens, pagination and lexer tokens.
_TOKEN_NOT_SECRET = _wordset(
    """
    pad bos eos unk cls sep mask start end next prev last first special added max min num n
    total page cancel cancellation continuation sync lexer parse parser input output stop split
    new word sentence image audio vocab bpe cursor pagination progress lock
    """
)
_NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd", "pass", "tokens", "secrets", "author"})
_TYPE_WORDS = _wordset(
    """
    str string int integer bool boolean bytes float number any object dict list optional union
    secretstr secretbytes none char text varchar uuid true false null nil undefined self this
    void unknown never option vec sensitive required lambda new await function async literal
    final annotated callable type
    """
)
# A bare word that starts a description ("token: the token to use"), not a value.
_STOPWORDS = _wordset(
    """
    a an the this that these to for of if in on at by as or and is are be was use used uses
    using your our its their see must should will can may not no when which where with from
    defaults default optional required any all current same provided given set get returns
    return none specifies specify whether how what only also value name
    """
)
_PLACEHOLDERS = _wordset(
    """
    none null nil undefined true false yes no on off string str redacted hidden masked omitted
    example placeholder required optional secret password token notset not_set empty default
    include same-origin omit basic bearer value ... …
    """
) | {""}
_REFERENCE = re.compile(
    r"^(?:\$\{?[A-Za-z_]|\$\(|\$[0-9@*#?]|%\(?[A-Za-z_]|%[A-Za-z_]+%|\{\{|\{%|#\{|<%"
    r"|\{[A-Za-z_][\w.\[\]'\"]*\}|<[^<>]*>$|\[REDACTED:)"
)
_TEMPLATE_PART = re.compile(
    r"\$\{[^}]*\}|\{\{[^}]*\}\}|\{[^{}]*\}|\$[A-Za-z_]\w*|%\([^)]*\)[sdr]|%[sd]"
)
_MASK_ONLY = re.compile(r"^[xX*•.…#?_\-]+$")
_MASKED = re.compile(r"\*\*\*|xxxx|XXXX|\.\.\.|…|<[^<>]+>")
_BRACKET_TOKEN = re.compile(r"^\[[A-Z_]+\]$")  # [PAD], [MASK]
_COLOR = re.compile(r"^#[0-9a-fA-F]{3,8}$")
_CALL = re.compile(r"^[\w.]+\(.*\)$")  # `get_token()`
_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9+/=_\-.~]+$")
_REGEX_LIKE = re.compile(r"\\[wdsbWDSB]|\[\^|\][*+?]|\(\?[:=!<P]")
_YOUR = re.compile(r"^<?(?:your|insert|enter|put|replace)[\s_\-]", re.IGNORECASE)
_DOTTED_CODE = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WORDY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_NUMBER = re.compile(r"^[+-]?\d[\d_.,]*$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
# A file path (a key or credentials *file*, not its content): /x, ~/x, ./x, ../x, C:\x — one word.
_PATH = re.compile(r"^(?:~?/|\.\.?/|[A-Za-z]:\\)\S*$")
_TYPE_SPLIT = re.compile(r"[\[<|?,\s]")
_CODE_CHARS = frozenset("()[]{}")
_PLAIN_REST = re.compile(r"^[^=(){}\[\]<>;,`\"']*$")
# What may come before a name at the start of a line: indentation, ``export``, a YAML list dash, a
# Read-tool line number (``  12→``) — after a real or a JSON-escaped line break.
_LINE_PREFIX = re.compile(
    r"(?:^|\n|\\n)[ \t]*(?:\d+(?:→|\t)[ \t]*)?(?:export[ \t]+|set[ \t]+|setx[ \t]+|-[ \t]+|\$env:)?\Z"
)
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
# An unquoted value: one word, ended as _value_span says.
_STRICT_VALUE = re.compile(r"(?:[^\s\"'`&#|;)\\]|\\(?![nrt\"']))*+")
_CODE_VALUE = re.compile(r"(?:[^\s\"'`,;)}\]>&|\\]|\\(?![nrt\"']))*+")


# -- public API ------------------------------------------------------------------------------------


def redact(text: str) -> str:
    """``text`` with every secret the rules recognize replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    for _ in range(_MAX_PASSES):
        spans = find_secrets(text)
        if not spans:
            break
        parts: list[str] = []
        last = 0
        for kind, start, end in spans:
            parts.append(text[last:start])
            parts.append(f"[REDACTED:{kind}]")
            last = end
        parts.append(text[last:])
        text = "".join(parts)
    return text


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """The secrets in ``text`` as sorted, non-overlapping ``(kind, start, end)`` spans.

    Overlapping findings merge into one span with the kind of the highest-priority rule among them
    (blocks, then provider tokens, then passwords and headers, then assignments). Existing markers
    are never reported, and a finding that overlaps one grows to cover it whole.
    """
    if not text:
        return []
    if not _compiled:
        _compile_all()
    # ASCII-only lowercasing keeps one character per character, so offsets in ``low`` are offsets
    # in ``text``.
    low = text.encode("ascii", "replace").lower().decode("ascii")
    found: list[tuple[int, str, int, int]] = []

    def add(priority: int, kind: str, start: int, end: int) -> None:
        if end > start:
            found.append((priority, kind, start, end))

    _find_blocks(text, low, add)
    _find_tokens(text, add)
    _find_aws_secrets(text, low, found, add)
    _find_passwords(text, low, add)
    _find_assignments(text, low, add)
    return _merge(text, found) if found else []


# -- finders ---------------------------------------------------------------------------------------


def _find_blocks(text: str, low: str, add: _Add) -> None:
    if "private" in low:
        depth = start = 0
        for match in _PRIVATE_TAG.pattern.finditer(low):
            if not match.group(1):
                if depth == 0:
                    start = match.start()
                depth += 1
            elif depth > 0:
                depth -= 1
                if depth == 0:
                    add(_P_BLOCK, "private", start, match.end())
        if depth > 0:
            add(_P_BLOCK, "private", start, len(text))
    if "PRIVATE KEY" in text:
        position = 0
        no_end_after = len(text) + 1  # once an END search fails, later ones would too
        while (begin := _KEY_BEGIN.pattern.search(text, position)) is not None:
            end = None
            if begin.end() < no_end_after:
                end = _KEY_END.pattern.search(text, begin.end())
                if end is None:
                    no_end_after = begin.end()
            if end is not None:
                stop = end.end()
            else:
                body = _KEY_BODY.pattern.match(text, begin.end())
                stop = body.end() if body is not None else begin.end()
            add(_P_KEY, "private-key", begin.start(), stop)
            position = stop
    if "PuTTY-User-Key-File" in text:
        for match in _PUTTY_KEY.pattern.finditer(text):
            add(_P_KEY, "private-key", match.start(), match.end())
    if "AGE-SECRET-KEY-" in text:
        for match in _AGE_KEY.pattern.finditer(text):
            add(_P_KEY, "private-key", match.start(), match.end())


def _find_tokens(text: str, add: _Add) -> None:
    for index, (kind, lazy, before) in enumerate(_TOKEN_RULES):
        for match in lazy.pattern.finditer(text):
            start = match.start()
            if start > 0 and text[start - 1] in before:
                continue
            if kind == "openai" and not any(c.isdigit() or c.isupper() for c in match.group()[3:]):
                continue
            if kind == "jwt" and match.group().count(".") < 2:
                continue
            add(_P_TOKEN + index, kind, start, match.end())
    for match in _STRIPE.pattern.finditer(text):
        start = match.start() - 1
        if (
            start >= 0
            and text[start] in "srp"
            and (start == 0 or text[start - 1] not in _TOKEN_CHARS)
        ):
            add(_P_TOKEN, "stripe", start, match.end())
    if ":AA" in text:
        for match in _TELEGRAM.pattern.finditer(text):
            head = _TELEGRAM_ID.pattern.search(text, max(0, match.start() - 10), match.start())
            if head is not None and (head.start() == 0 or not text[head.start() - 1].isalnum()):
                add(_P_TOKEN, "telegram", head.start(), match.end())
    if "-us" in text:
        for match in _MAILCHIMP.pattern.finditer(text):
            head = _MAILCHIMP_KEY.pattern.search(text, max(0, match.start() - 32), match.start())
            if head is not None and (head.start() == 0 or text[head.start() - 1] not in _ALNUM):
                add(_P_TOKEN, "mailchimp", head.start(), match.end())


def _find_aws_secrets(
    text: str, low: str, found: list[tuple[int, str, int, int]], add: _Add
) -> None:
    if "secret" in low:
        for match in _AWS_NAMED.pattern.finditer(low):
            if _mixed(text[match.start("v") : match.end("v")]):
                add(_P_AWS_SECRET, "aws-secret-access-key", match.start("v"), match.end("v"))
    for _, kind, key_start, key_end in list(found):
        if kind != "aws-access-key-id":
            continue
        low_bound = max(0, key_start - _AWS_WINDOW)
        high_bound = min(len(text), key_end + _AWS_WINDOW)
        for match in _AWS_CANDIDATE.pattern.finditer(text, low_bound, high_bound):
            if _mixed(match.group(0)):
                add(_P_AWS_SECRET, "aws-secret-access-key", match.start(), match.end())


def _find_passwords(text: str, low: str, add: _Add) -> None:
    if "://" in text:
        for match in _URL_PASSWORD.pattern.finditer(text):
            value = match.group("v")
            if not (_is_reference(value) or _MASK_ONLY.match(value) or value.startswith("{")):
                add(_P_PASSWORD, "password", match.start("v"), match.end("v"))
        for match in _URL_USER_TOKEN.pattern.finditer(text):
            if _looks_random(match.group("v")) and not _HEX.match(match.group("v")):
                add(_P_PASSWORD, "password", match.start("v"), match.end("v"))
    if ";" in text and ("pwd" in low or "passw" in low):
        for match in _DSN_PASSWORD.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] not in "; \t\n\"'":
                continue
            window = low[max(0, start - 200) : match.end() + 200]
            value = text[match.start("v") : match.end("v")]
            if ";" in window and _value_is_secret(value.strip("{}\"'"), "strict", "strong"):
                add(_P_PASSWORD, "password", match.start("v"), match.end("v"))
    for needle, lazy in _CLI_PASSWORDS:
        if needle in low:
            for match in lazy.pattern.finditer(text):
                if not _is_reference(match.group("v")):
                    add(_P_PASSWORD, "password", match.start("v"), match.end("v"))
    if "authorization" in low:
        for match in _AUTH_HEADER.pattern.finditer(low):
            value = text[match.start("v") : match.end("v")]
            if _is_reference(value) or _is_placeholder(value):
                continue
            if _IDENT.match(value) and not _looks_random(value):
                continue  # {"Authorization": auth}: a variable
            add(_P_HEADER, "auth-header", match.start("v"), match.end("v"))
    if "bearer" in low or "basic" in low:
        for match in _BEARER.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1].isalnum():
                continue
            if _looks_random(text[match.start("v") : match.end("v")]):
                add(_P_HEADER, "auth-header", match.start("v"), match.end("v"))
    if "cookie" in low:
        for match in _COOKIE.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] not in " \t\n\"'-{":
                continue  # start_cookie: str — a name, not the header
            value = text[match.start("v") : match.end("v")].rstrip()
            if not _is_reference(value):
                add(_P_HEADER, "cookie", match.start("v"), match.start("v") + len(value))


def _find_assignments(text: str, low: str, add: _Add) -> None:
    candidates: dict[int, re.Match[str]] = {}
    for hint, lazy in _ASSIGN_PATTERNS:
        if hint not in low:
            continue
        for match in lazy.pattern.finditer(low):
            name_start = match.start()
            floor = max(0, name_start - _MAX_NAME)
            while name_start > floor and text[name_start - 1] in _NAME_CHARS:
                name_start -= 1
            if name_start > 0 and text[name_start - 1] == "\\" and text[name_start] in "nrt":
                name_start += 1  # a JSON-escaped line break or tab, not part of the name
            candidates.setdefault(name_start, match)
    examined = 0  # the end of the last value looked at: a name inside it is not an assignment
    for name_start in sorted(candidates):
        if name_start >= examined:
            examined = max(examined, _assignment(text, candidates[name_start], name_start, add))
    if "</" in low:
        for match in _XML_SECRET.pattern.finditer(low):
            value = text[match.start("v") : match.end("v")]
            if _literal_is_secret(value, "strong"):
                add(_P_ASSIGN, "secret", match.start("v"), match.end("v"))
    for match in _FLAG.pattern.finditer(low):
        start = match.start()
        if start > 0 and low[start - 1] not in " \t\n\"'(=[":
            continue
        name = text[match.start("name") : match.end("name")]
        strength = _name_strength(name, env=True)
        if strength is None:
            continue
        raw = text[match.start("v") : match.end("v")]
        if raw[:1] in "\"'":
            v_start, v_end = match.start("v") + 1, match.end("v") - 1
            ok = _literal_is_secret(raw[1:-1], strength)
        else:  # flags are also named in prose ("use --token to …"): the value must look random
            v_start, v_end = match.start("v"), match.end("v")
            ok = _value_is_secret(raw, "mid", strength)
        if ok:
            add(_P_ASSIGN, _assignment_kind(name, strength), v_start, v_end)
    for index, lazy in enumerate(_PROSE):
        for match in lazy.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] in _ALNUM:
                continue
            if index == 3 and not _PROSE_KEY_BEFORE.pattern.search(low, max(0, start - 8), start):
                continue
            value = text[match.start("v") : match.end("v")].rstrip(".")
            if (
                any(c.isdigit() for c in value)
                and _looks_random(value)
                and not _is_reference(value)
                and not _UUID.match(value)
                and not any(c in _CODE_CHARS for c in value)
                and not _DOTTED_CODE.match(value)
            ):
                kind = "password" if index == 0 else "secret"
                add(_P_ASSIGN, kind, match.start("v"), match.start("v") + len(value))


def _assignment(text: str, match: re.Match[str], name_start: int, add: _Add) -> int:
    """Judge one ``name <sep> value``; return where the value ends (or the separator, if none)."""
    close = match.group("close")
    sep = match.group("sep")
    name_end = match.start("close") if close else match.end() - len(sep)
    while name_end > name_start and text[name_end - 1] == "]":
        name_end -= 1
    name = text[name_start:name_end]
    if not name or not (name[0].isalpha() or name[0] in "_-"):
        return match.end()
    if text.startswith("://", name_start - 3):
        return match.end()  # scheme://user:password@host is the URL rule's
    before = text[name_start - 1] if name_start > 0 else ""
    quoted = bool(before) and before in "\"'`" and bool(close)
    if not quoted and before and before in "\"'`" and text.startswith(before, match.end()):
        return match.end()  # `api_key=` or "token=" + value: the string ends after the separator
    mode = _mode(text, name_start, name, sep, quoted)
    if mode == "line" and "." in name and sep.strip() != sep:
        mode = "mid"  # self.token = nextchar is code; spring.datasource.password=x is not
    env = mode == "strict" and not quoted
    strength = _name_strength(name, env=env)
    if strength is None:
        return match.end()
    span = _value_span(text, match.end(), mode)
    if span is None:
        return match.end()
    start, end, is_literal = span
    examined = end
    value = text[start:end]
    if is_literal:
        after = text[end + 1 : end + 4].lstrip(" \t")
        if after.startswith("=") and not after.startswith("=="):
            return examined  # token: "Token | None" = None (a quoted annotation)
        if not _literal_is_secret(value, strength, _continues(text, end + 1)):
            return examined
    else:
        if mode == "line" and _continues(text, end):
            mode = "mid"  # password=pw, / token = a + b: code
        if not _value_is_secret(value, mode, strength, name):
            return examined
        if mode == "line":
            end = _extend_to_line_end(text, end)  # password = correct horse battery staple
    add(_P_ASSIGN, _assignment_kind(name, strength), start, end)
    return max(examined, end)


# -- assignment helpers ----------------------------------------------------------------------------


def _words(name: str) -> list[str]:
    return [word.lower() for word in _CAMEL.findall(name)]


def _name_words(name: str) -> list[str]:
    """The words of a name's last dotted segment, without trailing _KEEP_SUFFIX words and numbers."""
    segment = name.rsplit(".", 1)[-1].strip("-_@$")
    words = _words(segment)
    while len(words) > 1 and (words[-1] in _KEEP_SUFFIX or words[-1].isdigit()):
        words.pop()
    return words


def _name_strength(name: str, env: bool = False) -> str | None:
    """``"strong"`` (any literal value is a secret), ``"weak"`` (a high-entropy one is) or None.

    The name counts by its last dotted segment (``self.password``, not ``token.markup``) and by its
    last word (``db_password``, ``apiKey``, ``SecretAccessKey``; not ``token_count``). ``env``: the
    name is being set as an environment variable or a flag, where ``*_KEY``/``*_PASS``/``*_PAT`` are
    secrets; in code, ``FOO_KEY = "…"`` is as often a cache or storage key.
    """
    if name.rsplit(".", 1)[-1].strip("-_@$").lower() in _NOT_SECRET_NAMES:
        return None
    words = _name_words(name)
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last == "id":
        return "strong" if prev == "secret" else None  # Vault AppRole secret_id
    if last in _STRONG_LAST:
        if last == "token" and prev in _TOKEN_NOT_SECRET:
            return None
        if last == "pwd" and prev in ("", "old"):
            return None  # $PWD, $OLDPWD: directories
        return "strong"
    if last.endswith(_COMPOUND_LAST) and len(last) > 6 and not last.startswith("next"):
        return "strong"
    if last.endswith("key") and last[:-3] in _KEY_PREFIXES:
        return "strong"  # apikey, secretkey, accesskey
    if last in ("key", "keys") and prev in _KEY_PREFIXES:
        return "strong"
    if last in _ENV_ONLY_LAST and prev and env:
        return "strong"
    if last in _WEAK_LAST and (prev or last != "key"):
        return "weak"
    return None


def _assignment_kind(name: str, strength: str) -> str:
    if strength == "weak":
        return "high-entropy"
    for word in _name_words(name):
        if word.startswith(("pass", "pwd")) or word.endswith(("password", "passwd", "pwd")):
            return "password"
    return "secret"


def _mode(text: str, name_start: int, name: str, sep: str, quoted: bool) -> str:
    """How literal an unquoted value is: ``strict`` (env, query, flags), ``line`` or ``mid``."""
    before = text[name_start - 1] if name_start > 0 else ""
    if before in ("?", "&") or (name.startswith("-") and not quoted):
        return "strict"  # a query parameter or a flag
    if before == ";" and sep == "=":
        return "strict"  # a connection string: AccountName=x;AccountKey=…;
    if not quoted and sep == "=" and _ENV_NAME.match(name):
        return "strict"
    prefix_start = name_start - 1 if quoted else name_start
    if _LINE_PREFIX.search(text, max(0, prefix_start - 40), prefix_start):
        return "line"
    return "mid"


def _value_span(text: str, pos: int, mode: str) -> tuple[int, int, bool] | None:
    """The value after a separator at ``pos``: (start, end, is a quoted literal), or None.

    A quoted value runs to its closing quote (or the end of the line); an unquoted one is one word,
    ended by whitespace or, in code (``mid``/``line``), by ``,;)}]>&|``, in ``strict`` mode (shell,
    query strings) by ``&#|;)``, and by a JSON escape (``\\n``, ``\\"``).
    """
    n = len(text)
    if pos >= n:
        return None
    i = pos
    if text[i] in "rRbBuUfF":  # a Python string prefix
        j = i + 1
        if j < n and text[j] in "rRbBuUfF":
            j += 1
        if j < n and text[j] in "\"'":
            i = j
    char = text[i]
    escaped = char == "\\" and i + 1 < n and text[i + 1] in "\"'"
    if char in "\"'`" or escaped:
        quote = text[i : i + 2] if escaped else char
        start = i + len(quote)
        line_end = _line_end(text, start)
        j = start
        while (k := text.find(quote, j, line_end)) >= 0:
            if escaped or not _backslashed(text, k):
                return (start, k, True)
            j = k + 1
        return (start, line_end, True)
    if char in " \t\r\n":
        return None
    pattern = _STRICT_VALUE if mode == "strict" else _CODE_VALUE
    match = pattern.match(text, i, min(n, i + _MAX_VALUE))
    end = match.end() if match is not None else i
    return (i, end, False) if end > i else None


def _backslashed(text: str, pos: int) -> bool:
    """The character at ``pos`` is escaped by an odd run of backslashes."""
    run = 0
    while pos - run > 0 and text[pos - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _continues(text: str, pos: int) -> bool:
    """An operator, call or argument list follows a value: it is part of an expression."""
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    return pos < n and (text[pos] in "+%.,*/([|&?" or text.startswith(("if ", "or ", "and "), pos))


def _extend_to_line_end(text: str, end: int) -> int:
    """In a YAML/INI line, a value that goes on in plain words (a passphrase) is redacted whole."""
    line_end = _line_end(text, end)
    rest = text[end:line_end]
    comment = rest.find(" #")
    if comment >= 0:
        rest = rest[:comment]
    if rest.strip() and _PLAIN_REST.match(rest):
        return end + len(rest.rstrip())
    return end


def _line_end(text: str, start: int) -> int:
    """The end of the line at ``start`` (a real or a JSON-escaped line break), at most _MAX_LINE on."""
    limit = min(len(text), start + _MAX_LINE)
    end = text.find("\n", start, limit)
    end = limit if end < 0 else end
    escaped = text.find("\\n", start, end)
    return end if escaped < 0 else escaped


def _is_reference(value: str) -> bool:
    return _REFERENCE.match(value) is not None


def _is_placeholder(value: str) -> bool:
    value = value.strip()
    low = value.lower()
    return (
        low in _PLACEHOLDERS
        or _MASK_ONLY.match(low) is not None
        or _MASKED.search(value) is not None
        or _YOUR.match(low) is not None
        or _BRACKET_TOKEN.match(value) is not None
        or _COLOR.match(value) is not None
        or MARKER_PATTERN.fullmatch(value) is not None
    )


def _names_a_secret(value: str) -> bool:
    """An identifier made of words, one of them a secret word: "my_token", "GITHUB_TOKEN"."""
    if not _WORDY.match(value):
        return False
    words = _words(value)
    if len(words) < 2:
        return False
    return any(
        w in _STRONG_LAST or w in ("key", "pass", "pat") or w.endswith(_COMPOUND_LAST)
        for w in words
    )


def _only_markers_left(value: str) -> bool:
    """A value that holds a marker and nothing else that looks secret (already redacted)."""
    if "[REDACTED:" not in value:
        return False
    return not any(_looks_random(part) for part in MARKER_PATTERN.sub(" ", value).split())


def _literal_is_secret(value: str, strength: str, continues: bool = False) -> bool:
    """A quoted string assigned to a secret name (``continues``: an expression goes on after it)."""
    if value[:1].isspace() and value.lstrip()[:1] in ("+", "%", ",", ")", "."):
        return False  # "token=" + repr(x): the quote closed a string, it did not open a value
    value = value.strip()
    if not value or _is_placeholder(value) or _is_reference(value) or _PATH.match(value):
        return False
    if _only_markers_left(value) or _names_a_secret(value) or _REGEX_LIKE.search(value):
        return False
    if _CALL.match(value):
        return False
    if _TEMPLATE_PART.search(value):
        rest = _TEMPLATE_PART.sub(" ", value)
        if not any(_looks_random(part) for part in rest.split()):
            return False  # f"Bearer {token}", "${DB_PASSWORD}"
    if continues and not _looks_random(value):
        return False  # "Basic " + credentials
    if strength == "weak":
        return _high_entropy(value)
    return True


def _value_is_secret(value: str, mode: str, strength: str, name: str = "") -> bool:
    """An unquoted value assigned to a secret name."""
    value = value.strip()
    if not value or _is_placeholder(value) or _is_reference(value) or _PATH.match(value):
        return False
    if _only_markers_left(value):
        return False
    if value[0] in "{[(" or any(c in _CODE_CHARS for c in value) or value.endswith(":"):
        return False  # a structure, a call, an index: code, not a literal
    if _TYPE_SPLIT.split(value, maxsplit=1)[0].lower() in _TYPE_WORDS:
        return False
    if mode == "strict":
        return strength == "strong" or _high_entropy(value)
    if _DOTTED_CODE.match(value):
        return False  # os.environ, self.password, settings.SECRET_KEY
    if _IDENT.match(value) and (_names_a_secret(value) or value.lower() in name.lower()):
        return False  # api_key=api_key, token=access_token: variables
    if strength == "weak":
        return _high_entropy(value)
    has_digit = any(c.isdigit() for c in value)
    if _NUMBER.match(value):
        return mode == "line" and len(value) >= 4
    if _IDENT.match(value):
        if mode == "mid":
            return _looks_random(value)
        # line mode (YAML, INI, TOML): a bare word is a literal unless it reads like a variable, a
        # class name or the start of a description
        if value.lower() in _STOPWORDS:
            return False
        if "_" in value or (value[0].isupper() and not has_digit):
            return has_digit
        return True
    if mode == "mid":
        return _looks_random(value) or any(c in value for c in "!@#%^*+=~")
    return True


def _looks_random(value: str) -> bool:
    """Not a plain word: long enough, and mixing letters with digits (or with cases, at length)."""
    if len(value) < 6 or "[REDACTED:" in value:
        return False
    has_alpha = any(c.isalpha() for c in value)
    if has_alpha and any(c.isdigit() for c in value):
        return True
    # Letters only: random mixed case switches case about every other character; CamelCase
    # (AsyncAPIKeys) only at word boundaries.
    letters = [c for c in value if c.isalpha()]
    switches = sum(1 for a, b in itertools.pairwise(letters) if a.isupper() != b.isupper())
    return len(letters) >= 12 and switches >= len(letters) // 3 and _entropy(value) >= 3.0


def _mixed(value: str) -> bool:
    """Upper case, lower case and digits: a base64 secret, not a hex digest or a word."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


def _high_entropy(value: str) -> bool:
    if len(value) < 16 or _UUID.match(value) or _HEX.match(value) or not _TOKEN_LIKE.match(value):
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    return _entropy(value) >= 3.5


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


# -- merging ---------------------------------------------------------------------------------------


def _merge(text: str, found: list[tuple[int, str, int, int]]) -> list[tuple[str, int, int]]:
    markers = (
        [(m.start(), m.end()) for m in MARKER_PATTERN.finditer(text)]
        if "[REDACTED:" in text
        else []
    )
    marker_ends = [m_end for _, m_end in markers]
    spans: list[tuple[int, int, int, str]] = []
    for priority, kind, start, end in found:
        i = bisect.bisect_right(marker_ends, start)  # the first marker that ends after start
        if i < len(markers) and markers[i][0] <= start and end <= markers[i][1]:
            continue  # inside a marker: nothing to redact
        while i < len(markers) and markers[i][0] < end:  # overlaps a marker: cover it whole
            start, end = min(start, markers[i][0]), max(end, markers[i][1])
            i += 1
        spans.append((start, end, priority, kind))
    spans.sort()
    result: list[tuple[str, int, int]] = []
    cur_start = cur_end = cur_priority = -1
    cur_kind = ""
    for start, end, priority, kind in spans:
        if cur_end >= 0 and start < cur_end:
            cur_end = max(cur_end, end)
            if priority < cur_priority:
                cur_priority, cur_kind = priority, kind
            continue
        if cur_end >= 0:
            result.append((cur_kind, cur_start, cur_end))
        cur_start, cur_end, cur_priority, cur_kind = start, end, priority, kind
    if cur_end >= 0:
        result.append((cur_kind, cur_start, cur_end))
    return result
