"""JSON log lines: RFC 3339 times to the millisecond, the trace and span ids of a traced
attempt (and none without one), structured fields, and uvicorn's access lines."""

from __future__ import annotations

import json
import logging
import re

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from wovyr.activities.logs import AccessFields, JsonLines
from wovyr.platform.tracing import OtelTracer

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _record(msg: str, *args: object, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("wovyr.test", logging.INFO, __file__, 1, msg, args, None)
    if fields:
        record.fields = fields
    return record


def test_a_line_has_a_millisecond_utc_time_and_no_trace_outside_an_attempt() -> None:
    record = _record("hello %s", "Ada")
    record.created = 1_796_000_000.1234
    line = json.loads(JsonLines().format(record))
    assert line["at"] == "2026-11-30T00:53:20.123Z"
    assert STAMP.fullmatch(line["at"])
    assert line["message"] == "hello Ada" and line["level"] == "info"
    assert "trace_id" not in line and "span_id" not in line


def test_a_traced_attempts_lines_carry_its_trace_and_span_ids() -> None:
    exporter = InMemorySpanExporter()
    tracer = OtelTracer(exporter=exporter)
    try:
        span = tracer.attempt(
            None,
            tenant="default",
            execution_id="e1",
            workflow="w",
            activity="a",
            attempt=1,
            kind="tool",
            index=None,
            compensation=False,
        )
        with span:
            line = json.loads(JsonLines().format(_record("inside")))
        parent = (span.context or {})["traceparent"]
        after = json.loads(JsonLines().format(_record("after")))
    finally:
        tracer.close()
    _, trace_id, span_id, _ = parent.split("-")
    assert (line["trace_id"], line["span_id"]) == (trace_id, span_id)
    assert len(trace_id) == 32 and len(span_id) == 16
    assert "trace_id" not in after


def test_fields_join_the_line_without_replacing_its_own_keys() -> None:
    line = json.loads(JsonLines().format(_record("start", event="start", port=8080, level="loud")))
    assert line["event"] == "start" and line["port"] == 8080
    assert line["level"] == "info"  # a field never overwrites the line's own key


def test_access_lines_are_fields_without_the_query_string() -> None:
    record = _record(
        '%s - "%s %s HTTP/%s" %d', "10.0.0.1:5000", "GET", "/ui/x?token=abc", "1.1", 200
    )
    assert AccessFields().filter(record)
    line = json.loads(JsonLines().format(record))
    assert line["message"] == "GET /ui/x 200"
    assert (line["client"], line["method"], line["path"], line["status"]) == (
        "10.0.0.1:5000",
        "GET",
        "/ui/x",
        200,
    )
    assert "token" not in json.dumps(line)
