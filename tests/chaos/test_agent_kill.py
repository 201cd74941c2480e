"""SIGKILL a real worker process at random points of 6-turn agent runs (at least 20 kills
in all): every run completes with the scripted answer; the model server saw each model
call once, plus once more for each kill that caught it in flight (asked, not recorded);
each tool call's side effect happened 1 + (kills that landed inside it) times.

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
from tests.llm_server import Recorded, Reply, ScriptedLLM, text, tool_calls

from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore

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


def _recorded(engine: Engine, runs: list[str]) -> tuple[set[tuple[str, int]], set[str]]:
    """(run, turn) of every recorded model call; idempotency keys of recorded tool calls."""
    models: set[tuple[str, int]] = set()
    tools: set[str] = set()
    for run in runs:
        for event in engine.history(run):
            if event.type == "ModelCallCompleted":
                models.add((run, event.data["turn"]))
            elif event.type == "ToolCallCompleted":
                tools.add(f"{run}/loop/t{event.data['turn']}/{event.data['call_id']}")
    return models, tools


def _effects(path: Path) -> list[tuple[str, int]]:
    return [
        (key, int(life)) for key, life in (line.split() for line in path.read_text().splitlines())
    ]


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
        requests = llm.completions

    for run in runs:
        view = engine.query(run)
        assert view.status == "completed", (run, view.activities["loop"])
        assert view.output["text"] == ANSWER
        assert view.output["turns"] == 6
        assert len(view.output["tool_calls"]) == sum(WIDTH.values())

    # model calls: once, plus once per kill that caught the call in flight
    in_flight: Counter[tuple[str, int]] = Counter()
    for life, (models, _) in at_kill.items():
        asked = {_call_of(r) for r in requests if _life_of(r) == life}
        in_flight.update(asked - models)
    seen = Counter(_call_of(r) for r in requests)
    expected_calls = {(run, turn) for run in runs for turn in range(1, 7)}
    assert set(seen) == expected_calls
    for call, count in seen.items():
        assert count == 1 + in_flight[call], (call, count, in_flight[call])

    # tool calls: once, plus once per kill that landed inside the tool
    inside: Counter[str] = Counter()
    done = _effects(effects)
    for life, (_, tools) in at_kill.items():
        inside.update({key for key, lived in done if lived == life} - tools)
    counts = Counter(key for key, _ in done)
    assert set(counts) == {
        f"{run}/loop/t{turn}/t{turn}c{i}"
        for run in runs
        for turn in WIDTH
        for i in range(WIDTH[turn])
    }
    for key, count in counts.items():
        assert count == 1 + inside[key], (key, count, inside[key])

    assert len(at_kill) >= MIN_KILLS
    assert sum(in_flight.values()) + sum(inside.values()) > 0, "no kill landed in a call"
    assert all(r.authorization == f"Bearer {KEY}" for r in requests)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("w.db"))
    assert KEY.encode() not in raw
    assert KEY not in json.dumps([e.data for run in runs for e in engine.history(run)])
    print(  # the numbers of this run (-s shows them)
        f"runs={len(runs)} kills={len(at_kill)} model calls repeated={sum(in_flight.values())}"
        f" tool calls repeated={sum(inside.values())} requests={len(requests)}"
    )
    engine.close()
