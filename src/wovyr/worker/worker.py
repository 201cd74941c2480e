"""The worker: claim -> drive -> commit, with a timer dispatcher and lease heartbeats.

A worker owns executions through leases (owner, lease_until, fence). Its heartbeat renews
all its leases in one statement and learns from the same answer whether an execution's
sequence moved (a signal or cancel from elsewhere: wake that runner) or its fence changed
(the lease was taken over: that runner stops and commits nothing).

Scale-out (PostgreSQL): a worker claims only from its partitions, fixed (`partitions` of
`of`) or assigned from the live members (`membership=True`, recomputed on every heartbeat);
an idle worker sleeps on the store's notifications (`wait_for_work`, LISTEN/NOTIFY) in a
thread, so work is picked up at once whatever the poll interval. When the store fails
(connections terminated, the server restarting) the worker backs off and goes on: a runner
whose commit had an unknown outcome is rebuilt from the stored checkpoint if the lease is
still its own, and a lease held with no runner (a claim whose answer was lost) is adopted.

Fair share: the claim is fair between tenants (`FairClaimer`, `wovyr.worker.fair`): from
the slots each tenant holds here, each round serves every tenant with claimable work in
turn and a freed slot goes to the tenant holding the fewest (weighted). One tenant's
backlog then delays another tenant's execution by one slot's turn (the next slot to free),
not by the backlog. Running executions keep their slots (nothing is pre-empted), so a
tenant whose executions are slow could otherwise hold every slot while no other tenant had
work, and a tenant arriving then would wait for one of them to end: `reserved_slots` (by
default an eighth of the slots, none below 8; 0 turns it off) are slots no one tenant may
fill, so another tenant's execution is claimed in the next round. A tenant's weight and
slot cap are stored with the tenant (`wovyr admin quotas set T --weight W --max-slots N`);
`tenant_weights` are the default weights of tenants with none stored, `max_per_tenant`
caps every tenant's slots in this worker (the reserve lowers it further). A stored
`max_running` (`--max-running N`) caps a tenant's executions leased by all workers
together; the fair claim enforces it (fair share off, it is not counted).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wovyr.activities.outbound import post_signed
from wovyr.definition.model import Workflow
from wovyr.engine.core.state import state_from_json
from wovyr.engine.engine import Engine
from wovyr.errors import StoreError
from wovyr.platform.webhooks import Dispatcher
from wovyr.scheduling.schedules import Schedules
from wovyr.store.base import Claim, ClaimAsk, ExecutionKey, ExecutionRecord, LeaseState
from wovyr.store.capabilities import capabilities
from wovyr.worker.commit import GroupCommitter
from wovyr.worker.fair import FairClaimer, TenantShares
from wovyr.worker.listener import WorkListener
from wovyr.worker.partitions import (
    assign_partitions,
    partition_setup,
    peer,
    report_coverage,
)
from wovyr.worker.runner import ExecutionRunner
from wovyr.worker.services import RunnerServices
from wovyr.worker.threads import call_from_thread

__all__ = ["Worker", "WorkerStats"]

log = logging.getLogger("wovyr.worker")
_BACKOFF_START, _BACKOFF_MAX = 0.05, 2.0


@dataclass
class WorkerStats:
    claimed: int = 0
    store_errors: int = 0
    resumed: int = 0  # runners rebuilt from the store after a commit of unknown outcome
    adopted: int = 0  # leases found held with no runner (a claim whose answer was lost)
    rebalances: int = 0


def _reserved_share(concurrency: int, reserved: int | None = None) -> int:
    """The slots of a worker of `concurrency` that no one tenant may fill (`reserved`, or
    by default an eighth of them, none below 8 slots), checked: 0 or more, below
    `concurrency`."""
    share = concurrency // 8 if reserved is None else reserved
    if not 0 <= share < concurrency:
        raise ValueError(
            f"reserved_slots must be 0 or more and below the concurrency ({concurrency})"
        )
    return share


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Worker:
    def __init__(
        self,
        engine: Engine,
        *,
        owner: str | None = None,
        concurrency: int = 64,
        lease_seconds: float = 30.0,
        poll_interval: float = 1.0,
        timer_batch: int = 500,
        partitions: Sequence[int] | None = None,
        of: int | None = None,
        membership: bool = False,
        heartbeat_interval: float | None = None,
        fair_share: bool = True,
        max_per_tenant: int | None = None,
        tenant_weights: Mapping[str, float] | None = None,
        reserved_slots: int | None = None,
    ) -> None:
        self.engine = engine
        self.capabilities = capabilities(engine.store)  # what this store can do beyond the contract
        self.owner = owner or _default_owner()
        self.concurrency = concurrency
        # Fair share between tenants (module docstring); a cap implies the fair claim.
        self.fair_share = fair_share or max_per_tenant is not None or bool(reserved_slots)
        self.max_per_tenant = max_per_tenant
        self.tenant_weights = dict(tenant_weights or {})
        self.reserved_slots = _reserved_share(concurrency, reserved_slots) if self.fair_share else 0
        ceiling = max_per_tenant
        if self.reserved_slots:  # no tenant fills the slots kept for the others
            ceiling = min(ceiling or concurrency, concurrency - self.reserved_slots)
        self.shares = TenantShares(engine.store, weights=tenant_weights, ceiling=ceiling)
        self.claimer = FairClaimer(engine.store, self.shares) if self.fair_share else None
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.timer_batch = timer_batch
        self.heartbeat_interval = heartbeat_interval or lease_seconds / 3
        self.membership = membership
        self.members: list[str] = []
        self.partitions, self.of = partition_setup(engine.store, partitions, of, membership)
        self.coverage_problems: list[str] = []  # what the live workers leave unclaimed
        self.committer = GroupCommitter(engine.store, solo=lambda: len(self.runners) <= 1)
        self.schedules = Schedules(engine)
        self.runners: dict[ExecutionKey, ExecutionRunner] = {}  # by (tenant, id)
        self.stats = WorkerStats()
        self._tasks: dict[ExecutionKey, asyncio.Task[None]] = {}
        self._ended = 0  # runner tasks ended so far (run_until_idle looks again after one)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poke: asyncio.Event | None = None
        self._stopping = False
        self._store_retries: int | None = None  # None: resume after store failures forever
        self._joined = False
        self._orphans: set[ExecutionKey] = set()
        secrets = engine.secrets
        # the outbox of webhook deliveries (`wovyr.platform.webhooks`), delivered by `run`
        self.outbox = Dispatcher(
            store=engine.store,
            clock=engine.clock,
            send=post_signed,
            policy_for=lambda tenant: engine.for_tenant(tenant).side_effect_policy(),
            secret=None if secrets is None else secrets.resolve_secret,
            lease_seconds=lease_seconds,  # a worker killed mid-delivery: sent again after it
        )

    @property
    def mode(self) -> str:
        """How this worker chooses what to claim, as the other workers see it."""
        if self.membership:
            return "member"
        return "all" if self.partitions is None else "fixed"

    # --- wiring --------------------------------------------------------------------------

    def _attach(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._poke = asyncio.Event()
            self.engine.add_listener(self._on_change)

    def _on_change(self, tenant: str, execution_id: str) -> None:
        call_from_thread(self._loop, self._changed, (tenant, execution_id))

    def _changed(self, key: ExecutionKey) -> None:
        runner = self.runners.get(key)
        if runner is not None:
            runner.wake()
            return
        if self.claimer is not None:
            self.claimer.hint(key[0])  # its tenant may have work now
        if self._poke is not None:
            self._poke.set()

    def _work_arrived(self) -> None:
        """Called from the listener thread: wake the idle loop."""
        poke = self._poke
        if poke is not None:
            call_from_thread(self._loop, poke.set)

    async def close(self) -> None:
        await self.shutdown(grace_seconds=0)

    # --- starting and driving ------------------------------------------------------------

    async def start(
        self,
        definition: Workflow | str | None = None,
        input: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        path: Path | None = None,
        execution_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        priority: int | None = None,
    ) -> ExecutionRecord:
        """Start an execution leased to this worker and begin driving it (one commit); what
        to start is named as for `Engine.start`."""
        self._attach()
        start = functools.partial(
            self.engine.start,
            definition,
            input,
            name=name,
            version=version,
            path=path,
            execution_id=execution_id,
            lease_owner=self.owner,
            lease_seconds=self.lease_seconds,
            labels=labels,
            priority=priority,
        )
        # Alone, a thread hop costs more than it saves; busy, keep the loop responsive.
        record = start() if not self.runners else await asyncio.to_thread(start)
        if record.lease_owner == self.owner and record.key not in self.runners:
            self._spawn(self._record_runner(record, adopt=True))
        return record

    def _runner(
        self,
        execution_id: str,
        fence: int,
        checkpoint: dict[str, Any],
        digest: str,
        tenant: str,
        *,
        adopt: bool = False,
    ) -> ExecutionRunner:
        runner = ExecutionRunner(
            services_for(self.engine.for_tenant(tenant)),
            self.committer,
            execution_id,
            fence,
            state_from_json(checkpoint),
            self.engine.definition(digest, tenant),
            adopt_running=adopt,
            owner=self.owner,
        )
        self.runners[(tenant, execution_id)] = runner
        return runner

    def _record_runner(self, record: ExecutionRecord, *, adopt: bool = False) -> ExecutionRunner:
        """`_runner` for a stored execution, from its checkpoint."""
        return self._runner(
            record.id,
            record.fence,
            record.checkpoint or {},
            record.definition_hash,
            record.tenant,
            adopt=adopt,
        )

    def _spawn(self, runner: ExecutionRunner) -> None:
        """Drive `runner` (registered by `_runner`) in a task of its own."""
        key = (runner.services.tenant, runner.execution_id)
        task = asyncio.create_task(self._drive(runner), name=f"wovyr-run-{runner.execution_id}")
        self._tasks[key] = task

        def done(_: asyncio.Task[None]) -> None:
            self.runners.pop(key, None)
            self._tasks.pop(key, None)
            self._ended += 1
            if self._poke is not None:
                self._poke.set()

        task.add_done_callback(done)

    async def _drive(self, runner: ExecutionRunner) -> None:
        """Drive one execution; after a store failure, resume from what the store holds
        (forever in `run`; `run_until_idle` gives up after a few failures and raises)."""
        delay = _BACKOFF_START
        failures = 0
        while True:
            try:
                await runner.drive()
                return
            except StoreError as exc:  # e.g. a commit whose outcome is unknown
                self.stats.store_errors += 1
                failures += 1
                if self._store_retries is not None and failures > self._store_retries:
                    raise
                log.warning(
                    "execution %s: the store failed (%s); resuming", runner.execution_id, exc
                )
            except Exception:  # a bug: leave the lease; a later heartbeat adopts it again
                log.exception("execution %s: the runner failed", runner.execution_id)
                return
            resumed = await self._resume(runner, delay)
            if resumed is None:
                return
            runner, delay = resumed, min(delay * 2, _BACKOFF_MAX)

    async def _resume(self, runner: ExecutionRunner, delay: float) -> ExecutionRunner | None:
        """A fresh runner from the stored checkpoint, if the lease is still ours (else None)."""
        while not self._stopping:
            await asyncio.sleep(delay)
            try:
                record = await self.committer.run_sync(
                    self.engine.store.load, runner.execution_id, runner.services.tenant
                )
            except StoreError:
                delay = min(delay * 2, _BACKOFF_MAX)
                continue
            if record is None or record.lease_owner != self.owner or record.fence != runner.fence:
                return None  # finished and released, or taken over: nothing left to do here
            self.stats.resumed += 1
            return self._record_runner(record)
        return None

    def _claim_filter(self, only: list[str] | None) -> dict[str, Any] | None:
        """The claim's partition arguments; None when there is nothing ours to claim."""
        if only is not None or self.partitions is None:
            return {}
        if not self.partitions:
            return None
        return {"partitions": self.partitions, "of": self.of}

    def _claim_call(
        self, capacity: int, only: list[str] | None, where: dict[str, Any]
    ) -> Callable[[], list[Claim]]:
        """The claim this round makes: fair (`FairClaimer`, told the slots each tenant
        holds here) unless fair share is off or the claim is for `only` some executions."""
        now = self.engine.clock.now()
        ask = ClaimAsk(
            self.owner, now, self.lease_seconds, capacity, only, tenant=self.engine.tenant, **where
        )
        if self.claimer is not None and only is None:
            held = Counter(tenant for tenant, _ in self.runners)
            return functools.partial(self.claimer.claim, ask, held)
        return functools.partial(self.engine.store.claim, ask)

    async def tick(self, only: list[str] | None = None) -> int:
        """Fire due timers and schedules, then claim what is runnable (up to capacity);
        `only`: just those executions of this worker's engine's tenant."""
        self._attach()
        if self.capabilities.membership is not None and not self._joined and only is None:
            await self.rebalance()
        fired = await asyncio.to_thread(self.engine.fire_due_timers, self.timer_batch)
        if only is None:
            fired += await asyncio.to_thread(self.schedules.dispatch_due)
        capacity = self.concurrency - len(self.runners)
        where = self._claim_filter(only)
        claimed = 0
        if capacity > 0 and not self._stopping and where is not None:
            claim = self._claim_call(capacity, only, where)
            for c in await self.committer.run_sync(claim):
                runner = self.runners.get(c.key)
                if runner is not None:
                    # Our own lease had expired (a missed heartbeat) and we took it again.
                    # Nobody else held it when our claim alone moved the fence: whatever
                    # the log gained meanwhile (a signal, or this runner's own commit whose
                    # answer it has yet to read) the runner's next commit meets as any
                    # moved sequence, reloading. Only another owner in between stops it.
                    if c.seq == runner.seq or c.fence == runner.fence + 1:
                        runner.fence = c.fence  # carry on
                    else:
                        runner.lease_lost()  # another held it: stop; a heartbeat adopts
                    continue
                self._spawn(
                    self._runner(c.execution_id, c.fence, c.checkpoint, c.definition_hash, c.tenant)
                )
                claimed += 1
        self.stats.claimed += claimed
        return fired + claimed

    async def run_until_idle(
        self,
        only: list[str] | Callable[[], list[str]] | None = None,
        store_retries: int = 3,
    ) -> None:
        """Drive until nothing is runnable now: no due timer, no claimable execution. A store
        that keeps failing (a full disk) raises its StoreError after `store_retries` resumes
        instead of retrying forever; the execution stays leased for a later worker. `only`
        may be a function, asked again before every claim: a set of executions that grows
        while they run (a foreground run and the children it starts)."""
        self._attach()
        self._store_retries = store_retries
        try:
            while True:
                # A runner that ends while the tick looks (its last commit made a timer due
                # or an execution ready after the tick read) means: look again.
                ended = self._ended
                did = await self.tick(only() if callable(only) else only)
                if self._tasks:
                    done, _ = await asyncio.wait(
                        list(self._tasks.values()), return_when=asyncio.FIRST_COMPLETED
                    )
                    failed = [t.exception() for t in done if not t.cancelled() and t.exception()]
                    if failed:
                        raise failed[0]  # type: ignore[misc]
                    continue
                if not did and self._ended == ended:
                    return
        finally:
            self._store_retries = None

    async def run(self, stop: asyncio.Event | None = None, *, grace_seconds: float = 10.0) -> None:
        """Work until `stop` is set: claim, drive, fire timers, heartbeat; then shut down.

        A store failure does not end the loop: the worker backs off (up to 2 s) and retries.
        """
        self._attach()
        assert self._poke is not None
        stop = stop or asyncio.Event()
        listener = None
        notifying = self.capabilities.notifications
        if notifying is not None:
            # Listen before the first claim, so nothing announced after it is missed.
            with contextlib.suppress(Exception):  # the store is down: the thread retries
                await asyncio.to_thread(notifying.wait_for_work, 0)
            listener = WorkListener(notifying.wait_for_work, self._work_arrived)
            listener.start()
        heartbeat = asyncio.create_task(self._heartbeat_loop())
        outbox = asyncio.create_task(self._outbox_loop())
        delay = _BACKOFF_START
        try:
            while not stop.is_set():
                self._poke.clear()  # before the claim: work announced during it is not missed
                looked = self.engine.clock.now()
                try:
                    did = await self.tick()
                except StoreError as exc:
                    self.stats.store_errors += 1
                    log.warning("worker %s: the store failed (%s); retrying", self.owner, exc)
                    await self._idle(stop, delay, engine_clock=False)
                    delay = min(delay * 2, _BACKOFF_MAX)
                    continue
                delay = _BACKOFF_START
                if not did:
                    # The poll counts from when this look began: if the clock passed a due
                    # time while we looked (a timer, a schedule), look again at once.
                    spent = (self.engine.clock.now() - looked).total_seconds()
                    await self._idle(stop, self.poll_interval - spent)
        finally:
            for task in (heartbeat, outbox):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if listener is not None:
                await asyncio.to_thread(listener.stop)
            await self.shutdown(grace_seconds)

    async def _idle(
        self, stop: asyncio.Event, seconds: float, *, engine_clock: bool = True
    ) -> None:
        """Wait for a poke (work arrived, a runner ended), `stop`, or `seconds` (the poll)."""
        assert self._poke is not None
        nap = self.engine.clock.sleep(seconds) if engine_clock else asyncio.sleep(seconds)
        waiters = [
            asyncio.create_task(self._poke.wait()),
            asyncio.create_task(stop.wait()),
            asyncio.create_task(nap),
        ]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    # --- heartbeats, membership ----------------------------------------------------------

    async def heartbeat(self) -> None:
        """Renew every lease we hold; wake runners whose execution moved, stop lost ones,
        adopt leases held with no runner; with membership, recompute our partitions."""
        leases = await self.committer.run_sync(
            self.engine.store.renew_leases, self.owner, self.engine.clock.now(), self.lease_seconds
        )
        for key, runner in list(self.runners.items()):
            lease = leases.get(key)
            if lease is None or lease.fence != runner.fence:
                runner.lease_lost()
            elif lease.seq != runner.seq:
                runner.wake()
        await self._adopt_orphans(leases)
        if self.capabilities.membership is not None:
            await self.rebalance()

    async def _adopt_orphans(self, leases: dict[ExecutionKey, LeaseState]) -> None:
        """A lease we hold but nobody drives (a claim that applied although its answer was
        lost, a runner that failed) would be renewed forever: drive it. Only a lease seen
        runner-less on two heartbeats in a row counts, so a start in flight is left alone."""
        orphans = {key for key in leases if key not in self.runners}
        adopt, self._orphans = orphans & self._orphans, orphans - self._orphans
        for tenant, execution_id in sorted(adopt):
            record = await self.committer.run_sync(self.engine.store.load, execution_id, tenant)
            if (
                record is None
                or record.key in self.runners
                or record.lease_owner != self.owner
                or record.fence != leases[(tenant, execution_id)].fence
            ):
                continue
            self.stats.adopted += 1
            log.warning(
                "worker %s: adopting execution %s of tenant %s", self.owner, execution_id, tenant
            )
            self._spawn(self._record_runner(record))

    async def rebalance(self) -> list[int]:
        """Tell the other workers we are alive and how we claim; with membership, recompute
        our partitions from the live members. Then check that the live workers together
        claim every partition (and agree on their count)."""
        store = self.capabilities.membership
        assert store is not None, "rebalance needs a store that keeps worker membership"
        me = peer(self.owner, self.mode, self.partitions, self.of)
        try:
            peers = await self.committer.run_sync(
                store.worker_heartbeat, me, self.engine.clock.now(), self.lease_seconds
            )
        except StoreError as exc:
            if self.membership:
                raise  # no share of the partitions without it
            # Only the coverage check needs it: claiming goes on, the next beat retries.
            log.warning("worker %s: could not report to the other workers: %s", self.owner, exc)
            return list(self.partitions or ())
        self._joined = True
        self.coverage_problems = report_coverage(self.owner, self.coverage_problems, peers)
        if not self.membership:
            return list(self.partitions or ())
        assert self.of is not None
        members = [p.owner for p in peers if p.mode == "member"]
        mine = assign_partitions(members, self.owner, self.of)
        if mine != self.partitions:
            self.stats.rebalances += 1
            log.info("worker %s: partitions %s of %s", self.owner, mine, self.of)
            if self._poke is not None:
                self._poke.set()  # claim from the new partitions now
        self.members, self.partitions = members, mine
        return mine

    async def _heartbeat_loop(self) -> None:
        while True:
            await self.engine.clock.sleep(self.heartbeat_interval)
            try:
                await self.heartbeat()
            except Exception as exc:  # a failed renewal is retried next beat
                self.stats.store_errors += 1
                log.warning("worker %s: heartbeat failed: %s", self.owner, exc)

    async def _outbox_loop(self) -> None:
        """Deliver the webhook outbox: at once while there is more, else every poll."""
        while True:
            try:
                sent = await self.outbox.dispatch_due()
            except Exception as exc:  # the store is down: the next look retries
                log.warning("worker %s: webhook dispatch failed: %s", self.owner, exc)
                sent = 0
            if not sent:
                await self.engine.clock.sleep(self.poll_interval)

    async def shutdown(self, grace_seconds: float = 10.0) -> None:
        """Stop claiming, let in-flight work finish for `grace_seconds`, release leases,
        leave the membership."""
        self._stopping = True
        if self._tasks and grace_seconds > 0:
            await asyncio.wait(list(self._tasks.values()), timeout=grace_seconds)
        for task in list(self._tasks.values()):
            task.cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await self.committer.run_sync(self.engine.store.release_owner, self.owner)
        members = self.capabilities.membership
        if self._joined and members is not None:
            with contextlib.suppress(Exception):
                await self.committer.run_sync(members.member_leave, self.owner)
        self.engine.remove_listener(self._on_change)
        self.committer.close()


