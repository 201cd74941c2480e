"""`wovyr admin tenants list|show|set` and `wovyr admin quotas show|set`: tenants'
side-effect policies and quotas, on the server host.

Whoever runs these commands holds the store itself (its file, or its database URL), so they
may open a tenant up as far as they like: the HTTP API lets a tenant's admin only tighten
its own tenant's policy (see docs/security.md).

`set` starts from `--preset` (default: the tenant's policy now), then a `--policy-file`
(a JSON object of policy fields), then the flags; `--preset default` with nothing else puts
the tenant back on its default (trusted for `default`, restricted for every other). A policy
that lets the tenant run `shell` is followed by a warning on stderr of what that grants,
whether this host can isolate the tenant's steps, and, unisolated, that they can read the
KMS root key.

Through a server (`--server`), an admin key shows its own tenant's policy and quotas, and
may only tighten the policy and lower the quotas (the server refuses the rest); listing
every tenant, presets, sealing and shredding are the host's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wovyr import assemble
from wovyr.activities.policy import RESTRICTED, TRUSTED, SideEffectPolicy, parse_policy, to_dict
from wovyr.activities.sandbox import probe
from wovyr.cli.admin import admin
from wovyr.cli.backend import (
    refuse_remote,
    remote_of,
    server_for,
    store_or_server_for,
)
from wovyr.cli.common import (
    echo_json,
    echo_listing,
    echo_table,
    engine_options,
    host_engine,
    json_option,
    open_engine,
)
from wovyr.engine.quotas import DEFAULT_WEIGHT, MAX_WEIGHT, parse_quotas
from wovyr.engine.tenants import (
    TenantPolicy,
    default_policy,
    policy_of,
    set_policy,
    set_sealing,
)
from wovyr.errors import InputError, Problem
from wovyr.platform.auth import validate_tenant
from wovyr.settings import Settings

if TYPE_CHECKING:
    pass

__all__: list[str] = []

_PRESETS = {"restricted": RESTRICTED, "trusted": TRUSTED}
_LIMIT = click.IntRange(min=1)


@admin.group("tenants")
def tenants() -> None:
    """Show and set tenants' side-effect policies (what shell and http steps may reach)."""


def _tenant_dict(found: TenantPolicy) -> dict[str, Any]:
    stored = found.stored if found.source == "set" else None
    return {
        "tenant": found.tenant,
        "source": found.source,
        "policy": to_dict(found.policy),
        "seal_payloads": found.seal_payloads,
        "updated_at": stored.updated_at.isoformat() if stored else None,
        "updated_by": stored.updated_by if stored else None,
    }


def _summary(policy: SideEffectPolicy) -> str:
    shell = "shell" if policy.shell else "no shell"
    if policy.shell:
        shell += " isolated" if policy.shell_isolation else " UNISOLATED"
    if policy.shell and policy.shell_commands is not None:
        shell += f" ({len(policy.shell_commands)} commands)"
    net = "private network" if policy.private_network else "public network"
    extra = len(policy.allow_networks) + len(policy.allow_hosts)
    return f"{shell}; {net}" + (
        f" + {extra} allowed" if extra and not policy.private_network else ""
    )


@tenants.command("list")
@json_option
@engine_options
def list_command(as_json: bool, settings: Settings) -> None:
    """Every tenant with a policy set or an API key, and the policy it runs under."""
    with host_engine(
        settings, "admin tenants list", "it lists every tenant of the host's store"
    ) as engine:
        store = engine.store
        names = {t.tenant for t in store.list_tenants()} | {k.tenant for k in store.list_api_keys()}
        found = [policy_of(store, name) for name in sorted(names | {"default"})]
    rows = ((f.tenant, _summary(f.policy), f.source) for f in found)
    echo_listing(as_json, [_tenant_dict(f) for f in found], ("tenant", "policy", "source"), rows)


