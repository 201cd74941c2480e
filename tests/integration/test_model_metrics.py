"""Model calls in the Prometheus exposition and in the events: tokens by provider, model and
kind (input, output, cached), cost from the provider's price table (a model's own price,
by its name or the name it extends, else the provider's), and a latency histogram with
the outcome; each call's usage, cost and latency on its event (an `llm` step's result
event, an agent's `ModelCallCompleted`), listed by `wovyr workflows show` with the totals
per activity and in all. Against the scripted OpenAI-compatible server
(real HTTP on 127.0.0.1) and a SQLite file; the exposition is read as a scrape reads it,
and another tenant's scrape shows none of it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr import assemble
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.cli.main import main
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import ConfigError
from wovyr.platform.metrics import meter
from wovyr.settings import load_settings
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, status, text, tool_calls

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
PRICES = {"m1": {"input": 3.0, "output": 6.0}}  # per 1M tokens; other models: 1 and 2

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: spend}
activities:
  - id: ask
    llm: {model: m1, prompt: hi}
  - id: think
    needs: [ask]
    agent: {model: m1-2030-01-01, input: Note it., tools: [note.add]}
  - id: other
    needs: [think]
    llm: {model: x9, prompt: hi}
"""
REFUSED = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: refused}
activities:
  - id: ask
    llm: {model: x9, prompt: hi}
    retry: {max_attempts: 1}
"""
_SAMPLE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def scrape(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition's samples by name and label set."""
    out = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', found[2]))
            out[(found[1], labels)] = float(found[3])
    return out


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples[(name, frozenset({"tenant": "default", **labels}.items()))]


def test_model_calls_are_counted_by_provider_model_and_kind_with_cost_and_latency(
    tmp_path: Path,
) -> None:
    registry = ActivityRegistry()
    registry.register("note.add", lambda text: "noted")
    replies = [
        text("a", usage=(100, 20), cached=60),  # ask
        tool_calls(("note_add", {"text": "x"}, "c1"), usage=(40, 10)),  # think, turn 1
        text("done", usage=(40, 10)),  # think, turn 2
        text("b", usage=(10, 5)),  # other
        status(400),  # refused
    ]
    with ScriptedLLM(replies) as llm:
        provider = ProviderConfig(
            "default", llm.base_url, price_in=1.0, price_out=2.0, prices=PRICES
        )
        store = SQLiteStore(tmp_path / "w.db")
        metrics = meter(store)
        engine = Engine(
            store,
            clock=ManualClock(T0),
            activities=registry,
            providers=Providers({"default": provider}),
        )
        engine.start(FLOW, execution_id="e1")
        drain(engine)
        assert engine.query("e1").status == "completed"
        engine.start(REFUSED, execution_id="e2")
        drain(engine)
        assert engine.query("e2").activities["ask"]["error"]["type"] == "ProviderBadRequest"

        samples = scrape(metrics.render(None))
        m1 = {"provider": "default", "model": "m1"}
        dated = {"provider": "default", "model": "m1-2030-01-01"}
        x9 = {"provider": "default", "model": "x9"}
        tokens = "wovyr_model_tokens_total"
        assert sample(samples, tokens, kind="input", **m1) == 100
        assert sample(samples, tokens, kind="output", **m1) == 20
        assert sample(samples, tokens, kind="cached", **m1) == 60
        assert sample(samples, tokens, kind="input", **dated) == 80  # the agent's two calls
        assert sample(samples, tokens, kind="output", **dated) == 20
        assert sample(samples, tokens, kind="input", **x9) == 10
        assert (tokens, frozenset({"tenant": "default", "kind": "cached", **x9}.items())) not in (
            samples
        )
        cost = "wovyr_model_cost_total"
        assert sample(samples, cost, **m1) == pytest.approx((100 * 3 + 20 * 6) / 1e6)
        assert sample(samples, cost, **dated) == pytest.approx((80 * 3 + 20 * 6) / 1e6)
        assert sample(samples, cost, **x9) == pytest.approx((10 * 1 + 5 * 2) / 1e6)
        latency = "wovyr_model_request_duration_seconds_count"
        assert sample(samples, latency, outcome="ok", **m1) == 1
        assert sample(samples, latency, outcome="ok", **dated) == 2
        assert sample(samples, latency, outcome="ok", **x9) == 1
        assert sample(samples, latency, outcome="ProviderBadRequest", **x9) == 1
        assert "wovyr_model_tokens_total" not in metrics.render("acme").replace(
            "# HELP wovyr_model_tokens_total", ""
        ).replace("# TYPE wovyr_model_tokens_total", "")

        # each call's usage, cost and latency on its event
        events = engine.history("e1")
        (asked,) = [
            e for e in events if e.type == "ActivityCompleted" and e.data["activity"] == "ask"
        ]
        (call,) = asked.data["model_calls"]
        assert {k: v for k, v in call.items() if k != "latency"} == {
            "provider": "default",
            "model": "m1",
            "input_tokens": 100,
            "output_tokens": 20,
            "cached_tokens": 60,
            "cost": pytest.approx((100 * 3 + 20 * 6) / 1e6),
        }
        assert call["latency"] >= 0
        turns = [e.data for e in events if e.type == "ModelCallCompleted"]
        assert [(t["provider"], t["cost"]) for t in turns] == [
            ("default", pytest.approx((40 * 3 + 10 * 6) / 1e6)),
        ] * 2
        assert all(t["latency"] >= 0 for t in turns)
        (failed,) = [e for e in engine.history("e2") if e.type == "ActivityFailed"]
        (refused,) = failed.data["model_calls"]
        assert (refused["error"], refused["input_tokens"], refused["cost"]) == (
            "ProviderBadRequest",
            0,
            None,
        )
        engine.close()


