"""Keyword search and relevance: the query terms, the SQL, the ranking, and the plans that run them.

One copy for every caller: the UserPromptSubmit hook runs :func:`keyword_search` with
:func:`agentctx.core.plan.run` on every prompt, :meth:`agentctx.store.Store.search` runs the same plan
with ``run_async``, and hybrid search judges relevance with :func:`judge` as the hook does. Standard
library only (no ``re``, ``json`` or ``typing`` at run time: the hook imports this per prompt).

Query building: the text is lower-cased and cut into word tokens (runs of letters, digits and ``_``,
so ``useAuthStore`` stays one token and ``foo.bar()`` gives ``foo`` and ``bar``); stop words and
one-letter tokens are dropped; at most :data:`MAX_TERMS` distinct tokens are kept, each double-quoted
(FTS5 syntax in the user's text is inert) and joined with ``OR`` so BM25 ranks by how many and how
rare the terms are. No token left → no query.

Bounded cost: BM25 scores every document that matches, so a term found in a large part of a big
store makes every query slow (benchmarks/results/hooks.md). The document frequency of each term is
counted first (one cheap query, :func:`term_counts_sql`), and :func:`select_terms` keeps the rarest
terms while the documents they match stay within :data:`MATCH_BUDGET`; the rarest term is always
kept. Terms too common to pass only matter in very large stores, and there they carry almost no
BM25 weight anyway.

Ranking: ``final = bm25_relevance × type_weight × confidence_weight × recency × pin_boost`` where
``bm25_relevance = -bm25(title ×4, body ×1, keywords ×2)`` and ``recency = max(RECENCY_FLOOR,
0.5 ** (age_days / half_life[type]))`` with age from ``valid_from``; decisions, conventions and profile
records never decay. See docs/spec.md, "Search".

Relevance floor: BM25 ranks, it does not say whether anything answers the prompt. :func:`relevance`
is the share of the prompt's weight that a record's matched terms carry. A term weighs its store
IDF, ``ln(1 + (N - d + 0.5) / (d + 0.5))`` with ``d`` its document count, at least 1 (a word the
store has never seen weighs as much as its rarest: it is what the prompt asks about and nothing
answers), times its :func:`specificity`, how rare it is in code and its prose (a shipped table,
:mod:`agentctx.core.background`: in a small store "run" or "edge" look rare, they are not). The
denominator is the :data:`RELEVANCE_TERMS` heaviest terms only, so a long, chatty prompt does not
silence a record it clearly touches. A rare identifier the record holds (a test name, an error
code: :func:`is_identifier`) carries at least :data:`IDENTIFIER_SHARE` of the weight. Terms too
common to be searched (:func:`select_terms` dropped them) count on neither side.

With a floor (``retrieval.min_relevance``; the prompt hook and ``ctx_search``), a candidate must
reach it (:data:`CUED_FLOOR_RAISE` more when it has retrieval cues: :func:`record_floor`) and
:data:`RELATIVE_FLOOR` of the best candidate's relevance; the kept ones rank by
relevance first (bands of :data:`RELEVANCE_BAND`), the score above orders a band. The prompt hook
also finds nothing for a prompt with too little to search on (:func:`content` below
:data:`MIN_CONTENT`). The calibration: benchmarks/results/precision_eval.md (tuned on its tuning
part only). The LIKE fallback (FTS5 missing or failing) and searches of the past (``as_of``,
superseded versions) apply no floor: the first has no term counts to weigh terms with, the second
looks for history on purpose.
"""

from __future__ import annotations

from agentctx.core import plan

# ``math``, ``agentctx.core.clock`` and ``agentctx.core.schema`` load when a search runs, not with
# this module: the prompt hook imports it to read the prompt's terms before it sends the prompt to
# the embedding server, and the request goes out that much sooner (ADR-017, speed pass 4).

TYPE_CHECKING = False  # typing costs milliseconds on the hook path; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from agentctx.core.plan import Plan

