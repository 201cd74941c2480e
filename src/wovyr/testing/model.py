"""A scripted model, in process: the replies a test writes (text, tool calls, streams,
errors, recorded answers) turned into OpenAI chat-completions, OpenAI Responses or
Anthropic Messages answers.

    model = ScriptedModel([tool_calls(("search", {"q": "x"})), text("done")], pick="turn")
    answer = model.respond("/v1/chat/completions", {}, {"model": "m", "messages": [...]})
    answer.status, answer.json()        # 200, a chat completion
    model.requests                      # every request received (path, headers, body)

`wovyr.testing.model_server.ScriptedLLM` serves one over real HTTP on 127.0.0.1 (what an
engine's provider points at); this module is the protocol logic without sockets, which a
test of code that builds or reads provider requests can call directly.

Replies are served in order (`pick="order"`; past the end the last one repeats), or by
conversation turn (`pick="turn"`: a request gets the reply indexed by the number of
assistant messages in its conversation, so a request repeated after a crash gets the same
reply again). `script(...)` replaces the replies of a model in use. With `replay=` a
`Transcript` answers instead: each request gets the recorded answer to the identical
request, and one that no recorded exchange matches gets a 400 naming the first difference.
`transcript()` is what the model answered, to save and replay.

A reply is one of: `text(...)` (a plain answer), `tool_calls(...)` (one or several parallel
calls), `stream=True` on either (sent as SSE chunks when the request asks for `stream`),
`status(429, retry_after="3")`, `status(500)`, `malformed()` (a 200 whose body is not
JSON), `raw(status, body, headers=...)` (sent exactly as given). `delay` holds a reply back
(a slow model), `chunk_delay` paces a streamed one; `gate` (a `threading.Event`) holds it
until the test sets the event, which orders what the test sees without any timing.

A Messages request (`/messages`) is checked as the API does (400 `invalid_request_error`
otherwise): an `anthropic-version` header, `max_tokens`, roles that alternate starting with
`user`, no `system` role inside `messages`, and every `tool_result` answering a `tool_use`
of the assistant message just before; with `anthropic_key=` the `x-api-key` header must be
that key (401 otherwise). A Messages request with `stream: true` is answered with the
Messages API's server-sent events (`message_start`, content blocks in deltas, `ping`,
`message_delta`, `message_stop`). A Responses request (`/responses`) is checked as the API
does (400 `invalid_request_error` otherwise): `input` and no `messages`, input items of the
documented shapes (user content parts `input_text`, `input_image`, `input_file`), every
`function_call_output` answering a `function_call` sent before it, function tools named at
their top level; it is answered with a `response` object (a `message` item of
`output_text`, or `function_call` items), and with `stream: true` with the Responses API's
typed events (`response.created`, each item's `response.output_item.added`, text deltas or
argument deltas, `response.output_item.done`, `response.completed`). `/embeddings`
(OpenAI's embeddings protocol) answers outside the
script with `embed(text)`: a deterministic, meaningful embedding (a hashed bag of lowercase
word stems, stop words left out, in `EMBEDDING_DIMS` dimensions), so texts that share words
are near by cosine.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from wovyr.testing.transcript import Answer, Transcript

__all__ = [
    "EMBEDDING_DIMS",
    "Answer",
    "Recorded",
    "Reply",
    "ScriptedModel",
    "anthropic_problem",
    "embed",
    "malformed",
    "raw",
    "responses_problem",
    "status",
    "text",
    "tool_calls",
]


@dataclass(frozen=True)
class Reply:
    kind: Literal["text", "tools", "status", "malformed", "raw"]
    content: str = ""
    calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments JSON text)
    status: int = 200
    retry_after: str | None = None
    stream: bool = False
    delay: float = 0.0
    chunk_delay: float = 0.0  # between streamed chunks (a model generating slowly)
    usage: tuple[int, int] = (10, 5)  # prompt, completion tokens
    cached: int = 0  # of the prompt tokens, read from the provider's cache
    body: str = ""
    gate: threading.Event | None = field(default=None, compare=False)
    headers: tuple[tuple[str, str], ...] = ()  # of a `raw` reply
    content_type: str = "application/json"


def text(
    content: str,
    *,
    stream: bool = False,
    delay: float = 0.0,
    usage: tuple[int, int] = (10, 5),
    gate: threading.Event | None = None,
    chunk_delay: float = 0.0,
    cached: int = 0,
) -> Reply:
    return Reply(
        "text",
        content=content,
        stream=stream,
        delay=delay,
        usage=usage,
        gate=gate,
        chunk_delay=chunk_delay,
        cached=cached,
    )


def tool_calls(
    *calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str],
    stream: bool = False,
    delay: float = 0.0,
    usage: tuple[int, int] = (10, 5),
    raw_arguments: dict[int, str] | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """Calls `(name, arguments)` (ids `call_<n>`) or `(name, arguments, id)`, in one reply;
    `raw_arguments` replaces the JSON text of call n (to send invalid arguments)."""
    made = []
    for n, call in enumerate(calls):
        name, args = call[0], call[1]
        call_id = call[2] if len(call) == 3 else f"call_{n}"
        arguments = (raw_arguments or {}).get(n, json.dumps(args))
        made.append((call_id, name, arguments))
    return Reply("tools", calls=tuple(made), stream=stream, delay=delay, usage=usage, gate=gate)


def status(code: int, *, retry_after: str | None = None, body: str = "") -> Reply:
    return Reply("status", status=code, retry_after=retry_after, body=body or '{"error": {}}')


def malformed(body: str = '{"choices": [ this is not json') -> Reply:
    return Reply("malformed", body=body)


def raw(
    code: int,
    body: str,
    *,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> Reply:
    """An answer sent exactly as given, on either protocol's path: a recorded response
    (status, headers, body; `text/event-stream` for a recorded stream)."""
    return Reply(
        "raw",
        status=code,
        body=body,
        headers=tuple((headers or {}).items()),
        content_type=content_type,
    )


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body (None when it was not JSON)
    at: float = field(default_factory=time.time, compare=False)  # arrival (wall clock)

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def turn(self) -> int:
        """The number of assistant messages in the conversation sent (in a Responses
        request's `input`, the runs of assistant message and `function_call` items)."""
        body = self.body if isinstance(self.body, dict) else {}
        if isinstance(body.get("input"), list):
            answered = [_answer_item(item) for item in body["input"]]
            return sum(1 for n, a in enumerate(answered) if a and (n == 0 or not answered[n - 1]))
        messages = body.get("messages") or []
        return sum(1 for m in messages if m.get("role") == "assistant")


def _answer_item(item: Any) -> bool:
    """Whether a Responses input item is (part of) the model's answer."""
    if not isinstance(item, dict):
        return False
    return item.get("type") == "function_call" or item.get("role") == "assistant"


EMBEDDING_DIMS = 256
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "our",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def _stem(word: str) -> str:
    """A crude stem: common English suffixes cut (`invoices` and `invoice` meet)."""
    for suffix in ("ingly", "edly", "ing", "ies", "es", "ed", "ly", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def embed(text: str) -> list[float]:
    """`text`'s embedding: each stem adds +-1 to the dimension its hash picks; unit length
    (all zeros for a text of stop words only)."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        digest = hashlib.sha256(_stem(word).encode()).digest()
        index = int.from_bytes(digest[:4], "little") % EMBEDDING_DIMS
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector


def _embeddings(body: Any) -> dict[str, Any]:
    given = (body or {}).get("input")
    texts = [given] if isinstance(given, str) else list(given or [])
    tokens = sum(len(str(t).split()) for t in texts)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": embed(str(t))}
            for i, t in enumerate(texts)
        ],
        "model": (body or {}).get("model") or "scripted-embedding",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _json_answer(code: int, data: Any, headers: dict[str, str] | None = None) -> Answer:
    return Answer(code, json.dumps(data).encode(), tuple((headers or {}).items()))


_Protocol = Literal["chat", "messages", "responses"]
_PATHS: dict[str, _Protocol] = {
    "/chat/completions": "chat",
    "/messages": "messages",
    "/responses": "responses",
}


def _protocol(path: str) -> _Protocol | None:
    """The protocol a request's path asks for (None: no endpoint of the model's)."""
    return next((p for end, p in _PATHS.items() if path.endswith(end)), None)


def _responses_refusal(recorded: Recorded) -> Answer | None:
    problem = responses_problem(recorded.body)
    if problem is None:
        return None
    param, message = problem
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return _json_answer(400, {"error": error})


class ScriptedModel:
    """The scripted model (see the module docstring); thread-safe."""

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        pick: Literal["order", "turn"] = "order",
        anthropic_key: str | None = None,
        replay: Transcript | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._replies = list(replies)
        self._pick: Literal["order", "turn"] = pick
        self._first = 0  # the request the current script's order counts from
        self.anthropic_key = anthropic_key
        self.replay = replay
        self._requests: list[Recorded] = []
        self._answered: dict[int, float] = {}  # id(Recorded) -> when its answer was sent
        self._exchanges: list[dict[str, Any]] = []

    def script(self, *replies: Reply, pick: Literal["order", "turn"] | None = None) -> None:
        """Answer the next requests with `replies` (in order, counted from the next
        request, or by turn)."""
        with self._lock:
            self._replies = list(replies)
            self._pick = pick or self._pick
            self._first = len(self._requests)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def answered_at(self, request: Recorded) -> float | None:
        """When the answer to `request` was sent (wall clock, as `Recorded.at`), if it was."""
        with self._lock:
            return self._answered.get(id(request))

    def mark_answered(self, request: Recorded) -> None:
        with self._lock:
            self._answered[id(request)] = time.time()

    def transcript(self) -> Transcript:
        """Every chat exchange answered so far (request body and answer), to replay."""
        with self._lock:
            return Transcript(tuple(dict(e) for e in self._exchanges))

    def respond(self, path: str, headers: dict[str, str], body: Any) -> Answer:
        """The answer to one request (`headers` with lowercase names; `body` parsed JSON),
        recorded; marked answered at once (a server marks it when it has sent it)."""
        recorded, answer = self.receive(path, headers, body)
        self.mark_answered(recorded)
        return answer

    def receive(self, path: str, headers: dict[str, str], body: Any) -> tuple[Recorded, Answer]:
        recorded = Recorded(path, {k.lower(): v for k, v in headers.items()}, body)
        if path.endswith("/embeddings"):
            self._record(recorded)
            if not isinstance((body or {}).get("input"), (str, list)):
                return recorded, _json_answer(
                    400, {"error": {"message": "input must be text or a list"}}
                )
            return recorded, _json_answer(200, _embeddings(body))
        protocol = _protocol(path)
        if protocol is None:
            self._record(recorded)
            return recorded, _json_answer(404, {"error": {"message": "not found"}})
        refused = None
        if protocol == "messages":
            refused = self._anthropic_refusal(recorded)
        elif protocol == "responses":
            refused = _responses_refusal(recorded)
        if refused is not None:
            self._record(recorded)
            return recorded, refused
        if self.replay is not None:
            self._record(recorded)
            answer = self.replay.answer(path, body)
        else:
            answer = self._scripted(recorded, protocol)
        if answer.status == 200 or self.replay is None:
            self._keep(path, body, answer)
        return recorded, answer

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self._requests.append(recorded)

    def _keep(self, path: str, body: Any, answer: Answer) -> None:
        exchange: dict[str, Any] = {"path": path, "request": body, "status": answer.status}
        if answer.headers:
            exchange["headers"] = dict(answer.headers)
        exchange["content_type"] = answer.content_type
        exchange["response"] = answer.content.decode("utf-8", errors="replace")
        with self._lock:
            self._exchanges.append(exchange)

    def _anthropic_refusal(self, recorded: Recorded) -> Answer | None:
        key = self.anthropic_key
        if key is not None and recorded.headers.get("x-api-key") != key:
            error = {"type": "authentication_error", "message": "invalid x-api-key"}
            return _json_answer(401, {"type": "error", "error": error})
        problem = anthropic_problem(recorded.body, recorded.headers)
        if problem is not None:
            error = {"type": "invalid_request_error", "message": problem}
            return _json_answer(400, {"type": "error", "error": error})
        return None

    def _next_reply(self, recorded: Recorded) -> Reply:
        with self._lock:
            self._requests.append(recorded)
            n = len(self._requests) - 1 - self._first
            replies, pick = self._replies, self._pick
        if not replies:
            return status(500, body='{"error": {"message": "the scripted model has no script"}}')
        index = recorded.turn if pick == "turn" else n
        return replies[min(index, len(replies) - 1)]

    def _scripted(self, recorded: Recorded, protocol: _Protocol) -> Answer:
        reply = self._next_reply(recorded)
        if reply.gate is not None:
            reply.gate.wait(timeout=60)  # a bound: a test that forgets it still ends
        if reply.delay:
            time.sleep(reply.delay)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        model = body.get("model") or "scripted"
        if reply.kind == "status":
            extra = {"Retry-After": reply.retry_after} if reply.retry_after else {}
            return Answer(reply.status, reply.body.encode(), tuple(extra.items()))
        if reply.kind == "malformed":
            return Answer(200, reply.body.encode())
        if reply.kind == "raw":
            return Answer(reply.status, reply.body.encode(), reply.headers, reply.content_type)
        typed = {"messages": _anthropic_events, "responses": _responses_events}.get(protocol)
        if typed is not None and body.get("stream"):
            events = tuple(
                f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                for e in typed(reply, model)
            )
            return Answer(
                200, content_type="text/event-stream", events=events, pause=reply.chunk_delay
            )
        if protocol == "messages":
            return _json_answer(200, _anthropic_message(reply, model))
        if protocol == "responses":
            return _json_answer(200, _response_object(reply, model))
        if body.get("stream"):
            options = body.get("stream_options") or {}
            chunks = _chunks(reply, model, bool(options.get("include_usage")))
            events = tuple(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
            return Answer(
                200,
                content_type="text/event-stream",
                events=(*events, b"data: [DONE]\n\n"),
                pause=reply.chunk_delay,
            )
        return _json_answer(200, _completion(reply, model))


def _message(reply: Reply) -> dict[str, Any]:
    if reply.kind == "tools":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in reply.calls
            ],
        }
    return {"role": "assistant", "content": reply.content}


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": _message(reply),
                "finish_reason": "tool_calls" if reply.kind == "tools" else "stop",
            }
        ],
        "usage": _usage(reply),
    }


def _usage(reply: Reply) -> dict[str, Any]:
    """A chat completion's usage (with the cached prompt tokens when there are some)."""
    prompt, completion = reply.usage
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.cached:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached}
    return usage


