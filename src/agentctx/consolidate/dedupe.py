"""Near-duplicates (consolidation step 2, seed ADR-012): one current record per fact, history kept.

**Candidates.** Within each type, the project's current records that have a stored vector
(``pending_embedding = 0``) are compared by cosine similarity; pairs above :data:`SIMILARITY_MIN`
(0.92) are candidates. The bounds here (0.92, and 0.97 below) are measured for all-MiniLM-L6-v2;
vectors of another model are compared at that model's calibrated bounds when it has a stored
calibration (:func:`agentctx.embeddings.thresholds.merge_bounds`), else at these. ``handover`` and
``profile`` are left out: the store already keeps one current
handover per project and one current profile record per key (partial unique indexes), and two
profile records with different keys are different facts however alike they read, so a merge there
could only break the keyed rule. The ``global`` namespace (developer preferences) is a project id
like any other: called with ``project_id="global"`` it is deduplicated the same way.

**Confirmation.** With a client (llm on) every candidate is judged by Claude Haiku
(:mod:`.merge_check`), several pairs per call, a few calls at a time; the model also writes the
merged text. A "distinct" verdict is kept in ``merge_checks`` so the pair is not asked about again
while its similarity stays what it was (an in-place edit re-embeds a record and changes it, and the
pair is judged anew). An API error leaves its pairs unjudged: nothing is written, the next run asks.
Without a client (llm off) only pairs at :data:`AUTO_MERGE_MIN` (0.97) or more merge, and only when
both texts carry the same numbers and the same polarity words (not, never, always, disable, ...)
and neither has a content word the other lacks (:func:`safe_without_llm`): MiniLM puts "retry
three times" and "retry five times" at 0.989, "Always use pnpm" and "Never use pnpm" at 0.979 and
"a MEDIUM warehouse" and "a LARGE warehouse" at 0.988, and no model is there to notice. The merge
keeps the survivor's text, so anything only the other said would be lost. On the calibration set
the check refuses every different-fact pair, and the one paraphrase pair at 0.97 too (it differs
in "carry" / "block"): docs/consolidation.md. Nothing is recorded for the pairs left alone; they
wait for a run with the LLM.

**A merge** is one transaction: both records are re-read and must still be current and unchanged
(else the pair is skipped); the survivor (:func:`choose_survivor`) keeps its id and takes the merged
text, the union of keywords, the stronger confidence, the pin, both access counts and
``reinforce_count`` a + b + 1 (the count is sessions seen minus one, so two records seen in one
session each make a record seen in two); the loser is superseded by it with a ``supersedes`` edge
and its entity links and session edges (``derives_from``) are copied over; the ``same`` verdict is
written in the same transaction, and a survivor whose text changed is flagged for embedding. So
``kill -9`` anywhere leaves whole merges only, and nothing is merged or recorded twice.

**Time box.** Looked at before each merge and before each call (never inside a transaction); what
is left is reported ``unfinished`` and scanned again next run.

**Chains.** Candidates are taken by similarity, highest first, in rounds in which no record appears
twice. A record merged away is out of the run; a survivor whose text changed is out until it is
re-embedded (its vector is stale), so A~B~C resolves over two runs: A+B now, then (A+B)~C. A
survivor whose text did not change (llm off) stays in, and A~C is judged in the same run.

**Growth.** Per type, the unit vectors form an n × d float32 matrix (d = 384) multiplied block by
block against itself (:data:`BLOCK` rows at a time, upper triangle only) in a worker thread: time
grows as n², memory as n·d + BLOCK·n (the times: benchmarks/results/consolidate.md, ``nox -s
bench``). The stored vectors are read in one streamed scan (:func:`agentctx.embeddings.vecstore.load_vectors`).
At most :data:`MAX_CANDIDATES`
candidates are kept per run (the most similar); the rest wait for the next run.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from agentctx.consolidate import merge_check
from agentctx.core import clock, errors, schema, search, vectors, writes
from agentctx.core.errors import ConflictError
from agentctx.core.writes import normalize_keywords
from agentctx.embeddings import thresholds, vecstore
from agentctx.extract.llm import Usage
from agentctx.records import COLUMNS, Record

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from anthropic import AsyncAnthropic
    from numpy.typing import NDArray

    from agentctx.consolidate.timebox import TimeBox
    from agentctx.store import Store, Transaction

#: Candidate and auto-merge cosines measured for all-MiniLM-L6-v2 (and used for any model that has
#: neither measured nor calibrated bounds): :data:`agentctx.embeddings.thresholds.MERGE_DEFAULT`.
SIMILARITY_MIN, AUTO_MERGE_MIN = thresholds.MERGE_DEFAULT
DEDUPED_TYPES = ("decision", "convention", "preference", "discovery", "bugfix")
BLOCK = 1024
MAX_CANDIDATES = 20_000
#: A stored "distinct" verdict stands while the pair's similarity is within this of its value then.
VERDICT_TOLERANCE = 1e-3
_CONFIDENCE_RANK = {"inferred": 0, "reinforced": 1, "explicit": 2}
_COLS = ", ".join(COLUMNS)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pair of current records of one type above the similarity bound (``a < b``)."""

    a: str
    b: str
    type: str
    similarity: float


