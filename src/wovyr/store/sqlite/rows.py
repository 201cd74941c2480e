"""Rows of the SQLite store to records and back (times are integer microseconds)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wovyr.store.base import DefinitionRecord, ExecutionRecord, NewExecution
from wovyr.store.codec import from_micros, loads

__all__ = ["created_record", "definition_record", "execution_record"]


def definition_record(row: Sequence[Any]) -> DefinitionRecord:
    return DefinitionRecord(row[0], row[1], row[2], row[3], from_micros(row[4]), row[5])


def execution_record(row: Sequence[Any], *, with_checkpoint: bool) -> ExecutionRecord:
    return ExecutionRecord(
        id=row[0],
        tenant=row[1],
        workflow=row[2],
        version=row[3],
        definition_hash=row[4],
        status=row[5],
        created_at=from_micros(row[6]),
        updated_at=from_micros(row[7]),
        seq=row[8],
        parent_id=row[9],
        waiting_on=row[10],
        input=loads(row[11]),
        output=loads(row[12]),
        error=loads(row[13]),
        ready=bool(row[14]),
        lease_owner=row[15],
        lease_until=from_micros(row[16]) if row[16] is not None else None,
        fence=row[17],
        checkpoint=loads(row[18]) if with_checkpoint else None,
    )


def created_record(new: NewExecution) -> ExecutionRecord:
    """The row just inserted, without reading it back."""
    step = new.first_step
    return ExecutionRecord(
        id=new.id,
        tenant=new.tenant,
        workflow=new.workflow,
        version=new.version,
        definition_hash=new.definition_hash,
        status=step.status,
        created_at=new.created_at,
        updated_at=step.updated_at,
        seq=len(step.events),
        parent_id=new.parent_id,
        waiting_on=step.waiting_on,
        input=new.input,
        output=step.output,
        error=step.error,
        ready=step.ready,
        lease_owner=new.lease_owner,
        lease_until=new.lease_until,
        fence=1 if new.lease_owner else 0,
        checkpoint=step.checkpoint,
    )
