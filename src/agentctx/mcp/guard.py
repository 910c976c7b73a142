"""A guard between the SDK's stdio transport and the server: every bad line gets a JSON-RPC error.

The SDK's stdio reader hands a line it cannot validate to the server as an exception, which the
server only logs: the client waits for a reply that never comes. Here each such line is answered
(issue 16, finding 7) and the server keeps serving:

* not JSON at all → ``-32700`` (parse error), id null;
* JSON holding a lone surrogate (``"\\ud800"``: valid JSON, not valid Unicode, refused by the SDK's
  parser) → ``-32602`` (invalid params) to the request's id, so the tool call gets its error;
* JSON that is not a JSON-RPC message → ``-32600`` (invalid request), to its id when it has one.
"""

import json
import re
from typing import Any

import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

SURROGATE_MESSAGE = (
    "invalid params: the arguments hold a lone surrogate, which is not valid Unicode"
)


def reply_to_bad_line(exc: Exception) -> SessionMessage | None:
    """The error reply to a line the SDK could not read (None: nothing to answer, a notification)."""
    raw = _raw_line(exc)
    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, "parse error: the line is not valid JSON")
    if data is None and raw is None:
        return _error(None, types.PARSE_ERROR, "parse error: the line is not valid JSON")
    request_id = _id_of(data)
    if _has_surrogate(raw or ""):
        if isinstance(data, dict) and "id" not in data:
            return None  # a notification gets no reply, even an error
        return _error(request_id, types.INVALID_PARAMS, SURROGATE_MESSAGE)
    return _error(request_id, types.INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message")


def _raw_line(exc: Exception) -> str | None:
    if isinstance(exc, ValidationError):
        for error in exc.errors():
            if error.get("type") == "json_invalid" and isinstance(error.get("input"), str):
                return str(error["input"])
        return "{}"  # valid JSON that is not a message: the parsed input is not kept raw
    return None


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")


def _has_surrogate(raw: str) -> bool:
    return _SURROGATE.search(raw) is not None


def _id_of(data: Any) -> str | int | None:
    if isinstance(data, dict):
        value = data.get("id")
        if isinstance(value, str) and not _has_surrogate(json.dumps(value)):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _error(request_id: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        )
    )


async def guard(read_stream: Any, write_stream: Any, server_writer: Any) -> None:
    """Forward good messages to the server; answer every bad line on ``write_stream`` itself."""
    async with server_writer:
        async for item in read_stream:
            if isinstance(item, Exception):
                reply = reply_to_bad_line(item)
                if reply is not None:
                    await write_stream.send(reply)
                continue
            await server_writer.send(item)


def guarded_streams() -> tuple[Any, Any]:
    """The (writer, reader) pair the guard forwards good messages through."""
    return create_context_streams[SessionMessage | Exception](0)