@dataclass(slots=True)
class Scan:
    """What :func:`find_candidates` found: the records compared and the candidate pairs."""

    records: dict[str, Record]
    candidates: list[Candidate]
    pairs_scanned: int = 0
    capped: bool = False  # more candidates than MAX_CANDIDATES: the rest wait for the next run


@dataclass(slots=True)
class DedupeReport:
    """What one near-duplicate pass did; every candidate is merged, kept_distinct or skipped."""

    pairs_scanned: int = 0
    candidates: int = 0
    asked: int = 0
    merged: int = 0
    kept_distinct: int = 0
    skipped: int = 0
    llm_errors: int = 0
    calls: int = 0
    unfinished: bool = False
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the consolidation report's ``dedupe`` entry)."""
        data = asdict(self)
        data["cost_usd"] = round(self.cost_usd, 6)
        return data


async def merge_near_duplicates(
    store: Store,
    project_id: str,
    *,
    client: AsyncAnthropic | None,
    model: str,
    timebox: TimeBox,
    log: Callable[[str], None],
) -> DedupeReport:
    """Merge the near-duplicate records of one project (or ``global``), within the time box."""
    run = _Run(store, project_id, client, model, timebox, log)
    if timebox.expired():
        run.report.unfinished = True
        return run.report
    space = await store.run(vectors.space())
    merge_min, run.auto_merge = thresholds.merge_bounds(space.model if space else None)
    scan = await find_candidates(store, project_id, threshold=merge_min)
    run.scan = scan
    run.report.pairs_scanned = scan.pairs_scanned
    run.report.candidates = len(scan.candidates)
    run.report.unfinished = scan.capped
    if client is None:
        await run.without_llm(scan.candidates)
    else:
        await run.with_llm(scan.candidates)
    run.report.cost_usd = run.usage.cost_usd
    run.report.calls = run.usage.calls
    return run.report


