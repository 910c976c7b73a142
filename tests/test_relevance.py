"""The relevance floor: term weights, the hook on realistic prompts, the config key.

The store is a small, plausible project memory (a Python parsing library); the prompts are written
the way developers type them into Claude Code: long, chatty, with the topic somewhere in the middle.
A prompt that touches a record must still get it; a prompt about something the store has never
heard of must get nothing, even when it shares a common word with a record.
"""

from __future__ import annotations

import math
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from agentctx import config
from agentctx.core import plan, search, writes
from agentctx.core.connect import open_db
from agentctx.core.errors import ConfigError
from agentctx.core.project import identify
from agentctx.hooks import prompt
from agentctx.hooks.runner import HookContext
from agentctx.store import Store
from tests.helpers import new_record

if TYPE_CHECKING:
    from pathlib import Path

#: (type, title, body); the project's memory.
MEMORY: dict[str, tuple[str, str, str]] = {
    "anyio": (
        "convention",
        "Async tests run under pytest with the anyio plugin",
        "Async tests are marked @pytest.mark.anyio; never call asyncio.run inside a test. Run the "
        "suite with `uv run pytest -q`.",
    ),
    "flaky": (
        "discovery",
        "test_parse_dates is flaky: it depends on the local timezone",
        "test_parse_dates fails about one run in five on CI because the parser reads the TZ "
        "environment variable; the test must pin TZ=UTC.",
    ),
    "empty": (
        "bugfix",
        "Parser crashed on empty input files",
        "Parser.parse raised IndexError on an empty file because the tokenizer returned no "
        "tokens; it now returns an empty Document.",
    ),
    "ruff": (
        "decision",
        "ruff for linting and formatting",
        "ruff check and ruff format replace flake8, isort and black; configured in pyproject.toml.",
    ),
    "cache": (
        "decision",
        "Parsed documents are cached in SQLite",
        "Parsed documents are cached in a SQLite file under ~/.cache/parsekit, in WAL mode.",
    ),
    "errors": (
        "convention",
        "Errors derive from ParseError",
        "Every exception the library raises on purpose derives from parsekit.errors.ParseError "
        "and names the line and column.",
    ),
    "release": (
        "decision",
        "Releases go out from GitHub Actions on version tags",
        "The release workflow builds the wheel and publishes it to PyPI when a v* tag is pushed.",
    ),
    "translate": (
        "discovery",
        "The tokenizer is three times faster with str.translate",
        "Replacing the per-character loop in the tokenizer with str.translate made it 3x faster.",
    ),
    "crlf": (
        "bugfix",
        "Windows line endings broke the line counter",
        "Files with \\r\\n endings counted every line twice; newlines are normalized first.",
    ),
    "hints": (
        "convention",
        "Public functions have type hints and docstrings",
        "mypy runs in strict mode on the package; every public function has a docstring.",
    ),
    "click": (
        "decision",
        "click for the command line",
        "The command line uses click, not argparse; the commands live in parsekit/cli.py.",
    ),
    "handover": (
        "handover",
        "Handover: streaming parser API",
        "Next: finish Parser.iter_documents. Open question: should it yield partial documents "
        "when the input ends mid-document?",
    ),
}

SHORT_FLAKY = (
    "hey, can you fix the flaky test in the parser? it fails maybe one run in five on CI, "
    "we use pytest"
)
LONG_BUG_REPORT = (
    "ok so I was looking at the output from yesterday's nightly run and something's off: the "
    "parser seems to choke whenever the input file is empty, it just throws an IndexError "
    "instead of returning an empty document. could you take a look, write a regression test "
    "for it and make sure the whole suite still passes before you commit anything?"
)
KUBERNETES = (
    "Please write a Kubernetes Helm chart for the metrics exporter, with a Grafana dashboard "
    "and alerts on the error rate."
)

#: Prompts that touch a record: (prompt, the record it must inject).
TOUCHING = [
    pytest.param(SHORT_FLAKY, "flaky", id="short-chatty"),
    pytest.param(LONG_BUG_REPORT, "empty", id="long-bug-report"),
    pytest.param(
        "Quick one while I grab a coffee: the async tests in tests/test_stream.py hang forever on "
        "my laptop since I upgraded everything this morning, the event loop never seems to finish. "
        "Can you figure out what is wrong and fix them? Probably worth checking how we mark async "
        "tests in the rest of the suite first.",
        "anyio",
        id="long-two-words",
    ),
    pytest.param(
        "ugh, the line counts are way off on the files my colleague sent over from his Windows "
        "machine, like double what they should be. can you have a look at the counter?",
        "crlf",
        id="paraphrased-bug",
    ),
    pytest.param(
        "let's pick up where we left off, Parser.iter_documents still needs finishing",
        "handover",
        id="identifier",
    ),
]

