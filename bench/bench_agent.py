"""Engine overhead per agent turn (one model call + one tool call), on the embedded SQLite
store (WAL, synchronous=FULL), against a local scripted OpenAI-compatible server.

A0  a bare loop: httpx.AsyncClient POSTs to the same server, parses the tool call, calls the
    tool, appends the messages, until the model answers (the yardstick)
A1  the same conversation as an `agent` activity run by a worker: every model call and tool
    call recorded (`ModelCallCompleted`, `ToolCallCompleted`), each in a commit of its own
B0  the machine's ceiling: one fsync'd single-row SQLite commit (WAL, synchronous=FULL), in
    ms: a turn costs two durable commits, so the overhead is also shown in B0 units

Reported: ms per turn of each (median of `--runs`), the engine's overhead per turn (A1 - A0)
and the ratio A1/A0, measured in the same run (these machines differ 3x from day to day).
The server answers at once: the figures are the engine's cost, not a model's.

Also the client's share of a turn, seen from the server: from the moment an answer was sent
to the moment the next request of the conversation arrived (parsing the answer, the tool
call, the commits on the critical path, building the next request), the median over every
turn of the runs, for A0 and A1: their difference is the engine's overhead per turn without
the scripted server's own (noisy) time to answer.

Usage: python bench/bench_agent.py [--turns 20] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted server in tests/

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls


def echo(n: int) -> int:
    """Return n."""
    return n


def flow(turns: int) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: bench-agent}}
activities:
  - id: loop
    agent: {{model: m1, input: go, tools: [echo], max_turns: {turns + 1}}}
    timeout: 10m
output: "${{{{ activities.loop.output }}}}"
"""


async def bare_loop(base_url: str) -> int:
    import httpx

    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {}}}]
    turns = 0
    async with httpx.AsyncClient(timeout=None) as client:
        while True:
            response = await client.post(
                base_url + "/chat/completions",
                json={"model": "m1", "messages": messages, "tools": tools},
                headers={"Authorization": "Bearer x"},
            )
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                return turns
            turns += 1
            for call in message["tool_calls"]:
                args = json.loads(call["function"]["arguments"])
                result = await asyncio.to_thread(echo, **args)
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
                )


def engine_loop(base_url: str, turns: int, home: Path, run: int) -> float:
    registry = ActivityRegistry()
    registry.register("echo", echo)
    provider = ProviderConfig("default", base_url)
    engine = Engine(
        SQLiteStore(home / f"bench-{run}.db"),
        activities=registry,
        providers=Providers({"default": provider}),
    )
    try:
        began = time.perf_counter()
        engine.start(flow(turns), execution_id=f"b{run}")
        drain(engine)
        took = time.perf_counter() - began
        view = engine.query(f"b{run}")
        assert view.status == "completed", view.activities["loop"]
        assert view.output["turns"] == turns + 1
        return took
    finally:
        engine.close()


def client_gaps(llm: ScriptedLLM, first: int) -> list[float]:
    """Seconds from each answer sent to the next request of the same conversation arriving,
    for the requests from index `first` on (one conversation)."""
    requests = llm.requests[first:]
    out = []
    for sent, following in itertools.pairwise(requests):
        answered = llm.answered_at(sent)
        if answered is not None:
            out.append(following.at - answered)
    return out


def commit_ms(home: Path, n: int = 200) -> float:
    """B0: ms per fsync'd single-row commit (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(home / "b0.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (v INTEGER)")
    began = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", (i,))
        conn.execute("COMMIT")
    took = time.perf_counter() - began
    conn.close()
    return took / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    replies = [tool_calls(("echo", {"n": t}, f"c{t}")) for t in range(args.turns)]
    replies.append(text("done"))
    bare: list[float] = []
    wovyr: list[float] = []
    gaps: dict[str, list[float]] = {"bare": [], "wovyr": []}
    with ScriptedLLM(replies, pick="turn") as llm, tempfile.TemporaryDirectory() as home:
        asyncio.run(bare_loop(llm.base_url))  # warm up: imports, first connection
        engine_loop(llm.base_url, args.turns, Path(home), -1)
        for run in range(args.runs):
            seen = len(llm.requests)
            began = time.perf_counter()
            assert asyncio.run(bare_loop(llm.base_url)) == args.turns
            bare.append(time.perf_counter() - began)
            gaps["bare"] += client_gaps(llm, seen)
            seen = len(llm.requests)
            wovyr.append(engine_loop(llm.base_url, args.turns, Path(home), run))
            gaps["wovyr"] += client_gaps(llm, seen)
        b0 = commit_ms(Path(home))
    a0 = statistics.median(bare) / args.turns * 1000
    a1 = statistics.median(wovyr) / args.turns * 1000
    g0, g1 = statistics.median(gaps["bare"]) * 1000, statistics.median(gaps["wovyr"]) * 1000
    result = {
        "turns": args.turns,
        "runs": args.runs,
        "A0_bare_ms_per_turn": round(a0, 2),
        "A1_engine_ms_per_turn": round(a1, 2),
        "overhead_ms_per_turn": round(a1 - a0, 2),
        "ratio": round(a1 / a0, 2),
        "B0_commit_ms": round(b0, 3),
        "overhead_in_B0": round((a1 - a0) / b0, 1),
        "A0_client_ms_per_turn": round(g0, 2),
        "A1_client_ms_per_turn": round(g1, 2),
        "client_overhead_ms_per_turn": round(g1 - g0, 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"turns per run {args.turns}, runs {args.runs} (medians)")
    print(f"A0 bare httpx loop      {a0:8.2f} ms/turn")
    print(f"A1 agent activity       {a1:8.2f} ms/turn")
    print(f"   engine overhead      {a1 - a0:8.2f} ms/turn  (A1/A0 = {a1 / a0:.2f}x)")
    print(f"B0 fsync'd commit       {b0:8.3f} ms      (overhead = {(a1 - a0) / b0:.1f} B0)")
    print(f"client share of a turn  A0 {g0:.2f} ms, A1 {g1:.2f} ms: overhead {g1 - g0:.2f} ms")


if __name__ == "__main__":
    main()
