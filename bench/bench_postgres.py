"""PostgreSQL benchmarks: the scale-out store with many worker processes.

B0  the machine's ceiling on PostgreSQL: fsync'd (synchronous_commit=on) single-row commits/s
    from Python, over 1 and over 4 connections.
L1  pickup latency: start -> first claim (ActivityStarted) by an idle worker in another
    process whose poll interval is 5 s (LISTEN/NOTIFY wakes it): p50, max.
B2  2,000 three-step workflows (no-op tool) through the queue, drained by 1, 2 and 4 worker
    PROCESSES: workflows/s, scaling (w2/w1, w4/w1), durable commits per workflow, and the
    targets: w1 >= 30% of B0/5, w2/w1 >= 1.6. Control: two 1-worker queues in separate
    schemas run together (sharing nothing but the machine): the scaling this machine allows.
B2io the same with a tool that waits 20 ms (an API call, an LLM request: I/O, not CPU),
    1 and 2 worker processes: scaling when the workers are not short of CPU. On a machine
    whose few cores also run PostgreSQL, no-op B2 measures how the cores are shared.
B5  start-up recovery: 10,000 in-flight executions whose leases expired, re-leased by
    set-based claims (one statement per batch of 500): seconds until all are leased.
B8  list/filter over 100,000 executions (status, workflow, time range; limit 50, cursor):
    p50/p99 per page, and the EXPLAIN of each filter (which index serves it).

Each part runs in a fresh schema, dropped afterwards. Figures are measured in one run and
read as ratios: the machine is shared and noisy.
Usage: python bench/bench_postgres.py [--url URL] [--workflows 2000] [--rounds 1] [--json]
       [--only b0,l1,b2,b2io,b5,b8] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.store.base import ClaimAsk, ExecutionFilter
from wovyr.store.postgres import PostgresStore
from wovyr.store.postgres.queries import queries
from wovyr.store.shards import stable_shard

HERE = Path(__file__).parent
WORKER = HERE / "pg_bench_worker.py"
THREE = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench3}
activities:
  - {id: a, tool: noop}
  - {id: b, needs: [a], tool: noop}
  - {id: c, needs: [b], tool: noop}
"""


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def engine_for(url: str) -> Engine:
    registry = ActivityRegistry()

    async def noop() -> None:
        return None

    registry.register("noop", noop)
    return Engine(PostgresStore(url, max_size=4, db_clock=True), activities=registry)


# --- B0 ---------------------------------------------------------------------------------


