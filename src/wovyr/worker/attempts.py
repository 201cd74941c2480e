"""Running one attempt: what it is handed, and what it ended with.

An attempt gets its context (ids, idempotency key, log, trace), its deadline, its tenant's
side-effect policy when its kind has side effects, its input with the secrets it references
resolved, and the services its kind declares (`ActivityKind.needs`), each assembled here
from the runner's `RunnerServices` and nothing else. It ends as an `Outcome` with its
`Usage` (`wovyr.worker.outcomes`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

import wovyr.activities.builtin  # noqa: F401  (registers what runs the built-in kinds)
from wovyr.activities.base import ActivityContext, ActivityError, key_scope
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import KINDS, ChildTools, Journal, StreamSink, Usage, WorkflowTool
from wovyr.activities.logs import AttemptLog, bind
from wovyr.activities.mcp import McpAccess
from wovyr.activities.memory import MemoryAccess
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ModelAccess, Providers
from wovyr.activities.redact import MIN_SCRUBBED, scrub, secret_forms
from wovyr.definition.expr import secret_names, substitute_secrets
from wovyr.definition.inputs import inputs_json_schema
from wovyr.definition.model import Activity, CompensateSpec, Workflow
from wovyr.engine.core.decide import Outcome, RunActivity
from wovyr.engine.core.policy import spec_of
from wovyr.engine.core.state import ExecutionState
from wovyr.engine.memory import TenantMemory
from wovyr.engine.tenants import TenantPolicy
from wovyr.errors import KmsError, NotFound
from wovyr.events import EventData
from wovyr.platform.mcp import tenant_mcp_access
from wovyr.platform.providers import tenant_providers
from wovyr.traces import TraceContext
from wovyr.worker.outcomes import ended, failed, span_status
from wovyr.worker.services import RunnerServices
from wovyr.worker.streams import AttemptStream, StreamJournal

__all__ = ["Attempts", "Host"]


class Host(Protocol):
    """The runner an attempt belongs to: the execution's state as it stands, and the way
    to commit an attempt's sub-steps."""

    @property
    def state(self) -> ExecutionState: ...

    def record(self, run: RunActivity, datas: tuple[EventData, ...]) -> asyncio.Future[None]: ...


