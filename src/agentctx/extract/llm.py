"""The calls to Claude: forced tool use, a cached system prompt, retries, and what they cost.

The client is ``anthropic.AsyncAnthropic`` configured from the environment as the SDK reads it
(``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``). The SDK retries 408/409/429/5xx (529 included)
with exponential backoff; :data:`MAX_RETRIES` sets how often. The system prompt carries a
``cache_control`` breakpoint so that repeated extractions in a day read it at a tenth of the price.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

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
    function that builds a model request, so it redacts the request's text (transcript, record
    titles and bodies alike) whatever its caller did -- no new caller can forget it.
    """
    name = str(tool["name"])
    user_text = redact(user_text)
    if isinstance(system, str):
        system = redact(system)
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
    system: list[TextBlockParam] = [
        {"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}
    ]
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
