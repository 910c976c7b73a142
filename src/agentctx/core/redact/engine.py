"""The redaction engine: run every finder over a text, merge what they find, replace it.

:func:`find_secrets` runs the finders in priority order -- blocks, provider tokens, AWS secret keys,
passwords and headers (here), then assignments (:mod:`agentctx.core.redact.assignments`) -- each
reporting ``(priority, kind, start, end)``; :func:`_merge` joins overlapping findings and grows a
finding that overlaps an existing marker to cover it. :func:`redact` re-applies the rules until
nothing changes. The patterns are in :mod:`agentctx.core.redact.rules`.
"""

from __future__ import annotations

import bisect

from agentctx.core.redact.assignments import (
    HEX,
    IDENT,
    MASK_ONLY,
    find_assignments,
    is_placeholder,
    is_reference,
    literal_is_secret,
    looks_random,
    name_strength,
    value_is_secret,
)
from agentctx.core.redact.commands import find_commands
from agentctx.core.redact.rules import (
    AGE_KEY,
    ALNUM,
    AUTH_HEADER,
    AUTH_PAIR,
    AWS_CANDIDATE,
    AWS_NAMED,
    AWS_WINDOW,
    AZURE_SAS,
    BEARER,
    CALL_PAIR,
    CLI_PASSWORDS,
    COOKIE,
    DSN_PASSWORD,
    KEY_BEGIN,
    KEY_BODY,
    KEY_END,
    MAILCHIMP,
    MAILCHIMP_KEY,
    MARKER_PATTERN,
    NETRC,
    P_AWS_SECRET,
    P_BLOCK,
    P_HEADER,
    P_KEY,
    P_PASSWORD,
    P_TOKEN,
    PGPASS,
    PGPASS_HOST,
    PRIVATE_TAG,
    PUTTY_KEY,
    STRIPE,
    TELEGRAM,
    TELEGRAM_ID,
    TOKEN_RULES,
    URL_PASSWORD,
    URL_USER_TOKEN,
    ensure_compiled,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from agentctx.core.redact.rules import Add

_MAX_PASSES = 8
#: Known secret values shorter than this are not masked elsewhere (a 3-letter word would mangle
#: the text); shorter than MIN_ANYWHERE, only as a whole word.
MIN_MASKED = 4
MIN_ANYWHERE = 6
MAX_MASKED = 200


# -- the API ---------------------------------------------------------------------------------------


def redact(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every secret the rules recognize replaced by ``[REDACTED:<kind>]``.

    A value found secret once is masked at every occurrence in the text (a password redacted in a
    command is masked in the output it echoed too); ``known`` adds values found secret in other
    texts of the same event (:func:`secret_values`).
    """
    return redact_all([text], known)[0]


def redact_all(texts: Sequence[str], known: Iterable[str] = ()) -> list[str]:
    """Redact the texts of one event as one unit: a value secret in one is masked in all."""
    values: dict[str, str] = dict.fromkeys(known, "password")
    out = [_redact_one(text, values) for text in texts]
    if values:
        ordered = sorted(_maskable(values), key=len, reverse=True)
        if ordered:
            out = [_mask(text, ordered, values) for text in out]
    return out


def redact_name(name: str, known: Iterable[str] = ()) -> str:
    """A graph node's name (a file path, a branch) redacted, without compiling the rules when the
    name is plainly clean (:func:`plainly_clean`): the capture hook writes a node on every edit."""
    if not plainly_clean(name):
        return redact(name, known)
    values = dict.fromkeys(known, "password")
    ordered = _maskable(values)
    return _mask(name, ordered, values) if ordered else name


#: The characters of a name that no rule can match when its parts are short (below).
_PLAIN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-")
#: Words that start a rule's match, or name a secret, in any case (the assignment hints and the
#: token prefixes that can hide in a short part: a JWT's ``eyJ``, a key's ``sk-``/``AKIA``).
_PLAIN_HINTS = (
    "pass", "pwd", "secret", "token", "key", "auth", "cred", "bearer", "cookie", "session",
    "salt", "sig", "otp", "hmac", "csrf", "xsrf", "sid", "pat", "private", "eyj", "sk-", "akia",
    "xox", "ghp", "gho", "ghs", "ghu", "ghr", "glpat",
)  # fmt: skip
#: A part (between ``/`` and ``.``) this long may be a token: the shortest token shape is 15.
_PLAIN_PART = 12


def plainly_clean(text: str) -> bool:
    """True when no rule can match ``text``, judged without the rules: a short name of letters,
    digits and ``._/-`` whose parts are shorter than any token and hold no hint word.

    A cheap gate, not a rule: anything else goes through :func:`redact`.
    tests/security/test_sideways_secrets.py checks that every kind of secret fails it.
    """
    if len(text) > 256 or not _PLAIN_CHARS.issuperset(text):
        return False
    low = text.lower()
    if any(hint in low for hint in _PLAIN_HINTS):
        return False
    return all(len(part) < _PLAIN_PART for part in low.replace(".", "/").split("/"))


def secret_values(texts: Iterable[str]) -> dict[str, str]:
    """The values the rules find secret in ``texts`` (value -> kind), to pass on as ``known``."""
    values: dict[str, str] = {}
    for text in texts:
        _redact_one(text, values)
    return values


def _redact_one(text: str, values: dict[str, str]) -> str:
    """``text`` redacted; when invisible characters split a secret (a zero-width space inside a
    token, which the model would read joined), the text without them, redacted."""
    if not text:
        return text
    from agentctx.core.text import without_invisible

    visible = without_invisible(text)
    if visible != text:
        probe: dict[str, str] = {}
        if _redacted(visible, probe) != visible:  # a secret, once the invisibles are gone
            values.update(probe)
            return _redacted(visible, values)
    return _redacted(text, values)


def _redacted(text: str, values: dict[str, str]) -> str:
    for _ in range(_MAX_PASSES):
        spans = find_secrets(text)
        if not spans:
            break
        parts: list[str] = []
        last = 0
        for kind, start, end in spans:
            parts.append(text[last:start])
            parts.append(f"[REDACTED:{kind}]")
            values.setdefault(text[start:end], kind)
            last = end
        parts.append(text[last:])
        text = "".join(parts)
    return text


def _maskable(values: dict[str, str]) -> list[str]:
    """The values worth masking elsewhere, longest first: not markers, not a short common word.

    At most :data:`MAX_MASKED` of them (each is a scan of every text; a hostile text of many
    secrets keeps its rule findings redacted, its repeats beyond the bound are not looked for).
    """
    kept = [
        value
        for value in values
        if len(value) >= MIN_MASKED and value == value.strip() and "[REDACTED:" not in value
    ]
    return sorted(kept, key=len, reverse=True)[:MAX_MASKED]


def _mask(text: str, ordered: list[str], values: dict[str, str]) -> str:
    """Every occurrence of a known secret value in ``text`` replaced by its marker.

    A value shorter than :data:`MIN_ANYWHERE` is masked only as a whole word (``pa55`` not in
    ``pa556``); longer ones anywhere, inside a word too (a token in a file or branch name).
    """
    if not text:
        return text
    # (start, -end, kind): existing markers block (kind ""), then every occurrence of each value
    spans: list[tuple[int, int, str]] = []
    if "[REDACTED:" in text:
        spans.extend((m.start(), -m.end(), "") for m in MARKER_PATTERN.finditer(text))
    for value in ordered:
        start = text.find(value)
        while start >= 0:
            end = start + len(value)
            if len(value) >= MIN_ANYWHERE or (
                (start == 0 or not text[start - 1].isalnum())
                and (end == len(text) or not text[end].isalnum())
            ):
                spans.append((start, -end, values[value]))
            start = text.find(value, start + 1)
    if not any(kind for _, _, kind in spans):
        return text
    spans.sort()
    parts: list[str] = []
    last = 0
    for start, neg_end, kind in spans:
        if start < last:
            continue  # inside a marker or a longer value already masked
        if kind:
            parts.append(text[last:start])
            parts.append(f"[REDACTED:{kind}]")
            last = -neg_end
        else:
            parts.append(text[last:-neg_end])
            last = -neg_end
    parts.append(text[last:])
    return "".join(parts)


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """The secrets in ``text`` as sorted, non-overlapping ``(kind, start, end)`` spans.

    Overlapping findings merge into one span with the kind of the highest-priority rule among them
    (blocks, then provider tokens, then passwords and headers, then assignments). Existing markers
    are never reported, and a finding that overlaps one grows to cover it whole.
    """
    if not text:
        return []
    ensure_compiled()
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
    find_commands(text, low, add)
    find_assignments(text, low, add)
    return _merge(text, found) if found else []


# -- finders ---------------------------------------------------------------------------------------


def _find_blocks(text: str, low: str, add: Add) -> None:
    if "private" in low:
        depth = start = 0
        for match in PRIVATE_TAG.pattern.finditer(low):
            if not match.group(1):
                if depth == 0:
                    start = match.start()
                depth += 1
            elif depth > 0:
                depth -= 1
                if depth == 0:
                    add(P_BLOCK, "private", start, match.end())
        if depth > 0:
            add(P_BLOCK, "private", start, len(text))
    if "PRIVATE KEY" in text:
        position = 0
        no_end_after = len(text) + 1  # once an END search fails, later ones would too
        while (begin := KEY_BEGIN.pattern.search(text, position)) is not None:
            end = None
            if begin.end() < no_end_after:
                end = KEY_END.pattern.search(text, begin.end())
                if end is None:
                    no_end_after = begin.end()
            if end is not None:
                stop = end.end()
            else:
                body = KEY_BODY.pattern.match(text, begin.end())
                stop = body.end() if body is not None else begin.end()
            add(P_KEY, "private-key", begin.start(), stop)
            position = stop
    if "PuTTY-User-Key-File" in text:
        for match in PUTTY_KEY.pattern.finditer(text):
            add(P_KEY, "private-key", match.start(), match.end())
    if "AGE-SECRET-KEY-" in text:
        for match in AGE_KEY.pattern.finditer(text):
            add(P_KEY, "private-key", match.start(), match.end())


def _find_tokens(text: str, add: Add) -> None:
    for index, (kind, lazy, before) in enumerate(TOKEN_RULES):
        for match in lazy.pattern.finditer(text):
            start = match.start()
            if start > 0 and text[start - 1] in before:
                continue
            if kind == "openai" and not any(c.isdigit() or c.isupper() for c in match.group()[3:]):
                continue
            if kind == "jwt" and match.group().count(".") < 2:
                continue
            add(P_TOKEN + index, kind, start, match.end())
    for match in STRIPE.pattern.finditer(text):
        start = match.start() - 1
        if start >= 0 and text[start] in "srp" and (start == 0 or text[start - 1] not in ALNUM):
            add(P_TOKEN, "stripe", start, match.end())
    if ":AA" in text:
        for match in TELEGRAM.pattern.finditer(text):
            head = TELEGRAM_ID.pattern.search(text, max(0, match.start() - 10), match.start())
            if head is not None and (head.start() == 0 or not text[head.start() - 1].isalnum()):
                add(P_TOKEN, "telegram", head.start(), match.end())
    if "-us" in text:
        for match in MAILCHIMP.pattern.finditer(text):
            head = MAILCHIMP_KEY.pattern.search(text, max(0, match.start() - 32), match.start())
            if head is not None and (head.start() == 0 or text[head.start() - 1] not in ALNUM):
                add(P_TOKEN, "mailchimp", head.start(), match.end())


def _find_aws_secrets(
    text: str, low: str, found: list[tuple[int, str, int, int]], add: Add
) -> None:
    if "secret" in low:
        for match in AWS_NAMED.pattern.finditer(low):
            if _mixed(text[match.start("v") : match.end("v")]):
                add(P_AWS_SECRET, "aws-secret-access-key", match.start("v"), match.end("v"))
    for _, kind, key_start, key_end in list(found):
        if kind != "aws-access-key-id":
            continue
        low_bound = max(0, key_start - AWS_WINDOW)
        high_bound = min(len(text), key_end + AWS_WINDOW)
        for match in AWS_CANDIDATE.pattern.finditer(text, low_bound, high_bound):
            if _mixed(match.group(0)):
                add(P_AWS_SECRET, "aws-secret-access-key", match.start(), match.end())


def _mixed(value: str) -> bool:
    """Upper case, lower case and digits: a base64 secret, not a hex digest or a word."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


def _find_passwords(text: str, low: str, add: Add) -> None:
    if "://" in text:
        for match in URL_PASSWORD.pattern.finditer(text):
            value = match.group("v")
            if not (is_reference(value) or MASK_ONLY.pattern.match(value) or value.startswith("{")):
                add(P_PASSWORD, "password", match.start("v"), match.end("v"))
        for match in URL_USER_TOKEN.pattern.finditer(text):
            if looks_random(match.group("v")) and not HEX.pattern.match(match.group("v")):
                add(P_PASSWORD, "password", match.start("v"), match.end("v"))
    if ";" in text and ("pwd" in low or "passw" in low):
        for match in DSN_PASSWORD.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] not in "; \t\n\"'":
                continue
            window = low[max(0, start - 200) : match.end() + 200]
            value = text[match.start("v") : match.end("v")]
            if ";" in window and value_is_secret(value.strip("{}\"'"), "strict", "strong"):
                add(P_PASSWORD, "password", match.start("v"), match.end("v"))
    for needle, lazy in CLI_PASSWORDS:
        if needle in low:
            for match in lazy.pattern.finditer(text):
                start = match.start()
                if text[start] == "-" and start > 0 and text[start - 1] not in " \t\n\"'=":
                    continue  # some-user:x is a word, not a flag
                _add_value(text, match.start("v"), match.end("v"), add)
    _find_pairs(text, low, add)


def _add_value(text: str, start: int, end: int, add: Add, literal: bool = False) -> None:
    """Report a password value, unquoted, unless it is a reference, a placeholder or a number (a
    uid:gid). ``literal``: a file's field that nothing expands (``.pgpass``): only a mask is no
    password."""
    if end - start >= 2 and text[start] in "'\"" and text[end - 1] == text[start]:
        start, end = start + 1, end - 1
    value = text[start:end]
    if literal:
        if MASK_ONLY.pattern.match(value) or MARKER_PATTERN.fullmatch(value):
            return
    elif is_reference(value) or is_placeholder(value) or value.isdigit():
        return
    add(P_PASSWORD, "password", start, end)


def _find_pairs(text: str, low: str, add: Add) -> None:
    """Credentials in call arguments, .netrc and .pgpass lines, and Azure SAS signatures."""
    if "auth" in low:
        for match in AUTH_PAIR.pattern.finditer(low):
            value = text[match.start("v") : match.end("v")]
            if literal_is_secret(value, "strong"):
                add(P_PASSWORD, "password", match.start("v"), match.end("v"))
    if "(" in text:
        for match in CALL_PAIR.pattern.finditer(text):
            strength = name_strength(match.group("name"), env=True)
            value = match.group("v")
            if strength is not None and literal_is_secret(value, strength):
                add(P_PASSWORD, "password", match.start("v"), match.end("v"))
    if "password" in low and ("machine" in low or "default" in low):
        for match in NETRC.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] not in " \t\n\"'":
                continue
            _add_value(text, match.start("v"), match.end("v"), add)
    if ":" in text:
        for match in PGPASS.pattern.finditer(text):
            head = PGPASS_HOST.pattern.search(text, max(0, match.start() - 260), match.start())
            if head is not None:  # a .pgpass password is any text: digits, %A…, a.b…
                _add_value(text, match.start("v"), match.end("v"), add, literal=True)
    if "sig=" in text:
        for match in AZURE_SAS.pattern.finditer(text):
            start = match.start()
            if start > 0 and text[start - 1] in "?&;" and looks_random(match.group("v")):
                add(P_PASSWORD, "azure-sas", match.start("v"), match.end("v"))
    if "authorization" in low:
        for match in AUTH_HEADER.pattern.finditer(low):
            value = text[match.start("v") : match.end("v")]
            if is_reference(value) or is_placeholder(value):
                continue
            if IDENT.pattern.match(value) and not looks_random(value):
                continue  # {"Authorization": auth}: a variable
            add(P_HEADER, "auth-header", match.start("v"), match.end("v"))
    if "bearer" in low or "basic" in low:
        for match in BEARER.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1].isalnum():
                continue
            if looks_random(text[match.start("v") : match.end("v")]):
                add(P_HEADER, "auth-header", match.start("v"), match.end("v"))
    if "cookie" in low:
        for match in COOKIE.pattern.finditer(low):
            start = match.start()
            if start > 0 and low[start - 1] not in " \t\n\"'-{":
                continue  # start_cookie: str — a name, not the header
            value = text[match.start("v") : match.end("v")].rstrip()
            if not is_reference(value):
                add(P_HEADER, "cookie", match.start("v"), match.start("v") + len(value))


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