#: Prompts about things the memory has never heard of, each sharing a common word with it.
UNTOUCHED = [
    pytest.param(KUBERNETES, id="kubernetes"),
    pytest.param(
        "Could you look into setting up Sentry for the project? I'd like crash reports from the "
        "CLI to show up there with the stack trace, the operating system and the Python version, "
        "but without any user data leaving the machine.",
        id="sentry",
    ),
]


def seed(project_dir: Path) -> dict[str, str]:
    """MEMORY in the project of ``project_dir``: name -> record id."""
    project = identify(str(project_dir))

    async def go() -> dict[str, str]:
        async with await Store.open() as store:
            await store.touch_project(project)
            made = {}
            for name, (kind, title, body) in MEMORY.items():
                record = await store.add(
                    new_record(type=kind, title=title, body=body, project_id=project.project_id)
                )
                made[name] = record.id
            return made

    return anyio.run(go)


def injected(project_dir: Path, text: str, **data: Any) -> str | None:
    """What UserPromptSubmit prints for ``text`` (in process, no session: no dedup)."""
    ctx = HookContext("UserPromptSubmit", {"prompt": text, "cwd": str(project_dir), **data})
    return prompt.handle(ctx)


def candidates(project_dir: Path, text: str) -> tuple[list[str], dict[str, float]]:
    """The hook's ranking without a floor, and each candidate's relevance."""
    ctx = HookContext("UserPromptSubmit", {"prompt": text, "cwd": str(project_dir)})
    conn = open_db(ctx.log)
    assert conn is not None
    try:
        terms = search.query_terms(text)
        found = plan.run(conn, search.for_prompt(terms, ctx.project.project_id, floor=0.0))
        ids = [row["id"] for row, _score in found.hits]
        return ids, plan.run(conn, search.relevances(terms, ids))
    finally:
        conn.close()


# -- the hook on realistic prompts ----------------------------------------------------------------


@pytest.mark.parametrize(("text", "name"), TOUCHING)
def test_a_prompt_that_touches_a_record_still_gets_it(
    project_dir: Path, text: str, name: str
) -> None:
    ids = seed(project_dir)
    title = MEMORY[name][1]
    out = injected(project_dir, text)
    assert out is not None and title in out, out
    _, scores = candidates(project_dir, text)
    assert scores[ids[name]] >= search.MIN_RELEVANCE


@pytest.mark.parametrize("text", UNTOUCHED)
def test_a_prompt_nothing_answers_gets_nothing(project_dir: Path, text: str) -> None:
    seed(project_dir)
    ranked, scores = candidates(project_dir, text)
    assert ranked, "the prompt shares a word with the memory: without a floor it got records"
    assert max(scores.values()) < search.MIN_RELEVANCE
    assert injected(project_dir, text) is None


def test_the_floor_keeps_the_relevant_and_drops_the_rest_of_one_answer(project_dir: Path) -> None:
    ids = seed(project_dir)
    text = LONG_BUG_REPORT
    ranked, scores = candidates(project_dir, text)
    kept = [i for i in ranked if scores[i] >= search.MIN_RELEVANCE]
    assert kept[0] == ids["empty"]
    assert len(kept) < len(ranked), "records that share one word with the prompt are dropped"
    out = injected(project_dir, text)
    assert out is not None
    assert out.count("\n### ") == len(kept[:3])


def test_min_relevance_zero_turns_the_floor_off(project_dir: Path) -> None:
    seed(project_dir)
    text = KUBERNETES
    assert injected(project_dir, text) is None
    config.set_value("retrieval.min_relevance", "0")
    assert injected(project_dir, text) is not None


def test_a_higher_floor_is_read_from_the_config(project_dir: Path) -> None:
    seed(project_dir)
    text = LONG_BUG_REPORT
    assert injected(project_dir, text) is not None
    config.set_value("retrieval.min_relevance", "1")
    assert injected(project_dir, text) is None


def test_an_unreadable_config_means_the_default_floor(
    project_dir: Path, agentctx_home: Path
) -> None:
    seed(project_dir)
    (agentctx_home / "config.json").write_text("{not json", encoding="utf-8")
    assert injected(project_dir, KUBERNETES) is None
    out = injected(project_dir, SHORT_FLAKY)
    assert out is not None and MEMORY["flaky"][1] in out
    log = (agentctx_home / "logs" / "hooks.log").read_text(encoding="utf-8")
    assert "config.json" in log and "default settings" in log  # the default floor, and said so


def test_a_single_searched_term_needs_no_lookup(project_dir: Path) -> None:
    ids = seed(project_dir)
    ranked, scores = candidates(project_dir, "tokenizer")
    assert set(ranked) == {ids["empty"], ids["translate"]}
    assert set(scores.values()) == {1.0}


# -- term weights ---------------------------------------------------------------------------------


def test_an_absent_term_weighs_as_much_as_the_rarest() -> None:
    absent, once, often = search.term_weights([0, 1, 40], 100)
    assert absent == once > often > 0
    assert once == pytest.approx(math.log(1 + 99.5 / 1.5))


