"""SIGKILL real worker processes at random points of multi-turn runs of a Pydantic AI agent
(`DurableAgent`) and of an OpenAI Agents SDK agent (`DurableRunner`) in workflow functions
(at least 8 kills per framework): every run completes with the scripted answer; no model
request and no tool call was made again once its step was recorded (each request and each
side effect is older than its step's `ActivityCompleted`); each was made once, plus once more
for each kill that caught it in flight (asked, not recorded), plus any repeat by the same
process (a lease it lost on a loaded machine: the run is driven again from its checkpoint).
The model's key never reaches the store.

Every worker process has its own life number, in the model URL it calls and in the side
effects it writes, so what was in flight at each kill is known exactly once it is over. The
lives are forked by one process that imported the framework once
(`tests/chaos/framework_worker.py`), which also kills and reaps them.
"""

from __future__ import annotations

import json
import queue
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import TracebackType

import pytest

from wovyr.engine.engine import Engine
from wovyr.events import EventType
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import Recorded, Reply, ScriptedLLM, text, tool_calls

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("framework_worker.py")
KEY = "sk-canary-frameworks-kill-7d41"  # the worker's (tests/chaos/framework_worker.py)
LEASE = 1.0
MIN_KILLS = 8
MAX_LIVES = 5 * MIN_KILLS  # a bound by count: lives that end without a kill are not many
BATCH = 3  # executions started together
ANSWER = "three turns of tools done"
# the tool calls of each turn (the fourth answers): (tool, n); two at once in turn 1,
# three in turn 3. `n` names a call within a run: its effect's key is "<run>/n<n>"
TURNS = {
    1: [("note", 10), ("stamp", 11)],
    2: [("stamp", 20)],
    3: [("note", 30), ("note", 31), ("stamp", 32)],
}
MODEL_TURNS = len(TURNS) + 1


def _script(rng: random.Random) -> list[Reply]:
    """Turns 1-3 ask for tools, turn 4 answers (a call id per call: the Agents SDK refuses
    one used twice in a run)."""
    replies = []
    for turn, calls in TURNS.items():
        made = [(tool, {"n": n}, f"t{turn}c{i}") for i, (tool, n) in enumerate(calls)]
        replies.append(tool_calls(*made, delay=rng.uniform(0.02, 0.12)))
    replies.append(text(ANSWER, delay=0.05))
    return replies


def _call_of(request: Recorded) -> tuple[str, int]:
    """(run, turn) of a model request (chat completions' `messages` or Responses' `input`)."""
    body = request.body
    items = body["messages"] if "messages" in body else body["input"]
    user = next(m for m in items if m.get("role") == "user")
    return str(user["content"]).removeprefix("run "), request.turn + 1


def _life_of(request: Recorded) -> int:
    return int(request.path.split("/life-")[1].split("/")[0])


def _recorded_at(
    engine: Engine, runs: list[str]
) -> tuple[dict[tuple[str, int], float], dict[str, float]]:
    """When the step of each model request (run, turn) and of each tool call (its key) was
    recorded (the wall time of its `ActivityCompleted`)."""
    models: dict[tuple[str, int], float] = {}
    tools: dict[str, float] = {}
    for run in runs:
        turn = 0
        for event in engine.history(run):
            if event.type != EventType.ACTIVITY_COMPLETED:
                continue
            step, out = event.data["activity"], event.data["output"]
            if step.startswith("model_request_"):
                turn += 1  # one request at a time: the steps complete in turn order
                models[(run, turn)] = event.at.timestamp()
            elif step.startswith(("note_", "stamp_")):
                # the tool's return: Pydantic AI's step wraps it ({"return": ...})
                tools[out["return"] if isinstance(out, dict) else out] = event.at.timestamp()
    return models, tools


def _recorded(engine: Engine, runs: list[str]) -> tuple[set[tuple[str, int]], set[str]]:
    models, tools = _recorded_at(engine, runs)
    return set(models), set(tools)


def _effects(path: Path) -> list[tuple[str, int, float]]:
    """(key, life, wall time) of every side effect."""
    lines = (line.split() for line in path.read_text().splitlines())
    return [(key, int(life), float(at)) for key, life, at in lines]


def _same_life_repeats(made: list[tuple[object, int]]) -> Counter[object]:
    """Per call: how many more times than once one worker process made it."""
    repeats: Counter[object] = Counter()
    for (call, _), count in Counter(made).items():
        repeats[call] += count - 1
    return repeats


