"""Tenants' MCP servers: add, list, show, remove, and what a worker's attempt may reach.

A server is registered per tenant under a name (`wovyr mcp add NAME --command "..."` or
`--url URL`): a stdio server is the argv of a program the worker starts, an http server a
streamable-HTTP endpoint, with optional headers whose values are secrets of the tenant
(`--header-secret HEADER=SECRET`: the NAME is stored, the value is resolved in the worker at
each call and sent only in that header). Steps name a server as `mcp: {server: NAME, ...}`
or an agent's `tools: [mcp:NAME/TOOL]`. Another tenant's server answers exactly like a
missing one.

A stdio server is a process on the host, so registering one is refused unless the tenant's
side-effect policy lets steps run programs (`shell: true`, and the program in
`shell_commands` when that is a list); the same check runs again at every call, so a policy
tightened later stops servers already registered. Adding and removing are audited (the
caller passes the entry, appended in the transaction of the change).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.mcp import McpAccess, McpServerConfig, check_stdio_allowed
from wovyr.activities.policy import SideEffectPolicy
from wovyr.errors import InputError, KmsError, NotFound, Problem
from wovyr.platform.fields import checked_name, shown_fields
from wovyr.platform.secrets import SECRET_NAME
from wovyr.store.audit import AuditEntry, payload_digest
from wovyr.store.platform import McpServerRecord, McpServerStore

__all__ = [
    "MCP_FIELDS",
    "MCP_SERVER_NAME",
    "McpServerInfo",
    "McpServerMissing",
    "add_mcp_server",
    "audit_details",
    "check_server_name",
    "list_mcp_servers",
    "mcp_server_info",
    "parse_mcp_server",
    "remove_mcp_server",
    "tenant_mcp_access",
]

MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MCP_FIELDS = ("command", "url", "header_secrets")
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
_MAX_URL = 2048
_MAX_ARGS = 256
_MAX_ARG = 4096


class McpServerMissing(NotFound):
    """No such MCP server."""


@dataclass(frozen=True)
class McpServerInfo:
    """What is shown of a server: its secrets' names, never a value."""

    name: str
    transport: str
    command: list[str] | None
    url: str | None
    header_secrets: dict[str, str]
    updated_at: datetime
    updated_by: str

    @classmethod
    def of(cls, record: McpServerRecord) -> McpServerInfo:
        return cls(
            record.name,
            record.transport,
            None if record.command is None else list(record.command),
            record.url,
            dict(record.header_secrets),
            record.updated_at,
            record.updated_by,
        )

    def to_dict(self) -> dict[str, Any]:
        return shown_fields(self)


def audit_details(info: McpServerInfo) -> dict[str, Any]:
    """The audit record of adding a server: its transport, URL, secrets' names, and the
    digest of all its fields (the command may hold anything: only its digest)."""
    fields = info.to_dict()
    del fields["updated_at"], fields["updated_by"]
    return {
        "transport": info.transport,
        "url": info.url,
        "header_secrets": sorted(info.header_secrets.values()),
        "server": payload_digest(fields),
    }


def check_server_name(name: str, path: str = "name") -> str:
    return checked_name(
        name,
        MCP_SERVER_NAME,
        path,
        "an MCP server name is a letter or digit followed by letters, digits, "
        "'_', '.' or '-' (at most 64)",
        "e.g. files, github",
    )


