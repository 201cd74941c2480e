"""The composition root: what the edges (the CLI, the server, its worker process) run
with, built from `Settings` in one place.

This is the only module that opens the configured store, wraps it in sealing, builds the
model providers, the credentials, the tracer and the shell sandbox, and loads the
activity modules (and applies the workflow functions they register); `Settings` is data
and builds nothing. The Python API builds engines
itself (`Engine(store, ...)`, `Engine.open(url)`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from wovyr.errors import ConfigError
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.activities.providers import Providers
    from wovyr.activities.sandbox import ShellSandbox
    from wovyr.engine.engine import Engine
    from wovyr.engine.reads import StoreReader
    from wovyr.engine.runtime import Runtime
    from wovyr.platform.secrets import Secrets
    from wovyr.traces import Tracer

__all__ = [
    "OTEL_DISTRIBUTIONS",
    "apply_code_workflows",
    "load_activities",
    "model_providers",
    "open_engine",
    "open_reader",
    "open_runtime",
    "shell_sandbox",
    "tracer",
    "with_secrets",
]

log = logging.getLogger("wovyr")


#: What tracing needs installed (the `otel` extra), looked up by distribution: finding a
#: module of a package would import the package (a command that only reads must not).
OTEL_DISTRIBUTIONS = ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http")


def _installed(distributions: tuple[str, ...]) -> bool:
    """Whether every one of `distributions` is installed (read from their metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        for name in distributions:
            version(name)
    except PackageNotFoundError:
        return False
    return True


def model_providers(settings: Settings) -> Providers:
    """The providers an engine may call (`default` when WOVYR_LLM_BASE_URL is set):
    `default` carries WOVYR_LLM_API_KEY bound to its base URL."""
    from wovyr.activities.providers import DEFAULT_PROVIDER, ProviderConfig, Providers

    if not settings.llm_base_url:
        return Providers()
    try:
        default = ProviderConfig(
            DEFAULT_PROVIDER,
            settings.llm_base_url,
            default_model=settings.llm_model,
            price_in=settings.llm_price_in,
            price_out=settings.llm_price_out,
            api_key=settings.llm_api_key or None,
            prices=settings.llm_prices,
        )
    except ValueError as exc:  # WOVYR_LLM_PRICES of a wrong form
        raise ConfigError(f"WOVYR_LLM_PRICES: {exc}") from None
    return Providers({DEFAULT_PROVIDER: default})


def shell_sandbox(settings: Settings) -> ShellSandbox:
    """What isolated shell steps do not see (the home and the SQLite store's directory)
    and whom they run as on a root worker."""
    from wovyr.activities.sandbox import ShellSandbox

    return ShellSandbox.of_host(settings.home, settings.store_url, settings.shell_user)


def tracer(settings: Settings) -> Tracer:
    """The tracing hooks: when tracing is on, OpenTelemetry's (`wovyr.platform.tracing`,
    imported on the first start or attempt and installed as the process's tracer
    provider), else the no-op."""
    from wovyr.traces import NO_TRACER, LazyTracer

    if not settings.otel:
        return NO_TRACER
    if not _installed(OTEL_DISTRIBUTIONS):
        raise ConfigError(
            "tracing is on (WOVYR_OTEL or OTEL_EXPORTER_OTLP_ENDPOINT), but the "
            "OpenTelemetry SDK and OTLP exporter are not installed",
            hint="pip install 'wovyr[otel]', or set WOVYR_OTEL=0",
        )
    endpoint, service = settings.otel_endpoint, settings.otel_service_name

    def build() -> Tracer:
        from wovyr.platform.tracing import OtelTracer

        return OtelTracer(endpoint, service_name=service, install=True)

    return LazyTracer(build)


def load_activities(settings: Settings) -> list[str]:
    """Import the activity modules the settings name (and the installed entry points); the
    names of those modules."""
    from wovyr.activities.base import ENTRY_POINT_GROUP, load_activity_modules

    return load_activity_modules(settings.activities, entry_point_group=ENTRY_POINT_GROUP)


def open_runtime(
    settings: Settings, *, db_clock: bool = True, activities: bool = True
) -> tuple[Runtime, Secrets]:
    """The runtime over the configured store, acting for `settings.tenant` (no actor),
    and the secrets it seals payloads with (the KMS of the home, loaded on first use).
    `db_clock`: lease times from the database's clock (PostgreSQL; `open_store`);
    `activities`: load the activity modules first."""
    from wovyr.engine.runtime import new_runtime
    from wovyr.platform.payloads import open_sealed
    from wovyr.platform.providers import SecretCredentials
    from wovyr.store import open_store

    modules = load_activities(settings) if activities else []
    providers = model_providers(settings)
    # sealing tenants' payloads are sealed with the KMS
    store, secrets = open_sealed(open_store(settings.store_url, db_clock=db_clock), settings.home)
    runtime = new_runtime(
        store,
        tenant=settings.tenant,
        providers=providers,
        credentials=SecretCredentials(secrets),  # tenants' stored providers
        secrets=secrets,
        default_timeout=settings.default_timeout,
        max_payload_bytes=settings.max_payload_bytes,
        max_execution_bytes=settings.max_execution_bytes,
        min_schedule_interval=settings.min_schedule_interval,
        min_continue_interval=settings.min_continue_interval,
        tracer=tracer(settings),
        shell_sandbox=shell_sandbox(settings),
    )
    if modules:
        apply_code_workflows(runtime, modules)
    return runtime, secrets


def apply_code_workflows(runtime: Runtime, modules: list[str]) -> list[str]:
    """Apply, for the runtime's tenant, the workflow functions (`@wovyr.workflow`) that
    the `modules` loaded for it define, so that they start by name (API, CLI, schedules,
    children) as applied YAML definitions do; what each apply answered. A function changed
    under a name and version applied before is not applied again (its version must change,
    as a YAML document's must): the refusal is logged, and this process still replays the
    running executions of that name and version with the function it loaded."""
    from wovyr.code.workflow import registered

    ours = [wf for wf in registered() if wf.fn.__module__ in modules]
    if not ours:
        return []
    from wovyr.engine.definitions import Definitions
    from wovyr.errors import DefinitionConflict

    definitions, answers = Definitions(runtime), []
    for wf in ours:
        try:
            answers.append(definitions.apply(wf.definition())[0])
        except DefinitionConflict as exc:
            log.warning("workflow function %s: %s", wf.function, exc)
            answers.append("conflict")
    return answers


def open_reader(settings: Settings) -> StoreReader:
    """What reads alone go through (`wovyr workflows show|list|history`): the configured
    store, its tenants' payloads opened with the KMS as `open_runtime`'s are, read for
    `settings.tenant`. No engine, activity module, provider or tracer is built, so a read
    loads neither the engine nor the workflow language (`wovyr.engine.reads`). Close its
    `store` when done."""
    from wovyr.engine.reads import StoreReader
    from wovyr.platform.payloads import open_sealed
    from wovyr.store import open_store

    store, _ = open_sealed(open_store(settings.store_url), settings.home)
    return StoreReader(store, settings.tenant)


def open_engine(settings: Settings, *, db_clock: bool = True, activities: bool = True) -> Engine:
    """The engine of `open_runtime`."""
    from wovyr.engine.engine import Engine

    return Engine.over(open_runtime(settings, db_clock=db_clock, activities=activities)[0])


def with_secrets(engine: Engine, secrets: Secrets) -> Engine:
    """`engine`, or the same engine (store, listeners, caches) resolving secrets with
    `secrets` when it has none, and tenants' stored providers' keys through them when it
    resolves only bound keys: what an app built over a bare engine serves with."""
    from wovyr.activities.providers import BoundCredentials
    from wovyr.engine.engine import Engine
    from wovyr.platform.providers import SecretCredentials

    runtime = engine.runtime
    if runtime.secrets is None:
        runtime = replace(runtime, secrets=secrets)
    if isinstance(runtime.credentials, BoundCredentials):
        runtime = replace(runtime, credentials=SecretCredentials(secrets))
    return engine if runtime is engine.runtime else Engine.over(runtime)
