"""``agentctx search --explain``: what the UserPromptSubmit hook injects for a prompt, and why.

The explanation and the real hook run the same search and the same injection rules
(:mod:`agentctx.core.inject`): the ids it says are injected are the ids the hook injects.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from agentctx.core import search
from agentctx.core.handles import handle
from tests.helpers import contract, payload, run_cli, run_hook, seed

if TYPE_CHECKING:
    from pathlib import Path

RECORDS = [
    {"type": "decision", "title": "gRPC for internal services", "body": "Services talk gRPC."},
    {"type": "decision", "title": "Retry backoff", "body": "Retries back off with jitter."},
    {"type": "convention", "title": "Error handler", "body": "Every handler returns typed errors."},
    {"type": "convention", "title": "Signal handler", "body": "The worker drains its queue."},
    {"type": "decision", "title": "Logging", "body": "structlog, JSON output in production."},
    {"type": "bugfix", "title": "gRPC gateway timeout", "body": "Raise the gateway timeout."},
]
PROMPT = "the grpc gateway timeout again: does the retry backoff cover it, and which handler?"


def test_explain_names_what_the_hook_injects_and_why_the_rest_is_out(project_dir: Path) -> None:
    ids = seed(project_dir, RECORDS)
    result = run_cli("search", "--explain", PROMPT, "--json", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    hook = contract(
        run_hook(
            "user-prompt-submit", payload("UserPromptSubmit", "s1", project_dir, prompt=PROMPT)
        ),
        "UserPromptSubmit",
    )
    assert hook is not None
    assert [handle(i) for i in report["injected"]] == re.findall(r"\| id (\w{8})\]", hook)
    verdicts = {c["id"]: c["verdict"] for c in report["candidates"]}
    assert all(verdicts[i].startswith("injected whole") for i in report["injected"])
    assert all(c["tier"] == "whole" for c in report["candidates"] if c["id"] in report["injected"])
    assert report["meaning"] is False and report["lines"] == []  # no server: keywords alone
    assert any(v.startswith("left out") for v in verdicts.values())
    assert set(verdicts) <= set(ids)
    assert {t["term"] for t in report["terms"] if t["searched"]} >= {"grpc", "gateway", "timeout"}
    for candidate in report["candidates"]:
        assert {"bm25", "score", "relevance"} <= set(candidate)
    text = run_cli("search", "--explain", PROMPT, cwd=project_dir).stdout
    assert "searched terms:" in text and "-> injected" in text


def test_a_floor_that_keeps_nothing_is_explained(project_dir: Path) -> None:
    seed(project_dir, RECORDS)
    assert run_cli("config", "set", "retrieval.min_relevance", "1", cwd=project_dir).returncode == 0
    report = json.loads(run_cli("search", "--explain", PROMPT, "--json", cwd=project_dir).stdout)
    assert report["injected"] == [] and report["candidates"]
    assert all("below the floor 1" in c["verdict"] for c in report["candidates"])
    hook = run_hook(
        "user-prompt-submit", payload("UserPromptSubmit", "s2", project_dir, prompt=PROMPT)
    )
    assert contract(hook, "UserPromptSubmit") is None


def test_the_raised_floor_of_a_record_with_cues_is_explained(project_dir: Path) -> None:
    cued = {**RECORDS[-1], "cues": ["why do grpc calls through the gateway time out"]}
    ids = seed(project_dir, [*RECORDS[:-1], cued])
    assert run_cli("config", "set", "retrieval.min_relevance", "0.95").returncode == 0
    report = json.loads(run_cli("search", "--explain", PROMPT, "--json", cwd=project_dir).stdout)
    verdicts = {c["id"]: c["verdict"] for c in report["candidates"]}
    assert "below the floor 1.05 (raised: it has retrieval cues)" in verdicts[ids[-1]]
    assert all("raised" not in v for i, v in verdicts.items() if i != ids[-1])


def test_a_prompt_with_too_little_content_is_explained(project_dir: Path) -> None:
    """ "do the same for the other handler": "handler" is in two records, yet nothing to go on."""
    seed(project_dir, RECORDS)
    text = "yes do the same for the other handler"
    report = json.loads(run_cli("search", "--explain", text, "--json", cwd=project_dir).stdout)
    assert report["injected"] == [] and report["candidates"]
    assert report["content"] < 1.0
    assert all("too little to search on" in c["verdict"] for c in report["candidates"])
    assert {t["term"]: t["specificity"] < 1 for t in report["terms"]}["handler"]
    hook = run_hook(
        "user-prompt-submit", payload("UserPromptSubmit", "s3", project_dir, prompt=text)
    )
    assert contract(hook, "UserPromptSubmit") is None


def test_agentctx_debug_logs_the_explanation(project_dir: Path, agentctx_home: Path) -> None:
    ids = seed(project_dir, RECORDS)
    event = payload("UserPromptSubmit", "s4", project_dir, prompt=PROMPT)
    quiet = contract(run_hook("user-prompt-submit", event), "UserPromptSubmit")
    log = agentctx_home / "logs" / "hooks.log"
    assert "explain:" not in (log.read_text() if log.exists() else "")
    event = payload("UserPromptSubmit", "s5", project_dir, prompt=PROMPT)
    loud = contract(
        run_hook("user-prompt-submit", event, env={"AGENTCTX_DEBUG": "1"}), "UserPromptSubmit"
    )
    assert loud == quiet  # the explanation changes nothing injected
    lines = [line for line in log.read_text().splitlines() if " explain: " in line]
    assert len(lines) == 1
    assert "content" in lines[0] and f"floor {search.MIN_RELEVANCE:g}" in lines[0]
    assert any(f"{i} rel " in lines[0] for i in ids)
