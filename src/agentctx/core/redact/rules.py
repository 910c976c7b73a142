"""The rule table of :mod:`agentctx.redact`: the token-shape patterns its finders run.

Each pattern is a :class:`Lazy`, compiled with all the others on the first ``find_secrets`` call,
so that importing stays cheap on the hook path. Every pattern starts with a literal so that ``re``
can skip ahead (a leading look-behind or ``\\b`` makes a scan many times slower); the ones marked "on
the lowercased text" run on an ASCII-lowercased copy of the text. Also here: the bounds that keep
scans linear, and the priorities that decide the kind of overlapping findings. The words and shapes
that judge an assigned name or value are in :mod:`agentctx.core.redact.assignments`.
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
# secret. Each pattern starts with a literal. A letter or digit before a token makes it part of a
# longer word; ``_`` and ``-`` do not (issue 24: ``test_ghp_…``, ``backup-sk-ant-…``, a token in
# an identifier, a file name or a branch name), so they are not in the set.

TOKEN_RULES = tuple(
    (kind, Lazy(pattern), before)
    for kind, pattern, before in (
        ("anthropic", r"sk-ant-(?:[a-z]+\d*-)?[A-Za-z0-9_\-]{20,}", ALNUM),
        # Legacy sk-…, sk-proj-/sk-svcacct-/sk-admin-, and OpenAI-compatible providers' sk-…; a digit
        # or capital letter is required (see _find_tokens) so that kebab-case words never match.
        ("openai", r"sk-[A-Za-z0-9_\-]{20,}", ALNUM),
        (
            "aws-access-key-id",
            r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
            ALNUM,
        ),
        ("github", r"g(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})", ALNUM),
        (
            "gitlab",
            r"gl(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|oas|ffct|wt|sa)-[A-Za-z0-9_\-]{20,}"
            r"(?:\.[A-Za-z0-9_\-]+)*",
            ALNUM,
        ),
        ("gitlab", r"GR1348941[A-Za-z0-9_\-]{20,}", ALNUM),
        ("slack", r"x(?:ox[a-z](?:\.xox[a-z])?|app-\d)-[A-Za-z0-9\-]{10,}", ALNUM),
        (
            "slack-webhook",
            r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{8,}",
            frozenset(),
        ),
        ("stripe", r"whsec_[A-Za-z0-9]{20,}", ALNUM),
        ("google-api-key", r"AIza[0-9A-Za-z_\-]{35}", ALNUM),
        ("google-oauth", r"ya29\.[0-9A-Za-z_\-]{20,}", ALNUM),
        ("google-oauth", r"GOCSPX-[0-9A-Za-z_\-]{20,}", ALNUM),
        ("google-oauth", r"1//0[0-9A-Za-z_\-]{30,}", frozenset("0123456789/:")),
        ("npm", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ALNUM),
        ("pypi", r"pypi-Ag[A-Za-z0-9_\-]{40,}", ALNUM),
        ("huggingface", r"hf_[A-Za-z0-9]{30,}", ALNUM),
        ("sendgrid", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", ALNUM),
        ("twilio", r"(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])", ALNUM),
        ("digitalocean", r"do[pro]_v1_[a-f0-9]{64}", ALNUM),
        ("shopify", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ALNUM),
        ("databricks", r"dapi[a-f0-9]{32}(?![A-Za-z0-9])", ALNUM),
        ("sentry", r"sntry?[su]?_[A-Za-z0-9_=\-]{30,}", ALNUM),
        ("grafana", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", ALNUM),
        ("postman", r"PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}", ALNUM),
        ("atlassian", r"ATATT3[A-Za-z0-9_\-=]{100,}", ALNUM),
        ("groq", r"gsk_[A-Za-z0-9]{40,}", ALNUM),
        ("replicate", r"r8_[A-Za-z0-9]{30,}", ALNUM),
        ("xai", r"xai-[A-Za-z0-9]{40,}", ALNUM),
        ("perplexity", r"pplx-[A-Za-z0-9]{40,}", ALNUM),
        ("linear", r"lin_(?:api|oauth)_[A-Za-z0-9]{30,}", ALNUM),
        ("notion", r"ntn_[A-Za-z0-9]{40,}", ALNUM),
        ("supabase", r"sbp_[a-f0-9]{40}", ALNUM),
        ("doppler", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", ALNUM),
        # -- issue 16: kinds that leaked, and the prefixed kinds of gitleaks' default rules and
        # detect-secrets' plugins (docs/security.md has the table) --
        ("vault", r"hv[sbr]\.[A-Za-z0-9_\-]{24,}", ALNUM),
        ("square", r"sq0(?:atp|csp|idp)-[A-Za-z0-9_\-]{22,}", ALNUM),
        ("square", r"EAAA[A-Za-z0-9_\-+=]{60,}", ALNUM),
        ("facebook", r"EAA[CGM][A-Za-z0-9]{90,}", ALNUM),
        ("mailgun", r"key-[A-Za-z0-9]{32}(?![A-Za-z0-9])", ALNUM),
        ("mailgun", r"pubkey-[a-f0-9]{32}(?![A-Za-z0-9])", ALNUM),
        (
            "discord",
            r"(?:MT|Mj|Mz|ND|NT|Nj|Nz|OD|OT)[A-Za-z0-9]{21,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}",
            ALNUM,
        ),
        (
            "discord-webhook",
            r"(?<=discord\.com/api/webhooks/)\d{15,20}/[A-Za-z0-9_\-]{60,}",
            frozenset(),
        ),
        (
            "teams-webhook",
            r"(?<=\.webhook\.office\.com/webhookb2/)[A-Za-z0-9@\-/]{40,}",
            frozenset(),
        ),
        (
            "password-hash",
            r"\$(?:2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}|apr1\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}"
            r"|1\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}"
            r"|[56]\$(?:rounds=\d{1,9}\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{43,86}"
            r"|argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{8,}\$[A-Za-z0-9+/]{16,})",
            frozenset(),
        ),
        ("password-hash", r"\{SHA\}[A-Za-z0-9+/]{27}=", frozenset()),
        ("heroku", r"HRKU-[A-Za-z0-9_\-]{30,}", ALNUM),
        ("pulumi", r"pul-[a-f0-9]{40}(?![A-Za-z0-9])", ALNUM),
        ("planetscale", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-=.]{32,64}", ALNUM),
        ("newrelic", r"NR(?:AK|JS|II)-[A-Za-z0-9]{19,32}", ALNUM),
        ("dynatrace", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}", ALNUM),
        ("shippo", r"shippo_(?:live|test)_[a-f0-9]{40}", ALNUM),
        ("rubygems", r"rubygems_[a-f0-9]{48}", ALNUM),
        ("clojars", r"CLOJARS_[a-z0-9]{60}", ALNUM),
        ("adobe", r"p8e-[A-Za-z0-9]{32}(?![A-Za-z0-9])", ALNUM),
        ("alibaba", r"LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])", ALNUM),
        ("flutterwave", r"FLW(?:SECK|PUBK)_TEST-[A-Za-z0-9]{32}-X", ALNUM),
        ("frameio", r"fio-u-[A-Za-z0-9_\-=]{64}", ALNUM),
        ("prefect", r"pnu_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ALNUM),
        ("readme", r"rdme_[a-z0-9]{70}", ALNUM),
        ("scalingo", r"tk-us-[A-Za-z0-9_\-]{48}", ALNUM),
        ("brevo", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", ALNUM),
        ("settlemint", r"sm_(?:pat|aat|sat)_[A-Za-z0-9]{16}", ALNUM),
        ("sourcegraph", r"sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}", ALNUM),
        ("easypost", r"EZ[AT]K[A-Za-z0-9]{54}", ALNUM),
        ("duffel", r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}", ALNUM),
        ("openshift", r"sha256~[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])", ALNUM),
        ("infracost", r"ico-[A-Za-z0-9]{32}(?![A-Za-z0-9])", ALNUM),
        ("terraform-cloud", r"\.atlasv1\.[A-Za-z0-9_\-=]{60,70}", frozenset()),
        ("harness", r"pat\.[A-Za-z0-9_\-]{22}\.[0-9a-f]{24}\.[0-9A-Za-z]{20}", ALNUM),
        ("cloudflare", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}", ALNUM),
        ("artifactory", r"AKC[A-Za-z0-9]{69,}", ALNUM),
        ("airtable", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}", ALNUM),
        ("azure-ad", r"Q~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])", frozenset()),
        ("bitbucket", r"ATBB[A-Za-z0-9_=.\-]{32,}", ALNUM),
        ("twitch", r"oauth:[a-z0-9]{30}(?![A-Za-z0-9])", ALNUM),
        (
            "onepassword",
            r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
            ALNUM,
        ),
        ("fly", r"fo1_[A-Za-z0-9_\-]{43}", ALNUM),
        ("anthropic-admin", r"sk-ant-admin01-[A-Za-z0-9_\-]{80,}", ALNUM),
        (
            "jwt",
            # the header run is matched whole even with no dots after it (then rejected in
            # _find_tokens), so that "eyJeyJeyJ…" is not rescanned from every "eyJ"
            r"eyJ[A-Za-z0-9_\-]{5,}(?:\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+)?)?",
            ALNUM,
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
# A command-line password: unquoted, or quoted (the quotes are not part of the secret).
_CLI_VALUE = r"(?P<v>'[^'\n]{1,256}'|\"[^\"\n]{1,256}\"|[^\s'\"\-][^\s'\"]*)"
# Tool-independent command-line shapes (the tools' own options are the table of
# :mod:`agentctx.core.redact.commands`).
CLI_PASSWORDS = (
    # curl -u user:pw, curl -uuser:pw, --user user:pw, --user=user:pw (the user is kept)
    ("-u", Lazy(r"-(?:u[ \t]*|-user[ \t=]+)[\"']?[^\s:'\"\-][^\s:'\"]*:(?P<v>[^\s'\"]+)")),
    # openssl … -pass pass:pw, -passin pass:pw, -passout 'pass:pw', apksigner --ks-pass pass:pw
    ("pass:", Lazy(r"-pass(?:in|out)?[ \t]+[\"']?pass:(?P<v>[^\s'\"]+)")),
)
# A credential pair passed to a call: auth=('user', 'pw'), HTTPBasicAuth("user", "pw"), BasicAuth(…)
# (on the lowercased text).
AUTH_PAIR = Lazy(
    r"auth[ \t]*(?:=[ \t]*)?\([ \t]*(?P<q1>['\"])[^'\"\n]{0,128}(?P=q1)[ \t]*,[ \t]*"
    r"(?P<q2>['\"])(?P<v>[^'\"\n]{1,256})(?P=q2)"
)
# A name and a value passed as two strings: define('DB_PASSWORD', 'pw'), setenv("API_TOKEN", "…"),
# config.set('password', '…') -- the name is judged like an assignment's (on the text).
CALL_PAIR = Lazy(
    r"\([ \t]*(?P<q1>['\"])(?P<name>[A-Za-z_][\w.\-]{0,63})(?P=q1)[ \t]*,[ \t]*"
    r"(?P<q2>['\"])(?P<v>[^'\"\n]{1,512})(?P=q2)[ \t]*\)"
)
# .netrc: machine <host> [login <user>] [account <a>] password <pw> (on the lowercased text).
NETRC = Lazy(
    r"(?:machine[ \t]+[^\s]{1,256}|default)(?:\s+(?:login|account|port)[ \t]+[^\s]{1,256}){0,3}"
    r"\s+password[ \t]+(?P<v>[^\s]{1,256})"
)
# .pgpass: host:port:database:user:password, a whole line (the host is checked before the match).
PGPASS = Lazy(
    r":(?:\d{1,5}|\*):[^\s:]{1,128}:[^\s:]{1,128}:(?P<v>[^\s]{1,256}?)(?=\r?\n|\\n|$)",
    re.MULTILINE,
)
PGPASS_HOST = Lazy(r"(?:^|\n|\\n)[ \t]*[A-Za-z0-9_.\-*\[\]]{1,253}\Z")
# Azure shared access signatures: …&sig=<base64, percent-encoded> (on the text).
AZURE_SAS = Lazy(r"sig=(?P<v>[A-Za-z0-9%+/]{20,}={0,2})")

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
