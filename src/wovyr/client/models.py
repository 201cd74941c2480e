"""The shapes of the API's answers, as the client returns them (JSON, typed for checkers).

They mirror the server's response schemas (`/openapi.json`); tests/client/test_drift.py
fails when a key here and a property there part ways. Times are RFC 3339 text, as sent.
Answers without a model here (agents, providers, MCP servers, audit, ...) are `JSONObject`.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "AttemptLogs",
    "BackfillResult",
    "DefinitionApplied",
    "DefinitionDetail",
    "DefinitionOut",
    "Event",
    "Execution",
    "ExecutionPage",
    "ExecutionSummary",
    "HistoryPage",
    "ItemsPage",
    "JSONObject",
    "Payload",
    "QueryAnswer",
    "Schedule",
    "ScheduleList",
    "TriggerResult",
]

JSONObject = dict[str, Any]


class Payload(TypedDict):
    size: int
    truncated: bool
    value: Any
    preview: str | None


class ExecutionSummary(TypedDict):
    id: str
    workflow: str
    version: str
    status: str
    created_at: str
    updated_at: str
    waiting_on: str | None
    parent_id: str | None
    input: Payload
    output: Payload
    error: Payload
    labels: dict[str, str]


class ExecutionPage(TypedDict):
    items: list[ExecutionSummary]
    next_cursor: str | None


class Event(TypedDict):
    seq: int
    type: str
    at: str
    data: dict[str, Any]


class Execution(TypedDict):
    id: str
    workflow: str
    version: str
    status: str
    input: dict[str, Any]
    output: Any
    error: Any
    created_at: str
    updated_at: str
    definition_hash: str
    parent_id: str | None
    event_count: int
    waiting_on: str | None
    activities: dict[str, dict[str, Any]]
    pending_waits: list[dict[str, Any]]
    buffered_signals: dict[str, int]
    continued_from: str | None
    continued_as: str | None
    chain: dict[str, Any] | None
    rerun_of: dict[str, Any] | None
    reruns: list[str]
    labels: dict[str, str]
    priority: int
    concurrency: dict[str, Any] | None
    timeline: list[Event]


class HistoryPage(TypedDict):
    items: list[Event]
    total: int
    next_after_seq: int | None
    next_cursor: str | None


class ItemsPage(TypedDict):
    items: list[dict[str, Any]]
    start: int
    total: int
    next_start: int | None
    next_cursor: str | None


class QueryAnswer(TypedDict):
    query: str
    result: Any


class AttemptLogs(TypedDict):
    items: list[dict[str, Any]]
    next_after_seq: int
    next_cursor: str | None
    finished: bool


class Schedule(TypedDict):
    id: str
    workflow: str
    definition_hash: str | None
    spec: dict[str, Any]
    describe: str
    overlap: str
    catchup_window: float
    paused: bool
    note: str | None
    input: dict[str, Any]
    start_at: str | None
    end_at: str | None
    remaining_actions: int | None
    next_fire_at: str | None
    next_fire_times: list[str]
    last_fire_at: str | None
    buffered: list[str]
    recent: list[dict[str, Any]]
    fired: int
    skipped: int
    missed: int
    created_at: str
    updated_at: str


class ScheduleList(TypedDict):
    items: list[Schedule]


class TriggerResult(TypedDict):
    execution_id: str


class BackfillResult(TypedDict):
    execution_ids: list[str]


class DefinitionOut(TypedDict):
    name: str
    version: str
    hash: str
    applied_at: str


class DefinitionApplied(DefinitionOut):
    result: str


class DefinitionDetail(DefinitionOut):
    definition: dict[str, Any]
