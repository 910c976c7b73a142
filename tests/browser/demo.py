"""A small, realistic store for the browser tests and the documentation's screenshots.

Two projects (a payments API with a CLAUDE.md, and a web front end), a supersession chain, files,
branches and sessions over the last two weeks, a developer profile, and one record whose body is a
script (it must show as text). Written through the library, plus the plain rows the hooks would
have written (sessions, nodes, edges), as the other tests do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from agentctx.core import clock
from agentctx.core.project import ProjectIdentity
from tests.helpers import new_record

if TYPE_CHECKING:
    from pathlib import Path

    from agentctx.records import Record
    from agentctx.store import Store

API = "a" * 64
WEB = "b" * 64
XSS_BODY = "A support ticket contained <script>window.__agentctx_xss = 1</script> in its subject."

CLAUDE_MD = """# payments-api

## Conventions

- Tests use pytest against a real PostgreSQL.
- Errors return RFC 7807 problem+json.
- Use MySQL 8 for the ledger.
"""


@dataclass(frozen=True, slots=True)
class Demo:
    """Ids the tests look for."""

    api: str
    web: str
    ledger_v1: str
    ledger: str
    cents: str
    xss: str
    pref: str
    root: str


def _ago(days: float, hours: float = 0) -> str:
    moment = datetime.now(UTC) - timedelta(days=days, hours=hours)
    return clock.format_time(moment)


async def seed(store: Store, root: Path) -> Demo:
    """Fill ``store``; ``root`` becomes the payments project's folder (with a CLAUDE.md)."""
    api_root = root / "payments-api"
    api_root.mkdir(parents=True, exist_ok=True)
    (api_root / "CLAUDE.md").write_text(CLAUDE_MD)
    await store.touch_project(ProjectIdentity(WEB, "web-frontend", str(root / "web"), None))
    await store.touch_project(ProjectIdentity(API, "payments-api", str(api_root), None))

    async def add(title: str, body: str, kind: str = "decision", **extra: object) -> Record:
        extra.setdefault("project_id", API)
        return await store.add(new_record(type=kind, title=title, body=body, **extra))  # type: ignore[arg-type]

    sessions = [f"sess-{i:02d}-{'x' * 8}" for i in range(12)]
    v1 = await add(
        "Use MySQL 8 for the ledger",
        "The ledger lives in MySQL 8, the team knows it.",
        valid_from=_ago(13),
        session_id=sessions[0],
        keywords="database ledger",
    )
    _, v2 = await store.supersede(
        v1.id,
        "The ledger moves to PostgreSQL 15: transactional DDL and SERIALIZABLE isolation.",
        "needs serializable transactions",
        title="Use PostgreSQL 15 for the ledger",
    )
    _, ledger = await store.edit(
        v2.id,
        title="Use PostgreSQL 16 for the ledger",
        body="The ledger runs on PostgreSQL 16 with SERIALIZABLE isolation for transfers; "
        "read replicas serve reports.",
    )
    cents = await add(
        "Money as integer cents, never floats",
        "Amounts are stored and computed as integer cents (bigint). Currency is a separate "
        "ISO 4217 column. Formatting happens only at the edge.",
        keywords="money cents",
        session_id=sessions[2],
    )
    await add(
        "Idempotency keys on every POST",
        "Clients send Idempotency-Key; the API stores the first response for 24 h and replays it.",
        session_id=sessions[3],
    )
    await add(
        "Retry webhooks with exponential backoff",
        "Up to 6 attempts, 2^n seconds apart with jitter; then the event goes to the dead letter "
        "table.",
        session_id=sessions[5],
    )
    await add(
        "Errors return RFC 7807 problem+json",
        "Every 4xx/5xx body is application/problem+json with type, title, status and detail.",
        "convention",
    )
    await add(
        "Migrations with Alembic, one per pull request",
        "Each PR carries at most one migration; migrations never edit data in place.",
        "convention",
        session_id=sessions[4],
    )
    await add(
        "Stripe sends webhooks out of order",
        "charge.refunded can arrive before charge.succeeded: handlers look the charge up and "
        "park the event when it is unknown.",
        "discovery",
        confidence="inferred",
        source="llm_extraction",
        session_id=sessions[6],
    )
    xss = await add(
        "Script tags show up in ticket subjects", XSS_BODY, "discovery", session_id=sessions[7]
    )
    refund = await add(
        "Fix double charge when the client retries on timeout",
        "The retry reused no idempotency key; the client now sends one and the server checks "
        "it before charging.",
        "bugfix",
        session_id=sessions[8],
    )
    stub = await add(
        "Test failure: pytest tests/test_refunds.py",
        "AssertionError: refund total 1999 != 2000",
        "bugfix",
        confidence="inferred",
        source="hook_observation",
        session_id=sessions[9],
    )
    await add(
        "Next: finish the refund reconciliation job",
        "The nightly job matches Stripe payouts with ledger entries; the matching of partial "
        "refunds is half done (src/payments/reconcile.py).",
        "handover",
        confidence="inferred",
        source="hook_observation",
        session_id=sessions[11],
    )
    await add(
        "Components in PascalCase files",
        "One component per file, file named after it.",
        "convention",
        project_id=WEB,
    )
    await add(
        "Fetch with SWR",
        "Data fetching goes through SWR hooks.",
        project_id=WEB,
        confidence="inferred",
    )
    pref = await add(
        "Prefer ruff for linting and formatting",
        "ruff check and ruff format; no black, no isort, no flake8.",
        "preference",
        scope="global",
        project_id="global",
        confidence="reinforced",
        session_id=sessions[1],
    )
    await add(
        "Small commits with imperative messages",
        "One change per commit; subject in the imperative, under 72 characters.",
        "preference",
        scope="global",
        project_id="global",
    )
    await add(
        "Explain trade-offs before a large refactor",
        "Before touching more than a few files, list the options and what each costs.",
        "preference",
        scope="global",
        project_id="global",
        confidence="inferred",
        session_id=sessions[10],
    )

    now = clock.now()
    files = {
        "src/payments/ledger.py": [ledger.id, cents.id],
        "src/payments/refunds.py": [refund.id, stub.id],
        "src/payments/webhooks.py": [],
        "migrations/0042_ledger_pg16.py": [ledger.id],
        "tests/test_refunds.py": [stub.id, refund.id],
        "src/payments/reconcile.py": [],
    }
    branches = ["main", "feature/refund-recon", "fix/double-charge"]
    async with store.transaction() as tx:
        for i, sid in enumerate(sessions):
            started = datetime.now(UTC) - timedelta(days=13 - i, hours=(i * 5) % 9)
            minutes = 12 + (i * 17) % 95
            await tx.execute(
                "INSERT INTO sessions(session_id, project_id, cwd, started_at, ended_at, "
                "tokens_injected, injections, extraction_cost_usd, records_extracted) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    API,
                    str(api_root),
                    clock.format_time(started),
                    clock.format_time(started + timedelta(minutes=minutes)),
                    900 + (i * 431) % 2600,
                    3 + i % 5,
                    round(0.004 + (i % 4) * 0.0035, 4),
                    (i * 3) % 5,
                ),
            )
        for name, linked in files.items():
            node = f"node-{name}"
            await tx.execute(
                "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
                (node, API, "file", name, now),
            )
            for record_id in linked:
                await tx.execute(
                    "INSERT INTO record_entities(record_id, entity_id) VALUES (?, ?)",
                    (record_id, node),
                )
        for i, name in enumerate(branches):
            await tx.execute(
                "INSERT INTO nodes(id, project_id, kind, name, created_at) VALUES (?, ?, ?, ?, ?)",
                (f"branch-{name}", API, "branch", name, now),
            )
            await tx.execute(
                "INSERT INTO edges(id, from_id, to_id, rel_type, created_at) "
                "VALUES (?, ?, ?, 'observed_in', ?)",
                (clock.ulid(), f"branch-{name}", sessions[6 + i * 2], now),
            )
        for sid in (sessions[3], sessions[6], sessions[9]):  # the preference seen again
            await tx.execute(
                "INSERT INTO edges(id, from_id, to_id, rel_type, created_at) "
                "VALUES (?, ?, ?, 'derives_from', ?)",
                (clock.ulid(), pref.id, sid, now),
            )
        await tx.execute("UPDATE records SET reinforce_count = 3 WHERE id = ?", (pref.id,))
        for i, name in enumerate(files):
            for sid in (sessions[i], sessions[(i + 5) % 12]):
                await tx.execute(
                    "INSERT INTO edges(id, from_id, to_id, rel_type, created_at) "
                    "VALUES (?, ?, ?, 'observed_in', ?)",
                    (clock.ulid(), f"node-{name}", sid, now),
                )
    return Demo(
        api=API,
        web=WEB,
        ledger_v1=v1.id,
        ledger=ledger.id,
        cents=cents.id,
        xss=xss.id,
        pref=pref.id,
        root=str(api_root),
    )
