"""Model-provider and MCP calls in traces, exported over OTLP/HTTP to a real collector: an
`llm` step's chat, an `agent`'s chats and its MCP tool call, a `memory` step's embeddings
and an `mcp` step's tool call are each a span, a child of the attempt that made it, named
and attributed per OpenTelemetry's GenAI semantic conventions (`chat <model>`, `embeddings
<model>`; `mcp.call <server>/<tool>`) with the provider, the server's address, the model,
the tokens and the finish reasons; the MCP SDK's own spans nest under the tool call's (run
in a process of its own, whose global tracer provider is ours); a failed call (the provider
refused the key, the tool answered an error) is an error span named by its type. The API key, the
prompt and a tool's arguments leave the process in no export, though the key was sent to
the model server (the scripted one of wovyr.testing.model_server) and the tool ran (the official
SDK's server of `wovyr.testing.mcp_server`, over stdio)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from tests.otlp_collector import Collector, Span

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.mcp import add_mcp_server, parse_mcp_server
from wovyr.platform.secrets import Secrets
from wovyr.platform.tracing import OtelTracer
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, status, text, tool_calls

MCP_SERVER = [sys.executable, "-m", "wovyr.testing.mcp_server"]  # its built-in tools
API_KEY = "sk-trace-canary-5f3e1a9d07"
PROMPT = "Summarize the confidential memo 4417"


def wf(name: str, body: str) -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


ASSIST = wf(
    "assist",
    f"""
    activities:
      - id: ask
        llm: {{model: m-small, prompt: "{PROMPT}"}}
      - id: think
        needs: [ask]
        agent: {{model: m1, input: Add 2 and 3., tools: ["mcp:calc/add"]}}
      - id: remember
        needs: [think]
        memory: {{op: put, namespace: notes, key: k1, text: the memo was summarized,
                  embedding: {{provider: default, model: emb-1}}}}
      - id: sum
        needs: [remember]
        mcp: {{server: calc, tool: add, arguments: {{a: 40, b: 2}}}}
    """,
)
BROKEN = wf(
    "broken",
    """
    activities:
      - id: deny
        llm: {prompt: hi}
        retry: {max_attempts: 1}
      - id: oops
        mcp: {server: calc, tool: fail}
        retry: {max_attempts: 1}
    """,
)


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    script = [
        text("The memo says little."),
        tool_calls(("calc_add", {"a": 2, "b": 3})),
        text("2 + 3 = 5", usage=(30, 7)),
        status(401),  # from here on: the provider refuses the key
    ]
    with ScriptedLLM(script) as running:
        yield running


def traced_engine(tmp_path: Path, collector: Collector, llm: ScriptedLLM) -> Engine:
    store = SQLiteStore(tmp_path / "wovyr.db")
    secrets = Secrets(store, Kms(RootKey(bytes.fromhex("ef" * 32)), "production"))
    engine = Engine(
        store,
        clock=ManualClock(),
        activities=ActivityRegistry(),
        providers=Providers(
            {"default": ProviderConfig("default", llm.base_url, "m1", api_key=API_KEY)}
        ),
        secrets=secrets,
        side_effects=TRUSTED,  # the model server is on loopback, the MCP server a program
        tracer=OtelTracer(collector.traces_url),
    )
    fields = {"command": MCP_SERVER}
    policy = engine.side_effect_policy()
    at = engine.clock.now()
    add_mcp_server(
        engine.store, parse_mcp_server(engine.tenant, "calc", fields, policy=policy, by="t", at=at)
    )
    return engine


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def test_model_and_mcp_calls_are_children_of_their_attempts(
    tmp_path: Path, collector: Collector, llm: ScriptedLLM
) -> None:
    engine = traced_engine(tmp_path, collector, llm)
    engine.start(ASSIST, execution_id="a1")
    drain(engine)
    view = engine.query("a1")
    assert view.status == "completed", view.activities
    assert view.activities["sum"]["output"]["text"] == "42"
    engine.close()  # exports what the batch holds

    spans = collector.spans()
    (ask,) = named(spans, "attempt ask")
    (think,) = named(spans, "attempt think")
    (remember,) = named(spans, "attempt remember")
    (sum_,) = named(spans, "attempt sum")
    chats = [*named(spans, "chat m-small"), *named(spans, "chat m1")]
    assert len(chats) == 3  # the llm step's, then the agent's two turns
    assert [c.parent_span_id for c in chats] == [ask.span_id, think.span_id, think.span_id]
    agent_call, step_call = named(spans, "mcp.call calc/add")
    assert agent_call.parent_span_id == think.span_id
    assert step_call.parent_span_id == sum_.span_id
    (embedding,) = named(spans, "embeddings emb-1")
    assert embedding.parent_span_id == remember.span_id
    calls = [*chats, agent_call, step_call, embedding]
    assert {s.trace_id for s in calls} == {ask.trace_id}
    assert {s.kind for s in calls} == {ProtoSpan.SPAN_KIND_CLIENT}
    assert {s.status_code for s in calls} == {0}  # unset: no error

    port = int(llm.base_url.rsplit(":", 1)[1].split("/")[0])
    assert chats[0].attributes == {
        "wovyr.provider": "default",
        "gen_ai.provider.name": "openai",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m-small",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.response.model": "m-small",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[2].attributes["gen_ai.request.model"] == "m1"
    assert (
        chats[2].attributes["gen_ai.usage.input_tokens"],
        chats[2].attributes["gen_ai.usage.output_tokens"],
    ) == (30, 7)
    assert embedding.attributes["gen_ai.operation.name"] == "embeddings"
    assert embedding.attributes["gen_ai.request.model"] == "emb-1"
    assert embedding.attributes["wovyr.embeddings.count"] == 1
    assert step_call.attributes == {
        "wovyr.mcp.server": "calc",
        "gen_ai.tool.name": "add",
        "mcp.method.name": "tools/call",
    }

    # the key reached the model server, the prompt too; neither left in any export
    assert {r.authorization for r in llm.requests} == {f"Bearer {API_KEY}"}
    assert PROMPT in str(llm.completions[0].body)
    exported = collector.exported()
    assert exported
    for body in exported:
        assert API_KEY.encode() not in body
        assert PROMPT.encode() not in body


def test_failed_calls_are_error_spans_named_by_their_type(
    tmp_path: Path, collector: Collector
) -> None:
    with ScriptedLLM([status(401)]) as refusing:
        engine = traced_engine(tmp_path, collector, refusing)
        engine.start(BROKEN, execution_id="b1")
        drain(engine)
    view = engine.query("b1")
    assert view.activities["deny"]["error"]["type"] == "ProviderAuthFailed"
    assert view.activities["oops"]["error"]["type"] == "McpToolError"
    engine.close()

    spans = collector.spans()
    (deny,) = named(spans, "attempt deny")
    (oops,) = named(spans, "attempt oops")
    (chat,) = named(spans, "chat m1")
    (call,) = named(spans, "mcp.call calc/fail")
    assert (chat.parent_span_id, call.parent_span_id) == (deny.span_id, oops.span_id)
    assert (chat.status_code, call.status_code) == (2, 2)  # errors
    assert (chat.status_message, chat.attributes["error.type"]) == (
        "ProviderAuthFailed",
        "ProviderAuthFailed",
    )
    assert (call.status_message, call.attributes["error.type"]) == ("McpToolError",) * 2
    assert "gen_ai.usage.input_tokens" not in chat.attributes  # nothing came back
    assert chat.events == call.events == ()  # no exception event: its text may quote the call
    assert {r.authorization for r in refusing.requests} == {f"Bearer {API_KEY}"}
    for body in collector.exported():
        assert API_KEY.encode() not in body


NESTED = '''
import sys
from pathlib import Path

from tests.integration.test_tracing_calls import MCP_SERVER, wf
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.platform.mcp import add_mcp_server, parse_mcp_server
from wovyr.platform.tracing import OtelTracer
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

store_path, traces_url = Path(sys.argv[1]), sys.argv[2]
engine = Engine(
    SQLiteStore(store_path),
    clock=ManualClock(),
    activities=ActivityRegistry(),
    side_effects=TRUSTED,
    tracer=OtelTracer(traces_url, install=True),  # the process's provider: the SDK's too
)
fields = {"command": MCP_SERVER}
record = parse_mcp_server(
    engine.tenant, "calc", fields, policy=engine.side_effect_policy(), by="t",
    at=engine.clock.now(),
)
add_mcp_server(engine.store, record)
flow = wf("sum", """
activities:
  - id: sum
    mcp: {server: calc, tool: add, arguments: {a: 40, b: 2}}
""")
engine.start(flow, execution_id="n1")
drain(engine)
assert engine.query("n1").status == "completed"
engine.close()
'''


def test_the_mcp_sdks_spans_nest_under_the_tool_calls_span(
    tmp_path: Path, collector: Collector
) -> None:
    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "w.db"), collector.traces_url],
        check=False,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    spans = collector.spans()
    (attempt,) = named(spans, "attempt sum")
    (call,) = named(spans, "mcp.call calc/add")
    assert call.parent_span_id == attempt.span_id
    sent = [s for s in spans if s.name.startswith("MCP send")]
    assert "MCP send tools/call add" in {s.name for s in sent}
    # every request the SDK sent for this call is a child of the call's span, in its trace
    assert {s.parent_span_id for s in sent} == {call.span_id}
    assert {s.trace_id for s in sent} == {call.trace_id}
