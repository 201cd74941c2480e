"""The process the crash-point tests kill: start a few executions, then drive them to the end.

Usage: python crash_child.py run STORE_URL WORKDIR EXECUTIONS
       python crash_child.py zygote

`zygote` imports everything once, then forks one child per JSON line read from stdin
(``{"workload": "crash" | "io" | "chain" | "trigger" | "code", "url": ..., "workdir": ...,
"count": ...}``; `io` is the workload of `io_child.py`, `chain` a continue-as-new chain of
four runs, `trigger` the events of `test_trigger_crash.py`, `code` the three steps of
`crash` written as a workflow function, its last two in parallel),
printing ``pid <pid>`` and later
``exit <pid> <code>`` (a negative code is the signal that ended it). Each forked child first
waits until a tracer makes `getppid()` return `TRACED_MARK` (strace
``-e inject=getppid:retval=...``): from then on every syscall the test injects into is
counted from the child's first store call, and no time is spent importing per crash point.

It writes two plain files in WORKDIR, each line with one `write` (no fsync: a SIGKILL
does not lose what reached the page cache, and a fsync here would only add crash points
that are not the store's):

- ``acks``: ``start <id>`` once `Engine.start` returned for that id, and ``done <id> <seq>``
  once a query showed it completed with `seq` events. These are the acknowledged facts
  the parent checks after the crash.
- ``effects``: ``<execution> <step> <attempt>`` for every attempt of the ``effect`` tool,
  written inside the handler (the side effect whose count the parent checks).

The store is opened (and, the first time, created and migrated) inside this process, so a
crash can also hit the migration, a definition write or a WAL checkpoint at close.

strace counts `when=N` per thread, not per process. So that N means "the N-th such call of
the process", the child runs the real `Worker` with every thread hop made inline
(`single_threaded`): the group committer's executor and `asyncio.to_thread` run their
function on the event loop's thread, and the `effect` handler is a coroutine. Steps still
queue up behind a commit in flight and share the next one, as in a real worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import wovyr
import wovyr.worker.commit
from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store import open_store
from wovyr.store.checkpoints import DELTA_FROM
from wovyr.worker import Worker

THREE_STEPS = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: crash-points}
inputs: {pad: {type: string, default: ""}}
activities:
  - {id: s1, tool: effect, with: {step: s1}, retry: {max_attempts: 5, initial_interval: 0}}
  - {id: s2, tool: effect, with: {step: s2}, needs: [s1],
     retry: {max_attempts: 5, initial_interval: 0}}
  - {id: s3, tool: effect, with: {step: s3}, needs: [s2],
     retry: {max_attempts: 5, initial_interval: 0}}
output: {last: "${{ activities.s3.output }}"}
"""
STEPS = ("s1", "s2", "s3")
RETRY = {"max_attempts": 5, "initial_interval": 0}


@wovyr.workflow(name="crash-code")
async def crash_code(ctx: wovyr.Context, pad: str = "") -> dict[str, Any]:
    """The `code` workload: THREE_STEPS as a function, s2 and s3 asked together."""
    await ctx.run("effect", id="s1", step="s1", retry=RETRY)
    _, last = await asyncio.gather(
        ctx.run("effect", id="s2", step="s2", retry=RETRY),
        ctx.run("effect", id="s3", step="s3", retry=RETRY),
    )
    return {"last": last}


# The `chain` workload: one execution that continues as new three times (runs chain,
# chain~c2, chain~c3, chain~c4), each run one `effect` step (`run1` ... `run4`).
CHAIN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: crash-chain}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: s, tool: effect, with: {step: "${{ 'run' + string(inputs.n) }}"},
     retry: {max_attempts: 5, initial_interval: 0}}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 4 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""
CHAIN_RUNS = 4
TRACED_MARK = 999_999_999  # what an injected getppid() returns: no real pid is this large
NOT_TRACED = 97  # exit code of a forked child no tracer attached to in time
T = TypeVar("T")


