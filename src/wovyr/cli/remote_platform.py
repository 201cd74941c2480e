"""`RemotePlatform`: the tenant's own platform commands over a server's HTTP API (`wovyr
--server URL`, the key in `WOVYR_API_KEY`): secrets, model providers, MCP servers, agents
and their runs, bulk actions and batches, and what a tenant's admin key may do of `wovyr
admin` (its keys, policy, quotas, rate limits, retention, audit records).

Each method answers with what the command's local path has in hand (the platform's info
records, a `BatchRecord`, a quota usage dict, ...), built from the API's answer, so a
command prints one way whichever answered: the same JSON and the same tables. The key
decides the tenant (`tenant`, read once from the API when a command prints it); a command
naming another tenant is refused, never run for the key's own instead.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from wovyr.cli.remote import OverClient, apply_file
from wovyr.store.bulk import BatchItem, BatchRecord

if TYPE_CHECKING:
    from wovyr.engine.agents import AgentRun
    from wovyr.engine.retention import Retention
    from wovyr.platform.mcp import McpServerInfo
    from wovyr.platform.providers import ProviderInfo
    from wovyr.platform.secrets import SecretInfo
    from wovyr.store.audit import AuditRecord
    from wovyr.store.flow import RateLimitRecord
    from wovyr.store.platform import ApiKeyRecord

__all__ = ["RemotePlatform", "dated"]

T = TypeVar("T")
_POLL = 0.2  # seconds between looks at a run or a batch the server works on


def dated(cls: type[T], data: Mapping[str, Any], **extra: Any) -> T:
    """A dataclass `cls` from an API object: its fields that are there, times (`*_at`)
    read back as datetimes, `extra` for the fields the API does not send."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in extra:
            values[f.name] = extra[f.name]
        elif f.name in data:
            value = data[f.name]
            if (f.name == "at" or f.name.endswith("_at")) and isinstance(value, str):
                value = datetime.fromisoformat(value)
            values[f.name] = value
    return cls(**values)