@tenants.command("show")
@click.argument("tenant")
@json_option
@engine_options
def show_command(tenant: str, as_json: bool, settings: Settings) -> None:
    """The side-effect policy TENANT's shell and http steps run under now."""
    validate_tenant(tenant)
    found = store_or_server_for(
        settings,
        tenant,
        lambda engine: _tenant_dict(policy_of(engine.store, tenant)),
        lambda api: api.policy(),
    )
    _print(found, as_json)


def _print(found: dict[str, Any], as_json: bool) -> None:
    """A tenant's policy (`_tenant_dict`'s form): the JSON, or a summary and a table."""
    if as_json:
        echo_json(found)
        return
    policy = parse_policy(found["policy"], base=RESTRICTED)
    origin = "its default" if found["source"] == "default" else "set"
    if found["source"] == "set" and found["updated_at"] is not None:
        at = datetime.fromisoformat(found["updated_at"])
        origin += f" {at:%Y-%m-%d %H:%M} by {found['updated_by']}"
    click.echo(f"tenant {found['tenant']}: {_summary(policy)} ({origin})")
    if found["seal_payloads"]:
        click.echo("execution payloads: sealed with the tenant's data key")
    echo_table(("field", "value"), [(name, _shown(name, v)) for name, v in to_dict(policy).items()])


def _shown(name: str, value: Any) -> str:
    """A policy field's value as `tenants show` prints it."""
    if value is None:  # no list: anything; no limit: the worker's own
        return "any" if name in ("shell_commands", "shell_env") else "the worker's"
    return json.dumps(value)


