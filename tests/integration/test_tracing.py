"""Traces over OpenTelemetry, exported over OTLP/HTTP to a real collector in the test:
start -> attempt spans -> a child's start -> its attempt spans, one trace; the `http`
kind sends its attempt's `traceparent`, a tool handler sees its own; the context survives
the process that started the execution (another engine, another tracer, the same file)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from tests.conftest import make_store
from tests.otlp_collector import Collector, Span

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.events import EventType
from wovyr.platform.tracing import OtelTracer
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain


def wf(name: str, body: str) -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


LEAF = wf(
    "leaf",
    """
    activities:
      - {id: probe, tool: probe}
    output: "${{ activities.probe.output }}"
    """,
)


def tree(hook_url: str) -> str:
    return wf(
        "tree",
        f"""
        activities:
          - id: call
            http: {{url: "{hook_url}", method: POST, json: {{hello: world}}}}
          - id: sub
            needs: [call]
            workflow: {{name: leaf}}
        output: "${{{{ activities.sub.output }}}}"
        """,
    )


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running


@pytest.fixture
def seen() -> list[ActivityContext]:
    return []


@pytest.fixture
def registry(seen: list[ActivityContext]) -> ActivityRegistry:
    registry = ActivityRegistry()

    @registry.activity("probe")
    def probe(ctx: ActivityContext) -> dict[str, str | None]:
        seen.append(ctx)
        return {"traceparent": ctx.traceparent}

    return registry


def traced_engine(
    path: Path,
    collector: Collector,
    registry: ActivityRegistry,
    clock: ManualClock,
    service: str = "wovyr",
) -> Engine:
    tracer = OtelTracer(collector.traces_url, service_name=service)
    return Engine(SQLiteStore(path), clock=clock, activities=registry, tracer=tracer)


def by_name(spans: list[Span]) -> dict[str, Span]:
    named = {s.name: s for s in spans}
    assert len(named) == len(spans), [s.name for s in spans]  # one span of each here
    return named


def started_trace(engine: Engine, execution_id: str) -> dict[str, str]:
    first = engine.history(execution_id, limit=1)[0]
    assert first.type == EventType.EXECUTION_STARTED
    trace: dict[str, str] = first.data["trace"]
    return trace


def test_a_tree_of_executions_is_one_trace_with_the_http_attempts_context_sent(
    tmp_path: Path,
    collector: Collector,
    registry: ActivityRegistry,
    clock: ManualClock,
    seen: list[ActivityContext],
) -> None:
    engine = traced_engine(tmp_path / "wovyr.db", collector, registry, clock)
    engine.apply(LEAF)
    rec = engine.start(tree(collector.hook_url), execution_id="t1")
    drain(engine)
    view = engine.query("t1")
    assert view.status == "completed"
    child = engine.list(parent_id="t1").items[0].id
    parent_trace, child_trace = started_trace(engine, rec.id), started_trace(engine, child)
    engine.close()  # exports what the batch holds

    spans = by_name(collector.spans())
    names = {"start tree", "attempt call", "attempt sub", "start leaf", "attempt probe"}
    assert set(spans) == names
    start, call, sub = spans["start tree"], spans["attempt call"], spans["attempt sub"]
    child_start, probe = spans["start leaf"], spans["attempt probe"]
    assert {s.trace_id for s in spans.values()} == {start.trace_id}
    # start -> attempts -> the child's start -> its attempts
    assert start.parent_span_id == ""
    assert call.parent_span_id == start.span_id
    assert sub.parent_span_id == start.span_id
    assert child_start.parent_span_id == sub.span_id
    assert probe.parent_span_id == child_start.span_id
    assert start.kind == ProtoSpan.SPAN_KIND_PRODUCER
    # what each start stored is its span's context
    assert list(parent_trace) == list(child_trace) == ["traceparent"]
    assert start.named_by(parent_trace["traceparent"])
    assert child_start.named_by(child_trace["traceparent"])
    # the http kind sent its attempt's context; the tool handler saw its own
    (hook,) = collector.hooks
    assert call.named_by(hook.get("traceparent"))
    (ctx,) = seen
    assert probe.named_by(ctx.traceparent)
    assert view.output == {"traceparent": ctx.traceparent}
    assert ctx.trace_headers == {"traceparent": ctx.traceparent}
    assert call.attributes == {
        "wovyr.tenant": "default",
        "wovyr.execution.id": "t1",
        "wovyr.workflow": "tree",
        "wovyr.activity": "call",
        "wovyr.attempt": 1,
        "wovyr.kind": "http",
        "wovyr.attempt.status": "completed",
    }
    assert sub.attributes["wovyr.attempt.status"] == "child"
    assert child_start.attributes["wovyr.execution.id"] == child


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_worker_elsewhere_continues_the_trace_its_start_recorded(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    collector: Collector,
    registry: ActivityRegistry,
    clock: ManualClock,
) -> None:
    """The start is made by one engine (its own store connection and tracer, then closed:
    the process is gone); another engine over the same database runs the attempts, from
    the stored checkpoint."""
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None

    def engine(service: str) -> Engine:
        tracer = OtelTracer(collector.traces_url, service_name=service)
        store = make_store(kind, tmp_path, url)
        return Engine(store, clock=clock, activities=registry, tracer=tracer)

    starter = engine("api")
    starter.start(LEAF, execution_id="far")
    starter.close()
    (start,) = collector.spans()

    worker = engine("worker")
    drain(worker)
    assert worker.query("far").status == "completed"
    worker.close()

    probe = by_name(collector.spans())["attempt probe"]
    assert (start.service, probe.service) == ("api", "worker")
    assert probe.trace_id == start.trace_id
    assert probe.parent_span_id == start.span_id


def test_a_failed_attempt_is_an_error_span_and_its_retry_a_sibling(
    tmp_path: Path, collector: Collector, clock: ManualClock
) -> None:
    registry = ActivityRegistry()
    calls: list[str | None] = []

    @registry.activity("flaky")
    def flaky(ctx: ActivityContext) -> str:
        calls.append(ctx.traceparent)
        if ctx.attempt == 1:
            raise RuntimeError("not yet")
        return "ok"

    engine = traced_engine(tmp_path / "wovyr.db", collector, registry, clock)
    engine.start(
        wf(
            "flaky",
            """
            activities:
              - {id: f, tool: flaky, retry: {max_attempts: 2, initial_interval: 1s}}
            """,
        ),
        execution_id="f1",
    )
    drain(engine)
    clock.advance(seconds=1)
    drain(engine)
    assert engine.query("f1").status == "completed"
    engine.close()

    spans = collector.spans()
    start = next(s for s in spans if s.name == "start flaky")
    attempts = sorted(
        (s for s in spans if s.name == "attempt f"), key=lambda s: s.attributes["wovyr.attempt"]
    )
    assert [s.parent_span_id for s in attempts] == [start.span_id] * 2
    assert [s.status_code for s in attempts] == [2, 0]  # error, unset
    assert attempts[0].attributes["wovyr.error.type"] == "RuntimeError"
    assert attempts[0].attributes["wovyr.attempt.status"] == "failed"
    assert len(calls) == 2
    assert all(s.named_by(tp) for s, tp in zip(attempts, calls, strict=True))


def test_an_execution_started_untraced_has_attempts_that_are_roots(
    tmp_path: Path, collector: Collector, registry: ActivityRegistry, clock: ManualClock
) -> None:
    path = tmp_path / "wovyr.db"
    plain = Engine(SQLiteStore(path), clock=clock, activities=registry)
    plain.start(LEAF, execution_id="u1")
    first = plain.history("u1", limit=1)[0]
    assert "trace" not in first.data  # nothing recorded when off
    plain.close()

    engine = traced_engine(path, collector, registry, clock)
    drain(engine)
    engine.close()
    (probe,) = collector.spans()
    assert probe.name == "attempt probe" and probe.parent_span_id == ""


def test_a_start_continues_the_callers_context(
    tmp_path: Path, collector: Collector, registry: ActivityRegistry, clock: ManualClock
) -> None:
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    engine = traced_engine(tmp_path / "wovyr.db", collector, registry, clock)
    engine.submit(LEAF, execution_id="c1", trace={"traceparent": caller})
    engine.close()
    (start,) = collector.spans()
    assert start.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert start.parent_span_id == "b7ad6b7169203331"


def test_a_continued_chain_stays_in_its_trace(
    tmp_path: Path, collector: Collector, registry: ActivityRegistry, clock: ManualClock
) -> None:
    engine = traced_engine(tmp_path / "wovyr.db", collector, registry, clock)
    engine.start(
        wf(
            "loop",
            """
            inputs: {n: {type: integer, default: 1}}
            activities:
              - {id: probe, tool: probe}
            continue_as_new:
              when: "${{ inputs.n < 3 }}"
              input: {n: "${{ inputs.n + 1 }}"}
            """,
        ),
        execution_id="chain",
    )
    for _ in range(3):  # a chain starts at most one run a second (min_continue_interval)
        drain(engine)
        clock.advance(1)
    assert engine.query("chain").status == "completed"  # followed to the chain's live run
    engine.close()

    spans = collector.spans()
    starts = [s for s in spans if s.name == "start loop"]
    probes = [s for s in spans if s.name == "attempt probe"]
    assert (len(starts), len(probes)) == (3, 3)
    assert {s.trace_id for s in spans} == {starts[0].trace_id}
    by_id = {s.attributes["wovyr.execution.id"]: s for s in starts}
    first, second, third = by_id["chain"], by_id["chain~c2"], by_id["chain~c3"]
    assert first.parent_span_id == ""
    assert second.parent_span_id == first.span_id  # each run continues the one before
    assert third.parent_span_id == second.span_id
    for probe in probes:
        assert probe.parent_span_id == by_id[probe.attributes["wovyr.execution.id"]].span_id


def test_an_attempt_lost_with_its_worker_is_rerun_under_the_same_start(
    tmp_path: Path, collector: Collector, registry: ActivityRegistry, clock: ManualClock
) -> None:
    """The start commit records the first attempt for a worker that dies before running it
    (its lease runs out); another engine takes the execution over and re-runs the attempt
    (a recovery), whose span continues the trace the start recorded."""
    path = tmp_path / "wovyr.db"
    starter = traced_engine(path, collector, registry, clock, service="dead")
    starter.start(LEAF, execution_id="lost", lease_owner="dead-worker", lease_seconds=5)
    starter.close()
    (start,) = collector.spans()

    clock.advance(seconds=6)
    taker = traced_engine(path, collector, registry, clock, service="taker")
    drain(taker)
    assert taker.query("lost").status == "completed"
    began = [e.data for e in taker.history("lost") if e.type == EventType.ACTIVITY_STARTED]
    assert [b.get("recovery") for b in began] == [None, 1]  # the lost run, then its re-run
    taker.close()

    probe = by_name(collector.spans())["attempt probe"]
    assert probe.service == "taker"
    assert (probe.trace_id, probe.parent_span_id) == (start.trace_id, start.span_id)


def test_items_and_compensations_say_which_they_are(
    tmp_path: Path, collector: Collector, clock: ManualClock
) -> None:
    registry = ActivityRegistry()

    @registry.activity("noop")
    def noop(n: int = 0) -> int:
        return n

    @registry.activity("boom")
    def boom() -> None:
        raise RuntimeError("no")

    engine = traced_engine(tmp_path / "wovyr.db", collector, registry, clock)
    engine.start(
        wf(
            "saga",
            """
            activities:
              - id: each
                for_each: "${{ [1, 2] }}"
                tool: noop
                with: {n: "${{ item }}"}
                compensate: {tool: noop}
              - id: fail
                needs: [each]
                tool: boom
                retry: {max_attempts: 1}
            """,
        ),
        execution_id="s1",
    )
    drain(engine)
    assert engine.query("s1").status == "failed"
    engine.close()

    spans = collector.spans()
    start = next(s for s in spans if s.name == "start saga")
    each = [s for s in spans if s.name == "attempt each"]
    items = sorted(
        s.attributes["wovyr.item.index"] for s in each if "wovyr.compensation" not in s.attributes
    )
    assert items == [0, 1]
    undone = [s for s in each if s.attributes.get("wovyr.compensation") is True]
    assert undone and all(s.attributes["wovyr.attempt.status"] == "completed" for s in undone)
    assert all(s.parent_span_id == start.span_id for s in spans if s is not start)