MAX_TERMS = 24
BM25_WEIGHTS = (4.0, 1.0, 2.0)  # title, body, keywords
TYPE_WEIGHT = {
    "decision": 1.3,
    "convention": 1.2,
    "bugfix": 1.0,
    "discovery": 1.0,
    "preference": 1.0,
    "profile": 0.9,
    "handover": 0.8,
}
CONFIDENCE_WEIGHT = {"explicit": 1.0, "reinforced": 1.0, "inferred": 0.7}
HALF_LIFE_DAYS: dict[str, float | None] = {
    "decision": None,
    "convention": None,
    "profile": None,
    "preference": 365.0,
    "discovery": 90.0,
    "bugfix": 60.0,
    "handover": 14.0,
}
RECENCY_FLOOR = 0.25
PIN_BOOST = 1.5

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "down",
        "during",
        "each",
        "else",
        "few",
        "for",
        "from",
        "further",
        "get",
        "got",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "lets",
        "like",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "please",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "ok",
        "okay",
        # contractions typed without the apostrophe, and interjections: no search content
        *("whats", "hows", "wheres", "whos", "thats", "theres", "heres", "dont", "doesnt"),
        *("didnt", "cant", "isnt", "arent", "wasnt", "wont", "im", "ive", "youre", "hmm"),
        *("yeah", "yep", "nope", "nice", "cool", "great", "awesome", "thx", "pls", "plz"),
        "yes",
        "thanks",
        "thank",
        "hi",
        "hello",
        "hey",
        "sure",
        "want",
        "need",
        # not "make": a toolchain's command ("make test") is a fact worth finding
        "use",
        "using",
        "just",
        "really",
    ]
)

MATCH_BUDGET = 4000
#: How many of the index's best matches a search ranks before its filters (at least; see
#: :func:`search_sql`): most queries find their candidates among them without reading other rows.
BM25_POOL = 200
#: Stores larger than this count common terms only up to the budget (:func:`term_counts`).
CAPPED_FROM = 8 * MATCH_BUDGET
MAX_TEXT = 20_000  # characters of a prompt looked at for terms (a pasted log can be huge)
_columns: list[str] = []


def _columns_sql() -> str:
    """The record columns of a search's rows, as SQL (made once)."""
    if not _columns:
        from agentctx.core.schema import RECORD_COLUMNS

        _columns.append(", ".join(f"r.{name}" for name in RECORD_COLUMNS))
    return _columns[0]


def query_terms(text: str, max_terms: int = MAX_TERMS) -> list[str]:
    """The distinct searchable tokens of ``text``, in order of first appearance."""
    seen: dict[str, None] = {}
    words = "".join(c if c.isalnum() or c == "_" else " " for c in text[:MAX_TEXT].lower())
    for token in words.split():
        if len(token) < 2 or token in STOPWORDS or token in seen:
            continue
        seen[token] = None
        if len(seen) >= max_terms:
            break
    return list(seen)


