"""Drives one execution that this worker holds a lease on.

The loop: fold the results that came in, `decide`, commit the events (results, what they
unblock, and the next attempts' `ActivityStarted`) in ONE step, then start those attempts.
A commit refused for a moved sequence (a signal, a cancel, a fired timer) reloads the state
and tries again with the same results; a lost lease stops everything and commits nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from wovyr.activities.base import ActivityContext, ActivityError
from wovyr.activities.failures import handler_traceback
from wovyr.activities.kinds import AwaitApproval, ChildStarted, Dispatch
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ModelAccess
from wovyr.activities.redact import scrub, secret_forms
from wovyr.definition.expr import secret_names, substitute_secrets
from wovyr.definition.model import Activity, CompensateSpec, Workflow
from wovyr.engine.core.decide import Decision, Outcome, RunActivity, decide, outcome_events
from wovyr.engine.core.policy import children_to_cancel, spec_of
from wovyr.engine.core.state import (
    ActivityStatus,
    ExecutionState,
    ExecutionStatus,
    fold,
    state_from_json,
)
from wovyr.engine.steps import make_step
from wovyr.errors import ActivityNotRegistered, KmsError, NotFound, WovyrError
from wovyr.events import Event, EventData
from wovyr.platform.mcp import tenant_mcp_access
from wovyr.platform.providers import tenant_providers
from wovyr.store.base import CommitOutcome
from wovyr.store.codec import PayloadRefused, check_payload

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine
    from wovyr.worker.commit import GroupCommitter

__all__ = ["ExecutionRunner", "RunnerStats"]

#: The kinds that call model providers: their attempts see the tenant's stored providers.
_MODEL_KINDS = frozenset({"llm", "agent"})


def _calls_mcp(kind: str, rendered: Any) -> bool:
    """Does this attempt call MCP servers: an `mcp` step, or an agent naming `mcp:` tools."""
    if kind == "mcp":
        return True
    if kind != "agent" or not isinstance(rendered, dict):
        return False
    tools = rendered.get("tools")
    return isinstance(tools, list) and any(
        isinstance(t, str) and t.startswith("mcp:") for t in tools
    )


@dataclass
class RunnerStats:
    commits: int = 0
    conflicts: int = 0
    attempts: int = 0
    lease_lost: bool = False
    activity_seconds: list[float] = field(default_factory=list)


class ExecutionRunner:
    def __init__(
        self,
        engine: Engine,
        committer: GroupCommitter,
        execution_id: str,
        fence: int,
        state: ExecutionState,
        definition: Workflow,
        *,
        adopt_running: bool = False,
    ) -> None:
        self.engine = engine
        self.committer = committer
        self.execution_id = execution_id
        self.fence = fence
        self.state = state
        self.definition = definition
        self.stats = RunnerStats()
        # Set by a finished attempt, an outside change or a lost lease: one event, no task
        # per wait. `_changed` says whether the store moved under us (reload before deciding).
        self._ready = asyncio.Event()
        self._changed = False
        self._lost = False
        self._tasks: dict[str, tuple[RunActivity, asyncio.Task[Outcome]]] = {}
        self._results: list[tuple[RunActivity, Outcome]] = []
        self._adopt = adopt_running
        self._unbilled = 0.0  # seconds of finished attempts no commit has debited yet
        # (activity, compensation) -> the spec's secret references (kinds that read them)
        self._secret_refs: dict[tuple[str, bool], tuple[Any, list[str]]] = {}
        # sub-steps running attempts asked to record (an agent's calls): committed by the loop
        self._journal: list[tuple[RunActivity, tuple[EventData, ...], asyncio.Future[None]]] = []

    @property
    def seq(self) -> int:
        return self.state.seq

    def wake(self) -> None:
        """Something changed in the store (signal, cancel, timer): reload and decide again."""
        self._changed = True
        self._ready.set()

    def lease_lost(self) -> None:
        self._lost = self.stats.lease_lost = True
        self._ready.set()

    async def drive(self) -> None:
        try:
            if self._adopt:  # attempts recorded in the start commit are ours to run
                for run in _running_attempts(self.definition, self.state):
                    self._launch(run)
            await self._loop()
        finally:
            self._fail_journal()
            for _, task in self._tasks.values():
                task.cancel()
            for _, task in self._tasks.values():
                with contextlib.suppress(BaseException):
                    await task

    async def _loop(self) -> None:
        while not self._lost:
            now = self.engine.clock.now()
            working, events = self.state, []
            for run, outcome in self._results:
                produced = outcome_events(self.definition, working, run, outcome, now)
                working = fold(produced, working)
                events.extend(produced)
            recorded: list[asyncio.Future[None]] = []
            for run, datas, future in self._journal:
                if future.done():
                    continue
                a = working.activity(run.activity_id)
                if (
                    working.finished
                    or a.status != ActivityStatus.RUNNING
                    or a.attempt != run.attempt
                ):
                    future.set_exception(_not_current(run))
                    continue
                produced = [d.at(now) for d in datas]
                working = fold(produced, working)
                events.extend(produced)
                recorded.append(future)
            decision = decide(
                self.definition,
                working,
                now,
                frozenset(self._tasks),
                max_items=self.engine.max_items,
                max_recoveries=self.engine.max_recoveries,
            )
            if decision.runs:
                hold = await self._quota_hold(working)
                if hold is not None:  # the tenant's seconds are used up: no new attempt
                    decision = Decision(events=hold, state=fold(hold, working))
            assert decision.state is not None
            events.extend(decision.events)
            done = not self._tasks and not decision.runs
            if events or done:
                result = await self._commit(decision.state, events, done)
                if result is CommitOutcome.CONFLICT:
                    self.stats.conflicts += 1
                    self._reload()
                    continue
                if result is not CommitOutcome.OK:
                    self._lost = self.stats.lease_lost = result is CommitOutcome.LEASE_LOST
                    self._fail_journal()
                    return
                self.state = decision.state
                self._results.clear()
                for future in recorded:
                    future.set_result(None)
                self._journal = [j for j in self._journal if not j[2].done()]
            if done:
                return
            if self.state.finished:
                self._cancel_tasks()
                continue
            for run in decision.runs:
                self._launch(run)
            await self._wait()

    async def _commit(
        self, after: ExecutionState, events: list[Event], done: bool
    ) -> CommitOutcome:
        step = make_step(
            self.execution_id,
            self.state,
            after,
            events,
            self.engine.clock.now(),
            tenant=self.engine.tenant,
            fence=self.fence,
            ready=not done,
            release_lease=done,
        )
        billed = self._unbilled
        if billed:
            step = replace(step, debits=self.engine.attempt_debits(billed))
        if after.status == ExecutionStatus.CONTINUED and self.state.status != after.status:
            # the chain's next run is created by this very commit (one transaction)
            new = await asyncio.to_thread(self.engine.continuation, after, events)
            step = replace(step, continued_as=new)
        if (after.finished and after.parent) or children_to_cancel(events):
            # the parent is told, or timed-out children are cancelled, in the same transaction
            outcome = await self.committer.run_sync(self.engine.commit_step, step, after)
        else:
            outcome = await self.committer.commit(step)
        if outcome is CommitOutcome.OK:
            self._unbilled -= billed
            if step.continued_as is not None:
                self.engine.notify(step.continued_as.id)
        self.stats.commits += 1
        return outcome

    async def _quota_hold(self, state: ExecutionState) -> list[Event] | None:
        """The events holding this execution's next attempts while its tenant's activity
        seconds are used up today (`Engine.quota_hold`); None when they may start. A tenant
        without that quota costs no read."""
        if self.engine.quotas().activity_seconds_per_day is None:
            return None
        return await asyncio.to_thread(self.engine.quota_hold, state, self._unbilled)

    def _reload(self) -> None:
        record = self.engine.store.load(self.execution_id, self.engine.tenant)
        if record is None or record.fence != self.fence:
            self._lost = True
            return
        self.state = state_from_json(record.checkpoint or {})
        if self.state.finished:
            self._cancel_tasks()

    def record(self, run: RunActivity, datas: tuple[EventData, ...]) -> asyncio.Future[None]:
        """Ask the loop to commit the sub-step events of the running attempt `run`."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._journal.append((run, datas, future))
        self._ready.set()
        return future

    def _fail_journal(self) -> None:
        for run, _, future in self._journal:
            if not future.done():
                future.set_exception(_not_current(run))
        self._journal.clear()

    def _cancel_tasks(self) -> None:
        for _, task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    def _launch(self, run: RunActivity) -> None:
        task = asyncio.create_task(self._timed(run))
        task.add_done_callback(self._attempt_done)
        self._tasks[run.key] = (run, task)

    async def _timed(self, run: RunActivity) -> Outcome:
        """Run the attempt; its seconds (by the engine's clock) are debited by the next
        commit (the tenant's activity-seconds quota)."""
        started = self.engine.clock.now()
        try:
            return await self._execute(run)
        finally:
            self._unbilled += (self.engine.clock.now() - started).total_seconds()

    def _attempt_done(self, _: asyncio.Task[Outcome]) -> None:
        self._ready.set()

    async def _wait(self) -> None:
        """Until an attempt finishes or the store changes; collect what finished."""
        if not self._tasks:
            return
        await self._ready.wait()
        self._ready.clear()
        for key, (run, task) in list(self._tasks.items()):
            if task.done():
                del self._tasks[key]
                if not task.cancelled():
                    self._results.append((run, task.result()))
        if self._changed:
            self._changed = False
            if not self._lost:
                self._reload()

    # --- running one attempt -------------------------------------------------------------

    async def _execute(self, run: RunActivity) -> Outcome:
        forms: list[str] = []
        outcome = await self._attempt(run, forms)
        if forms and outcome.error is not None:  # an error never repeats a secret's value
            outcome = replace(outcome, error=scrub(outcome.error, forms))
        return outcome

    async def _with_secrets(
        self, spec: Activity | CompensateSpec, run: RunActivity
    ) -> tuple[Any, list[str]]:
        """The attempt's input with the secrets its spec references resolved (a copy: the
        stored input keeps the references), and the forms of their values to scrub."""
        key = (run.activity_id, run.compensation)
        known = self._secret_refs.get(key)
        if known is None:
            template = spec_of(spec)
            known = self._secret_refs[key] = (template, secret_names(template))
        template, names = known
        if not names:
            return run.input, []
        resolver = self.engine.secrets
        if resolver is None:
            raise ActivityError(
                "this activity references secrets, and this engine has none configured",
                type="SecretsUnavailable",
                retryable=False,
            )
        tenant = self.engine.tenant
        values: dict[str, str] = {}

        def resolve() -> None:
            for name in names:
                try:
                    values[name] = resolver.resolve_secret(tenant, name)
                except KmsError as exc:
                    raise ActivityError(
                        f"secret {name!r} cannot be read: {exc.message}",
                        type="SecretUnreadable",
                        retryable=False,
                    ) from None
                except NotFound:
                    raise ActivityError(
                        f"secret {name!r} is not set for tenant {tenant!r}",
                        type="SecretNotFound",
                        retryable=False,
                    ) from None

        await asyncio.to_thread(resolve)
        given = substitute_secrets(template, run.input, values.__getitem__)
        return given, secret_forms(values.values())

    async def _attempt(self, run: RunActivity, forms: list[str]) -> Outcome:
        act = self.definition.activity(run.activity_id)
        spec: Activity | CompensateSpec = act
        if run.compensation:
            assert act.compensate is not None
            spec = act.compensate
        name = run.activity_id if run.index is None else f"{run.activity_id}[{run.index}]"
        if run.iteration > 1:  # an iteration of a `repeat`: its attempts are its own
            name = f"{name}~{run.iteration}"
        suffix = "/compensate" if run.compensation else ""
        ctx = ActivityContext(
            execution_id=self.execution_id,
            activity_id=run.activity_id,
            attempt=run.attempt,
            workflow=self.definition.name,
            idempotency_key=f"{self.execution_id}/{name}{suffix}/{run.attempt}",
        )
        self.stats.attempts += 1
        # every attempt has a deadline: the definition's, else the engine's default
        timeout = spec.timeout or self.engine.default_timeout
        policy = TRUSTED  # what a kind without side effects is handed (it never looks)
        if spec.kind_entry.side_effects:  # read for every attempt: a tightening applies now
            # (outside the `try`: a store that cannot answer loses the attempt, which is
            # run again, rather than failing the activity)
            policy = await asyncio.to_thread(self.engine.side_effect_policy)
        try:
            execute = spec.kind_entry.execute
            if execute is None:
                raise ActivityError(
                    f"activity kind {spec.kind!r} is settled by the decider, not run",
                    retryable=False,
                )

            async def start_child() -> str:
                return await asyncio.to_thread(self.engine.start_child, self.state, run)

            providers = self.engine.providers
            if spec.kind in _MODEL_KINDS:  # the tenant's stored providers, read for this attempt
                providers = await asyncio.to_thread(
                    tenant_providers, self.engine.store, self.engine.tenant, providers
                )
            models = ModelAccess(
                self.engine.tenant,
                providers,
                self.engine.credentials,
                _TenantCache(self.engine),
            )
            mcp = None
            if _calls_mcp(spec.kind, run.input):  # the tenant's MCP servers, read for it
                mcp = await asyncio.to_thread(
                    tenant_mcp_access, self.engine.store, self.engine.tenant, self.engine.secrets
                )
            journal = None
            if run.index is None and not run.compensation:
                steps = self.state.activity(run.activity_id).journal
                journal = _AttemptJournal(self, run, steps)
            dispatch = Dispatch(
                ctx,
                timeout,
                self.engine.activities,
                start_child,
                policy,
                models=models,
                journal=journal,
                mcp=mcp,
            )
            given = run.input
            if spec.kind_entry.secrets:
                given, found = await self._with_secrets(spec, run)
                forms.extend(found)
            coro = execute(spec.step, given, dispatch)
            output = await asyncio.wait_for(coro, timeout)
            if isinstance(output, ChildStarted):
                return Outcome(child=output.execution_id)
            if isinstance(output, AwaitApproval):
                check_payload(
                    output.asked, "the approval asked", max_bytes=self.engine.max_payload_bytes
                )
                return Outcome(suspend=output.asked)
            # refuse what cannot be stored (too large, too deep, not JSON) as the failure
            check_payload(output, "the output", max_bytes=self.engine.max_payload_bytes)
            output = scrub(output, forms)  # a handler that echoes its input
        except TimeoutError:
            return Outcome(error={"type": "Timeout", "message": f"attempt exceeded {timeout}s"})
        except PayloadRefused as exc:
            return Outcome(error=_error(exc.type, exc.message), retryable=False)
        except ActivityError as exc:
            error = _error(exc.type, exc.message, exc.details, exc)
            return Outcome(error=error, retryable=exc.retryable, retry_after=exc.retry_after)
        except ActivityNotRegistered as exc:
            return Outcome(error=_error("ActivityNotRegistered", str(exc)), retryable=False)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TypeError) and "cannot store" in str(exc):
                return Outcome(error=_error("OutputNotSerializable", str(exc)), retryable=False)
            return Outcome(error=_error(type(exc).__name__, str(exc), exc=exc))
        except WovyrError as exc:
            return Outcome(error=_error(type(exc).__name__, str(exc), exc=exc), retryable=False)
        except Exception as exc:  # a handler's own exception: retried per the policy
            return Outcome(error=_error(type(exc).__name__, str(exc), exc=exc))
        return Outcome(output=output)


