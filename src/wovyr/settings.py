"""Frozen settings, read only at the edges (CLI and server): flags > WOVYR_* env > defaults.

Settings are data: they build nothing (`wovyr.assemble` builds what the edges run with from
them). The engine never reads the environment; it gets what it needs through its runtime.

Every environment variable Wovyr reads is a `Variable` of `VARIABLES`, read through `lookup`
(or `read`, its text): that is where deprecated names are still accepted (with a
`DeprecationWarning` and a log line naming the new one), where a secret may come from a file
(`NAME_FILE=/path`), and where `wovyr config show` and docs/settings.md
(`scripts/settings_doc.py`) find every one of them.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from wovyr import withheld
from wovyr.errors import ConfigError

__all__ = [  # noqa: RUF022 - plain sorted(), as the tests check
    "FILE_LIMIT",
    "SECTIONS",
    "Settings",
    "VARIABLES",
    "Value",
    "Variable",
    "load_settings",
    "lookup",
    "read",
    "redacted",
    "switch",
    "variable",
]

log = logging.getLogger("wovyr.settings")

#: What a variable holds (for the docs, and for how `wovyr config show` redacts a secret).
Kind = Literal[
    "address", "bytes", "choice", "count", "json", "list", "number", "path", "seconds",
    "switch", "text", "url",
]  # fmt: skip
#: Where a value came from.
Source = Literal["default", "env", "file", "deprecated alias", "error"]

#: The most a `*_FILE` secret file may hold (a key, a passphrase, a URL: a few hundred bytes).
FILE_LIMIT = 65_536


@dataclass(frozen=True)
class Variable:
    """One environment variable: what it holds (`type`), its `default` as text ("" when
    unset means none, or what `default_doc` says), whether it is a `secret` (never shown;
    may come from a file named by `NAME_FILE`), and the deprecated `aliases` still read."""

    name: str
    type: Kind
    default: str
    description: str
    section: str
    read_by: str
    secret: bool = False
    aliases: tuple[str, ...] = ()
    default_doc: str = ""  # the default in words, when it is not one value
    internal: bool = False  # set by Wovyr for its own child processes

    @property
    def file_variable(self) -> str | None:
        """`NAME_FILE`, the variable naming a file that holds a secret's value."""
        return f"{self.name}_FILE" if self.secret and not self.internal else None


@dataclass(frozen=True)
class Value:
    """A variable's effective value: `text` (None: unset and no default) and where it came
    from: `source` is default, env, file or deprecated alias; `origin` the variable (or
    file) read."""

    variable: Variable
    text: str | None
    source: Source  # "error": `wovyr config show`'s, for one it could not read
    origin: str

    def shown(self) -> str | None:
        """The text as it may be shown: a secret's redacted."""
        if self.text is None or not self.variable.secret:
            return self.text
        return redacted(self.text, url=self.variable.type == "url")


SECTIONS = (
    "Store and process",
    "Limits on input",
    "Server and container",
    "Remote CLI",
    "Keys, secrets and backups",
    "Models",
    "Logs and traces",
    "Internal",
)
_STORE, _LIMITS, _SERVER, _REMOTE, _KEYS, _MODELS, _LOGS, _INTERNAL = SECTIONS


def _v(
    name: str, type: Kind, default: str, description: str, section: str, read_by: str, **more: Any
) -> Variable:
    return Variable(name, type, default, description, section, read_by, **more)