def fts_query(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression that ORs the quoted terms; None when there is nothing to search."""
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def term_counts_sql(terms: Sequence[str], cap: int | None = None) -> tuple[str, list[str]]:
    """One query returning, in one row, how many records each term matches (at most ``cap``).

    A capped count stops reading the term's matches at ``cap``: a common term costs no more to
    count than a rare one.
    """
    if cap is None:
        each = "(SELECT count(*) FROM records_fts WHERE records_fts MATCH ?)"
    else:
        each = f"(SELECT count(*) FROM (SELECT 1 FROM records_fts WHERE records_fts MATCH ? LIMIT {int(cap)}))"
    return "SELECT " + ", ".join([each] * len(terms)), [fts_query([t]) or "" for t in terms]


def select_terms(terms: Sequence[str], counts: Sequence[int]) -> list[str]:
    """The rarest terms whose matches stay within :data:`MATCH_BUDGET` (at least one)."""
    found = sorted((n, i) for i, n in enumerate(counts) if n > 0)
    chosen: list[int] = []
    total = 0
    for n, index in found:
        if chosen and total + n > MATCH_BUDGET:
            break
        chosen.append(index)
        total += n
    return [terms[i] for i in sorted(chosen)]


def scope_projects(project_id: str | None, scope: str) -> tuple[str, ...]:
    """The ``project_id`` values a search covers: ``all`` = project + global."""
    from agentctx.core.schema import GLOBAL_PROJECT_ID

    if scope == "global" or not project_id:
        return (GLOBAL_PROJECT_ID,)
    if scope == "project":
        return (project_id,)
    return (project_id, GLOBAL_PROJECT_ID)


def filters(
    project_ids: Sequence[str],
    types: Sequence[str],
    as_of: str | None,
    include_superseded: bool,
    exclude_ids: Iterable[str],
) -> tuple[str, list[Any]]:
    """The WHERE clause (over ``records AS r``) and parameters of a search's filters.

    Shared by keyword search, the vector half of hybrid search and :meth:`Store.list_records`, so
    none lets through a record the others would filter out. No ``project_ids``: every project; no
    filter at all: an empty clause.
    """
    clauses = [f"r.project_id IN ({', '.join('?' * len(project_ids))})"] if project_ids else []
    params: list[Any] = list(project_ids)
    if types:
        clauses.append(f"r.type IN ({', '.join('?' * len(types))})")
        params.extend(types)
    if as_of is not None:
        clauses.append("r.valid_from <= ? AND (r.superseded_at IS NULL OR r.superseded_at > ?)")
        params.extend((as_of, as_of))
    elif not include_superseded:
        clauses.append("r.superseded_at IS NULL")
    excluded = list(exclude_ids)
    if excluded:
        clauses.append(f"r.id NOT IN ({', '.join('?' * len(excluded))})")
        params.extend(excluded)
    return " AND ".join(clauses), params


def search_sql(
    terms: Sequence[str],
    *,
    fts: bool,
    project_ids: Sequence[str],
    types: Sequence[str] = (),
    as_of: str | None = None,
    include_superseded: bool = False,
    exclude_ids: Iterable[str] = (),
    candidates: int = 50,
    pool: int | None = None,
) -> tuple[str, list[Any]]:
    """SQL and parameters returning record columns plus ``rank`` (lower is better), best first.

    ``fts=True`` uses the FTS5 index and BM25; ``fts=False`` is the degraded LIKE-style fallback
    that counts term hits with ``instr`` (title ×4, keywords ×2, body ×1). With a ``pool`` the FTS
    query ranks the index alone and filters only its ``pool`` best matches (the same rows as without
    it whenever at least ``candidates`` of them pass the filters: :func:`keyword_search` checks).
    """
    where, params = filters(project_ids, types, as_of, include_superseded, exclude_ids)
    if fts and pool is not None:
        # Ranking the index alone reads no record row: a row is read only for the pool's matches
        # (the filters' columns live in the records table, one page read per row).
        w_title, w_body, w_keywords = BM25_WEIGHTS
        sql = (
            f"SELECT {_columns_sql()}, top.rank AS rank FROM ("
            f"SELECT rowid AS seq, bm25(records_fts, {w_title}, {w_body}, {w_keywords}) AS rank "
            "FROM records_fts WHERE records_fts MATCH ? ORDER BY rank, rowid LIMIT ?"
            f") AS top JOIN records AS r ON r.seq = top.seq WHERE {where} "
            "ORDER BY top.rank, top.seq LIMIT ?"
        )
        return sql, [fts_query(terms), pool, *params, candidates]
    if fts:
        match = fts_query(terms)
        w_title, w_body, w_keywords = BM25_WEIGHTS
        # The best candidates are chosen on (rowid, rank) alone, then their columns are read: the
        # sorter holds two numbers per match instead of every column of every match.
        sql = (
            f"SELECT {_columns_sql()}, best.rank AS rank FROM ("
            f"SELECT r.seq AS seq, bm25(records_fts, {w_title}, {w_body}, {w_keywords}) AS rank "
            "FROM records_fts JOIN records AS r ON r.seq = records_fts.rowid "
            f"WHERE records_fts MATCH ? AND {where} ORDER BY rank, r.seq LIMIT ?"
            ") AS best JOIN records AS r ON r.seq = best.seq ORDER BY best.rank, best.seq"
        )
        return sql, [match, *params, candidates]
    hits = " + ".join(
        "(instr(lower(r.title), ?) > 0) * 4 + (instr(lower(r.keywords), ?) > 0) * 2"
        " + (instr(lower(r.body), ?) > 0)"
        for _ in terms
    )
    hit_params = [t for term in terms for t in (term, term, term)]
    sql = (
        f"SELECT * FROM (SELECT {_columns_sql()}, -({hits}) AS rank FROM records AS r "
        f"WHERE {where}) WHERE rank < 0 ORDER BY rank LIMIT ?"
    )
    return sql, [*hit_params, *params, candidates]


def rank_score(row: Any, reference: float | None = None) -> float:
    """The reranked score of a search row (needs ``rank``, ``type``, ``confidence``, ...)."""
    relevance = max(-float(row["rank"]), 1e-6)
    half_life = HALF_LIFE_DAYS.get(row["type"])
    recency = 1.0
    if half_life:
        from agentctx.core.clock import age_days

        recency = max(RECENCY_FLOOR, 0.5 ** (age_days(row["valid_from"], reference) / half_life))
    score = relevance * TYPE_WEIGHT.get(row["type"], 1.0) * recency
    score *= CONFIDENCE_WEIGHT.get(row["confidence"], 1.0)
    if row["pinned"]:
        score *= PIN_BOOST
    return score


def rerank(
    rows: Iterable[Any], limit: int, reference: float | None = None
) -> list[tuple[Any, float]]:
    """The ``limit`` best rows by :func:`rank_score`, with their scores, best first."""
    scored = [(row, rank_score(row, reference)) for row in rows]
    scored.sort(key=lambda pair: (-pair[1], pair[0]["id"]))
    return scored[:limit]


RRF_K = 60


def rrf(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ranked id lists: ``(id, fused score)``, best first, ties by id.

    Each list contributes ``1 / (k + rank)`` (rank from 1) to every id it holds; an id missing from
    a list gets nothing from it. ``k = 60`` is the constant of Cormack et al. (2009).
    """
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))


