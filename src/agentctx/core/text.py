"""Stored text on its way out: line boundaries and invisible characters (issue 24).

Two classes of character make stored text read differently from how it looks:

* **Line boundaries.** ``str.splitlines()`` -- and a model -- start a new line at ``\\n``, ``\\r``,
  ``\\r\\n``, ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029
  (:data:`LINE_BREAKS`), not at ``\\n`` alone: a record that escapes only ``\\n`` line starts can
  still begin a line of its own.
* **Invisible characters** (:func:`is_invisible`): every format character (Unicode category Cf:
  zero-width spaces and joiners, bidi embeddings, overrides, isolates and marks, the soft hyphen,
  the byte-order mark, the tag characters U+E0000-E007F), the other default-ignorable code points
  (variation selectors, the combining grapheme joiner, Hangul fillers, Mongolian free variation
  selectors, the unassigned rest of U+E0000-E0FFF), and the control characters (Cc) other than tab
  and the line boundaries. People do not see them; a model reads every one, and a terminal acts on
  some (``\\x1b``).

Each way out decides how to show them, with one of two functions:

* :func:`for_model` (the hooks' injection, the MCP tools' answers): invisible characters removed,
  every line boundary one ``\\n``. The fence (:func:`agentctx.core.inject.fenced_text`) escapes
  line starts and tags after this, so nothing hidden can split a tag or start a line.
* :func:`reveal` (``agentctx show`` and the other CLI output, the dashboard: where people review
  records): each invisible character, and each line boundary but ``\\n`` (a ``\\r\\n`` pair reads as
  ``\\n``), replaced by a visible ``<U+XXXX>`` marker.

Hook path: standard library only, no ``re`` and no ``unicodedata`` (the code points are listed
below; ``tests/security/test_invisible.py`` checks the list against the running Python's Unicode
database). ASCII text takes one ``str.translate``; the set of the other characters is built on
the first text that is not ASCII.
"""

from __future__ import annotations

__all__ = ["LINE_BREAKS", "for_model", "is_invisible", "reveal"]

#: Every character ``str.splitlines()`` ends a line at (``\r\n`` counts as one boundary).
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

#: Format characters (category Cf): Unicode 14.0 (Python 3.11) plus U+13439-1343F (15.0).
_FORMAT = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x0600, 0x0605),  # Arabic number signs
    (0x061C, 0x061C),  # Arabic letter mark (bidi)
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x206F),  # bidi isolates, deprecated format characters
    (0xFEFF, 0xFEFF),  # zero-width no-break space (byte-order mark)
    (0xFFF9, 0xFFFB),  # interlinear annotation
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls (1343F: Unicode 15)
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0001, 0xE0001),  # language tag
    (0xE0020, 0xE007F),  # tag characters
)
#: Default-ignorable code points that are not Cf: rendered as nothing, read by a model.
_IGNORABLE = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180D),  # Mongolian free variation selectors
    (0x180F, 0x180F),
    (0x2065, 0x2065),  # unassigned, default-ignorable
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # unassigned, default-ignorable
    (0xE0000, 0xE0FFF),  # tags, variation selectors supplement, the unassigned rest
)
#: Control characters (Cc) other than tab and the line boundaries.
_CONTROL = ((0x00, 0x08), (0x0E, 0x1B), (0x1F, 0x1F), (0x7F, 0x84), (0x86, 0x9F))

_RANGES = _FORMAT + _IGNORABLE + _CONTROL
#: The line boundaries a reviewer is shown as markers (``\n`` stays a line; ``\r\n`` becomes one).
_ODD_BREAKS = LINE_BREAKS[1:]
#: U+E0000-E0FFF (tags, variation selectors supplement, unassigned): checked by number, not listed.
_PLANE_14 = (0xE0000, 0xE0FFF)


def _marker(char: str) -> str:
    return f"<U+{ord(char):04X}>"


_ASCII_SPECIAL = "".join(
    chr(cp) for low, high in _CONTROL if low < 0x80 for cp in range(low, min(high, 0x7F) + 1)
)
_ASCII_SPECIAL += "".join(c for c in _ODD_BREAKS if c < "\x80")
#: ASCII text (most of it) goes through one ``str.translate`` with these small tables.
_ASCII_MODEL = {ord(c): ("\n" if c in _ODD_BREAKS else None) for c in _ASCII_SPECIAL}
_ASCII_REVEAL = {ord(c): _marker(c) for c in _ASCII_SPECIAL}
_ASCII_STRIP = {ord(c): None for c in _ASCII_SPECIAL if c not in _ODD_BREAKS}
#: The ASCII bytes that need nothing (deleted from a UTF-8 copy to find the rest quickly).
_ORDINARY = bytes(b for b in range(0x80) if chr(b) not in _ASCII_SPECIAL)
#: The characters to replace below U+E0000, built on the first text that is not ASCII.
_special: frozenset[str] = frozenset()


def _present(text: str) -> list[str]:
    """The characters of ``text`` that :func:`for_model` and :func:`reveal` replace.

    A translate table would look each character up in a dict (slow for text that is not ASCII);
    instead the ordinary ASCII bytes are deleted from a UTF-8 copy (in C) and the few distinct
    characters left are checked.
    """
    global _special
    if not _special:
        low_ranges = [r for r in _RANGES if r[0] < _PLANE_14[0]]
        cps = [cp for low, high in low_ranges for cp in range(low, high + 1)]
        _special = frozenset(map(chr, cps)) | frozenset(_ODD_BREAKS)
    rest = text.encode("utf-8", "surrogatepass").translate(None, _ORDINARY)
    candidates = set(rest.decode("utf-8", "surrogatepass"))
    first, last = _PLANE_14
    return [c for c in candidates if c in _special or first <= ord(c) <= last]


def is_invisible(char: str) -> bool:
    """Whether ``char`` (one character) is one of the invisible characters (see above)."""
    cp = ord(char)
    return any(low <= cp <= high for low, high in _RANGES)


def for_model(text: str) -> str:
    """``text`` for a model: invisible characters removed, every line boundary one ``\\n``."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if text.isascii():
        # most text has none of these: finding that out on bytes (in C) is a fraction of what
        # the table's translate costs, a tenth of a millisecond for a digest (ADR-017)
        if not text.encode("ascii").translate(None, _ORDINARY):
            return text
        return text.translate(_ASCII_MODEL)
    for char in _present(text):
        text = text.replace(char, "\n" if char in _ODD_BREAKS else "")
    return text


def without_invisible(text: str) -> str:
    """``text`` with its invisible characters removed and its line boundaries as they are."""
    if text.isascii():
        return text.translate(_ASCII_STRIP)
    for char in _present(text):
        if char not in _ODD_BREAKS:
            text = text.replace(char, "")
    return text


def reveal(text: str) -> str:
    """``text`` for a person: each invisible character and each line boundary but ``\\n`` shown as
    ``<U+XXXX>`` (a ``\\r\\n`` pair is one ``\\n``)."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if text.isascii():
        return text.translate(_ASCII_REVEAL)
    for char in _present(text):
        text = text.replace(char, _marker(char))
    return text
