"""Rows to records and records to parameters, once for both SQL stores.

Rows are read by column name (SQLite: `sqlite3.Row`; PostgreSQL: psycopg's `dict_row`), so
a query's column order is its own business. The dialects differ only in how a value is
encoded, which a `Dialect` says: SQLite keeps JSON as text and times as integer
microseconds (UTC); PostgreSQL returns JSON already parsed (the connection parses it with
the codec) and times as `timestamptz`. Parameters are named (`:name` in SQLite,
`%(name)s` in PostgreSQL), so one dict serves both. A record whose fields are its table's
columns is read and written by its fields' names (`from_row`, `to_params`), each field's
annotation saying how its value is encoded; the others have a function of their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from wovyr.store.checkpoints import merged
from wovyr.store.codec import JSON_TEXT, dumps, from_micros, loads, to_micros
from wovyr.store.platform import (
    McpServerRecord,
)
from wovyr.store.records import (
    Claim,
    EventRecord,
    ExecutionRecord,
    NewExecution,
)

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Row",
    "claim_record",
    "created_record",
    "event_record",
    "execution_record",
    "from_row",
    "mcp_server_params",
    "mcp_server_record",
    "to_params",
]

_R = TypeVar("_R")


class Row(Protocol):
    """A row whose columns are read by name (`sqlite3.Row`, a psycopg `dict_row`)."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL store spells parameters and encodes JSON and timestamps."""

    name: str  # `sqlite`, `postgres`: which `x@<name>` blocks of a role's SQL it takes
    params: Callable[[str], str]  # SQL with `:name` parameters -> as the driver takes them
    json: Callable[[Any], Any]  # a JSON column as the driver returns it -> the value
    time: Callable[[Any], datetime]  # a timestamp column -> an aware UTC datetime
    timestamp: Callable[[datetime], Any]  # a datetime -> the parameter the column takes
    array: Callable[[list[Any]], Any]  # a list parameter (SQLite: a JSON array for json_each)

    def time_or_none(self, value: Any) -> datetime | None:
        return None if value is None else self.time(value)

    def timestamp_or_none(self, value: datetime | None) -> Any:
        return None if value is None else self.timestamp(value)


def _as_is(value: Any) -> Any:
    return value


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")  # `:name`, not a `::type` cast


def _pyformat(sql: str) -> str:
    """`:name` -> `%(name)s` (psycopg), a literal `%` doubled."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


_PARAM_CAST = re.compile(r"(?<![:\w])(:[A-Za-z_]\w*)::\w+(\[\])?")


def _sqlite_sql(sql: str) -> str:
    """sqlite3 takes `:name` itself; a parameter's cast (`:name::json`, `:at::timestamptz`,
    which PostgreSQL wants to know the type) has no place here."""
    return _PARAM_CAST.sub(r"\1", sql)


SQLITE = Dialect(
    "sqlite", _sqlite_sql, json=loads, time=from_micros, timestamp=to_micros, array=dumps
)
POSTGRES = Dialect("postgres", _pyformat, json=_as_is, time=_utc, timestamp=_as_is, array=_as_is)


# --- records read by their fields' names ---------------------------------------------------


_Codec = Callable[[Dialect, Any], Any]  # (dialect, value) -> value
_FIELDS: dict[type, tuple[tuple[str, _Codec, _Codec], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, _Codec, _Codec], ...]:
    """(name, read, write) of each field of the dataclass `cls`: how `from_row` reads its
    column and `to_params` writes it, by the field's annotation."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    out: list[tuple[str, _Codec, _Codec]] = []
    for f in fields(cls):
        kind = str(f.type).removesuffix(" | None")
        read: _Codec = _as_stored
        write: _Codec = _as_stored
        if f.metadata == JSON_TEXT:
            read, write = (_text_tuple if kind.startswith("tuple[") else _text_json), _json_text
        elif kind == "datetime":
            read, write = Dialect.time_or_none, Dialect.timestamp_or_none
        elif kind.startswith(("dict[", "Any")):
            read, write = _maybe_json, _json_text
        elif kind.startswith("tuple["):
            read, write = _json_tuple, _json_text
        elif kind in _PLAIN:
            read = _as_kind(_PLAIN[kind])
        out.append((f.name, read, write))
    return _FIELDS.setdefault(cls, tuple(out))


_PLAIN: dict[str, Callable[[Any], Any]] = {"bool": bool, "int": int, "float": float, "bytes": bytes}


def _as_kind(kind: Callable[[Any], Any]) -> _Codec:
    return lambda _d, value: None if value is None else kind(value)


def _as_stored(_d: Dialect, value: Any) -> Any:
    return value


def _maybe_json(d: Dialect, value: Any) -> Any:
    return None if value is None else d.json(value)


def _json_tuple(d: Dialect, value: Any) -> tuple[Any, ...]:
    return tuple(d.json(value))


def _text_json(_d: Dialect, value: Any) -> Any:
    return loads(value) if isinstance(value, str) else value


def _text_tuple(d: Dialect, value: Any) -> tuple[Any, ...]:
    return tuple(_text_json(d, value))


def _json_text(_d: Dialect, value: Any) -> Any:
    return None if value is None else dumps(list(value) if type(value) is tuple else value)


