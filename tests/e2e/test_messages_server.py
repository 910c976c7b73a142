"""The Messages API stand-in, checked with the real ``anthropic`` client (fast, offline, no marker).

These run in the default suite: the e2e test and the extraction tests both rely on the server
speaking the API exactly (JSON and server-sent events, tool use, errors the SDK retries).
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import anthropic
import pytest
from anthropic.types import TextBlock, ToolParam, ToolUseBlock

from tests.messages_server import ErrorReply, MessagesServer, TextReply, ToolUseReply, forced_tool

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.messages_server import Recorded, Reply

MODEL = "claude-haiku-4-5"
TOOL: ToolParam = {
    "name": "record_facts",
    "description": "Record facts.",
    "input_schema": {"type": "object", "properties": {"facts": {"type": "array"}}},
}
TOOL_INPUT = {"facts": [{"title": "Use gRPC — not REST", "tags": ["rpc", "naïve"], "n": 3}]}


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as running:
        yield running


def client_for(server: MessagesServer, max_retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="sk-fake", max_retries=max_retries)


def test_json_text_reply_and_the_recorded_request(server: MessagesServer) -> None:
    server.push(TextReply("Hello."))
    with client_for(server) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
        )
    assert [type(b) for b in message.content] == [TextBlock]
    assert isinstance(message.content[0], TextBlock) and message.content[0].text == "Hello."
    assert (message.role, message.model, message.stop_reason) == ("assistant", MODEL, "end_turn")
    assert message.id.startswith("msg_") and message.usage.input_tokens > 0
    (request,) = server.requests
    assert (request.method, request.path, request.route) == ("POST", "/v1/messages", "/v1/messages")
    assert request.headers["user-agent"].startswith("Anthropic/Python")
    assert "anthropic-version" in request.headers
    assert request.body["messages"] == [{"role": "user", "content": "Hi"}]
    assert not request.stream and request.texts() == ["Hi"]


def test_forced_tool_use_comes_back_parsed(server: MessagesServer) -> None:
    server.push(ToolUseReply("record_facts", TOOL_INPUT))
    with client_for(server) as client:
        message = client.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=[TOOL],
            tool_choice={"type": "tool", "name": "record_facts"},
            messages=[{"role": "user", "content": "Extract."}],
        )
    (block,) = message.content
    assert isinstance(block, ToolUseBlock)
    assert (block.name, block.input, message.stop_reason) == (
        "record_facts",
        TOOL_INPUT,
        "tool_use",
    )
    assert block.id.startswith("toolu_")


def test_streamed_text_and_tool_use(server: MessagesServer) -> None:
    long_text = "A streamed answer, " * 10
    server.push(ToolUseReply("record_facts", TOOL_INPUT, text=long_text))
    with (
        client_for(server) as client,
        client.messages.stream(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Go"}]
        ) as stream,
    ):
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    text, tool = final.content
    assert isinstance(text, TextBlock) and text.text == long_text
    assert isinstance(tool, ToolUseBlock) and tool.input == TOOL_INPUT
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds and "text" in kinds  # the SDK's events for the two delta kinds
    assert server.requests[0].stream


def test_script_decides_then_queue_then_default(server: MessagesServer) -> None:
    def script(request: Recorded) -> Reply | None:
        return TextReply("scripted") if "script" in request.texts() else None

    with MessagesServer(script, replies=[TextReply("queued")], default=TextReply("default")) as own:
        with client_for(own) as client:
            answers = []
            for prompt in ("script", "other", "other", "script"):
                message = client.messages.create(
                    model=MODEL, max_tokens=10, messages=[{"role": "user", "content": prompt}]
                )
                block = message.content[0]
                assert isinstance(block, TextBlock)
                answers.append(block.text)
        assert answers == ["scripted", "queued", "default", "scripted"]
        assert len(own.messages_requests()) == 4


@pytest.mark.parametrize(
    ("status", "error_type", "exception"),
    [
        (429, "rate_limit_error", anthropic.RateLimitError),
        (500, "api_error", anthropic.InternalServerError),
        (529, "overloaded_error", anthropic.OverloadedError),
    ],
)
def test_errors_in_the_api_shape(
    server: MessagesServer, status: int, error_type: str, exception: type[Exception]
) -> None:
    server.push(ErrorReply(status, "try later"))
    with client_for(server) as client, pytest.raises(exception) as caught:
        client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}], stream=True
        )
    assert isinstance(caught.value, anthropic.APIStatusError)
    assert caught.value.status_code == status
    assert caught.value.body == {
        "type": "error",
        "error": {"type": error_type, "message": "try later"},
    }
    assert caught.value.response.headers["request-id"].startswith("req_")


def test_the_sdk_retries_scripted_errors(server: MessagesServer) -> None:
    server.push(
        ErrorReply(529, retry_after=0.01), ErrorReply(429, retry_after=0.01), TextReply("ok")
    )
    with client_for(server, max_retries=2) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert isinstance(message.content[0], TextBlock) and message.content[0].text == "ok"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "2"]


def test_count_tokens_and_other_paths(server: MessagesServer) -> None:
    with client_for(server) as client:
        counted = client.messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "How many tokens is this?"}]
        )
    assert counted.input_tokens > 0
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.url}/api/hello", timeout=10)
    assert caught.value.code == 404
    assert json.loads(caught.value.read())["error"]["type"] == "not_found_error"
    caught.value.close()
    assert [r.route for r in server.requests] == ["/v1/messages/count_tokens", "/api/hello"]
    assert server.messages_requests() == []


def test_latency_and_concurrent_requests(server: MessagesServer) -> None:
    arrived = threading.Barrier(3, timeout=10)

    def script(request: Recorded) -> Reply:
        arrived.wait()  # all three are in flight at once, or this breaks and the call fails
        return TextReply("together", latency=0.1)

    def ask(client: anthropic.Anthropic) -> str:
        message = client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
        block = message.content[0]
        return block.text if isinstance(block, TextBlock) else ""

    with MessagesServer(script, latency=0.1) as own, client_for(own) as client:
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(ask, [client] * 3))
        assert answers == ["together"] * 3
        assert own.delays == [0.1 + 0.1] * 3  # server latency plus the reply's own


def test_chunked_request_body_and_wait_for(server: MessagesServer) -> None:
    body = json.dumps({"model": MODEL, "max_tokens": 5, "messages": []}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(
            "POST",
            "/v1/messages?beta=true",
            body=iter([body[:10], body[10:]]),
            headers={"content-type": "application/json"},
            encode_chunked=True,
        )
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read())["type"] == "message"
    finally:
        conn.close()
    seen = server.wait_for(lambda requests: len(requests) == 1, timeout=5)
    assert seen[0].body["max_tokens"] == 5 and seen[0].route == "/v1/messages"
    with pytest.raises(TimeoutError):
        server.wait_for(lambda requests: len(requests) == 2, timeout=0.05)


def test_routes_play_several_models_on_one_server(server: MessagesServer) -> None:
    """The first matching route answers; a None from it falls back to the queue, then default."""

    def haiku(request: Recorded) -> bool:
        return request.model.startswith("claude-haiku")

    server.route(forced_tool("record_facts"), lambda request: ToolUseReply("record_facts", {}))
    server.route(haiku, lambda request: None)
    server.route(haiku, lambda request: TextReply("never: shadowed"))
    server.push(TextReply("queued"))
    with client_for(server) as client:
        forced = client.messages.create(
            model=MODEL,
            max_tokens=10,
            tools=[TOOL],
            tool_choice={"type": "tool", "name": "record_facts"},
            messages=[{"role": "user", "content": "Extract. ghp_notasecret"}],
        )
        other = client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
        main = client.messages.create(
            model="claude-opus-4-8", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
    assert isinstance(forced.content[0], ToolUseBlock)
    texts = [b.text for m in (other, main) for b in m.content if isinstance(b, TextBlock)]
    assert texts == ["queued", "OK"]
    (request,) = server.messages_requests(forced_tool("record_facts"))
    assert request.tool_choice == "record_facts" and b"ghp_notasecret" in request.raw
    assert json.loads(request.raw) == request.body