async def find_candidates(
    store: Store,
    project_id: str,
    *,
    threshold: float = SIMILARITY_MIN,
    limit: int = MAX_CANDIDATES,
) -> Scan:
    """Pairs of current, embedded records of one type with cosine > ``threshold``, not yet judged.

    Most similar first (ties by ids); at most ``limit`` of them.
    """
    types = ", ".join("?" * len(DEDUPED_TYPES))
    rows = await store.rows(
        f"SELECT {_COLS} FROM records WHERE project_id = ? AND superseded_at IS NULL "
        f"AND pending_embedding = 0 AND type IN ({types})",
        (project_id, *DEDUPED_TYPES),
    )
    records = {str(row["id"]): Record.from_row(row) for row in rows}
    vectors = await vecstore.load_vectors(store, records)
    judged = await _judged(store, project_id)
    groups: dict[tuple[str, int], list[str]] = {}
    for record_id in sorted(vectors):  # vectors of another size come from another model
        groups.setdefault((records[record_id].type, len(vectors[record_id])), []).append(record_id)
    scan = Scan({rid: records[rid] for rid in vectors}, [])
    for (record_type, _dims), ids in sorted(groups.items()):
        scan.pairs_scanned += len(ids) * (len(ids) - 1) // 2
        if len(ids) < 2:
            continue
        matrix = np.stack([vectors[rid] for rid in ids])
        found = await anyio.to_thread.run_sync(similar_pairs, matrix, threshold, limit)
        for i, j, similarity in found:
            a, b = sorted((ids[i], ids[j]))
            earlier = judged.get((a, b))
            if earlier is not None and abs(earlier - similarity) <= VERDICT_TOLERANCE:
                continue
            scan.candidates.append(Candidate(a, b, record_type, similarity))
    scan.candidates.sort(key=lambda c: (-c.similarity, c.a, c.b))
    if len(scan.candidates) > limit:
        del scan.candidates[limit:]
        scan.capped = True
    return scan


def similar_pairs(
    matrix: NDArray[np.float32], threshold: float, limit: int = MAX_CANDIDATES
) -> list[tuple[int, int, float]]:
    """Index pairs ``(i, j, cosine)``, ``i < j``, of unit rows with cosine > ``threshold``.

    Blockwise over the upper triangle (memory BLOCK × n); the ``limit`` most similar, best first.
    """
    n = int(matrix.shape[0])
    bound = np.float32(threshold)
    rows_i: list[NDArray[np.int64]] = []
    rows_j: list[NDArray[np.int64]] = []
    sims: list[NDArray[np.float32]] = []
    kept = 0
    for start in range(0, n, BLOCK):
        block = matrix[start : start + BLOCK] @ matrix[start:].T
        flat = np.flatnonzero(block > bound)  # faster than a 2-D nonzero on a large block
        r, c = np.divmod(flat, block.shape[1])
        upper = c > r  # column c is record start + c, row r is record start + r
        r, c = r[upper], c[upper]
        rows_i.append(r + start)
        rows_j.append(c + start)
        sims.append(block[r, c])
        kept += len(r)
        if kept > 2 * limit:  # many near-duplicates: keep only the best `limit` so far
            i, j, s = _top(rows_i, rows_j, sims, limit)
            rows_i, rows_j, sims, kept = [i], [j], [s], len(i)
    i, j, s = _top(rows_i, rows_j, sims, limit)
    return [(int(a), int(b), float(v)) for a, b, v in zip(i, j, s, strict=True)]