#: Above a floor, a candidate must also reach this share of the best candidate's relevance.
RELATIVE_FLOOR = 0.5
#: Above a floor, candidates rank by relevance in bands this wide, by score within a band.
RELEVANCE_BAND = 0.1
#: How many of a query's heaviest terms make the denominator of :func:`relevance`.
RELEVANCE_TERMS = 4
#: The default relevance floor (``retrieval.min_relevance``); see benchmarks/results/precision_eval.md.
MIN_RELEVANCE = 0.3
#: The ``N`` of the term weights: the records ever indexed, less those deleted last (the largest
#: ``seq``, one b-tree step; ``count(*)`` reads the whole table, 1 ms at 100K records, and a few
#: deleted or archived records change no IDF that matters).
RECORD_TOTAL_SQL = "SELECT coalesce(max(seq), 0) FROM records"
#: A term at least this rare in code and its prose (background IDF, :mod:`agentctx.core.background`)
#: weighs fully; a commoner one weighs ``(IDF / SPECIFIC_IDF)²`` of its store weight.
SPECIFIC_IDF = 6.0
#: A prompt whose terms' :func:`specificity` sums below this has too little to search on.
MIN_CONTENT = 1.0
#: An identifier (``_`` or letters with digits, 4+ characters) found in at most this many records
#: carries at least :data:`IDENTIFIER_SHARE` of the query's weight: a pasted symbol, test name or
#: error code that a record holds is the strongest evidence a prompt gives.
IDENTIFIER_MAX_RECORDS = 3
IDENTIFIER_SHARE = 0.9
#: A record with retrieval cues must clear the floor by this much more: its cues are more text for
#: a prompt's words to land on, in earnest and by chance (docs/retrieval.md, "Cues and the floor").
CUED_FLOOR_RAISE = 0.1


def record_floor(level: float, row: Any) -> float:
    """The relevance floor ``level`` as it applies to the record ``row`` (raised when it has cues)."""
    return level + CUED_FLOOR_RAISE if level > 0 and row["cues"] else level


def specificity(term: str) -> float:
    """How specific ``term`` is in code and its prose, from 0 (as common as "the") to 1.

    A small store makes every word look rare ("run" in 24 of 200 records); the background table
    says "run" is common wherever code is discussed. A word missing from it is fully specific.
    Remembered per process: a prompt asks for each of its terms several times (the request for
    meaning, the floor, the tiers), and a word missing from the table costs a scan of all of it.
    """
    known = _specificity.get(term)
    if known is not None:
        return known
    from agentctx.core.background import TABLE

    at = TABLE.find("\n" + term + " ")
    if at < 0:
        value = 1.0
    else:
        idf = float(TABLE[at + len(term) + 2 : TABLE.find("\n", at + 1)])
        value = min(1.0, idf / SPECIFIC_IDF) ** 2  # squared: "still" or "stack" are not the topic
    if len(_specificity) < _SPECIFICITY_MAX:
        _specificity[term] = value
    return value


#: :func:`specificity`'s memory (bounded: a long-lived process searches many words).
_specificity: dict[str, float] = {}
_SPECIFICITY_MAX = 50_000