def test_an_operator_sets_the_default_providers_prices_per_model() -> None:
    env = {
        "WOVYR_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "WOVYR_LLM_PRICE_IN": "1",
        "WOVYR_LLM_PRICE_OUT": "2",
        "WOVYR_LLM_PRICES": '{"gpt-4o": {"input": 2.5, "output": 10}}',
    }
    default = assemble.model_providers(load_settings(env)).get("default")
    assert default.cost(1_000_000, 1_000_000, "gpt-4o-2024-08-06") == 12.5  # its prefix
    assert default.cost(1_000_000, 1_000_000, "gpt-4o-mini") == 3.0  # not it: the default
    for bad, says in [
        ("[1]", "must be a JSON object"),
        ('{"m": {"input": -1, "output": 1}}', "prices.m.input is a finite number"),
        ('{"m": {"in": 1}}', "prices.m is {input: X, output: Y}"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(says)):
            assemble.model_providers(load_settings({**env, "WOVYR_LLM_PRICES": bad}))


SHOWN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: shown}
activities:
  - id: ask
    for_each: "${{ [1, 2] }}"
    llm: {model: m1, prompt: "About ${{ item }}"}
  - id: think
    needs: [ask]
    agent: {model: m1, input: Answer.}
"""


def test_workflows_show_lists_each_model_call_and_the_totals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = tmp_path / "shown.yaml"
    flow.write_text(SHOWN)
    item = text("a", usage=(100, 20), cached=60)  # (the items ask in either order)
    replies = [item, item, text("c", usage=(10, 5))]
    with ScriptedLLM(replies) as llm:
        monkeypatch.setenv("WOVYR_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("WOVYR_LLM_BASE_URL", llm.base_url)
        monkeypatch.setenv("WOVYR_LLM_PRICE_IN", "1")
        monkeypatch.setenv("WOVYR_LLM_PRICE_OUT", "2")
        assert main(["run", str(flow), "--id", "s1", "--json"]) == 0
        capsys.readouterr()
        assert main(["workflows", "show", "s1", "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
    calls = shown["model_calls"]
    assert sorted((c["activity"], c.get("index", -1), c.get("turn", -1)) for c in calls) == [
        ("ask", 0, -1),
        ("ask", 1, -1),
        ("think", -1, 1),
    ]
    first = next(c for c in calls if c.get("index") == 0)
    assert (first["provider"], first["model"], first["input_tokens"]) == ("default", "m1", 100)
    assert (first["output_tokens"], first["cached_tokens"]) == (20, 60)
    assert first["cost"] == pytest.approx((100 + 40) / 1e6)
    assert all(isinstance(c["latency"], float) for c in calls)
    usage = shown["model_usage"]
    total = usage["total"]
    assert {k: total[k] for k in ("calls", "input_tokens", "output_tokens", "cached_tokens")} == {
        "calls": 3,
        "input_tokens": 210,
        "output_tokens": 45,
        "cached_tokens": 120,
    }
    assert total["cost"] == pytest.approx((210 + 90) / 1e6)
    assert usage["activities"]["think"]["calls"] == 1  # the agent's run
    assert usage["activities"]["think"]["input_tokens"] == 10
    assert usage["activities"]["ask"]["input_tokens"] == 200

    assert main(["workflows", "show", "s1"]) == 0
    out = capsys.readouterr().out
    assert "model calls" in out
    rows = [line.split() for line in out.splitlines()]
    assert (rows[[r[:3] for r in rows].index(["ask", "index", "0"])][:9]) == [
        "ask",
        "index",
        "0",
        "default/m1",
        "100",
        "(60",
        "cached)",
        "20",
        "0.000140",
    ]
    assert ["(all)", "3", "calls", "210", "(120", "cached)", "45", "0.000300"] in [
        r[:8] for r in rows
    ]
