"""The tracing hooks without a tracing library: the W3C context read from outside, the
settings that turn tracing on, the no-op and lazy tracers, and the stored trace context
(written only when traced, kept by the fold and the checkpoint only when set)."""

from __future__ import annotations

import sys
import textwrap
from datetime import UTC, datetime

import pytest

from wovyr import assemble
from wovyr.definition.parse import load_definition
from wovyr.engine.core.decide import start_events
from wovyr.engine.core.state import fold, state_from_json, state_to_json
from wovyr.errors import ConfigError
from wovyr.events import ABSENT, ExecutionStarted
from wovyr.settings import load_settings
from wovyr.traces import (
    NO_CALL_SPAN,
    NO_SPAN,
    NO_TRACER,
    LazyTracer,
    Tracer,
    call_span,
    entered,
    left,
    trace_context,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("headers", "read"),
    [
        ({"traceparent": PARENT}, {"traceparent": PARENT}),
        ({"TraceParent": f" {PARENT} "}, {"traceparent": PARENT}),
        (
            {"traceparent": PARENT, "tracestate": "vendor=abc"},
            {"traceparent": PARENT, "tracestate": "vendor=abc"},
        ),
        ({"traceparent": PARENT, "tracestate": "x" * 513}, {"traceparent": PARENT}),
        ({"traceparent": PARENT, "tracestate": "a=b\nc"}, {"traceparent": PARENT}),
        ({}, None),
        ({"tracestate": "vendor=abc"}, None),
        ({"traceparent": PARENT.upper()}, None),  # W3C: lowercase hex only
        ({"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01"}, None),
        ({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01"}, None),
        ({"traceparent": "ff" + PARENT[2:]}, None),
        ({"traceparent": PARENT + "-extra"}, None),
    ],
)
def test_a_context_from_outside_is_taken_only_when_valid(
    headers: dict[str, str], read: dict[str, str] | None
) -> None:
    assert trace_context(headers) == read


def test_tracing_is_off_unless_asked_and_the_endpoint_follows_opentelemetrys_rules() -> None:
    off = load_settings({})
    assert (off.otel, off.otel_endpoint, off.otel_service_name) == (
        False,
        "http://localhost:4318/v1/traces",
        "wovyr",
    )
    assert assemble.tracer(off) is NO_TRACER
    assert load_settings({"WOVYR_OTEL": "1"}).otel
    base = load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert (base.otel, base.otel_endpoint) == (True, "http://collector:4318/v1/traces")
    full = load_settings(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/otlp",
            "OTEL_SERVICE_NAME": "billing-worker",
        }
    )
    assert (full.otel, full.otel_endpoint, full.otel_service_name) == (
        True,
        "https://traces.example/otlp",
        "billing-worker",
    )
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert not load_settings({**endpoint, "WOVYR_OTEL": "0"}).otel  # an explicit off wins
    assert not load_settings({**endpoint, "OTEL_SDK_DISABLED": "true"}).otel
    assert load_settings({**endpoint, "OTEL_SDK_DISABLED": "true", "WOVYR_OTEL": "yes"}).otel
    with pytest.raises(ConfigError, match="WOVYR_OTEL must be 1 or 0"):
        load_settings({"WOVYR_OTEL": "maybe"})


def test_settings_give_a_lazy_tracer_that_loads_nothing_until_used() -> None:
    loaded = "wovyr.platform.tracing" in sys.modules
    tracer = assemble.tracer(load_settings({"WOVYR_OTEL": "1"}))
    assert isinstance(tracer, LazyTracer)
    tracer.close()  # never built: nothing to close, nothing imported
    assert ("wovyr.platform.tracing" in sys.modules) == loaded


def test_the_lazy_tracer_builds_once_and_closes_what_it_built() -> None:
    built: list[Tracer] = []

    def build() -> Tracer:
        built.append(NO_TRACER)
        return NO_TRACER

    lazy = LazyTracer(build)
    lazy.close()
    assert built == []
    started = lazy.execution_started(None, tenant="t", execution_id="e", workflow="w", version="1")
    span = lazy.attempt(
        None,
        tenant="t",
        execution_id="e",
        workflow="w",
        activity="a",
        attempt=1,
        kind="tool",
        index=None,
        compensation=False,
    )
    assert (started, span, len(built)) == (None, NO_SPAN, 1)
    lazy.close()
    lazy.execution_started(None, tenant="t", execution_id="e", workflow="w", version="1")
    assert len(built) == 2  # closed, then used again: a new one


def test_the_no_op_span_has_no_context_and_lets_errors_through() -> None:
    def attempt() -> None:
        with NO_SPAN as span:
            assert span.context is None
            span.outcome({"type": "E"}, status="failed")
            raise RuntimeError("not swallowed")

    with pytest.raises(RuntimeError):
        attempt()


def test_a_call_outside_a_traced_attempt_opens_nothing() -> None:
    """Tracing off (or a call made outside an attempt, as a CLI command's embedding is):
    `call_span` answers the shared no-op span, which lets errors through."""
    assert call_span("model.chat default", {"wovyr.provider": "default"}) is NO_CALL_SPAN
    assert NO_SPAN.call("mcp.call s/t", {}) is NO_CALL_SPAN
    token = entered(NO_SPAN)  # an untraced attempt's span, if one were ever made current
    try:
        assert call_span("model.chat default", {}) is NO_CALL_SPAN
    finally:
        left(token)

    def call() -> None:
        with call_span("mcp.call s/t", {}) as span:
            span.record({"gen_ai.usage.input_tokens": 3, "none": None})
            span.failed("McpToolError")
            raise RuntimeError("not swallowed")

    with pytest.raises(RuntimeError):
        call()


def test_the_start_writes_a_trace_only_when_traced_and_the_checkpoint_keeps_it() -> None:
    definition = load_definition(
        textwrap.dedent(
            """\
            apiVersion: wovyr/v1
            kind: Workflow
            metadata: {name: w}
            activities:
              - {id: a, set: {v: 1}}
            """
        )
    )
    (plain,) = start_events(definition, "h", {}, NOW)
    assert "trace" not in plain.data
    assert ExecutionStarted.parse(plain).trace is ABSENT
    assert "trace" not in state_to_json(fold([plain], id="e"))  # old checkpoints unchanged

    context = {"traceparent": PARENT, "tracestate": "vendor=abc"}
    (traced,) = start_events(definition, "h", {}, NOW, extra={"trace": context})
    assert traced.data == {**plain.data, "trace": context}
    state = fold([traced], id="e")
    assert state.trace == context
    assert state_from_json(state_to_json(state)).trace == context


def test_tracing_asked_for_without_the_library_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as if the SDK were not installed: a distribution that no index has
    monkeypatch.setattr(assemble, "OTEL_DISTRIBUTIONS", ("wovyr-test-absent-distribution",))
    assert assemble.tracer(load_settings({})) is NO_TRACER  # off: never looked for
    with pytest.raises(ConfigError, match="not installed") as refused:
        assemble.tracer(load_settings({"WOVYR_OTEL": "1"}))
    assert refused.value.hint == "pip install 'wovyr[otel]', or set WOVYR_OTEL=0"
