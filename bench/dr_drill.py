"""Disaster-recovery drill: backup time and size, restore time to a ready server, and the
data lost when the machine is lost between two scheduled backups.

For each size (executions, each completed: started, one `set` step, completed) on the
chosen store:

- populate: N executions (not timed as a figure of the drill);
- backup: `take_backup` (SQLite online backup API / `pg_dump -Fc`), seconds and bytes, and
  the same in B0 units is not meaningful, so the DB size beside it is shown instead;
- restore: `restore_backup` into an empty home (SQLite) or a fresh database (PostgreSQL),
  then `wovyr serve` on the restored store until `/readyz` answers 200: RTO = restore +
  server start;
- RPO: a writer keeps completing executions; a backup is taken; the writer goes on for
  `--interval` seconds (the gap to the next scheduled backup) and the machine is "lost";
  the backup is restored and the executions completed after it was taken are counted as
  lost. RPO = the schedule's interval (+ the backup's own duration at most).

Usage: python bench/dr_drill.py [--store sqlite|postgres] [--sizes 10000] [--large]
       [--interval 5] [--json]   (--large adds 100000 executions: minutes to populate)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wovyr.engine.engine import Engine
from wovyr.platform.backup import restore_backup, take_backup
from wovyr.platform.kms import ROOT_ENV, load_kms
from wovyr.store import open_store
from wovyr.store.base import ExecutionFilter
from wovyr.testing import drain

PG = os.environ.get("WOVYR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: drill}
inputs:
  n: {type: integer, default: 0}
activities:
  - id: x
    set: {n: "${{ inputs.n }}"}
output: "${{ activities.x.output }}"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def populate(engine: Engine, count: int, prefix: str, batch: int = 500) -> None:
    """`count` completed executions (started in batches, then driven by one worker)."""
    for start in range(0, count, batch):
        for i in range(start, min(count, start + batch)):
            engine.start(name="drill", input={"n": i}, execution_id=f"{prefix}{i}")
        drain(engine)


class Pg:
    """Fresh schemas and databases on the test server, dropped at the end."""

    def __init__(self) -> None:
        import psycopg

        self.psycopg = psycopg
        self.schemas: list[str] = []
        self.databases: list[str] = []

    def schema(self) -> str:
        name = f"drill_{uuid.uuid4().hex[:8]}"
        with self.psycopg.connect(PG, autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {name}")
        self.schemas.append(name)
        return f"{PG}?options=-csearch_path%3D{name}"

    def database(self) -> str:
        name = f"drill_{uuid.uuid4().hex[:8]}"
        with self.psycopg.connect(PG, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        self.databases.append(name)
        return f"{PG.rsplit('/', 1)[0]}/{name}"

    def close(self) -> None:
        with self.psycopg.connect(PG, autocommit=True) as c:
            for s in self.schemas:
                c.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
            for d in self.databases:
                c.execute(f"DROP DATABASE IF EXISTS {d} WITH (FORCE)")


def ready_server(home: Path, url: str, env: dict[str, str]) -> float:
    """Seconds from launching `wovyr serve` on the restored store to `/readyz` 200."""
    port = _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wovyr",
            "serve",
            "--home",
            str(home),
            "--db",
            url,
            "--port",
            str(port),
        ],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = started + 120
        while time.perf_counter() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the restored server did not become ready in 120 s")
    finally:
        proc.terminate()
        proc.wait(30)


def drill_size(kind: str, count: int, work: Path, pg: Pg | None) -> dict[str, Any]:
    home = work / f"home-{count}"
    url = pg.schema() if pg else f"sqlite:///{home / 'wovyr.db'}"
    store = open_store(url, db_clock=False)
    engine = Engine(store)
    engine.apply(FLOW)
    kms = load_kms(home, {}, warn=False)
    t0 = time.perf_counter()
    populate(engine, count, "e")
    populate_s = time.perf_counter() - t0
    db_bytes = (home / "wovyr.db").stat().st_size if not pg else None
    dest = work / f"backup-{count}"
    t0 = time.perf_counter()
    report = take_backup(store, home, dest, kms=kms, at=datetime.now(UTC))
    backup_s = time.perf_counter() - t0
    store.close()
    env = {ROOT_ENV: kms.root.key.hex()}
    new_home = work / f"restored-{count}"
    target = pg.database() if pg else f"sqlite:///{new_home / 'wovyr.db'}"
    t0 = time.perf_counter()
    restore_backup(dest, target, new_home, actor="local:drill", at=datetime.now(UTC), env=env)
    restore_s = time.perf_counter() - t0
    ready_s = ready_server(new_home, target, env)
    return {
        "store": kind,
        "executions": count,
        "populate_s": round(populate_s, 2),
        "db_bytes": db_bytes,
        "backup_s": round(backup_s, 3),
        "backup_bytes": report.bytes,
        "restore_s": round(restore_s, 3),
        "server_ready_s": round(ready_s, 3),
        "rto_s": round(restore_s + ready_s, 3),
    }


def drill_rpo(kind: str, interval: float, work: Path, pg: Pg | None) -> dict[str, Any]:
    """Backup at t0 while a writer completes executions; the machine is lost `interval`
    seconds later (just before the next scheduled backup); what the restore lacks."""
    home = work / "home-rpo"
    url = pg.schema() if pg else f"sqlite:///{home / 'wovyr.db'}"
    setup = open_store(url, db_clock=False)
    Engine(setup).apply(FLOW)
    kms = load_kms(home, {}, warn=False)
    stop = threading.Event()
    done: list[tuple[str, float]] = []

    def writer() -> None:
        store = open_store(url, db_clock=False)
        engine = Engine(store)
        n = 0
        while not stop.is_set():
            n += 1
            eid = engine.start(name="drill", input={"n": n}, execution_id=f"w{n}").id
            drain(engine, only=[eid])
            done.append((eid, time.perf_counter()))
        store.close()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(1.0)  # the writer is in its stride (a drill, not a test)
    t_backup = time.perf_counter()
    take_backup(setup, home, work / "backup-rpo", kms=kms, at=datetime.now(UTC))
    backup_s = time.perf_counter() - t_backup
    time.sleep(interval)
    stop.set()  # the machine is lost here
    thread.join(30)
    setup.close()
    lost_at = time.perf_counter()
    target = pg.database() if pg else f"sqlite:///{work / 'restored-rpo' / 'wovyr.db'}"
    restore_backup(
        work / "backup-rpo",
        target,
        work / "restored-rpo",
        actor="local:drill",
        at=datetime.now(UTC),
        env={ROOT_ENV: kms.root.key.hex()},
    )
    restored = open_store(target, db_clock=False)
    have = {r.id for r in restored.list_executions(ExecutionFilter(limit=1_000_000)).items}
    restored.close()
    completed = [eid for eid, _ in done]
    lost = [eid for eid in completed if eid not in have]
    newest_kept = max((at for eid, at in done if eid in have), default=t_backup)
    return {
        "store": kind,
        "interval_s": interval,
        "backup_s": round(backup_s, 3),
        "completed_before_loss": len(completed),
        "lost_executions": len(lost),
        "lost_share": round(len(lost) / max(1, len(completed)), 3),
        "rpo_measured_s": round(lost_at - newest_kept, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--large", action="store_true", help="also 100000 executions")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.large:
        sizes.append(100_000)
    work = Path(tempfile.mkdtemp(prefix="wovyr-drill-"))
    pg = Pg() if args.store == "postgres" else None
    try:
        rows = [drill_size(args.store, n, work, pg) for n in sizes]
        rpo = drill_rpo(args.store, args.interval, work, pg)
    finally:
        if pg is not None:
            pg.close()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"sizes": rows, "rpo": rpo}, indent=2))
        return
    print(
        f"{'store':9} {'executions':>10} {'backup s':>9} {'backup MB':>9} {'restore s':>9} "
        f"{'ready s':>8} {'RTO s':>7}"
    )
    for r in rows:
        print(
            f"{r['store']:9} {r['executions']:>10} {r['backup_s']:>9.2f} "
            f"{r['backup_bytes'] / 1e6:>9.1f} {r['restore_s']:>9.2f} "
            f"{r['server_ready_s']:>8.2f} {r['rto_s']:>7.2f}"
        )
    print(
        f"RPO drill ({rpo['store']}): machine lost {rpo['interval_s']} s after a backup: "
        f"{rpo['lost_executions']} of {rpo['completed_before_loss']} completed executions "
        f"lost ({rpo['lost_share']:.0%}); newest restored work was {rpo['rpo_measured_s']} s "
        "before the loss"
    )


if __name__ == "__main__":
    main()
