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

A value found secret once is masked at every occurrence, in the text and in the other texts of the
same event (``redact_all``, ``known``); the passwords that tools take on their command lines are a
table (:mod:`~agentctx.core.redact.commands`) read by one engine.

Every pattern starts with a literal so that ``re`` can skip ahead (a leading look-behind or ``\\b``
makes a scan many times slower; docs/redaction.md); case-insensitive rules run on an ASCII-lowercased copy of the text,
which has the same length, so that offsets carry over. ``redact`` is idempotent: markers are never
reported, and it re-applies the rules until nothing changes.

Layout: :mod:`~agentctx.core.redact.rules` (the token-shape patterns, compiled lazily, and the
priorities), :mod:`~agentctx.core.redact.assignments` (names and values: assignments, flags, prose) and
:mod:`~agentctx.core.redact.engine` (the other finders, merging, :func:`redact`). Standard library only:
the PostToolUse hook imports this package.
"""

from __future__ import annotations

from agentctx.core.redact.engine import (
    find_secrets,
    redact,
    redact_all,
    redact_name,
    secret_values,
)
from agentctx.core.redact.rules import MARKER_PATTERN

__all__ = [
    "MARKER_PATTERN",
    "find_secrets",
    "redact",
    "redact_all",
    "redact_name",
    "secret_values",
]
