"""A prompt vector without a model: the static token-vector table, and the records nearest to it.

The table (``token_vectors``, schema 0010) holds, for each wordpiece of the embedding model's
vocabulary, the model's own output vector for that token alone, stored as int8 with a scale, and a
weight (smooth inverse frequency, SIF): :mod:`agentctx.embeddings.tokens` derives it once per
model, at consolidation or ``agentctx model fetch`` / ``reembed``, never here. ``token_table`` says
which model made it; it counts only while that is the model of the stored record vectors
(``embedding_model``, :mod:`agentctx.core.vectors`).

Here, with the standard library and the SQLite driver only (the hook path): the prompt is split as
BERT's basic tokenizer splits it (lower case, accents stripped, punctuation apart) and each word into
wordpieces, greedy longest match first, over the stored vocabulary (two indexed lookups, no vocabulary
loaded); the prompt vector is the weighted mean of its tokens' vectors; its nearest records are found
by sqlite-vec's exact KNN over ``records_vec`` and kept when current (not superseded) and of the
project or global. :func:`candidates` is the one entry; None means "no answer by this way" (no table,
the table of another model, no sqlite-vec, no words): the caller stays keyword-only.
"""

from __future__ import annotations

import unicodedata
from array import array

from agentctx.core.schema import GLOBAL_PROJECT_ID

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentctx.core.driver import sqlite

#: Words longer than this are one unknown token (BERT's own bound is 100 characters; this bounds
#: the candidate pieces looked up, which grow with the square of a word's length).
MAX_WORD = 32
#: At most this many words of a prompt are looked up (a pasted log is not a question).
MAX_WORDS = 96
#: The KNN reads this many neighbours per result asked for (the store holds other projects' and
#: superseded records too), at least :data:`MIN_SCAN`, and once more at :data:`WIDEN` times that
#: when too few are left.
SCAN_FACTOR = 8
MIN_SCAN = 64
WIDEN = 8
MAX_SCAN = 4096
_CHUNK = 500  # names per IN list
SPECIAL = frozenset({"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"})


def candidates(
    conn: sqlite.Connection, prompt_text: str, project_id: str, k: int
) -> list[tuple[str, float]] | None:
    """The ``k`` current records of the project (or global) nearest to the prompt's static vector:
    ``(record_id, cosine similarity)``, highest first. None when this way cannot answer: no token
    table, a table of another model than the stored vectors', no sqlite-vec, or no known word."""
    table = _table(conn)
    if table is None or k <= 0:
        return None
    lowercase, dims = table
    vector = prompt_vector(conn, prompt_text, lowercase=lowercase, dims=dims)
    if vector is None or not _has_vec(conn):
        return None
    return nearest(conn, vector, project_id, k)


def prompt_vector(
    conn: sqlite.Connection, text: str, *, lowercase: bool = True, dims: int | None = None
) -> list[float] | None:
    """The unit-length weighted mean of the text's token vectors; None when no token is known."""
    words = basic_tokens(text, lowercase=lowercase)[:MAX_WORDS]
    if not words:
        return None
    known = _lookup(conn, set(words))
    missing = {w for w in words if w not in known and len(w) <= MAX_WORD}
    if missing:
        known.update(_lookup(conn, _pieces(missing) - known.keys()))
    total: list[float] | None = None
    for word in words:
        for token in wordpiece(word, known):
            entry = known.get(token)
            if entry is None or token in SPECIAL:
                continue
            factor, values = entry
            if total is None:
                total = [0.0] * len(values)
            if len(values) != len(total):
                return None  # a table of mixed sizes is not one model's
            for i, value in enumerate(values):
                total[i] += factor * value
    if total is None or (dims is not None and len(total) != dims):
        return None
    norm = sum(x * x for x in total) ** 0.5
    if norm == 0.0:
        return None
    return [x / norm for x in total]


def nearest(
    conn: sqlite.Connection, vector: list[float], project_id: str, k: int
) -> list[tuple[str, float]]:
    """The ``k`` current records of ``project_id`` or global nearest to ``vector`` (sqlite-vec)."""
    blob = array("f", vector).tobytes()
    scan = min(max(k * SCAN_FACTOR, MIN_SCAN), MAX_SCAN)
    while True:
        rows = conn.execute(
            "SELECT record_id, distance FROM records_vec WHERE embedding MATCH ? AND k = ?",
            (blob, scan),
        ).fetchall()
        found = _current(conn, [(str(r[0]), 1.0 - float(r[1])) for r in rows], project_id)
        if len(found) >= k or len(rows) < scan or scan >= MAX_SCAN:
            return found[:k]
        scan = min(scan * WIDEN, MAX_SCAN)