def _top(
    rows_i: list[NDArray[np.int64]],
    rows_j: list[NDArray[np.int64]],
    sims: list[NDArray[np.float32]],
    limit: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    i = np.concatenate(rows_i) if rows_i else np.zeros(0, dtype=np.int64)
    j = np.concatenate(rows_j) if rows_j else np.zeros(0, dtype=np.int64)
    s = np.concatenate(sims) if sims else np.zeros(0, dtype=np.float32)
    order = np.lexsort((j, i, -s))[:limit]
    return i[order], j[order], s[order]


def choose_survivor(a: Record, b: Record) -> Record:
    """The record that stays: pinned, then explicit > reinforced > inferred, then more
    reinforced, then older ``valid_from``, then the smaller id."""
    return min(
        (a, b),
        key=lambda r: (
            not r.pinned,
            -_CONFIDENCE_RANK.get(r.confidence, 0),
            -r.reinforce_count,
            r.valid_from,
            r.id,
        ),
    )


_WORD = re.compile(r"[^\W_]+(?:['’.][^\W_]+)*")  # letters and digits of any script
_NUMBER_WORDS = frozenset((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "fifteen", "twenty", "thirty", "forty", "fifty", "sixty", "hundred",
    "thousand", "million", "once", "twice", "half", "double", "triple",
))  # fmt: skip
_POLARITY = frozenset((
    "no", "not", "never", "none", "nor", "neither", "without", "avoid", "don't", "dont",
    "doesn't", "doesnt", "isn't", "isnt", "aren't", "arent", "can't", "cannot", "shouldn't",
    "shouldnt", "mustn't", "mustnt", "won't", "wont", "always", "must", "only", "enable",
    "enabled", "disable", "disabled", "allow", "allowed", "forbid", "forbidden",
))  # fmt: skip


#: Search's stop words that can be the one word two different facts differ in ("migrate *before*
#: the deploy" / "*after*"): a content word here. ``no``, ``not``, ``only`` are polarity words.
_FACT_STOPWORDS = frozenset((
    "before", "after", "above", "below", "over", "under", "more", "most", "few", "off", "until",
    "against", "once",
))  # fmt: skip
#: Words that only word a statement but are not search stop words ("before *every* commit" /
#: "before *each* commit": ``each`` is one).
_WORDING = frozenset(("every",))
#: A word counts as content when at least this specific (:func:`agentctx.core.search.specificity`):
#: any word in fewer than a quarter of the background's code documents (IDF ln 4). Only the code
#: syntax at the top of the table falls below ("self", "return"): "true" / "false", "read" /
#: "write", "sync" / "async", "min" / "max" are all common in code and each can be the one word
#: that tells two facts apart, so the bound stays low (docs/consolidation.md).
CONTENT_SPECIFICITY = (math.log(4) / search.SPECIFIC_IDF) ** 2


def safe_without_llm(a: Record, b: Record) -> bool:
    """True when nothing but the wording differs as far as a cheap check can tell: the same
    numbers and the same polarity words (:func:`same_markers`, an embedding barely sees either)
    and no content word in one text that the other lacks (:func:`differing_words`)."""
    return same_markers(a, b) and not differing_words(a, b)


def same_markers(a: Record, b: Record) -> bool:
    """True when both texts carry the same numbers and the same polarity words (the calibration
    set's ``markers`` label says they do not)."""
    return _markers(_words(a)) == _markers(_words(b))


def differing_words(a: Record, b: Record) -> set[str]:
    """The content words of one title + body that the other lacks, folded (:func:`fold`).

    A word counts when it is not a stop word of search (:data:`agentctx.core.search.STOPWORDS`,
    less the :data:`_FACT_STOPWORDS`) nor a :data:`_WORDING` word nor an inflected form of one, and
    one of its spellings in the text is at least :data:`CONTENT_SPECIFICITY` specific.
    """
    words_a, words_b = _content(_words(a)), _content(_words(b))
    return {
        stem
        for mine, theirs in ((words_a, words_b), (words_b, words_a))
        for stem, spellings in mine.items()
        if stem not in theirs
        and max(search.specificity(w) for w in spellings) >= CONTENT_SPECIFICITY
    }


def fold(word: str) -> str:
    """A word with its inflection folded away, so that "tags", "tagged" and "tag" compare equal.

    Simple suffix folding rather than the index's Porter stemmer (it need only be consistent: both
    texts are folded alike): a final ``'s`` goes; ``ies`` / ``ied`` become ``y``; else one of
    ``ing``, ``ed``, ``es``, ``s`` goes when two letters are left (not the ``s`` of ``ss``, ``us``,
    ``is``; ``ing`` and ``ed`` only after a vowel and not after ``e``: "string", "speed"); then a
    final ``e`` and one letter of a final double consonant (but ``ll``, ``ss``, ``zz``). "caches",
    "cached", "caching", "cache" → "cach"; "policies" → "policy"; "tagged", "tags" → "tag".
    """
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith(("ies", "ied")):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        stem = word[: -len(suffix)]
        if not word.endswith(suffix) or len(stem) < 2:
            continue
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            break
        if suffix in ("ing", "ed") and (stem.endswith("e") or not _VOWEL.search(stem)):
            break  # "speed", "string", "bring" are not inflected
        word = stem
        break
    if len(word) > 2 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "aeioulsz":
        word = word[:-1]
    return word


_VOWEL = re.compile("[aeiouy]")
_STOP = (search.STOPWORDS - _FACT_STOPWORDS) | _WORDING
_STOP_FOLDED = frozenset(fold(w) for w in _STOP)


def _words(record: Record) -> list[str]:
    return _WORD.findall(f"{record.title} {record.body}".lower().replace("’", "'"))


def _markers(words: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    numbers = frozenset(w for w in words if w in _NUMBER_WORDS or any(ch.isdigit() for ch in w))
    return numbers, frozenset(w for w in words if w in _POLARITY)


def _content(words: list[str]) -> dict[str, set[str]]:
    """Folded form → the spellings of it in the text; stop and wording words and their inflected
    forms ("uses", "needed") left out."""
    found: dict[str, set[str]] = {}
    for word in words:
        stem = fold(word)
        if (
            len(word) < 2
            or word in _STOP
            or (word.endswith(("s", "ed", "ing")) and stem in _STOP_FOLDED)
        ):
            continue
        found.setdefault(stem, set()).add(word)
    return found


# -- the pass ----------------------------------------------------------------------------------


class _Run:
    """The state of one pass: records merged away or changed in it, the report, the usage."""

    def __init__(
        self,
        store: Store,
        project_id: str,
        client: AsyncAnthropic | None,
        model: str,
        timebox: TimeBox,
        log: Callable[[str], None],
    ) -> None:
        self.store = store
        self.project_id = project_id
        self.client = client
        self.model = model
        self.timebox = timebox
        self.log = log
        self.report = DedupeReport()
        self.usage = Usage()
        self.scan = Scan({}, [])
        self.auto_merge = AUTO_MERGE_MIN  # the stored vectors' model's (merge_near_duplicates)
        self.gone: set[str] = set()  # merged away in this run
        self.changed: set[str] = set()  # merged text, vector stale until re-embedded

    def _out(self, candidate: Candidate) -> bool:
        return bool({candidate.a, candidate.b} & (self.gone | self.changed))

    async def without_llm(self, candidates: list[Candidate]) -> None:
        """Merge the pairs at the auto-merge bound (:data:`AUTO_MERGE_MIN` for all-MiniLM-L6-v2) or
        more that pass :func:`safe_without_llm`."""
        for index, candidate in enumerate(candidates):
            if self.timebox.expired():
                self.report.unfinished = True
                self.report.skipped += len(candidates) - index
                return
            a, b = self.scan.records[candidate.a], self.scan.records[candidate.b]
            if (
                self._out(candidate)
                or candidate.similarity < self.auto_merge
                or not safe_without_llm(a, b)
            ):
                self.report.skipped += 1
                continue
            await self._merge(candidate, merge_check.Verdict(True))

    async def with_llm(self, candidates: list[Candidate]) -> None:
        """Ask in rounds in which no record appears twice, most similar pairs first."""
        pending = candidates
        while pending:
            if self.timebox.expired():
                self.report.unfinished = True
                self.report.skipped += len(pending)
                return
            round_: list[Candidate] = []
            later: list[Candidate] = []
            used: set[str] = set()
            for candidate in pending:
                if self._out(candidate):
                    self.report.skipped += 1  # scanned again next run, with fresh vectors
                elif candidate.a in used or candidate.b in used:
                    later.append(candidate)
                else:
                    used.update((candidate.a, candidate.b))
                    round_.append(candidate)
            await self._ask(round_)
            pending = later

    async def _ask(self, candidates: list[Candidate]) -> None:
        texts = [self._text(str(n), c) for n, c in enumerate(candidates, start=1)]
        by_key = {t.key: c for t, c in zip(texts, candidates, strict=True)}
        limiter = anyio.CapacityLimiter(merge_check.CONCURRENCY)
        async with anyio.create_task_group() as group:
            for batch in merge_check.batches(texts):
                group.start_soon(self._batch, limiter, [(t, by_key[t.key]) for t in batch])

    def _text(self, key: str, candidate: Candidate) -> merge_check.PairText:
        a, b = self.scan.records[candidate.a], self.scan.records[candidate.b]
        return merge_check.PairText(key, candidate.type, a.title, a.body, b.title, b.body)

    async def _batch(
        self,
        limiter: anyio.CapacityLimiter,
        batch: list[tuple[merge_check.PairText, Candidate]],
    ) -> None:
        from anthropic import APIError

        assert self.client is not None
        async with limiter:
            if self.timebox.expired():  # checked again here: batches wait for the limiter
                self.report.unfinished = True
                self.report.skipped += len(batch)
                return
            self.report.asked += len(batch)
            try:
                answer = await merge_check.judge(
                    self.client, self.model, [t for t, _ in batch], self.usage
                )
            except APIError as exc:
                self.report.llm_errors += 1
                self.report.skipped += len(batch)
                reason = errors.one_line(exc)
                self.log(
                    f"dedupe {self.project_id[:12]}: merge check of {len(batch)} pair(s) failed "
                    f"({reason}); asked again next run"
                )
                return
        if answer.problem:
            self.report.llm_errors += 0 if answer.verdicts else 1
            self.log(f"dedupe {self.project_id[:12]}: merge check: {answer.problem}")
        distinct: list[Candidate] = []
        for text, candidate in batch:
            verdict = answer.verdicts.get(text.key)
            if verdict is None:
                self.report.skipped += 1
            elif verdict.same:
                await self._merge(candidate, verdict)
            else:
                distinct.append(candidate)
        if distinct:
            await self._keep_distinct(distinct)

    async def _keep_distinct(self, candidates: list[Candidate]) -> None:
        """Record the verdicts in one transaction, for pairs whose texts are still as judged."""
        now = clock.now()
        async with self.store.transaction() as tx:
            for candidate in candidates:
                if not await self._unchanged(tx, candidate):
                    self.report.skipped += 1
                    continue
                await tx.execute(
                    "INSERT OR REPLACE INTO merge_checks"
                    "(record_a, record_b, verdict, similarity, checked_at) "
                    "VALUES (?, ?, 'distinct', ?, ?)",
                    (candidate.a, candidate.b, candidate.similarity, now),
                )
                self.report.kept_distinct += 1

    async def _unchanged(self, tx: Transaction, candidate: Candidate) -> dict[str, Record] | None:
        """Both records as they are now, if still current and as scanned; else None."""
        rows = await tx.rows(
            f"SELECT {_COLS} FROM records WHERE id IN (?, ?)", (candidate.a, candidate.b)
        )
        fresh = {str(row["id"]): Record.from_row(row) for row in rows}
        for record_id in (candidate.a, candidate.b):
            now, then = fresh.get(record_id), self.scan.records[record_id]
            if (
                now is None
                or now.superseded_at is not None
                or now.pending_embedding
                or (now.type, now.title, now.body) != (then.type, then.title, then.body)
            ):
                return None
        return fresh

    async def _merge(self, candidate: Candidate, verdict: merge_check.Verdict) -> None:
        """One merge, in one transaction; skipped when either record changed since the scan."""
        now = clock.now()
        async with self.store.transaction() as tx:
            fresh = await self._unchanged(tx, candidate)
            if fresh is None:
                self.report.skipped += 1
                self.log(
                    f"dedupe {self.project_id[:12]}: {candidate.a} ~ {candidate.b} changed "
                    "since the scan; left for the next run"
                )
                return
            a, b = fresh[candidate.a], fresh[candidate.b]
            survivor = choose_survivor(a, b)
            loser = b if survivor is a else a
            changed = await _absorb(tx, survivor, loser, verdict, now)
            await tx.execute(
                "INSERT OR REPLACE INTO merge_checks"
                "(record_a, record_b, verdict, similarity, checked_at) VALUES (?, ?, 'same', ?, ?)",
                (candidate.a, candidate.b, candidate.similarity, now),
            )
            await tx.mark_changed(survivor.id)  # its digest is stale at commit
        self.gone.add(loser.id)
        if changed:
            self.changed.add(survivor.id)
        self.report.merged += 1
        self.log(
            f"dedupe {self.project_id[:12]}: merged {loser.id} into {survivor.id} "
            f"({candidate.type}, cosine {candidate.similarity:.3f})"
        )


async def _absorb(
    tx: Transaction, survivor: Record, loser: Record, verdict: merge_check.Verdict, now: str
) -> bool:
    """Fold ``loser`` into ``survivor`` and supersede it; True when the survivor's text changed."""
    title = verdict.title or survivor.title
    body = verdict.body or survivor.body
    changed = (title, body) != (survivor.title, survivor.body)
    confidence = max(
        (survivor.confidence, loser.confidence), key=lambda c: _CONFIDENCE_RANK.get(c, 0)
    )
    accessed = [t for t in (survivor.last_accessed, loser.last_accessed) if t]
    updated = await tx.run(
        writes.absorb(
            survivor.id,
            {
                "title": title,
                "body": body,
                "keywords": normalize_keywords(f"{survivor.keywords} {loser.keywords}"),
                "confidence": confidence,
                "pinned": int(survivor.pinned or loser.pinned),
                "reinforce_count": survivor.reinforce_count + loser.reinforce_count + 1,
                "access_count": survivor.access_count + loser.access_count,
                "last_accessed": max(accessed) if accessed else None,
                "rationale": survivor.rationale or loser.rationale,
                "score": max(survivor.score, loser.score),
            },
            changed,
        )
    )
    superseded = await tx.execute(schema.SUPERSEDE_SQL, (now, survivor.id, loser.id))
    if updated != 1 or superseded != 1:  # cannot happen under the write lock; roll back if it does
        raise ConflictError(f"records {survivor.id} and {loser.id} changed during their merge")
    await tx.execute(
        schema.INSERT_EDGE_SQL, (clock.ulid(), survivor.id, loser.id, "supersedes", now)
    )
    await tx.execute(
        "INSERT OR IGNORE INTO record_entities(record_id, entity_id) "
        "SELECT ?, entity_id FROM record_entities WHERE record_id = ?",
        (survivor.id, loser.id),
    )
    edges: Iterable[Sequence[Any]] = await tx.rows(
        "SELECT to_id, rel_type, weight, created_at FROM edges "
        "WHERE from_id = ? AND rel_type <> 'supersedes'",
        (loser.id,),
    )
    for to_id, rel_type, weight, created_at in edges:
        await tx.execute(
            "INSERT OR IGNORE INTO edges(id, from_id, to_id, rel_type, weight, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (clock.ulid(), survivor.id, to_id, rel_type, weight, created_at),
        )
    return changed


async def _judged(store: Store, project_id: str) -> dict[tuple[str, str], float]:
    """The 'distinct' verdicts on this project's current records: pair → similarity then."""
    rows = await store.rows(
        "SELECT m.record_a, m.record_b, m.similarity FROM merge_checks m "
        "JOIN records r ON r.id = m.record_a "
        "WHERE r.project_id = ? AND r.superseded_at IS NULL AND m.verdict = 'distinct'",
        (project_id,),
    )
    return {(str(r[0]), str(r[1])): float(r[2]) for r in rows}
