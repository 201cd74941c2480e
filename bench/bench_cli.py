"""CLI start-up: wall and CPU time of `wovyr` commands as fresh processes, beside yardsticks.

Y0  python -c pass                      (the interpreter alone)
Y1  python -c "import sqlite3, json"    (the interpreter and what any store read needs)
C1  wovyr --version
C2  wovyr --help
C3  wovyr workflows show ID             (opens the embedded store and reads one execution)
C4  wovyr workflows list
C5  wovyr run FILE                      (parses, runs and prints a one-step workflow)
C6  wovyr workflows history ID

Each runs `--runs` times (default 20), round-robin so that a change in the machine's load
falls on every command alike. Wall time and CPU time (user + sys of the child, from wait4)
are reported as min and median, and each command's median wall as a multiple of Y0's and
Y1's in the same run (these machines differ 3x from day to day and minute to minute).
Targets (issue 21): C1 <= 150 ms, C3 <= 400 ms wall. Issue 38: C3, C4 and C6 read through
the store alone (no engine, no workflow language), <= 200 ms median. Measured on the 2-core
machine, base and change in one session (median wall, x Y1): C3 427-452 ms (17.7-18.9x) ->
202-204 ms (9.8-10.0x), cpu 354-365 -> 183-184 ms; C4 414-448 (17.5-18.4x) -> 198-207 ms
(9.8-10.0x); C6 408-472 (18.1-18.5x) -> 225-226 ms (10.8-11.2x); imports 454 -> 295 modules
(146 -> 81 of wovyr).

Bytecode is cached (in a temporary PYTHONPYCACHEPREFIX, as after `pip install`) unless
--compile, which keeps PYTHONDONTWRITEBYTECODE if set, so every run compiles the modules
it imports (as a process does when that variable is set and nothing wrote its bytecode).

Usage: python bench/bench_cli.py [--runs 20] [--json] [--compile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench-cli}
activities:
  - {id: a, set: {v: 1}}
"""


def timed_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of `argv`; cpu is the child's user + sys."""
    began = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read() if child.stderr else b""
    if child.stderr:
        child.stderr.close()
    if child.returncode != 0:
        raise SystemExit(f"{argv} exited {child.returncode}: {err.decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE: every run compiles what it imports",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "WOVYR_HOME": home}
        env.pop("WOVYR_DATABASE_URL", None)
        if not args.compile:  # as installed: bytecode cached (outside the source tree)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(home) / "pycache")
        flow = Path(home) / "flow.yaml"
        flow.write_text(FLOW)
        subprocess.run([*WOVYR, "run", str(flow), "--id", "b1"], env=env, check=True,
                       capture_output=True)  # fmt: skip
        cases = {
            "Y0 python -c pass": [sys.executable, "-c", "pass"],
            "Y1 import sqlite3,json": [sys.executable, "-c", "import sqlite3, json"],
            "C1 --version": [*WOVYR, "--version"],
            "C2 --help": [*WOVYR, "--help"],
            "C3 workflows show": [*WOVYR, "workflows", "show", "b1"],
            "C4 workflows list": [*WOVYR, "workflows", "list"],
            "C5 run": [*WOVYR, "run", str(flow)],
            "C6 workflows history": [*WOVYR, "workflows", "history", "b1"],
        }
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, argv in cases.items():
                wall, cpu = timed_once(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    y0 = statistics.median(walls["Y0 python -c pass"])
    y1 = statistics.median(walls["Y1 import sqlite3,json"])
    report = {
        name: {
            "wall_min_ms": round(min(walls[name]) * 1000, 1),
            "wall_median_ms": round(statistics.median(walls[name]) * 1000, 1),
            "cpu_min_ms": round(min(cpus[name]) * 1000, 1),
            "cpu_median_ms": round(statistics.median(cpus[name]) * 1000, 1),
            "x_y0": round(statistics.median(walls[name]) / y0, 2),
            "x_y1": round(statistics.median(walls[name]) / y1, 2),
        }
        for name in cases
    }
    if args.json:
        print(json.dumps({"runs": args.runs, "results": report}, indent=2))
        return
    print(f"{'':24} {'wall min':>9} {'median':>9} {'cpu min':>9} {'median':>9}  "
          f"{'xY0':>5} {'xY1':>5}   (ms; {args.runs} runs each)")  # fmt: skip
    for name, r in report.items():
        print(f"{name:24} {r['wall_min_ms']:9.1f} {r['wall_median_ms']:9.1f} "
              f"{r['cpu_min_ms']:9.1f} {r['cpu_median_ms']:9.1f}  "
              f"{r['x_y0']:5.2f} {r['x_y1']:5.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