def basic_tokens(text: str, *, lowercase: bool = True) -> list[str]:
    """BERT's basic tokenization: words and single punctuation marks (CJK characters apart), lower
    case with accents stripped when the model is uncased."""
    if lowercase:
        text = "".join(
            c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn"
        )
    out: list[str] = []
    word: list[str] = []
    for char in text:
        code = ord(char)
        if (
            code == 0
            or code == 0xFFFD
            or (unicodedata.category(char).startswith("C") and not char.isspace())
        ):
            continue
        if char.isspace():
            if word:
                out.append("".join(word))
                word = []
        elif _is_punctuation(char, code) or _is_cjk(code):
            if word:
                out.append("".join(word))
                word = []
            out.append(char)
        else:
            word.append(char)
    if word:
        out.append("".join(word))
    return out


def wordpiece(word: str, vocab: dict[str, tuple[float, array[int]]] | set[str]) -> list[str]:
    """A word's wordpieces, greedy longest match first (``##`` continues a word); ``[UNK]`` when a
    part of it matches nothing, or it is longer than :data:`MAX_WORD`."""
    if len(word) > MAX_WORD:
        return ["[UNK]"]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def _pieces(words: set[str]) -> set[str]:
    """Every piece the greedy match may try for these words: prefixes, and ``##`` substrings."""
    found: set[str] = set()
    for word in words:
        n = len(word)
        for start in range(n):
            for end in range(start + 1, n + 1):
                found.add(word[start:end] if start == 0 else "##" + word[start:end])
    return found


def _lookup(conn: sqlite.Connection, tokens: set[str]) -> dict[str, tuple[float, array[int]]]:
    """The stored ``(weight × scale, int8 values)`` of these tokens that the table has."""
    names = sorted(tokens)
    known: dict[str, tuple[float, array[int]]] = {}
    for start in range(0, len(names), _CHUNK):
        chunk = names[start : start + _CHUNK]
        rows = conn.execute(
            "SELECT token, weight * scale, vector FROM token_vectors "
            f"WHERE token IN ({', '.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        for token, factor, blob in rows:
            known[str(token)] = (float(factor), array("b", bytes(blob)))
    return known


def _table(conn: sqlite.Connection) -> tuple[bool, int] | None:
    """(lower case, dimension) of a token table made by the stored vectors' model; else None."""
    try:
        row = conn.execute(
            "SELECT t.lowercase, t.dims FROM token_table t JOIN embedding_model e "
            "ON e.id = 1 AND e.model = t.model AND e.dims = t.dims WHERE t.id = 1 AND t.tokens > 0"
        ).fetchone()
    except Exception:  # an older schema (no such table): no static way
        return None
    return None if row is None else (bool(row[0]), int(row[1]))


def _has_vec(conn: sqlite.Connection) -> bool:
    """sqlite-vec on this connection (loaded now when the hook opened it without) and records_vec."""
    from agentctx.core import db

    try:
        conn.execute("SELECT vec_version()").fetchone()
    except Exception:
        caps = db.Capabilities()
        db._load_vec(conn, caps)
        if not caps.vec_version:
            return False
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'records_vec'").fetchone()
    return row is not None


def _current(
    conn: sqlite.Connection, found: list[tuple[str, float]], project_id: str
) -> list[tuple[str, float]]:
    """The neighbours that are current records of the project or global, in the same order."""
    if not found:
        return []
    ids = [rid for rid, _ in found]
    keep: set[str] = set()
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        rows = conn.execute(
            "SELECT id FROM records WHERE superseded_at IS NULL AND project_id IN (?, ?) "
            f"AND id IN ({', '.join('?' * len(chunk))})",
            (project_id, GLOBAL_PROJECT_ID, *chunk),
        ).fetchall()
        keep.update(str(r[0]) for r in rows)
    return [(rid, sim) for rid, sim in found if rid in keep]


def _is_punctuation(char: str, code: int) -> bool:
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )
