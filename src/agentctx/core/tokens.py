"""Conservative token estimates for text injected into Claude Code, and truncation to a budget.

Design note (method, data, error tables: docs/token-estimate.md).

The hook path must not import a tokenizer, regexes or anything heavy, so the estimate is a linear
function of character-class counts, all taken with C-speed ``bytes`` methods on one UTF-8 encoding
of the text::

    tokens = ceil(  0.41 * lowercase ASCII letters  +  1.46 * uppercase ASCII letters
                  + 0.29 * digits  +  1.67 * runs of digits
                  + 0.97 * other ASCII symbols (punctuation, tab, CR, controls)
                  + 1.72 * newlines  +  1.15 * runs of 2+ spaces     (single spaces cost 0)
                  + 1.00 * 2-byte chars  +  1.50 * 3-byte chars  +  5.00 * 4-byte chars
                  + 2.40 )                                            (0 for the empty string)

Where the constants come from: a linear program that minimises the mean overcount subject to
(softly) never undercounting, fitted on ~4,200 text chunks from 23 real Claude Code transcripts
(prose, code, shell output, file listings, JSON) plus adversarial strings (hashes, base64, numbers,
emoji, space-aligned tables), against the per-text token counts of BOTH Claude tokenizer families:
v3 (Claude 3 .. Opus 4.6) and v4.7 (Opus 4.7 and later, which needs more tokens for the same text).
The counts come from ``ctok``, an offline reconstruction of Claude's tokenizers, which reproduces
the real API ``usage`` of the transcripts exactly (up to a constant wrapper overhead per message
shape); the weights were then rounded up. Non-ASCII is priced per UTF-8 length: Latin accents,
Cyrillic, Greek, Hebrew, Arabic cost <= 1 token per char; CJK a little more; emoji byte-fall back
to up to 4 tokens plus a word marker.

The measured error (estimate / true, per model family and kind of text, and the rare undercounts)
is in docs/token-estimate.md; it is not repeated here, so that it has one place to change.
"""

from __future__ import annotations

__all__ = ["estimate_tokens", "truncate_to_tokens"]

# Weights x 100 (integer arithmetic, exact ceil). See the module docstring.
_LOWER = 41
_UPPER = 146
_DIGIT = 29
_DIGIT_RUN = 167
_SYMBOL = 97
_NEWLINE = 172
_SPACE_RUN = 115
_CHAR2 = 100
_CHAR3 = 150
_CHAR4 = 500
_BASE = 240


def _class_table() -> bytes:
    """Byte -> class: a (a-z), A (A-Z), 0 (digit), space, newline, . (other ASCII), UTF-8 parts."""
    table = bytearray(b"." * 256)
    table[ord("a") : ord("z") + 1] = b"a" * 26
    table[ord("A") : ord("Z") + 1] = b"A" * 26
    table[ord("0") : ord("9") + 1] = b"0" * 10
    table[ord(" ")] = ord(" ")
    table[ord("\n")] = ord("\n")
    table[0x80:0xC0] = b"~" * 0x40  # continuation bytes
    table[0xC0:0xE0] = b"2" * 0x20  # lead byte of a 2-byte character
    table[0xE0:0xF0] = b"3" * 0x10  # lead byte of a 3-byte character
    table[0xF0:0x100] = b"4" * 0x10  # lead byte of a 4-byte character
    return bytes(table)


_CLASSES = _class_table()
# On class bytes: keep digits and spaces, fold every other class to "x" (for run counting).
_RUNS = bytes.maketrans(b"aA.\n~234", b"xxxxxxxx")


def estimate_tokens(text: str) -> int:
    """A conservative upper estimate of the tokens ``text`` costs a Claude model.

    Pure function of ``text``, monotone under taking prefixes (a prefix never costs more than the
    whole), 0 only for the empty string.
    """
    if not text:
        return 0
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASSES)
    runs = classes.translate(_RUNS)
    total = (
        _LOWER * classes.count(b"a")
        + _UPPER * classes.count(b"A")
        + _DIGIT * classes.count(b"0")
        + _SYMBOL * classes.count(b".")
        + _NEWLINE * classes.count(b"\n")
        + _DIGIT_RUN * (runs.count(b"x0") + runs.count(b" 0") + (runs[0] == 0x30))
        + _SPACE_RUN * (runs.count(b"x  ") + runs.count(b"0  ") + (runs[:2] == b"  "))
        + _BASE
    )
    if not text.isascii():
        total += (
            _CHAR2 * classes.count(b"2")
            + _CHAR3 * classes.count(b"3")
            + _CHAR4 * classes.count(b"4")
        )
    return -(-total // 100)


def _longest_fitting_prefix(text: str, max_tokens: int, max_chars: int) -> int:
    """Length of the longest prefix within both caps (binary search).

    Valid because both the estimate and the length only grow as a prefix grows.
    """
    lo, hi = 0, min(len(text), max_chars)  # the empty prefix always fits (caps >= 0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def truncate_to_tokens(text: str, max_tokens: int, max_chars: int) -> str:
    """The longest prefix of ``text`` within both caps, cut at a line boundary if possible.

    Returns ``text`` unchanged when it fits. Otherwise, among the prefixes that fit: the longest
    one ending at a line boundary (the newline itself and blank lines before it are dropped); if
    no line fits, the longest one ending at a word boundary (trailing whitespace dropped); if not
    even the first word fits, the longest prefix of characters (the only case that cuts inside a
    word). The result always satisfies ``estimate_tokens(result) <= max_tokens`` and
    ``len(result) <= max_chars``; it is ``""`` when nothing fits.

    Raises ValueError for a negative cap (no string satisfies it).
    """
    if max_tokens < 0 or max_chars < 0:
        raise ValueError(f"caps must be >= 0, got max_tokens={max_tokens} max_chars={max_chars}")
    if len(text) <= max_chars and estimate_tokens(text) <= max_tokens:
        return text
    fit = _longest_fitting_prefix(text, max_tokens, max_chars)
    if fit == 0:
        return ""
    # text[fit] exists (the whole text does not fit). Line boundary: a newline at index <= fit.
    newline = text.rfind("\n", 0, fit + 1)
    if newline > 0:
        line_cut = text[:newline].rstrip("\r\n")
        if line_cut:
            return line_cut
    # Word boundary: the last whitespace at index <= fit, with a word before it.
    index = fit
    while index > 0 and not text[index].isspace():
        index -= 1
    word_cut = text[:index].rstrip()
    if word_cut:
        return word_cut
    # The first word alone is longer than the caps allow.
    return text[:fit]
