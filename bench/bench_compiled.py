"""Would compiling the pure core with mypyc pay? (issue 38, item 1)

Builds copies of `src/` in a temporary folder, each with one group of modules compiled by
mypyc (the compiler mypy ships, as black and mypy itself are shipped), and counts the CPU
instructions two workloads take with each build beside the pure one. Instructions, counted
by valgrind's cachegrind, not seconds: the count is the same on a busy and an idle machine,
and the differences here (a few per cent) are under the noise of a timed run.

  core    the pure decider loop alone: a 30-step chain of CEL-templated tool steps and a
          4-item map, decided, its results folded, to the end (no store, no event loop)
  engine  3-step workflows through the engine, 8 in flight, on SQLite (bench_engine's B1)

Each figure is the difference of a run of N and of 3N repetitions, divided by 2N: start-up
(imports, the build's loading) cancels out.

Groups: `state` (engine/core/state.py), `decide` (decide, items, saga, policy, waits,
context), `core` (all of engine/core), `rows` (the row codecs: store/rows.py, store/codec.py).
mypyc makes every class native unless told not to; `ExecutionState` and `ActivityState` keep
derived values in their `__dict__` and `replace` copies it, which a native class has no room
for, so the copy marks those two `native_class=False` (mypy_extensions' `mypyc_attr`).
`events/records.py` cannot be compiled as it stands: a class decorator registers each
record, which makes the record non-native, and a non-native class may not inherit from the
native `EventData`.

Measured on the 2-core machine, 2026-12-06, instructions per repetition, pure -> compiled:

    group    core loop            engine, per workflow
    pure     26.60 M              7.05 M
    state    25.57 M  (-3.9 %)    6.85 M  (-2.8 %)
    decide   25.21 M  (-5.2 %)    6.89 M  (-2.2 %)
    core     23.70 M  (-10.9 %)   6.54 M  (-7.2 %)
    rows         -                7.18 -> 7.12 M  (-0.8 %: the codecs call orjson)

Compiling pays little because the hot code is calls into what is already C (dicts, orjson,
the CEL runtime, sqlite3) and into classes that stay Python classes; and the pure core
(decide and fold) is about a quarter of the engine's CPU per workflow, so even compiled to
nothing it would save a quarter, not the half issue 38 asks for. Not shipped: 7 % is not
worth two builds in CI, a compiler in every source install, and a core that must stay within
what mypyc accepts (a compiled module's functions cannot be replaced by a test, as
tests/unit/engine/test_decide_fixpoint.py replaces `_step`).

Usage: python bench/bench_compiled.py [--only core,engine] [--groups state,decide,core,rows]
       [--json]
Needs mypy (the dev group), a C compiler and valgrind. `--groups ""` counts the pure build
alone: the engine's instructions per workflow, a figure steady enough to judge a change of
one per cent (a timed run is not).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_CORE = "wovyr/engine/core/"
GROUPS = {
    "state": [f"{_CORE}state.py"],
    "decide": [f"{_CORE}{m}.py" for m in ("decide", "items", "saga", "policy", "waits", "context")],
    "core": [
        f"{_CORE}{m}.py"
        for m in ("state", "decide", "items", "saga", "policy", "waits", "context", "bounds")
    ],
    "rows": ["wovyr/store/rows.py", "wovyr/store/codec.py"],
}
NON_NATIVE = ("ActivityState", "ExecutionState")

# the workloads, run by a fresh interpreter with the build first on sys.path
CORE_LOOP = """
import sys
from datetime import UTC, datetime
from wovyr.definition import load_definition
from wovyr.engine.core.bounds import StepBytes, ValueLimits
from wovyr.engine.core.decide import Outcome, decide, outcome_events, start_events
from wovyr.engine.core.state import fold
from wovyr.store.codec import json_bytes, json_depth

