"""A realistic synthetic agentctx store of N records, built fast, for the hook latency benchmark.

The records are developer notes of one web project (plus global preferences): every record has a
topic (auth, payments, build, database, ...) and its title, body and keywords are drawn mostly from
that topic's vocabulary, the rest from generic developer words and English glue, so a prompt about
one topic matches a few percent of the store strongly and much of it weakly, as in a real store.
Bodies are 50-300 tokens (agentctx's own estimate), types are mixed, about 10 % of the records are
superseded (every handover but the last, older versions of keyed profile facts, and random older
records), a few are pinned, inferred or flagged as CLAUDE.md drift. Every record but handovers and
profile facts has 2-4 retrieval cues, as consolidation leaves a store.

Two vocabularies (``vocabulary=``): ``topical`` (the default, the store measured since issue 1) draws
each topic's words from a pool of ~30, so a prompt's topic words each match a tenth of the store;
``zipf`` (issue 25: "a store whose words are as common as in real stores") draws from a long-tailed
vocabulary instead: a shared one of :data:`ZIPF_SHARED` words (the common words of code and its
prose in the order of ``agentctx.core.background``, the generic developer words among them, then
made-up words) and one of :data:`ZIPF_TOPIC` words per topic (its named words at ranks
:data:`ZIPF_NAMED_RANKS`, the rest made up), both with Zipf weights ``1 / rank``, so that at 100K
records a prompt's topic words each match some hundreds of records and its rare identifiers tens.

Rows are made by the library itself (``NewRecord(...).validated().to_record(...)``) so they satisfy
every CHECK constraint, and inserted with ``schema.INSERT_RECORD_SQL`` in one transaction on a
connection opened by ``agentctx.core.db.connect`` and migrated by
``agentctx.core.schema.migrate``; the FTS5 triggers index them as they go in. Deterministic for a
given seed (except the ULIDs).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import time
from datetime import UTC, datetime, timedelta

from agentctx.core import clock, db, schema
from agentctx.core.tokens import estimate_tokens
from agentctx.records import NewRecord, Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: Type mix (weights). Preferences are global records; the others belong to the project.
TYPE_WEIGHTS = {
    "decision": 14,
    "convention": 10,
    "discovery": 26,
    "bugfix": 30,
    "preference": 8,
    "handover": 3,
    "profile": 2,
}
#: Probability that a new decision/convention/discovery/bugfix/preference supersedes an older one
#: of its type (handovers always replace the current one, profile facts the current one of their key).
SUPERSEDE_P = 0.05
PROFILE_KEYS = tuple(
    f"{area}.{item}"
    for area in ("language", "framework", "tooling", "testing", "ci", "runtime")
    for item in ("primary", "secondary", "version", "command", "config")
)
BODY_TOKENS = (50, 270)  # the target; the last sentence overshoots it by up to ~30
SPAN_DAYS = 540


def _words(text: str) -> list[str]:
    return text.split()


GLUE = _words(
    "the the the a a to to of of in in is is and and for it it this that when after because we "
    "should must not on with from by as at be are was has have but so if then only also all any "
    "each before until which instead every now still again more less than new old same other"
)

GENERIC = _words(
    "request response handler config cache build test error fails failed failing retry timeout "
    "module function class type value field schema client server service endpoint route log "
    "logging warning exception stack trace import export package dependency version release "
    "deploy deployment environment staging production local docker container image script "
    "command flag option default setting variable state store hook component render props "
    "query mutation update delete create read write file path directory branch commit merge "
    "review lint format typecheck ci pipeline job step cache key ttl memory cpu latency slow "
    "fast p95 regression benchmark profile flaky race lock queue worker batch async await "
    "promise callback event listener handler middleware interceptor adapter wrapper helper util "
    "refactor rename split extract inline revert patch fix bug issue ticket docs readme"
)

TOPICS: dict[str, tuple[str, str]] = {
    # topic: (words, identifiers)
    "auth": (
        "auth authentication token tokens refresh access jwt oauth session login logout "
        "expiry expired credentials cookie bearer header claims scope scopes identity sso "
        "grpc migration interceptor silent rotation revoke",
        "useAuthStore AuthProvider refreshToken() src/auth/refresh.ts src/auth/session.ts "
        "AuthInterceptor TokenManager",
    ),
    "payments": (
        "payment payments invoice invoices stripe charge refund currency checkout cart "
        "subscription billing webhook idempotency amount cents tax receipt customer plan",
        "usePaymentIntent BillingService src/billing/webhooks.ts chargeCustomer() InvoiceTable",
    ),
    "build": (
        "build bundle bundler vite webpack esbuild chunk chunks sourcemap minify tree shaking "
        "alias tsconfig paths output target es2022 polyfill transpile swc babel",
        "vite.config.ts tsconfig.json package.json pnpm-lock.yaml scripts/build.mjs",
    ),
    "database": (
        "database postgres sql migration migrations index indexes transaction rollback "
        "deadlock pool connection prisma orm column table foreign constraint replica vacuum",
        "prisma/schema.prisma db/migrations UserRepository withTransaction() pgPool",
    ),
    "ui": (
        "ui layout css tailwind theme dark mode modal dialog form input button accessibility "
        "aria focus keyboard responsive breakpoint animation skeleton spinner toast",
        "Button.tsx ModalRoot useTheme FormField src/components/Table.tsx",
    ),
    "api": (
        "api rest grpc graphql protobuf proto schema versioning pagination cursor rate limit "
        "openapi contract gateway status code payload serialization deadline streaming",
        "api/v2 proto/user.proto ApiClient fetchJson() GatewayRouter",
    ),
    "testing": (
        "vitest jest playwright e2e unit integration fixture fixtures mock mocks snapshot "
        "coverage assertion flaky retries headless selector seed factory",
        "tests/e2e/login.spec.ts vitest.config.ts renderWithProviders() mockServer",
    ),
    "infra": (
        "kubernetes helm terraform aws s3 cloudfront lambda ecs cluster node pod ingress "
        "secret secrets vault dns certificate tls autoscaling alert grafana prometheus",
        "infra/main.tf charts/web/values.yaml deploy.yml HPA",
    ),
    "state": (
        "state zustand redux store selector selectors slice hydration persist persistence "
        "localstorage rehydrate subscription derived memo rerender context provider",
        "useCartStore useAuthStore createSelectors() src/state/persist.ts StoreProvider",
    ),
    "search": (
        "search elasticsearch index indexing analyzer query ranking relevance facet filter "
        "autocomplete typo fuzzy debounce highlight synonyms reindex",
        "SearchService useSearchQuery search/indexer.ts buildQuery()",
    ),
    "i18n": (
        "i18n locale locales translation translations plural date timezone format currency "
        "rtl fallback message catalog icu",
        "useTranslation locales/en.json formatDate() I18nProvider",
    ),
    "perf": (
        "performance perf lighthouse bundle size lazy loading prefetch memoization cache "
        "hit ratio cold start render blocking hydration waterfall",
        "React.lazy usePrefetch perf/budget.json measureRender()",
    ),
}
TOPIC_WEIGHTS = (9, 8, 8, 10, 10, 9, 8, 7, 7, 5, 4, 6)

_OPENERS = {
    "decision": ("We decided to", "Decision:", "Going forward we", "Chosen approach:"),
    "convention": ("Always", "Never", "Convention:", "The rule is to"),
    "discovery": ("Found that", "It turns out", "Discovered:", "Note:"),
    "bugfix": ("Fixed:", "Root cause:", "The bug was", "Fixed the"),
    "preference": ("Prefer", "The developer prefers", "Likes", "Avoid"),
    "handover": ("Handover:", "Where we stopped:", "Next steps:", "In progress:"),
    "profile": ("Project uses", "Stack:", "Configured:", "Runs"),
}


def _zipf(n: int, offset: float) -> list[float]:
    """Cumulative Zipf-Mandelbrot weights ``1 / (rank + offset)`` for a pool of n words.

    A small offset is steep (function words: "the" is in every record); a larger one flattens the
    head, so that the most frequent developer words are in a fifth to a third of the records, not all.
    """
    total = 0.0
    cum = []
    for rank in range(n):
        total += 1.0 / (rank + offset)
        cum.append(total)
    return cum


class _Pool:
    __slots__ = ("cum", "words")

    def __init__(self, words: Sequence[str], rng: random.Random, offset: float) -> None:
        shuffled = list(words)
        rng.shuffle(shuffled)  # which word is frequent is part of the seed
        self.words = shuffled
        self.cum = _zipf(len(shuffled), offset)

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum, k=k)


#: The Zipf store's vocabularies (words) and where a topic's named words and identifiers rank in
#: its own (log-uniform between the bounds: the named words are its common words, not its commonest).
ZIPF_SHARED = 30_000
ZIPF_TOPIC = 2_000
ZIPF_TOPIC_IDENTS = 300
ZIPF_NAMED_RANKS = (20, 600)
ZIPF_IDENT_RANKS = (5, 150)
VOCABULARIES = ("topical", "zipf")


class _Ranked(_Pool):
    """A pool whose order is its ranking (no shuffle): ``1 / (rank + offset)``."""

    def __init__(self, words: Sequence[str], offset: float) -> None:
        self.words = list(words)
        self.cum = _zipf(len(self.words), offset)


class _MadeUp:
    """Made-up words (consonant-vowel syllables), each new, none a real word of the pools."""

    CONSONANTS = "bdfgklmnprstvz"
    VOWELS = "aeiou"

    def __init__(self, rng: random.Random, taken: Iterable[str]) -> None:
        self.rng = rng
        self.taken = set(taken)

    def word(self, ident: bool = False) -> str:
        rng = self.rng
        while True:
            syllables = [
                rng.choice(self.CONSONANTS) + rng.choice(self.VOWELS)
                for _ in range(rng.randint(2, 4))
            ]
            text = "".join(syllables)
            if ident:  # an identifier: camelCase, or a path, or a call
                shape = rng.randrange(3)
                if shape == 0:
                    text = "use" + text.capitalize()
                elif shape == 1:
                    text = f"src/{text[:4]}/{text}.ts"
                else:
                    text = text + "()"
            if text not in self.taken:
                self.taken.add(text)
                return text


def _placed(named: Sequence[str], size: int, ranks: tuple[int, int], rng: random.Random,
            made: _MadeUp, ident: bool = False) -> list[str]:  # fmt: skip
    """A ranked vocabulary of ``size`` words: the ``named`` ones at log-uniform ranks within
    ``ranks``, made-up words everywhere else."""
    low, high = ranks
    slots: dict[int, str] = {}
    for word in named:
        while True:
            rank = round(math.exp(rng.uniform(math.log(low), math.log(high))))
            if rank not in slots:
                slots[rank] = word
                break
    return [slots[r] if r in slots else made.word(ident) for r in range(max(size, high + 1))]


def _shared_vocabulary(rng: random.Random, made: _MadeUp) -> list[str]:
    """The shared words, most common first: code's common words (``agentctx.core.background``,
    by rank), the generic developer words placed among them at ranks 30-3,000, then made-up."""
    from agentctx.core.background import TABLE

    common = [line.split()[0] for line in TABLE.strip().splitlines()]
    common = [w for w in common if w.isalpha() and w not in GENERIC]
    generic = list(dict.fromkeys(GENERIC))
    placed = _placed(generic, 0, (30, 3000), rng, made)
    out: list[str] = []
    source = iter(common)
    for rank in range(ZIPF_SHARED):
        word = placed[rank] if rank < len(placed) and placed[rank] in generic else None
        out.append(word or next(source, None) or made.word())
    return out


class _Topic:
    __slots__ = ("idents", "sentence_tokens", "sentences", "words")

    def __init__(self, words: _Pool, idents: _Pool) -> None:
        self.words = words
        self.idents = idents
        self.sentences: list[str] = []
        self.sentence_tokens: list[int] = []


def _sentence(rng: random.Random, topic: _Topic, glue: _Pool, generic: _Pool) -> str:
    length = rng.randint(7, 22)
    n_topic = max(2, round(length * rng.uniform(0.25, 0.45)))
    n_generic = round(length * rng.uniform(0.15, 0.3))
    n_ident = 1 if rng.random() < 0.35 else 0
    n_glue = max(1, length - n_topic - n_generic - n_ident)
    words = (
        topic.words.draw(rng, n_topic)
        + generic.draw(rng, n_generic)
        + glue.draw(rng, n_glue)
        + (["`" + topic.idents.draw(rng, 1)[0] + "`"] if n_ident else [])
    )
    rng.shuffle(words)
    text = " ".join(words)
    return text[:1].upper() + text[1:] + rng.choice((".", ".", ".", ";", ":"))[:1]


class Generator:
    """Makes the synthetic records; sentences are pre-generated per topic and recombined."""

    def __init__(
        self, seed: int, sentences_per_topic: int = 2500, vocabulary: str = "topical"
    ) -> None:
        if vocabulary not in VOCABULARIES:
            raise ValueError(f"vocabulary must be one of {VOCABULARIES}")
        self.rng = random.Random(seed)
        rng = self.rng
        self.glue = _Pool(GLUE, rng, 1.5)
        zipf = vocabulary == "zipf"
        made = _MadeUp(
            rng, GLUE + GENERIC + [w for pair in TOPICS.values() for w in " ".join(pair).split()]
        )
        self.generic = (
            _Ranked(_shared_vocabulary(rng, made), 2.7) if zipf else _Pool(GENERIC, rng, 40)
        )
        self.topics: list[_Topic] = []
        for words, idents in TOPICS.values():
            if zipf:
                named = list(dict.fromkeys(_words(words)))
                topic = _Topic(
                    _Ranked(_placed(named, ZIPF_TOPIC, ZIPF_NAMED_RANKS, rng, made), 1.0),
                    _Ranked(
                        _placed(
                            _words(idents), ZIPF_TOPIC_IDENTS, ZIPF_IDENT_RANKS, rng, made, True
                        ),
                        1.0,
                    ),
                )
            else:
                topic = _Topic(_Pool(_words(words), rng, 8), _Pool(_words(idents), rng, 3))
            for _ in range(sentences_per_topic):
                text = _sentence(rng, topic, self.glue, self.generic)
                topic.sentences.append(text)
                topic.sentence_tokens.append(estimate_tokens(text))
            self.topics.append(topic)
        self.topic_cum = list(_cumulative(TOPIC_WEIGHTS))
        self.types = list(TYPE_WEIGHTS)
        self.type_cum = list(_cumulative(TYPE_WEIGHTS.values()))

    def title(self, kind: str, topic: _Topic) -> str:
        rng = self.rng
        words = topic.words.draw(rng, rng.randint(2, 5)) + self.generic.draw(rng, rng.randint(1, 3))
        rng.shuffle(words)
        if rng.random() < 0.4:
            words.append("in " + topic.idents.draw(rng, 1)[0])
        text = rng.choice(_OPENERS[kind]) + " " + " ".join(words)
        return text[: schema.TITLE_MAX]

    def body(self, kind: str, topic: _Topic) -> str:
        rng = self.rng
        target = rng.randint(*BODY_TOKENS)
        parts = [rng.choice(_OPENERS[kind])]
        tokens = estimate_tokens(parts[0])
        other = self.topics[rng.randrange(len(self.topics))]
        while True:
            while tokens < target:
                source = topic if rng.random() < 0.8 else other
                i = rng.randrange(len(source.sentences))
                parts.append(source.sentences[i])
                tokens += source.sentence_tokens[i]
            body = " ".join(parts)[: schema.BODY_MAX]
            tokens = estimate_tokens(body)  # the sum of the parts overcounts a little
            if tokens >= BODY_TOKENS[0]:
                return body

    def cues(self, kind: str, topic: _Topic) -> list[str]:
        """2-4 retrieval cues of 5-10 words, as extraction or consolidation writes them (none for
        handovers and profile facts, which consolidation does not cue)."""
        if kind in ("handover", "profile"):
            return []
        rng = self.rng
        made = []
        for _ in range(rng.randint(2, 4)):
            words = topic.words.draw(rng, rng.randint(2, 4)) + self.generic.draw(rng, 1)
            words += self.glue.draw(rng, rng.randint(2, 4))
            rng.shuffle(words)
            made.append(" ".join(words))
        return made

    def new_record(self, project_id: str, valid_from: str) -> NewRecord:
        rng = self.rng
        kind = rng.choices(self.types, cum_weights=self.type_cum)[0]
        topic = rng.choices(self.topics, cum_weights=self.topic_cum)[0]
        if kind == "preference":
            confidence = rng.choices(("reinforced", "explicit", "inferred"), (4, 4, 2))[0]
        else:
            confidence = rng.choices(("explicit", "inferred", "reinforced"), (55, 40, 5))[0]
        if confidence == "explicit":
            source = rng.choice(("cli", "mcp_tool"))
        else:
            source = rng.choice(("llm_extraction", "hook_observation"))
        return NewRecord(
            type=kind,
            title=self.title(kind, topic),
            body=self.body(kind, topic),
            project_id=project_id,
            scope="global" if kind == "preference" else "project",
            confidence=confidence,
            source=source,
            pinned=rng.random() < 0.01,
            keywords=topic.words.draw(rng, rng.randint(2, 6)),
            cues=self.cues(kind, topic),
            key=rng.choice(PROFILE_KEYS) if kind == "profile" else None,
            rationale="synthetic benchmark record" if kind == "decision" else None,
            session_id=f"bench-{rng.randrange(1 << 32):08x}" if source != "cli" else None,
            valid_from=valid_from,
        )


def _cumulative(weights: Iterable[float]) -> list[float]:
    total = 0.0
    out = []
    for weight in weights:
        total += weight
        out.append(total)
    return out


class BuildStats:
    """What :func:`build` made."""

    def __init__(self) -> None:
        self.records = 0
        self.current = 0
        self.superseded = 0
        self.by_type: dict[str, int] = {}
        self.body_tokens: list[int] = []
        self.seconds = 0.0
        self.db_bytes = 0


def build(
    db_path: str, n: int, project_id: str, project_name: str, seed: int, vocabulary: str = "topical"
) -> BuildStats:
    """Create the store at ``db_path`` (which must not exist) with ``n`` records (``vocabulary``:
    one of :data:`VOCABULARIES`)."""
    started = time.perf_counter()
    gen = Generator(seed, vocabulary=vocabulary)
    rng = gen.rng
    start = datetime.now(UTC) - timedelta(days=SPAN_DAYS)
    step = timedelta(days=SPAN_DAYS) / max(n, 1)
    rows: list[Record] = []
    current: dict[str, list[int]] = {kind: [] for kind in TYPE_WEIGHTS}
    keyed: dict[tuple[str, str], int] = {}
    edges: list[tuple[str, str, str, str, str]] = []
    stats = BuildStats()
    for i in range(n):
        moment = start + step * i + timedelta(seconds=rng.uniform(0, step.total_seconds() * 0.9))
        stamp = clock.format_time(moment)
        new = gen.new_record(project_id, stamp).validated()
        record = new.to_record(clock.ulid(), stamp)
        if rng.random() < 0.15:
            record = dataclasses.replace(
                record,
                score=round(rng.uniform(0.4, 1.6), 3),
                access_count=rng.randrange(12),
                claudemd_drift_score=0.8 if rng.random() < 0.05 else 0.0,
            )
        old: int | None = None
        if record.type == "handover" or (record.type == "profile" and record.key):
            old = keyed.pop((record.type, record.key or ""), None)
            keyed[(record.type, record.key or "")] = i
        elif current[record.type] and rng.random() < SUPERSEDE_P:
            pool = current[record.type]
            j = rng.randrange(len(pool))
            pool[j], pool[-1] = pool[-1], pool[j]
            old = pool.pop()
        if record.type not in ("handover", "profile"):
            current[record.type].append(i)
        if old is not None:
            rows[old] = dataclasses.replace(rows[old], superseded_at=stamp, superseded_by=record.id)
            edges.append((clock.ulid(), record.id, rows[old].id, "supersedes", stamp))
        rows.append(record)

    conn, caps = db.connect(db_path)
    try:
        schema.migrate(conn, caps, db_path)
        conn.execute("PRAGMA cache_size = -262144")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("PRAGMA defer_foreign_keys = ON")
        conn.execute(
            "INSERT INTO projects(project_id, name, root, remote, created_at, last_seen_at) "
            "VALUES (?, ?, NULL, NULL, ?, ?)",
            (project_id, project_name, rows[0].recorded_at if rows else "", clock.now()),
        )
        conn.executemany(schema.INSERT_RECORD_SQL, (r.to_values() for r in rows))
        conn.executemany(schema.INSERT_EDGE_SQL, edges)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for row in conn.execute(
            "SELECT type, count(*), sum(superseded_at IS NOT NULL) FROM records GROUP BY type"
        ):
            stats.by_type[row[0]] = int(row[1])
            stats.records += int(row[1])
            stats.superseded += int(row[2])
        if caps.fts5 and n:
            sql = "SELECT count(*) FROM records_fts WHERE records_fts MATCH 'the'"
            if int(conn.execute(sql).fetchone()[0]) == 0:
                raise RuntimeError("the FTS5 index is empty after the bulk insert")
    finally:
        conn.close()
    stats.current = stats.records - stats.superseded
    sample = rows[:: max(1, n // 2000)]
    stats.body_tokens = sorted(estimate_tokens(r.body) for r in sample)
    stats.seconds = time.perf_counter() - started
    stats.db_bytes = os.path.getsize(db_path)
    return stats
