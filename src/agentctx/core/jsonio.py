"""JSON for the hook fast path through CPython's C accelerator, without importing ``json``.

``import json`` pulls in ``re`` and ``enum``: a large share of a bare interpreter start, more than
the whole SessionStart budget leaves (benchmarks/results/hooks.md). The ``_json`` extension module behind ``json`` parses and
escapes on its own; this module drives it directly and falls back to ``json`` where it is missing
(other Python implementations). Output is ASCII-escaped, as ``json.dumps`` does by default.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_scan: Callable[[str, int], tuple[Any, int]] | None
_escape: Callable[[str], str]

try:
    import _json

    class _Context:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float
        memo: dict[str, str] = {}  # noqa: RUF012 - the scanner API wants this attribute

    _scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # any object with these attributes
    _escape = _json.encode_basestring_ascii
except (ImportError, AttributeError):  # pragma: no cover - non-CPython
    import json as _fallback

    _scan = None
    _escape = _fallback.dumps

_WHITESPACE = " \t\n\r"


def loads(text: str) -> Any:
    """Parse one JSON document; ``ValueError`` when ``text`` is not exactly one."""
    if _scan is None:  # pragma: no cover - non-CPython
        return _fallback.loads(text)
    start = 0
    end_text = len(text)
    while start < end_text and text[start] in _WHITESPACE:
        start += 1
    try:
        value, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"not JSON at character {exc.value}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except Exception:
        # The C scanner builds its error by importing json.decoder, which can fail from this
        # context (SystemError). On this error path only, let the json module parse and report.
        import json

        return json.loads(text)
    while end < end_text and text[end] in _WHITESPACE:
        end += 1
    if end != end_text:
        raise ValueError(f"extra data after JSON at character {end}")
    return value


def dumps(value: Any) -> str:
    """Serialize dicts, lists, strings, numbers, booleans and None compactly."""
    if isinstance(value, str):
        return str(_escape(value))
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("NaN and infinity are not JSON")
        return repr(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{dumps(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot serialize {type(value).__name__} to JSON")
