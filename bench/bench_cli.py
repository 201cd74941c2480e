"""CLI start-up: wall time of `wovyr` commands as fresh processes, beside a yardstick.

C0  python -c pass              (the interpreter alone: the yardstick)
C1  wovyr --version
C2  wovyr --help
C3  wovyr workflows show ID     (opens the embedded store and reads one execution)

Each runs `--runs` times (default 20); min and median are reported, and each command's
median as a multiple of C0's in the same run (these machines differ 3x from day to day).

Usage: python bench/bench_cli.py [--runs 20] [--json]
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


def timed(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        out.append(time.perf_counter() - began)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "WOVYR_HOME": home}
        env.pop("WOVYR_DATABASE_URL", None)
        flow = Path(home) / "flow.yaml"
        flow.write_text(FLOW)
        subprocess.run([*WOVYR, "run", str(flow), "--id", "b1"], env=env, check=True,
                       capture_output=True)  # fmt: skip
        cases = {
            "C0 python -c pass": [sys.executable, "-c", "pass"],
            "C1 --version": [*WOVYR, "--version"],
            "C2 --help": [*WOVYR, "--help"],
            "C3 workflows show": [*WOVYR, "workflows", "show", "b1"],
        }
        results = {name: timed(argv, env, args.runs) for name, argv in cases.items()}
    base = statistics.median(results["C0 python -c pass"])
    report = {
        name: {
            "min_ms": round(min(t) * 1000, 1),
            "median_ms": round(statistics.median(t) * 1000, 1),
            "x_python": round(statistics.median(t) / base, 2),
        }
        for name, t in results.items()
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, r in report.items():
        print(f"{name:22} min {r['min_ms']:7.1f} ms  median {r['median_ms']:7.1f} ms  "
              f"{r['x_python']:5.2f}x python")  # fmt: skip


if __name__ == "__main__":
    main()