class Attempts:
    """Runs the attempts of one execution (held by its runner under `fence`)."""

    def __init__(
        self,
        services: RunnerServices,
        definition: Workflow,
        execution_id: str,
        fence: int,
        host: Host,
    ) -> None:
        self.services = services
        self.definition = definition
        self.execution_id = execution_id
        self.fence = fence
        self.host = host
        # (activity, compensation) -> the spec's secret references (kinds that read them)
        self._secret_refs: dict[tuple[str, bool], tuple[Any, list[str]]] = {}
        self._stream: StreamJournal | None = None  # what model calls stream (made when used)

    async def run(self, run: RunActivity) -> tuple[Outcome, Usage]:
        """Run one attempt: its outcome, and what it used (its seconds by the engine's
        clock, the model usage its output records)."""
        clock = self.services.clock
        started = clock.now()
        outcome, used = await self._traced(run)
        return outcome, Usage((clock.now() - started).total_seconds(), used.tokens, used.cost)

    async def _traced(self, run: RunActivity) -> tuple[Outcome, Usage]:
        forms: list[str] = []
        log = AttemptLog(forms=forms)
        tenant = self.services.tenant
        # the attempt's span, a child of the context its execution's start recorded
        with self.services.tracer.attempt(
            self.host.state.trace,
            tenant=tenant,
            execution_id=self.execution_id,
            workflow=self.definition.name,
            activity=run.activity_id,
            attempt=run.attempt,
            kind=run.kind,
            index=run.index,
            compensation=run.compensation,
        ) as span:
            with bind(
                execution_id=self.execution_id,
                activity_id=run.activity_id,
                attempt=run.attempt,
                tenant=tenant,
                forms=forms,
                log=log,
            ):
                outcome, used = await self._attempt(run, forms, log, span.context)
            if forms and outcome.error is not None:  # an error never repeats a secret's value
                outcome = replace(outcome, error=scrub(outcome.error, forms))
            span.outcome(outcome.error, status=span_status(outcome))
        lines = log.kept()
        if lines:  # recorded with the attempt's result; nothing when it logged nothing
            outcome = replace(outcome, logs=scrub(lines, forms) if forms else lines)
        return outcome, used

    async def _attempt(
        self, run: RunActivity, forms: list[str], log: AttemptLog, trace: TraceContext | None
    ) -> tuple[Outcome, Usage]:
        act = self.definition.activity(run.activity_id)
        spec: Activity | CompensateSpec = act
        if run.compensation:
            assert act.compensate is not None
            spec = act.compensate
        name = run.activity_id if run.index is None else f"{run.activity_id}[{run.index}]"
        if run.iteration > 1:  # an iteration of a `repeat`: its attempts are its own
            name = f"{name}~{run.iteration}"
        suffix = "/compensate" if run.compensation else ""
        tenant = self.services.tenant
        ctx = ActivityContext(
            execution_id=self.execution_id,
            activity_id=run.activity_id,
            attempt=run.attempt,
            workflow=self.definition.name,
            idempotency_key=f"{key_scope(tenant)}{self.execution_id}/{name}{suffix}/{run.attempt}",
            log=log,
            tenant=tenant,
            traceparent=trace.get("traceparent") if trace else None,
            tracestate=trace.get("tracestate") if trace else None,
        )
        # every attempt has a deadline: the definition's, else the engine's default
        timeout = spec.timeout or self.services.default_timeout
        kind = KINDS.get(spec.kind)
        tenant_policy: TenantPolicy | None = None
        if kind.side_effects:  # read for every attempt: a tightening applies now
            # (outside the `try`: a store that cannot answer loses the attempt, which is
            # run again, rather than failing the activity)
            tenant_policy = await asyncio.to_thread(self.services.tenant_policy)
        calls: list[dict[str, Any]] = []  # the model calls its result event carries
        try:
            execute = kind.execute
            if execute is None:
                raise ActivityError(
                    f"activity kind {spec.kind!r} is settled by the decider, not run",
                    retryable=False,
                )
            dispatch = await self._dispatch(spec, run, ctx, timeout, tenant_policy, trace, name)
            if dispatch.models is not None:
                calls = dispatch.models.calls
            given = run.input
            if kind.secrets:
                given, found = await self._with_secrets(spec, run)
                forms.extend(found)
            # (in this task: `wait_for` would run the attempt in a task of its own)
            async with asyncio.timeout(timeout):
                result = await execute(spec.step, given, dispatch)
            outcome = ended(result, forms, self.services.max_payload_bytes)
        except Exception as exc:
            outcome = failed(exc, timeout, tenant_policy)
            # a failure after model calls (an answer that never matched its schema) says
            # what they used in its details: spent all the same
            details = (outcome.error or {}).get("details")
            used = kind.usage(details) if kind.usage and details else Usage()
            return _with_calls(outcome, calls), used
        outcome = _with_calls(outcome, calls)
        if kind.usage is None or outcome.error is not None:
            return outcome, Usage()
        return outcome, kind.usage(outcome.output)

    async def _dispatch(
        self,
        spec: Activity | CompensateSpec,
        run: RunActivity,
        ctx: ActivityContext,
        timeout: float,
        tenant_policy: TenantPolicy | None,
        trace: TraceContext | None,
        name: str,
    ) -> Dispatch:
        """What the attempt is handed: the services its kind declares for its input, each
        read for this attempt (the tenant's providers and MCP servers as they stand now).
        An activity's sub-steps (`journal`) and workflow tools (`child_tools`) belong to
        its own attempts, not to an item's or a compensation's; a compensation streams
        nothing."""
        s, state = self.services, self.host.state
        needs = KINDS.get(spec.kind).needs_of(run.input)
        whole = run.index is None and not run.compensation
        models: ModelAccess | None = None
        mcp: McpAccess | None = None
        journal: Journal | None = None
        stream: StreamSink | None = None
        child_tools: ChildTools | None = None
        memory: MemoryAccess | None = None
        start_child: Callable[[], Awaitable[str]] | None = None
        if "models" in needs:  # the tenant's stored providers, read for this attempt
            providers = await asyncio.to_thread(tenant_providers, s.store, s.tenant, s.providers)
            models = _models(s, providers)
        if "mcp_servers" in needs:  # the tenant's MCP servers, read for it
            mcp = await asyncio.to_thread(tenant_mcp_access, s.store, s.tenant, s.secrets)
        if whole and "journal" in needs:
            journal = _AttemptJournal(self.host, run, state.activity(run.activity_id).journal)
        if whole and "child_tools" in needs:
            child_tools = _ChildTools(s, self.host, run, trace)
        if "stream" in needs and not run.compensation:
            recovery = 0 if run.index is not None else state.activity(run.activity_id).recoveries
            stream = AttemptStream(self._stream_journal(), name, run.attempt, recovery)
        if "memory_namespaces" in needs:
            memory = MemoryAccess(s.tenant, TenantMemory(s.store, s.tenant, s.clock))
        if "start_child" in needs:

            async def child() -> str:
                # the child's start span is a child of this attempt's
                return await asyncio.to_thread(s.start_child, self.host.state, run, trace)

            start_child = child

        return Dispatch(
            ctx,
            timeout,
            s.activities,
            start_child,
            # what a kind without side effects is handed (it never looks)
            tenant_policy.policy if tenant_policy is not None else TRUSTED,
            models=models,
            journal=journal,
            stream=stream,
            child_tools=child_tools,
            mcp=mcp,
            memory=memory,
            sandbox=s.shell_sandbox if "sandbox" in needs else None,
        )

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
        resolver = self.services.secrets
        if resolver is None:
            raise ActivityError(
                "this activity references secrets, and this engine has none configured",
                type="SecretsUnavailable",
                retryable=False,
            )
        tenant = self.services.tenant
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
        for name, value in values.items():  # stored before secrets had a minimum length
            if len(value) < MIN_SCRUBBED:
                raise ActivityError(
                    f"secret {name!r} is too short to be masked where the step could echo it "
                    f"(under {MIN_SCRUBBED} characters): set a longer value (wovyr secrets "
                    f"set {name} --tenant {tenant})",
                    type="SecretTooShort",
                    retryable=False,
                )
        given = substitute_secrets(template, run.input, values.__getitem__)
        return given, secret_forms(values.values())

    def _stream_journal(self) -> StreamJournal:
        if self._stream is None:
            s = self.services
            self._stream = StreamJournal(s.store, s.clock, s.tenant, self.execution_id, self.fence)
        return self._stream


