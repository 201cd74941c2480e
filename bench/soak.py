"""Memory soak: `wovyr serve` as a real process under a mixed load for N minutes.

K client threads (keep-alive) loop over: start a one-step workflow, start a workflow that
waits for a signal, get one execution, list the newest 50, signal a waiting execution
(which completes it). Every few seconds the RSS of the server process and of its worker
process is read from /proc. After a warm-up, a least-squares line through the samples
gives the growth of each process in MiB per minute and in KB per execution started (RSS
against the number of executions started so far): a server that keeps nothing per
execution grows by neither. The same fit is made for each part of the RSS the kernel
reports in /proc/PID/status: RssAnon (heap and anonymous mappings), RssFile (pages of
mapped files: shared libraries, a memory-mapped database) and RssShmem (shared memory, e.g.
tmpfs-backed mappings), so growth can be told apart from a leak.

Usage: python bench/soak.py [--minutes 3] [--clients 8] [--sample 5] [--warmup SECS] [--json]
                            [--smaps DIR] [--samples-out FILE] [--tracemalloc DIR]
The full run: python bench/soak.py --minutes 30

`--tracemalloc DIR` runs both processes with `WOVYR_DEBUG_TRACEMALLOC=DIR` (allocation
tracing: several times slower, so its slopes are not comparable), signals them for a
snapshot at the end of the warm-up and at the end, and prints each process's allocation
sites that grew most in between.

`--smaps DIR` copies /proc/PID/smaps of both processes into DIR at the end of the warm-up
and at the end, and prints the mappings whose Rss grew most in between (by mapping and by
what is mapped: a file, [heap], anonymous memory).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ONE_STEP = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: soak-one}
inputs:
  n: {type: number, default: 0}
activities:
  - id: a
    set: {x: "${{ inputs.n + 1.0 }}"}
output: {x: "${{ activities.a.output.x }}"}
"""
WAITING = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: soak-wait}
activities:
  - id: go
    wait: {signal: go}
  - id: done
    needs: [go]
    set: {got: "${{ activities.go.output }}"}
"""
WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
MIB = 1024 * 1024
# The lines of /proc/PID/status sampled, and the name of each in the samples and results.
PARTS = {"VmRSS": "rss", "RssAnon": "rss_anon", "RssFile": "rss_file", "RssShmem": "rss_shmem"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def rss_parts(pid: int | None) -> dict[str, int | None]:
    """VmRSS, RssAnon, RssFile and RssShmem of `pid` in bytes (None each if unreadable)."""
    parts: dict[str, int | None] = dict.fromkeys(PARTS.values())
    if pid is None:
        return parts
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return parts
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in PARTS:
            parts[PARTS[name]] = int(rest.split()[0]) * 1024
    return parts


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, PermissionError):
        return None


def worker_pid(server_pid: int) -> int | None:
    """The server's worker process: its child running `wovyr.server.worker_process`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != server_pid:
                continue
            if b"worker_process" in Path(f"/proc/{entry}/cmdline").read_bytes():
                return int(entry)
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
    return None


