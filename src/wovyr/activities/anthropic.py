"""The Anthropic Messages API as a provider `kind: anthropic`: the gateway's one mapping
between the conversation the `llm` and `agent` kinds keep (OpenAI chat-completions messages,
which is also what the journal records) and a Messages exchange.

Request: `system` messages become the top-level `system`; a user message's content parts
become `text`, `image` (`source: {type: url}` or `{type: base64, media_type, data}`) and
`document` (a PDF, base64) blocks; an assistant message's
`tool_calls` become `tool_use` content blocks (`input` is the parsed arguments); the `tool`
messages that answer them become `tool_result` blocks of one `user` message (an `error: ...`
result is sent with `is_error`); consecutive messages of one role are merged (the API wants
turns that alternate); `tools` are `{name, description, input_schema}`; `max_tokens`, which
the API requires, defaults to `DEFAULT_MAX_TOKENS`. `response_format` has no counterpart and
is not sent: the `llm` kind validates the answer against its schema either way. The options
a step or the provider sets (`wovyr.kinds.options.ANTHROPIC_OPTIONS`: `top_k`,
`stop_sequences`, `thinking`, `tool_choice`, ...) are sent as they are. `stream: true` asks
for the answer as server-sent events (`MessageStream` assembles them).

Response: text blocks joined are the message's `content`, `tool_use` blocks its
`tool_calls` (arguments as JSON text); `stop_reason` maps to the chat-completions
`finish_reason` (`end_turn` and `stop_sequence` -> `stop`, `tool_use` -> `tool_calls`,
`max_tokens` and `model_context_window_exceeded` -> `length`, `refusal` -> `content_filter`);
`usage.input_tokens` and `usage.output_tokens` are the usage.

A streamed answer is the documented event sequence: `message_start` (the model, the input
tokens), for each content block `content_block_start` (`text`, or `tool_use` with its id
and name), `content_block_delta`s (`text_delta` text, each piece handed on as it arrives;
`input_json_delta` fragments of a tool call's arguments, concatenated) and
`content_block_stop`, then `message_delta` (the `stop_reason`, the output tokens) and
`message_stop`; `ping`s anywhere. An `error` event (`overloaded_error` mid-stream) fails the
call as that error; a stream that ends before `message_stop` is malformed.

The key goes in the `x-api-key` header only, with `anthropic-version: 2023-06-01`.
"""

from __future__ import annotations

import json
from typing import Any

from wovyr.kinds.options import ANTHROPIC_OPTIONS

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "MessageStream",
    "headers",
    "parse_message",
    "request_body",
]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls"}
_STOP |= {"max_tokens": "length", "model_context_window_exceeded": "length"}
_STOP["refusal"] = "content_filter"  # the streaming classifiers stopped the answer


def headers(api_key: str | None) -> dict[str, str]:
    out = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if api_key:
        out["x-api-key"] = api_key
    return out


