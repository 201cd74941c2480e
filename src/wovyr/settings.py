"""Frozen settings, read only at the edges (CLI and server): flags > WOVYR_* env > defaults.

Settings are data: they build nothing (`wovyr.assemble` builds what the edges run with from
them). The engine never reads the environment; it gets what it needs through its runtime.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wovyr import withheld
from wovyr.errors import ConfigError

__all__ = ["Settings", "load_settings"]


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path("~/.wovyr").expanduser())
    database_url: str | None = None
    activities: tuple[str, ...] = ()
    lease_seconds: float = 30.0
    poll_interval: float = 1.0
    concurrency: int = 64
    dispatch_interval: float = 2.0
    max_body_bytes: int = 1_048_576  # the HTTP API refuses larger request bodies (413)
    shutdown_grace: float = 10.0  # seconds in-flight activities get when the server stops
    default_timeout: float = 300.0  # seconds an attempt may take when its definition says not
    tenant: str = "default"  # the tenant CLI engine commands act for (--tenant, WOVYR_TENANT)
    max_payload_bytes: int = 2_097_152  # largest stored input, signal payload, output (JSON)
    max_execution_bytes: int = 33_554_432  # most one execution's checkpoint may hold (JSON)
    max_page_bytes: int = 4_194_304  # most JSON one page of the API (a detail, history) holds
    min_schedule_interval: float = 1.0  # the fewest seconds between two fires of a schedule
    # the fewest seconds between the starts of two runs of one continue-as-new chain (0: none)
    min_continue_interval: float = 1.0
    max_per_tenant: int | None = None  # slots of one worker one tenant may hold (fair share)
    # slots of a worker no one tenant may fill (fair share); None: an eighth, none below 8
    reserved_slots: int | None = None
    # The server drives executions in a child process, away from its HTTP event loop
    # (`wovyr serve` turns it on for SQLite and PostgreSQL; see wovyr.server.background).
    worker_process: bool = False
    audit_anchor_interval: float = 60.0  # seconds between the server's audit anchors
    # Backups must be encrypted: taking, scheduling and restoring unencrypted ones is
    # refused (WOVYR_BACKUP_REQUIRE_ENCRYPTION=1).
    backup_require_encryption: bool = False
    log_format: str = "text"  # `json`: server and worker log JSON lines (WOVYR_LOG_FORMAT)
    # The model provider named `default` (WOVYR_LLM_*): `llm` and `agent` activities use it.
    llm_base_url: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)  # never printed
    llm_model: str | None = None
    llm_price_in: float | None = None  # per 1M input tokens; None: cost unknown
    llm_price_out: float | None = None  # per 1M output tokens
    # prices of given models per 1M tokens, over those two (WOVYR_LLM_PRICES, JSON
    # `{"MODEL": {"input": X, "output": Y}}`), checked when the provider is built
    llm_prices: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # Traces (docs/operations.md, "Tracing"): on with WOVYR_OTEL=1 or an OTLP endpoint set;
    # spans go over OTLP/HTTP to `otel_endpoint`, as service `otel_service_name`.
    otel: bool = False
    otel_endpoint: str = "http://localhost:4318/v1/traces"
    otel_service_name: str = "wovyr"
    # Whom isolated shell steps run as on a root worker (WOVYR_SHELL_USER: a name or a uid).
    shell_user: str = "nobody"

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'wovyr.db'}"


def _float(env: Mapping[str, str], name: str, default: float, *, zero: bool = False) -> float:
    """A positive number (`zero`: or 0, what turns a minimum or a reserve off)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if (not value >= 0) if zero else value <= 0:
        raise ConfigError(f"{name} must be {'0 or more' if zero else 'positive'}, got {raw!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int, *, zero: bool = False) -> int:
    value = float(_float(env, name, default, zero=zero))
    if not value.is_integer():
        raise ConfigError(f"{name} must be a whole number, got {env.get(name)!r}")
    return int(value)


def _reserved(env: Mapping[str, str]) -> int | None:
    """WOVYR_RESERVED_SLOTS: a count that may be 0 (no reserve); unset: the default."""
    if not env.get("WOVYR_RESERVED_SLOTS"):
        return None
    return _int(env, "WOVYR_RESERVED_SLOTS", 0, zero=True)


def _price(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number (per 1M tokens), got {raw!r}") from None
    if not value >= 0:  # (NaN too)
        raise ConfigError(f"{name} must be 0 or more, got {raw!r}")
    return value


def _prices(env: Mapping[str, str]) -> dict[str, Any]:
    """WOVYR_LLM_PRICES: a JSON object of models' prices (their form is checked with the
    provider's, `wovyr.activities.providers.price_problems`)."""
    raw = (env.get("WOVYR_LLM_PRICES") or "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ConfigError(
            'WOVYR_LLM_PRICES must be a JSON object {"MODEL": {"input": X, "output": Y}} '
            "(per 1M tokens)"
        )
    return value


def _log_format(env: Mapping[str, str]) -> str:
    raw = (env.get("WOVYR_LOG_FORMAT") or "text").strip().lower()
    if raw not in ("text", "json"):
        raise ConfigError(f"WOVYR_LOG_FORMAT must be text or json, got {raw!r}")
    return raw


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _switch(env: Mapping[str, str], name: str) -> bool:
    """A 1/0 (true/false, yes/no, on/off) variable; unset is off, anything else an error."""
    raw = (env.get(name) or "").strip().lower()
    if raw and raw not in _TRUE + _FALSE:
        raise ConfigError(f"{name} must be 1 or 0, got {env.get(name)!r}")
    return raw in _TRUE


def _otel(env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether tracing is on, and where spans go: `WOVYR_OTEL` (1/0) says, else an OTLP
    endpoint set in the standard variables turns it on (unless `OTEL_SDK_DISABLED=true`).
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is the URL itself; `OTEL_EXPORTER_OTLP_ENDPOINT` is
    a base URL that `/v1/traces` is appended to (as OpenTelemetry's exporters do)."""
    traces = (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "").strip()
    base = (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").strip()
    endpoint = traces or (f"{base.rstrip('/')}/v1/traces" if base else "")
    raw = (env.get("WOVYR_OTEL") or "").strip().lower()
    if raw in _TRUE:
        on = True
    elif raw in _FALSE:
        on = False
    elif raw:
        raise ConfigError(f"WOVYR_OTEL must be 1 or 0, got {env.get('WOVYR_OTEL')!r}")
    else:
        on = bool(endpoint) and (env.get("OTEL_SDK_DISABLED") or "").strip().lower() not in _TRUE
    return on, endpoint or Settings.otel_endpoint


def load_settings(env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
    """Settings from the environment (`WOVYR_HOME`, `WOVYR_DATABASE_URL`, `WOVYR_ACTIVITIES`,
    `WOVYR_LEASE_SECONDS`, `WOVYR_POLL_INTERVAL`, `WOVYR_DISPATCH_INTERVAL_SECS`,
    `WOVYR_CONCURRENCY`, `WOVYR_MAX_BODY_BYTES`, `WOVYR_SHUTDOWN_GRACE_SECS`,
    `WOVYR_DEFAULT_TIMEOUT_SECS`, `WOVYR_MAX_PAYLOAD_BYTES`, `WOVYR_MAX_EXECUTION_BYTES`,
    `WOVYR_MAX_PAGE_BYTES`, `WOVYR_MIN_SCHEDULE_INTERVAL_SECS`,
    `WOVYR_MIN_CONTINUE_INTERVAL_SECS`, `WOVYR_MAX_PER_TENANT`, `WOVYR_RESERVED_SLOTS`,
    `WOVYR_AUDIT_ANCHOR_SECS`, `WOVYR_BACKUP_REQUIRE_ENCRYPTION`, `WOVYR_LLM_BASE_URL`,
    `WOVYR_LLM_API_KEY`, `WOVYR_LLM_MODEL`, `WOVYR_LLM_PRICE_IN`, `WOVYR_LLM_PRICE_OUT`,
    `WOVYR_LLM_PRICES`,    `WOVYR_LOG_FORMAT`, `WOVYR_OTEL`, `WOVYR_SHELL_USER`, and OpenTelemetry's
    `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SERVICE_NAME`,
    `OTEL_SDK_DISABLED`), overridden by flags that are not None. The reserved slots must be
    below the concurrency (`ConfigError`)."""
    env = withheld.environ() if env is None else env
    otel, otel_endpoint = _otel(env)
    settings = Settings(
        home=Path(env.get("WOVYR_HOME") or "~/.wovyr").expanduser(),
        database_url=env.get("WOVYR_DATABASE_URL") or None,
        activities=tuple(a for a in (env.get("WOVYR_ACTIVITIES") or "").split(",") if a.strip()),
        lease_seconds=_float(env, "WOVYR_LEASE_SECONDS", 30.0),
        poll_interval=_float(env, "WOVYR_POLL_INTERVAL", 1.0),
        dispatch_interval=_float(env, "WOVYR_DISPATCH_INTERVAL_SECS", 2.0),
        concurrency=_int(env, "WOVYR_CONCURRENCY", 64),
        max_body_bytes=_int(env, "WOVYR_MAX_BODY_BYTES", 1_048_576),
        shutdown_grace=_float(env, "WOVYR_SHUTDOWN_GRACE_SECS", 10.0),
        default_timeout=_float(env, "WOVYR_DEFAULT_TIMEOUT_SECS", 300.0),
        max_payload_bytes=_int(env, "WOVYR_MAX_PAYLOAD_BYTES", 2_097_152),
        max_execution_bytes=_int(env, "WOVYR_MAX_EXECUTION_BYTES", 33_554_432),
        max_page_bytes=_int(env, "WOVYR_MAX_PAGE_BYTES", 4_194_304),
        min_schedule_interval=_float(env, "WOVYR_MIN_SCHEDULE_INTERVAL_SECS", 1.0),
        min_continue_interval=_float(env, "WOVYR_MIN_CONTINUE_INTERVAL_SECS", 1.0, zero=True),
        max_per_tenant=_int(env, "WOVYR_MAX_PER_TENANT", 0) or None,
        reserved_slots=_reserved(env),
        audit_anchor_interval=_float(env, "WOVYR_AUDIT_ANCHOR_SECS", 60.0),
        backup_require_encryption=_switch(env, "WOVYR_BACKUP_REQUIRE_ENCRYPTION"),
        log_format=_log_format(env),
        llm_base_url=env.get("WOVYR_LLM_BASE_URL") or None,
        llm_api_key=env.get("WOVYR_LLM_API_KEY") or None,
        llm_model=env.get("WOVYR_LLM_MODEL") or None,
        llm_price_in=_price(env, "WOVYR_LLM_PRICE_IN"),
        llm_price_out=_price(env, "WOVYR_LLM_PRICE_OUT"),
        llm_prices=_prices(env),
        otel=otel,
        otel_endpoint=otel_endpoint,
        otel_service_name=(env.get("OTEL_SERVICE_NAME") or "").strip() or "wovyr",
        shell_user=(env.get("WOVYR_SHELL_USER") or "").strip() or "nobody",
    )
    given = {k: v for k, v in flags.items() if v is not None and v != ()}
    if "activities" in given:
        given["activities"] = tuple(settings.activities) + tuple(given["activities"])
    if "home" in given:
        given["home"] = Path(given["home"]).expanduser()
    settings = replace(settings, **given)
    reserved = settings.reserved_slots
    if reserved is not None and reserved >= settings.concurrency:
        raise ConfigError(
            f"WOVYR_RESERVED_SLOTS ({reserved}) must be below the concurrency "
            f"({settings.concurrency})"
        )
    return settings
