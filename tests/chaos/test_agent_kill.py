"""SIGKILL a real worker process at random points of 6-turn agent runs (at least 20 kills
in all): every run completes with the scripted answer; no model call and no tool call was
made again once it was recorded (each request and each side effect is older than its
`ModelCallCompleted` / `ToolCallCompleted` event); each was made once, plus once more for
each kill that caught it in flight (asked, not recorded), plus any repeat by the same
process (a lease it lost on a loaded machine: the run is driven again from its checkpoint).

Every worker process has its own life number, in the model URL it calls and in the side
effects it writes, so what was in flight at each kill is known exactly once it is over."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import Recorded, Reply, ScriptedLLM, text, tool_calls

WORKER = Path(__file__).with_name("agent_worker.py")
KEY = "sk-canary-chaos-5e1f"  # the worker's (tests/chaos/agent_worker.py)
LEASE = 1.0
MIN_KILLS = 20
AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: six-turns}
inputs: {run: {type: string}}
activities:
  - id: loop
    agent:
      model: m1
      input: "run ${{ inputs.run }}"
      tools: [effect]
      max_turns: 6
    retry: {max_attempts: 5, initial_interval: 0s}
    timeout: 2m
output: "${{ activities.loop.output }}"
"""
ANSWER = "six turns done"
WIDTH = {1: 1, 2: 3, 3: 1, 4: 3, 5: 1}  # tool calls per turn (2 and 4: parallel calls)


def _script() -> list[Reply]:
    """Turns 1-5 ask for tools, turn 6 answers."""
    replies = []
    for turn, width in WIDTH.items():
        calls = [("effect", {"n": turn * 10 + i}, f"t{turn}c{i}") for i in range(width)]
        replies.append(tool_calls(*calls, delay=random.uniform(0.02, 0.12)))
    replies.append(text(ANSWER, delay=0.05))
    return replies


def _call_of(request: Recorded) -> tuple[str, int]:
    """(run, turn) of a model request."""
    user = next(m for m in request.body["messages"] if m["role"] == "user")
    return str(user["content"]).removeprefix("run "), request.turn + 1


def _life_of(request: Recorded) -> int:
    return int(request.path.split("/life-")[1].split("/")[0])


def _recorded_at(
    engine: Engine, runs: list[str]
) -> tuple[dict[tuple[str, int], float], dict[str, float]]:
    """When each model call (run, turn) and each tool call (its idempotency key) was recorded
    (the wall time of its event)."""
    models: dict[tuple[str, int], float] = {}
    tools: dict[str, float] = {}
    for run in runs:
        for event in engine.history(run):
            if event.type == "ModelCallCompleted":
                models[(run, event.data["turn"])] = event.at.timestamp()
            elif event.type == "ToolCallCompleted":
                key = f"{run}/loop/t{event.data['turn']}/{event.data['call_id']}"
                tools[key] = event.at.timestamp()
    return models, tools


def _recorded(engine: Engine, runs: list[str]) -> tuple[set[tuple[str, int]], set[str]]:
    """(run, turn) of every recorded model call; idempotency keys of recorded tool calls."""
    models, tools = _recorded_at(engine, runs)
    return set(models), set(tools)


def _effects(path: Path) -> list[tuple[str, int, float]]:
    """(idempotency key, life, wall time) of every side effect."""
    lines = (line.split() for line in path.read_text().splitlines())
    return [(key, int(life), float(at)) for key, life, at in lines]


def _same_life_repeats(made: list[tuple[object, int]]) -> Counter[object]:
    """Per call: how many more times than once one worker process made it."""
    per_life = Counter(made)
    repeats: Counter[object] = Counter()
    for (call, _), count in per_life.items():
        repeats[call] += count - 1
    return repeats


def _worker(db: Path, effects: Path, llm: ScriptedLLM, life: int) -> subprocess.Popen[bytes]:
    base_url = f"http://127.0.0.1:{llm.port}/life-{life}/v1"
    argv = [sys.executable, str(WORKER), str(db), str(effects), str(LEASE), base_url, str(life)]
    return subprocess.Popen(argv)


