"""The scripted model over real HTTP on 127.0.0.1: an OpenAI-compatible chat-completions
server (and OpenAI Responses, Anthropic Messages, and embeddings) answering from a
`ScriptedModel`.

    with ScriptedLLM([text("hello"), tool_calls(("search", {"q": "x"}))]) as llm:
        base_url = llm.base_url            # http://127.0.0.1:PORT/v1
        ...
        llm.requests                       # every request received (headers + JSON body)

`POST /v1/chat/completions`, `POST /v1/responses`, `POST /v1/messages` and
`POST /v1/embeddings` are answered as
`wovyr.testing.model` describes (the replies, `pick`, `anthropic_key`, `replay`); a
streamed answer is sent as SSE events. It runs in daemon threads of the test process (a
`ThreadingHTTPServer`): tests that kill worker processes never kill the model, so its
record spans their lives. `python -m wovyr.testing.model_server TRANSCRIPT.json` serves a
recorded transcript from a process of its own (it prints its base URL).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from wovyr.testing.model import (
    EMBEDDING_DIMS,
    Answer,
    Recorded,
    Reply,
    ScriptedModel,
    anthropic_problem,
    embed,
    malformed,
    raw,
    responses_problem,
    status,
    text,
    tool_calls,
)
from wovyr.testing.transcript import Transcript

__all__ = [
    "EMBEDDING_DIMS",
    "Recorded",
    "Reply",
    "ScriptedLLM",
    "anthropic_problem",
    "embed",
    "malformed",
    "raw",
    "responses_problem",
    "status",
    "text",
    "tool_calls",
]


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: tests read `requests`

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw_body = self.rfile.read(length)
            try:
                body = json.loads(raw_body)
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            recorded, answer = model.receive(self.path, headers, body)
            if answer.events is not None:
                self._stream(answer)
            else:
                self._send(answer)
            model.mark_answered(recorded)

        def _send(self, answer: Answer) -> None:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def _stream(self, answer: Answer) -> None:
            import time

            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Connection", "close")
            self.end_headers()
            for n, event in enumerate(answer.events or ()):
                if n and answer.pause:
                    time.sleep(answer.pause)
                self.wfile.write(event)
                self.wfile.flush()
            self.close_connection = True

    return Handler


class ScriptedLLM:
    """The server, in a thread of this process (a context manager)."""

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        pick: Literal["order", "turn"] = "order",
        port: int = 0,
        anthropic_key: str | None = None,
        replay: Transcript | None = None,
        model: ScriptedModel | None = None,
    ) -> None:
        self.model = model or ScriptedModel(
            replies, pick=pick, anthropic_key=anthropic_key, replay=replay
        )
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self.model))
        self._server.daemon_threads = True
        # a short poll: `shutdown` waits for the loop to look, once per test that uses one
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply, pick: Literal["order", "turn"] | None = None) -> None:
        """Answer the next requests with `replies` (`ScriptedModel.script`)."""
        self.model.script(*replies, pick=pick)

    def transcript(self) -> Transcript:
        """Every chat exchange answered so far, to save and replay."""
        return self.model.transcript()

    @property
    def requests(self) -> list[Recorded]:
        return self.model.requests

    @property
    def completions(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def answered_at(self, request: Recorded) -> float | None:
        """When the answer to `request` was sent (wall clock, as `Recorded.at`), if it was."""
        return self.model.answered_at(request)

    @property
    def embeddings(self) -> list[Recorded]:
        """The embeddings requests (`POST /v1/embeddings`)."""
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    @property
    def responses(self) -> list[Recorded]:
        """The OpenAI Responses requests (`POST /v1/responses`)."""
        return [r for r in self.requests if r.path.endswith("/responses")]

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


def main(argv: list[str] | None = None) -> int:
    """Serve a recorded transcript until interrupted: `python -m
    wovyr.testing.model_server TRANSCRIPT.json [PORT]`."""
    args = sys.argv[1:] if argv is None else argv
    if not args or len(args) > 2:
        print("usage: python -m wovyr.testing.model_server TRANSCRIPT.json [PORT]")
        return 2
    transcript = Transcript.load(Path(args[0]))
    with ScriptedLLM(replay=transcript, port=int(args[1]) if len(args) > 1 else 0) as llm:
        print(llm.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