def b0(url: str, per_connection: int = 1000) -> dict[str, float]:
    with fresh_schema(url) as schema_url:
        with psycopg.connect(schema_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE b0 (id bigserial PRIMARY KEY, v text)")
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        out: dict[str, float] = {}
        for connections in (1, 4):
            barrier = threading.Barrier(connections + 1)

            def run(n: int, barrier: threading.Barrier = barrier) -> None:
                with psycopg.connect(schema_url, autocommit=True) as conn:
                    barrier.wait()
                    for i in range(per_connection):
                        conn.execute("INSERT INTO b0 (v) VALUES (%s)", (f"row {n}/{i}",))

            threads = [threading.Thread(target=run, args=(n,)) for n in range(connections)]
            for t in threads:
                t.start()
            barrier.wait()
            start = time.perf_counter()
            for t in threads:
                t.join()
            out[f"connections_{connections}"] = (
                connections * per_connection / (time.perf_counter() - start)
            )
    return out


# --- worker processes ---------------------------------------------------------------------


def spawn_workers(
    url: str, count: int, folder: Path, profile: Path | None = None, *extra: str
) -> tuple[list[subprocess.Popen[bytes]], Path]:
    go = folder / f"go-{uuid.uuid4().hex[:6]}"
    procs = []
    for n in range(count):
        cmd = [sys.executable, str(WORKER), url, str(go) + f".ready{n}", str(go), f"{go}.r{n}"]
        if profile is not None:
            cmd += ["--profile", str(profile / f"w{count}-{n}.prof")]
        procs.append(subprocess.Popen([*cmd, *extra]))
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.ready{n}").exists() for n in range(count)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("a worker did not start")
        time.sleep(0.01)
    return procs, go


def stop_workers(procs: list[subprocess.Popen[bytes]], go: Path) -> list[dict[str, Any]]:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(60)
    return [json.loads(Path(f"{go}.r{n}").read_text()) for n in range(len(procs))]


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat (0, 0 elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0, 0
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def postgres_cpu_seconds() -> float:
    """CPU seconds used so far by every process named `postgres` on this host (the server:
    every backend, the WAL writer, the checkpointer...); 0 when /proc cannot tell."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        if name.startswith("postgres"):
            fields = rest.split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def background_busy(seconds: float = 1.0) -> float:
    """The machine's CPU busy share while this benchmark does nothing (other load)."""
    busy0, total0 = cpu_ticks()
    time.sleep(seconds)
    busy1, total1 = cpu_ticks()
    return (busy1 - busy0) / max(1, total1 - total0)


def count_finished(url: str) -> tuple[int, datetime | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), max(updated_at) FROM executions WHERE status <> 'running'"
        ).fetchone()
    assert row is not None
    return int(row[0]), row[1]


# --- L1 ---------------------------------------------------------------------------------


def l1(url: str, folder: Path, samples: int = 15) -> dict[str, float]:
    with fresh_schema(url) as schema_url:
        engine = engine_for(schema_url)
        one = THREE.replace("bench3", "bench1").split("  - {id: b")[0]
        engine.register(one)
        procs, go = spawn_workers(schema_url, 1, folder, None, "--concurrency", "64")
        go.touch()
        found = []
        try:
            for i in range(samples + 1):
                time.sleep(0.1)  # the worker is idle: waiting on LISTEN, its poll far away
                ex = engine.start(one, execution_id=f"l1-{i}").id
                deadline = time.monotonic() + 10
                while engine.query(ex).status == "running" and time.monotonic() < deadline:
                    time.sleep(0.005)
                at = {e.type: e.at for e in reversed(engine.history(ex))}
                if i:  # the first one warms the worker up
                    found.append((at["ActivityStarted"] - at["ExecutionStarted"]).total_seconds())
        finally:
            stop_workers(procs, go)
            engine.close()
    return {"p50_ms": statistics.median(found) * 1000, "max_ms": max(found) * 1000}


# --- B2 ---------------------------------------------------------------------------------


def b2_one(
    url: str, folder: Path, workers: int, count: int, profile: Path | None, sleep_ms: float = 0
) -> dict[str, Any]:
    with fresh_schema(url) as schema_url:
        seed(schema_url, count)
        extra = ("--sleep-ms", str(sleep_ms)) if sleep_ms else ()
        procs, go = spawn_workers(schema_url, workers, folder, profile, *extra)
        background = background_busy()
        pg0 = postgres_cpu_seconds()
        busy0, total0 = cpu_ticks()
        began = datetime.now(UTC)
        go.touch()
        deadline = time.monotonic() + 600
        while (done := count_finished(schema_url))[0] < count and time.monotonic() < deadline:
            time.sleep(0.1)
        busy1, total1 = cpu_ticks()
        pg1 = postgres_cpu_seconds()
        reports = stop_workers(procs, go)
        assert done[0] == count and done[1] is not None, f"only {done[0]} of {count} finished"
        elapsed = (done[1] - began).total_seconds()
        with psycopg.connect(schema_url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM executions WHERE status = 'completed'")
            completed = row.fetchone()
        assert completed == (count,)
    commits = sum(r["commits"] for r in reports)
    batches = sum(r["batches"] for r in reports)
    return {
        "workflows_per_s": count / elapsed,
        "seconds": elapsed,
        "durable_commits_per_workflow": commits / count,
        "steps_per_group_commit": sum(r["batched_steps"] for r in reports) / max(1, batches),
        "claims_by_worker": [r["claimed"] for r in reports],
        # Where the time goes: machine CPU busy share during the drain (all processes: the
        # workers, PostgreSQL, anything else on the host), the workers' own CPU per
        # workflow, and the share of each worker's time spent inside store.commit.
        "machine_cpu_busy": (busy1 - busy0) / max(1, total1 - total0),
        "background_cpu_busy_before": background,
        "postgres_cpu_ms_per_workflow": 1000 * (pg1 - pg0) / count,
        "worker_cpu_ms_per_workflow": 1000 * sum(r["process_cpu_s"] for r in reports) / count,
        "commit_wall_share": sum(r["commit_wall_s"] for r in reports) / (elapsed * workers),
        "commit_ms_per_batch": 1000
        * sum(r["commit_wall_s"] for r in reports)
        / max(1, sum(r["commit_calls"] for r in reports)),
    }


def seed(url: str, count: int) -> None:
    engine = engine_for(url)
    engine.register(THREE)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: engine.start(THREE, execution_id=f"b2-{i:05}"), range(count)))
    engine.close()