class RemotePlatform(OverClient):
    """The platform commands over `wovyr.client.Client`."""

    @functools.cached_property
    def tenant(self) -> str:
        """The key's tenant (as the server names it; an admin key's)."""
        return str(self.client.get_policy()["tenant"])

    def check_tenant(self, tenant: str) -> None:
        """A command naming `tenant` acts for the key's tenant only."""
        if tenant != self.tenant:
            raise click.UsageError(
                f"through a server the API key decides the tenant: this key acts for tenant "
                f"{self.tenant!r}, not {tenant!r}"
            )

    # --- secrets ----------------------------------------------------------------------------

    def set_secret(self, name: str, value: str) -> SecretInfo:
        from wovyr.platform.secrets import SecretInfo

        return dated(SecretInfo, self.client.put_secret(name, value))

    def list_secrets(self) -> list[SecretInfo]:
        from wovyr.platform.secrets import SecretInfo

        return [dated(SecretInfo, s) for s in self.client.list_secrets()]

    def delete_secret(self, name: str) -> None:
        self.client.delete_secret(name)

    # --- model providers --------------------------------------------------------------------

    def set_provider(self, name: str, fields: Mapping[str, Any]) -> ProviderInfo:
        from wovyr.platform.providers import ProviderInfo

        given = {k: v for k, v in fields.items() if v is not None}
        return dated(ProviderInfo, self.client.put_provider(name, given))

    def list_providers(self) -> list[ProviderInfo]:
        from wovyr.platform.providers import ProviderInfo

        return [dated(ProviderInfo, p) for p in self.client.list_providers()]

    def provider(self, name: str) -> ProviderInfo:
        from wovyr.platform.providers import ProviderInfo

        return dated(ProviderInfo, self.client.get_provider(name))

    def delete_provider(self, name: str) -> None:
        self.client.delete_provider(name)

    # --- MCP servers ------------------------------------------------------------------------

    def add_mcp_server(self, name: str, fields: Mapping[str, Any]) -> McpServerInfo:
        from wovyr.platform.mcp import McpServerInfo

        given = {k: v for k, v in fields.items() if v is not None}
        return dated(McpServerInfo, self.client.put_mcp_server(name, given))

    def list_mcp_servers(self) -> list[McpServerInfo]:
        from wovyr.platform.mcp import McpServerInfo

        return [dated(McpServerInfo, s) for s in self.client.list_mcp_servers()]

    def mcp_server(self, name: str) -> McpServerInfo:
        from wovyr.platform.mcp import McpServerInfo

        return dated(McpServerInfo, self.client.get_mcp_server(name))

    def remove_mcp_server(self, name: str) -> None:
        self.client.delete_mcp_server(name)

    # --- agents -----------------------------------------------------------------------------

    def apply_agent(self, file: Path) -> tuple[str, str, str, str]:
        return apply_file(file, self.client.apply_agent)

    def agents(self) -> list[dict[str, Any]]:
        """The `agents list --json` rows."""
        return [
            {
                "name": a["name"],
                "version": a["version"],
                "hash": a["hash"],
                "model": a["model"],
                "tools": list(a["tools"]),
                "applied_at": datetime.fromisoformat(a["applied_at"]).isoformat(),
            }
            for a in self.client.list_agents()
        ]

    def agent(self, name: str, version: str | None) -> tuple[str, str, str, dict[str, Any]]:
        """(name, version, hash, the document) of a registered agent."""
        found = self.client.get_agent(name, version=version)
        return found["name"], found["version"], found["hash"], dict(found["agent"])

    def run_agent(self, name: str, task: Any, run_id: str | None) -> AgentRun:
        """Start a run and follow it (the server's worker drives it) until it ends or waits
        for the outside world (a signal, an approval): its `AgentRun`."""
        from wovyr.engine.agents import AgentRun

        run = self.client.run_agent(name, task, id=run_id, wait=10)
        while run["status"] not in ("completed", "failed", "cancelled", "continued"):
            view = self.client.get_workflow(run["id"], events=0, follow=False)
            if view["status"] == "waiting" and view.get("pending_waits"):
                break
            time.sleep(_POLL)
            run = self.client.get_agent_run(run["id"])
        else:
            return dated(AgentRun, run)
        return dated(AgentRun, self.client.get_agent_run(run["id"]))

    # --- bulk actions -----------------------------------------------------------------------

    def submit_batch(
        self, action: str, filters: Mapping[str, Any], **extra: Any
    ) -> tuple[bool, BatchRecord]:
        """(created, the batch) of a bulk action: created False when the server answered
        an existing batch (the same key, or the same request still running)."""
        before = {b["id"] for b in self.client.list_batches(limit=200)["items"]}
        out = self.client.submit_batch(action, **filters, **extra)
        return out["id"] not in before, _batch(out)

    def batches(self, limit: int) -> list[BatchRecord]:
        return [_batch(b) for b in self.client.list_batches(limit=limit)["items"]]

    def batch(
        self, batch_id: str, after: int, limit: int, outcome: str | None
    ) -> tuple[BatchRecord, list[BatchItem]]:
        """(the batch, its items) as `wovyr batches show` prints them."""
        found = self.client.get_batch(batch_id, after=after, limit=limit, outcome=outcome)
        return _batch(found), [dated(BatchItem, i) for i in found["items"]]

    def wait_batch(
        self, batch: BatchRecord, progress: Callable[[BatchRecord], None]
    ) -> BatchRecord:
        """Follow a batch the server works on until it is done, calling `progress(batch)`
        each time its counts move."""
        shown = -1
        while not batch.finished:
            time.sleep(_POLL)
            batch = _batch(self.client.get_batch(batch.id, limit=0))
            done = batch.ok + batch.skipped + batch.errors
            if done != shown:
                shown = done
                progress(batch)
        return batch

    # --- tenant administration (an admin key's own tenant) --------------------------------

    def keys(self) -> list[ApiKeyRecord]:
        from wovyr.store.platform import ApiKeyRecord

        return [_key(ApiKeyRecord, k) for k in self.client.list_keys()]

    def create_key(self, role: str, name: str) -> tuple[str, str]:
        made = self.client.create_key(role, name)
        return made["id"], made["token"]

    def revoke_key(self, key_id: str) -> None:
        self.client.revoke_key(key_id)

    def policy(self, changes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The `admin tenants show --json` object (after tightening it by `changes`)."""
        out = self.client.tighten_policy(changes) if changes else self.client.get_policy()
        self.__dict__["tenant"] = out["tenant"]
        return {
            "tenant": out["tenant"],
            "source": out["source"],
            "policy": dict(out["policy"]),
            "seal_payloads": None,  # the host's to see and set
            "updated_at": _iso(out["updated_at"]),
            "updated_by": out["updated_by"],
        }

    def quotas(self, changes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The tenant's quotas and today's usage (after lowering them by `changes`)."""
        out = self.client.lower_quotas(changes) if changes else self.client.get_quotas()
        self.__dict__["tenant"] = out["tenant"]
        return dict(out)

    def set_limit(self, key: str, limit: float, per: float, burst: float | None) -> RateLimitRecord:
        return self._limit(self.client.put_limit(key, limit, per, burst))

    def limits(self) -> list[RateLimitRecord]:
        return [self._limit(r) for r in self.client.list_limits()]

    def delete_limit(self, key: str) -> None:
        self.client.delete_limit(key)

    def _limit(self, data: Mapping[str, Any]) -> RateLimitRecord:
        from wovyr.store.flow import RateLimitRecord

        return RateLimitRecord(
            tenant=self.tenant,
            key=data["key"],
            capacity=data["burst"],
            per_second=data["per_second"],
            tokens=data["tokens"],
            declared=data["declared"],
            updated_by=data["updated_by"] or "",
        )

    def retention(self, days: Any = ..., workflows: Mapping[str, int] | None = None) -> Retention:
        """The tenant's `Retention` (after setting `days` and `workflows`, when given). A
        folder the host exports to is not shown to the tenant: `export_to` then reads
        "(set on the host)"."""
        from wovyr.engine.retention import Retention

        if days is ... and workflows is None:
            out = self.client.get_retention()
        else:
            current = self.client.get_retention()
            out = self.client.set_retention(
                current["days"] if days is ... else days,
                current["workflows"] if workflows is None else workflows,
            )
        self.__dict__["tenant"] = out["tenant"]
        export = "(set on the host)" if out["export"] else None
        return Retention(days=out["days"], workflows=dict(out["workflows"]), export_to=export)

    def audit(self, since: datetime | None, limit: int) -> list[AuditRecord]:
        """The tenant's audit records, oldest first, read through the API's pages; the
        chain's link (`prev_hash`) is the host's (`wovyr admin audit verify`): None here."""
        from wovyr.store.audit import AuditRecord

        found: list[AuditRecord] = []
        after = 0
        while len(found) < limit:
            page = self.client.list_audit(after=after, since=since, limit=min(1000, limit))
            found.extend(dated(AuditRecord, r, prev_hash=None) for r in page["items"])
            if page["next_after"] is None:
                break
            after = page["next_after"]
        return found[:limit]


def _iso(value: Any) -> Any:
    return datetime.fromisoformat(value).isoformat() if isinstance(value, str) else value


def _key(cls: type[T], data: Mapping[str, Any]) -> T:
    return dated(cls, data, key_hash="")


def _batch(data: Mapping[str, Any]) -> BatchRecord:
    """A batch as the API answers it (its counts under `progress`); what the API keeps to
    the server (its cursor, payload, key) left empty."""
    flat = {**data, **data["progress"]}
    kept = {"tenant": "", "fingerprint": "", "payload": None, "idempotency_key": None}
    return dated(BatchRecord, flat, cursor=None, **kept)