def content(terms: Iterable[str]) -> float:
    """How much a query has to search on: the sum of its terms' :func:`specificity`."""
    return sum(specificity(term) for term in terms)


def is_identifier(term: str) -> bool:
    """A code identifier or code-like token: ``_`` in it, or letters mixed with digits."""
    if len(term) < 4:
        return False
    return "_" in term or (any(c.isdigit() for c in term) and any(c.isalpha() for c in term))


def term_weights(counts: Sequence[int], total: int) -> list[float]:
    """Each term's IDF weight from its document count; an absent term weighs as a count of 1."""
    import math

    weights = []
    for count in counts:
        found = max(int(count), 1)
        weights.append(math.log(1.0 + (max(total, found) - found + 0.5) / (found + 0.5)))
    return weights


def relevance_weights(
    terms: Sequence[str], counts: Sequence[int], chosen: Sequence[str], total: int
) -> tuple[dict[str, float], float]:
    """The weight of each searched term and the denominator of :func:`relevance` for a query.

    Searched terms and absent ones (count 0) make the denominator, the heaviest
    :data:`RELEVANCE_TERMS` of them; terms :func:`select_terms` left out count on neither side.
    """
    searched = set(chosen)
    weights = [w * specificity(t) for t, w in zip(terms, term_weights(counts, total), strict=True)]
    kept = [w for term, count, w in zip(terms, counts, weights, strict=True)
            if term in searched or count == 0]  # fmt: skip
    kept.sort(reverse=True)
    denominator = sum(kept[:RELEVANCE_TERMS])
    by_term = {t: w for t, w in zip(terms, weights, strict=True) if t in searched}
    for term, count in zip(terms, counts, strict=True):
        if term in searched and count <= IDENTIFIER_MAX_RECORDS and is_identifier(term):
            by_term[term] = max(by_term[term], IDENTIFIER_SHARE * denominator)
    return by_term, denominator


def relevance(matched: Iterable[str], weights: Mapping[str, float], denominator: float) -> float:
    """The share of the query's weight carried by the ``matched`` terms, from 0 to 1."""
    if denominator <= 0:
        return 1.0
    return min(1.0, sum(weights.get(term, 0.0) for term in set(matched)) / denominator)


def term_hits_sql(terms: Sequence[str], ids: Sequence[str]) -> tuple[str, list[str]]:
    """SQL returning ``(term index, record id)`` for each of ``terms`` that each record matches.

    One FTS5 lookup per record and term (the record's rowid and the term's MATCH together), which
    costs far less than walking each term's matches when a term is common.
    """
    marks = ", ".join("?" * len(ids))
    arm = (
        "SELECT {index}, r.id FROM records AS r CROSS JOIN records_fts "
        f"ON records_fts.rowid = r.seq WHERE r.id IN ({marks}) AND records_fts MATCH ?"
    )
    sql = " UNION ALL ".join(arm.format(index=i) for i in range(len(terms)))
    params = [p for term in terms for p in (*ids, fts_query([term]) or "")]
    return sql, params


def matched_terms(terms: Sequence[str], hits: Iterable[Any]) -> dict[str, set[str]]:
    """Record id -> the terms it matches, from the rows of :func:`term_hits_sql`."""
    found: dict[str, set[str]] = {}
    for index, record_id in hits:
        found.setdefault(str(record_id), set()).add(terms[int(index)])
    return found


# -- the plans (run by agentctx.core.plan.run in the hooks, run_async in the Store) ---------------

#: Reading a term's matches costs about this many rows per FTS5 lookup of one record and term
#: (0.5 µs a row against 12 µs a lookup, benchmarks/results/hooks.md's stores): :func:`judge`
#: reads the doclists only when that is cheaper.
DOCLIST_ROWS_PER_LOOKUP = 25
#: What the UserPromptSubmit hook ranks: the best of this many BM25 candidates ...
PROMPT_CANDIDATES = 8
#: ... cut to this many before the relevance floor and the injection budget.
PROMPT_LIMIT = 12
FTS_MISSING = "FTS5 is not available in this SQLite; used LIKE search"


