"""The list commands that answer a page at a time: their `--limit` and `--cursor`, the
cursor they print (`<micros>:<id>`, where the next page starts) and how a page is shown."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from wovyr.cli.common import console, echo_listing

__all__ = ["cursor_position", "echo_page", "next_cursor", "page_options"]

F = TypeVar("F", bound=Callable[..., Any])


def page_options(fn: F) -> F:
    """--limit and --cursor (given to the command as `limit` and `cursor`)."""
    fn = click.option("--cursor", help="The next_cursor of the page before.")(fn)
    return click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)(fn)


def cursor_position(cursor: str | None) -> tuple[Any, str] | None:
    """The position of a cursor this command printed (`<micros>:<id>`)."""
    if not cursor:
        return None
    from wovyr.store.codec import from_micros

    micros, _, ident = cursor.partition(":")
    try:
        return from_micros(int(micros)), ident
    except (ValueError, OverflowError):
        raise click.BadParameter("not a cursor this command printed") from None


def next_cursor(position: tuple[Any, str] | None) -> str | None:
    """The cursor of the page that starts after `position` (None: there is no more)."""
    if position is None:
        return None
    from wovyr.store.codec import to_micros

    return f"{to_micros(position[0])}:{position[1]}"


def echo_page(
    as_json: bool, page: dict[str, Any], columns: Sequence[str], rows: Iterable[Sequence[str]]
) -> None:
    """A page (`items`, `next_cursor`): the page as JSON under `--json`, else the table of
    `rows` and, when there is more, the --cursor of the next page."""
    echo_listing(as_json, page, columns, rows)
    if not as_json and page["next_cursor"]:
        console.print(f"more: --cursor {page['next_cursor']}", markup=False)