def request_body(body: dict[str, Any]) -> dict[str, Any]:
    """The Messages request for a chat-completions `body` (see the module docstring)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in body.get("messages") or ():
        role = message.get("role")
        if role == "system":
            if message.get("content"):
                system.append(str(message["content"]))
            continue
        if role == "tool":
            blocks = [_tool_result(message)]
            role = "user"
        elif role == "assistant":
            blocks = _assistant_blocks(message)
        else:
            role = "user"
            blocks = _user_blocks(message.get("content"))
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    out: dict[str, Any] = {
        "model": body.get("model"),
        "max_tokens": int(body.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "messages": turns,
    }
    if system:
        out["system"] = "\n\n".join(system)
    if body.get("temperature") is not None:
        out["temperature"] = body["temperature"]
    if body.get("stream"):
        out["stream"] = True
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description") or "",
            "input_schema": t["function"].get("parameters") or {"type": "object"},
        }
        for t in body.get("tools") or ()
        if t.get("type") == "function"
    ]
    if tools:
        out["tools"] = tools
    for key in sorted(ANTHROPIC_OPTIONS & body.keys()):  # `options:`, checked at dispatch
        out[key] = body[key]
    return out


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    """A user message's content as blocks: text, or its parts (`text`; `image` by URL or
    base64 data; `file`, a PDF, as a base64 `document`)."""
    if not isinstance(content, list):
        return [{"type": "text", "text": str(content or "")}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind, url = part.get("type"), str(part.get("url") or "")
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("text") or "")})
            continue
        if url.startswith("data:"):
            media_type, _, data = url.removeprefix("data:").partition(";base64,")
            source = {"type": "base64", "media_type": media_type, "data": data}
        else:
            source = {"type": "url", "url": url}
        if kind == "image":
            blocks.append({"type": "image", "source": source})
        else:
            block: dict[str, Any] = {"type": "document", "source": source}
            if part.get("filename"):
                block["title"] = str(part["filename"])
            blocks.append(block)
    return blocks or [{"type": "text", "text": ""}]


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": str(message["content"])})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        if not isinstance(arguments, dict):
            arguments = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id")),
                "name": str(function.get("name")),
                "input": arguments,
            }
        )
    return blocks or [{"type": "text", "text": ""}]


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    content = str(message.get("content") or "")
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": str(message.get("tool_call_id")),
        "content": content,
    }
    if content.startswith("error: "):
        block["is_error"] = True
    return block


def parse_message(data: Any) -> tuple[dict[str, Any], str | None, int, int, str | None]:
    """The assistant message (chat-completions form), finish reason, input and output
    tokens and model of a Messages response; `ValueError`/`KeyError`/`TypeError` when it is
    not one."""
    if not isinstance(data, dict) or not isinstance(data["content"], list):
        raise TypeError("content is not a list of blocks")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in data["content"]:
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": str(block["id"]),
                    "type": "function",
                    "function": {
                        "name": str(block["name"]),
                        "arguments": json.dumps(block.get("input") or {}),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    stop = data.get("stop_reason")
    usage = data.get("usage") or {}
    return (
        message,
        _STOP.get(str(stop), stop),
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        data.get("model"),
    )


class MessageStream:
    """A streamed Messages answer assembled from its events (see the module docstring):
    `feed` each event's data object, in order; it returns the text piece the event adds
    (None for any other event). `done` once `message_stop` came; `result()` is then what
    `parse_message` gives for a whole answer. `failed`: the error type of an `error` event
    (the stream ends there)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.done = False
        self.failed: str | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = str(message.get("model") or self.model)
            self._usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event["content_block"])
            block.setdefault("text", "")
            block["json"] = ""
            self._blocks[int(event["index"])] = block
        elif kind == "content_block_delta":
            block, delta = self._blocks[int(event["index"])], event["delta"]
            if delta.get("type") == "text_delta":
                piece = str(delta.get("text") or "")
                block["text"] += piece
                return piece
            if delta.get("type") == "input_json_delta":
                block["json"] += str(delta.get("partial_json") or "")
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason")
            self._finish = _STOP.get(str(stop), stop) if stop is not None else self._finish
            self._usage.update(event.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.failed = str((event.get("error") or {}).get("type") or "error")
        return None

    def result(self) -> tuple[dict[str, Any], str | None, int, int, str, int]:
        """(message, finish reason, input tokens, output tokens, model, cached tokens)."""
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for _, block in sorted(self._blocks.items()):
            if block.get("type") == "text":
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                arguments = block["json"] or json.dumps(block.get("input") or {})
                calls.append(
                    {
                        "id": str(block["id"]),
                        "type": "function",
                        "function": {"name": str(block["name"]), "arguments": arguments},
                    }
                )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
        if calls:
            message["tool_calls"] = calls
        usage = self._usage
        return (
            message,
            self._finish,
            int(usage.get("input_tokens") or 0),
            int(usage.get("output_tokens") or 0),
            self.model,
            int(usage.get("cache_read_input_tokens") or 0),
        )
