"""The cost of one MCP tool call as an `mcp` step, against the SDK on its own, for a stdio
server (`wovyr.testing.mcp_server`, started per call) and a streamable-HTTP one (started once).

S0  the SDK alone, as the engine uses it: a session opened, initialized, one `tools/call`
    (`add`), closed - for stdio that starts and stops the server process
S1  the same session kept open, one call (what a client that keeps sessions pays)
M1  an `mcp` step run by a worker on the embedded SQLite store (start, dispatch, the call,
    the commit of its result), per execution of one step

Reported: ms per call (median of `--runs`), and M1/S0 (the engine's share over the SDK's
own per-call cost), measured in the same run.

Usage: python bench/bench_mcp.py [--runs 7] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "wovyr.testing.mcp_server"]  # its built-in tools

from wovyr.activities.mcp import McpAccess, McpServerConfig, call_tool  # noqa: E402
from wovyr.activities.policy import TRUSTED  # noqa: E402
from wovyr.engine.engine import Engine  # noqa: E402
from wovyr.platform.mcp import add_mcp_server, parse_mcp_server  # noqa: E402
from wovyr.store.sqlite import SQLiteStore  # noqa: E402
from wovyr.testing import FakeMCPServer, drain  # noqa: E402

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench-mcp}
activities:
  - id: sum
    mcp: {server: s, tool: add, arguments: {a: 2, b: 3}}
output: "${{ activities.sum.output.structured_content }}"
"""


def _config(transport: str, where: Any) -> McpServerConfig:
    if transport == "stdio":
        return McpServerConfig("s", "stdio", command=tuple(where))
    return McpServerConfig("s", "http", url=str(where))


async def sdk_once(config: McpServerConfig) -> None:
    access = McpAccess({"s": config}, lambda _c: {})
    out = await call_tool(access, "s", "add", {"a": 2, "b": 3}, TRUSTED)
    assert out["structured_content"] == {"result": 5}


async def sdk_kept(config: McpServerConfig, runs: int) -> list[float]:
    from wovyr.activities.mcp import _session

    took = []
    async with _session(config, {}, TRUSTED, None) as session:
        for _ in range(runs):
            began = time.perf_counter()
            await session.call_tool("add", {"a": 2, "b": 3})
            took.append(time.perf_counter() - began)
    return took


def engine_call(engine: Engine, n: int) -> float:
    began = time.perf_counter()
    engine.start(FLOW, execution_id=f"m{n}")
    drain(engine)
    took = time.perf_counter() - began
    assert engine.query(f"m{n}").output == {"result": 5}
    return took


def measure(transport: str, where: Any, runs: int, home: Path) -> dict[str, float]:
    config = _config(transport, where)
    engine = Engine(SQLiteStore(home / f"{transport}.db"), side_effects=TRUSTED)
    fields = {"command": list(where)} if transport == "stdio" else {"url": where}
    add_mcp_server(
        engine.store,
        parse_mcp_server(engine.tenant, "s", fields, policy=TRUSTED, by="b", at=engine.clock.now()),
    )
    asyncio.run(sdk_once(config))  # warm up
    engine_call(engine, -1)
    once, steps = [], []
    for n in range(runs):
        began = time.perf_counter()
        asyncio.run(sdk_once(config))
        once.append(time.perf_counter() - began)
        steps.append(engine_call(engine, n))
    kept = asyncio.run(sdk_kept(config, runs * 5))
    engine.close()
    s0, s1, m1 = (statistics.median(x) * 1000 for x in (once, kept, steps))
    return {"S0_ms": round(s0, 2), "S1_ms": round(s1, 2), "M1_ms": round(m1, 2),
            "M1_over_S0": round(m1 / s0, 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with FakeMCPServer(transport="http") as http, tempfile.TemporaryDirectory() as home:
        result = {
            "runs": args.runs,
            "stdio": measure("stdio", SERVER, args.runs, Path(home)),
            "http": measure("http", http.url, args.runs, Path(home)),
        }
    if args.json:
        print(json.dumps(result))
        return
    print(f"runs {args.runs} (medians, ms per call)")
    print(f"{'':6} {'S0 sdk+session':>15} {'S1 kept session':>16} {'M1 mcp step':>12} {'M1/S0':>7}")
    for transport in ("stdio", "http"):
        r = result[transport]
        assert isinstance(r, dict)
        print(
            f"{transport:6} {r['S0_ms']:15.2f} {r['S1_ms']:16.2f} {r['M1_ms']:12.2f}"
            f" {r['M1_over_S0']:7.2f}"
        )


if __name__ == "__main__":
    main()