VARIABLES: tuple[Variable, ...] = (
    _v("WOVYR_HOME", "path", "~/.wovyr",
       "the folder of the embedded SQLite store, the KMS root key file, the UI session key, "
       "backups' work files", _STORE, "every command"),
    _v("WOVYR_DATABASE_URL", "url", "",
       "the store: `postgresql://user:pass@host:5432/db` for scale-out (it holds the password)",
       _STORE, "every command", secret=True,
       default_doc="(the SQLite file in `WOVYR_HOME`)"),
    _v("WOVYR_ACTIVITIES", "list", "",
       "comma-separated Python modules that register activities", _STORE, "run, serve, worker"),
    _v("WOVYR_TENANT", "text", "default", "the tenant a local command acts for (`--tenant`)",
       _STORE, "store commands"),
    _v("WOVYR_CONCURRENCY", "count", "64", "executions driven at once", _STORE,
       "serve's worker"),
    _v("WOVYR_LEASE_SECONDS", "seconds", "30",
       "how long a worker owns an execution without renewing", _STORE, "worker, serve"),
    _v("WOVYR_POLL_INTERVAL_SECONDS", "seconds", "1",
       "seconds between polls when idle (PostgreSQL wakes idle workers at once)", _STORE,
       "worker, serve", aliases=("WOVYR_POLL_INTERVAL",)),
    _v("WOVYR_DISPATCH_INTERVAL_SECONDS", "seconds", "2",
       "how often due timers and schedules are dispatched", _STORE, "serve",
       aliases=("WOVYR_DISPATCH_INTERVAL_SECS",)),
    _v("WOVYR_SHUTDOWN_GRACE_SECONDS", "seconds", "10",
       "seconds in-flight activities may finish after SIGTERM", _STORE, "serve",
       aliases=("WOVYR_SHUTDOWN_GRACE_SECS",)),
    _v("WOVYR_KEEP_ALIVE_SECONDS", "seconds", "65",
       "how long the server keeps an idle HTTP connection open: longer than clients keep "
       "theirs (5 s in most HTTP libraries, 60 s in load balancers), so that a request sent "
       "on a connection a client still holds never meets the server closing it", _STORE,
       "serve"),
    _v("WOVYR_DEFAULT_TIMEOUT_SECONDS", "seconds", "300",
       "an activity's timeout when its definition gives none", _STORE, "every engine",
       aliases=("WOVYR_DEFAULT_TIMEOUT_SECS",)),
    _v("WOVYR_MAX_PER_TENANT", "count", "", "slots of one worker a single tenant may hold",
       _STORE, "worker, serve"),
    _v("WOVYR_RESERVED_SLOTS", "count", "", "slots no single tenant may fill (0: none)",
       _STORE, "worker, serve", default_doc="an eighth of the concurrency, at least 8"),
    _v("WOVYR_DB_CLOCK", "switch", "1",
       "measure PostgreSQL leases with the database's clock (`--db-clock`)", _STORE, "worker"),
    _v("WOVYR_MIN_SCHEDULE_INTERVAL_SECONDS", "seconds", "1",
       "the shortest interval a schedule may fire at", _STORE, "every engine",
       aliases=("WOVYR_MIN_SCHEDULE_INTERVAL_SECS",)),
    _v("WOVYR_MIN_CONTINUE_INTERVAL_SECONDS", "seconds", "1",
       "the shortest gap between `continue_as_new` runs of one chain (0: none)", _STORE,
       "every engine", aliases=("WOVYR_MIN_CONTINUE_INTERVAL_SECS",)),
    _v("WOVYR_MAX_BODY_BYTES", "bytes", "1048576", "the largest HTTP request body", _LIMITS,
       "serve"),
    _v("WOVYR_MAX_PAYLOAD_BYTES", "bytes", "2097152",
       "the largest input, output or signal payload", _LIMITS, "every engine"),
    _v("WOVYR_MAX_EXECUTION_BYTES", "bytes", "33554432",
       "the most one execution's stored state may hold", _LIMITS, "every engine"),
    _v("WOVYR_MAX_PAGE_BYTES", "bytes", "4194304",
       "the most one page of history or list answers holds", _LIMITS, "serve"),
    _v("WOVYR_HOST", "text", "127.0.0.1", "the address to listen on (`--host`)", _SERVER,
       "serve", default_doc="`127.0.0.1` (`0.0.0.0` in the image)"),
    _v("WOVYR_PORT", "count", "8080", "the port (`--port`)", _SERVER, "serve"),
    _v("WOVYR_BOOTSTRAP_KEY_FILE", "path", "",
       "write the first admin key to this file, mode 0600, never printing it", _SERVER,
       "serve", default_doc="(print the key)"),
    _v("WOVYR_ACCESS_LOG", "switch", "0", "`1`: one log line per HTTP request", _SERVER,
       "serve"),
    _v("WOVYR_METRICS_ADDR", "address", "",
       "`HOST:PORT` serving `/metrics`, `/healthz` and `/readyz`", _SERVER, "worker",
       default_doc="(off; `0.0.0.0:9464` in the image's worker)"),
    _v("WOVYR_HEALTHCHECK_URL", "url", "", "the URL the container's health check asks",
       _SERVER, "the image's health check",
       default_doc="`http://127.0.0.1:$WOVYR_PORT/readyz`"),
    _v("WOVYR_DB_UPGRADE", "switch", "0",
       "`1`: apply migrations before `serve` or `worker` start", _SERVER,
       "the image's entry point"),
    _v("WOVYR_SERVER", "url", "",
       "talk to this server's API instead of the local store (`--server`)", _REMOTE,
       "the CLI, `wovyr.client`", default_doc="(the local store)"),
    _v("WOVYR_API_KEY", "text", "", "the API key sent to `WOVYR_SERVER`", _REMOTE,
       "the CLI, `wovyr.client`", secret=True),
    _v("WOVYR_KMS_ROOT_KEY", "text", "",
       "the KMS root key, 64 hex digits; in production it comes from here, escrowed", _KEYS,
       "every process that seals or opens", secret=True,
       default_doc="(the key file in `WOVYR_HOME`)"),
    _v("WOVYR_KMS_NEW_ROOT_KEY", "text", "", "the next root key during a rotation", _KEYS,
       "`wovyr admin kms rotate`", secret=True),
    _v("WOVYR_BACKUP_PASSPHRASE", "text", "", "the passphrase that encrypts backups", _KEYS,
       "`wovyr admin backup`, restore, scheduled backups", secret=True),
    _v("WOVYR_BACKUP_REQUIRE_ENCRYPTION", "switch", "0",
       "`1`: refuse to write an unencrypted backup", _KEYS, "backups"),
    _v("WOVYR_AUDIT_ANCHOR_INTERVAL_SECONDS", "seconds", "60",
       "how often the audit chain is anchored", _KEYS, "serve",
       aliases=("WOVYR_AUDIT_ANCHOR_SECS",)),
    _v("WOVYR_SHELL_USER", "text", "nobody",
       "the user a sandboxed `shell` step runs as (when the worker runs as root)", _KEYS,
       "workers"),
    _v("WOVYR_LLM_BASE_URL", "url", "", "the default OpenAI-compatible provider's base URL",
       _MODELS, "workers, `wovyr memory`"),
    _v("WOVYR_LLM_API_KEY", "text", "", "its API key", _MODELS, "workers, `wovyr memory`",
       secret=True),
    _v("WOVYR_LLM_MODEL", "text", "", "the default model", _MODELS, "workers"),
    _v("WOVYR_LLM_PRICE_IN", "number", "", "price per million input tokens, for cost budgets",
       _MODELS, "workers"),
    _v("WOVYR_LLM_PRICE_OUT", "number", "", "price per million output tokens", _MODELS,
       "workers"),
    _v("WOVYR_LLM_PRICES", "json", "",
       'prices of given models per million tokens, over the two above: '
       '`{"MODEL": {"input": X, "output": Y}}`', _MODELS, "workers"),
    _v("WOVYR_LOG_FORMAT", "choice", "text",
       "`json`: JSON lines on stderr (RFC 3339 millisecond times, trace ids)", _LOGS,
       "serve, worker"),
    _v("WOVYR_OTEL", "switch", "", "`1`/`0`: tracing on or off (needs the `otel` extra)",
       _LOGS, "every engine", default_doc="(on when an OTLP endpoint is set)"),
    _v("OTEL_EXPORTER_OTLP_ENDPOINT", "url", "",
       "the OTLP/HTTP base URL; `/v1/traces` is added", _LOGS, "every engine"),
    _v("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "url", "", "the OTLP/HTTP traces URL itself",
       _LOGS, "every engine"),
    _v("OTEL_SERVICE_NAME", "text", "wovyr", "the service name of the spans", _LOGS,
       "every engine"),
    _v("OTEL_SDK_DISABLED", "switch", "false", "`true`: no tracing even with an endpoint set",
       _LOGS, "every engine"),
    _v("WOVYR_DEBUG_TRACEMALLOC", "path", "",
       "a folder: write tracemalloc snapshots there (a debugging aid)", _LOGS,
       "serve, its worker process", default_doc="(off)"),
    _v("WOVYR_DEBUG_TRACEMALLOC_FRAMES", "count", "1",
       "frames kept per allocation with `WOVYR_DEBUG_TRACEMALLOC` (1 to 100)", _LOGS,
       "serve, its worker process"),
    _v("WOVYR_WORKER_PROCESS_CONFIG", "json", "", "the server's worker process's settings",
       _INTERNAL, "the server's worker process", secret=True, internal=True),
    _v("WOVYR_WITHHELD_FD", "count", "",
       "secrets handed to a child on a pipe, not in its environment", _INTERNAL,
       "every `wovyr` process", internal=True),
)  # fmt: skip
_BY_NAME = {v.name: v for v in VARIABLES}


