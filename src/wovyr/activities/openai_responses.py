"""OpenAI's Responses API as a provider `kind: openai-responses`: the gateway's one mapping
between the conversation the `llm` and `agent` kinds keep (OpenAI chat-completions messages,
which is also what the journal records) and a Responses exchange (`POST {base_url}/responses`).

Request: `system` messages become the top-level `instructions`; the others become `input`
items: a user message keeps its text, or its content parts become `input_text`,
`input_image` (`image_url`: an http(s) or `data:` URL) and `input_file` (`file_data`, a
`data:` URL with its `filename`; `file_url` for an http(s) URL) parts; an assistant message
is a message item of its text followed by one `function_call` item per tool call
(`call_id`, `name`, `arguments` as JSON text); the `tool` messages that answer them are
`function_call_output` items (`call_id`, `output`). `tools` are `{type: function, name,
description, parameters, strict}` (`strict` false unless the tool says so: the API's default
is true, which refuses a schema that leaves a property optional); the token limit is
`max_output_tokens`; a `json_schema` `response_format` is `text.format` (`{type:
json_schema, name, schema, strict}`); `stream_options` is not sent (a streamed answer ends
with its usage anyway). The conversation is sent whole every time: nothing is kept on the
provider's side (no `previous_response_id`). The options a step or the provider sets
(`wovyr.kinds.options.RESPONSES_OPTIONS`: `reasoning`, `text`, `truncation`, `include`,
...) are sent as they are.

Response: the `output_text` parts of the `message` items joined are the message's
`content` (a `refusal` part its `refusal`), the `function_call` items its `tool_calls` (the
`call_id` is the call's id); `reasoning` items are not part of the answer. The finish
reason: `tool_calls` when the answer calls tools, else `stop` for a `completed` response;
an `incomplete` one says why in `incomplete_details.reason` (`max_output_tokens` ->
`length`, `content_filter` -> `content_filter`). `usage.input_tokens`,
`usage.output_tokens` and `usage.input_tokens_details.cached_tokens` are the usage. A
response whose `status` is `failed` carries its `error` (`{code, message}`), which the
gateway maps as it maps an HTTP error (`failure_status`).

A streamed answer is the documented sequence of typed server-sent events, each with a
`sequence_number` and no `[DONE]` at the end: `response.created`, then for each output item
`response.output_item.added` (a message, or a function call with its `call_id` and name),
`response.output_text.delta`s (text pieces, each handed on as it arrives),
`response.function_call_arguments.delta`s (fragments of a call's arguments, concatenated;
`...done` holds them whole), `response.output_item.done`, and at the end one of
`response.completed`, `response.incomplete` (the whole response: status, usage, model) or
`response.failed` (its `error`). An `error` event fails the call as that error; a stream
that ends before its terminal event is malformed.

The key goes in the `Authorization: Bearer` header, as for chat completions.
"""

from __future__ import annotations

from typing import Any

from wovyr.kinds.options import RESPONSES_OPTIONS

__all__ = ["ResponseStream", "failure_status", "parse_response", "request_body"]

# What an answer is when a response is `incomplete`, by `incomplete_details.reason`
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}
# The HTTP status a failed response's `error.code` stands for, to map it as that status
# is mapped: the rate limit and the server's own failures are retried; the codes that
# say the request is wrong (`invalid_prompt`, `invalid_image`, `image_too_large`, ...,
# and the conversation too long for the model) are not.
_FAILURE_STATUS = {
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "vector_store_timeout": 504,
}
_REFUSED_PREFIXES = ("invalid_", "image_", "unsupported_", "empty_", "failed_to_")


def failure_status(code: str | None) -> int:
    """The HTTP status a failed response's `error.code` stands for (an unknown code: 500,
    the provider's failure)."""
    if code is None:
        return 500
    if code in _FAILURE_STATUS:
        return _FAILURE_STATUS[code]
    if code == "context_length_exceeded" or code.startswith(_REFUSED_PREFIXES):
        return 400
    return 500