def from_row(cls: type[_R], row: Row, d: Dialect) -> _R:
    """The record `cls` (a dataclass) of `row`, each field from the column of its name, read
    as its annotation says: a `datetime` as a time, `bool`, `int`, `float` and `bytes` as
    such, a `dict`, a `tuple` or `Any` from JSON (from JSON text in both stores where the
    field's metadata is `JSON_TEXT`); any of them may be None where the column is NULL (but
    a tuple's)."""
    return cls(**{name: read(d, row[name]) for name, read, _ in _fields(cls)})


def to_params(record: Any, d: Dialect) -> dict[str, Any]:
    """The parameters of the record `record` (a dataclass), one a field by its name, written
    as its annotation says (as `from_row` reads them): a `datetime` as the column's time, a
    `dict`, a `tuple` or `Any` as JSON text, the others as they are; None stays None."""
    return {name: write(d, getattr(record, name)) for name, _, write in _fields(type(record))}


# --- executions, events, timers, claims ----------------------------------------------------


def execution_record(
    row: Row, d: Dialect, *, with_checkpoint: bool, checkpoint: dict[str, Any] | None = None
) -> ExecutionRecord:
    """The record of `row`; with `with_checkpoint`, its checkpoint (`checkpoint` when the
    store read it apart, else the row's: see `stored_checkpoint`)."""
    if with_checkpoint and checkpoint is None:
        checkpoint = stored_checkpoint(row, d)
    return ExecutionRecord(
        id=row["id"],
        tenant=row["tenant"],
        workflow=row["workflow"],
        version=row["version"],
        definition_hash=row["definition_hash"],
        status=row["status"],
        created_at=d.time(row["created_at"]),
        updated_at=d.time(row["updated_at"]),
        seq=row["seq"],
        parent_id=row["parent_id"],
        waiting_on=row["waiting_on"],
        input=d.json(row["input"]),
        output=d.json(row["output"]),
        error=d.json(row["error"]),
        ready=bool(row["ready"]),
        lease_owner=row["lease_owner"],
        lease_until=d.time_or_none(row["lease_until"]),
        fence=row["fence"],
        checkpoint=checkpoint,
        labels=_labels(row, d),
    )


def _labels(row: Row, d: Dialect) -> dict[str, str]:
    """The labels column, where the query reads it (lists and loads); else none."""
    try:
        value = row["labels"]
    except (KeyError, IndexError):
        return {}
    return dict(d.json(value) or {}) if value is not None else {}


_FROM_NEW = (
    "id", "tenant", "workflow", "version", "definition_hash", "created_at", "parent_id",
    "input", "lease_owner", "lease_until",
)  # fmt: skip
_FROM_STEP = ("status", "updated_at", "waiting_on", "output", "error", "ready", "checkpoint")


def created_record(new: NewExecution) -> ExecutionRecord:
    """The row just inserted, without reading it back: the new execution's fields, and its
    first step's."""
    step = new.first_step
    return ExecutionRecord(
        **{name: getattr(new, name) for name in _FROM_NEW},
        **{name: getattr(step, name) for name in _FROM_STEP},
        seq=len(step.events),
        fence=1 if new.lease_owner else 0,
        labels=dict(new.labels),
    )


def event_record(execution_id: str, row: Row, d: Dialect) -> EventRecord:
    at, data = d.time(row["at"]), d.json(row["data"])
    return EventRecord(execution_id, row["seq"], row["type"], at, data)


def claim_record(row: Row, d: Dialect, checkpoint: dict[str, Any] | None = None) -> Claim:
    if checkpoint is None:
        checkpoint = stored_checkpoint(row, d)
    return Claim(
        row["id"], row["fence"], row["seq"], checkpoint, row["definition_hash"], row["tenant"]
    )


def stored_checkpoint(row: Row, d: Dialect) -> dict[str, Any]:
    """The row's checkpoint column, with the deltas its query read beside it (a
    `checkpoint_deltas` column: a list, oldest first, or null) folded in."""
    base: dict[str, Any] = d.json(row["checkpoint"])
    try:
        deltas = row["checkpoint_deltas"]
    except (KeyError, IndexError):
        return base
    return merged(base, d.json(deltas)) if deltas else base


# --- MCP servers ---------------------------------------------------------------------------


def mcp_server_record(row: Row, d: Dialect) -> McpServerRecord:
    command = row["command"]
    headers = row["header_secrets"]
    if isinstance(command, str):
        command = json.loads(command)
    if isinstance(headers, str):
        headers = json.loads(headers)
    return McpServerRecord(
        tenant=row["tenant"],
        name=row["name"],
        transport=row["transport"],
        command=None if command is None else tuple(str(a) for a in command),
        url=row["url"],
        header_secrets={str(k): str(v) for k, v in (headers or {}).items()},
        updated_at=d.time(row["updated_at"]),
        updated_by=row["updated_by"],
    )


def mcp_server_params(record: McpServerRecord, d: Dialect) -> dict[str, Any]:
    """The command and headers as JSON text (SQLite `TEXT`, PostgreSQL `jsonb` via a cast)."""
    command = None if record.command is None else json.dumps(list(record.command))
    return {
        "tenant": record.tenant,
        "name": record.name,
        "transport": record.transport,
        "command": command,
        "url": record.url,
        "header_secrets": json.dumps(record.header_secrets, sort_keys=True),
        "updated_at": d.timestamp(record.updated_at),
        "updated_by": record.updated_by,
    }