def test_the_denominator_is_the_ten_heaviest_terms() -> None:
    terms = [f"t{i}" for i in range(15)]
    counts = [0] * 14 + [5]
    weights, denominator = search.relevance_weights(terms, counts, ["t14"], 100)
    unit = search.term_weights([1], 100)[0]
    assert set(weights) == {"t14"}
    assert denominator == pytest.approx(search.RELEVANCE_TERMS * unit)


def test_terms_left_out_as_too_common_count_on_neither_side() -> None:
    weights, denominator = search.relevance_weights(
        ["rare", "everywhere"], [2, 5000], ["rare"], 10_000
    )
    assert set(weights) == {"rare"}
    assert denominator == pytest.approx(weights["rare"])
    assert search.relevance(["rare"], weights, denominator) == 1.0


def test_relevance_is_a_share_from_zero_to_one() -> None:
    weights = {"a": 2.0, "b": 1.0}
    assert search.relevance([], weights, 4.0) == 0.0
    assert search.relevance(["a", "a"], weights, 4.0) == 0.5
    assert search.relevance(["a", "b", "c"], weights, 2.0) == 1.0
    assert search.relevance(["a"], weights, 0.0) == 1.0


def test_term_hits_match_as_fts5_does(project_dir: Path) -> None:
    ids = seed(project_dir)
    ctx = HookContext("UserPromptSubmit", {"prompt": "x", "cwd": str(project_dir)})
    conn = open_db(ctx.log)
    assert conn is not None
    try:
        wanted = [ids["empty"], ids["translate"], ids["ruff"]]
        terms = ["tokenizers", "documents", "flake8"]  # porter: tokenizer, document
        sql, params = search.term_hits_sql(terms, wanted)
        found = search.matched_terms(terms, conn.execute(sql, params).fetchall())
    finally:
        conn.close()
    assert found == {
        ids["empty"]: {"tokenizers", "documents"},
        ids["translate"]: {"tokenizers"},
        ids["ruff"]: {"flake8"},
    }


# -- the config key -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"), [("0", 0.0), ("0.2", 0.2), (" 1 ", 1.0), (0.35, 0.35), ("1e-1", 0.1)]
)
def test_min_relevance_takes_a_number_from_zero_to_one(raw: Any, value: float) -> None:
    assert config.coerce("retrieval.min_relevance", raw) == value


@pytest.mark.parametrize("raw", ["1.5", "-0.1", "nan", "inf", "many", True, ""])
def test_min_relevance_refuses_anything_else(raw: Any) -> None:
    with pytest.raises(ConfigError, match="takes a number from 0 to 1"):
        config.coerce("retrieval.min_relevance", raw)


def test_floors_have_their_defaults() -> None:
    values = config.load()
    assert values["retrieval.min_relevance"] == search.MIN_RELEVANCE == 0.3
    assert values["retrieval.min_similarity"] == 0.0


def test_a_bad_stored_floor_falls_back_and_doctor_says_so(agentctx_home: Path) -> None:
    agentctx_home.mkdir(parents=True, exist_ok=True)
    (agentctx_home / "config.json").write_text('{"retrieval.min_relevance": 7}', encoding="utf-8")
    assert config.load()["retrieval.min_relevance"] == 0.3
    assert any("from 0 to 1" in problem for problem in config.problems())


def test_reading_the_config_does_not_import_json(agentctx_home: Path) -> None:
    config.set_value("retrieval.min_relevance", "0.2")
    probe = (
        "import sys\n"
        "from agentctx import config\n"
        "value = config.get('retrieval.min_relevance')\n"
        "print(value, 'json' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["0.2", "False"]


def test_a_record_with_cues_must_clear_a_raised_floor(project_dir: Path) -> None:
    ids = seed(project_dir)
    text = LONG_BUG_REPORT
    _, scores = candidates(project_dir, text)
    value = scores[ids["empty"]]
    # A floor just under the record's relevance: injected while it has no cues.
    config.set_value("retrieval.min_relevance", f"{value - search.CUED_FLOOR_RAISE / 2:.4f}")
    out = injected(project_dir, text)
    assert out is not None and MEMORY["empty"][1] in out

    async def give_cues() -> None:  # words the prompt does not hold: its relevance stays the same
        async with await Store.open() as store:
            await store.write(writes.update_cues(ids["empty"], ["zebra quartet walrus"]))

    anyio.run(give_cues)
    assert candidates(project_dir, text)[1][ids["empty"]] == pytest.approx(value)
    out = injected(project_dir, text)
    assert out is None or MEMORY["empty"][1] not in out
    assert search.record_floor(0.3, {"cues": "x"}) == pytest.approx(0.4)
    assert search.record_floor(0.3, {"cues": ""}) == 0.3
    assert search.record_floor(0.0, {"cues": "x"}) == 0.0  # no floor stays no floor