NOW = datetime(2030, 1, 1, tzinfo=UTC)
chain = ["  - {id: s0, tool: t, with: {n: 0}}"] + [
    f"  - {{id: s{i}, needs: [s{i - 1}], tool: t,"
    f" with: {{n: '${{{{ activities.s{i - 1}.output.n + 1 }}}}'}}}}"
    for i in range(1, 30)
] + ["  - {id: fan, needs: [s29], for_each: '${{ [1, 2, 3, 4] }}', tool: t}"]
definition = load_definition(
    "apiVersion: wovyr/v1\\nkind: Workflow\\nmetadata: {name: w}\\nactivities:\\n"
    + "\\n".join(chain) + "\\n"
)
limits = ValueLimits(measure=json_bytes, nesting=json_depth)


def run():
    state = fold(start_events(definition, "h", {}, NOW), id="e")
    running = frozenset()
    decision = decide(definition, state, NOW, running, bounds=StepBytes(limits))
    while True:
        state = decision.state
        running |= {r.key for r in decision.runs}
        if state.finished or not decision.runs:
            assert state.finished, state.status
            return
        for r in decision.runs:
            state = fold(outcome_events(definition, state, r, Outcome(output={"n": 1}), NOW), state)
            running -= {r.key}
        decision = decide(definition, state, NOW, running, bounds=StepBytes(limits))


for _ in range(int(sys.argv[1])):
    run()
"""

ENGINE_RUN = """
import asyncio, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import bench_engine

# in memory when the machine has a RAM disk: a disk's fsync times would move the commits'
# grouping, and with it the count
with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as folder:
    engine = bench_engine.make_engine(Path(folder), "b")
    asyncio.run(bench_engine.run_workflows(engine, bench_engine.THREE, int(sys.argv[1]), 8))
    engine.close()
"""

WORKLOADS = {"core": (CORE_LOOP, 10), "engine": (ENGINE_RUN, 100)}


def build(group: str, folder: Path) -> Path:
    """A copy of src/ with `group` compiled; its path (first on sys.path for the runs)."""
    src = folder / group / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    state = src / _CORE / "state.py"
    text = state.read_text()
    for name in NON_NATIVE:
        text, n = re.subn(
            rf"^(@dataclass\([^)]*\)\nclass {name}\b)",
            r"@mypyc_attr(native_class=False)\n\1",
            text,
            flags=re.M,
        )
        assert n == 1, f"{name}: its declaration moved"
    text = text.replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom mypy_extensions import mypyc_attr\n",
        1,
    )
    state.write_text(text)
    mypyc = Path(sys.executable).with_name("mypyc")
    done = subprocess.run(
        [str(mypyc), *GROUPS[group]], cwd=src, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"mypyc {group}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    # bytecode written before the runs: two runs compiling the same modules at once would
    # each pay a different share of it (the count of a run must not depend on the other's)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
    return src


def instructions(path: Path | None, script: str, reps: int) -> int:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(path or ROOT / "src")
    env["PYTHONHASHSEED"] = "0"  # the same sets and dicts in every run
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    argv += [sys.executable, "-c", script, str(reps), str(ROOT / "bench")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode or found is None:
        raise SystemExit(f"valgrind: {done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_rep(path: Path | None, workload: str) -> float:
    """Instructions per repetition: (count(3N) - count(N)) / 2N, the two runs side by side."""
    script, n = WORKLOADS[workload]
    with ThreadPoolExecutor(2) as pool:
        low, high = pool.map(lambda reps: instructions(path, script, reps), (n, 3 * n))
    return (high - low) / (2 * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="core,engine")
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed: it counts the instructions")
    workloads = [w for w in args.only.split(",") if w]
    results: dict[str, Any] = {}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(2) as pool:
            groups = [g for g in args.groups.split(",") if g]
            builds = dict(zip(groups, pool.map(lambda g: build(g, Path(tmp)), groups), strict=True))
        for workload in workloads:
            pure = per_rep(None, workload)
            row: dict[str, Any] = {"pure": pure}
            print(f"{workload:7} pure {pure / 1e6:7.2f} M instructions per repetition")
            for group, path in builds.items():
                count = per_rep(path, workload)
                row[group] = {"instructions": count, "ratio": count / pure}
                print(f"{workload:7} {group:6} {count / 1e6:7.2f} M  ({count / pure - 1:+.1%})")
            results[workload] = row
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