@tenants.command("set")
@click.argument("tenant")
@click.option(
    "--preset",
    type=click.Choice(["restricted", "trusted", "default"]),
    help="Start from this policy instead of the tenant's current one ('default': the "
    "tenant's default; alone, it removes what was set).",
)
@click.option(
    "--policy-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON object of policy fields (docs/security.md).",
)
@click.option("--shell/--no-shell", "shell", default=None, help="May shell steps run at all.")
@click.option(
    "--shell-command",
    "commands",
    multiple=True,
    help="Allow only these programs (a bare name or an absolute path; repeat).",
)
@click.option("--any-command", is_flag=True, help="Drop the command allow-list.")
@click.option(
    "--shell-env", "env", multiple=True, help="Worker variables a step may inherit (repeat)."
)
@click.option("--shell-cwd/--no-shell-cwd", "cwd", default=None, help="May a step pick its cwd.")
@click.option(
    "--shell-isolation/--no-shell-isolation",
    "isolation",
    default=None,
    help="Run shell steps isolated from the worker (namespaces; the default of every grant). "
    "--no-shell-isolation lets them read what the worker's user can, the KMS root key "
    "included: only for a tenant trusted with the host.",
)
@click.option(
    "--cpu-seconds", type=click.IntRange(min=1), help="CPU seconds of a shell step (RLIMIT_CPU)."
)
@click.option(
    "--memory-bytes", type=click.IntRange(min=1), help="Address space of a shell step (RLIMIT_AS)."
)
@click.option(
    "--open-files", type=click.IntRange(min=1), help="Open files of a shell step (RLIMIT_NOFILE)."
)
@click.option(
    "--processes", type=click.IntRange(min=1), help="Processes of the worker's user (RLIMIT_NPROC)."
)
@click.option(
    "--file-bytes",
    type=click.IntRange(min=1),
    help="Largest file a shell step writes (RLIMIT_FSIZE).",
)
@click.option(
    "--private-network/--no-private-network",
    "private",
    default=None,
    help="May http reach loopback, private, link-local and metadata addresses.",
)
@click.option("--allow-network", "networks", multiple=True, help="A CIDR http may reach (repeat).")
@click.option("--allow-host", "hosts", multiple=True, help="A host:port http may reach (repeat).")
@click.option(
    "--seal-payloads/--no-seal-payloads",
    "seal",
    default=None,
    help="Store the tenant's execution payloads (inputs, outputs, errors, signal payloads, "
    "approvals, events, checkpoints) sealed with its data key, from now on.",
)
@json_option
@engine_options
def set_command(
    tenant: str,
    preset: str | None,
    policy_file: Path | None,
    shell: bool | None,
    commands: tuple[str, ...],
    any_command: bool,
    env: tuple[str, ...],
    cwd: bool | None,
    isolation: bool | None,
    cpu_seconds: int | None,
    memory_bytes: int | None,
    open_files: int | None,
    processes: int | None,
    file_bytes: int | None,
    private: bool | None,
    networks: tuple[str, ...],
    hosts: tuple[str, ...],
    seal: bool | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Set TENANT's side-effect policy; it applies to the next attempt of every execution.
    --seal-payloads (alone, or with policy changes) seals the tenant's execution payloads
    from now on."""
    validate_tenant(tenant)
    if commands and any_command:
        raise click.UsageError("--shell-command and --any-command exclude each other")
    if remote_of() is not None and (preset is not None or seal is not None):
        refuse_remote("admin tenants set --preset/--seal-payloads", "they are the host's")
    fields: dict[str, Any] = {}
    if policy_file is not None:
        fields.update(_read_policy_file(policy_file))
    flags: dict[str, Any] = {
        "shell": shell,
        "shell_cwd": cwd,
        "shell_isolation": isolation,
        "shell_cpu_seconds": cpu_seconds,
        "shell_memory_bytes": memory_bytes,
        "shell_open_files": open_files,
        "shell_processes": processes,
        "shell_file_bytes": file_bytes,
        "private_network": private,
        "shell_commands": list(commands) if commands else None if any_command else ...,
        "shell_env": list(env) or ...,
        "allow_networks": list(networks) or ...,
        "allow_hosts": list(hosts) or ...,
    }
    fields.update({k: v for k, v in flags.items() if v is not None and v is not ...})
    if any_command:
        fields["shell_commands"] = None
    if remote_of() is not None:  # only tightened: the server refuses a widening (403)
        tightened = server_for(
            settings, tenant, lambda api: api.policy(fields) if fields else api.policy()
        )
        _print(tightened, as_json)
        return
    with open_engine(settings, load_activities=False) as engine:
        store = engine.store
        if seal is not None:
            found = set_sealing(
                store, tenant, seal, by="cli", at=engine.clock.now(), actor=engine.actor
            )
            if preset is None and not fields and not any_command:
                _print(_tenant_dict(found), as_json)
                return
        if preset == "default" and not fields:
            found = set_policy(
                store, tenant, None, by="cli", at=engine.clock.now(), actor=engine.actor
            )
        else:
            if preset is None:
                base = policy_of(store, tenant).policy
            else:
                base = _PRESETS.get(preset) or default_policy(tenant)
            policy = parse_policy(fields, base=base) if fields else replace(base)
            found = set_policy(
                store, tenant, policy, by="cli", at=engine.clock.now(), actor=engine.actor
            )
    _print(_tenant_dict(found), as_json)
    if found.policy.shell:
        _warn_shell(found, settings)


def _warn_shell(found: TenantPolicy, settings: Settings) -> None:
    """What a grant of `shell` means, on stderr (also with --json): said every time."""
    policy, tenant = found.policy, found.tenant
    lines = [
        f"WARNING: tenant {tenant!r} may run programs on the hosts of this store's workers "
        "(shell), with every key of that tenant that may start a workflow.",
    ]
    if policy.shell_commands is not None:
        lines.append(
            "  The command allow-list names programs, not what they do: an interpreter or a "
            "shell in it (python3, sh, env, xargs) admits any program."
        )
    if policy.shell_isolation:
        lines.append(
            "  Isolated: each step runs in its own mount and PID namespaces (as the account "
            f"{settings.shell_user!r} on a root worker), sees none of the worker's processes, "
            "and not WOVYR_HOME (the development KMS key) or the SQLite store's directory. It "
            "still reaches the network (the database server and internal services "
            "included), /tmp, and every file its user may read."
        )
        reason = probe(assemble.shell_sandbox(settings))
        if reason is None:
            lines.append("  This host can isolate shell steps.")
        else:
            lines.append(
                f"  This host CANNOT isolate them: the tenant's shell steps fail here "
                f"(PolicyDenied). {reason}"
            )
    else:
        lines.append(
            "  UNISOLATED (--no-shell-isolation): a step runs beside the worker as its user "
            "and can read the worker's environment and memory through /proc, WOVYR_HOME with "
            "the KMS root key file, the database and every tenant's data. Grant this only to "
            "a tenant you trust with the host and every secret of this store."
        )
    click.echo("\n".join(lines), err=True)


def _read_policy_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError([Problem(f"cannot read {path}: {exc}", path="--policy-file")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem("the policy file holds one JSON object", path="--policy-file")])
    return data


# --- quotas --------------------------------------------------------------------------------


@admin.group("quotas")
def quotas() -> None:
    """Show and set tenants' quotas (daily executions, activity seconds, model tokens and
    cost, stored bytes, concurrent
    executions, schedule rate) and fair-share settings (weight, slots per worker, executions
    leased by all workers together). Here
    they may be raised; a tenant's admin may only lower them over the API."""