class Found:
    """What :func:`keyword_search` found (plain attributes: no dataclass import on the hook path).

    ``hits``: ``(row, score)`` pairs, best first, ``row`` a ``sqlean.Row`` of the record columns
    plus ``rank``; ``relevance``: by record id, when a floor judged the candidates (a value may be
    the bound that settled it, see :func:`judge`); ``degraded``: why the LIKE fallback ran, if it
    did; ``considered``: the candidates ranked before the floor dropped any; ``thin``: the query
    had too little to search on (:func:`for_prompt`).
    """

    __slots__ = ("considered", "degraded", "hits", "relevance", "thin")

    def __init__(
        self,
        hits: list[tuple[Any, float]] | None = None,
        *,
        relevance: dict[str, float] | None = None,
        degraded: str | None = None,
        considered: int | None = None,
        thin: bool = False,
    ) -> None:
        self.hits = hits or []
        self.relevance = relevance
        self.degraded = degraded
        self.considered = len(self.hits) if considered is None else considered
        self.thin = thin

    def __repr__(self) -> str:
        return f"Found({len(self.hits)} hits, degraded={self.degraded!r})"


def keyword_search(
    terms: Sequence[str],
    *,
    project_ids: Sequence[str],
    types: Sequence[str] = (),
    as_of: str | None = None,
    include_superseded: bool = False,
    exclude_ids: Iterable[str] = (),
    candidates: int = 50,
    limit: int = 10,
    floor: float | Callable[[], float] = 0.0,
    fts: bool = True,
    demote: bool = False,
) -> Plan[Found]:
    """The keyword search: term counts, the rarest terms, BM25, the rerank, the relevance floor.

    ``floor`` (or a function returning it, called only when there are candidates to judge) drops
    the candidates whose :func:`relevance` is below it; 0 keeps them all. When FTS5 fails (an
    ``sqlean.OperationalError``) or ``fts`` is False the LIKE search runs instead and ``degraded``
    says why. ``as_of`` or ``include_superseded`` adds the archive's matches (LIKE: the cold
    table has no FTS index, so their scores are on the LIKE scale). ``demote``: apply each
    record's demotion prior to its relevance (:func:`agentctx.core.learned.demote`).
    """
    if not terms or limit <= 0:
        return Found()
    from agentctx.core.driver import sqlite  # loaded already: the plan runs on its connection

    args: dict[str, Any] = {
        "project_ids": project_ids,
        "types": tuple(types),
        "as_of": as_of,
        "include_superseded": include_superseded,
        "exclude_ids": tuple(exclude_ids),
        "candidates": candidates,
    }
    past = as_of is not None or include_superseded
    degraded: str | None = FTS_MISSING
    found: list[Any] = []
    if fts:
        try:
            total = yield from record_total()
            counts = yield from term_counts(terms, total)
            chosen = select_terms(terms, counts)
            if not chosen:
                return Found()
            pool = max(BM25_POOL, 5 * candidates)
            sql, params = search_sql(chosen, fts=True, pool=pool, **args)
            found = yield plan.rows(sql, params)
            matched = sum(n for term, n in zip(terms, counts, strict=True) if term in chosen)
            if len(found) < candidates and matched > pool:  # the filters left too few: all
                sql, params = search_sql(chosen, fts=True, **args)
                found = yield plan.rows(sql, params)
            degraded = None
            if not past:  # the past is searched on purpose: no floor (nor an FTS index)
                ranked = rerank(found, candidates)
                if not ranked:
                    return Found()
                level = floor() if callable(floor) else floor
                if level <= 0:
                    return Found(ranked[:limit])
                weights, denominator = relevance_weights(terms, counts, chosen, total)
                ids = [row["id"] for row, _score in ranked]
                highest = relevance(chosen, weights, denominator)
                if highest < level:  # not even a record matching every searched term passes
                    return Found(relevance=dict.fromkeys(ids, highest), considered=len(ranked))
                scores = yield from judge(chosen, weights, denominator, ids, matches=matched)
                if demote:  # issue 25: a record judged ignored again and again ranks lower
                    from agentctx.core import learned

                    scores = yield from learned.demote(scores)
                best = max(scores.values(), default=0.0)
                kept = [
                    (row, score)
                    for row, score in ranked
                    if scores[row["id"]] >= max(record_floor(level, row), RELATIVE_FLOOR * best)
                ]
                # Relevance first, in bands of RELEVANCE_BAND; the score (type, recency,
                # confidence, pin) orders a band: it breaks ties, it cannot bury an exact match.
                kept.sort(key=lambda pair: -int(scores[pair[0]["id"]] / RELEVANCE_BAND))
                return Found(kept[:limit], relevance=scores, considered=len(ranked))
        except sqlite.OperationalError as exc:
            degraded = f"FTS5 query failed ({exc}); used LIKE search"
    if degraded is not None:
        sql, params = search_sql(terms, fts=False, **args)
        found = yield plan.rows(sql, params)
    if past:
        found = [*found, *(yield from archive_rows(terms, args))]
    return Found(rerank(found, limit), degraded=degraded)