def request_body(body: dict[str, Any]) -> dict[str, Any]:
    """The Responses request for a chat-completions `body` (see the module docstring)."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in body.get("messages") or ():
        role = message.get("role")
        if role == "system":
            if message.get("content"):
                instructions.append(str(message["content"]))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id")),
                    "output": str(message.get("content") or ""),
                }
            )
        elif role == "assistant":
            items.extend(_assistant_items(message))
        else:
            items.append({"role": "user", "content": _user_content(message.get("content"))})
    out: dict[str, Any] = {"model": body.get("model"), "input": items}
    if instructions:
        out["instructions"] = "\n\n".join(instructions)
    limit = body.get("max_output_tokens") or body.get("max_tokens")
    if limit is not None:
        out["max_output_tokens"] = limit
    if body.get("temperature") is not None:
        out["temperature"] = body["temperature"]
    if body.get("stream"):
        out["stream"] = True
    tools = [
        {
            "type": "function",
            "name": t["function"]["name"],
            "description": t["function"].get("description") or "",
            "parameters": t["function"].get("parameters") or {"type": "object"},
            "strict": bool(t["function"].get("strict") or False),
        }
        for t in body.get("tools") or ()
        if t.get("type") == "function"
    ]
    if tools:
        out["tools"] = tools
    for key in sorted(RESPONSES_OPTIONS & body.keys()):  # `options:`, checked at dispatch
        out[key] = body[key]
    text_format = _text_format(body.get("response_format"))
    if text_format is not None:
        given = out.get("text")
        out["text"] = {**(given if isinstance(given, dict) else {}), "format": text_format}
    return out


def _user_content(content: Any) -> Any:
    """A user message's content: its text, or its parts (`text`; `image` by URL or data
    URL; `file` by data URL, or by URL)."""
    if not isinstance(content, list):
        return str(content or "")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind, url = part.get("type"), str(part.get("url") or "")
        if kind == "text":
            parts.append({"type": "input_text", "text": str(part.get("text") or "")})
        elif kind == "image":
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif url.startswith("data:"):
            name = str(part.get("filename") or "file.pdf")
            parts.append({"type": "input_file", "filename": name, "file_data": url})
        else:
            parts.append({"type": "input_file", "file_url": url})
    return parts or ""


def _assistant_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.get("content"):
        items.append({"role": "assistant", "content": str(message["content"])})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id")),
                "name": str(function.get("name")),
                "arguments": str(function.get("arguments") or "{}"),
            }
        )
    if not items:  # an empty answer still holds its turn
        items.append({"role": "assistant", "content": ""})
    return items


def _text_format(response_format: Any) -> dict[str, Any] | None:
    """Chat completions' `response_format` as the Responses API's `text.format`."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = response_format.get("json_schema") or {}
        out = {"type": "json_schema", "name": schema.get("name") or "answer"}
        out["schema"] = schema.get("schema") or {}
        if "strict" in schema:
            out["strict"] = schema["strict"]
        return out
    if kind in ("json_object", "text"):
        return {"type": kind}
    return None


def parse_response(
    data: Any,
) -> tuple[dict[str, Any], str | None, int, int, str | None, int, dict[str, Any] | None]:
    """The assistant message (chat-completions form), finish reason, input, output and
    cached tokens, model and error (`{code, message}` of a failed response, else None) of a
    Responses response; `ValueError`/`KeyError`/`TypeError` when it is not one."""
    if not isinstance(data, dict) or not isinstance(data["output"], list):
        raise TypeError("output is not a list of items")
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in data["output"]:
        if item.get("type") == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal") or ""))
        elif item.get("type") == "function_call":
            calls.append(_call(item["call_id"], item["name"], item.get("arguments")))
    message = _message("".join(texts), "".join(refusals), calls)
    usage = data.get("usage") or {}
    error = data.get("error")
    failed = (error if isinstance(error, dict) else {}) if data.get("status") == "failed" else None
    return (
        message,
        _finish(data, bool(calls)),
        _int(usage.get("input_tokens")),
        _int(usage.get("output_tokens")),
        data.get("model"),
        _cached(usage),
        failed,
    )


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": str(call_id),
        "type": "function",
        "function": {"name": str(name), "arguments": str(arguments or "")},
    }


