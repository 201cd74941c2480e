"""Event triggers under a crash at every commit: each event starts or signals exactly once.

The `trigger` workload of `crash_child.py` receives three events in a forked child (a topic
event that starts `fulfil`, one that signals the waiting `waiter-1`, and a signed webhook
request that starts `fulfil`; every trigger dedups on the event's id),
acknowledging each outcome as it returns. strace SIGKILLs the child at its N-th `pwrite64`
(every page SQLite writes: the kill leaves transaction k whole and k+1 not begun, or half
written in the WAL without its commit frame), for each N of the sweep's sample
(`tracing.Sample`: one in three, the first and the last; ``WOVYR_FULL_SWEEP=1`` tries
every N). Then the sender retries: a clean
engine in this process posts every event again, the webhook request byte for byte (same
signature). After the retry:

- every `fulfil` execution belongs to one event, and each start event has exactly one;
- `waiter-1`'s log holds exactly one signal of each payment event;
- an event the child acknowledged as started or signalled answers `duplicate` naming the
  same execution (a webhook request it recorded is refused as a replay instead);
- every started execution runs to completion, and the database passes integrity_check.

Before this test, a kill between a signal trigger's dedup claim and its signal lost the
signal (the retry found the key held and answered `duplicate`), and a kill after a webhook
request's signature was claimed refused the retry as a replay while nothing had started
(the sweep fails at kill 38 and at kill 58 of 102 on that code).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from tests.chaos.invariants import sqlite_integrity

from wovyr.engine.changes import signalled
from wovyr.store import open_store
from wovyr.store.base import ExecutionFilter
from wovyr.testing import drain

from .crash_child import TRIGGER_AT, prepare_triggers, send_event, trigger_engine, trigger_events
from .tracing import Sample, copy_of, count_calls, zygote

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("strace_installed")]
IDS = 1  # events per trigger (a second adds kill points on the same code paths)
CALL = "pwrite64"
MAX_CRASH_POINTS = 400


def retry_and_check(url: str, workdir: Path) -> Counter[str]:
    """Send every event again as the sender would; check each took effect exactly once.
    Returns the retries' outcomes."""
    acks = {}
    if (workdir / "acks").exists():
        for line in (workdir / "acks").read_text().splitlines():
            name, outcome, execution_id = line.split()
            acks[name] = (outcome, execution_id)
    engine = trigger_engine(url, TRIGGER_AT + timedelta(minutes=1))
    try:
        retried: Counter[str] = Counter()
        for trigger, name, body in trigger_events(IDS):
            outcome, execution_id = send_event(engine, trigger, body)
            retried[outcome] += 1
            assert outcome in ("started", "signalled", "duplicate", "refused"), (name, outcome)
            assert outcome != "refused" or trigger == "hooks", name
            if acks.get(name, ("", ""))[0] in ("started", "signalled"):
                acked = acks[name][1]
                assert (outcome, execution_id) in (("duplicate", acked), ("refused", "-")), (
                    name,
                    acks[name],
                    outcome,
                )
        drain(engine)
        rows = engine.store.list_executions(ExecutionFilter(tenant=None, limit=100)).items
        orders = Counter()
        for row in rows:
            if row.id == "waiter-1":
                continue
            view = engine.query(row.id)
            assert view.status == "completed", (row.id, view.status)
            orders[view.output] += 1
        starts = [name for trigger, name, _ in trigger_events(IDS) if trigger != "payments"]
        assert orders == Counter(starts), orders
        history = engine.store.history("waiter-1", tenant=engine.tenant)
        marks = Counter(e.data.get("dedup") for e in history if e.type == "SignalReceived")
        paid = [f"payments:{name}" for t, name, _ in trigger_events(IDS) if t == "payments"]
        assert marks == Counter(paid), marks
        assert all(signalled(engine.store, engine.tenant, "waiter-1", m) for m in paid)
        return retried
    finally:
        engine.close()


@pytest.mark.timeout(600)
def test_a_kill_at_any_write_while_receiving_events_starts_and_signals_each_once(
    tmp_path: Path,
) -> None:
    template = tmp_path / "template" / "w.db"
    template.parent.mkdir()
    prepare_triggers(f"sqlite:///{template}")
    open_store(f"sqlite:///{template}").close()  # checkpointed: each kill starts from a copy

    def target(name: str) -> tuple[str, Path]:
        return copy_of(template, tmp_path / name)

    with zygote() as z:
        url, clean = target("clean")
        counts, elsewhere = count_calls(z, url, clean, (CALL,), workload="trigger", count=IDS)
        assert not any(elsewhere.values()), f"store calls off the main thread: {elsewhere}"
        assert 0 < counts[CALL] <= MAX_CRASH_POINTS, counts
        acked = [line.split()[1] for line in (clean / "acks").read_text().splitlines()]
        assert Counter(acked) == {"started": 2 * IDS, "signalled": IDS}, acked
        assert retry_and_check(url, clean) == {"duplicate": 2 * IDS, "refused": IDS}
        outcomes: Counter[str] = Counter()
        killed = 0
        sample = Sample.from_env()
        picked = sample.pick_calls(counts)
        print(sample.line(len(picked), counts[CALL]))
        for _, n in picked:
            url, workdir = target(f"{CALL}-{n}")
            trace = ["-o", "/dev/null", "-e", f"trace={CALL}"]
            inject = ["-e", f"inject={CALL}:signal=KILL:when={n}"]
            code = z.run(url, workdir, [*trace, *inject], workload="trigger", count=IDS)
            assert code in (0, -9), f"{CALL} #{n}: the child exited with {code}"
            killed += code == -9
            sqlite_integrity(workdir / "w.db")
            try:
                outcomes += retry_and_check(url, workdir)
            except AssertionError as exc:
                raise AssertionError(f"after a kill at {CALL} #{n}: {exc}") from exc
    print(f"trigger crash points: {CALL} {counts[CALL]}, killed {killed}; retries {outcomes}")
    assert killed == len(picked), (killed, counts)
    # the sweep reached kills before a start, before a signal, and after one (a duplicate)
    assert outcomes["started"] and outcomes["signalled"] and outcomes["duplicate"], outcomes
