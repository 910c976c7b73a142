"""Secret redaction: applied to any text before it is stored or sent off the machine.

Rules (each replaces the secret with ``[REDACTED:<kind>]`` and keeps the surrounding text):
provider tokens with a recognizable shape (Anthropic, OpenAI, AWS access keys, GitHub, GitLab, Slack,
Stripe, Google API keys, npm, PyPI, Hugging Face), private-key blocks, JWTs, ``Bearer``/``Basic``
credentials, passwords in URLs and connection strings, ``KEY=value`` / ``key: value`` assignments whose
name looks secret (password, secret, token, api_key, …) and high-entropy values assigned to such names,
and anything the user wraps in ``<private>…</private>``. Over-redaction is preferred to a leak.
"""

from __future__ import annotations

import math
import re

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)
_KEY_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)",
    re.DOTALL,
)
_TOKENS: list[tuple[str, re.Pattern[str]]] = [
    ("anthropic", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("aws", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")),
    ("github", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("gitlab", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("slack", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("slack", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+")),
    ("stripe", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("google", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("google", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}")),
    ("npm", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi", re.compile(r"\bpypi-[A-Za-z0-9_\-]{50,}")),
    ("huggingface", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
]
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic|token)\s+([A-Za-z0-9_\-.=+/]{16,})")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]+):([^\s@/]+)@")
_SECRET_NAME = (
    r"[A-Za-z0-9_.\-]*(?:pass(?:word|wd)?|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|"
    r"private[_\-]?key|client[_\-]?secret|auth|credential|session[_\-]?key|signing[_\-]?key)"
    r"[A-Za-z0-9_.\-]*"
)
_ASSIGNMENT = re.compile(
    rf"""(?ix)
    (?P<name>["']?{_SECRET_NAME}["']?)
    (?P<sep>\s*(?::=|=|:)\s*)
    (?P<value>"[^"\n]{{3,}}"|'[^'\n]{{3,}}'|[^\s"',;]{{3,}})
    """
)
_HIGH_ENTROPY = re.compile(r"\b[A-Za-z0-9+/_\-]{32,}={0,2}")


def redact(text: str) -> str:
    """``text`` with every secret the rules recognize replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    text = _PRIVATE.sub("[REDACTED:private]", text)
    text = _KEY_BLOCK.sub("[REDACTED:private-key]", text)
    for kind, pattern in _TOKENS:
        text = pattern.sub(f"[REDACTED:{kind}]", text)
    text = _URL_PASSWORD.sub(r"\1:[REDACTED:password]@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)} [REDACTED:credential]", text)
    text = _ASSIGNMENT.sub(_redact_assignment, text)
    return _HIGH_ENTROPY.sub(_redact_entropy, text)


def _redact_assignment(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith("[REDACTED") or value.strip("\"'").lower() in _PLACEHOLDERS:
        return match.group(0)
    quote = value[0] if value[0] in "\"'" else ""
    return f"{match.group('name')}{match.group('sep')}{quote}[REDACTED:secret]{quote}"


_PLACEHOLDERS = frozenset({"none", "null", "true", "false", "xxx", "changeme", "<redacted>", "***"})


def _redact_entropy(match: re.Match[str]) -> str:
    value = match.group(0)
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if has_digit and has_alpha and _entropy(value) >= 4.0 and not _looks_like_hash_or_path(value):
        return "[REDACTED:high-entropy]"
    return value


def _looks_like_hash_or_path(value: str) -> bool:
    # Hex digests (git shas, sha256) are identifiers worth keeping; paths carry no secrets here.
    return all(c in "0123456789abcdefABCDEF" for c in value) or "/" in value.strip("/")


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())
