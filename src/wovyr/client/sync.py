"""`Client`: the whole HTTP API of a Wovyr server (blocking calls).

GENERATED from wovyr/client/aio.py by scripts/unasync_client.py: do not edit by hand.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from time import sleep
from types import TracebackType
from typing import Any, cast
from urllib.parse import quote

import httpx

from wovyr.client.base import (
    DEFAULT_TIMEOUT,
    ENDED,
    SERVER_ENV,
    Retry,
    SseDecoder,
    StreamMessage,
    api_key_from,
    error_of,
    headers_of,
    query,
    tls_context,
    unreachable,
)
from wovyr.client.models import (
    AttemptLogs,
    BackfillResult,
    DefinitionApplied,
    DefinitionDetail,
    DefinitionOut,
    Event,
    Execution,
    ExecutionPage,
    ExecutionSummary,
    HistoryPage,
    ItemsPage,
    JSONObject,
    QueryAnswer,
    Schedule,
    ScheduleList,
    TriggerResult,
)
from wovyr.errors import ConfigError
from wovyr.settings import read

__all__ = ["Client"]

_V1 = "/api/v1"


def _part(value: str) -> str:
    """One path segment: a name with `/` or `?` in it stays one segment."""
    return quote(value, safe="")


def _time(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def _document(document: str | Mapping[str, Any]) -> dict[str, Any]:
    """A YAML text goes as `application/yaml`, an object as JSON."""
    if isinstance(document, str):
        return {"content": document.encode(), "headers": {"Content-Type": "application/yaml"}}
    return {"json": dict(document)}


def _if_match(etag: str | None) -> dict[str, str]:
    return {"If-Match": etag} if etag is not None else {}


def _some(**fields: Any) -> dict[str, Any]:
    """A JSON body of the fields given (None: left to the server's default)."""
    return {k: v for k, v in fields.items() if v is not None}


class Client:
    """A Wovyr server's API. `base_url` defaults to `WOVYR_SERVER`, `api_key` to
    `WOVYR_API_KEY`; the key's tenant and role decide what it may see and do. Errors are
    `wovyr.errors`: `NotFound`, `Conflict`, `QuotaExceeded` (`retry_after`),
    `RequestInvalid` (`problems`), `AccessDenied`, `ServerError`, `ServerUnreachable`.

    A 429 or 503 is asked again after its `Retry-After`, within `retry` (`Retry`: 3 more
    times, waits up to 60 s; `Retry(attempts=0)`: never).

    Use it as a context manager, or call `close()`. `transport` is httpx's (tests pass
    an ASGI transport to talk to an app in-process)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        retry: Retry | None = None,
    ) -> None:
        url = base_url or read(SERVER_ENV)
        if not url:
            raise ConfigError(f"no server URL: pass base_url or set {SERVER_ENV}")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"the server URL must start with http:// or https://: {url!r}")
        self.base_url = url.rstrip("/")
        self.retry = retry or Retry()
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers_of(api_key_from(api_key)),
            timeout=timeout,
            transport=transport,
            verify=tls_context(),
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- transport ---------------------------------------------------------------------------

    def _send(
        self, method: str, path: str, *, allow: tuple[int, ...] = (), **options: Any
    ) -> httpx.Response:
        tried = 0
        while True:
            try:
                response = self._http.request(method, path, **options)
            except httpx.TransportError as exc:
                raise unreachable(self.base_url, exc) from None
            wait = self.retry.delay(response, tried)
            if wait is None:
                break
            tried += 1
            if self.retry.on_retry is not None:
                self.retry.on_retry(tried, wait, response)
            sleep(wait)
        if response.status_code >= 400 and response.status_code not in allow:
            raise error_of(response)
        return response

    def _json(self, method: str, path: str, **options: Any) -> Any:
        return (self._send(method, path, **options)).json()

    # --- workflows -----------------------------------------------------------------------------

    def start_workflow(
        self,
        definition: str | Mapping[str, Any] | None = None,
        *,
        workflow: str | None = None,
        version: str | None = None,
        input: Mapping[str, Any] | None = None,
        id: str | None = None,
        labels: Mapping[str, str] | None = None,
        priority: int | None = None,
        idempotency_key: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> Execution:
        """Start an execution of `definition` (YAML/JSON text or an object) or of the
        registered `workflow` (its latest version, or `version`). With the same `id` or
        `idempotency_key` again, the existing execution answers. `traceparent` and
        `tracestate` (W3C trace context): with tracing on, the start continues that trace."""
        body = _some(
            definition=dict(definition) if isinstance(definition, Mapping) else definition,
            workflow=workflow,
            version=version,
            input=dict(input) if input is not None else None,
            id=id,
            labels=dict(labels) if labels is not None else None,
            priority=priority,
        )
        headers = _some(
            **{
                "Idempotency-Key": idempotency_key,
                "traceparent": traceparent,
                "tracestate": tracestate,
            }
        )
        return cast(Execution, self._json("POST", f"{_V1}/workflows", json=body, headers=headers))

    def list_workflows(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        labels: Mapping[str, str] | None = None,
        id_prefix: str | None = None,
        name: str | None = None,
    ) -> ExecutionPage:
        """A page of executions, newest first; pass `next_cursor` back as `cursor`."""
        params = query(
            workflow=workflow,
            status=status,
            created_after=_time(created_after),
            created_before=_time(created_before),
            limit=limit,
            cursor=cursor,
            label=[f"{k}={v}" for k, v in labels.items()] if labels else None,
            id_prefix=id_prefix,
            name=name,
        )
        return cast(ExecutionPage, self._json("GET", f"{_V1}/workflows", params=params))

    def get_workflow(
        self, execution_id: str, *, events: int | None = None, follow: bool | None = None
    ) -> Execution:
        """One execution with its newest `events` (default 50) in `timeline`; a run that
        continued as new answers with its chain's live run unless `follow=False`."""
        params = query(events=events, follow=follow)
        path = f"{_V1}/workflows/{_part(execution_id)}"
        return cast(Execution, self._json("GET", path, params=params))

    def cancel_workflow(self, execution_id: str, *, reason: str | None = None) -> Execution:
        """Cancel (durable when this returns); `Conflict` when it has already finished."""
        path = f"{_V1}/workflows/{_part(execution_id)}/cancel"
        return cast(Execution, self._json("POST", path, json=_some(reason=reason)))

    def get_history(
        self,
        execution_id: str,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        follow: bool | None = None,
        cursor: str | None = None,
    ) -> HistoryPage:
        """A page of events after `after_seq` or `cursor` (a page's `next_cursor`; default:
        the newest page)."""
        params = query(after_seq=after_seq, limit=limit, follow=follow, cursor=cursor)
        path = f"{_V1}/workflows/{_part(execution_id)}/history"
        return cast(HistoryPage, self._json("GET", path, params=params))

    def get_items(
        self,
        execution_id: str,
        activity: str,
        *,
        start: int | None = None,
        limit: int | None = None,
        follow: bool | None = None,
        cursor: str | None = None,
    ) -> ItemsPage:
        """A page of the items of the `for_each` activity `activity` from index `start`
        (an execution's `activities[activity]["items_next"]` says where its detail stopped);
        `next_start` (or `next_cursor`, as `cursor`) goes on."""
        params = query(start=start, limit=limit, follow=follow, cursor=cursor)
        path = f"{_V1}/workflows/{_part(execution_id)}/activities/{_part(activity)}/items"
        return cast(ItemsPage, self._json("GET", path, params=params))

    def get_logs(
        self,
        execution_id: str,
        *,
        after_seq: int | None = None,
        follow: bool | None = None,
        cursor: str | None = None,
    ) -> AttemptLogs:
        """The attempts that logged or failed, ended after `after_seq` (or `cursor`)."""
        params = query(after_seq=after_seq, follow=follow, cursor=cursor)
        path = f"{_V1}/workflows/{_part(execution_id)}/logs"
        return cast(AttemptLogs, self._json("GET", path, params=params))

    def stream_workflow(
        self, execution_id: str, *, after: str | None = None
    ) -> Iterator[StreamMessage]:
        """The live stream: events as they commit, model text as it streams, then `end`.
        `after` is a message's `id`: the stream goes on exactly after it."""
        path = f"{_V1}/workflows/{_part(execution_id)}/stream"
        headers = {"Accept": "text/event-stream"}
        if after:
            headers["Last-Event-ID"] = after
        try:
            with self._http.stream("GET", path, headers=headers, timeout=None) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_of(response)
                decoder = SseDecoder()
                for line in response.iter_lines():
                    message = decoder.feed(line)
                    if message is not None:
                        yield message
                        if message.event == "end":
                            return
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, exc) from None

    def query_workflow(
        self, execution_id: str, name: str, args: Mapping[str, Any] | None = None
    ) -> QueryAnswer:
        """Answer the query `name` of a workflow function's execution (`@wf.query`), with
        `args`, from a replay that records nothing."""
        path = f"{_V1}/workflows/{_part(execution_id)}/query"
        body = {"name": name, "args": dict(args or {})}
        return cast(QueryAnswer, self._json("POST", path, json=body))

    def signal_workflow(
        self,
        execution_id: str,
        name: str,
        payload: Any = None,
        *,
        definition: str | Mapping[str, Any] | None = None,
    ) -> Execution:
        """Send signal `name` (buffered until a wait consumes it). `definition` is never
        needed (the execution runs on its pinned one); sent, it must be that one (else
        `Conflict`: definition drift)."""
        path = f"{_V1}/workflows/{_part(execution_id)}/signal"
        body = _some(name=name, definition=definition)
        body["payload"] = payload
        return cast(Execution, self._json("POST", path, json=body))

    def approve_workflow(
        self,
        execution_id: str,
        activity: str,
        *,
        approved: bool = True,
        comment: str | None = None,
        grant_tokens: int | None = None,
        grant_cost: float | None = None,
        definition: str | Mapping[str, Any] | None = None,
    ) -> Execution:
        """Decide the approval `activity` (recorded as decided by the key's actor); an agent
        paused on its budget gets `grant_tokens`/`grant_cost` more. `definition`: as for
        `signal_workflow`."""
        grant = _some(tokens=grant_tokens, cost=grant_cost)
        body = _some(
            activity=activity,
            approved=approved,
            comment=comment,
            grant=grant or None,
            definition=definition,
        )
        path = f"{_V1}/workflows/{_part(execution_id)}/approve"
        return cast(Execution, self._json("POST", path, json=body))

    def rerun_workflow(
        self,
        execution_id: str,
        *,
        start_from: str | None = None,
        input: Mapping[str, Any] | None = None,
        latest: bool = False,
        id: str | None = None,
    ) -> Execution:
        """Start a new execution that reruns a finished one (from `start_from`: the results
        upstream of it are reused)."""
        body = _some(input=dict(input) if input is not None else None, latest=latest or None, id=id)
        if start_from is not None:
            body["from"] = start_from
        path = f"{_V1}/workflows/{_part(execution_id)}/rerun"
        return cast(Execution, self._json("POST", path, json=body))

    # --- built on the operations: waiting and paging -------------------------------------

    def wait_for_result(
        self, execution_id: str, *, timeout: float | None = None, interval: float = 1.0
    ) -> Execution:
        """The execution once it has ended (`completed`, `failed` or `cancelled`; a chain
        that continued as new: its last run), read every `interval` seconds at most (sooner
        at first). Its `output` is the result, its `error` why it failed: a failure is an
        answer here, not an exception. `TimeoutError` after `timeout` seconds (None: wait
        as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = min(0.05, interval)
        while True:
            execution = self.get_workflow(execution_id, events=0)
            if execution["status"] in ENDED:
                return execution
            if deadline is not None and time.monotonic() + pause > deadline:
                raise TimeoutError(
                    f"execution {execution_id} is still {execution['status']} after {timeout} s"
                )
            sleep(pause)
            pause = min(pause * 2, interval)

    def iter_workflows(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
        labels: Mapping[str, str] | None = None,
        id_prefix: str | None = None,
        name: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[ExecutionSummary]:
        """Every execution the filters select, newest first, a page (`page_size`) at a time."""
        cursor = None
        while True:
            page = self.list_workflows(
                workflow=workflow,
                status=status,
                created_after=created_after,
                created_before=created_before,
                labels=labels,
                id_prefix=id_prefix,
                name=name,
                limit=page_size,
                cursor=cursor,
            )
            yield from page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def iter_history(
        self, execution_id: str, *, follow: bool | None = None, page_size: int | None = None
    ) -> Iterator[Event]:
        """Every event of an execution so far, oldest first, a page at a time."""
        page = self.get_history(execution_id, after_seq=0, limit=page_size, follow=follow)
        while True:
            yield from page["items"]
            if page["next_cursor"] is None:
                return
            page = self.get_history(
                execution_id, cursor=page["next_cursor"], limit=page_size, follow=follow
            )

    def iter_batches(self, *, page_size: int | None = None) -> Iterator[JSONObject]:
        """Every batch of the tenant, newest first."""
        yield from self._pages(f"{_V1}/batches", query(limit=page_size))

    def iter_audit(
        self, *, since: datetime | str | None = None, page_size: int | None = None
    ) -> Iterator[JSONObject]:
        """Every audit record of the tenant (from `since`), oldest first (admin keys)."""
        params = query(since=_time(since), limit=page_size)
        yield from self._pages(f"{_V1}/audit", params)

    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[JSONObject]:
        """The items of a list that pages with `cursor` and `next_cursor`."""
        while True:
            page = self._json("GET", path, params=params)
            yield from page["items"]
            if page.get("next_cursor") is None:
                return
            params = {**params, "cursor": page["next_cursor"]}

    # --- bulk actions --------------------------------------------------------------------------

    def submit_batch(
        self,
        action: str,
        *,
        status: str | None = None,
        workflow: str | None = None,
        labels: Mapping[str, str] | None = None,
        id_prefix: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        signal: str | None = None,
        payload: Any = None,
        idempotency_key: str | None = None,
    ) -> JSONObject:
        """A bulk `action` (`cancel`, `rerun`, `signal`, `delete`) over the executions the
        filter selects (every criterion given must hold), run by the server in the
        background; the same `idempotency_key` answers the batch it made."""
        selected = _some(
            status=status,
            workflow=workflow,
            labels=dict(labels) if labels else None,
            id_prefix=id_prefix,
            since=_time(since),
            until=_time(until),
        )
        body = _some(
            action=action,
            filter=selected,
            signal=signal,
            payload=payload,
            idempotency_key=idempotency_key,
        )
        return cast(JSONObject, self._json("POST", f"{_V1}/batches", json=body))

    def list_batches(self, *, limit: int | None = None, cursor: str | None = None) -> JSONObject:
        """A page of batches, newest first (`items`; `next_cursor`: pass it as `cursor`)."""
        params = query(limit=limit, cursor=cursor)
        return cast(JSONObject, self._json("GET", f"{_V1}/batches", params=params))

    def get_batch(
        self,
        batch_id: str,
        *,
        after: int | None = None,
        limit: int | None = None,
        outcome: str | None = None,
        cursor: str | None = None,
    ) -> JSONObject:
        """One batch: its progress and its items numbered above `after` or from `cursor`
        (`next_cursor` goes on)."""
        params = query(after=after, limit=limit, outcome=outcome, cursor=cursor)
        path = f"{_V1}/batches/{_part(batch_id)}"
        return cast(JSONObject, self._json("GET", path, params=params))

    # --- definitions ---------------------------------------------------------------------------

    def apply_definition(
        self, document: str | Mapping[str, Any], *, if_match: str | None = None
    ) -> DefinitionApplied:
        """Register a workflow document under its name and version (`result`: `applied` or
        `unchanged`); `Conflict` when that name and version hold other content. `if_match`
        (`'"<hash>"'` of the name's latest version, or `*`): `Conflict` (a 412) when
        another version was applied since."""
        options = _document(document)
        options["headers"] = {**options.get("headers", {}), **_if_match(if_match)}
        return cast(DefinitionApplied, self._json("POST", f"{_V1}/definitions", **options))

    def list_definitions(self) -> list[DefinitionOut]:
        return cast(list[DefinitionOut], self._json("GET", f"{_V1}/definitions"))

    def get_definition(self, name: str, version: str | None = None) -> DefinitionDetail:
        """A registered definition: its latest version, or `version`."""
        path = f"{_V1}/definitions/{_part(name)}"
        if version is not None:
            path += f"/{_part(version)}"
        return cast(DefinitionDetail, self._json("GET", path))

    # --- agents --------------------------------------------------------------------------------

    def apply_agent(self, document: str | Mapping[str, Any]) -> JSONObject:
        return cast(JSONObject, self._json("POST", f"{_V1}/agents", **_document(document)))

    def list_agents(self) -> list[JSONObject]:
        return cast(list[JSONObject], self._json("GET", f"{_V1}/agents"))

    def get_agent(self, agent: str, *, version: str | None = None) -> JSONObject:
        path = f"{_V1}/agents/{_part(agent)}"
        return cast(JSONObject, self._json("GET", path, params=query(version=version)))

    def run_agent(
        self,
        agent: str,
        input: Any = None,
        *,
        id: str | None = None,
        wait: float | None = None,
        respond_async: bool = False,
    ) -> JSONObject:
        """Run an agent on `input`; the answer comes when it ends or after `wait` seconds
        (`status` says which), at once with `respond_async`. Poll `get_agent_run`."""
        headers = {"Prefer": "respond-async"} if respond_async else None
        path = f"{_V1}/agents/{_part(agent)}/runs"
        return cast(
            JSONObject,
            self._json(
                "POST",
                path,
                json=_some(input=input, id=id),
                params=query(wait=wait),
                headers=headers,
            ),
        )

    def get_agent_run(self, run_id: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/agents/runs/{_part(run_id)}"))

    # --- agents' memory --------------------------------------------------------------------------

    def list_memory(
        self,
        namespace: str,
        *,
        prefix: str | None = None,
        after: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JSONObject:
        """The live items of a memory namespace, by key (`next_cursor`: pass it as
        `cursor`; `next`, as `after`)."""
        params = query(prefix=prefix, after=after, limit=limit, cursor=cursor)
        path = f"{_V1}/memory/{_part(namespace)}"
        return cast(JSONObject, self._json("GET", path, params=params))

    def get_memory(self, namespace: str, key: str) -> JSONObject:
        path = f"{_V1}/memory/{_part(namespace)}/{_part(key)}"
        return cast(JSONObject, self._json("GET", path))

    def delete_memory(self, namespace: str, key: str) -> None:
        self._send("DELETE", f"{_V1}/memory/{_part(namespace)}/{_part(key)}")

    # --- schedules -----------------------------------------------------------------------------

    def create_schedule(
        self,
        id: str,
        *,
        workflow: str | None = None,
        definition: str | Mapping[str, Any] | None = None,
        cron: str | None = None,
        every: str | float | None = None,
        timezone: str | None = None,
        offset: str | float | None = None,
        overlap: str | None = None,
        catchup_window: str | float | None = None,
        input: Mapping[str, Any] | None = None,
        start_at: datetime | str | None = None,
        end_at: datetime | str | None = None,
        remaining_actions: int | None = None,
        paused: bool | None = None,
        note: str | None = None,
        priority: int | None = None,
    ) -> Schedule:
        """A schedule of the registered `workflow` (its latest version at each fire) or of
        `definition` (pinned now), on `cron` or `every`."""
        body = _some(
            id=id,
            workflow=workflow,
            definition=dict(definition) if isinstance(definition, Mapping) else definition,
            cron=cron,
            every=every,
            timezone=timezone,
            offset=offset,
            overlap=overlap,
            catchup_window=catchup_window,
            input=dict(input) if input is not None else None,
            start_at=_time(start_at),
            end_at=_time(end_at),
            remaining_actions=remaining_actions,
            paused=paused,
            note=note,
            priority=priority,
        )
        return cast(Schedule, self._json("POST", f"{_V1}/schedules", json=body))

    def list_schedules(self) -> ScheduleList:
        return cast(ScheduleList, self._json("GET", f"{_V1}/schedules"))

    def get_schedule(self, schedule_id: str) -> Schedule:
        return cast(Schedule, self._json("GET", f"{_V1}/schedules/{_part(schedule_id)}"))

    def update_schedule(
        self,
        schedule_id: str,
        *,
        cron: str | None = None,
        every: str | float | None = None,
        timezone: str | None = None,
        offset: str | float | None = None,
        overlap: str | None = None,
        catchup_window: str | float | None = None,
        input: Mapping[str, Any] | None = None,
        note: str | None = None,
        end_at: datetime | str | None = None,
        remaining_actions: int | None = None,
        if_match: str | None = None,
    ) -> Schedule:
        """Change what is given (None: unchanged); `if_match`: the schedule's ETag when the
        change was decided (`Conflict` (a 412) when it changed since)."""
        body = _some(
            cron=cron,
            every=every,
            timezone=timezone,
            offset=offset,
            overlap=overlap,
            catchup_window=catchup_window,
            input=dict(input) if input is not None else None,
            note=note,
            end_at=_time(end_at),
            remaining_actions=remaining_actions,
        )
        path = f"{_V1}/schedules/{_part(schedule_id)}"
        headers = _if_match(if_match)
        return cast(Schedule, self._json("PATCH", path, json=body, headers=headers))

    def delete_schedule(self, schedule_id: str, *, if_match: str | None = None) -> None:
        path = f"{_V1}/schedules/{_part(schedule_id)}"
        self._send("DELETE", path, headers=_if_match(if_match))

    def pause_schedule(
        self, schedule_id: str, note: str | None = None, *, if_match: str | None = None
    ) -> Schedule:
        path = f"{_V1}/schedules/{_part(schedule_id)}/pause"
        headers = _if_match(if_match)
        return cast(Schedule, self._json("POST", path, json={"note": note}, headers=headers))

    def resume_schedule(
        self, schedule_id: str, note: str | None = None, *, if_match: str | None = None
    ) -> Schedule:
        path = f"{_V1}/schedules/{_part(schedule_id)}/resume"
        headers = _if_match(if_match)
        return cast(Schedule, self._json("POST", path, json={"note": note}, headers=headers))

    def trigger_schedule(self, schedule_id: str) -> TriggerResult:
        path = f"{_V1}/schedules/{_part(schedule_id)}/trigger"
        return cast(TriggerResult, self._json("POST", path))

    def backfill_schedule(
        self, schedule_id: str, start: datetime | str, end: datetime | str
    ) -> BackfillResult:
        """Start every tick in (start, end] now; a repeated backfill starts nothing twice."""
        path = f"{_V1}/schedules/{_part(schedule_id)}/backfill"
        body = {"start": _time(start), "end": _time(end)}
        return cast(BackfillResult, self._json("POST", path, json=body))

    # --- the tenant's administration (admin keys) ----------------------------------------------

    def list_keys(self) -> list[JSONObject]:
        return cast(list[JSONObject], self._json("GET", f"{_V1}/admin/keys"))

    def create_key(self, role: str, name: str = "") -> JSONObject:
        """A new key of the tenant; its `token` is shown this once."""
        body = {"role": role, "name": name}
        return cast(JSONObject, self._json("POST", f"{_V1}/admin/keys", json=body))

    def revoke_key(self, key_id: str) -> JSONObject:
        path = f"{_V1}/admin/keys/{_part(key_id)}"
        return cast(JSONObject, self._json("DELETE", path))

    def get_policy(self) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/admin/policy"))

    def tighten_policy(
        self, changes: Mapping[str, Any], *, if_match: str | None = None
    ) -> JSONObject:
        """Change policy fields; over the API a change may only allow less."""
        path = f"{_V1}/admin/policy"
        headers = _if_match(if_match)
        return cast(JSONObject, self._json("PATCH", path, json=dict(changes), headers=headers))

    def get_quotas(self) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/admin/quotas"))

    def lower_quotas(self, changes: Mapping[str, Any]) -> JSONObject:
        path = f"{_V1}/admin/quotas"
        return cast(JSONObject, self._json("PATCH", path, json=dict(changes)))

    def get_retention(self) -> JSONObject:
        """How many days the tenant's finished executions are kept (`days`, `workflows`)."""
        return cast(JSONObject, self._json("GET", f"{_V1}/admin/retention"))

    def set_retention(
        self, days: int | None, workflows: Mapping[str, int] | None = None
    ) -> JSONObject:
        """Replace the tenant's retention: `days` (None: keep everything) and per-workflow
        days (the most specific wins). Where purged executions are exported is the host's."""
        body = {"days": days, "workflows": dict(workflows or {})}
        return cast(JSONObject, self._json("PUT", f"{_V1}/admin/retention", json=body))

    def list_limits(self) -> list[JSONObject]:
        """The tenant's rate-limit buckets: declared ones and those activities made."""
        return cast(list[JSONObject], self._json("GET", f"{_V1}/admin/limits"))

    def get_limit(self, key: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/admin/limits/{_part(key)}"))

    def put_limit(
        self, key: str, limit: float, per: float = 1.0, burst: float | None = None
    ) -> JSONObject:
        """Declare (or change) a bucket: `limit` units per `per` seconds, `burst` at once
        (default `limit`); its numbers win over those of the activities naming it."""
        body: dict[str, Any] = {"limit": limit, "per": per}
        if burst is not None:
            body["burst"] = burst
        path = f"{_V1}/admin/limits/{_part(key)}"
        return cast(JSONObject, self._json("PUT", path, json=body))

    def delete_limit(self, key: str) -> None:
        self._send("DELETE", f"{_V1}/admin/limits/{_part(key)}")

    def flow_state(self) -> JSONObject:
        """The tenant's concurrency keys in use (running, waiting) and its buckets."""
        return cast(JSONObject, self._json("GET", f"{_V1}/flow"))

    def list_secrets(self) -> list[JSONObject]:
        """The tenant's secrets' names and versions (never a value)."""
        return cast(list[JSONObject], self._json("GET", f"{_V1}/secrets"))

    def get_secret(self, name: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/secrets/{_part(name)}"))

    def put_secret(self, name: str, value: str) -> JSONObject:
        """Set a secret (a new version); the answer never holds the value."""
        path = f"{_V1}/secrets/{_part(name)}"
        return cast(JSONObject, self._json("PUT", path, json={"value": value}))

    def delete_secret(self, name: str) -> None:
        self._send("DELETE", f"{_V1}/secrets/{_part(name)}")

    def list_providers(self) -> list[JSONObject]:
        return cast(list[JSONObject], self._json("GET", f"{_V1}/providers"))

    def get_provider(self, name: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/providers/{_part(name)}"))

    def put_provider(
        self, name: str, config: Mapping[str, Any], *, if_match: str | None = None
    ) -> JSONObject:
        """`config`: kind, base_url, api_key_secret (a secret's name), default_model,
        price_in and price_out."""
        path = f"{_V1}/providers/{_part(name)}"
        headers = _if_match(if_match)
        return cast(JSONObject, self._json("PUT", path, json=dict(config), headers=headers))

    def delete_provider(self, name: str, *, if_match: str | None = None) -> None:
        path = f"{_V1}/providers/{_part(name)}"
        self._send("DELETE", path, headers=_if_match(if_match))

    def list_mcp_servers(self) -> list[JSONObject]:
        return cast(list[JSONObject], self._json("GET", f"{_V1}/mcp-servers"))

    def get_mcp_server(self, name: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/mcp-servers/{_part(name)}"))

    def put_mcp_server(self, name: str, config: Mapping[str, Any]) -> JSONObject:
        """`config`: command (stdio) or url (streamable HTTP), header_secrets."""
        path = f"{_V1}/mcp-servers/{_part(name)}"
        return cast(JSONObject, self._json("PUT", path, json=dict(config)))

    def delete_mcp_server(self, name: str) -> None:
        self._send("DELETE", f"{_V1}/mcp-servers/{_part(name)}")

    # --- event triggers --------------------------------------------------------------------------

    def apply_trigger(self, document: str | Mapping[str, Any]) -> JSONObject:
        """Apply a `kind: Trigger` document (YAML text or an object)."""
        return cast(JSONObject, self._json("POST", f"{_V1}/triggers", **_document(document)))

    def list_triggers(self) -> list[JSONObject]:
        return cast(list[JSONObject], self._json("GET", f"{_V1}/triggers"))

    def get_trigger(self, name: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/triggers/{_part(name)}"))

    def delete_trigger(self, name: str) -> None:
        self._send("DELETE", f"{_V1}/triggers/{_part(name)}")

    def send_event(self, topic: str, payload: Any) -> JSONObject:
        """Send a JSON event to `topic`'s triggers: what each made of it (`events`), also
        when none started anything (an error status then, the events recorded all the
        same); a topic no trigger takes is `NotFound`."""
        path = f"{_V1}/events/{_part(topic)}"
        allow = (400, 413, 422, 429)
        return cast(JSONObject, (self._send("POST", path, json=payload, allow=allow)).json())

    def receive_webhook(self, hook_id: str, body: bytes, signature: str) -> JSONObject:
        """Post `body` to a trigger's webhook, signed (`Wovyr-Signature`; no API key needed)."""
        path = f"{_V1}/hooks/{_part(hook_id)}"
        headers = {"Content-Type": "application/json", "Wovyr-Signature": signature}
        return cast(JSONObject, self._json("POST", path, content=body, headers=headers))

    def list_events(
        self, *, trigger: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> JSONObject:
        """A page of the events received, newest first (`next_cursor`: pass it as `cursor`)."""
        params = query(trigger=trigger, limit=limit, cursor=cursor)
        return cast(JSONObject, self._json("GET", f"{_V1}/events", params=params))

    # --- artifacts --------------------------------------------------------------------------------

    def put_artifact(self, data: bytes, media_type: str) -> JSONObject:
        """Store `data` (PNG, JPEG, GIF, WebP or PDF, as `media_type` says) as an artifact:
        `{digest, media_type, size, ref}`, `ref` the content part that sends it to a model
        (the same bytes again are the same artifact)."""
        headers = {"Content-Type": media_type}
        path = f"{_V1}/artifacts"
        return cast(JSONObject, self._json("POST", path, content=data, headers=headers))

    def get_artifact(self, digest: str) -> bytes:
        """The bytes of the artifact `digest` (`sha256:<hex>`)."""
        return (self._send("GET", f"{_V1}/artifacts/{_part(digest)}")).content

    def list_artifacts(self, *, limit: int | None = None, cursor: str | None = None) -> JSONObject:
        """A page of the artifacts, newest first (`next_cursor`: pass it as `cursor`)."""
        params = query(limit=limit, cursor=cursor)
        return cast(JSONObject, self._json("GET", f"{_V1}/artifacts", params=params))

    # --- outbound webhooks ------------------------------------------------------------------------

    def list_webhooks(self) -> list[JSONObject]:
        return cast(list[JSONObject], self._json("GET", f"{_V1}/webhooks"))

    def get_webhook(self, name: str) -> JSONObject:
        return cast(JSONObject, self._json("GET", f"{_V1}/webhooks/{_part(name)}"))

    def put_webhook(self, name: str, config: Mapping[str, Any]) -> JSONObject:
        """`config`: url, events, secrets (names), filter."""
        path = f"{_V1}/webhooks/{_part(name)}"
        return cast(JSONObject, self._json("PUT", path, json=dict(config)))

    def delete_webhook(self, name: str) -> None:
        self._send("DELETE", f"{_V1}/webhooks/{_part(name)}")

    def list_deliveries(
        self,
        *,
        endpoint: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JSONObject:
        """A page of the webhook deliveries, newest first (`next_cursor`: pass it as `cursor`)."""
        params = query(endpoint=endpoint, status=status, limit=limit, cursor=cursor)
        return cast(JSONObject, self._json("GET", f"{_V1}/deliveries", params=params))

    def get_delivery(self, delivery_id: str) -> JSONObject:
        """One delivery with its attempts (`attempts_made`)."""
        path = f"{_V1}/deliveries/{_part(delivery_id)}"
        return cast(JSONObject, self._json("GET", path))

    def list_audit(
        self,
        *,
        after: int | None = None,
        since: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JSONObject:
        """A page of the tenant's audit records, oldest first (`next_cursor`: pass it as
        `cursor`)."""
        params = query(after=after, since=_time(since), limit=limit, cursor=cursor)
        return cast(JSONObject, self._json("GET", f"{_V1}/audit", params=params))

    # --- health --------------------------------------------------------------------------------

    def healthz(self) -> JSONObject:
        return cast(JSONObject, self._json("GET", "/healthz"))

    def readyz(self) -> JSONObject:
        """`status` (`ready` or `not ready`) and the `checks`: a 503 answers too."""
        return cast(JSONObject, (self._send("GET", "/readyz", allow=(503,))).json())

    def metrics(self) -> str:
        """The Prometheus text of the key's tenant."""
        return (self._send("GET", "/metrics")).text
