"""One table of every figure the benches measure, each beside its yardstick and its target,
before (the last recorded run) and now; written into docs/operations.md.

Runs each bench as a fresh process with `--json`, in short mode:

    engine  bench_engine.py --short (SQLite)        B1, B3, B3w, B0, B4 beside bench/yardstick.py
    pg      bench_engine.py --short --postgres URL  the same on PostgreSQL
            bench_postgres.py --only l1,b2          pickup latency; 1/2/4 worker processes
    scale   bench_scale.py --short                  long loops, long chains, a large map
    api     bench_api.py --clients 32               the server beside a bare uvicorn + Starlette
                                                    and the same routes in FastAPI
    cli     bench_cli.py                            CLI start-up beside `python -c ...`
    code    bench_code.py                           code-first workflows beside the same YAML

then prints the table, or with `--write FILE` replaces the part of FILE between the markers

    <!-- bench:report:begin -->  and  <!-- bench:report:end -->

with it (the rest of the file is left as it is). The figures are kept in `--results`
(default bench/results/latest.json, committed): when a group runs, its recorded figures become
its "before" column and the new ones its "now"; a group not run keeps both (each group's
"when" says from which run), so `--only cli` after a change to the CLI shows that change.
These machines differ 3x from day to day: read the ratios, each measured in one run beside
its yardstick, not the absolute numbers.

Usage: python bench/report.py [--only engine,pg,scale,api,cli,code] [--no-postgres]
       [--postgres URL] [--results FILE] [--write docs/operations.md] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
BEGIN = "<!-- bench:report:begin -->"
END = "<!-- bench:report:end -->"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = HERE / "results" / "latest.json"
GROUPS = ("engine", "pg", "scale", "api", "cli", "code")


def bench(script: str, *args: str) -> dict[str, Any]:
    """Run `bench/SCRIPT --json ARGS` in a fresh interpreter and read its JSON."""
    argv = [sys.executable, str(HERE / script), "--json", *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{script} exited {done.returncode}:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    assert isinstance(result, dict), f"{script} printed no JSON object"
    return result


def measure(group: str, postgres: str | None) -> dict[str, Any]:
    """The raw results of one group (what its benches print with --json)."""
    if group == "engine":
        return bench("bench_engine.py", "--short")
    if group == "pg":
        assert postgres is not None
        return {
            "engine": bench("bench_engine.py", "--short", "--postgres", postgres),
            "queue": bench(
                "bench_postgres.py", "--url", postgres, "--only", "l1,b2", "--workflows", "600"
            ),
        }
    if group == "scale":
        return bench("bench_scale.py", "--short")
    if group == "api":
        return bench(
            "bench_api.py",
            "--clients",
            "32",
            "--seconds",
            "10",
            "--requests",
            "500",
            "--executions",
            "300",
        )
    if group == "cli":
        cli: dict[str, Any] = bench("bench_cli.py", "--runs", "10")["results"]
        return cli
    if group == "code":
        return bench("bench_code.py", "--workflows", "50", "--steps", "3,50")
    raise SystemExit(f"unknown group {group!r}: one of {', '.join(GROUPS)}")


@dataclass(frozen=True)
class Figure:
    """One row: where it comes from, how it reads, what it is measured beside and aims at."""

    group: str
    name: str
    yardstick: str
    target: str
    read: Callable[[dict[str, Any]], str]


def _b1(label: str, r: dict[str, Any]) -> str:
    one = r[label]
    cost = ""
    if "cpu_ms_per_workflow" in one:  # (not recorded before)
        cost = (
            f"; CPU {one['cpu_ms_per_workflow']:.2f} / {one['yardstick_cpu_ms_per_workflow']:.2f}"
            f" ms/wf, context switches {one['switches_per_workflow']:.1f} /"
            f" {one['yardstick_switches_per_workflow']:.1f}"
        )
    if "floor_share_of_yardstick" in one:  # (not recorded before)
        cost += (
            f"; the asyncio floor {one['floor_share_of_yardstick']:.0%}"
            f" ({one['floor_workflows_per_s']:.0f} wf/s, CPU"
            f" {one['floor_cpu_ms_per_workflow']:.2f} ms/wf)"
        )
    return (
        f"**{one['share_of_yardstick']:.0%}** ({one['workflows_per_s']:.0f} /"
        f" {one['yardstick_workflows_per_s']:.0f} wf/s; {one['commits_per_workflow']:.2f}"
        f" commits/wf{cost})"
    )


def _wide(r: dict[str, Any]) -> str:
    ours, theirs = r["b3_wide_300_over_3"], r["b3_wide_yardstick_300_over_3"]
    return f"**{ours:.2f}x** (yardstick {theirs:.2f}x)"


def _commits(r: dict[str, Any]) -> str:
    return f"**{r['b3']['durable_commits_per_step_excluding_start']:.2f}**"


def _flat(kind: str, r: dict[str, Any]) -> str:
    s = r[kind]
    return (
        f"**{s['last_over_first']:.2f}x** ({s['ms_per_step']:.2f} ms/step over"
        f" {s['size']:,}; peak RSS {s['peak_rss_mb']:.0f} MB, floor"
        f" {r['floor']['peak_rss_mb']:.0f})"
    )


def _cli(name: str, r: dict[str, Any]) -> str:
    c = r[name]
    return (
        f"**{c['wall_median_ms']:.0f} ms** ({c['x_y1']:.1f}x Y1; CPU {c['cpu_median_ms']:.0f} ms)"
    )


def _api(r: dict[str, Any]) -> str:
    a4, y4 = r["A4_mixed"], r["Y4_bare"]
    return (
        f"**{r['A4_share_of_Y4']:.2f}x** ({a4['requests_per_s']:.0f} / {y4['requests_per_s']:.0f}"
        f" req/s; p99 {a4['p99_ms']:.0f} ms; {a4['errors']} errors)"
    )


def _fastapi(r: dict[str, Any]) -> str:
    if "Y5_fastapi" not in r:  # recorded before Y5 was measured
        return "(not measured)"
    y5, y4, a4 = r["Y5_fastapi"], r["Y4_bare"], r["A4_mixed"]
    return (
        f"**{r['Y5_share_of_Y4']:.2f}x** ({y5['requests_per_s']:.0f} / {y4['requests_per_s']:.0f}"
        f" req/s); server CPU per request: Y5 {y5['server_cpu_ms_per_request']:.2f} ms,"
        f" Y4 {y4['server_cpu_ms_per_request']:.2f}, A4 (with its worker)"
        f" {a4['server_cpu_ms_per_request']:.2f}{_a4_split(a4)}"
    )


def _a4_split(a4: dict[str, Any]) -> str:
    if "worker_process_cpu_ms_per_request" not in a4:  # (not recorded before)
        return ""
    return (
        f" (the server process {a4['server_process_cpu_ms_per_request']:.2f},"
        f" its worker process {a4['worker_process_cpu_ms_per_request']:.2f})"
    )


def _fastapi_sync(r: dict[str, Any]) -> str:
    if "Y6_fastapi_sync" not in r:  # recorded before Y6 was measured
        return "(not measured)"
    y6, y5 = r["Y6_fastapi_sync"], r["Y5_fastapi"]
    return (
        f"**{r['Y6_share_of_Y5']:.2f}x** ({y6['requests_per_s']:.0f} / {y5['requests_per_s']:.0f}"
        f" req/s); server CPU per request: Y6 {y6['server_cpu_ms_per_request']:.2f} ms,"
        f" Y5 {y5['server_cpu_ms_per_request']:.2f}"
    )


def _api_reads(r: dict[str, Any]) -> str:
    one, listed = r["A1_get_one"], r["A2_list_50"]
    return (
        f"get one p50 {one['p50_ms']:.1f} / p99 {one['p99_ms']:.1f} ms; list 50 p50"
        f" {listed['p50_ms']:.1f} / p99 {listed['p99_ms']:.1f} ms"
    )


def _code(r: dict[str, Any]) -> str:
    rows = r["rows"]
    first, last = rows[0], rows[-1]
    return (
        f"**{first['cpu_ratio']:.2f}x** at {first['steps']} steps, {last['cpu_ratio']:.2f}x at"
        f" {last['steps']} (code CPU/step grows {r['code_cpu_growth']:.2f}x)"
    )


def _pg_engine(read: Callable[[dict[str, Any]], str], r: dict[str, Any]) -> str:
    return read(r["engine"])


def _pg_workers(r: dict[str, Any]) -> str:
    b2 = r["queue"]["b2"]
    return (
        f"**{b2['w2_over_w1']:.2f}x** w2/w1, {b2['w4_over_w1']:.2f}x w4/w1"
        f" ({b2['workers_1']['workflows_per_s']:.0f} wf/s with one; apart"
        f" {b2['apart_over_w1']:.2f}x)"
    )


def _pg_pickup(r: dict[str, Any]) -> str:
    l1 = r["queue"]["l1"]
    return f"p50 {l1['p50_ms']:.0f} ms, max {l1['max_ms']:.0f} ms"


Y_LOOP = "bench/yardstick.py, same transactions"
Y_PYTHON = "Y1 `python -c 'import sqlite3, json'`"
FIGURES = (
    Figure(
        "engine", "B1 3-step workflows, sequential", Y_LOOP, ">= 65%", partial(_b1, "sequential")
    ),
    Figure(
        "engine",
        "B1 3-step workflows, 8 in flight",
        f"{Y_LOOP}, 8 per commit",
        ">= 60%",
        partial(_b1, "in_flight_8"),
    ),
    Figure("engine", "B3 durable commits per step (+1 to start)", "", "<= 1", _commits),
    Figure(
        "engine",
        "B3w per-step time, 300 / 3 steps",
        "the yardstick's own 300 / 3",
        "<= 1.3x",
        _wide,
    ),
    Figure(
        "engine",
        "B0 fsync'd single-row commits/s",
        "",
        "(the disk)",
        lambda r: f"{r['b0_commits_per_s']:,.0f}",
    ),
    Figure(
        "engine",
        "B4 event append p50, late / early in a long history",
        "",
        "<= 1.3x",
        lambda r: f"**{r['b4']['ratio']:.2f}x**",
    ),
    Figure(
        "pg",
        "B1 3-step workflows, sequential (PostgreSQL)",
        Y_LOOP,
        ">= 65%",
        partial(_pg_engine, partial(_b1, "sequential")),
    ),
    Figure(
        "pg",
        "B1 3-step workflows, 8 in flight (PostgreSQL)",
        f"{Y_LOOP}, 8 per commit",
        ">= 60%",
        partial(_pg_engine, partial(_b1, "in_flight_8")),
    ),
    Figure(
        "pg",
        "B3w per-step time, 300 / 3 steps (PostgreSQL)",
        "the yardstick's 300 / 3",
        "<= 1.3x",
        partial(_pg_engine, _wide),
    ),
    Figure(
        "pg",
        "B2 600 workflows, 1 / 2 / 4 worker processes",
        "two 1-worker queues apart",
        "w2/w1 >= 1.6",
        _pg_workers,
    ),
    Figure(
        "pg", "L1 pickup by an idle worker (LISTEN/NOTIFY)", "", "< poll interval (5 s)", _pg_pickup
    ),
    Figure(
        "scale",
        "S1 agent-like loop (`repeat`): last tenth / first tenth",
        "its first tenth",
        "<= 1.3x",
        partial(_flat, "loop"),
    ),
    Figure(
        "scale",
        "S1c chain of tool activities: last tenth / first tenth",
        "its first tenth",
        "<= 1.3x",
        partial(_flat, "chain"),
    ),
    Figure(
        "scale",
        "S2 for_each, 64 at a time",
        "",
        "flat",
        lambda r: (
            f"{r['map']['ms_per_step']:.2f} ms/item over {r['map']['size']:,};"
            f" peak RSS {r['map']['peak_rss_mb']:.0f} MB"
        ),
    ),
    Figure(
        "api",
        "A4 32 clients: start, get, list, signal",
        "Y4 bare uvicorn + Starlette",
        "near 1x",
        _api,
    ),
    Figure(
        "api",
        "Y5 the same 4 routes in FastAPI, constant answers (the framework alone)",
        "Y4 bare uvicorn + Starlette",
        "(what the framework costs)",
        _fastapi,
    ),
    Figure(
        "api",
        "Y6 the routes of Y5 as plain functions (FastAPI's thread pool, as the server's)",
        "Y5 the same routes as coroutines",
        "(what the hop costs)",
        _fastapi_sync,
    ),
    Figure("api", "A1/A2 sequential reads", "", "", _api_reads),
    Figure("cli", "C1 `wovyr --version`", Y_PYTHON, "<= 150 ms", partial(_cli, "C1 --version")),
    Figure(
        "cli",
        "C3 `wovyr workflows show`",
        Y_PYTHON,
        "<= 200 ms",
        partial(_cli, "C3 workflows show"),
    ),
    Figure(
        "cli",
        "C4 `wovyr workflows list`",
        Y_PYTHON,
        "<= 200 ms",
        partial(_cli, "C4 workflows list"),
    ),
    Figure(
        "cli",
        "C6 `wovyr workflows history`",
        Y_PYTHON,
        "<= 200 ms",
        partial(_cli, "C6 workflows history"),
    ),
    Figure("cli", "C5 `wovyr run` (one step)", Y_PYTHON, "", partial(_cli, "C5 run")),
    Figure(
        "code",
        "code-first workflow CPU per step / the same YAML",
        "the YAML run beside it",
        "",
        _code,
    ),
)


def figures(groups: dict[str, Any]) -> dict[str, str]:
    """Each figure's text, for the groups there are results of."""
    out = {}
    for f in FIGURES:
        if f.group in groups:
            out[f.name] = f.read(groups[f.group]["results"])
    return out


