"""A scripted model server for tests (OpenAI chat completions and Anthropic Messages): real
HTTP on 127.0.0.1.

    with ScriptedLLM([text("hello"), tool_calls(("search", {"q": "x"}))]) as llm:
        base_url = llm.base_url            # http://127.0.0.1:PORT/v1
        ...
        llm.requests                       # every request received (headers + JSON body)

`POST /v1/chat/completions` answers with the scripted replies, and so does `POST
/v1/messages` in the Anthropic Messages protocol (the same script: text blocks, `tool_use`
blocks, `usage: {input_tokens, output_tokens}`, `stop_reason`). A Messages request is
checked as the API does (400 `invalid_request_error` otherwise): an `anthropic-version`
header, `max_tokens`, roles that alternate starting with `user`, no `system` role inside
`messages`, and every `tool_result` answering a `tool_use` of the assistant message just
before; with `anthropic_key=` the `x-api-key` header must be that key (401 otherwise).
By default replies are served in order (`pick="order"`; past the end the last one
repeats). With `pick="turn"` a request gets the reply indexed by the number of assistant
messages in its conversation, so a request repeated after a crash gets the same reply again
(what the agent chaos test relies on).

A reply is one of: `text(...)` (a plain answer), `tool_calls(...)` (one or several parallel
calls), `stream=True` on either (sent as SSE chunks when the request asks for `stream`),
`status(429, retry_after=3)`, `status(500)`, `malformed()` (a 200 whose body is not JSON).
Every request is recorded (`Recorded`: path, headers, parsed body) before it is answered;
`delay` holds a reply back (a slow model), `chunk_delay` paces a streamed one; `gate` (a
`threading.Event`) holds it until the test sets the event, which orders what the test sees
without any timing.

`POST /v1/embeddings` (OpenAI's embeddings protocol, `input` a string or a list of them)
answers outside the script with `embed(text)`: a deterministic, meaningful embedding (a
hashed bag of lowercase word stems, stop words left out, in `EMBEDDING_DIMS` dimensions),
so texts that share words are near by cosine and search quality can be measured.

It runs in a daemon thread of the test process (a `ThreadingHTTPServer`): the chaos tests
kill worker processes, never the model, so its record spans their lives.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "EMBEDDING_DIMS",
    "Recorded",
    "Reply",
    "ScriptedLLM",
    "anthropic_problem",
    "embed",
    "malformed",
    "raw",
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
) -> Reply:
    return Reply(
        "text",
        content=content,
        stream=stream,
        delay=delay,
        usage=usage,
        gate=gate,
        chunk_delay=chunk_delay,
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
        """The number of assistant messages in the conversation sent."""
        messages = (self.body or {}).get("messages") or []
        return sum(1 for m in messages if m.get("role") == "assistant")


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


def _anthropic_error(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


@dataclass
class _Script:
    replies: list[Reply]
    pick: Literal["order", "turn"]
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    anthropic_key: str | None = None
    answered: dict[int, float] = field(default_factory=dict)  # id(Recorded) -> answer sent

    def record(self, recorded: Recorded) -> None:
        with self.lock:
            self.requests.append(recorded)

    def next_reply(self, recorded: Recorded) -> Reply:
        with self.lock:
            self.requests.append(recorded)
            n = len(self.requests) - 1
        index = recorded.turn if self.pick == "turn" else n
        return self.replies[min(index, len(self.replies) - 1)]


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
    prompt, completion = reply.usage
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
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


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
        prompt, completion = reply.usage
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        yield {**base, "choices": [], "usage": usage}


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
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }


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


def _handler(script: _Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: tests read `requests`

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            recorded = Recorded(self.path, headers, body)
            if self.path.endswith("/embeddings"):
                script.record(recorded)
                if not isinstance((body or {}).get("input"), (str, list)):
                    self._send(400, b'{"error": {"message": "input must be text or a list"}}')
                    return
                self._send(200, json.dumps(_embeddings(body)).encode())
                return
            anthropic = self.path.endswith("/messages")
            if not self.path.endswith("/chat/completions") and not anthropic:
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            if anthropic:
                key = script.anthropic_key
                if key is not None and headers.get("x-api-key") != key:
                    script.record(recorded)
                    self._send(401, _anthropic_error("authentication_error", "invalid x-api-key"))
                    return
                problem = anthropic_problem(body, headers)
                if problem is not None:
                    script.record(recorded)
                    self._send(400, _anthropic_error("invalid_request_error", problem))
                    return
            reply = script.next_reply(recorded)
            if reply.gate is not None:
                reply.gate.wait(timeout=60)  # a bound: a test that forgets it still ends
            if reply.delay:
                time.sleep(reply.delay)
            model = (body or {}).get("model") or "scripted"
            if reply.kind == "status":
                extra = {"Retry-After": reply.retry_after} if reply.retry_after else {}
                self._send(reply.status, reply.body.encode(), extra)
            elif reply.kind == "malformed":
                self._send(200, reply.body.encode())
            elif reply.kind == "raw":
                extra = dict(reply.headers)
                self._send(reply.status, reply.body.encode(), extra, reply.content_type)
            elif anthropic:
                self._send(200, json.dumps(_anthropic_message(reply, model)).encode())
            elif (body or {}).get("stream"):
                options = (body or {}).get("stream_options") or {}
                chunks = _chunks(reply, model, bool(options.get("include_usage")))
                self._stream(chunks, reply.chunk_delay)
            else:
                self._send(200, json.dumps(_completion(reply, model)).encode())
            with script.lock:
                script.answered[id(recorded)] = time.time()

        def _send(
            self,
            code: int,
            payload: bytes,
            extra: dict[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, chunks: Iterator[dict[str, Any]], pause: float = 0.0) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for item in chunks:
                self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
                self.wfile.flush()
                if pause:
                    time.sleep(pause)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


class ScriptedLLM:
    """The server, in a thread of this process (a context manager)."""

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        pick: Literal["order", "turn"] = "order",
        port: int = 0,
        anthropic_key: str | None = None,
    ) -> None:
        self._script = _Script(list(replies), pick, anthropic_key=anthropic_key)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self._script))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[Recorded]:
        with self._script.lock:
            return list(self._script.requests)

    @property
    def completions(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def answered_at(self, request: Recorded) -> float | None:
        """When the answer to `request` was sent (wall clock, as `Recorded.at`), if it was."""
        with self._script.lock:
            return self._script.answered.get(id(request))

    @property
    def embeddings(self) -> list[Recorded]:
        """The embeddings requests (`POST /v1/embeddings`)."""
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    @property
    def messages(self) -> list[Recorded]:
        """The Anthropic Messages requests (`POST /v1/messages`)."""
        return [r for r in self.requests if r.path.endswith("/messages")]

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
