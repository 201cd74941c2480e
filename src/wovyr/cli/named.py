"""The `list`, `show` and `delete` commands of a tenant's named platform objects (secrets,
model providers, MCP servers), on this host's store or through a server (`--server`): alike
for each kind but for what they call, so made here, once, from the function that does the
local part (its docstring is the command's help)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import click

from wovyr.cli.backend import store_or_server, with_tenant
from wovyr.cli.common import echo_json, echo_listing, echo_result, json_option, tenant_options
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform
    from wovyr.engine.engine import Engine

__all__ = ["listing_command", "removal_command", "showing_command"]


class _Info(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


InfoT = TypeVar("InfoT", bound=_Info)
T = TypeVar("T")


def listing_command(
    group: click.Group,
    columns: Sequence[str],
    row: Callable[[InfoT], Sequence[str]],
    remote: Callable[[RemotePlatform], Sequence[InfoT]],
) -> Callable[[Callable[[Engine], Sequence[InfoT]]], click.Command]:
    """`GROUP list`, of the objects the decorated function lists on this host's store (or
    `remote`, through a server): each one's `to_dict()` under --json, else a table of
    `columns`, a `row` each."""

    def make(local: Callable[[Engine], Sequence[InfoT]]) -> click.Command:
        @group.command("list", help=local.__doc__)
        @json_option
        @tenant_options
        def command(as_json: bool, settings: Settings) -> None:
            found = store_or_server(settings, local, remote)
            echo_listing(as_json, [info.to_dict() for info in found], columns, map(row, found))

        return command

    return make


def showing_command(
    group: click.Group,
    check: Callable[[str, str], str],
    remote: Callable[[RemotePlatform, str], InfoT],
    show: Callable[[InfoT, str], None],
) -> Callable[[Callable[[Engine, str], InfoT]], click.Command]:
    """`GROUP show NAME` of the object NAME that passes `check`, which the decorated function
    finds on this host's store (or `remote`, through a server): its `to_dict()` under
    --json, else what `show` prints of it (and its tenant)."""

    def answer(as_json: bool, name: str, info: InfoT, tenant: str) -> None:
        if as_json:
            echo_json(info.to_dict())
        else:
            show(info, tenant)

    return lambda local: _named_command(group, "show", check, local, remote, answer)


def removal_command(
    group: click.Group,
    verb: str,
    noun: str,
    check: Callable[[str, str], str],
    remote: Callable[[RemotePlatform, str], None],
) -> Callable[[Callable[[Engine, str], None]], click.Command]:
    """`GROUP VERB NAME` (delete, remove) of the `noun` (secret, provider, ...) NAME that
    passes `check`, which the decorated function removes on this host's store (or `remote`,
    through a server): what was done is said, or printed as JSON."""
    done = f"{verb}d"

    def answer(as_json: bool, name: str, _: None, tenant: str) -> None:
        said = f"{done} {noun} {name} of tenant {tenant}"
        echo_result(as_json, {done: name, "tenant": tenant}, said)

    return lambda local: _named_command(group, verb, check, local, remote, answer)


def _named_command(
    group: click.Group,
    verb: str,
    check: Callable[[str, str], str],
    local: Callable[[Engine, str], T],
    remote: Callable[[RemotePlatform, str], T],
    answer: Callable[[bool, str, T, str], None],
) -> click.Command:
    """`GROUP VERB NAME`, with `local`'s docstring as its help: `local` or `remote` acts on
    the NAME that passes `check`, and `answer` prints what they found for the tenant."""

    @group.command(verb, help=local.__doc__)
    @click.argument("name")
    @json_option
    @tenant_options
    def command(name: str, as_json: bool, settings: Settings) -> None:
        check(name, "NAME")
        found, tenant = with_tenant(
            settings, lambda engine: local(engine, name), lambda api: remote(api, name)
        )
        answer(as_json, name, found, tenant)

    return command
