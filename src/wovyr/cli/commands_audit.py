"""`wovyr admin audit verify|list|anchor`: the audit chain, on the server host.

Whoever runs these commands holds the store, so they see every tenant's records (`list
--tenant T` narrows); over the API a tenant's admin sees only its own tenant's
(`GET /api/v1/audit`; `list` through a server, `--server`, reads it: each record's link,
`prev_hash`, is then null). `verify` walks the WHOLE chain: records of every tenant are links
of one chain, so only the host can check it. Exit codes of `verify`: 0 the chain holds,
1 it does not (the first bad seq and why are printed).

The anchor key comes from the KMS (`wovyr.platform.secrets`): `anchor` needs it (and makes
it on first use, while no anchor exists). `verify` only looks it up and never makes a key
(not even a development root key file): while anchors exist, a key that cannot be read (no
root key, a row removed, altered or wrapped by another root key) fails the check; with no
anchor yet it checks the links and says that is all it checked.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.admin import admin
from wovyr.cli.backend import store_or_server_for
from wovyr.cli.common import (
    echo_json,
    echo_listing,
    engine_options,
    host_engine,
    json_option,
    short,
)
from wovyr.engine.engine import Engine
from wovyr.errors import InputError, KmsError
from wovyr.platform.audit import verify_chain, write_anchor
from wovyr.platform.auth import validate_tenant
from wovyr.platform.kms import load_kms
from wovyr.platform.secrets import Secrets, audit_anchor_key, find_audit_anchor_key
from wovyr.settings import Settings

if TYPE_CHECKING:
    pass

__all__: list[str] = []


def _anchor_key(engine: Engine, settings: Settings) -> tuple[bytes | None, str]:
    """The anchor key if it exists and opens, or None and why; never makes a key."""
    home = settings.home
    try:  # the KMS is loaded only if there is a key to open
        secrets = Secrets(engine.store, lambda: load_kms(home, warn=False, create=False))
        key = find_audit_anchor_key(secrets)
    except KmsError as exc:
        return None, f"the anchor key cannot be read ({exc})"
    if key is None:
        return None, "this store has no anchor key yet"
    return key, ""


@admin.group("audit")
def audit() -> None:
    """The tamper-evident audit chain: verify it, list it, sign its head."""


@audit.command("verify")
@json_option
@engine_options
def verify_command(as_json: bool, settings: Settings) -> None:
    """Check every record's hash and link, and the chain against every signed anchor."""
    with host_engine(
        settings, "admin audit verify", "the chain holds every tenant's records"
    ) as engine:
        key, why = _anchor_key(engine, settings)
        verdict = verify_chain(engine.store, key)
    unsigned = None
    if key is None:
        unsigned = (
            f"anchors not checked: {why}; the links of the chain were checked, which does "
            "not detect a truncated tail or a full rewrite"
        )
    if as_json:
        echo_json(
            {
                "ok": verdict.ok,
                "records": verdict.records,
                "head_seq": verdict.head_seq,
                "anchors": verdict.anchors,
                "anchors_verified": verdict.anchors_signed,
                "note": unsigned,
                "problems": [{"seq": s, "reason": r} for s, r in verdict.problems],
            }
        )
    else:
        if unsigned:
            click.echo(f"warning: {unsigned}", err=True)
        if verdict.first is not None:
            seq, reason = verdict.first
            click.echo(f"audit chain BROKEN at seq {seq}: {reason}")
            for seq, reason in verdict.problems[1:]:
                click.echo(f"  also at seq {seq}: {reason}")
        else:
            anchors = f"{verdict.anchors} anchor(s)" + (
                " verified" if verdict.anchors_signed else " (signatures not checked)"
            )
            records = f"{verdict.records} record(s), head seq {verdict.head_seq}"
            click.echo(f"audit chain OK: {records}, {anchors}")
    if not verdict.ok:
        raise click.exceptions.Exit(1)


@audit.command("anchor")
@json_option
@engine_options
def anchor_command(as_json: bool, settings: Settings) -> None:
    """Sign the chain's head now (HMAC with the KMS's audit anchor key)."""
    with host_engine(settings, "admin audit anchor", "the anchor key is the host's") as engine:
        secrets = engine.secrets
        assert isinstance(secrets, Secrets)
        now = engine.clock.now()
        key = audit_anchor_key(secrets, now, engine.store)  # KmsError: the CLI's exit 1
        anchor = write_anchor(engine.store, key, now)
    if anchor is None:
        out: dict[str, Any] = {"anchored": False, "reason": "the chain is empty"}
    else:
        out = {
            "anchored": True,
            "seq": anchor.seq,
            "hash": anchor.hash,
            "at": anchor.at.isoformat(),
        }
    if as_json:
        echo_json(out)
    elif anchor is None:
        click.echo("nothing to anchor: the chain is empty")
    else:
        click.echo(f"anchored seq {anchor.seq} ({anchor.hash[:16]}…)")


@audit.command("list")
@click.option("--tenant", default=None, help="Only this tenant's records.")
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]),
    default=None,
    help="Only records at or after this time (UTC unless an offset is given).",
)
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True)
@json_option
@engine_options
def list_command(
    tenant: str | None, since: datetime | None, limit: int, as_json: bool, settings: Settings
) -> None:
    """List audit records, oldest first."""
    if tenant is not None:
        try:
            validate_tenant(tenant)
        except InputError as exc:
            raise click.BadParameter(str(exc), param_hint="--tenant") from None
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    records = store_or_server_for(
        settings,
        tenant,
        lambda engine: engine.store.audit_records(tenant=tenant, since=since, limit=limit),
        lambda api: api.audit(since, limit),
    )
    rows = (
        (
            str(r.seq),
            r.at.strftime("%Y-%m-%d %H:%M:%S"),
            r.tenant,
            r.actor,
            r.action,
            r.target,
            short(r.details, 60) if r.details else "",
        )
        for r in records
    )
    columns = ("seq", "at", "tenant", "actor", "action", "target", "details")
    echo_listing(as_json, [r.to_dict() for r in records], columns, rows, no_wrap=("seq", "at"))