class InlineExecutor(concurrent.futures.Executor):
    """An executor that runs each call at once on the caller's thread."""

    def submit(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


async def _inline_to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    return func(*args, **kwargs)


def single_threaded() -> None:
    """Make every store call of the worker happen on the event loop's thread."""
    wovyr.worker.commit.ThreadPoolExecutor = lambda **_: InlineExecutor()  # type: ignore[assignment,misc]
    asyncio.to_thread = _inline_to_thread


def append_line(path: Path, line: str) -> None:
    """One `write` of one whole line (O_APPEND), so a kill never leaves half a line."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def effect_registry(effects: Path) -> ActivityRegistry:
    registry = ActivityRegistry()

    async def effect(step: str, ctx: ActivityContext) -> str:
        append_line(effects, f"{ctx.execution_id} {step} {ctx.attempt}")
        return f"{step}-done"

    registry.register("effect", effect)
    return registry


def run(url: str, workdir: Path, count: int, *, code: bool = False) -> None:
    """Start `count` executions of THREE_STEPS (of `crash_code` with `code`), ack each
    start, drive them all, ack each completion with its event count."""
    single_threaded()
    acks = workdir / "acks"
    engine = Engine(open_store(url), activities=effect_registry(workdir / "effects"))

    async def drive() -> None:
        worker = Worker(engine, lease_seconds=60)
        try:
            ids = []
            for i in range(count):
                # the second's checkpoint is over the size written as base + deltas
                pad = {"pad": "x" * (DELTA_FROM + 1000)} if i == 1 else None
                definition = crash_code.definition() if code else THREE_STEPS
                record = await worker.start(definition, pad, execution_id=f"ex-{i}")
                append_line(acks, f"start {record.id}")
                ids.append(record.id)
            await worker.run_until_idle()
        finally:
            await worker.close()
        for execution_id in ids:
            view = engine.query(execution_id)
            if view.status == "completed":
                append_line(acks, f"done {execution_id} {view.event_count}")

    asyncio.run(drive())
    engine.close()


def run_chain(url: str, workdir: Path) -> None:
    """Start the chain (ack `start chain`), drive it to its end, ack `done <run> <seq>` for
    the run the chain's logical id answers with once it completed."""
    single_threaded()
    acks = workdir / "acks"
    # each hand-over at once (no minimum interval): the drive ends when the chain does
    engine = Engine(
        open_store(url),
        activities=effect_registry(workdir / "effects"),
        min_continue_interval=0,
    )

    async def drive() -> None:
        worker = Worker(engine, lease_seconds=60)
        try:
            record = await worker.start(CHAIN, execution_id="chain")
            append_line(acks, f"start {record.id}")
            await worker.run_until_idle()
        finally:
            await worker.close()
        view = engine.query("chain")
        if view.status == "completed":
            append_line(acks, f"done {view.id} {view.event_count}")

    asyncio.run(drive())
    engine.close()


# The `trigger` workload: events posted to three triggers (`prepare_triggers` applies them),
# each event's id its dedup key: `orders` starts `fulfil` for a topic event, `hooks` for a
# signed webhook request, `payments` signals the waiting execution `waiter-1`.
FULFIL = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: fulfil}
inputs: {order: {type: string}}
activities:
  - {id: a, set: {order: "${{ inputs.order }}"}}
output: "${{ activities.a.output.order }}"
"""
WAITER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waiter}
activities:
  - {id: gate, wait: {signal: never}}
"""
TRIGGERS = (
    """\
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: orders}
spec:
  topic: orders.created
  start: {workflow: fulfil}
  input: {order: "${{ payload.id }}"}
  dedup: {key: "${{ payload.id }}", ttl: 1h}
""",
    """\
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: payments}
spec:
  topic: payments.done
  signal: {execution: waiter-1, name: paid}
  dedup: {key: "${{ payload.id }}", ttl: 1h}
""",
    """\
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: hooks}
spec:
  topic: hooks.received
  webhook: {secrets: [HOOK], tolerance: 300}
  start: {workflow: fulfil}
  input: {order: "${{ payload.id }}"}
  dedup: {key: "${{ payload.id }}", ttl: 1h}
""",
)
TRIGGER_AT = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)  # the sender signs at this time
HOOK_KEY = "hook-key-0123456789abcdef"
ROOT_KEY = b"\x42" * 32


def trigger_engine(url: str, at: datetime) -> Engine:
    from wovyr.platform.kms import Kms, RootKey
    from wovyr.platform.secrets import Secrets

    store = open_store(url)
    return Engine(
        store, clock=ManualClock(at), secrets=Secrets(store, Kms(RootKey(ROOT_KEY), "production"))
    )


