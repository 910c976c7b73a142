"""The calls to Claude: forced tool use, a cached system prompt, retries, and what they cost.

The client is ``anthropic.AsyncAnthropic`` configured from the environment as the SDK reads it
(``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``). The SDK retries 408/409/429/5xx (529 included)
with exponential backoff; :data:`MAX_RETRIES` sets how often.

Prompt caching: a ``cache_control`` breakpoint takes effect only on a prefix (tools, then system) of
at least the model's minimum cacheable length (4,096 tokens for Claude Haiku 4.5). A breakpoint is
claimed when the extraction prefix (the tool's schema and the system prompt), as estimated
(:data:`CACHE_PREFIX`), reaches :func:`min_cacheable`. The retrieval cues of the schema (issue 14)
took that estimate from about 3,800 to about 4,400 tokens, so a breakpoint is claimed for Haiku 4.5;
the estimate counts JSON about twice over (docs/token-estimate.md), so the API may still find the
prefix too short and ignore it (nothing cached, nothing charged for it). Cache reads and writes
the API reports are counted and land in the extraction ledger either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import orjson

from agentctx.core.tokens import estimate_tokens
from agentctx.extract.prompt import SYSTEM_PROMPT, TOOL
from agentctx.redact import redact

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import (
        MessageParam,
        TextBlockParam,
        ToolChoiceToolParam,
        ToolParam,
    )

MAX_RETRIES = 4
MAX_OUTPUT_TOKENS = 4096
#: US dollars per million tokens for Claude Haiku 4.5; cache writes cost 1.25×, cache reads 0.1×.
PRICE_INPUT = 1.0
PRICE_OUTPUT = 5.0
NAME = "api"
#: Minimum cacheable prompt length in tokens, by model name prefix (Anthropic's prompt-caching
#: documentation); a model not listed gets the largest.
MIN_CACHEABLE = {
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-sonnet": 1024,
}
#: Estimated tokens of the cacheable prefix every extraction call shares: the tool, then the system.
CACHE_PREFIX = estimate_tokens(orjson.dumps(TOOL).decode()) + estimate_tokens(SYSTEM_PROMPT)


def min_cacheable(model: str) -> int:
    """The model's minimum cacheable prefix in tokens."""
    found = [n for prefix, n in MIN_CACHEABLE.items() if model.startswith(prefix)]
    return found[0] if found else max(MIN_CACHEABLE.values())


@dataclass(slots=True)
class Usage:
    """Token usage summed over calls, and its price."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    calls: int = 0

    def add(self, usage: Any) -> None:
        """Add the ``usage`` object of one API response."""
        self.calls += 1
        self.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
        self.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
        self.cache_creation_input_tokens += int(
            getattr(usage, "cache_creation_input_tokens", 0) or 0
        )
        self.cache_read_input_tokens += int(getattr(usage, "cache_read_input_tokens", 0) or 0)

    def counts(self) -> dict[str, int]:
        """The counts as the extraction ledger and the reports store them."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_tokens": self.cache_creation_input_tokens,
            "cache_read_tokens": self.cache_read_input_tokens,
        }

    def add_counts(self, counts: Any) -> None:
        """Add one call's usage given as a mapping (the ``usage`` of the claude CLI's result)."""
        self.calls += 1
        if not isinstance(counts, dict):
            return
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            value = counts.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                setattr(self, name, getattr(self, name) + value)

    @property
    def tokens(self) -> int:
        """Every token counted: input (cache writes and reads included) and output."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )

    @property
    def cost_usd(self) -> float:
        """The price of these tokens at Haiku 4.5 rates."""
        return (
            self.input_tokens * PRICE_INPUT
            + self.cache_creation_input_tokens * PRICE_INPUT * 1.25
            + self.cache_read_input_tokens * PRICE_INPUT * 0.1
            + self.output_tokens * PRICE_OUTPUT
        ) / 1_000_000


@dataclass(slots=True)
class CallResult:
    """One call's parsed tool input (None when the model did not use the tool) and raw blocks."""

    output: dict[str, Any] | None
    stop_reason: str | None = None
    notes: list[str] = field(default_factory=list)


def make_client() -> AsyncAnthropic:
    """A client configured from the environment, with our retry policy."""
    from anthropic import AsyncAnthropic

    return AsyncAnthropic(max_retries=MAX_RETRIES)


def outbound(text: str) -> str:
    """Text as it may leave for a model, whatever the transport (the API here, the ``claude`` CLI
    in :mod:`agentctx.extract.claude_code`): redacted, in this one place."""
    return redact(text)


async def forced_tool(
    client: AsyncAnthropic,
    model: str,
    *,
    system: str | list[TextBlockParam],
    tool: dict[str, Any],
    user_text: str,
    max_tokens: int,
    usage: Usage,
) -> tuple[bool, Any, str | None]:
    """One call that must use ``tool``: (whether it did, its input, the stop reason).

    Counts the call's tokens in ``usage``; raises the SDK's error when the API fails after its
    retries. Extraction and the near-duplicate merge checks both ask this way: this is the one
    function that builds an API request, and it passes the request's text (transcript, record
    titles and bodies alike) through :func:`outbound` whatever its caller did.
    """
    name = str(tool["name"])
    user_text = outbound(user_text)
    if isinstance(system, str):
        system = outbound(system)
    choice: ToolChoiceToolParam = {"type": "tool", "name": name}
    messages: list[MessageParam] = [{"role": "user", "content": user_text}]
    response = await client.messages.create(
        model=model,
        max_tokens=max_tokens,
        system=system,
        tools=[cast("ToolParam", tool)],
        tool_choice=choice,
        messages=messages,
    )
    usage.add(response.usage)
    for block in response.content:
        if getattr(block, "type", None) == "tool_use" and getattr(block, "name", None) == name:
            return True, getattr(block, "input", None), response.stop_reason
    return False, None, response.stop_reason


async def call(client: AsyncAnthropic, model: str, user_text: str, usage: Usage) -> CallResult:
    """Ask for one extraction; raise the SDK's error when the API fails after its retries."""
    block: TextBlockParam = {"type": "text", "text": SYSTEM_PROMPT}
    if min_cacheable(model) <= CACHE_PREFIX:  # below it a breakpoint is ignored: claim none
        block["cache_control"] = {"type": "ephemeral"}
    system: list[TextBlockParam] = [block]
    called, data, stop = await forced_tool(
        client,
        model,
        system=system,
        tool=TOOL,
        user_text=user_text,
        max_tokens=MAX_OUTPUT_TOKENS,
        usage=usage,
    )
    if not called:
        return CallResult(None, stop, ["the model did not call the extraction tool"])
    if isinstance(data, dict):
        return CallResult(data, stop)
    return CallResult(None, stop, ["tool input is not an object"])


class ApiCaller:
    """Extraction calls through the Messages API (``client``, else one from the environment)."""

    name = NAME
    concurrency = 4

    def __init__(self, client: AsyncAnthropic | None = None) -> None:
        self._own = client is None
        self.client = client or make_client()

    async def __call__(self, model: str, user_text: str, usage: Usage) -> CallResult:
        """One extraction (the SDK's error after its retries)."""
        return await call(self.client, model, user_text, usage)

    async def aclose(self) -> None:
        """Close the client if it is ours."""
        if self._own:
            await self.client.close()