def table(record: dict[str, Any]) -> str:
    """The markdown section: how and when it was measured, then one row per figure."""
    was, new = figures(record["before"]), figures(record["groups"])
    rows = [
        "| figure | yardstick (same run) | target | before | now |",
        "|---|---|---|---|---|",
    ]
    for f in FIGURES:
        if f.name in new or f.name in was:
            rows.append(
                f"| {f.name} | {f.yardstick} | {f.target} | {was.get(f.name, '')} |"
                f" {new.get(f.name, '')} |"
            )
    runs = ", ".join(f"{g} {r['when']} (load {r['load']})" for g, r in record["groups"].items())
    earlier = ", ".join(f"{g} {r['when']}" for g, r in record["before"].items())
    return "\n".join(
        [
            BEGIN,
            "",
            f"Generated by `python bench/report.py --write docs/operations.md`"
            f" ({record['machine']}). Now: {runs}. Before: {earlier or 'no earlier run'}."
            " Each ratio is measured in one run beside its yardstick; read the ratios, not"
            " the absolute numbers (this machine's speed and fsync rate vary several-fold"
            " from hour to hour).",
            "",
            *rows,
            "",
            END,
        ]
    )


def rewrite(path: Path, section: str) -> None:
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} section to replace")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(head + section + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(GROUPS), help="the groups to run")
    parser.add_argument("--postgres", default=POSTGRES, help="PostgreSQL URL")
    parser.add_argument("--no-postgres", action="store_true", help="skip the pg group")
    parser.add_argument("--results", type=Path, default=RESULTS, help="recorded figures")
    parser.add_argument("--write", type=Path, default=None, help="the file to rewrite")
    parser.add_argument("--json", action="store_true", help="print the raw results")
    args = parser.parse_args()
    wanted = [g for g in args.only.split(",") if g and not (g == "pg" and args.no_postgres)]
    record: dict[str, Any] = {"groups": {}, "before": {}}
    if args.results.exists():
        record = json.loads(args.results.read_text())
    record["machine"] = f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    for group in wanted:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"== {group}", file=sys.stderr)
        results = measure(group, None if args.no_postgres else args.postgres)
        if group in record["groups"]:
            record["before"][group] = record["groups"][group]
        record["groups"][group] = {"when": when, "load": load, "results": results}
    section = table(record)
    if args.json:
        json.dump(record, sys.stdout, indent=2)
        print()
    else:
        print(section)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(record, indent=1, default=str) + "\n")
    if args.write is not None:
        rewrite(args.write, section)


if __name__ == "__main__":
    main()
