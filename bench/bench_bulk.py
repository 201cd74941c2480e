"""What a bulk action's bookkeeping costs beside the same actions done one by one (SQLite).

Two fresh stores each get `--executions` running executions (waiting for a signal). Then:

- `loop` (the yardstick): `engine.cancel(id)` for each, in a plain Python loop over one list
  of ids (no batch, no item rows, no progress);
- `bulk`: one bulk cancel of the same executions by filter, worked by a `BatchRunner` in
  pages of 100 (per page: one listing transaction and one outcome transaction, beside the
  cancels themselves).

Each is timed as a whole; reported as executions per second, the ratio bulk / loop (the
share of the loop's throughput a batch keeps), and the durable commits each issued (the
store's `commits` counter). JSON with --json.

Usage: python bench/bench_bulk.py [--executions 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from wovyr.engine.bulk import BatchRunner, Bulk, BulkFilter
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: orders}
activities:
  - {id: wait, wait: {signal: go}}
"""


def filled(path: Path, count: int) -> tuple[SQLiteStore, Engine, list[str]]:
    store = SQLiteStore(path)
    engine = Engine(store)
    ids = [engine.start(FLOW, execution_id=f"o-{i:06d}").id for i in range(count)]
    return store, engine, ids


def run(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store, engine, ids = filled(Path(tmp) / "loop.db", count)
        before = store.commits
        began = time.perf_counter()
        for execution_id in ids:
            engine.cancel(execution_id)
        loop_s = time.perf_counter() - began
        loop_commits = store.commits - before
        store.close()

        store, engine, ids = filled(Path(tmp) / "bulk.db", count)
        before = store.commits
        began = time.perf_counter()
        _, batch = Bulk(engine).submit("cancel", BulkFilter(workflow="orders"))
        BatchRunner(engine, "bench").run()
        bulk_s = time.perf_counter() - began
        bulk_commits = store.commits - before
        done = Bulk(engine).get(batch.id)
        assert done.finished and done.ok == count, done
        store.close()
    return {
        "executions": count,
        "loop_per_s": count / loop_s,
        "bulk_per_s": count / bulk_s,
        "bulk_over_loop": loop_s / bulk_s,
        "loop_commits": loop_commits,
        "bulk_commits": bulk_commits,
        "pages": done.pages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.executions)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'':<28}{'loop (yardstick)':>18}{'bulk':>12}")
    print(f"{'cancels/s':<28}{result['loop_per_s']:>18.0f}{result['bulk_per_s']:>12.0f}")
    print(f"{'durable commits':<28}{result['loop_commits']:>18}{result['bulk_commits']:>12}")
    print(f"bulk / loop throughput: {result['bulk_over_loop']:.2f} ({result['pages']} pages)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