def _message(text: str, refusal: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if refusal:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = calls
    return message


def _finish(data: dict[str, Any], calls: bool) -> str | None:
    status = data.get("status")
    if status == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(str(reason), str(reason) if reason else "length")
    if status in (None, "completed"):
        return "tool_calls" if calls else "stop"
    return str(status)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cached(usage: dict[str, Any]) -> int:
    details = usage.get("input_tokens_details")
    return _int(details.get("cached_tokens")) if isinstance(details, dict) else 0


class ResponseStream:
    """A streamed Responses answer assembled from its events (see the module docstring):
    `feed` each event's data object, in order; it returns the text piece the event adds
    (None for any other event). `done` once the terminal event came; `result()` is then
    what `parse_response` gives for a whole answer, its text the pieces handed on. `failed`:
    the `{code, message}` of a `response.failed` or `error` event (the stream ends there)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.done = False
        self.failed: dict[str, Any] | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._final: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> str | None:
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress"):
            self.model = str((event.get("response") or {}).get("model") or self.model)
        elif kind == "response.output_item.added":
            item = dict(event["item"])
            item["text"], item["refusal"] = "", ""
            item["arguments"] = str(item.get("arguments") or "")
            self._items[int(event["output_index"])] = item
        elif kind == "response.output_text.delta":
            piece = str(event.get("delta") or "")
            self._items[int(event["output_index"])]["text"] += piece
            return piece
        elif kind == "response.refusal.delta":
            self._items[int(event["output_index"])]["refusal"] += str(event.get("delta") or "")
        elif kind == "response.function_call_arguments.delta":
            self._items[int(event["output_index"])]["arguments"] += str(event.get("delta") or "")
        elif kind == "response.function_call_arguments.done":
            self._items[int(event["output_index"])]["arguments"] = str(event["arguments"])
        elif kind == "response.output_item.done":
            done = event["item"]
            item = self._items.setdefault(
                int(event["output_index"]), {**done, "text": "", "refusal": ""}
            )
            if done.get("type") == "function_call":
                item.update(call_id=done["call_id"], name=done["name"])
                item["arguments"] = str(done.get("arguments") or item.get("arguments") or "")
        elif kind in ("response.completed", "response.incomplete"):
            self._final = dict(event["response"])
            self.model = str(self._final.get("model") or self.model)
            self.done = True
        elif kind == "response.failed":
            error = (event.get("response") or {}).get("error")
            self.failed = dict(error) if isinstance(error, dict) else {}
        elif kind == "error":
            self.failed = {"code": event.get("code"), "message": event.get("message")}
        return None

    def result(self) -> tuple[dict[str, Any], str | None, int, int, str, int]:
        """(message, finish reason, input tokens, output tokens, model, cached tokens)."""
        texts: list[str] = []
        refusals: list[str] = []
        calls: list[dict[str, Any]] = []
        for _, item in sorted(self._items.items()):
            if item.get("type") == "message":
                texts.append(item["text"])
                refusals.append(item["refusal"])
            elif item.get("type") == "function_call":
                calls.append(_call(item["call_id"], item["name"], item["arguments"]))
        message = _message("".join(texts), "".join(refusals), calls)
        usage = self._final.get("usage") or {}
        return (
            message,
            _finish(self._final, bool(calls)),
            _int(usage.get("input_tokens")),
            _int(usage.get("output_tokens")),
            self.model,
            _cached(usage),
        )