def services_for(engine: Engine) -> RunnerServices:
    """What a runner acting for `engine`'s tenant works with: the engine's parts and the
    operations it asks of it (the one place that reads them off an engine)."""
    return RunnerServices(
        tenant=engine.tenant,
        store=engine.store,
        clock=engine.clock,
        tracer=engine.tracer,
        activities=engine.activities,
        secrets=engine.secrets,
        providers=engine.providers,
        credentials=engine.credentials,
        shell_sandbox=engine.shell_sandbox,
        default_timeout=engine.default_timeout,
        max_payload_bytes=engine.max_payload_bytes,
        tenant_policy=engine.tenant_policy,
        start_child=engine.start_child,
        start_tool_child=engine.start_tool_child,
        named=engine.named,
        value_limits=engine.value_limits,
        max_items=engine.max_items,
        max_recoveries=engine.max_recoveries,
        commit_step=engine.commit_step,
        continuation=engine.continuation,
        notify=engine.notify,
        quotas=engine.quotas,
        model_quota_exhausted=engine.model_quota_exhausted,
        quota_hold=engine.quota_hold,
        continue_hold=engine.continue_hold,
        attempt_debits=engine.attempt_debits,
        model_debits=engine.model_debits,
        stored_debits=engine.stored_debits,
    )
