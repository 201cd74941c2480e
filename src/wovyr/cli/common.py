"""Shared CLI plumbing: store options, engine construction, output helpers."""

from __future__ import annotations

import functools
import getpass
import json
import os
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

from wovyr import assemble
from wovyr.cli.main import env_default
from wovyr.cli.target import refuse_remote
from wovyr.engine.labels import parse_label_pairs
from wovyr.errors import InputError
from wovyr.ids import TENANT_RULE, is_tenant
from wovyr.settings import Settings, load_settings

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from wovyr.engine.engine import Engine

__all__ = [
    "applied_at",
    "cli_inputs",
    "cli_labels",
    "cli_timestamp",
    "echo_json",
    "echo_listing",
    "echo_result",
    "echo_table",
    "engine_options",
    "host_engine",
    "input_option",
    "json_log_config",
    "json_option",
    "local_actor",
    "open_engine",
    "plain_console",
    "print_table",
    "status_style",
    "store_options",
    "styled",
    "tenant_options",
    "wait_up_to_option",
]

F = TypeVar("F", bound=Callable[..., Any])


class _LazyConsole:
    """A rich Console made on first use: a command that prints no rich text (`--json`, a
    plain echo) does not load rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None
        self._command: click.Context | None = None

    def _get(self) -> Console:
        # made again for each command (`main` called again in one process): its --color
        ctx = click.get_current_context(silent=True)
        command = ctx.find_root() if ctx is not None else None
        if self._console is None or command is not self._command:
            self._console = plain_console(**self._options)
            self._command = command
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __enter__(self) -> Console:
        return self._get().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._get().__exit__(*exc)


def plain_console(**options: Any) -> Console:
    """A Console that prints every string as it is. Labels, ids, inputs, outputs and error
    texts come from users and workflows, and `[small]`, `job[red]` or `:smile:` in them must
    show as typed (Rich would read them as styles or emoji, and a stray `[/red]` as a broken
    tag that crashes the command). Styles are given as `Text` (`styled`, `status_style`),
    never as markup inside a string."""
    from rich.console import Console

    color: dict[str, dict[str, Any]] = {
        "always": {"force_terminal": True, "no_color": False},
        "never": {"color_system": None},
    }
    options = {**color.get(_color_mode(), {}), **options}
    return Console(markup=False, emoji=False, highlight=False, **options)


def _color_mode() -> str:
    """The command's `--color`: auto (a terminal's colours, none under NO_COLOR, as rich
    does), always (even into a pipe, whatever NO_COLOR says) or never."""
    ctx = click.get_current_context(silent=True)
    return str(ctx.meta.get("wovyr.color", "auto")) if ctx is not None else "auto"


if TYPE_CHECKING:
    console: Console
    err_console: Console
else:
    console = _LazyConsole(soft_wrap=True)  # long ids, paths never broken
    err_console = _LazyConsole(stderr=True)

STATUS_STYLES = {
    "completed": "green",
    "failed": "red",
    "cancelled": "magenta",
    "continued": "blue",
    "running": "cyan",
    "waiting": "yellow",
    "retrying": "yellow",
    "pending": "dim",
    "skipped": "dim",
    "compensating": "yellow",
    "compensated": "blue",
    "compensation_failed": "red",
}


def status_style(status: str) -> Text:
    """`status` in its colour."""
    from rich.text import Text

    return Text(status, style=STATUS_STYLES.get(status, "white"))


def styled(*parts: str | Text | tuple[str, str]) -> Text:
    """One line of plain parts and `(text, style)` parts: the texts are printed as they are,
    whatever brackets they hold."""
    from rich.text import Text

    return Text.assemble(*parts)


def store_options(fn: F) -> F:
    """--db and --home: the command receives `settings` (store URL and home resolved)."""

    @click.option(
        "--db",
        "database_url",
        metavar="URL",
        default=None,
        help="Store URL (sqlite:///path, postgresql://...). Env: WOVYR_DATABASE_URL.",
    )
    @click.option(
        "--home",
        default=None,
        metavar="DIR",
        help="Folder of the embedded store (default ~/.wovyr). Env: WOVYR_HOME.",
    )
    @functools.wraps(fn)
    def wrapper(
        *args: Any,
        database_url: str | None,
        home: str | None,
        activities: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> Any:
        settings = load_settings(database_url=database_url, home=home, activities=activities)
        return fn(*args, settings=settings, **kwargs)

    return wrapper  # type: ignore[return-value]


def engine_options(fn: F) -> F:
    """--db, --home and --activities, shared by every command that opens the engine."""
    return click.option(
        "--activities",
        "-a",
        multiple=True,
        metavar="MODULE",
        help="Module or .py file registering @wovyr.activity handlers (repeatable).",
    )(store_options(fn))


def tenant_options(fn: F) -> F:
    """`engine_options` plus `--tenant` (env `WOVYR_TENANT`, default `default`): the tenant a
    command acts for. Whoever runs the CLI holds the store, so they may act for any tenant
    (docs/security.md); the tenant's side-effect policy still applies to what it runs.
    Through a server (`--server`) the key's tenant is the one: `--tenant` is refused."""

    @click.option(
        "--tenant",
        default=env_default("WOVYR_TENANT"),
        show_default="default",
        metavar="TENANT",
        help="The tenant to act for. Env: WOVYR_TENANT.",
    )
    @functools.wraps(fn)
    def wrapper(*args: Any, tenant: str, settings: Settings, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        given = ctx.get_parameter_source("tenant") == click.core.ParameterSource.COMMANDLINE
        if given and ctx.meta.get("wovyr.remote") is not None:
            raise click.UsageError(
                "through a server the API key decides the tenant: leave out --tenant",
                ctx=ctx,
            )
        if not is_tenant(tenant):
            raise click.BadParameter(TENANT_RULE, param_hint="--tenant")
        return fn(*args, settings=replace(settings, tenant=tenant), **kwargs)

    return engine_options(wrapper)  # type: ignore[return-value]


@contextmanager
def open_engine(settings: Settings, *, load_activities: bool = True) -> Iterator[Engine]:
    """The engine over the configured store, acting for `settings.tenant`. Refused when
    the CLI was given a server (`--server`): a command that has no way through the API
    says so rather than quietly acting on a store on this host."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get("wovyr.remote") is not None:
        raise click.UsageError(
            f"`{ctx.command_path}` does not go through a server yet: run it on the "
            "server's host without --server (and WOVYR_SERVER)",
            ctx=ctx,
        )
    engine = assemble.open_engine(settings, activities=load_activities)
    try:
        yield engine.acting(local_actor())
    finally:
        engine.close()


@contextmanager
def host_engine(settings: Settings, command: str, why: str) -> Iterator[Engine]:
    """`open_engine` (no activities) for a command only the server's host runs: through a
    server it is refused, saying `why` (`refuse_remote`)."""
    refuse_remote(command, why)
    with open_engine(settings, load_activities=False) as engine:
        yield engine


def local_actor() -> str:
    """Who a CLI command's changes are audited as: `local:<the OS user>` (whoever runs the
    CLI holds the store; the chain says which account did it, not that it was allowed)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (a bare container)
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"local:{user}"