def _chunks(reply: Reply, model: str, with_usage: bool) -> Iterator[dict[str, Any]]:
    """The reply as streamed chunks: content in pieces, tool call arguments in fragments."""
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant"})
    if reply.kind == "tools":
        for index, (call_id, name, arguments) in enumerate(reply.calls):
            head = {"index": index, "id": call_id, "type": "function"}
            yield chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
            for start in range(0, len(arguments), 7):
                piece = arguments[start : start + 7]
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls")
    else:
        for start in range(0, len(reply.content), 4):
            yield chunk({"content": reply.content[start : start + 4]})
        yield chunk({}, "stop")
    if with_usage:
        yield {**base, "choices": [], "usage": _usage(reply)}


def _anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    prompt, completion = reply.usage
    if reply.kind == "tools":
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": i, "name": n, "input": json.loads(a or "{}")}
            for i, n, a in reply.calls
        ]
    else:
        content = [{"type": "text", "text": reply.content}]
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.kind == "tools" else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": completion,
            **({"cache_read_input_tokens": reply.cached} if reply.cached else {}),
        },
    }


def _anthropic_events(reply: Reply, model: str) -> Iterator[dict[str, Any]]:
    """The reply as the Messages API streams it: `message_start`, each content block's
    start, deltas (text in pieces, a tool call's input JSON in fragments) and stop, a
    `ping`, `message_delta` (the stop reason, the output tokens) and `message_stop`."""
    whole = _anthropic_message(reply, model)
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            if index == 0:
                yield {"type": "ping"}
            text = block["text"]
            for at in range(0, len(text), 4):
                delta = {"type": "text_delta", "text": text[at : at + 4]}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        else:
            opened = {**block, "input": {}}
            yield {"type": "content_block_start", "index": index, "content_block": opened}
            arguments = json.dumps(block["input"])
            for at in range(0, len(arguments), 7):
                delta = {"type": "input_json_delta", "partial_json": arguments[at : at + 7]}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    yield {"type": "message_stop"}