def variable(name: str) -> Variable:
    """The variable of that name (a `KeyError` for one not in the table: a bug)."""
    return _BY_NAME[name]


def lookup(name: str, env: Mapping[str, str] | None = None, *, warn: bool = True) -> Value:
    """The value of the variable `name` in `env` (default: the process's, secrets withheld
    included): its own, else its `NAME_FILE`'s file (a secret; one trailing newline
    stripped), else a deprecated alias's (warned, unless not `warn`), else its default.
    An empty variable counts as unset. `ConfigError` when a secret and its `_FILE` are
    both set, when the file cannot be read, and when an alias and the new name disagree."""
    var = _BY_NAME[name]
    env = withheld.environ() if env is None else env
    own = env.get(name) or None
    file_var = var.file_variable
    path = (env.get(file_var) or None) if file_var else None
    if own is not None and path is not None:
        raise ConfigError(
            f"both {name} and {file_var} are set: set one (the value, or the file holding it)"
        )
    if path is not None:
        return Value(var, _read_secret_file(file_var or "", path), "file", path)
    for alias in var.aliases:
        old = env.get(alias) or None
        if old is None:
            continue
        if own is not None and own != old:
            raise ConfigError(
                f"{alias} (deprecated) and {name} are both set, to different values: "
                f"keep {name} only"
            )
        if warn:
            message = f"{alias} is deprecated: use {name}"
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            log.warning("%s", message)
        if own is None:
            return Value(var, old, "deprecated alias", alias)
    if own is not None:
        return Value(var, own, "env", name)
    return Value(var, var.default or None, "default", "")