# `--json`: the command prints its answer as JSON (the `as_json` argument)
json_option: Callable[[F], F] = click.option("--json", "as_json", is_flag=True)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def echo_result(as_json: bool, value: Any, text: str) -> None:
    """What a command did: `value` as JSON under `--json`, else the line `text`."""
    if as_json:
        echo_json(value)
    else:
        click.echo(text)


def echo_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str | Text]],
    *,
    no_wrap: Collection[str] = (),
) -> None:
    """A table of `columns` (those in `no_wrap` never wrapped), printed by `print_table`."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=column in no_wrap)
    for row in rows:
        table.add_row(*row)
    print_table(table)


def echo_listing(
    as_json: bool,
    data: Any,
    columns: Sequence[str],
    rows: Iterable[Sequence[str | Text]],
    *,
    no_wrap: Collection[str] = (),
) -> None:
    """A list command's answer: `data` as JSON under `--json`, else the table of `rows`."""
    if as_json:
        echo_json(data)
    else:
        echo_table(columns, rows, no_wrap=no_wrap)


def short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def activities_table(activities: dict[str, dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("activity", "kind", "status", "attempt", "output / error"):
        table.add_column(column)
    for aid, act in activities.items():
        detail = act["error"] if act["error"] else act["output"]
        if act["status"] == "waiting" and act.get("wait"):
            detail = act["wait"]
        table.add_row(
            aid,
            act["kind"],
            status_style(act["status"]) + (" (reused)" if act.get("reused_from") else ""),
            str(act["attempt"] or ""),
            "" if detail is None else short(detail),
        )
    return table


def applied_at(row: dict[str, Any]) -> str:
    """When a listed definition or agent was applied (its `applied_at`), to the second."""
    return datetime.fromisoformat(row["applied_at"]).strftime("%Y-%m-%d %H:%M:%S")


def is_tty() -> bool:
    return sys.stdout.isatty()


def print_table(table: Table) -> None:
    """Print a table; outside a terminal (a pipe, a file) nothing is cut or wrapped to fit
    80 columns, so ids can be copied whole."""
    if is_tty():
        console.print(table)
    else:
        plain_console(width=100_000, soft_wrap=True).print(table)


def input_option(help: str | None = None) -> Callable[[F], F]:
    """`-i/--input KEY=VALUE` (repeatable), given to the command as `pairs` (`cli_inputs`)."""
    return click.option("-i", "--input", "pairs", multiple=True, metavar="KEY=VALUE", help=help)


def wait_up_to_option(help: str) -> Callable[[F], F]:
    """`--wait-up-to DURATION` (default 60s) of the commands that drive an execution here."""
    return click.option(
        "--wait-up-to",
        "wait_up_to",
        default="60s",
        show_default=True,
        metavar="DURATION",
        help=help,
    )


def cli_inputs(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """`-i KEY=VALUE` flags as inputs; a malformed one is a usage error (exit 2)."""
    from wovyr.definition.inputs import parse_cli_inputs  # (reads take no inputs)

    try:
        return parse_cli_inputs(list(pairs))
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint="'-i' / '--input'") from None


@overload
def cli_timestamp(value: str, name: str) -> datetime: ...
@overload
def cli_timestamp(value: str | None, name: str) -> datetime | None: ...
def cli_timestamp(value: str | None, name: str) -> datetime | None:
    """An RFC 3339 time given as option `name`; a malformed one is a usage error (exit 2)."""
    if value is None:
        return None
    from wovyr.fields import parse_timestamp  # (pydantic: loaded only for a time given)

    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=name) from None


def cli_labels(pairs: tuple[str, ...] | list[str], flag: str = "--label") -> dict[str, str]:
    """`--label KEY=VALUE` flags as labels; a malformed one is a usage error (exit 2)."""
    try:
        return parse_label_pairs(list(pairs))
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{flag}'") from None


def json_log_config(level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` that writes every record as a JSON line on stderr, with
    the execution, activity and attempt it concerns (`wovyr.activities.logs.JsonLines`)."""
    from wovyr.activities.logs import log_config

    return log_config(True, level)
