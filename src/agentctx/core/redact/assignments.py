"""Values assigned to secret-looking names: ``KEY=value``, ``key: value``, ``--password value``.

:func:`find_assignments` finds a name holding a hint word (``rules.ASSIGN_PATTERNS``), the
separator and the value after it, and judges both. A name is *strong* (any literal value is a
secret) or *weak* (only a high-entropy one is) by its last word (:func:`_name_strength`); a value
is redacted unless it is plainly not a literal -- a reference, a call, a type, a path, a
placeholder. How literal an unquoted value is depends on where it stands (:func:`_mode`): shell,
env files, query strings and flags (``strict``), the start of a YAML/INI line (``line``) or code
(``mid``). Also here: XML elements, flags and prose ("the password is …"), and the value tests the
password and header finders of :mod:`agentctx.core.redact.engine` share. The value shapes are
:class:`~agentctx.core.redact.rules.Lazy` patterns like the rules: they compile on the first call, not
at import.
"""

from __future__ import annotations

import itertools
import math
import re

from agentctx.core.redact.rules import (
    ALNUM,
    ASSIGN_PATTERNS,
    FLAG,
    MARKER_PATTERN,
    MAX_LINE,
    MAX_NAME,
    MAX_VALUE,
    NAME_CHARS,
    P_ASSIGN,
    PROSE,
    PROSE_KEY_BEFORE,
    XML_SECRET,
    Lazy,
    wordset,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.redact.rules import Add

# -- words and shapes of names and values ----------------------------------------------------------

_CAMEL = Lazy(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# The last word of a name (after dropping _KEEP_SUFFIX words) decides: a name is secret when it
# *ends* in a secret word — token_count, next_token_logits, password_url are about secrets.
_STRONG_LAST = wordset(
    """
    password passwd passphrase secret token credential credentials creds apikey bearer auth
    authorization otp totp pwd sshpass
    """
)
_COMPOUND_LAST = ("password", "passwd", "secret", "token")  # dbpassword, clientsecret, authtoken
_KEY_PREFIXES = wordset(
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
_KEEP_SUFFIX = wordset(
    """
    value val string data raw plain plaintext b64 base64 hex bytes confirm confirmation again
    encoded enc base new old current prod production dev staging live
    """
)
# Tokens that are not credentials: NLP special tokens, pagination and lexer tokens.
_TOKEN_NOT_SECRET = wordset(
    """
    pad bos eos unk cls sep mask start end next prev last first special added max min num n
    total page cancel cancellation continuation sync lexer parse parser input output stop split
    new word sentence image audio vocab bpe cursor pagination progress lock
    """
)
_NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd", "pass", "tokens", "secrets", "author"})
_TYPE_WORDS = wordset(
    """
    str string int integer bool boolean bytes float number any object dict list optional union
    secretstr secretbytes none char text varchar uuid true false null nil undefined self this
    void unknown never option vec sensitive required lambda new await function async literal
    final annotated callable type
    """
)
# A bare word that starts a description ("token: the token to use"), not a value.
_STOPWORDS = wordset(
    """
    a an the this that these to for of if in on at by as or and is are be was use used uses
    using your our its their see must should will can may not no when which where with from
    defaults default optional required any all current same provided given set get returns
    return none specifies specify whether how what only also value name
    """
)
_PLACEHOLDERS = wordset(
    """
    none null nil undefined true false yes no on off string str redacted hidden masked omitted
    example placeholder required optional secret password token notset not_set empty default
    include same-origin omit basic bearer value ... …
    """
) | {""}
_REFERENCE = Lazy(
    r"^(?:\$\{?[A-Za-z_]|\$\(|\$[0-9@*#?]|%\(?[A-Za-z_]|%[A-Za-z_]+%|\{\{|\{%|#\{|<%"
    r"|\{[A-Za-z_][\w.\[\]'\"]*\}|<[^<>]*>$|\[REDACTED:)"
)
_TEMPLATE_PART = Lazy(r"\$\{[^}]*\}|\{\{[^}]*\}\}|\{[^{}]*\}|\$[A-Za-z_]\w*|%\([^)]*\)[sdr]|%[sd]")
MASK_ONLY = Lazy(r"^[xX*•.…#?_\-]+$")
_MASKED = Lazy(r"\*\*\*|xxxx|XXXX|\.\.\.|…|<[^<>]+>")
_BRACKET_TOKEN = Lazy(r"^\[[A-Z_]+\]$")  # [PAD], [MASK]
_COLOR = Lazy(r"^#[0-9a-fA-F]{3,8}$")
_CALL = Lazy(r"^[\w.]+\(.*\)$")  # `get_token()`
_TOKEN_LIKE = Lazy(r"^[A-Za-z0-9+/=_\-.~]+$")
_REGEX_LIKE = Lazy(r"\\[wdsbWDSB]|\[\^|\][*+?]|\(\?[:=!<P]")
_YOUR = Lazy(r"^<?(?:your|insert|enter|put|replace)[\s_\-]", re.IGNORECASE)
_DOTTED_CODE = Lazy(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$")
IDENT = Lazy(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WORDY = Lazy(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_NUMBER = Lazy(r"^[+-]?\d[\d_.,]*$")
_UUID = Lazy(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
HEX = Lazy(r"^[0-9a-fA-F]+$")
# A file path (a key or credentials *file*, not its content): /x, ~/x, ./x, ../x, C:\x — one word.
_PATH = Lazy(r"^(?:~?/|\.\.?/|[A-Za-z]:\\)\S*$")
_TYPE_SPLIT = Lazy(r"[\[<|?,\s]")
_CODE_CHARS = frozenset("()[]{}")
_PLAIN_REST = Lazy(r"^[^=(){}\[\]<>;,`\"']*$")
# What may come before a name at the start of a line: indentation, ``export``, a YAML list dash, a
# Read-tool line number (``  12→``) — after a real or a JSON-escaped line break.
_LINE_PREFIX = Lazy(
    r"(?:^|\n|\\n)[ \t]*(?:\d+(?:→|\t)[ \t]*)?(?:export[ \t]+|set[ \t]+|setx[ \t]+|-[ \t]+|\$env:)?\Z"
)
_ENV_NAME = Lazy(r"^[A-Z][A-Z0-9_]*$")
_BLOCK_INDICATOR = Lazy(r"[|>][+\-]?[1-9]?|[|>][1-9][+\-]?")
_NESTED = Lazy(r"-(?:\s|$)|[\w.\-\"']+\s*:(?:\s|$)|#")
# An unquoted value: one word, ended as _value_span says.
_STRICT_VALUE = Lazy(r"(?:[^\s\"'`&#|;)\\]|\\(?![nrt\"']))*+")
_CODE_VALUE = Lazy(r"(?:[^\s\"'`,;)}\]>&|\\]|\\(?![nrt\"']))*+")


# -- finders ---------------------------------------------------------------------------------------


def find_assignments(text: str, low: str, add: Add) -> None:
    """Report the secret values of assignments, XML elements, flags and prose in ``text``."""
    candidates: dict[int, re.Match[str]] = {}
    for hint, lazy in ASSIGN_PATTERNS:
        if hint not in low:
            continue
        for match in lazy.pattern.finditer(low):
            name_start = match.start()
            floor = max(0, name_start - MAX_NAME)
            while name_start > floor and text[name_start - 1] in NAME_CHARS:
                name_start -= 1
            if name_start > 0 and text[name_start - 1] == "\\" and text[name_start] in "nrt":
                name_start += 1  # a JSON-escaped line break or tab, not part of the name
            candidates.setdefault(name_start, match)
    examined = 0  # the end of the last value looked at: a name inside it is not an assignment
    for name_start in sorted(candidates):
        if name_start >= examined:
            examined = max(examined, _assignment(text, candidates[name_start], name_start, add))
    if "</" in low:
        for match in XML_SECRET.pattern.finditer(low):
            value = text[match.start("v") : match.end("v")]
            if _literal_is_secret(value, "strong"):
                add(P_ASSIGN, "secret", match.start("v"), match.end("v"))
    for match in FLAG.pattern.finditer(low):
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
            ok = value_is_secret(raw, "mid", strength)
        if ok:
            add(P_ASSIGN, _assignment_kind(name, strength), v_start, v_end)
    for index, lazy in enumerate(PROSE):
        for match in lazy.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] in ALNUM:
                continue
            if index == 3 and not PROSE_KEY_BEFORE.pattern.search(low, max(0, start - 8), start):
                continue
            value = text[match.start("v") : match.end("v")].rstrip(".")
            if (
                any(c.isdigit() for c in value)
                and looks_random(value)
                and not is_reference(value)
                and not _UUID.pattern.match(value)
                and not any(c in _CODE_CHARS for c in value)
                and not _DOTTED_CODE.pattern.match(value)
            ):
                kind = "password" if index == 0 else "secret"
                add(P_ASSIGN, kind, match.start("v"), match.start("v") + len(value))


def _assignment(text: str, match: re.Match[str], name_start: int, add: Add) -> int:
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
    if mode == "line" and sep.strip() == ":":
        block = _next_line_value(text, name_start, match.end())
        if block is not None:  # password:\n  value, password: |\n  value
            start, end, scalar = block
            if scalar or value_is_secret(text[start:end], "line", strength, name):
                add(P_ASSIGN, _assignment_kind(name, strength), start, end)
            return end
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
        if not value_is_secret(value, mode, strength, name):
            return examined
        if mode == "line":
            end = _extend_to_line_end(text, end)  # password = correct horse battery staple
    add(P_ASSIGN, _assignment_kind(name, strength), start, end)
    return max(examined, end)


# -- judging names and values ----------------------------------------------------------------------


def _words(name: str) -> list[str]:
    return [word.lower() for word in _CAMEL.pattern.findall(name)]


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
    if not quoted and sep == "=" and _ENV_NAME.pattern.match(name):
        return "strict"
    prefix_start = name_start - 1 if quoted else name_start
    if _LINE_PREFIX.pattern.search(text, max(0, prefix_start - 40), prefix_start):
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
    while text.startswith(("\\\n", "\\\r\n"), i):  # KEY=\<newline>  value: a continued line
        i += 2 if text[i + 1] == "\n" else 3
        while i < n and text[i] in " \t":
            i += 1
    if i >= n:
        return None
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
    pattern = (_STRICT_VALUE if mode == "strict" else _CODE_VALUE).pattern
    match = pattern.match(text, i, min(n, i + MAX_VALUE))
    end = match.end() if match is not None else i
    return (i, end, False) if end > i else None


def _next_line_value(text: str, name_start: int, pos: int) -> tuple[int, int, bool] | None:
    """A YAML value on the lines after its key: ``(start, end, is a block scalar)``, or None.

    After ``key:`` with nothing else on its line (or a block scalar indicator, ``|``, ``>-`` …),
    the value is the following lines indented deeper than the key: a block scalar's lines, or a
    plain scalar's first line. A nested mapping (``key:`` then ``  sub: x``) or a list is no value.
    """
    line_end = text.find("\n", pos, pos + MAX_LINE)
    if line_end < 0:
        return None
    indicator = text[pos:line_end].strip()
    if indicator and not _BLOCK_INDICATOR.pattern.fullmatch(indicator):
        return None
    line_start = text.rfind("\n", 0, name_start) + 1
    indent = len(text[line_start:name_start]) - len(text[line_start:name_start].lstrip(" -"))
    start = end = -1
    cursor = line_end + 1
    limit = min(len(text), cursor + MAX_VALUE)
    while cursor < limit:
        nl = text.find("\n", cursor, limit)
        nl = limit if nl < 0 else nl
        line = text[cursor:nl].rstrip("\r")
        body = line.lstrip(" \t")
        if body:
            if len(line) - len(body) <= indent:
                break
            if start < 0:
                if not indicator and _NESTED.pattern.match(body):
                    return None  # a mapping or a list under the key, not a value
                start = cursor + len(line) - len(body)
            end = cursor + len(line)
            if not indicator:
                break  # a plain scalar: its first line is enough to judge and redact
        cursor = nl + 1
    return (start, end, bool(indicator)) if start >= 0 else None


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
    if rest.strip() and _PLAIN_REST.pattern.match(rest):
        return end + len(rest.rstrip())
    return end


def _line_end(text: str, start: int) -> int:
    """The end of the line at ``start`` (a real or JSON-escaped line break), at most MAX_LINE on."""
    limit = min(len(text), start + MAX_LINE)
    end = text.find("\n", start, limit)
    end = limit if end < 0 else end
    escaped = text.find("\\n", start, end)
    return end if escaped < 0 else escaped


def is_reference(value: str) -> bool:
    """A reference to a value kept elsewhere: ``$VAR``, ``${VAR}``, ``%(name)s``, ``{{ x }}``…"""
    return _REFERENCE.pattern.match(value) is not None


def is_placeholder(value: str) -> bool:
    """A stand-in, not a value: ``none``, ``example``, a mask, ``<your-key>``, a marker."""
    value = value.strip()
    low = value.lower()
    return (
        low in _PLACEHOLDERS
        or MASK_ONLY.pattern.match(low) is not None
        or _MASKED.pattern.search(value) is not None
        or _YOUR.pattern.match(low) is not None
        or _BRACKET_TOKEN.pattern.match(value) is not None
        or _COLOR.pattern.match(value) is not None
        or MARKER_PATTERN.fullmatch(value) is not None
    )


def _names_a_secret(value: str) -> bool:
    """An identifier made of words, one of them a secret word: "my_token", "GITHUB_TOKEN"."""
    if not _WORDY.pattern.match(value):
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
    return not any(looks_random(part) for part in MARKER_PATTERN.sub(" ", value).split())


def _literal_is_secret(value: str, strength: str, continues: bool = False) -> bool:
    """A quoted string assigned to a secret name (``continues``: an expression goes on after it)."""
    if value[:1].isspace() and value.lstrip()[:1] in ("+", "%", ",", ")", "."):
        return False  # "token=" + repr(x): the quote closed a string, it did not open a value
    value = value.strip()
    if not value or is_placeholder(value) or is_reference(value) or _PATH.pattern.match(value):
        return False
    if _only_markers_left(value) or _names_a_secret(value) or _REGEX_LIKE.pattern.search(value):
        return False
    if _CALL.pattern.match(value):
        return False
    if _TEMPLATE_PART.pattern.search(value):
        rest = _TEMPLATE_PART.pattern.sub(" ", value)
        if not any(looks_random(part) for part in rest.split()):
            return False  # f"Bearer {token}", "${DB_PASSWORD}"
    if continues and not looks_random(value):
        return False  # "Basic " + credentials
    if strength == "weak":
        return _high_entropy(value)
    return True


def value_is_secret(value: str, mode: str, strength: str, name: str = "") -> bool:
    """An unquoted value assigned to a secret name."""
    value = value.strip()
    if not value or is_placeholder(value) or is_reference(value) or _PATH.pattern.match(value):
        return False
    if _only_markers_left(value):
        return False
    if value[0] in "{[(" or any(c in _CODE_CHARS for c in value) or value.endswith(":"):
        return False  # a structure, a call, an index: code, not a literal
    if _TYPE_SPLIT.pattern.split(value, maxsplit=1)[0].lower() in _TYPE_WORDS:
        return False
    if mode == "strict":
        return strength == "strong" or _high_entropy(value)
    if _DOTTED_CODE.pattern.match(value):
        return False  # os.environ, self.password, settings.SECRET_KEY
    if IDENT.pattern.match(value) and (_names_a_secret(value) or value.lower() in name.lower()):
        return False  # api_key=api_key, token=access_token: variables
    if strength == "weak":
        return _high_entropy(value)
    has_digit = any(c.isdigit() for c in value)
    if _NUMBER.pattern.match(value):
        return mode == "line" and len(value) >= 4
    if IDENT.pattern.match(value):
        if mode == "mid":
            return looks_random(value)
        # line mode (YAML, INI, TOML): a bare word is a literal unless it reads like a variable, a
        # class name or the start of a description
        if value.lower() in _STOPWORDS:
            return False
        if "_" in value or (value[0].isupper() and not has_digit):
            return has_digit
        return True
    if mode == "mid":
        return looks_random(value) or any(c in value for c in "!@#%^*+=~")
    return True


def looks_random(value: str) -> bool:
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


def _high_entropy(value: str) -> bool:
    if (
        len(value) < 16
        or _UUID.pattern.match(value)
        or HEX.pattern.match(value)
        or not _TOKEN_LIKE.pattern.match(value)
    ):
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


#: The judges of a name and of a quoted value, for the pair finders of :mod:`.engine`.
name_strength = _name_strength
literal_is_secret = _literal_is_secret
