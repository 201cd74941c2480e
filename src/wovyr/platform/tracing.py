"""Traces with OpenTelemetry: the `wovyr.traces.Tracer` hooks over the SDK, exported over
OTLP/HTTP (protobuf). The only module that imports `opentelemetry`; the edges import it
only when tracing is on (`wovyr.assemble.tracer`), so an engine without tracing never loads it.

Spans (all of one execution tree in one trace):

- `start <workflow>` (kind PRODUCER): the creation of an execution, under the caller's
  context (an API request's `traceparent`, or the span current in the calling code), a
  child's under the attempt that starts it, a continued run's under its chain's first
  start. Its context is stored in `ExecutionStarted.trace` and outlives this process.
- `attempt <activity>` (INTERNAL): one attempt, a child of its execution's stored start
  context, opened by whichever worker runs it. While it runs it is the current span, so
  spans a handler opens with the OpenTelemetry API nest under it; its context is the
  handler's `ctx.traceparent` and the `traceparent` header the `http` kind sends.
- `chat <model>`, `embeddings <model>`, `mcp.call <server>/<tool>` (CLIENT): an outside
  call an attempt makes, a child of the attempt's span (`wovyr.traces.call_span`), and the
  current span while it runs (the MCP SDK's own spans nest under it). A model call is
  named and attributed per OpenTelemetry's GenAI semantic conventions
  (`gen_ai.provider.name`, `gen_ai.operation.name`, `gen_ai.request.model`,
  `gen_ai.response.model`, `gen_ai.usage.input_tokens`/`output_tokens`,
  `gen_ai.response.finish_reasons`, `server.address`/`server.port`; `wovyr.provider` the
  configured provider's name). Attributes say who was called and what came back; never a
  credential, a prompt or a tool's arguments. A failed call is an error span named by its
  error type only (a provider's message may quote the request).

An execution started untraced (before tracing was turned on, or by a process without it)
has no stored context: each of its attempts is then the root of a trace of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextvars import Token
from typing import Any, Unpack

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from wovyr import traces
from wovyr.traces import AttemptOf, AttemptSpan, Attribute, CallSpan, ExecutionStart, TraceContext

__all__ = ["DEFAULT_ENDPOINT", "OtelTracer"]

#: Where spans go when no endpoint is configured (an OpenTelemetry Collector on this host).
DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"

_PROPAGATOR = TraceContextTextMapPropagator()


def _extracted(parent: TraceContext | None) -> otel_context.Context | None:
    """The OpenTelemetry context of a stored W3C context (None: the current one)."""
    if not parent:
        return None
    return _PROPAGATOR.extract(dict(parent))


def _context_of(span: Span) -> dict[str, str]:
    """The span's W3C context, as `TraceContextTextMapPropagator.inject` writes it (built
    here directly: it is asked for every attempt)."""
    found = span.get_span_context()
    context = {
        "traceparent": f"00-{found.trace_id:032x}-{found.span_id:016x}-{found.trace_flags:02x}"
    }
    if found.trace_state:
        context["tracestate"] = found.trace_state.to_header()
    return context


class _CallSpan:
    """One outside call's span, ended when the call returns; the current span while the
    call runs, so the spans a client library opens for it (the MCP SDK's `MCP send
    tools/call`) nest under it."""

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[otel_context.Context] | None = None

    def record(self, attributes: Mapping[str, Attribute | None]) -> None:
        for name, value in attributes.items():
            if value is not None:
                self._span.set_attribute(name, value)

    def failed(self, error_type: str) -> None:
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def __enter__(self) -> CallSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
        if isinstance(exc, asyncio.CancelledError):  # the attempt timed out or was cancelled
            self._span.set_attribute("wovyr.call.status", "cancelled")
        elif exc is not None:
            # the type only: no exception event (its message and text may quote the prompt)
            self.failed(str(getattr(exc, "type", None) or type(exc).__name__))
        self._span.end()


class _AttemptSpan:
    """One attempt's span: current while the attempt runs, ended when it leaves."""

    def __init__(self, span: Span, tracer: trace.Tracer) -> None:
        self._span = span
        self._tracer = tracer
        self._context = _context_of(span)
        self._token: Token[otel_context.Context] | None = None
        self._entered: Token[AttemptSpan | None] | None = None

    @property
    def context(self) -> TraceContext | None:
        return self._context

    def outcome(self, error: Mapping[str, Any] | None, *, status: str = "completed") -> None:
        self._span.set_attribute("wovyr.attempt.status", status)
        if error is not None:
            kind = str(error.get("type") or "Error")
            self._span.set_attribute("wovyr.error.type", kind)
            self._span.set_status(Status(StatusCode.ERROR, f"{kind}: {error.get('message', '')}"))

    def call(self, name: str, attributes: Mapping[str, Attribute]) -> CallSpan:
        span = self._tracer.start_span(
            name,
            context=trace.set_span_in_context(self._span),
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        return _CallSpan(span)

    def __enter__(self) -> AttemptSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        self._entered = traces.entered(self)
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if self._entered is not None:
            traces.left(self._entered)
        if self._token is not None:
            otel_context.detach(self._token)
        if isinstance(exc, asyncio.CancelledError):  # cancelled, timed out, lease lost
            self._span.set_attribute("wovyr.attempt.status", "cancelled")
        elif isinstance(exc, BaseException):
            self._span.record_exception(exc)
            self._span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        self._span.end()


class OtelTracer:
    """The tracing hooks over an OpenTelemetry SDK `TracerProvider` of its own, whose spans
    are batched and exported over OTLP/HTTP to `endpoint` (or to `exporter`).

    `install`: also make that provider the process's global one (the edges do), so spans
    that activity handlers open with `opentelemetry.trace.get_tracer(...)` go to the same
    place; the first provider installed in a process stays (OpenTelemetry's rule)."""

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        service_name: str = "wovyr",
        exporter: SpanExporter | None = None,
        install: bool = False,
    ) -> None:
        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self._provider.add_span_processor(
            BatchSpanProcessor(exporter or OTLPSpanExporter(endpoint=endpoint))
        )
        self._tracer = self._provider.get_tracer("wovyr")
        if install:
            trace.set_tracer_provider(self._provider)

    def execution_started(
        self, parent: TraceContext | None, **start: Unpack[ExecutionStart]
    ) -> dict[str, str] | None:
        span = self._tracer.start_span(
            f"start {start['workflow']}",
            context=_extracted(parent),
            kind=SpanKind.PRODUCER,
            attributes={
                "wovyr.tenant": start["tenant"],
                "wovyr.execution.id": start["execution_id"],
                "wovyr.workflow": start["workflow"],
                "wovyr.workflow.version": start["version"],
            },
        )
        try:
            return _context_of(span)
        finally:
            span.end()

    def attempt(self, parent: TraceContext | None, **of: Unpack[AttemptOf]) -> AttemptSpan:
        attributes: dict[str, str | int | bool] = {
            "wovyr.tenant": of["tenant"],
            "wovyr.execution.id": of["execution_id"],
            "wovyr.workflow": of["workflow"],
            "wovyr.activity": of["activity"],
            "wovyr.attempt": of["attempt"],
            "wovyr.kind": of["kind"],
        }
        if of["index"] is not None:
            attributes["wovyr.item.index"] = of["index"]
        if of["compensation"]:
            attributes["wovyr.compensation"] = True
        # no stored context: a root of its own (never the caller's current span: the
        # worker's loop is nobody's child)
        context = _extracted(parent) or otel_context.Context()
        span = self._tracer.start_span(
            f"attempt {of['activity']}",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        return _AttemptSpan(span, self._tracer)

    def close(self) -> None:
        """Export every span still buffered, then stop the exporter."""
        self._provider.shutdown()