def _command(value: Any, problems: list[Problem]) -> tuple[str, ...] | None:
    """A command as argv: a list of text, or one text split like a shell would (no shell
    runs it)."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            problems.append(Problem(f"the command cannot be split: {exc}", path="command"))
            return None
    if (
        not isinstance(value, list)
        or not value
        or len(value) > _MAX_ARGS
        or not all(isinstance(a, str) and 0 < len(a) <= _MAX_ARG and "\0" not in a for a in value)
    ):
        problems.append(
            Problem(
                "the command is a program and its arguments (text, or a list of text)",
                path="command",
                hint='e.g. --command "npx -y @modelcontextprotocol/server-filesystem /data"',
            )
        )
        return None
    return tuple(value)


def _url(value: Any, problems: list[Problem]) -> str | None:
    if not isinstance(value, str) or not value or len(value) > _MAX_URL:
        problems.append(Problem(f"the URL is text (at most {_MAX_URL})", path="url"))
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        problems.append(Problem("the URL is not a URL", path="url"))
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(
            Problem(
                "the URL must be http:// or https:// with a host",
                path="url",
                hint="e.g. https://mcp.example.com/mcp",
            )
        )
    elif parts.username is not None or parts.password is not None:
        problems.append(
            Problem(
                "the URL must not hold credentials: send them in a header from a secret",
                path="url",
                hint="--header-secret Authorization=SECRET_NAME",
            )
        )
    elif parts.fragment:
        problems.append(Problem("the URL takes no fragment", path="url"))
    return value


def _headers(value: Any, problems: list[Problem]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(
            Problem("header_secrets maps a header to a secret's NAME", "header_secrets")
        )
        return {}
    found: dict[str, str] = {}
    for header, secret in value.items():
        path = f"header_secrets.{header}"
        if not isinstance(header, str) or not _HEADER.match(header):
            problems.append(Problem("not an HTTP header name", path=path))
        elif not isinstance(secret, str) or not SECRET_NAME.match(secret):
            problems.append(
                Problem(
                    "the value is the NAME of a secret of the tenant (a letter or '_' followed "
                    "by letters, digits or '_'), never a value",
                    path=path,
                    hint="wovyr secrets set NAME, then --header-secret HEADER=NAME",
                )
            )
        else:
            found[header] = secret
    return found


def parse_mcp_server(
    tenant: str,
    name: str,
    fields: Mapping[str, Any],
    *,
    policy: SideEffectPolicy,
    by: str,
    at: datetime,
) -> McpServerRecord:
    """The record `fields` (`command` or `url`, and `header_secrets` with a URL) describe,
    or `InputError` naming every problem - a stdio server included, when `policy` (the
    tenant's) does not let steps run its program."""
    check_server_name(name)
    problems = [Problem(f"unknown field {k!r}", path=str(k)) for k in fields]
    problems = [p for p in problems if p.path not in MCP_FIELDS]
    has_command, has_url = fields.get("command") is not None, fields.get("url") is not None
    if has_command == has_url:
        problems.append(
            Problem(
                "give either a command (a stdio server) or a URL (a streamable-HTTP server)",
                path="command" if has_command else "url",
                hint='--command "PROGRAM ARGS..." | --url https://HOST/mcp',
            )
        )
        raise InputError(problems)
    headers = _headers(fields.get("header_secrets"), problems)
    if has_command:
        if headers:
            problems.append(
                Problem("header secrets are sent to an HTTP server only", "header_secrets")
            )
        command = _command(fields["command"], problems)
        if command is not None and not problems:
            try:
                check_stdio_allowed(command, policy)
            except ActivityError as exc:
                problems.append(
                    Problem(
                        f"tenant {tenant!r} may not register a stdio server: {exc.message}",
                        path="command",
                        hint="an admin of the host allows programs for the tenant "
                        "(wovyr admin tenants set), or register the server by URL",
                    )
                )
        if problems:
            raise InputError(problems)
        return McpServerRecord(tenant, name, "stdio", command, None, {}, at, by)
    url = _url(fields["url"], problems)
    if problems:
        raise InputError(problems)
    return McpServerRecord(tenant, name, "http", None, url, headers, at, by)


def add_mcp_server(
    store: McpServerStore, record: McpServerRecord, *, audit: AuditEntry | None = None
) -> McpServerInfo:
    """Store `record` (replacing the tenant's server of that name); `audit` is appended in
    the same transaction."""
    store.put_mcp_server(record, audit=audit)
    return McpServerInfo.of(record)


def mcp_server_info(store: McpServerStore, tenant: str, name: str) -> McpServerInfo:
    check_server_name(name)
    record = store.get_mcp_server(tenant, name)
    if record is None:
        raise McpServerMissing(f"no MCP server {name!r}")
    return McpServerInfo.of(record)


def list_mcp_servers(store: McpServerStore, tenant: str) -> list[McpServerInfo]:
    return [McpServerInfo.of(r) for r in store.list_mcp_servers(tenant)]


def remove_mcp_server(
    store: McpServerStore, tenant: str, name: str, *, audit: AuditEntry | None = None
) -> None:
    """Remove `tenant`'s server `name`; `McpServerMissing` if it has none."""
    check_server_name(name)
    if not store.delete_mcp_server(tenant, name, audit=audit):
        raise McpServerMissing(f"no MCP server {name!r}")


class _SecretResolver(Protocol):
    def resolve_secret(self, tenant: str, name: str) -> str: ...


def _config(record: McpServerRecord) -> McpServerConfig:
    if record.transport == "stdio":
        return McpServerConfig(record.name, "stdio", command=record.command)
    return McpServerConfig(
        record.name, "http", url=record.url, header_secrets=record.header_secrets
    )


def tenant_mcp_access(
    store: McpServerStore, tenant: str, secrets: _SecretResolver | None
) -> McpAccess:
    """The servers `tenant`'s attempt may reach (read now), and its header secrets resolved
    through `secrets` when a call is made."""
    servers = {r.name: _config(r) for r in store.list_mcp_servers(tenant)}

    def headers(config: McpServerConfig) -> dict[str, str]:
        values: dict[str, str] = {}
        for header, secret in config.header_secrets.items():
            if secrets is None:
                raise NonRetryableError(
                    "this worker has no secrets store to resolve MCP header secrets",
                    type="SecretMissing",
                )
            try:
                values[header] = secrets.resolve_secret(tenant, secret)
            except NotFound:
                raise NonRetryableError(
                    f"header {header!r} of MCP server {config.name!r} is secret {secret!r}, "
                    f"which tenant {tenant!r} does not have (wovyr secrets set {secret})",
                    type="SecretMissing",
                ) from None
            except KmsError as exc:
                raise NonRetryableError(
                    f"secret {secret!r} (header {header!r} of MCP server {config.name!r}) "
                    f"cannot be opened: {exc}",
                    type="SecretUnreadable",
                ) from None
        return values

    return McpAccess(servers, headers)
