"""Tenants' MCP servers on every store: put replaces (argv and header map kept as given),
get/list/delete, another tenant's server answers exactly like a missing one, and the audit
entry of a change is appended with it (never for a delete that found nothing)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from wovyr.store.audit import AuditEntry
from wovyr.store.base import Store
from wovyr.store.platform import McpServerRecord

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)


def server(tenant: str = "t1", name: str = "files", **kw: object) -> McpServerRecord:
    record = McpServerRecord(
        tenant, name, "stdio", ("python", "-m", "srv", "--x=1 2"), None, {}, AT, "alice"
    )
    return replace(record, **kw)  # type: ignore[arg-type]


def web(tenant: str = "t1", name: str = "web") -> McpServerRecord:
    return McpServerRecord(
        tenant,
        name,
        "http",
        None,
        "https://mcp.example.com/mcp",
        {"Authorization": "MCP_TOKEN", "X-Api-Key": "OTHER"},
        AT,
        "bob",
    )


def entry(action: str) -> AuditEntry:
    return AuditEntry(AT, "t1", "local:tester", action, "files", {})


def test_stored_servers_read_back(store: Store) -> None:
    assert store.get_mcp_server("t1", "files") is None
    store.put_mcp_server(server())
    store.put_mcp_server(web())
    assert store.get_mcp_server("t1", "files") == server()
    assert store.get_mcp_server("t1", "web") == web()
    assert store.list_mcp_servers("t1") == [server(), web()]


def test_put_replaces_every_field(store: Store) -> None:
    store.put_mcp_server(server())
    later = replace(
        web(name="files"), updated_at=AT + timedelta(seconds=5), header_secrets={"A": "B"}
    )
    store.put_mcp_server(later)
    assert store.get_mcp_server("t1", "files") == later


def test_another_tenants_server_is_missing(store: Store) -> None:
    store.put_mcp_server(server(tenant="t1"))
    assert store.get_mcp_server("t2", "files") is None
    assert store.list_mcp_servers("t2") == []
    assert store.delete_mcp_server("t2", "files") is False
    assert store.get_mcp_server("t1", "files") == server()


def test_delete_and_its_audit(store: Store) -> None:
    store.put_mcp_server(server(), audit=entry("mcp.add"))
    assert store.delete_mcp_server("t1", "nothing", audit=entry("mcp.remove")) is False
    assert store.delete_mcp_server("t1", "files", audit=entry("mcp.remove")) is True
    assert store.get_mcp_server("t1", "files") is None
    assert [r.action for r in store.audit_records()] == ["mcp.add", "mcp.remove"]
