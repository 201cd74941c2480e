"""Tracing at the edge, in fresh interpreters: off by default (the `http` kind sends no
`traceparent` and `opentelemetry` is never imported), on with the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` (the spans of `wovyr run` reach the collector before it
exits), and lazy when on (a command that only reads imports no tracing library)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.otlp_collector import Collector

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: traced}
activities:
  - id: call
    http: {url: "URL", method: POST, json: {hello: world}}
  - {id: done, needs: [call], set: {ok: true}}
"""


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running


def run_cli(argv: list[str], home: Path, **env: str) -> dict[str, object]:
    """Run `wovyr <argv>` in a fresh interpreter; its exit code and the modules it loaded."""
    code = (
        "import json, sys\n"
        "from wovyr.cli.main import main\n"
        f"code = main({argv!r})\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "WOVYR_"))}
    full = {**clean, "WOVYR_HOME": str(home), **env}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, check=False
    )
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return report


def otel_loaded(report: dict[str, object]) -> list[str]:
    modules = report["modules"]
    assert isinstance(modules, list)
    return [m for m in modules if m == "opentelemetry" or m.startswith("opentelemetry.")]


def test_tracing_off_imports_no_opentelemetry_and_sends_no_context(
    tmp_path: Path, collector: Collector
) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW.replace("URL", collector.hook_url))
    report = run_cli(["run", str(flow), "--id", "r1"], tmp_path)
    assert report["code"] == 0
    assert otel_loaded(report) == []
    (hook,) = collector.hooks
    assert "traceparent" not in hook
    assert collector.spans() == []


@pytest.mark.slow  # three interpreters
def test_the_standard_endpoint_turns_tracing_on_and_run_exports_before_it_exits(
    tmp_path: Path, collector: Collector
) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW.replace("URL", collector.hook_url))
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.base_url, "OTEL_SERVICE_NAME": "cli"}
    report = run_cli(["run", str(flow), "--id", "r1"], tmp_path, **env)
    assert report["code"] == 0
    assert "opentelemetry.sdk.trace" in otel_loaded(report)

    spans = {s.name: s for s in collector.spans()}
    assert set(spans) == {"start traced", "attempt call"}  # `set` runs in no attempt
    start, call = spans["start traced"], spans["attempt call"]
    assert call.parent_span_id == start.span_id and call.trace_id == start.trace_id
    assert {start.service, call.service} == {"cli"}
    (hook,) = collector.hooks
    assert call.named_by(hook["traceparent"])

    # a command that only reads, with tracing on, never loads the tracing library
    shown = run_cli(["workflows", "show", "r1", "--json"], tmp_path, WOVYR_OTEL="1")
    assert shown["code"] == 0
    assert otel_loaded(shown) == []


STEPS = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: served}
activities:
  - {id: s1, tool: step, with: {name: s1}}
  - {id: s2, tool: step, with: {name: s2}, needs: [s1]}
"""


@pytest.mark.slow  # a server and its worker process
@pytest.mark.timeout(120)
def test_wovyr_serve_continues_the_callers_trace_in_its_worker_process(
    tmp_path: Path, collector: Collector
) -> None:
    """`wovyr serve` starts the execution in the server process (under the request's
    `traceparent`) and runs its attempts in its worker process: one trace across both."""
    from tests.server.test_serve_process import Server, status_of, wait_for

    home = tmp_path / "home"
    home.mkdir()
    env = {
        "WOVYR_DISPATCH_INTERVAL_SECONDS": "0.2",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.base_url,
        "WOVYR_TEST_EFFECTS": str(tmp_path / "effects.log"),
    }
    server = Server(home, env)
    server.start()
    try:
        token = server.bootstrap_token()
        caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        with httpx.Client(
            base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=10
        ) as http:
            r = http.post(
                "/api/v1/workflows",
                json={"definition": STEPS, "id": "served-1"},
                headers={"traceparent": caller},
            )
            assert r.status_code == 201, r.text
            wait_for(lambda: status_of(http, "served-1") == "completed", 60, "the workflow")
    finally:
        assert server.stop() == 0  # a clean stop: both processes export what they hold

    spans = {s.name: s for s in collector.spans() if s.attributes.get("wovyr.workflow")}
    assert set(spans) == {"start served", "attempt s1", "attempt s2"}
    start = spans["start served"]
    assert (start.trace_id, start.parent_span_id) == (caller[3:35], caller[36:52])
    for name in ("attempt s1", "attempt s2"):
        assert spans[name].trace_id == start.trace_id
        assert spans[name].parent_span_id == start.span_id
