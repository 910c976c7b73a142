"""The rule table of :mod:`agentctx.redact`: the token-shape patterns its finders run.

Each pattern is a :class:`Lazy`, compiled with all the others on the first ``find_secrets`` call,
so that importing stays cheap on the hook path. Every pattern starts with a literal so that ``re``
can skip ahead (a leading look-behind or ``\\b`` makes a scan many times slower); the ones marked "on
the lowercased text" run on an ASCII-lowercased copy of the text. Also here: the bounds that keep
scans linear, and the priorities that decide the kind of overlapping findings. The words and shapes
that judge an assigned name or value are in :mod:`agentctx.redact.assignments`.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    #: How a finder reports one finding: ``add(priority, kind, start, end)``.
    Add = Callable[[int, str, int, int], None]

MARKER_PATTERN = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
"""A redaction marker, ``[REDACTED:<kind>]``."""

# Bounds that keep every scan linear on hostile input (a 1 MB line, a run of "passpass…"): how far a
# name, a value or a line is followed. Longer names are not matched; longer values are cut there.
MAX_NAME = 64
MAX_VALUE = 8192
MAX_LINE = 4096


def wordset(words: str) -> frozenset[str]:
    """The whitespace-separated words of ``words``."""
    return frozenset(words.split())


TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

# Priorities: when findings overlap, the merged span takes the kind of the lowest number.
P_BLOCK = 0
P_KEY = 1
P_TOKEN = 100  # + the rule's index in TOKEN_RULES
P_AWS_SECRET = 200
P_PASSWORD = 300
P_HEADER = 400
P_ASSIGN = 500


class Lazy:
    """A finder's pattern, compiled with all the others on the first ``find_secrets`` call.

    Compiling them costs more than importing the package (docs/redaction.md has the times). The
    PostToolUse hook imports :mod:`agentctx.redact` on every tool call but redacts only when it
    records something, so the compilation is paid only then.
    """

    __slots__ = ("flags", "pattern", "source")
    pattern: re.Pattern[str]

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        _LAZY.append(self)


_LAZY: list[Lazy] = []
_compiled: list[bool] = []  # [True] once every Lazy is compiled


def ensure_compiled() -> None:
    """Compile every :class:`Lazy` pattern, once (the first ``find_secrets`` call does it)."""
    if _compiled:
        return
    for lazy in _LAZY:
        lazy.pattern = re.compile(lazy.source, lazy.flags)
    _compiled.append(True)


# -- blocks ----------------------------------------------------------------------------------------

PRIVATE_TAG = Lazy(r"<\s{0,8}(/?)\s{0,8}private\s{0,8}>")  # on the lowercased text
KEY_BEGIN = Lazy(r"-{4,5} ?BEGIN [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
KEY_END = Lazy(r"-{4,5} ?END [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
# After a BEGIN line with no END (a truncated key): the body that follows — base64 lines,
# ``Header: value`` lines and blank lines, with real or JSON-escaped line breaks.
KEY_BODY = Lazy(
    r"(?:(?:[ \t]*(?:\r?\n|\\r\\n|\\n)){1,2}[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z][\w-]*:[ \t][^\n\\\"']*))*"
)
PUTTY_KEY = Lazy(r"PuTTY-User-Key-File-\d:[\s\S]*?(?:Private-MAC:\s*[0-9a-fA-F]+|\Z)")
AGE_KEY = Lazy(r"AGE-SECRET-KEY-1[0-9A-Z]{58}")

# -- provider tokens -------------------------------------------------------------------------------
# (kind, pattern, characters that must not come just before the match). The whole match is the
# secret. Each pattern starts with a literal.

TOKEN_RULES = tuple(
    (kind, Lazy(pattern), before)
    for kind, pattern, before in (
        ("anthropic", r"sk-ant-(?:[a-z]+\d*-)?[A-Za-z0-9_\-]{20,}", TOKEN_CHARS),
        # Legacy sk-…, sk-proj-/sk-svcacct-/sk-admin-, and OpenAI-compatible providers' sk-…; a digit
        # or capital letter is required (see _find_tokens) so that kebab-case words never match.
        ("openai", r"sk-[A-Za-z0-9_\-]{20,}", TOKEN_CHARS),
        (
            "aws-access-key-id",
            r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
            ALNUM,
        ),
        ("github", r"g(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})", TOKEN_CHARS),
        (
            "gitlab",
            r"gl(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|oas|ffct|wt|sa)-[A-Za-z0-9_\-]{20,}"
            r"(?:\.[A-Za-z0-9_\-]+)*",
            TOKEN_CHARS,
        ),
        ("gitlab", r"GR1348941[A-Za-z0-9_\-]{20,}", TOKEN_CHARS),
        ("slack", r"x(?:ox[a-z](?:\.xox[a-z])?|app-\d)-[A-Za-z0-9\-]{10,}", TOKEN_CHARS),
        (
            "slack-webhook",
            r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{8,}",
            frozenset(),
        ),
        ("stripe", r"whsec_[A-Za-z0-9]{20,}", TOKEN_CHARS),
        ("google-api-key", r"AIza[0-9A-Za-z_\-]{35}", TOKEN_CHARS),
        ("google-oauth", r"ya29\.[0-9A-Za-z_\-]{20,}", TOKEN_CHARS),
        ("google-oauth", r"GOCSPX-[0-9A-Za-z_\-]{20,}", TOKEN_CHARS),
        ("google-oauth", r"1//0[0-9A-Za-z_\-]{30,}", frozenset("0123456789/:")),
        ("npm", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", TOKEN_CHARS),
        ("pypi", r"pypi-Ag[A-Za-z0-9_\-]{40,}", TOKEN_CHARS),
        ("huggingface", r"hf_[A-Za-z0-9]{30,}", TOKEN_CHARS),
        ("sendgrid", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", TOKEN_CHARS),
        ("twilio", r"(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])", TOKEN_CHARS),
        ("digitalocean", r"do[pro]_v1_[a-f0-9]{64}", TOKEN_CHARS),
        ("shopify", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", TOKEN_CHARS),
        ("databricks", r"dapi[a-f0-9]{32}(?![A-Za-z0-9])", TOKEN_CHARS),
        ("sentry", r"sntr[ysu]_[A-Za-z0-9_=\-]{30,}", TOKEN_CHARS),
        ("grafana", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", TOKEN_CHARS),
        ("postman", r"PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}", TOKEN_CHARS),
        ("atlassian", r"ATATT3[A-Za-z0-9_\-=]{100,}", TOKEN_CHARS),
        ("groq", r"gsk_[A-Za-z0-9]{40,}", TOKEN_CHARS),
        ("replicate", r"r8_[A-Za-z0-9]{30,}", TOKEN_CHARS),
        ("xai", r"xai-[A-Za-z0-9]{40,}", TOKEN_CHARS),
        ("perplexity", r"pplx-[A-Za-z0-9]{40,}", TOKEN_CHARS),
        ("linear", r"lin_(?:api|oauth)_[A-Za-z0-9]{30,}", TOKEN_CHARS),
        ("notion", r"ntn_[A-Za-z0-9]{40,}", TOKEN_CHARS),
        ("supabase", r"sbp_[a-f0-9]{40}", TOKEN_CHARS),
        ("doppler", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", TOKEN_CHARS),
        (
            "jwt",
            # the header run is matched whole even with no dots after it (then rejected in
            # _find_tokens), so that "eyJeyJeyJ…" is not rescanned from every "eyJ"
            r"eyJ[A-Za-z0-9_\-]{5,}(?:\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+)?)?",
            TOKEN_CHARS,
        ),
    )
)
# Anchored on a literal inside the token (a leading character class would be slow); _find_tokens
# checks the characters before it.
STRIPE = Lazy(r"k_(?:live|test)_[A-Za-z0-9]{10,}")  # sk_/rk_/pk_
TELEGRAM = Lazy(r":AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])")  # <bot id>:AA…
TELEGRAM_ID = Lazy(r"\d{8,10}\Z")
MAILCHIMP = Lazy(r"-us\d{1,2}(?![A-Za-z0-9])")  # <32 hex>-us<n>
MAILCHIMP_KEY = Lazy(r"[0-9a-f]{32}\Z")

# -- AWS secret access keys ------------------------------------------------------------------------

AWS_NAMED = Lazy(  # on the lowercased text
    r"secret[_\-.]?(?:access)?[_\-.]?key[\"'\]]*\s*(?:[:=]|:=|=>)\s*[\"']?"
    r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+])"
)
AWS_CANDIDATE = Lazy(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
AWS_WINDOW = 400

# -- passwords and credentials in URLs, connection strings, commands and headers -------------------

# ://user:password@host — the password may hold '@' (the last '@' before the host wins) but not '/',
# so that host:port/path@x is not read as credentials.
URL_PASSWORD = Lazy(
    r"://[^\s:/?#@'\"<>\[\]\\]{0,256}:(?P<v>[^\s/'\"<>\\]{1,256}?)@"
    r"(?=[^\s@/'\"<>\\?#]{0,256}(?:[\s/'\"<>\\?#]|$))"
)
URL_USER_TOKEN = Lazy(r"://(?P<v>[A-Za-z0-9_\-]{20,})@")  # ://TOKEN@host
# ADO.NET / ODBC / JDBC ``Password=…;`` (on the lowercased text; values may be {braced}, quoted, or
# hold spaces).
DSN_PASSWORD = Lazy(
    r"p(?:assword|wd|asswd)\s*=\s*"
    r"(?P<v>\{[^}\n]*\}|\"[^\"\n]*\"|'[^'\n]*'|[^;\n\"']*[^;\n\"'\s])(?=\s*(?:;|$|[\"']))",
    re.MULTILINE,
)
CLI_PASSWORDS = (
    ("mysql", Lazy(r"mysql(?:dump|admin)?\b[^\n|;&]{0,200}?\s-p(?P<v>[^\s'\"\-][^\s'\"]*)")),
    ("mariadb", Lazy(r"mariadb\b[^\n|;&]{0,200}?\s-p(?P<v>[^\s'\"\-][^\s'\"]*)")),
    (
        "login",
        Lazy(r"login\b[^\n|;&]{0,200}?\s(?:-p|--password)[ \t=]+(?P<v>[^\s'\"\-$][^\s'\"]*)"),
    ),
    ("sshpass", Lazy(r"sshpass\s+-p\s*(?P<v>[^\s'\"\-][^\s'\"]*)")),
    ("redis-cli", Lazy(r"redis-cli\b[^\n|;&]{0,200}?\s-a\s+(?P<v>[^\s'\"\-][^\s'\"]*)")),
    ("-u", Lazy(r"-(?:u|-user)\s+[\"']?[^\s:'\"\-][^\s:'\"]*:(?P<v>[^\s'\"]+)")),
)
AUTH_HEADER = Lazy(  # on the lowercased text
    r"authorization[\"']?\s*[:=]\s*[\"']?\s*"
    r"(?:(?:bearer|basic|token|apikey|api-key|key|sso-key|otp|digest|negotiate)\s+)?"
    r"(?P<v>[^\s\"'`,;]{4,})"
)
BEARER = Lazy(r"b(?:earer|asic)\s+(?P<v>[a-z0-9._~+/\-]{8,}=*)")  # on the lowercased text
# ``Cookie: name=value; …`` (on the lowercased text; ``set-cookie`` ends in ``cookie``).
COOKIE = Lazy(r"cookie\s*:\s*(?P<v>[^\s=;\"'\\]+=[^\n\"'\\]*)")

# -- assignments -----------------------------------------------------------------------------------

# Hint words that a secret-looking name contains. Each hint gets its own pattern on the lowercased
# text: the hint, the rest of the name, an optional closing quote, and a separator (an optional type
# annotation, then ``=``, ``:``, ``:=`` or ``=>``). The start of the name is found by scanning back.
_HINTS = sorted(
    wordset(
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
ASSIGN_PATTERNS = tuple((hint, Lazy(hint + _SEPARATOR)) for hint in _HINTS)
NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
XML_SECRET = Lazy(  # on the lowercased text
    r"<(?P<tag>[\w:.\-]{0,32}?(?:password|passwd|passphrase|secret|token|apikey|api_key|api-key)[\w:.\-]{0,32}+)>"
    r"(?P<v>[^<\n]{1,500})</(?P=tag)>"
)
FLAG = Lazy(  # on the lowercased text
    r"-(?P<name>-?(?:[a-z][\w\-]{0,40}?)?(?:pass|pwd|secret|token|key|auth|cred|bearer)[\w\-]{0,40}+)[ \t]+"
    r"(?P<v>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"\-<>|&;$`][^\s'\"|&;`]*)"
)
PROSE = tuple(  # on the lowercased text: "the password is …", "API key: …"
    Lazy(word + r"\s+(?:is|was|:)\s+[\"'`]?(?P<v>[^\s\"'`,;]{6,})")
    for word in (r"pass(?:word|phrase|wd)", "secret", "token", "key")
)
PROSE_KEY_BEFORE = Lazy(r"(?:api|secret|access|private|auth)[ _\-]?\Z")
