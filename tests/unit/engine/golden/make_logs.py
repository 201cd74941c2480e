"""Writes `logs.json`: event logs and checkpoints recorded by the engine, kept as the
compatibility contract of the stored event JSON (see `test_old_logs.py`).

Run it to ADD scenarios (`python -m tests.unit.engine.golden.make_logs`): it writes only the
executions the file does not hold yet; the logs already in it were written by an earlier
engine and must keep folding to the same state. Each scenario drives real workers on a
`memory://` store with a ManualClock.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.testing import drain, memory_engine

OUT = Path(__file__).with_name("logs.json")


def wf(body: str, name: str = "golden") -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


SAGA = wf(
    """
    activities:
      - id: reserve
        tool: ok
        with: {v: 1}
        compensate: {tool: ok, with: {v: "${{ activities.reserve.output }}"}}
      - id: items
        needs: [reserve]
        for_each: "${{ [1, 2, 3] }}"
        tool: ok
        with: {v: "${{ item }}"}
        compensate: {set: {undone: "${{ item }}"}}
      - id: charge
        needs: [items]
        tool: flaky
        retry: {max_attempts: 2, initial_interval: 1s}
    """
)
WAITS = wf(
    """
    timeout: 1d
    activities:
      - id: go
        wait: {signal: go}
      - id: ok
        needs: [go]
        wait: {approval: {timeout: 1h}}
      - id: nap
        needs: [ok]
        wait: {timer: {after: 5m}}
      - id: note
        needs: [nap]
        set: {said: "${{ activities.go.output }}"}
      - id: skipped
        needs: [note]
        when: "${{ false }}"
        tool: ok
    output: "${{ activities.note.output }}"
    """
)
CHILD = wf(
    """
    activities:
      - id: kids
        for_each: "${{ [1, 2] }}"
        workflow: {name: golden-child, input: {n: "${{ item }}"}}
      - id: one
        workflow: {name: golden-child, input: {n: 7}}
    output: "${{ activities.kids.output }}"
    """,
    name="golden-parent",
)
CHILD_DEF = wf(
    """
    inputs: {n: {type: integer}}
    activities:
      - id: double
        set: {v: "${{ inputs.n * 2 }}"}
    output: "${{ activities.double.output.v }}"
    """,
    name="golden-child",
)
CANCELLED = wf(
    """
    activities:
      - id: hold
        wait: {signal: never}
    """
)
TIMEOUT = wf(
    """
    timeout: 10s
    activities:
      - id: slow
        wait: {timer: {after: 1h}}
    """
)
BAD_EXPR = wf(
    """
    inputs: {m: {type: object, default: {}}}
    activities:
      - id: a
        tool: ok
        with: {v: "${{ inputs.m.deeper.x }}"}
    """
)
UNDO_FAILS = wf(
    """
    activities:
      - id: each
        for_each: "${{ [1, 2] }}"
        tool: once_bad
        with: {v: "${{ item }}"}
        retry: {max_attempts: 2, initial_interval: 0s}
        compensate: {tool: bad, retry: {max_attempts: 2}}
      - id: single
        tool: ok
        compensate: {tool: bad, retry: {max_attempts: 2}}
      - id: last
        needs: [each, single]
        tool: bad
        retry: {max_attempts: 1}
    """
)


REPEAT = wf(
    """
    activities:
      - id: poll
        tool: ok
        with: {v: "${{ iteration }}"}
        repeat: {until: "${{ output == 3 }}", every: 1m, max_iterations: 5}
      - id: count
        needs: [poll]
        set: {n: "${{ iteration }}"}
        repeat: {until: "${{ output.n == 2 }}"}
    output: "${{ activities.poll.iterations }}"
    """
)
AGENT = wf(
    """
    activities:
      - id: think
        agent:
          model: m1
          instructions: Use the tools.
          input: go
          tools: [ok, bad]
    output: "${{ activities.think.output.text }}"
    """
)
AGENT_APPROVAL = wf(
    """
    activities:
      - id: think
        agent:
          model: m1
          input: go
          tools: [ok, bad]
          require_approval: [ok, bad]
    output: "${{ activities.think.output.text }}"
    """
)


RERUN = wf(
    """
    activities:
      - {id: first, tool: ok, with: {v: 1}}
      - {id: second, needs: [first], tool: bad, retry: {max_attempts: 1}}
    """,
    name="rerun",
)


def _agent_script() -> list[Any]:
    from wovyr.testing.model_server import text, tool_calls

    return [
        tool_calls(("ok", {"v": 1}, "c1"), usage=(12, 4)),
        tool_calls(("bad", {}, "c2"), ("nope", {}, "c3")),
        text("done"),
    ]


CHAIN = wf(
    """
    inputs: {n: {type: integer, default: 1}}
    activities:
      - id: go
        wait: {signal: go}
    output: "${{ inputs.n }}"
    continue_as_new: {when: "${{ inputs.n < 2 }}", input: {n: "${{ inputs.n + 1 }}"}}
    """
)


def scenarios() -> dict[str, Any]:
    from wovyr.activities.providers import ProviderConfig, Providers
    from wovyr.testing.model_server import ScriptedLLM

    llm = ScriptedLLM(_agent_script(), pick="turn").__enter__()
    try:
        return _scenarios(Providers({"default": ProviderConfig("default", llm.base_url)}))
    finally:
        llm.__exit__(None, None, None)


def _scenarios(providers: Any) -> dict[str, Any]:
    base = memory_engine(ActivityRegistry())  # not the process's default registry
    # the logs were written when a chain handed over at once: no minimum interval here
    limits = replace(base.limits, min_continue_interval=0)
    # providers: the scripted model server of `_agent_script`
    engine = Engine.over(replace(base.runtime, providers=providers, limits=limits))
    flaky_calls: list[int] = []

    @engine.activities.activity("ok")
    def ok(v: Any = None) -> Any:
        return v

    @engine.activities.activity("flaky")
    def flaky() -> Any:
        flaky_calls.append(1)
        raise RuntimeError(f"boom {len(flaky_calls)}")

    seen: set[Any] = set()

    @engine.activities.activity("once_bad")
    def once_bad(v: Any = None) -> Any:
        if v not in seen:
            seen.add(v)
            raise ValueError(f"first try of {v}")
        return v

    @engine.activities.activity("bad")
    def bad() -> Any:
        raise RuntimeError("always")

    ids = {}
    ids["saga"] = engine.start(SAGA, execution_id="saga").id
    drain(engine)
    engine.clock.advance(seconds=2)
    drain(engine)

    ids["waits"] = engine.start(WAITS, execution_id="waits").id
    drain(engine)
    engine.signal("waits", "go", {"x": 1})
    drain(engine)
    engine.approve("waits", "ok", True, by="ada", comment="fine")
    drain(engine)
    engine.clock.advance(minutes=6)
    drain(engine)

    engine.apply(CHILD_DEF)
    ids["parent"] = engine.start(CHILD, execution_id="parent").id
    drain(engine)

    ids["cancelled"] = engine.start(CANCELLED, execution_id="cancelled").id
    drain(engine)
    engine.signal("cancelled", "other", [1, 2])
    engine.cancel("cancelled", reason="no longer needed", by="bob")

    ids["timeout"] = engine.start(TIMEOUT, execution_id="timeout").id
    drain(engine)
    engine.clock.advance(seconds=11)
    drain(engine)

    ids["bad_expr"] = engine.start(BAD_EXPR, execution_id="bad_expr").id
    drain(engine)

    ids["undo_fails"] = engine.start(UNDO_FAILS, execution_id="undo_fails").id
    drain(engine)

    ids["repeat"] = engine.start(REPEAT, execution_id="repeat").id
    drain(engine)
    for _ in range(2):
        engine.clock.advance(minutes=1)
        drain(engine)

    ids["chain"] = engine.start(CHAIN, execution_id="chain").id
    drain(engine)
    engine.signal("chain", "go", 1)
    engine.signal("chain", "go", 2)  # buffered: carried over to run 2 (chain~c2)
    ids["agent"] = engine.start(AGENT, execution_id="agent").id
    drain(engine)

    ids["agent_approval"] = engine.start(AGENT_APPROVAL, execution_id="agent_approval").id
    drain(engine)
    engine.approve("agent_approval", "think", True, by="ada")
    drain(engine)
    engine.approve("agent_approval", "think", False, by="bob", comment="no")
    drain(engine)

    ids["rerun_of"] = engine.start(RERUN, execution_id="rerun_of").id
    drain(engine)  # fails at `second`: its rerun from there reuses `first`
    ids["rerun"] = engine.rerun("rerun_of", start_from="second", new_id="rerun").id
    drain(engine)

    every = [r.id for r in engine.list(limit=1000).items]
    out: dict[str, Any] = {}
    for execution_id in sorted(every):
        record = engine.get(execution_id)
        out[execution_id] = {
            "status": record.status,
            "events": [
                {"type": e.type, "at": e.at.isoformat(), "data": e.data}
                for e in engine.history(execution_id, follow=False)
            ],
            "checkpoint": record.checkpoint,
        }
    return out


if __name__ == "__main__":
    kept = json.loads(OUT.read_text()) if OUT.exists() else {}
    added = {k: v for k, v in scenarios().items() if k not in kept}
    OUT.write_text(json.dumps({**kept, **added}, indent=1, sort_keys=True) + "\n")
    print(f"added {sorted(added)} to {OUT}")