def for_prompt(
    terms: Sequence[str],
    project_id: str | None,
    *,
    exclude_ids: Iterable[str] = (),
    floor: float | Callable[[], float] = 0.0,
) -> Plan[Found]:
    """The UserPromptSubmit search: the project's and global current records, the best
    :data:`PROMPT_LIMIT` of :data:`PROMPT_CANDIDATES`, above ``floor``.

    With a floor, a prompt whose terms are too common to tell anything (:func:`content` below
    :data:`MIN_CONTENT`: "run it again", "do the same for the other handler") finds nothing.
    """
    exclude_ids = sorted(exclude_ids)
    # issue 25: a prompt that asks for the test, lint or build command or the stack gets that
    # profile fact first, however common its words (agentctx.core.essentials)
    from agentctx.core import essentials

    asked = essentials.asked_keys(terms)
    facts = (yield from essentials.answers(asked, project_id, exclude_ids)) if asked else []
    if content(terms) < MIN_CONTENT:
        floor = floor() if callable(floor) else floor
        if floor > 0:
            return Found([(row, 1.0) for row in facts]) if facts else Found(thin=True)
    found = yield from keyword_search(
        terms,
        project_ids=scope_projects(project_id, "all"),
        exclude_ids=exclude_ids,
        candidates=PROMPT_CANDIDATES,
        limit=PROMPT_LIMIT,
        floor=floor,
        demote=True,
    )
    if facts:
        ids = {row["id"] for row in facts}
        found.hits = [(row, 1.0) for row in facts] + [
            h for h in found.hits if h[0]["id"] not in ids
        ]
    return found


def shown_before(session_id: str) -> Plan[set[str]]:
    """Records shown in earlier runs of a resumed session (folded at its SessionEnd)."""
    found = yield plan.rows(
        "SELECT record_id FROM session_injections WHERE session_id = ?", (session_id,)
    )
    return {str(row[0]) for row in found}


def standing_rules(project_id: str) -> Plan[list[Any]]:
    """The project's current decisions and conventions a subagent is given, most weighty first."""
    found: list[Any] = yield plan.rows(
        "SELECT id, type, title, body, confidence, source, key FROM records "
        "WHERE project_id = ? AND type IN ('decision', 'convention') AND superseded_at IS NULL "
        "ORDER BY pinned DESC, confidence = 'inferred', score DESC, valid_from DESC LIMIT 40",
        (project_id,),
    )
    return found


def archive_rows(terms: Sequence[str], args: Mapping[str, Any]) -> Plan[list[Any]]:
    """Search rows from the archive: the LIKE query over ``records_archive`` (no FTS index there).

    Their relevance is the weighted count of term hits, the LIKE search's scale, not BM25's.
    """
    sql, params = search_sql(terms, fts=False, **args)
    hot = "FROM records AS r "
    if sql.count(hot) != 1:  # search_sql changed shape: fail loudly, not silently
        from agentctx.core.errors import DatabaseError

        raise DatabaseError("cannot search the archive: unexpected search SQL")
    found: list[Any] = yield plan.rows(sql.replace(hot, "FROM records_archive AS r "), params)
    return found


def term_counts(terms: Sequence[str], total: int) -> Plan[list[int]]:
    """How many records each term matches (FTS5), exactly up to :data:`MATCH_BUDGET`.

    In a store of more than :data:`CAPPED_FROM` records (``total``), a term found more often is
    counted as ``MATCH_BUDGET + 1``: :func:`select_terms` searches it only when it is the rarest
    of all, and then it is counted exactly; terms it does not search count on neither side of
    :func:`relevance`. So capping changes no result; it bounds the cost of common terms in a large
    store (in a small one a plain count is cheaper: it reads the matches without a subquery).
    """
    if total <= CAPPED_FROM:
        sql, params = term_counts_sql(terms)
        return [int(n) for n in (yield plan.one(sql, params))]
    cap = MATCH_BUDGET + 1
    sql, params = term_counts_sql(terms, cap)
    counts = [int(n) for n in (yield plan.one(sql, params))]
    if any(0 < n < cap for n in counts) or cap not in counts:
        return counts
    common = [i for i, n in enumerate(counts) if n == cap]  # every term found is that common
    sql, params = term_counts_sql([terms[i] for i in common])
    exact = yield plan.one(sql, params)
    for i, n in zip(common, exact, strict=True):
        counts[i] = int(n)
    return counts