def fit(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys against xs (0.0 with fewer than two distinct xs)."""
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@dataclass
class Load:
    """What the clients did, shared between their threads."""

    started: int = 0
    requests: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    waiting: deque[str] = field(default_factory=deque)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=1000))
    lock: threading.Lock = field(default_factory=threading.Lock)


def client(
    base: str, headers: dict[str, str], load: Load, stop: threading.Event, seed: int
) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
        while not stop.is_set():
            roll = rng.random()
            began = time.perf_counter()
            started: str | None = None
            wait = False
            try:
                if roll < 0.25:
                    body = {"definition": ONE_STEP, "input": {"n": rng.randint(0, 1000)}}
                    r = http.post("/api/v1/workflows", json=body)
                    started = r.json().get("id") if r.status_code < 300 else None
                elif roll < 0.45:
                    r = http.post("/api/v1/workflows", json={"definition": WAITING})
                    started = r.json().get("id") if r.status_code < 300 else None
                    wait = True
                elif roll < 0.70:
                    with load.lock:
                        eid = rng.choice(load.recent) if load.recent else None
                    if eid is None:
                        continue
                    r = http.get(f"/api/v1/workflows/{eid}")
                elif roll < 0.85:
                    r = http.get("/api/v1/workflows", params={"limit": 50})
                else:
                    with load.lock:
                        eid = load.waiting.popleft() if load.waiting else None
                    if eid is None:
                        continue
                    r = http.post(
                        f"/api/v1/workflows/{eid}/signal",
                        json={"name": "go", "payload": {"n": rng.randint(0, 9)}},
                    )
                ok = r.status_code < 300
            except httpx.HTTPError:
                ok = False
            elapsed = time.perf_counter() - began
            with load.lock:
                load.requests += 1
                load.latencies.append(elapsed)
                if not ok:
                    load.errors += 1
                if started is not None:
                    load.started += 1
                    load.recent.append(started)
                    if wait:
                        load.waiting.append(started)


def wait_ready(base: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise SystemExit("the server exited before it was ready")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.1)


def slopes(samples: list[dict[str, Any]], key: str, warmup: float) -> dict[str, Any]:
    """The fit of `key` (the process's VmRSS) after the warm-up, and beside it, under the
    names of PARTS (`rss_anon`, ...), the same fit of each part of the RSS."""
    kept = [s for s in samples if s["t"] >= warmup and s.get(key) is not None]
    if len(kept) < 2:
        return {"samples": len(kept)}
    minutes = [s["t"] / 60 for s in kept]
    mib = [s[key] / MIB for s in kept]
    started = [float(s["started"]) for s in kept]
    result: dict[str, Any] = {
        "samples": len(kept),
        "rss_start_mib": round(mib[0], 2),
        "rss_end_mib": round(mib[-1], 2),
        "rss_max_mib": round(max(mib), 2),
        "mib_per_min": round(fit(minutes, mib), 4),
        "kb_per_execution": round(fit(started, [m * 1024 for m in mib]), 4),
    }
    for part in list(PARTS.values())[1:]:
        rows = [s for s in kept if s.get(f"{key}_{part[4:]}") is not None]
        if len(rows) < 2:
            continue
        values = [s[f"{key}_{part[4:]}"] / MIB for s in rows]
        result[part] = {
            "start_mib": round(values[0], 2),
            "end_mib": round(values[-1], 2),
            "mib_per_min": round(fit([s["t"] / 60 for s in rows], values), 4),
            "kb_per_execution": round(
                fit([float(s["started"]) for s in rows], [v * 1024 for v in values]), 4
            ),
        }
    return result


def sample_rss(role: str, pid: int | None) -> dict[str, int | None]:
    """`role_rss`, `role_rss_anon`, `role_rss_file`, `role_rss_shmem` of one sample."""
    return {f"{role}_{part}": value for part, value in rss_parts(pid).items()}


@dataclass
class Mapping:
    """One mapping of /proc/PID/smaps: its address range, what is mapped, its sizes in kB."""

    start: str
    end: str
    name: str
    size_kb: int = 0
    rss_kb: int = 0


def read_smaps(text: str) -> list[Mapping]:
    mappings: list[Mapping] = []
    for line in text.splitlines():
        head = line.split(maxsplit=5)
        if head and "-" in head[0] and ":" not in head[0]:
            start, _, end = head[0].partition("-")
            name = head[5] if len(head) > 5 else "[anon]"
            mappings.append(Mapping(start, end, name))
        elif mappings and head and head[0] in ("Size:", "Rss:"):
            if head[0] == "Size:":
                mappings[-1].size_kb = int(head[1])
            else:
                mappings[-1].rss_kb = int(head[1])
    return mappings


def save_smaps(pids: dict[str, int | None], directory: Path, number: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for role, pid in pids.items():
        if pid is None:
            continue
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            text = Path(f"/proc/{pid}/smaps").read_text()
            (directory / f"{role}-{pid}-{number}.smaps").write_text(text)


def smaps_grown(directory: Path, role: str, pid: int | None, top: int = 12) -> list[str]:
    """The mappings of `role` whose Rss grew most between its two smaps copies: each mapping
    (by start address and what is mapped), then the totals by what is mapped."""
    first = directory / f"{role}-{pid}-1.smaps"
    second = directory / f"{role}-{pid}-2.smaps"
    if pid is None or not first.exists() or not second.exists():
        return [f"{role}: no smaps copies"]
    before = {(m.start, m.name): m for m in read_smaps(first.read_text())}
    after = {(m.start, m.name): m for m in read_smaps(second.read_text())}
    rows: list[tuple[int, str]] = []
    for key in before.keys() | after.keys():
        b, a = before.get(key), after.get(key)
        diff = (a.rss_kb if a else 0) - (b.rss_kb if b else 0)
        if diff:
            was = f"{b.rss_kb}/{b.size_kb}" if b else "new"
            now = f"{a.rss_kb}/{a.size_kb}" if a else "gone"
            rows.append((diff, f"{key[0]} {key[1]}  Rss/Size kB {was} -> {now}"))
    rows.sort(key=lambda r: -abs(r[0]))
    by_name: dict[str, int] = {}
    for sign, maps in ((-1, before), (1, after)):
        for m in maps.values():
            by_name[m.name] = by_name.get(m.name, 0) + sign * m.rss_kb
    total = sum(by_name.values())
    lines = [f"{role} (pid {pid}): Rss {total:+d} kB between the smaps copies; by mapping:"]
    lines += [f"  {d:+8d} kB  {what}" for d, what in rows[:top]]
    lines.append("  by what is mapped:")
    named = sorted(((d, n) for n, d in by_name.items() if d), key=lambda r: -abs(r[0]))
    lines += [f"  {d:+8d} kB  {n}" for d, n in named[:top]]
    return lines


def home_files(home: Path) -> dict[str, int]:
    """The sizes of the files in the server's home (the database, its -wal and -shm)."""
    sizes: dict[str, int] = {}
    for path in home.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if path.is_file() and path.suffix != ".out":
                sizes[str(path.relative_to(home))] = path.stat().st_size
    return sizes


def snapshot(pids: dict[str, int | None], directory: Path, number: int) -> None:
    """Ask each process for its `number`th snapshot and wait (bounded) until it is written."""
    for pid in pids.values():
        if pid is not None:
            os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 120
    for role, pid in pids.items():
        path = directory / f"{role}-{pid}-{number}.snapshot"
        while pid is not None and not path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    time.sleep(2)  # the file appears as it starts being written


def grown(directory: Path, role: str, pid: int | None, top: int = 15) -> list[str]:
    """The allocation sites of `role` that grew most between its two snapshots."""
    first = directory / f"{role}-{pid}-1.snapshot"
    second = directory / f"{role}-{pid}-2.snapshot"
    if pid is None or not first.exists() or not second.exists():
        return [f"{role}: no snapshots"]
    keep = tracemalloc.Filter(False, tracemalloc.__file__)
    before = tracemalloc.Snapshot.load(str(first)).filter_traces([keep])
    after = tracemalloc.Snapshot.load(str(second)).filter_traces([keep])
    diff = after.compare_to(before, "lineno")
    total = sum(d.size_diff for d in diff)
    lines = [f"{role} (pid {pid}): {total / 1024:+.1f} KiB traced between the snapshots"]
    lines += [
        f"  {d.size_diff / 1024:+9.1f} KiB {d.count_diff:+8d} blocks  {d.traceback}"
        for d in diff[:top]
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds left out of the fit (default: a third, at most 300)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        default=None,
        help="trace allocations, snapshots in this directory",
    )
    parser.add_argument(
        "--samples-out", type=Path, default=None, help="write every sample here (JSON)"
    )
    parser.add_argument(
        "--smaps",
        type=Path,
        default=None,
        help="copy /proc/PID/smaps of both processes here after the warm-up and at the end",
    )
    args = parser.parse_args()
    duration = args.minutes * 60
    warmup = args.warmup if args.warmup is not None else min(300.0, duration / 3)
    home = Path(tempfile.mkdtemp(prefix="wovyr-soak-"))
    port = free_port()
    env = {**os.environ, "WOVYR_HOME": str(home), "WOVYR_DISPATCH_INTERVAL_SECONDS": "1"}
    if args.tracemalloc is not None:
        env["WOVYR_DEBUG_TRACEMALLOC"] = str(args.tracemalloc)
    pids: dict[str, int | None] = {}
    traced = False
    mapped = False
    files: dict[str, int] = {}
    log = (home / "serve.out").open("wb")
    proc = subprocess.Popen(
        [*WOVYR, "serve", "--port", str(port), "--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    load = Load()
    stop = threading.Event()
    samples: list[dict[str, Any]] = []
    threads: list[threading.Thread] = []
    try:
        wait_ready(base, proc)
        token = next(
            ln.strip() for ln in (home / "serve.out").read_text().splitlines() if "wvr_" in ln
        )
        headers = {"Authorization": f"Bearer {token}"}
        threads = [
            threading.Thread(target=client, args=(base, headers, load, stop, i), daemon=True)
            for i in range(args.clients)
        ]
        for t in threads:
            t.start()
        began = time.monotonic()
        while (now := time.monotonic() - began) < duration:
            wpid = worker_pid(proc.pid)
            if args.tracemalloc is not None and not traced and now >= warmup:
                pids = {"server": proc.pid, "worker": wpid}
                snapshot(pids, args.tracemalloc, 1)
                traced = True
            if args.smaps is not None and not mapped and now >= warmup:
                pids = {"server": proc.pid, "worker": wpid}
                save_smaps(pids, args.smaps, 1)
                mapped = True
            with load.lock:
                started, requests = load.started, load.requests
            samples.append(
                {
                    "t": round(now, 2),
                    "started": started,
                    "requests": requests,
                    **sample_rss("server", proc.pid),
                    **sample_rss("worker", wpid),
                    "server_fds": open_fds(proc.pid),
                }
            )
            time.sleep(max(0.0, args.sample - (time.monotonic() - began - now)))
        if traced and args.tracemalloc is not None:
            snapshot(pids, args.tracemalloc, 2)
        if mapped and args.smaps is not None:
            save_smaps(pids, args.smaps, 2)
        files = home_files(home)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    elapsed = samples[-1]["t"] if samples else 0.0
    lat = sorted(load.latencies)
    results: dict[str, Any] = {
        "minutes": args.minutes,
        "clients": args.clients,
        "warmup_s": warmup,
        "requests": load.requests,
        "errors": load.errors,
        "executions_started": load.started,
        "requests_per_s": round(load.requests / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
        "p99_ms": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000, 1) if lat else None,
        "server_fds_end": samples[-1]["server_fds"] if samples else None,
        "home_files_end": files,
        "server": slopes(samples, "server_rss", warmup),
        "worker": slopes(samples, "worker_rss", warmup),
    }
    if traced and args.tracemalloc is not None:
        for role, pid in pids.items():
            print("\n".join(grown(args.tracemalloc, role, pid)), file=sys.stderr)
    if mapped and args.smaps is not None:
        for role, pid in pids.items():
            print("\n".join(smaps_grown(args.smaps, role, pid)), file=sys.stderr)
    if args.samples_out is not None:
        args.samples_out.write_text(json.dumps(samples))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{args.minutes:g} min, {args.clients} clients: {load.requests} requests "
        f"({results['requests_per_s']}/s, {load.errors} errors, p50 {results['p50_ms']} ms, "
        f"p99 {results['p99_ms']} ms), {load.started} executions started; "
        f"fit after {warmup:g} s of warm-up"
    )
    print(f"{'process':<9}{'RSS start':>11}{'RSS end':>10}{'MiB/min':>10}{'KB/exec':>10}")
    for name in ("server", "worker"):
        r = results[name]
        if "mib_per_min" not in r:
            print(f"{name:<9}{'(no samples)':>41}")
            continue
        print(
            f"{name:<9}{r['rss_start_mib']:>11}{r['rss_end_mib']:>10}"
            f"{r['mib_per_min']:>10}{r['kb_per_execution']:>10}"
        )
        for part in list(PARTS.values())[1:]:
            if part in r:
                p = r[part]
                print(
                    f"  {part[4:]:<7}{p['start_mib']:>11}{p['end_mib']:>10}"
                    f"{p['mib_per_min']:>10}{p['kb_per_execution']:>10}"
                )
    sizes = ", ".join(f"{n} {b / MIB:.1f} MiB" for n, b in sorted(files.items()))
    print(f"files at the end: {sizes or 'none'}")


if __name__ == "__main__":
    main()
