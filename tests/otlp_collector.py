"""An OTLP/HTTP trace collector for tests, with a plain hook beside it: real HTTP on
127.0.0.1, in a thread of the test process.

    with Collector() as collector:
        collector.traces_url            # http://127.0.0.1:PORT/v1/traces (OTLP endpoint)
        collector.base_url              # http://127.0.0.1:PORT (OTEL_EXPORTER_OTLP_ENDPOINT)
        collector.hook_url              # any other path answers {"ok": true}
        ...
        collector.spans()               # every span received, decoded (`Span`)
        collector.exported()            # every export's protobuf bytes, as received
        collector.hooks                 # the headers of every request to the hook

`POST /v1/traces` takes an `ExportTraceServiceRequest` in protobuf (what OpenTelemetry's
OTLP/HTTP exporter sends), decoded with `opentelemetry-proto`, and answers with an empty
`ExportTraceServiceResponse`.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["Collector", "Span"]


@dataclass(frozen=True)
class Span:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root
    name: str
    kind: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    service: str  # the resource's service.name
    status_message: str = ""
    events: tuple[str, ...] = ()  # the events' names (an exception recorded: "exception")

    def named_by(self, traceparent: str | None) -> bool:
        """Whether a W3C `traceparent` names this span, sampled (OTLP does not carry the
        flags, so only the sampled bit is checked)."""
        found = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})", traceparent or "")
        return (
            found is not None
            and (found[1], found[2]) == (self.trace_id, self.span_id)
            and int(found[3], 16) & 1 == 1
        )


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":  # (a tuple: what a span was given)
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, which) if which else None


class Collector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self._exported: list[bytes] = []
        self.hooks: list[dict[str, str]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/traces":
                    collector._hook(self)
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector._add(request, body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                collector._hook(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def traces_url(self) -> str:
        return f"{self.base_url}/v1/traces"

    @property
    def hook_url(self) -> str:
        return f"{self.base_url}/hook"

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def exported(self) -> list[bytes]:
        """Every export request's body (protobuf, uncompressed): what left the process,
        attributes, status messages, events and resource included."""
        with self._lock:
            return list(self._exported)

    def _hook(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.hooks.append({k.lower(): v for k, v in handler.headers.items()})
        body = json.dumps({"ok": True}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _add(self, request: ExportTraceServiceRequest, body: bytes) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Span(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            service=str(resource.get("service.name", "")),
                            status_message=span.status.message,
                            events=tuple(e.name for e in span.events),
                        )
                    )
        with self._lock:
            self._spans.extend(found)
            self._exported.append(body)

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