class _AttemptJournal:
    """The `Journal` of one attempt: the activity's recorded sub-steps, and a way to add."""

    def __init__(
        self, runner: ExecutionRunner, run: RunActivity, steps: tuple[dict[str, Any], ...]
    ) -> None:
        self._runner, self._run, self._steps = runner, run, steps

    @property
    def steps(self) -> tuple[dict[str, Any], ...]:
        return self._steps

    async def record(self, *events: EventData) -> None:
        await self._runner.record(self._run, events)


class _TenantCache:
    """The store's response cache, seen by one tenant (`ResponseCache`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def get(self, key: str) -> dict[str, Any] | None:
        return self._engine.store.get_cached_response(self._engine.tenant, key)

    def put(self, key: str, response: dict[str, Any]) -> None:
        now = self._engine.clock.now()
        self._engine.store.put_cached_response(self._engine.tenant, key, response, now)


def _not_current(run: RunActivity) -> ActivityError:
    return ActivityError(
        f"attempt {run.attempt} of {run.activity_id} is no longer current; nothing recorded",
        type="AttemptNotCurrent",
        retryable=False,
    )


def _running_attempts(definition: Workflow, state: ExecutionState) -> list[RunActivity]:
    """The attempts (activities and for_each items) the state says are running."""
    runs = []
    for aid, act in state.activities.items():
        kind = definition.activity(aid).kind
        if act.items is not None:
            runs += [
                RunActivity(aid, item["attempt"], kind, item.get("input"), index=i)
                for i, item in enumerate(act.items)
                if item["status"] == ActivityStatus.RUNNING
            ]
        elif act.status == ActivityStatus.RUNNING:
            runs.append(RunActivity(aid, act.attempt, kind, act.input))
    return runs


def _error(
    kind: str, message: str, details: Any = None, exc: BaseException | None = None
) -> dict[str, Any]:
    """The error of a failed attempt; `traceback` holds the handler's own frames of `exc`
    (capped; absent when the failure came from Wovyr, not from code of the user's)."""
    err: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        err["details"] = details
    trace = handler_traceback(exc) if exc is not None else None
    if trace is not None:
        err["traceback"] = trace
    return err
