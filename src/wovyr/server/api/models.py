"""Request and response bodies of API v1 (they are also its OpenAPI schemas)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "ApproveRequest",
    "BackfillRequest",
    "BackfillResult",
    "BatchDetail",
    "BatchFilterIn",
    "BatchItemOut",
    "BatchList",
    "BatchOut",
    "BatchProgress",
    "BatchRequest",
    "CancelRequest",
    "EventOut",
    "ExecutionDetail",
    "ExecutionPage",
    "ExecutionSummary",
    "HistoryPage",
    "KeyCreate",
    "KeyCreated",
    "KeyOut",
    "NoteRequest",
    "Payload",
    "QueryAnswer",
    "QueryRequest",
    "ScheduleCreate",
    "ScheduleList",
    "ScheduleOut",
    "ScheduleUpdate",
    "SignalRequest",
    "StartRequest",
    "TriggerResult",
]

Name = Field(min_length=1, max_length=200)
Status = Literal["running", "waiting", "completed", "failed", "cancelled", "continued"]
Role = Literal["viewer", "operator", "admin"]
Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"]


def _plausible(value: datetime) -> datetime:
    """Schedule times stay far from datetime's limits, where tick arithmetic overflows."""
    if not 1970 <= value.year <= 9000:
        raise ValueError("a schedule time must be between the years 1970 and 9000")
    return value


When = Annotated[datetime, AfterValidator(_plausible)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartRequest(Strict):
    """Start an execution of an inline definition (YAML or JSON text, or a JSON object) or
    of a registered workflow by name."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "workflow": "order-fulfillment",
                    "input": {"order_id": "A-1"},
                    "labels": {"team": "ops"},
                }
            ]
        },
    )

    definition: str | dict[str, Any] | None = Field(
        None, description="The workflow document: YAML/JSON text or an object."
    )
    workflow: str | None = Field(
        None, min_length=1, max_length=200, description="A registered workflow's name."
    )
    version: str | None = Field(
        None, min_length=1, max_length=100, description="With `workflow`: this version."
    )
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(None, min_length=1, max_length=200, description="Execution id.")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of the execution, for search (`GET ?label=k=v`), over the "
        "definition's rendered `labels`: keys of 1-63 letters, digits, `_.-/`; values of at "
        "most 200 characters; at most 32.",
    )

    priority: int | None = Field(
        None, ge=0, le=9, description="0-9 (default 0): within the tenant, higher is claimed first."
    )


class RerunRequest(Strict):
    """Rerun a finished execution as a new one (linked to it: `rerun_of`)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={"examples": [{"from": "ship", "input": {"order_id": "A-2"}}]},
    )

    start_from: str | None = Field(
        None,
        alias="from",
        min_length=1,
        max_length=200,
        description="Rerun from this activity: the results of the activities upstream of "
        "it that completed are reused (recorded as `ActivityReused`, not run again). "
        "Absent: the whole workflow runs again.",
    )
    input: dict[str, Any] = Field(
        default_factory=dict, description="Inputs overriding the original execution's."
    )
    latest: bool = Field(
        False,
        description="On the newest registered version of the workflow instead of the "
        "execution's own definition; 409, with the reason, when it cannot take the reused "
        "results.",
    )
    id: str | None = Field(None, min_length=1, max_length=200, description="The new id.")


_PINNED = (
    "Not needed: the execution runs on the definition it was pinned to at its start. Older "
    "clients send that definition again (YAML/JSON text or an object): accepted when its "
    "content hash is the pinned one, else 409 `definition-drift` naming both hashes."
)


class SignalRequest(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "paid", "payload": {"amount": 12}}]},
    )

    name: str = Name
    payload: Any = None
    definition: str | dict[str, Any] | None = Field(None, description=_PINNED)


class QueryRequest(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "progress", "args": {}}]},
    )

    name: str = Field(min_length=1, max_length=128, description="The query's name")
    args: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the query function"
    )


class QueryAnswer(BaseModel):
    query: str
    result: Any = Field(description="What the query function answered (JSON)")


class BudgetGrant(Strict):
    tokens: int | None = Field(None, ge=1, description="More input + output tokens")
    cost: float | None = Field(None, gt=0, description="More cost (the provider's prices)")


class ApproveRequest(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"activity": "approve", "approved": True, "comment": "within budget"}]
        },
    )

    activity: str = Name
    approved: bool = True
    comment: str | None = Field(None, max_length=10_000)
    grant: BudgetGrant | None = Field(
        None, description="More budget for an agent paused on its budget (on_exhausted)"
    )
    definition: str | dict[str, Any] | None = Field(None, description=_PINNED)


class CancelRequest(Strict):
    """Why an execution is cancelled (recorded in `ExecutionCancelled`)."""

    reason: str | None = Field(None, max_length=1000, examples=["the order was withdrawn"])


class NoteRequest(Strict):
    note: str | None = Field(None, max_length=10_000)


