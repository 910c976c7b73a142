"""The injection caps hold for any store content (hypothesis over the renderers)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentctx.core import clock, digests, inject, jsonio
from agentctx.core.handles import handle
from agentctx.core.schema import BODY_MAX, RECORD_TYPES, TITLE_MAX
from agentctx.core.tokens import estimate_tokens
from agentctx.retrieval import digest

titles = st.text(min_size=1, max_size=TITLE_MAX).map(lambda t: t.strip() or "t")
bodies = st.text(min_size=1, max_size=BODY_MAX).map(lambda b: b.strip() or "b")
ids = st.integers(min_value=0, max_value=10**9).map(lambda n: f"01TEST{n:020d}")


@st.composite
def rows(draw: st.DrawFn, kinds: tuple[str, ...] = RECORD_TYPES) -> dict[str, Any]:
    return {
        "id": draw(ids),
        "type": draw(st.sampled_from(kinds)),
        "title": draw(titles),
        "body": draw(bodies),
        "key": draw(st.sampled_from(["test_command", "stack", None])),
        "confidence": draw(st.sampled_from(["explicit", "inferred", "reinforced"])),
        "scope": draw(st.sampled_from(["project", "global"])),
        "pinned": draw(st.booleans()),
        "valid_from": clock.now(),
        "rank": -draw(st.floats(min_value=0.001, max_value=50)),
    }


CHECKOUTS = ("/src/shop", "/src/shop-wt-a", "/src/shop-wt-b")


@st.composite
def handovers(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Current handovers of a project, newest first: at most one per checkout (None = legacy)."""
    keys = draw(st.lists(st.sampled_from([None, *CHECKOUTS]), unique=True, max_size=4))
    return [{**draw(rows(("handover",))), "key": key} for key in keys]


@settings(max_examples=150, deadline=None)
@given(
    profile=st.lists(rows(("profile",)), max_size=15),
    decisions=st.lists(rows(("decision", "convention")), max_size=40),
    current=handovers(),
    preferences=st.lists(rows(("preference",)), max_size=15),
    counts=st.dictionaries(st.sampled_from(RECORD_TYPES), st.integers(0, 10**6)),
    drift=st.integers(0, 50),
    name=st.text(max_size=200),
)
def test_digest_stays_within_both_caps_in_every_checkout(
    profile: list[dict[str, Any]],
    decisions: list[dict[str, Any]],
    current: list[dict[str, Any]],
    preferences: list[dict[str, Any]],
    counts: dict[str, int],
    drift: int,
    name: str,
) -> None:
    result = digest.render(
        project_id="p",
        project_name=name,
        profile=profile,
        decisions=decisions,
        handovers=current,
        preferences=preferences,
        counts=counts,
        drift_candidates=drift,
    )
    # what a model is shown of a text: the fence removes invisible characters (issue 24), so a
    # handover whose body holds nothing else has no section, and a title may show as ""
    by_key = {h["key"]: h for h in current if inject.fenced_text(h["body"]).strip()}
    titled = [(str(r["id"]), inject.fenced_line(r["title"])) for r in [*profile, *preferences]]
    base_ids = {r["id"] for r in [*profile, *decisions, *preferences]}
    # the file's parts go through JSON (the hook reads them back with core.jsonio)
    parts = jsonio.loads(jsonio.dumps(result["parts"]))
    for checkout in (None, *CHECKOUTS, "/elsewhere"):
        text, shown = digests.assemble(parts, checkout)
        if checkout is None:
            assert (text, shown) == (result["text"], result["ids"])
        assert estimate_tokens(text) <= digests.MAX_TOKENS
        assert len(text) <= digests.MAX_CHARS
        # its own handover, else the legacy one, never another checkout's
        # (no checkout: the newest one)
        newest = next(iter(by_key.values()), None)
        mine = (by_key.get(checkout) or by_key.get(None)) if checkout else newest
        allowed = base_ids | ({mine["id"]} if mine else set())
        assert set(shown) <= allowed
        # (ids drawn for other records may repeat a handover's: those say nothing here)
        taken = base_ids | {(mine or {}).get("id")}
        others = [h for h in current if h is not mine and h["id"] not in taken]
        assert not any(f"id {handle(h['id'])})" in text for h in others)

        # a shown record is visible: decision lines and the handover heading print its handle,
        # profile and preference lines the title
        def visible(record_id: str, text: str = text) -> bool:
            return handle(record_id) in text or any(j == record_id and t in text for j, t in titled)

        assert all(visible(i) for i in shown)
        assert len(set(shown)) == len(shown)
        if not (profile or decisions or mine or preferences):
            assert text == ""
        if mine:
            assert f"## Last handover ({mine['valid_from'][:10]}, id {handle(mine['id'])})" in text
            assert mine["id"] in shown


@settings(max_examples=150, deadline=None)
@given(st.lists(rows(), max_size=12, unique_by=lambda r: str(r["id"])))
def test_prompt_injection_stays_within_both_caps(found: list[dict[str, Any]]) -> None:
    text, shown = inject.render(found)
    assert estimate_tokens(text) <= inject.MAX_TOKENS
    assert len(text) <= inject.MAX_CHARS
    assert len(shown) <= inject.TOP_K
    assert len(set(shown)) == len(shown)
    assert bool(text) == bool(shown)
    for record_id in shown:  # named by its handle (issue 25: the full id costs ~47 tokens)
        assert f"id {handle(record_id)}" in text


def test_a_decision_line_says_what_the_body_adds_to_the_title() -> None:
    def line(title: str, body: str, confidence: str = "explicit") -> str:
        row = {"id": "01X", "type": "convention", "title": title, "body": body, "pinned": 0}
        return digest._decision_line({**row, "confidence": confidence, "source": "cli"})

    tagged = line("Use ruff format", "Use ruff format\n(applies to: project)")
    assert tagged == "- [convention | you | stated] Use ruff format (id 01x)"
    repeated = line("Postgres over MySQL", "Postgres over MySQL. Rationale: JSONB and CTEs.")
    assert repeated == (
        "- [convention | you | stated] Postgres over MySQL: Rationale: JSONB and CTEs. (id 01x)"
    )
    plain = line("Short", "A body that says more.", "inferred")
    assert plain == "- [convention | you | unconfirmed] Short: A body that says more. (id 01x)"


def test_a_preference_line_says_what_the_body_adds_to_the_title() -> None:
    def line(title: str, body: str) -> str:
        row = {"id": "01P", "type": "preference", "confidence": "reinforced", "source": "cli"}
        return digest._preference_line({**row, "title": title, "body": body})

    tag = "- [preference | you | reinforced]"
    rule = "Tests are plain pytest functions, never TestCase classes"
    assert line(rule, f"{rule}\n(category: style)") == f"{tag} {rule}"
    assert (
        line("Use pnpm", "Use pnpm. npm breaks the lockfile.")
        == f"{tag} Use pnpm: npm breaks the lockfile."
    )
    assert (
        line("Small commits", "One change per commit.")
        == f"{tag} Small commits: One change per commit."
    )