def _print_quotas(usage: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(usage)
        return
    click.echo(f"tenant {usage['tenant']}: usage of UTC day {usage['day']}")
    rows = []
    counted = usage["used"]  # a daily budget the ledger does not count is absent
    used = {
        "executions_per_day": counted.get("executions"),
        "activity_seconds_per_day": counted.get("activity_seconds"),
        "model_tokens_per_day": counted.get("model_tokens"),
        "model_cost_per_day": counted.get("model_cost"),
        "stored_bytes_per_day": counted.get("stored_bytes"),
        "concurrent_executions": usage["running"],
    }
    for name, limit in usage["quotas"].items():
        shown = "none" if limit is None else f"{limit:g}"
        if name == "weight" and limit is None:
            shown = f"default ({DEFAULT_WEIGHT:g})"
        if name not in used:
            spent = ""
        elif used[name] is None:
            spent = "not counted without a quota"
        else:
            spent = f"{used[name]:g}"
        rows.append((name.replace("_", "-"), shown, spent))
    echo_table(("quota", "limit", "used"), rows)


@quotas.command("show")
@click.argument("tenant")
@json_option
@engine_options
def quotas_show_command(tenant: str, as_json: bool, settings: Settings) -> None:
    """TENANT's quotas and what it used today (UTC)."""
    validate_tenant(tenant)
    usage = store_or_server_for(
        settings,
        tenant,
        lambda engine: engine.for_tenant(tenant).quota_usage(),
        lambda api: api.quotas(),
    )
    _print_quotas(usage, as_json)


_COUNT = click.IntRange(min=0)


@quotas.command("set")
@click.argument("tenant")
@click.option("--executions-per-day", type=_COUNT, help="New executions per UTC day.")
@click.option(
    "--activity-seconds-per-day",
    type=click.FloatRange(min=0),
    help="Seconds of activity attempts per UTC day.",
)
@click.option(
    "--model-tokens-per-day", type=_COUNT, help="Model input + output tokens per UTC day."
)
@click.option(
    "--model-cost-per-day",
    type=click.FloatRange(min=0),
    help="Model cost (in the providers' prices) per UTC day.",
)
@click.option(
    "--stored-bytes-per-day",
    type=_COUNT,
    help="Bytes of values (inputs, outputs, errors, as JSON) executions record per UTC day.",
)
@click.option("--concurrent-executions", type=_COUNT, help="Executions running at once.")
@click.option(
    "--max-schedule-rate",
    type=click.FloatRange(min=0),
    help="Fires per minute one schedule may be set to.",
)
@click.option(
    "--weight",
    type=click.FloatRange(min=0, min_open=True, max=MAX_WEIGHT),
    help="Fair-share weight: the tenant's share of a worker's slots beside others (default 1).",
)
@click.option(
    "--max-slots",
    type=_LIMIT,
    help="Slots of one worker the tenant's executions may hold at once (under fair share).",
)
@click.option(
    "--max-running",
    type=_LIMIT,
    help="Executions of the tenant leased at once by all workers together (under fair share).",
)
@click.option("--max-schedules", type=_COUNT, help="Schedules the tenant may have at once.")
@click.option(
    "--clear", "clear", multiple=True, metavar="QUOTA", help="Remove a limit (repeatable)."
)
@json_option
@engine_options
def quotas_set_command(
    tenant: str,
    executions_per_day: int | None,
    activity_seconds_per_day: float | None,
    model_tokens_per_day: int | None,
    model_cost_per_day: float | None,
    stored_bytes_per_day: int | None,
    concurrent_executions: int | None,
    max_schedule_rate: float | None,
    weight: float | None,
    max_slots: int | None,
    max_running: int | None,
    max_schedules: int | None,
    clear: tuple[str, ...],
    as_json: bool,
    settings: Settings,
) -> None:
    """Set TENANT's quotas (the ones not given keep their value)."""
    validate_tenant(tenant)
    given = {
        "executions_per_day": executions_per_day,
        "activity_seconds_per_day": activity_seconds_per_day,
        "model_tokens_per_day": model_tokens_per_day,
        "model_cost_per_day": model_cost_per_day,
        "stored_bytes_per_day": stored_bytes_per_day,
        "concurrent_executions": concurrent_executions,
        "max_schedule_rate": max_schedule_rate,
        "weight": weight,
        "max_slots": max_slots,
        "max_running": max_running,
        "max_schedules": max_schedules,
    }
    if remote_of() is not None:  # only lowered: the server refuses a raise (403)
        changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        changes.update({name.replace("-", "_"): None for name in clear})
        lowered = server_for(
            settings, tenant, lambda api: api.quotas(changes) if changes else api.quotas()
        )
        _print_quotas(lowered, as_json)
        return
    with open_engine(settings, load_activities=False) as opened:
        engine = opened.for_tenant(tenant)
        fields = engine.quotas().to_dict()
        fields.update({k: v for k, v in given.items() if v is not None})
        for name in clear:
            key = name.replace("-", "_")
            if key not in fields:
                raise InputError([Problem(f"unknown quota {name!r}", path="--clear")])
            fields[key] = None
        engine.set_quotas(parse_quotas(fields), by="cli")
        usage = engine.quota_usage()
    _print_quotas(usage, as_json)


# --- crypto-shredding ------------------------------------------------------------------------


@tenants.command("shred")
@click.argument("tenant")
@click.option("--yes", is_flag=True, help="Confirm: this cannot be undone.")
@json_option
@engine_options
def shred_command(tenant: str, yes: bool, as_json: bool, settings: Settings) -> None:
    """Destroy TENANT's data keys: every secret they sealed becomes unreadable for good
    (other tenants are untouched), and the store is scrubbed of earlier copies of those
    keys (SQLite: its database file and WAL; PostgreSQL: the table, while its write-ahead
    log keeps them until you rotate the root key). Backups taken before are pre-shred
    copies. New secrets set after it get a new data key. Sealed execution payloads
    (--seal-payloads) become unreadable too, and the tenant's running executions with
    them are failed."""
    from wovyr.platform.payloads import shred_tenant_payloads

    refuse_remote("admin tenants shred", "it destroys the tenant's keys in the host's KMS")
    validate_tenant(tenant)
    if not yes:
        raise click.UsageError(f"shredding tenant {tenant!r} cannot be undone: add --yes")
    with open_engine(settings, load_activities=False) as engine:
        report = shred_tenant_payloads(
            engine.store, tenant, by="cli", at=engine.clock.now(), actor=engine.actor
        )
    if as_json:
        echo_json(report.to_dict(tenant))
    else:
        click.echo(f"tenant {tenant}: {report.destroyed} data keys destroyed")
        if report.executions_failed:
            click.echo(
                f"{report.executions_failed} running executions failed: their sealed "
                "payloads are gone"
            )
        if not report.remains:
            click.echo("the store's files keep no earlier copy of them")
    for remains in report.remains:
        click.echo(f"warning: {remains}", err=True)