class Payload(BaseModel):
    """A JSON value in a list: whole when small, else a preview and its size."""

    size: int = Field(description="Bytes of its JSON.")
    truncated: bool
    value: Any = None
    preview: str | None = None


class ExecutionSummary(BaseModel):
    id: str
    workflow: str
    version: str
    status: str = Field(
        description="`running`, `waiting` (it waits for what `waiting_on` says and runs "
        "nothing itself), `completed`, `failed`, `cancelled` or `continued` (ended by "
        "continue-as-new: its chain goes on in the run named `continued_as`)."
    )
    created_at: datetime
    updated_at: datetime
    waiting_on: str | None
    parent_id: str | None
    input: Payload
    output: Payload
    error: Payload
    labels: dict[str, str] = Field(default_factory=dict, description="Set at start.")


_NEXT = "Pass as `cursor` for the next page (None: this is the last)."


class ExecutionPage(BaseModel):
    items: list[ExecutionSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next (older) page.")


class EventOut(BaseModel):
    seq: int
    type: str
    at: datetime
    data: dict[str, Any]


class ExecutionDetail(BaseModel):
    id: str
    workflow: str
    version: str
    status: str = Field(
        description="As in a list (`running`, `waiting`, ...), and `compensating` while it "
        "undoes completed work after a failure (listed as `running`)."
    )
    input: dict[str, Any]
    output: Any
    error: Any = Field(
        description="Why it failed: `type`, `message`, maybe `details` and, for an activity "
        "(here under `error`, and in `activities`), `traceback`: the handler's own frames "
        "as Python prints them (the innermost 20, at most 8,000 characters)."
    )
    created_at: str
    updated_at: str
    definition_hash: str
    parent_id: str | None
    event_count: int
    waiting_on: str | None = Field(
        description="What it waits for while `waiting`, clauses joined by `; `: `child ID`, "
        "`children 2/6 done`, `items 3/10 done`, `retry ACTIVITY attempt N at TIME`, `timer "
        "ACTIVITY fires TIME`, `signal NAME`, `approval ACTIVITY`."
    )
    activities: dict[str, dict[str, Any]] = Field(
        description="By id. A `for_each` activity's `items` are given as far as the page "
        "holds them (WOVYR_MAX_PAGE_BYTES): `items_total` counts them all, and "
        "`items_next` is the index `GET .../activities/{activity}/items?start=` goes on "
        "from (null: all given)."
    )
    pending_waits: list[dict[str, Any]]
    buffered_signals: dict[str, int]
    continued_from: str | None = Field(
        description="Continue-as-new: the run of the chain this run continues."
    )
    continued_as: str | None = Field(
        description="Continue-as-new: the run that continues this one (status `continued`)."
    )
    chain: dict[str, Any] | None = Field(
        description="Continue-as-new: `root`, the chain's logical id (its first run's id: "
        "signals, approvals, cancels and reads addressed to it reach the live run), and "
        "`run`, this run's number (ids: `<root>`, then `<root>~c<run>`)."
    )
    rerun_of: dict[str, Any] | None = Field(
        None,
        description="A rerun: `id`, the execution it reruns, and `from`, the activity it "
        "reruns from (null: all). Its activities with `reused_from` took their results "
        "from that execution.",
    )
    reruns: list[str] = Field(
        default_factory=list, description="The executions that rerun this one, newest first."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Set at start.")
    priority: int = Field(
        0, description="0-9: within the tenant, workers claim higher priority first."
    )
    concurrency: dict[str, Any] | None = Field(
        None,
        description="The workflow's concurrency slot: `key` (evaluated at the start), "
        "`limit`, `on_limit`, and the executions that `holders` the key's slots and are "
        "`waiting` for one, in start order. While it waits, `waiting_on` is `concurrency KEY`; "
        "an activity held by a rate limit or an activity concurrency key shows `rate limit "
        "KEY: next slot in S s` or `concurrency KEY: N running (...)` there.",
    )
    timeline: list[EventOut] = Field(description="The newest events, oldest first.")


class AttemptLogs(BaseModel):
    items: list[dict[str, Any]] = Field(
        description="The attempts that logged or failed, in history order: `seq`, `at`, "
        "`activity`, `index` (an item's), `attempt`, `outcome` (`completed`, `failed`, "
        "`retrying`, ...), `started_at`, `lines` ({at, level, logger, message}: what the "
        "handler logged through `ctx.log` and its module's `logging`, secrets masked, at "
        "most 200 lines), `error` ({type, message}) and `traceback`."
    )
    next_after_seq: int = Field(description="Pass as `after_seq` to read only newer ones.")
    next_cursor: str | None = Field(None, description="Pass as `cursor` to read only newer ones.")
    finished: bool = Field(description="The run has ended: no more will come.")


class HistoryPage(BaseModel):
    items: list[EventOut]
    total: int = Field(description="Events in the whole history.")
    next_after_seq: int | None = Field(description="Pass as `after_seq` for the next page.")
    next_cursor: str | None = Field(None, description=_NEXT)


class ItemsPage(BaseModel):
    items: list[dict[str, Any]] = Field(
        description="Items `start`, `start + 1`, ...: `status`, `attempt`, `output`, "
        "`error`, `child`, as in an execution's `activities`."
    )
    start: int = Field(description="The index of the first item of this page.")
    total: int = Field(description="The activity's items.")
    next_start: int | None = Field(description="Pass as `start` for the next page.")
    next_cursor: str | None = Field(None, description=_NEXT)


class ScheduleCreate(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "id": "nightly-report",
                    "workflow": "report",
                    "cron": "0 3 * * *",
                    "timezone": "Europe/Paris",
                }
            ]
        },
    )

    id: str = Name
    workflow: str | None = Field(None, min_length=1, max_length=200)
    definition: str | dict[str, Any] | None = None
    cron: str | None = Field(None, max_length=200)
    every: str | float | None = None
    timezone: str | None = Field(None, max_length=100)
    offset: str | float | None = None
    overlap: Overlap = "skip"
    catchup_window: str | float = "1m"
    input: dict[str, Any] = Field(default_factory=dict)
    start_at: When | None = None
    end_at: When | None = None
    remaining_actions: int | None = Field(None, ge=0)
    paused: bool = False
    note: str | None = Field(None, max_length=10_000)
    priority: int | None = Field(None, ge=0, le=9, description="Of every execution it starts.")


