"""Running a workload in a forked child under strace, for the crash-point and I/O-fault tests.

`Zygote` starts `crash_child.py zygote` once: it imports Wovyr and then forks a fresh
child per run, which waits until strace has attached (`TRACED_MARK`) before it touches the
store. So a traced run costs about 0.1 s, not an interpreter start, and strace's counting
starts with the workload's first call. strace counts `when=N` per thread: the workloads
keep every store call on their main thread (`crash_child.single_threaded`).

`Sample` chooses which points of a sweep a run tries: every point with
``WOVYR_FULL_SWEEP=1``, otherwise one point in `SHARE` (by position, so the kills are
spread over the whole workload) chosen by ``WOVYR_SWEEP_SEED`` (random when unset; CI
sets the number of commits, so `SHARE` successive commits try every point), plus a core
each sweep names (the first and last point of each call at least).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .crash_child import NOT_TRACED, TRACED_MARK

__all__ = ["SHARE", "Sample", "Zygote", "copy_of", "count_calls", "injected", "zygote"]

CHILD = Path(__file__).with_name("crash_child.py")
SHARE = 3  # a run of a sampled sweep tries one point in SHARE (and the sweep's core)
P = TypeVar("P")


@dataclass(frozen=True)
class Sample:
    """The points of a sweep this run tries (see the module's docstring)."""

    seed: int
    full: bool

    @classmethod
    def from_env(cls) -> Sample:
        seed = os.environ.get("WOVYR_SWEEP_SEED") or str(random.randrange(1_000_000))
        return cls(int(seed), os.environ.get("WOVYR_FULL_SWEEP", "") not in ("", "0"))

    def pick(self, points: list[P], core: frozenset[P] = frozenset()) -> list[P]:
        """`points` (in sweep order) at positions `seed` modulo `SHARE`, and the `core`."""
        if self.full:
            return list(points)
        return [p for i, p in enumerate(points) if i % SHARE == self.seed % SHARE or p in core]

    def pick_calls(self, counts: dict[str, int]) -> list[tuple[str, int]]:
        """The (call, N) points of a sweep over `counts`; each call's first and last N
        are the core."""
        points = [(call, n) for call, count in counts.items() for n in range(1, count + 1)]
        core = frozenset(p for c, k in counts.items() if k for p in ((c, 1), (c, k)))
        return self.pick(points, core)

    def line(self, tried: int, of: int) -> str:
        """What a sweep's output says about its sample (the seed to run it again)."""
        if self.full:
            return f"full sweep: all {of} points"
        return (
            f"sampled sweep: {tried} of {of} points (WOVYR_SWEEP_SEED={self.seed}; "
            "WOVYR_FULL_SWEEP=1 tries them all)"
        )


class Zygote:
    """A child process that imported Wovyr once and forks one traced child per run."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), "zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()

    def run(
        self,
        url: str,
        workdir: Path,
        strace_args: list[str],
        *,
        workload: str = "crash",
        count: int = 3,
    ) -> int:
        """Run `workload` in a forked child under `strace -f <strace_args> -p <child>`;
        return its exit code (-9: killed by a SIGKILL strace injected)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        workdir.mkdir(parents=True, exist_ok=True)
        job = {"workload": workload, "url": url, "workdir": str(workdir), "count": count}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        kind, pid = self.proc.stdout.readline().split()
        assert kind == "pid"
        # strace tampers only with traced calls: getppid joins any `trace=` set.
        args = [re.sub(r"^trace=(?!getppid,)", "trace=getppid,", a) for a in strace_args]
        mark = ["-e", f"inject=getppid:retval={TRACED_MARK}"]
        tracer = subprocess.Popen(
            ["strace", "-f", "-qq", *args, *mark, "-p", pid],
            stderr=subprocess.PIPE,
            text=True,
        )
        kind, done_pid, code = self.proc.stdout.readline().split()  # the child's exit
        assert (kind, done_pid) == ("exit", pid)
        _, errors = tracer.communicate(timeout=30)
        assert tracer.returncode == 0, errors
        assert int(code) != NOT_TRACED, "strace did not attach"
        return int(code)


def copy_of(template: Path, workdir: Path) -> tuple[str, Path]:
    """A copy of the SQLite file `template` as `workdir`/w.db: (its URL, `workdir`). Each
    kill of a sweep starts from one, so the sweep crosses the workload's calls only."""
    workdir.mkdir(parents=True)
    shutil.copyfile(template, workdir / "w.db")
    return f"sqlite:///{workdir / 'w.db'}", workdir


@contextmanager
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    try:
        yield z
    finally:
        z.close()


_CALL = re.compile(r"^(\d+)\s+(\w+)\(")


def count_calls(
    z: Zygote,
    url: str,
    workdir: Path,
    calls: tuple[str, ...],
    *,
    workload: str = "crash",
    count: int = 3,
) -> tuple[dict[str, int], dict[str, int]]:
    """How often a clean traced run makes each call: (on the child's main thread, on other
    threads). `when=N` counts per thread, so only the main thread's calls are N-th calls."""
    trace = workdir / "strace.out"
    args = ["-o", str(trace), "-e", f"trace={','.join(calls)}"]
    code = z.run(url, workdir, args, workload=workload, count=count)
    assert code == 0, f"the clean run failed with {code}"
    lines = [_CALL.match(ln) for ln in trace.read_text().splitlines()]
    tids = Counter(m.group(1) for m in lines if m and m.group(2) == "getppid")
    main_tid = tids.most_common(1)[0][0]  # the child polls getppid() before anything else
    main, other = dict.fromkeys(calls, 0), dict.fromkeys(calls, 0)
    for m in lines:
        if m and m.group(2) in calls:
            (main if m.group(1) == main_tid else other)[m.group(2)] += 1
    return main, other


def injected(trace: Path) -> int:
    """How many calls strace tampered with, from its output file (getppid marks aside)."""
    return sum(
        1
        for line in trace.read_text().splitlines()
        if "(INJECTED)" in line and "getppid(" not in line
    )