def b2_apart(url: str, folder: Path, count: int) -> dict[str, Any]:
    """The control for w2/w1: two single-worker queues in two schemas (nothing shared but
    the machine and the server), count/2 workflows each, started together. What they reach
    together over what one reaches alone is what this machine allows two workers."""
    with fresh_schema(url) as a_url, fresh_schema(url) as b_url:
        for schema_url in (a_url, b_url):
            seed(schema_url, count // 2)
        spawned = [spawn_workers(u, 1, folder) for u in (a_url, b_url)]
        busy0, total0 = cpu_ticks()
        began = datetime.now(UTC)
        for _, go in spawned:
            go.touch()
        deadline = time.monotonic() + 600
        finished: list[datetime] = []
        for schema_url in (a_url, b_url):
            while (done := count_finished(schema_url))[0] < count // 2:
                assert time.monotonic() < deadline, "the workers did not finish"
                time.sleep(0.05)
            assert done[1] is not None
            finished.append(done[1])
        busy1, total1 = cpu_ticks()
        for procs, go in spawned:
            stop_workers(procs, go)
    elapsed = (max(finished) - began).total_seconds()
    return {
        "workflows_per_s": 2 * (count // 2) / elapsed,
        "seconds": elapsed,
        "machine_cpu_busy": (busy1 - busy0) / max(1, total1 - total0),
    }


def b2(args: argparse.Namespace, folder: Path, ceiling: dict[str, float]) -> dict[str, Any]:
    """B2 in `args.rounds` rounds of (1, 2, 4) workers, interleaved so that a change in the
    machine's other load hits every configuration alike; the ratios are per round, and the
    round reported in full is the one whose background load was the lowest."""
    rounds = []
    for _ in range(args.rounds):
        one: dict[str, Any] = {
            f"workers_{n}": b2_one(args.url, folder, n, args.workflows, args.profile)
            for n in (1, 2, 4)
        }
        w1 = one["workers_1"]["workflows_per_s"]
        one["w2_over_w1"] = one["workers_2"]["workflows_per_s"] / w1
        one["w4_over_w1"] = one["workers_4"]["workflows_per_s"] / w1
        one["apart_2"] = b2_apart(args.url, folder, args.workflows)
        one["apart_over_w1"] = one["apart_2"]["workflows_per_s"] / w1
        # 1.0: sharing one queue costs two workers nothing against sharing nothing.
        one["w2_over_apart"] = (
            one["workers_2"]["workflows_per_s"] / one["apart_2"]["workflows_per_s"]
        )
        one["w1_share_of_b0_over_5"] = w1 / (ceiling["connections_1"] / 5)
        one["background"] = max(
            one[f"workers_{n}"]["background_cpu_busy_before"] for n in (1, 2, 4)
        )
        rounds.append(one)
    best = min(rounds, key=lambda r: r["background"])
    return {
        **best,
        "rounds": rounds,
        "w2_over_w1_by_round": [r["w2_over_w1"] for r in rounds],
        "w4_over_w1_by_round": [r["w4_over_w1"] for r in rounds],
        "apart_over_w1_by_round": [r["apart_over_w1"] for r in rounds],
        "w2_over_apart_by_round": [r["w2_over_apart"] for r in rounds],
        "w1_by_round": [r["workers_1"]["workflows_per_s"] for r in rounds],
        "background_by_round": [r["background"] for r in rounds],
    }


def b2io(args: argparse.Namespace, folder: Path, sleep_ms: float = 20) -> dict[str, Any]:
    """B2 with an I/O-like activity, 1 and 2 workers, in `args.rounds` interleaved rounds."""
    rounds = []
    for _ in range(args.rounds):
        one: dict[str, Any] = {
            f"workers_{n}": b2_one(args.url, folder, n, args.workflows, None, sleep_ms)
            for n in (1, 2)
        }
        one["w2_over_w1"] = (
            one["workers_2"]["workflows_per_s"] / one["workers_1"]["workflows_per_s"]
        )
        rounds.append(one)
    return {
        "activity_ms": sleep_ms,
        "rounds": rounds,
        "w1_by_round": [r["workers_1"]["workflows_per_s"] for r in rounds],
        "w2_by_round": [r["workers_2"]["workflows_per_s"] for r in rounds],
        "w2_over_w1_by_round": [r["w2_over_w1"] for r in rounds],
        "machine_cpu_busy_w2_by_round": [r["workers_2"]["machine_cpu_busy"] for r in rounds],
    }


# --- B5 ---------------------------------------------------------------------------------


def b5(url: str, count: int = 10_000, batch: int = 500) -> dict[str, float]:
    with fresh_schema(url) as schema_url:
        engine = engine_for(schema_url)
        template = engine.start(THREE, execution_id="template", lease_owner="dead").id
        ids = [f"b5-{i:06}" for i in range(count)]
        with psycopg.connect(schema_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO executions SELECT i.id, tenant, workflow, version, definition_hash,"
                " status, created_at, updated_at, parent_id, seq, ready, lease_owner,"
                " now() - interval '1 minute', fence, i.shard, waiting_on, input, output, error,"
                " checkpoint FROM executions, unnest(%s::text[], %s::int[]) AS i(id, shard)"
                " WHERE executions.id = %s",
                (ids, [stable_shard(i) for i in ids], template),
            )
            conn.execute("DELETE FROM executions WHERE id = 'template'")
            conn.execute("ANALYZE executions")
        store = engine.store
        now = datetime.now(UTC)
        start = time.perf_counter()
        leased, statements = 0, 0
        while claims := store.claim(ClaimAsk("recovering-worker", now, 30, batch)):
            leased += len(claims)
            statements += 1
        elapsed = time.perf_counter() - start
        engine.close()
    assert leased == count, leased
    return {
        "executions": count,
        "seconds_until_all_leased": elapsed,
        "executions_per_s": count / elapsed,
        "claim_statements": statements,
    }


# --- B8 ---------------------------------------------------------------------------------

B8_FILTERS: dict[str, dict[str, Any]] = {
    "all": {},
    "status": {"status": "failed"},
    "workflow": {"workflow": "wf-3"},
    "status+workflow": {"status": "completed", "workflow": "wf-7"},
    "status+workflow (none match)": {"status": "failed", "workflow": "wf-7"},
    "time range": {"created_after": -20, "created_before": -10},  # days, relative
    "workflow+time": {"workflow": "wf-1", "created_after": -30, "created_before": -5},
}


def b8_fill(schema_url: str, count: int) -> datetime:
    ids = [f"b8-{i:07}" for i in range(count)]
    base = datetime(2030, 1, 1, tzinfo=UTC)
    with psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO executions (id, tenant, workflow, version, definition_hash, status,"
            " created_at, updated_at, seq, ready, shard, input, checkpoint)"
            " SELECT i.id, 'default', 'wf-' || (i.n %% 10), '1', 'h',"
            " (ARRAY['completed','completed','completed','running','failed','cancelled'])"
            "[1 + (i.n * 7) %% 6], %s - make_interval(secs => i.n * 26), now(), 5, false,"
            ' i.shard, \'{"order": 1}\', \'{"status": "done", "activities": {}}\''
            " FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS i(id, shard, n)",
            (base, ids, [stable_shard(i) for i in ids]),
        )
        conn.execute("ANALYZE executions")
    return base


def b8(url: str, count: int = 100_000, pages: int = 20) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with fresh_schema(url) as schema_url:
        store = PostgresStore(schema_url, max_size=2)
        try:
            base = b8_fill(schema_url, count)
            for label, raw in B8_FILTERS.items():
                given: dict[str, Any] = {
                    k: (base + timedelta(days=v) if k.startswith("created_") else v)
                    for k, v in raw.items()
                }
                times, rows, cursor = [], 0, None
                for _ in range(pages):
                    start = time.perf_counter()
                    page = store.list_executions(ExecutionFilter(limit=50, cursor=cursor, **given))
                    times.append(time.perf_counter() - start)
                    rows += len(page.items)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                times.sort()
                plan = explain(schema_url, given, cursor)
                out[label] = {
                    "p50_ms": statistics.median(times) * 1000,
                    "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000,
                    "pages": len(times),
                    "rows": rows,
                    "index": ",".join(
                        re.findall(
                            r"(?:Index|Bitmap Index) Scan (?:Backward )?"
                            r"using (\w+)",
                            plan,
                        )
                    )
                    or "NONE",
                    "seq_scan": "Seq Scan" in plan,
                    "rows_removed_by_filter": sum(
                        int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)
                    ),
                    "plan": plan,
                }
        finally:
            store.close()
    return out


def explain(schema_url: str, given: dict[str, Any], cursor: Any) -> str:
    params: dict[str, Any] = dict.fromkeys(
        ("workflow", "status", "parent_id", "created_after", "created_before")
    )
    params |= {"tenant": "default", "limit": 51, **given}
    params["cursor_at"], params["cursor_id"] = cursor if cursor else (None, None)
    with psycopg.connect(schema_url, autocommit=True) as conn:
        rows = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + queries()["list_executions"],
            params,
            prepare=False,
        ).fetchall()
    return " | ".join(r[0].strip() for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile each worker")
    parser.add_argument("--only", default="b0,l1,b2,b2io,b5,b8")
    parser.add_argument("--rounds", type=int, default=1, help="B2 rounds (interleaved)")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "b0" in parts or "b2" in parts:
            results["b0"] = b0(args.url)
        if "l1" in parts:
            results["l1"] = l1(args.url, folder)
        if "b2" in parts:
            results["b2"] = b2(args, folder, results["b0"])
        if "b2io" in parts:
            results["b2io"] = b2io(args, folder)
        if "b5" in parts:
            results["b5"] = b5(args.url)
        if "b8" in parts:
            results["b8"] = b8(args.url)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return
    from pg_bench_report import report  # bench/ is on sys.path: this script's folder

    report(results)


if __name__ == "__main__":
    main()
