"""What live stream readers cost the server: `GET /api/v1/workflows/{id}/stream` with R
concurrent readers of one execution while an `llm` step streams a long answer.

The server (`create_app` under uvicorn, no background worker) runs in a process of its own,
so its CPU time (user + system, from /proc) is its alone. A worker in this process runs the
execution against a local scripted model that streams `--tokens` pieces, one every
`--pace` ms; the readers run in a third process and each checks that the text it read,
concatenated, is the answer. Measured for R = 0 (the server idle while the answer is
journaled), 1 and `--readers`, each over the same answer:

    cpu share = server CPU seconds / wall seconds, from the readers' first message to the
    last reader's `end` (R = 0: the worker's run)

The budget: `--readers` (100) readers cost the server < 20 % of one core. One shared follower
per execution reads the store; readers are served from its buffer, so the cost per reader
is a write of each message to its socket.

Usage: python bench/bench_stream.py [--readers 100] [--tokens 2000] [--pace 2] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted server in tests/

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench-stream}
activities:
  - id: ask
    llm: {model: m1, prompt: go, stream: true}
    timeout: 10m
output: "${{ activities.ask.output.text }}"
"""
ROOT = Path(__file__).resolve().parents[1]
READER_PROCESSES = 4


def _answer(tokens: int) -> str:
    return "".join(f"{i % 1000:03d} " for i in range(tokens))  # 4 characters a piece


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the server process ----------------------------------------------------------------------


def serve(db: str, home: str, port: int) -> None:
    import uvicorn

    from wovyr.engine.engine import Engine
    from wovyr.server.app import create_app
    from wovyr.settings import Settings
    from wovyr.store.sqlite import SQLiteStore

    engine = Engine(SQLiteStore(db))
    app = create_app(engine, Settings(home=Path(home)), start_background=False)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# --- the readers process ---------------------------------------------------------------------


def read(url: str, key: str, count: int) -> None:
    import httpx

    connected = 0
    texts: list[str] = []
    messages = 0

    async def one(client: httpx.AsyncClient) -> None:
        nonlocal connected, messages
        got: list[str] = []
        first = True
        async with client.stream("GET", url, headers={"Authorization": f"Bearer {key}"}) as r:
            event = ""
            async for line in r.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    messages += 1
                    if first:
                        first = False
                        connected += 1
                        if connected == count:
                            print("connected", flush=True)
                    if event == "token":
                        got.append(json.loads(line[5:])["text"])
                    elif event == "end":
                        break
        texts.append("".join(got))

    async def main() -> None:
        limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            await asyncio.gather(*(one(client) for _ in range(count)))

    asyncio.run(main())
    print(json.dumps({"texts": sorted(set(texts)), "readers": len(texts), "messages": messages}))


# --- the driver ------------------------------------------------------------------------------


def measure(
    readers: int, tokens: int, pace_ms: float, db: Path, port: int, server_pid: int, key: str
) -> dict[str, Any]:
    from wovyr.activities.base import ActivityRegistry
    from wovyr.activities.policy import TRUSTED
    from wovyr.activities.providers import ProviderConfig, Providers
    from wovyr.engine.engine import Engine
    from wovyr.store.sqlite import SQLiteStore
    from wovyr.testing import drain
    from wovyr.testing.model_server import ScriptedLLM, text

    answer = _answer(tokens)
    reply = text(answer, stream=True, chunk_delay=pace_ms / 1000)
    with ScriptedLLM([reply]) as llm:
        engine = Engine(
            SQLiteStore(db),
            activities=ActivityRegistry(),
            providers=Providers({"default": ProviderConfig("default", llm.base_url)}),
            side_effects=TRUSTED,
        )
        record = engine.for_tenant("bench").start(FLOW)
        url = f"http://127.0.0.1:{port}/api/v1/workflows/{record.id}/stream"
        # several reader processes: one alone could not parse every reader's messages in time
        groups = [readers // READER_PROCESSES] * READER_PROCESSES if readers else []
        for i in range(readers % READER_PROCESSES if readers else 0):
            groups[i] += 1
        reading = [
            subprocess.Popen(
                [sys.executable, __file__, "--read", url, key, str(n)],
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for n in groups
            if n
        ]
        for process in reading:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "connected"
        cpu0, wall0 = _cpu_seconds(server_pid), time.perf_counter()
        worker = threading.Thread(target=drain, args=(engine,))
        worker.start()
        report: dict[str, Any] = {"readers": readers, "ok": True}
        texts: set[str] = set()
        count = messages = 0
        for process in reading:
            out, _ = process.communicate(timeout=600)
            result = json.loads(out.strip().splitlines()[-1])
            texts.update(result["texts"])
            count += result["readers"]
            messages += result["messages"]
        worker.join()
        cpu1, wall1 = _cpu_seconds(server_pid), time.perf_counter()
        if readers:
            report["ok"] = texts == {answer} and count == readers
            report["messages_per_reader"] = messages / readers
        assert engine.for_tenant("bench").query(record.id).output == answer
        engine.close()
    report["seconds"] = round(wall1 - wall0, 3)
    report["server_cpu_seconds"] = round(cpu1 - cpu0, 3)
    report["cpu_share"] = round((cpu1 - cpu0) / (wall1 - wall0), 4)
    return report


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--read":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--pace", type=float, default=2.0, help="ms between streamed pieces")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from wovyr.platform.auth import Authenticator
    from wovyr.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        db, home = Path(tmp) / "wovyr.db", Path(tmp) / "home"
        store = SQLiteStore(db)
        key = Authenticator(store).create_key("bench", "viewer", "bench")[1]
        store.close()
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(db), str(home), str(port)], cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            rows = [
                measure(r, args.tokens, args.pace, db, port, server.pid, key)
                for r in sorted({0, 1, args.readers})
            ]
        finally:
            server.terminate()
            server.wait(timeout=30)
    result = {
        "tokens": args.tokens,
        "pace_ms": args.pace,
        "rows": rows,
        "budget": "readers cost the server < 20 % of one core",
        "within_budget": rows[-1]["cpu_share"] < 0.20 and all(r["ok"] for r in rows),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.tokens} streamed pieces, one every {args.pace} ms; server CPU share:")
    print(f"{'readers':>8} {'seconds':>8} {'cpu s':>7} {'share':>7} {'msgs/reader':>12} ok")
    for r in rows:
        per = r.get("messages_per_reader", 0)
        print(
            f"{r['readers']:>8} {r['seconds']:>8.2f} {r['server_cpu_seconds']:>7.2f} "
            f"{r['cpu_share'] * 100:>6.1f}% {per:>12.0f} {r['ok']}"
        )
    print("within budget (< 20 % of one core):", result["within_budget"])


if __name__ == "__main__":
    main()