def prepare_triggers(url: str) -> None:
    """Definitions, triggers, the webhook's secret and the waiting `waiter-1`."""
    from wovyr.engine.triggers import apply_trigger

    engine = trigger_engine(url, TRIGGER_AT)
    for source in (FULFIL, WAITER):
        engine.apply(source)
    for source in TRIGGERS:
        apply_trigger(engine, source)
    assert engine.secrets is not None
    engine.secrets.set_secret(engine.tenant, "HOOK", HOOK_KEY, by="test", at=TRIGGER_AT)
    engine.start(WAITER, execution_id="waiter-1")
    engine.close()


def trigger_events(count: int) -> list[tuple[str, str, bytes]]:
    """(trigger, event id, body) of every event the workload sends, in order."""
    events = []
    for i in range(count):
        for trigger in ("orders", "payments", "hooks"):
            name = f"{trigger[0]}{i}"
            events.append((trigger, name, json.dumps({"id": name}).encode()))
    return events


def send_event(engine: Engine, trigger: str, body: bytes) -> tuple[str, str]:
    """Post one event as its sender does: (outcome, execution id); a webhook request is
    signed at `TRIGGER_AT` (so a retry is the same request) and may be refused."""
    from wovyr.activities.outbound import SIGNATURE_HEADER, sign_body
    from wovyr.engine.triggers import SignatureRefused, receive_event, receive_webhook

    if trigger == "hooks":
        hook = engine.store.get_trigger(engine.tenant, "hooks")
        assert hook is not None and hook.hook_id is not None
        header = sign_body([HOOK_KEY.encode()], body, TRIGGER_AT)
        try:
            got = receive_webhook(engine, hook.hook_id, body, {SIGNATURE_HEADER: header})
        except SignatureRefused:
            return "refused", "-"
    else:
        topic = "orders.created" if trigger == "orders" else "payments.done"
        got = receive_event(engine, topic, body)
    [record] = got.records
    return record.outcome, record.execution_id or "-"


def receive_all(url: str, workdir: Path, count: int) -> None:
    """Receive every event once, acking ``<event> <outcome> <execution>`` as each returns."""
    engine = trigger_engine(url, TRIGGER_AT)
    for trigger, name, body in trigger_events(count):
        outcome, execution_id = send_event(engine, trigger, body)
        append_line(workdir / "acks", f"{name} {outcome} {execution_id}")
    engine.close()


def _warm_up() -> None:
    """Import and compile now what a child would otherwise load lazily (under the tracer,
    every file a lazy import touches costs several traced syscalls)."""
    import contextlib
    import sqlite3  # noqa: F401

    from wovyr.definition.parse import load_definition
    from wovyr.store.sqlite import SQLiteStore  # noqa: F401

    with contextlib.suppress(ImportError):
        from wovyr.store.postgres import PostgresStore  # noqa: F401
    load_definition(THREE_STEPS)
    load_definition(CHAIN)
    import wovyr.engine.triggers
    import wovyr.platform.kms  # noqa: F401


def _workload(name: str) -> Callable[[str, Path, int], int]:
    if name == "trigger":

        def trigger(url: str, workdir: Path, count: int) -> int:
            receive_all(url, workdir, count)
            return 0

        return trigger
    if name == "io":
        from io_child import io_run  # this folder is sys.path[0]: the script's own

        return io_run
    if name == "code":

        def code(url: str, workdir: Path, count: int) -> int:
            run(url, workdir, count, code=True)
            return 0

        return code
    if name == "chain":

        def chain(url: str, workdir: Path, count: int) -> int:
            run_chain(url, workdir)
            return 0

        return chain

    def crash(url: str, workdir: Path, count: int) -> int:
        run(url, workdir, count)
        return 0

    return crash


def zygote() -> None:
    _warm_up()
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: wait for the tracer, run, never return into this loop
            code = 0
            try:
                deadline = time.monotonic() + 10
                while os.getppid() != TRACED_MARK:
                    if time.monotonic() > deadline:
                        os._exit(NOT_TRACED)
                code = _workload(job["workload"])(job["url"], Path(job["workdir"]), job["count"])
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {pid} {os.waitstatus_to_exitcode(status)}", flush=True)


def main() -> None:
    if sys.argv[1] == "zygote":
        zygote()
    else:
        run(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))


if __name__ == "__main__":
    main()