class Lives:
    """The process that forks, kills and reaps the worker processes (a context manager);
    its lines are read by a thread, so the test polls them."""

    def __init__(self, framework: str, db: Path, effects: Path) -> None:
        argv = [sys.executable, str(WORKER), framework, str(db), str(effects), str(LEASE)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            ready, workflow = self._next(timeout=120).split()
            assert ready == "ready", ready
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.workflow = workflow  # applied to the store: it starts by name
        self.pid: int | None = None  # the life running
        self.code: int | None = None  # how the last life ended

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def _next(self, timeout: float) -> str:
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"the worker process ended ({self.proc.wait()})"
        return line

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def start(self, life: int, base_url: str) -> None:
        assert self.pid is None
        self._send(f"start {life} {base_url}")
        kind, pid = self._next(timeout=30).split()
        assert kind == "pid"
        self.pid, self.code = int(pid), None

    def ended(self) -> bool:
        """Whether the life has ended (its exit code in `code`)."""
        if self.pid is None:
            return True
        try:
            line = self.lines.get_nowait()
        except queue.Empty:
            return False
        assert line is not None, f"the worker process ended ({self.proc.wait()})"
        kind, pid, code = line.split()
        assert (kind, int(pid)) == ("exit", self.pid), line
        self.pid, self.code = None, int(code)
        return True

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while not self.ended():
            assert time.monotonic() < deadline, "the worker process did not end"
            time.sleep(0.01)
        assert self.code is not None
        return self.code

    def kill(self) -> int:
        """SIGKILL the life (its exit code: -9, or 0 if it had just ended)."""
        self._send("kill")
        return self.wait(timeout=30)

    def __enter__(self) -> Lives:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # it kills a life still running, then exits
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(timeout=5)
            assert self.proc.stdout is not None
            self.proc.stdout.close()


def _await_progress(lives: Lives, llm: ScriptedLLM, effects: Path) -> bool:
    """Until the new life has asked the model or run a tool (the wait for the killed one's
    lease takes up to a second); False when it finished the work without either: a kill
    that landed after a run's last recorded call left that run only its completing commit."""
    asked, done = len(llm.requests), effects.stat().st_size
    deadline = time.monotonic() + 120
    while len(llm.requests) == asked and effects.stat().st_size == done:
        if lives.ended():
            assert lives.code == 0, f"the worker process failed ({lives.code})"
            return False
        assert time.monotonic() < deadline, "the worker made no progress"
        time.sleep(0.01)
    return True


@pytest.mark.timeout(600)
@pytest.mark.parametrize("framework", ["pydantic_ai", "openai_agents"])
def test_sigkill_mid_agent_run_repeats_no_recorded_call(framework: str, tmp_path: Path) -> None:
    db, effects = tmp_path / "w.db", tmp_path / "effects.log"
    effects.touch()
    rng = random.Random(f"framework-kill-{framework}")
    runs: list[str] = []
    at_kill: dict[int, tuple[set[tuple[str, int]], set[str]]] = {}  # life -> recorded
    lives = 0  # worker processes started: each its own life (some finish before a kill)
    with (
        ScriptedLLM(_script(rng), pick="turn") as llm,
        Lives(framework, db, effects) as worker,
    ):
        engine = Engine(SQLiteStore(db))
        while len(at_kill) < MIN_KILLS:
            assert lives < MAX_LIVES, f"{lives} lives made only {len(at_kill)} kills"
            views = [engine.query(r) for r in runs]
            assert all(v.status in ("running", "completed") for v in views), [
                (v.id, v.status, v.error) for v in views
            ]
            if all(v.status == "completed" for v in views):
                batch = [f"r{len(runs) + i}" for i in range(BATCH)]
                for run in batch:
                    engine.start(None, {"run": run}, name=worker.workflow, execution_id=run)
                runs += batch
            life, lives = lives, lives + 1
            worker.start(life, f"http://127.0.0.1:{llm.port}/life-{life}/v1")
            if not _await_progress(worker, llm, effects):
                continue  # it completed what a kill had left: nothing in flight to kill
            time.sleep(rng.uniform(0, 0.8))  # a random point of the runs
            if worker.kill() == 0:
                continue  # it had just finished the work: not a kill
            at_kill[life] = _recorded(engine, runs)  # the dead worker writes no more
        worker.start(lives, f"http://127.0.0.1:{llm.port}/life-{lives}/v1")
        assert worker.wait(timeout=300) == 0
        lives += 1
        # a request the kill cut short (its body unreadable) was never a model request
        requests = [r for r in llm.requests if r.body is not None]

    for run in runs:
        view = engine.query(run)
        assert view.status == "completed", (run, view.error)
        assert view.output == ANSWER

    model_at, tool_at = _recorded_at(engine, runs)
    # no model request sent again once recorded (the reply came after the ask; its step after)
    for r in requests:
        assert r.at <= model_at[_call_of(r)], (_call_of(r), _life_of(r))
    # once, plus once per kill that caught the request in flight, plus a process's own repeats
    in_flight: Counter[tuple[str, int]] = Counter()
    for life, (models, _) in at_kill.items():
        asked = {_call_of(r) for r in requests if _life_of(r) == life}
        in_flight.update(asked - models)
    own = _same_life_repeats([(_call_of(r), _life_of(r)) for r in requests])
    seen = Counter(_call_of(r) for r in requests)
    assert set(seen) == {(run, turn) for run in runs for turn in range(1, MODEL_TURNS + 1)}
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
        f"{run}/n{n}" for run in runs for calls in TURNS.values() for _, n in calls
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
        f"{framework}: runs={len(runs)} lives={lives} kills={len(at_kill)}"
        f" model requests repeated={sum(in_flight.values())}"
        f" tool calls repeated={sum(inside.values())} requests={len(requests)}"
        f" effects={len(done)} repeated by a process itself:"
        f" {sum(own.values())} model, {sum(tool_own.values())} tool"
    )
    engine.close()