class ScheduleUpdate(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"every": "15m", "note": "busier season"}]}
    )

    cron: str | None = Field(None, max_length=200)
    every: str | float | None = None
    timezone: str | None = Field(None, max_length=100)
    offset: str | float | None = None
    overlap: Overlap | None = None
    catchup_window: str | float | None = None
    input: dict[str, Any] | None = None
    note: str | None = Field(None, max_length=10_000)
    end_at: When | None = None
    remaining_actions: int | None = Field(None, ge=0)


class ScheduleOut(BaseModel):
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
    start_at: datetime | None
    end_at: datetime | None
    remaining_actions: int | None
    next_fire_at: datetime | None
    next_fire_times: list[datetime]
    last_fire_at: datetime | None
    buffered: list[str]
    recent: list[dict[str, Any]]
    fired: int
    skipped: int
    missed: int
    created_at: datetime
    updated_at: datetime


class ScheduleList(BaseModel):
    items: list[ScheduleOut]


class TriggerResult(BaseModel):
    execution_id: str


class BackfillRequest(Strict):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}]
        },
    )

    start: When
    end: When


class BackfillResult(BaseModel):
    execution_ids: list[str]


class KeyCreate(Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"role": "operator", "name": "ci"}]}
    )

    role: Role
    name: str = Field("", max_length=200)


class KeyOut(BaseModel):
    id: str
    tenant: str
    role: str
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


class KeyCreated(KeyOut):
    token: str = Field(description="The key itself: shown this once, never stored.")


# --- bulk actions ----------------------------------------------------------------------------


class BatchFilterIn(Strict):
    """Which executions: every criterion given must hold (at least one is needed)."""

    status: Status | None = None
    workflow: str | None = Field(None, min_length=1, max_length=200)
    labels: dict[str, str] = Field(default_factory=dict, description="Every one of them.")
    id_prefix: str | None = Field(None, min_length=1, max_length=200)
    since: datetime | None = Field(None, description="Created at or after.")
    until: datetime | None = Field(
        None, description="Created before (never later than the submit time)."
    )


class BatchRequest(Strict):
    """A bulk action over the executions `filter` selects, recorded and run in the
    background in pages. `delete` needs the admin role, the others operator."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "action": "cancel",
                    "filter": {"workflow": "order-fulfillment", "status": "waiting"},
                }
            ]
        },
    )

    action: Literal["cancel", "rerun", "signal", "delete"]
    filter: BatchFilterIn
    signal: str | None = Field(None, min_length=1, max_length=200, description="For `signal`.")
    payload: Any = Field(None, description="The signal's payload (for `signal`).")
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The same key answers the batch it made (and changes nothing).",
    )


class BatchProgress(BaseModel):
    listed: int
    ok: int
    skipped: int
    errors: int
    pending: int
    pages: int
    listed_all: bool


class BatchOut(BaseModel):
    id: str
    action: str
    status: Literal["running", "completed"]
    filter: dict[str, Any]
    signal: str | None
    created_at: datetime
    created_by: str
    updated_at: datetime
    finished_at: datetime | None
    progress: BatchProgress


class BatchItemOut(BaseModel):
    n: int
    execution_id: str
    outcome: Literal["pending", "ok", "skipped", "error"]
    detail: str
    at: datetime | None


class BatchDetail(BatchOut):
    items: list[BatchItemOut]
    next_after: int | None = Field(None, description="Pass as `after` for the next items.")
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next items.")


class BatchList(BaseModel):
    items: list[BatchOut]
    next_cursor: str | None = Field(None, description=_NEXT)