def _await_progress(proc: subprocess.Popen[bytes], llm: ScriptedLLM, effects: Path) -> bool:
    """Until the new worker has asked the model or run a tool (its start-up, and the wait
    for the killed one's lease, take seconds on a loaded machine); False when it finished
    the work without either: a kill that landed after a run's last recorded call left that
    run only its completing commit."""
    asked, done = len(llm.completions), effects.stat().st_size
    deadline = time.monotonic() + 120
    while len(llm.completions) == asked and effects.stat().st_size == done:
        code = proc.poll()
        if code is not None:
            assert code == 0, f"the worker process failed ({code})"
            return False
        assert time.monotonic() < deadline, "the worker made no progress"
        time.sleep(0.01)
    return True


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigkill_during_agent_runs_repeats_no_completed_call(tmp_path: Path) -> None:
    db, effects = tmp_path / "w.db", tmp_path / "effects.log"
    effects.touch()
    engine = Engine(SQLiteStore(db))
    runs: list[str] = []
    at_kill: dict[int, tuple[set[tuple[str, int]], set[str]]] = {}  # life -> recorded
    rng = random.Random()
    lives = 0  # worker processes started: each its own life (some finish before a kill)
    with ScriptedLLM(_script(), pick="turn") as llm:
        while len(at_kill) < MIN_KILLS:
            if all(engine.query(r).status == "completed" for r in runs):
                batch = [f"r{len(runs) + i}" for i in range(3)]
                for run in batch:
                    engine.start(AGENT, {"run": run}, execution_id=run)
                runs += batch
            life, lives = lives, lives + 1
            proc = _worker(db, effects, llm, life)
            if not _await_progress(proc, llm, effects):
                continue  # it completed what a kill had left: nothing in flight to kill
            time.sleep(rng.uniform(0, 1.2))  # a random point of the loop
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            at_kill[life] = _recorded(engine, runs)  # the dead worker writes no more
        final = _worker(db, effects, llm, lives)
        assert final.wait(timeout=300) == 0
        # a request the kill cut short (its body unreadable) was never a model call
        requests = [r for r in llm.completions if r.body is not None]

    for run in runs:
        view = engine.query(run)
        assert view.status == "completed", (run, view.activities["loop"])
        assert view.output["text"] == ANSWER
        assert view.output["turns"] == 6
        assert len(view.output["tool_calls"]) == sum(WIDTH.values())

    model_at, tool_at = _recorded_at(engine, runs)
    # no model call asked again once recorded (the reply came after the ask; its event after)
    for r in requests:
        assert r.at <= model_at[_call_of(r)], (_call_of(r), _life_of(r))
    # once, plus once per kill that caught the call in flight, plus a process's own repeats
    in_flight: Counter[tuple[str, int]] = Counter()
    for life, (models, _) in at_kill.items():
        asked = {_call_of(r) for r in requests if _life_of(r) == life}
        in_flight.update(asked - models)
    own = _same_life_repeats([(_call_of(r), _life_of(r)) for r in requests])
    seen = Counter(_call_of(r) for r in requests)
    expected_calls = {(run, turn) for run in runs for turn in range(1, 7)}
    assert set(seen) == expected_calls
    for call, count in seen.items():
        assert 1 + in_flight[call] <= count <= 1 + in_flight[call] + own[call], (
            call,
            count,
            in_flight[call],
            own[call],
        )

    # tool calls: never after being recorded; once, plus once per kill that landed inside
    # the tool, plus a process's own repeats
    done = _effects(effects)
    for key, life, at in done:
        assert at <= tool_at[key], (key, life)
    inside: Counter[str] = Counter()
    for life, (_, tools) in at_kill.items():
        inside.update({key for key, lived, _ in done if lived == life} - tools)
    tool_own = _same_life_repeats([(key, life) for key, life, _ in done])
    counts = Counter(key for key, _, _ in done)
    assert set(counts) == {
        f"{run}/loop/t{turn}/t{turn}c{i}"
        for run in runs
        for turn in WIDTH
        for i in range(WIDTH[turn])
    }
    for key, count in counts.items():
        assert 1 + inside[key] <= count <= 1 + inside[key] + tool_own[key], (
            key,
            count,
            inside[key],
            tool_own[key],
        )

    assert len(at_kill) >= MIN_KILLS
    assert sum(in_flight.values()) + sum(inside.values()) > 0, "no kill landed in a call"
    assert all(r.authorization == f"Bearer {KEY}" for r in requests)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("w.db"))
    assert KEY.encode() not in raw
    assert KEY not in json.dumps([e.data for run in runs for e in engine.history(run)])
    print(  # the numbers of this run (-s shows them)
        f"runs={len(runs)} kills={len(at_kill)} model calls repeated={sum(in_flight.values())}"
        f" tool calls repeated={sum(inside.values())} requests={len(requests)}"
        f" repeated by a process itself: {sum(own.values())} model, {sum(tool_own.values())} tool"
    )
    engine.close()
