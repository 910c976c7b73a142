"""CLAUDE.md drift: compare a project's current decisions and conventions with its CLAUDE.md.

One concept, three surfaces: the MCP tool ``ctx_sync_claudemd`` (read-only), ``agentctx sync``
(which may write, with consent) and consolidation, which stores each record's drift score for the
digest's note (:mod:`agentctx.consolidate.drift`). All three judge a record by :func:`evaluate`, so
"missing" means the same everywhere: a current explicit or reinforced decision or convention is
*missing* when neither signal says CLAUDE.md reflects it --

- **keywords:** CLAUDE.md holds at least :data:`COVERED` (75 %) of its title's keywords;
- **meaning** (when an embedder is given): the record's ``title — body`` has a cosine at least the
  model's bound (:func:`~agentctx.embeddings.thresholds.drift_bounds`, 0.6 for all-MiniLM-L6-v2) with some chunk of CLAUDE.md (a
  sentence, list item, heading, table row or code block, :func:`chunks`).

:func:`drift_score` puts both on one scale and maps it so that missing records score 0.5 or more (the
digest's bound) and covered ones at most 0.4. A record whose superseded predecessor's text CLAUDE.md
still contains is *contradicted* and scores 1.0. Embeddings measure the topic, not agreement: a line
that contradicts a decision is as close to it as a paraphrase (measured in docs/consolidation.md),
so only the superseded-text check finds contradictions.

:func:`report` returns a :class:`SyncReport`: the missing records, the superseded text still
present, the proposed file and a unified diff. The proposal never removes the user's text: it only
appends one block between :data:`SYNC_BEGIN` and :data:`SYNC_END`, or replaces that block in place
when it is already there, so a second :func:`apply` with no store change leaves the file
byte-identical. Text inside the block is ignored when coverage and superseded text are computed
(the block is regenerated from the store).

Layout: :mod:`~agentctx.claude.claudemd.files` (reading CLAUDE.md, our marked block),
:mod:`~agentctx.claude.claudemd.assessment` (keywords, superseded text, the drift score),
:mod:`~agentctx.claude.claudemd.semantic` (chunks, embeddings, :func:`evaluate`) and
:mod:`~agentctx.claude.claudemd.proposal` (the block, the diff, :func:`report`, :func:`apply`). This
package exposes all of it. Plain dataclasses, no pydantic, numpy imported only when embeddings
run: the command line imports this package.
"""

from __future__ import annotations

from agentctx.claude.claudemd.assessment import (
    CONTRADICTED,
    COVERED,
    COVERED_SCORE_MAX,
    METHOD,
    METHOD_SEMANTIC,
    Assessment,
    StaleText,
    assess,
    checked,
    drift_score,
    load_records,
    meaning,
    method,
    one_line,
    similarity_bounds,
)
from agentctx.claude.claudemd.files import (
    CLAUDE_MD_MAX_BYTES,
    SYNC_BEGIN,
    SYNC_END,
    ClaudeMd,
    block_span,
    discover,
    is_inside,
    read,
    user_views,
)
from agentctx.claude.claudemd.proposal import (
    HEADING,
    SYNC_MAX,
    MissingRecord,
    SyncReport,
    apply,
    propose,
    render_block,
    report,
    unified_diff,
)
from agentctx.claude.claudemd.semantic import (
    CHUNK_CHARS,
    CHUNKS_MAX,
    EMBED_BATCH,
    chunks,
    evaluate,
    semantic_text,
    similarities,
)

__all__ = [
    "CHUNKS_MAX",
    "CHUNK_CHARS",
    "CLAUDE_MD_MAX_BYTES",
    "CONTRADICTED",
    "COVERED",
    "COVERED_SCORE_MAX",
    "EMBED_BATCH",
    "HEADING",
    "METHOD",
    "METHOD_SEMANTIC",
    "SYNC_BEGIN",
    "SYNC_END",
    "SYNC_MAX",
    "Assessment",
    "ClaudeMd",
    "MissingRecord",
    "StaleText",
    "SyncReport",
    "apply",
    "assess",
    "block_span",
    "checked",
    "chunks",
    "discover",
    "drift_score",
    "evaluate",
    "is_inside",
    "load_records",
    "meaning",
    "method",
    "one_line",
    "propose",
    "read",
    "render_block",
    "report",
    "semantic_text",
    "similarities",
    "similarity_bounds",
    "unified_diff",
    "user_views",
]