def anthropic_problem(body: Any, headers: dict[str, str]) -> str | None:
    """What the Messages API would refuse in this request (None: a valid request)."""
    if "anthropic-version" not in headers:
        return "anthropic-version header is required"
    if not isinstance(body, dict) or not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    previous: dict[str, Any] | None = None
    for n, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{n}.role: Input should be 'user' or 'assistant'"
        expected = "user" if n % 2 == 0 else "assistant"
        if role != expected:
            return f"messages: roles must alternate between user and assistant (at {n})"
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        used = {
            b.get("id")
            for b in (previous or {}).get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        for block in blocks:
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in used:
                return f"messages.{n}: tool_result without a matching tool_use"
        previous = message
    return None


def _response_object(reply: Reply, model: str) -> dict[str, Any]:
    """The reply as a Responses API `response` object."""
    prompt, completion = reply.usage
    if reply.kind == "tools":
        output: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": f"fc_scripted_{n}",
                "call_id": i,
                "name": name,
                "arguments": a,
                "status": "completed",
            }
            for n, (i, name, a) in enumerate(reply.calls)
        ]
    else:
        part = {"type": "output_text", "text": reply.content, "annotations": []}
        output = [
            {
                "type": "message",
                "id": "msg_scripted",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        ]
    return {
        "id": "resp_scripted",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": reply.cached},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def _responses_events(reply: Reply, model: str) -> Iterator[dict[str, Any]]:
    """The reply as the Responses API streams it: `response.created`, for each output item
    `response.output_item.added`, its text deltas (or a function call's argument deltas
    and `...done`) and `response.output_item.done`, then `response.completed`; each event
    with its `sequence_number`."""
    whole = _response_object(reply, model)
    pending = {**whole, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": pending}]
    for index, item in enumerate(whole["output"]):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            opened = {**item, "status": "in_progress", "content": []}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": opened}
            )
            text = item["content"][0]["text"]
            for at in range(0, len(text), 4):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        **where,
                        "content_index": 0,
                        "delta": text[at : at + 4],
                    }
                )
            events.append(
                {"type": "response.output_text.done", **where, "content_index": 0, "text": text}
            )
        else:
            opened = {**item, "status": "in_progress", "arguments": ""}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": opened}
            )
            arguments = item["arguments"]
            for at in range(0, len(arguments), 7):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        **where,
                        "delta": arguments[at : at + 7],
                    }
                )
            events.append(
                {"type": "response.function_call_arguments.done", **where, "arguments": arguments}
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": whole})
    for n, event in enumerate(events):
        yield {**event, "sequence_number": n}


_USER_PARTS = {
    "input_text": "text",
    "input_image": "image_url",
    "input_file": None,  # one of file_data, file_url, file_id
}


def responses_problem(body: Any) -> tuple[str, str] | None:
    """What the Responses API would refuse in this request, as (param, message) (None: a
    valid request)."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "model", "Missing required parameter: 'model'."
    if "messages" in body:
        return "messages", "Unknown parameter: 'messages'."
    items = body.get("input")
    if not isinstance(items, list) or not items:
        return "input", "Missing required parameter: 'input'."
    calls: set[str] = set()
    for n, item in enumerate(items):
        where = f"input[{n}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "function_call":
            if not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
                return where, f"Invalid '{where}': a function_call has call_id, name, arguments."
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                return where, (
                    f"No tool call found for function call output with call_id "
                    f"{item.get('call_id')}."
                )
        elif kind == "message":
            problem = _message_item_problem(item, where)
            if problem is not None:
                return where, problem
        else:
            return where, f"Invalid value for '{where}.type'."
    for n, tool in enumerate(body.get("tools") or ()):
        if tool.get("type") == "function" and not isinstance(tool.get("name"), str):
            return f"tools[{n}].name", f"Missing required parameter: 'tools[{n}].name'."
    return None


def _message_item_problem(item: dict[str, Any], where: str) -> str | None:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        return f"Invalid value for '{where}.role'."
    content = item.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"Invalid type for '{where}.content': expected a string or an array."
    for m, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        allowed = ("output_text", "refusal") if role == "assistant" else tuple(_USER_PARTS)
        if kind not in allowed:
            return f"Invalid value for '{where}.content[{m}].type': {kind!r}."
        wants = _USER_PARTS.get(str(kind))
        if wants is not None and not isinstance(part.get(wants), str):
            return f"Missing required parameter: '{where}.content[{m}].{wants}'."
        sources = ("file_data", "file_url", "file_id")
        if kind == "input_file" and not any(isinstance(part.get(k), str) for k in sources):
            return f"Invalid '{where}.content[{m}]': give file_data, file_url or file_id."
    return None