def _models(services: RunnerServices, providers: Providers) -> ModelAccess:
    """Model providers, their keys and the response cache, as the tenant sees them; its
    calls check the tenant's daily model quota first when it has one."""
    quotas = services.quotas()
    limited = quotas.model_tokens_per_day is not None or quotas.model_cost_per_day is not None
    return ModelAccess(
        services.tenant,
        providers,
        services.credentials,
        _TenantCache(services),
        artifacts=_TenantArtifacts(services),
        quota=services.model_quota_exhausted if limited else None,
        now=services.clock.now,
    )


def _with_calls(outcome: Outcome, calls: list[dict[str, Any]]) -> Outcome:
    """`outcome` with the model calls the attempt made (none: as it is)."""
    return replace(outcome, model_calls=list(calls)) if calls else outcome


class _AttemptJournal:
    """The `Journal` of one attempt: the activity's recorded sub-steps, and a way to add."""

    def __init__(self, host: Host, run: RunActivity, steps: tuple[dict[str, Any], ...]) -> None:
        self._host, self._run, self._steps = host, run, steps

    @property
    def steps(self) -> tuple[dict[str, Any], ...]:
        return self._steps

    async def record(self, *events: EventData) -> None:
        await self._host.record(self._run, events)


class _ChildTools:
    """Registered workflows as the tools of one attempt of an `agent` (`ChildTools`)."""

    def __init__(
        self, services: RunnerServices, host: Host, run: RunActivity, trace: TraceContext | None
    ) -> None:
        self._services, self._host, self._run, self._trace = services, host, run, trace

    def describe(self, workflow: str) -> WorkflowTool:
        found, _ = self._services.named(workflow, None)
        text = found.metadata.description or f"Run workflow {workflow!r}"
        return WorkflowTool(workflow, text, inputs_json_schema(found))

    async def start(self, workflow: str, inputs: Any, call: dict[str, Any]) -> str:
        return await asyncio.to_thread(
            self._services.start_tool_child,
            self._host.state,
            self._run.activity_id,
            workflow,
            inputs,
            call,
            self._trace,
        )


class _TenantCache:
    """The store's response cache, seen by one tenant (`ResponseCache`)."""

    def __init__(self, services: RunnerServices) -> None:
        self._services = services

    def get(self, key: str) -> dict[str, Any] | None:
        return self._services.store.get_cached_response(self._services.tenant, key)

    def put(self, key: str, response: dict[str, Any]) -> None:
        now = self._services.clock.now()
        self._services.store.put_cached_response(self._services.tenant, key, response, now)


class _TenantArtifacts:
    """The store's artifacts, seen by one tenant for one attempt (`ArtifactReader`): each
    read once (an agent sends its attachments with every model call)."""

    def __init__(self, services: RunnerServices) -> None:
        self._services = services
        self._read: dict[str, tuple[str, bytes] | None] = {}

    def read(self, digest: str) -> tuple[str, bytes] | None:
        if digest not in self._read:
            found = self._services.store.read_artifact(self._services.tenant, digest)
            self._read[digest] = None if found is None else (found[0].media_type, found[1])
        return self._read[digest]