def record_total() -> Plan[int]:
    """About how many records the FTS index covers (the ``N`` of the term weights)."""
    row = yield plan.one(RECORD_TOTAL_SQL)
    return int(row[0])


def weigh(terms: Sequence[str]) -> Plan[tuple[list[str], dict[str, float], float, int]]:
    """A query's searched terms (:func:`select_terms`), their weights, the denominator, and how
    many records the searched terms match in all (for :func:`judge`)."""
    total = yield from record_total()
    counts = yield from term_counts(terms, total)
    chosen = select_terms(terms, counts)
    weights, denominator = relevance_weights(terms, counts, chosen, total)
    matches = sum(n for term, n in zip(terms, counts, strict=True) if term in chosen)
    return chosen, weights, denominator, matches


def judge(
    chosen: Sequence[str],
    weights: Mapping[str, float],
    denominator: float,
    ids: Sequence[str],
    *,
    floor: float | None = None,
    matches: int | None = None,
) -> Plan[dict[str, float]]:
    """The relevance of each record in ``ids`` to a query weighed by :func:`weigh`.

    ``matches``: how many records the searched terms match in all (their counts' sum), when known;
    when that is fewer than :data:`DOCLIST_ROWS_PER_LOOKUP` per record-and-term lookup (and within
    :data:`MATCH_BUDGET`), the terms' matches are read once instead of looked up per record.

    With a ``floor`` the ids must be the query's search hits (each matches at least one searched
    term, at most all of them): when those bounds settle every id on one side of the floor, the
    per-record lookups are skipped and each value is that bound (right side of the floor, not
    exact). One searched term settles it exactly. Without a ``floor`` every value is exact.
    """
    if not ids or not chosen:
        return dict.fromkeys(ids, 0.0)
    if floor is not None:
        if len(chosen) == 1:  # every hit matched the one searched term
            return dict.fromkeys(ids, relevance(chosen, weights, denominator))
        lowest = relevance([min(chosen, key=weights.__getitem__)], weights, denominator)
        if lowest >= floor:  # a lower bound that passes already
            return dict.fromkeys(ids, lowest)
        highest = relevance(chosen, weights, denominator)
        if highest < floor:  # an upper bound that still fails
            return dict.fromkeys(ids, highest)
    lookups = len(ids) * len(chosen)
    if matches is not None and matches <= min(MATCH_BUDGET, DOCLIST_ROWS_PER_LOOKUP * lookups):
        # Few matches in all: read each term's matches (its doclist, cheap) and keep the ids';
        # a lookup per record and term costs an FTS query each.
        marks = ", ".join("?" * len(ids))
        pairs = yield plan.rows(f"SELECT seq, id FROM records WHERE id IN ({marks})", list(ids))
        by_seq = {int(seq): str(record_id) for seq, record_id in pairs}
        arms = " UNION ALL ".join(
            f"SELECT {index}, rowid FROM records_fts WHERE records_fts MATCH ?"
            for index in range(len(chosen))
        )
        hits = yield plan.rows(arms, [fts_query([term]) or "" for term in chosen])
        found = matched_terms(
            chosen, ((index, by_seq[seq]) for index, seq in hits if seq in by_seq)
        )
    else:
        sql, params = term_hits_sql(chosen, ids)
        found = matched_terms(chosen, (yield plan.rows(sql, params)))
    return {i: relevance(found.get(i, ()), weights, denominator) for i in ids}


def relevances(terms: Sequence[str], ids: Sequence[str]) -> Plan[dict[str, float]]:
    """Each record's exact relevance to the query of ``terms`` (0 when it matches none)."""
    if not terms:
        return dict.fromkeys(ids, 0.0)
    chosen, weights, denominator, matches = yield from weigh(terms)
    return (yield from judge(chosen, weights, denominator, ids, matches=matches))