def read(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The text of the variable `name` (`lookup`), None when unset with no default."""
    return lookup(name, env).text


def _read_secret_file(file_var: str, path: str) -> str:
    try:
        with open(path, "rb") as f:  # a secret file is small; /dev/zero is not read whole
            data = f.read(FILE_LIMIT + 1)
    except OSError as exc:
        raise ConfigError(f"{file_var}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > FILE_LIMIT:
        raise ConfigError(f"{file_var}: {path} is larger than {FILE_LIMIT} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{file_var}: {path} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise ConfigError(f"{file_var}: {path} is empty")
    return text


def redacted(text: str, *, url: bool = False) -> str:
    """A secret as it may be shown: `***`; of a URL, only its password (and query) hidden:
    `postgresql://wovyr:***@db:5432/wovyr`."""
    if not url or "://" not in text:
        return "***"
    scheme, _, rest = text.partition("://")
    rest, query, _ = rest.partition("?")  # a query may hold a password too
    where, sep, path = rest.partition("/")
    user, at, host = where.rpartition("@")
    if at and ":" in user:
        user = user.split(":", 1)[0] + ":***"
    return f"{scheme}://{user}{at}{host}{sep}{path}{'?***' if query else ''}"


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
    keep_alive: float = 65.0  # seconds the server keeps an idle HTTP connection open
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


def _float(env: Mapping[str, str], name: str, *, zero: bool = False) -> float:
    """A positive number (`zero`: or 0, what turns a minimum or a reserve off)."""
    value = lookup(name, env)
    number = _number(value, zero=zero)
    assert number is not None, name  # every such variable has a default
    return number


def _number(value: Value, *, zero: bool = False) -> float | None:
    raw = value.text
    if raw is None:
        return None
    try:
        number = float(raw)
    except ValueError:
        raise ConfigError(f"{value.origin} must be a number, got {raw!r}") from None
    if (not number >= 0) if zero else number <= 0:  # (NaN too)
        raise ConfigError(
            f"{value.origin} must be {'0 or more' if zero else 'positive'}, got {raw!r}"
        )
    return number


def _whole(value: Value, *, zero: bool = False) -> int | None:
    number = _number(value, zero=zero)
    if number is None:
        return None
    if not number.is_integer():
        raise ConfigError(f"{value.origin} must be a whole number, got {value.text!r}")
    return int(number)


def _int(env: Mapping[str, str], name: str) -> int:
    number = _whole(lookup(name, env))
    assert number is not None, name  # every such variable has a default
    return number


def _price(env: Mapping[str, str], name: str) -> float | None:
    value = lookup(name, env)
    try:
        return _number(value, zero=True)
    except ConfigError:
        raise ConfigError(
            f"{value.origin} must be a number of 0 or more (per 1M tokens), got {value.text!r}"
        ) from None


def _prices(env: Mapping[str, str]) -> dict[str, Any]:
    """WOVYR_LLM_PRICES: a JSON object of models' prices (their form is checked with the
    provider's, `wovyr.activities.providers.price_problems`)."""
    raw = (read("WOVYR_LLM_PRICES", env) or "").strip()
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
    raw = (read("WOVYR_LOG_FORMAT", env) or "text").strip().lower()
    if raw not in ("text", "json"):
        raise ConfigError(f"WOVYR_LOG_FORMAT must be text or json, got {raw!r}")
    return raw


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def switch(value: Value) -> bool | None:
    """A 1/0 (true/false, yes/no, on/off) variable's value; None when unset, anything else
    is an error."""
    raw = (value.text or "").strip().lower()
    if raw and raw not in _TRUE + _FALSE:
        raise ConfigError(f"{value.origin} must be 1 or 0, got {value.text!r}")
    return raw in _TRUE if raw else None


def _text(env: Mapping[str, str], name: str) -> str | None:
    return (read(name, env) or "").strip() or None


def _otel(env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether tracing is on, and where spans go: `WOVYR_OTEL` (1/0) says, else an OTLP
    endpoint set in the standard variables turns it on (unless `OTEL_SDK_DISABLED=true`).
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is the URL itself; `OTEL_EXPORTER_OTLP_ENDPOINT` is
    a base URL that `/v1/traces` is appended to (as OpenTelemetry's exporters do)."""
    traces = _text(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or ""
    base = _text(env, "OTEL_EXPORTER_OTLP_ENDPOINT") or ""
    endpoint = traces or (f"{base.rstrip('/')}/v1/traces" if base else "")
    on = switch(lookup("WOVYR_OTEL", env))
    if on is None:
        disabled = (read("OTEL_SDK_DISABLED", env) or "").strip().lower() in _TRUE
        on = bool(endpoint) and not disabled
    return on, endpoint or Settings.otel_endpoint


def load_settings(env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
    """Settings from the environment (the variables of `VARIABLES`, docs/settings.md),
    overridden by flags that are not None. The reserved slots must be below the concurrency
    (`ConfigError`)."""
    env = withheld.environ() if env is None else env
    otel, otel_endpoint = _otel(env)
    activities = read("WOVYR_ACTIVITIES", env) or ""
    settings = Settings(
        home=Path(read("WOVYR_HOME", env) or "~/.wovyr").expanduser(),
        database_url=read("WOVYR_DATABASE_URL", env),
        activities=tuple(a for a in activities.split(",") if a.strip()),
        lease_seconds=_float(env, "WOVYR_LEASE_SECONDS"),
        poll_interval=_float(env, "WOVYR_POLL_INTERVAL_SECONDS"),
        dispatch_interval=_float(env, "WOVYR_DISPATCH_INTERVAL_SECONDS"),
        concurrency=_int(env, "WOVYR_CONCURRENCY"),
        max_body_bytes=_int(env, "WOVYR_MAX_BODY_BYTES"),
        shutdown_grace=_float(env, "WOVYR_SHUTDOWN_GRACE_SECONDS"),
        keep_alive=_float(env, "WOVYR_KEEP_ALIVE_SECONDS"),
        default_timeout=_float(env, "WOVYR_DEFAULT_TIMEOUT_SECONDS"),
        max_payload_bytes=_int(env, "WOVYR_MAX_PAYLOAD_BYTES"),
        max_execution_bytes=_int(env, "WOVYR_MAX_EXECUTION_BYTES"),
        max_page_bytes=_int(env, "WOVYR_MAX_PAGE_BYTES"),
        min_schedule_interval=_float(env, "WOVYR_MIN_SCHEDULE_INTERVAL_SECONDS"),
        min_continue_interval=_float(env, "WOVYR_MIN_CONTINUE_INTERVAL_SECONDS", zero=True),
        max_per_tenant=_whole(lookup("WOVYR_MAX_PER_TENANT", env)),
        reserved_slots=_whole(lookup("WOVYR_RESERVED_SLOTS", env), zero=True),
        audit_anchor_interval=_float(env, "WOVYR_AUDIT_ANCHOR_INTERVAL_SECONDS"),
        backup_require_encryption=bool(switch(lookup("WOVYR_BACKUP_REQUIRE_ENCRYPTION", env))),
        log_format=_log_format(env),
        llm_base_url=read("WOVYR_LLM_BASE_URL", env),
        llm_api_key=read("WOVYR_LLM_API_KEY", env),
        llm_model=read("WOVYR_LLM_MODEL", env),
        llm_price_in=_price(env, "WOVYR_LLM_PRICE_IN"),
        llm_price_out=_price(env, "WOVYR_LLM_PRICE_OUT"),
        llm_prices=_prices(env),
        otel=otel,
        otel_endpoint=otel_endpoint,
        otel_service_name=_text(env, "OTEL_SERVICE_NAME") or "wovyr",
        shell_user=_text(env, "WOVYR_SHELL_USER") or "nobody",
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
