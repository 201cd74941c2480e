"""A representative set of the API tests, each run twice with the same assertions: with raw
HTTP requests (httpx, paths and bodies by hand) and through `wovyr.client.AsyncClient`.
Both talk to the real app in-process (`httpx.ASGITransport`) over every store.

A `Driver` gives the operations; a refusal is `Refused(status, body)` from either: the raw
one reads it off the response, the client's is the status its exception stands for (which
checks that mapping: a 404 must arrive as `NotFound`, a 422 as `RequestInvalid` with the
problems, a 429 as `QuotaExceeded` with `retry_after`, ...).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from tests.server.conftest import APPROVAL_FLOW, Api

from wovyr.client import AsyncClient
from wovyr.engine.quotas import Quotas
from wovyr.errors import (
    AccessDenied,
    Conflict,
    NotFound,
    QuotaExceeded,
    RemoteError,
    RequestInvalid,
    ServerError,
    StoreUnavailable,
    WovyrError,
)

pytestmark = pytest.mark.anyio
OP, VIEW, ADMIN = "tenant-a:operator", "tenant-a:viewer", "tenant-a:admin"
W, S, D = "/api/v1/workflows", "/api/v1/schedules", "/api/v1/definitions"
TICK = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: tick}
activities:
  - {id: a, set: {x: 1}}
"""


class Refused(Exception):
    def __init__(
        self, status: int, detail: str, problems: list[dict[str, Any]], retry: float | None
    ) -> None:
        super().__init__(status, detail)
        self.status, self.detail, self.problems, self.retry_after = status, detail, problems, retry


class Raw:
    """The API by hand."""

    def __init__(self, api: Api) -> None:
        self.api = api

    async def _call(self, who: str, method: str, path: str, **kw: Any) -> Any:
        r = await self.api.call(method, path, who, **kw)
        if r.status_code >= 400:
            body = r.json() if r.content else {}
            retry = float(r.headers["Retry-After"]) if "Retry-After" in r.headers else None
            raise Refused(r.status_code, body.get("detail", ""), body.get("problems", []), retry)
        return r.json() if r.content else None

    async def start(self, who: str, definition: str, **fields: Any) -> Any:
        key = fields.pop("idempotency_key", None)
        headers = {"Idempotency-Key": key} if key else {}
        return await self._call(
            who, "POST", W, json={"definition": definition, **fields}, headers=headers
        )

    async def get(self, who: str, eid: str) -> Any:
        return await self._call(who, "GET", f"{W}/{eid}")

    async def list(self, who: str, **params: Any) -> Any:
        if "labels" in params:
            params["label"] = [f"{k}={v}" for k, v in params.pop("labels").items()]
        return await self._call(who, "GET", W, params=params)

    async def history(self, who: str, eid: str, **params: Any) -> Any:
        return await self._call(who, "GET", f"{W}/{eid}/history", params=params)

    async def signal(
        self, who: str, eid: str, name: str, payload: Any, definition: str | None = None
    ) -> Any:
        body = {"name": name, "payload": payload}
        if definition is not None:
            body["definition"] = definition
        return await self._call(who, "POST", f"{W}/{eid}/signal", json=body)

    async def approve(
        self, who: str, eid: str, activity: str, comment: str, definition: str | None = None
    ) -> Any:
        body = {"activity": activity, "comment": comment}
        if definition is not None:
            body["definition"] = definition
        return await self._call(who, "POST", f"{W}/{eid}/approve", json=body)

    async def cancel(self, who: str, eid: str, reason: str) -> Any:
        return await self._call(who, "POST", f"{W}/{eid}/cancel", json={"reason": reason})

    async def stream(self, who: str, eid: str) -> list[tuple[str, dict[str, Any]]]:
        r = await self.api.call("GET", f"{W}/{eid}/stream", who)
        if r.status_code >= 400:
            raise Refused(r.status_code, r.json()["detail"], [], None)
        out, event = [], ""
        for line in r.text.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                out.append((event, json.loads(line[6:])))
        return out

    async def apply(self, who: str, text: str) -> Any:
        headers = {"Content-Type": "application/yaml"}
        return await self._call(who, "POST", D, content=text.encode(), headers=headers)

    async def definitions(self, who: str) -> Any:
        return await self._call(who, "GET", D)

    async def definition(self, who: str, name: str, version: str | None = None) -> Any:
        return await self._call(who, "GET", f"{D}/{name}" + (f"/{version}" if version else ""))

    async def create_schedule(self, who: str, sid: str, **fields: Any) -> Any:
        return await self._call(who, "POST", S, json={"id": sid, **fields})

    async def schedule(self, who: str, sid: str) -> Any:
        return await self._call(who, "GET", f"{S}/{sid}")

    async def pause(self, who: str, sid: str, note: str) -> Any:
        return await self._call(who, "POST", f"{S}/{sid}/pause", json={"note": note})

    async def trigger(self, who: str, sid: str) -> Any:
        return await self._call(who, "POST", f"{S}/{sid}/trigger")

    async def delete_schedule(self, who: str, sid: str) -> Any:
        return await self._call(who, "DELETE", f"{S}/{sid}")

    async def set_retention(self, who: str, days: int | None, workflows: dict[str, int]) -> Any:
        body = {"days": days, "workflows": workflows}
        return await self._call(who, "PUT", "/api/v1/admin/retention", json=body)

    async def retention(self, who: str) -> Any:
        return await self._call(who, "GET", "/api/v1/admin/retention")

    async def put_secret(self, who: str, name: str, value: str) -> Any:
        return await self._call(who, "PUT", f"/api/v1/secrets/{name}", json={"value": value})

    async def secrets(self, who: str) -> Any:
        return await self._call(who, "GET", "/api/v1/secrets")

    async def delete_secret(self, who: str, name: str) -> Any:
        return await self._call(who, "DELETE", f"/api/v1/secrets/{name}")


def _status(exc: WovyrError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, Conflict):
        return 409
    if isinstance(exc, QuotaExceeded):
        return 429
    if isinstance(exc, StoreUnavailable):
        return 503
    assert isinstance(exc, RemoteError), exc
    if exc.status in (400, 413, 415, 422):
        assert type(exc) is RequestInvalid, exc
    elif exc.status in (401, 403):
        assert type(exc) is AccessDenied, exc
    else:
        assert type(exc) is ServerError, exc
    return exc.status


class Typed:
    """The API through AsyncClient, one per key."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.clients: dict[str, AsyncClient] = {}

    def _client(self, who: str) -> AsyncClient:
        if who not in self.clients:
            transport = httpx.ASGITransport(app=self.api.app)
            self.clients[who] = AsyncClient(
                "http://wovyr.test", api_key=self.api.tokens[who], transport=transport
            )
        return self.clients[who]

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    async def _do(self, call: Any) -> Any:
        try:
            return await call
        except WovyrError as exc:
            problems = [p.to_dict() for p in getattr(exc, "problems", [])]
            retry = exc.retry_after if isinstance(exc, QuotaExceeded) else None
            raise Refused(_status(exc), exc.message, problems, retry) from None

    async def start(self, who: str, definition: str, **fields: Any) -> Any:
        return await self._do(self._client(who).start_workflow(definition, **fields))

    async def get(self, who: str, eid: str) -> Any:
        return await self._do(self._client(who).get_workflow(eid))

    async def list(self, who: str, **params: Any) -> Any:
        return await self._do(self._client(who).list_workflows(**params))

    async def history(self, who: str, eid: str, **params: Any) -> Any:
        return await self._do(self._client(who).get_history(eid, **params))

    async def signal(
        self, who: str, eid: str, name: str, payload: Any, definition: str | None = None
    ) -> Any:
        client = self._client(who)
        return await self._do(client.signal_workflow(eid, name, payload, definition=definition))

    async def approve(
        self, who: str, eid: str, activity: str, comment: str, definition: str | None = None
    ) -> Any:
        client = self._client(who)
        call = client.approve_workflow(eid, activity, comment=comment, definition=definition)
        return await self._do(call)

    async def cancel(self, who: str, eid: str, reason: str) -> Any:
        return await self._do(self._client(who).cancel_workflow(eid, reason=reason))

    async def stream(self, who: str, eid: str) -> list[tuple[str, dict[str, Any]]]:
        async def read() -> list[tuple[str, dict[str, Any]]]:
            return [(m.event, m.data) async for m in self._client(who).stream_workflow(eid)]

        return list(await self._do(read()))

    async def apply(self, who: str, text: str) -> Any:
        return await self._do(self._client(who).apply_definition(text))

    async def definitions(self, who: str) -> Any:
        return await self._do(self._client(who).list_definitions())

    async def definition(self, who: str, name: str, version: str | None = None) -> Any:
        return await self._do(self._client(who).get_definition(name, version))

    async def create_schedule(self, who: str, sid: str, **fields: Any) -> Any:
        return await self._do(self._client(who).create_schedule(sid, **fields))

    async def schedule(self, who: str, sid: str) -> Any:
        return await self._do(self._client(who).get_schedule(sid))

    async def pause(self, who: str, sid: str, note: str) -> Any:
        return await self._do(self._client(who).pause_schedule(sid, note))

    async def trigger(self, who: str, sid: str) -> Any:
        return await self._do(self._client(who).trigger_schedule(sid))

    async def delete_schedule(self, who: str, sid: str) -> Any:
        return await self._do(self._client(who).delete_schedule(sid))

    async def set_retention(self, who: str, days: int | None, workflows: dict[str, int]) -> Any:
        return await self._do(self._client(who).set_retention(days, workflows))

    async def retention(self, who: str) -> Any:
        return await self._do(self._client(who).get_retention())

    async def put_secret(self, who: str, name: str, value: str) -> Any:
        return await self._do(self._client(who).put_secret(name, value))

    async def secrets(self, who: str) -> Any:
        return await self._do(self._client(who).list_secrets())

    async def delete_secret(self, who: str, name: str) -> Any:
        return await self._do(self._client(who).delete_secret(name))


@dataclass
class Both:
    api: Api
    http: Any


@pytest.fixture(params=["raw", "client"])
async def d(request: pytest.FixtureRequest, api: Api) -> AsyncIterator[Both]:
    if request.param == "raw":
        yield Both(api, Raw(api))
        return
    typed = Typed(api)
    yield Both(api, typed)
    await typed.close()


async def refused(call: Any) -> Refused:
    try:
        await call
    except Refused as exc:
        return exc
    raise AssertionError("the call was not refused")


async def test_start_wait_approve_signal_complete(d: Both) -> None:
    started = await d.http.start(OP, APPROVAL_FLOW, input={"note": "hi"})
    eid = started["id"]
    assert started["status"] == "running"
    await d.api.drain()
    view = await d.http.get(VIEW, eid)
    assert view["status"] == "waiting"
    assert {w["activity"] for w in view["pending_waits"]} == {"gate", "go"}
    await d.http.approve(OP, eid, "gate", "ok")
    await d.http.signal(OP, eid, "go", [1])
    await d.api.drain()
    view = await d.http.get(VIEW, eid)
    assert view["status"] == "completed" and view["output"] == {"shipped": True}
    decided = [e for e in view["timeline"] if e["type"] == "ApprovalDecided"]
    assert decided[0]["data"]["by"] == "tenant-a-operator"
    stream = await d.http.stream(VIEW, eid)
    assert stream[0][0] == "event" and stream[0][1]["type"] == "ExecutionStarted"
    assert stream[-1] == ("end", {"status": "completed"})


async def test_a_definition_sent_with_a_signal_or_decision_must_be_the_pinned_one(
    d: Both,
) -> None:
    eid = (await d.http.start(OP, APPROVAL_FLOW))["id"]
    await d.api.drain()
    drifted = APPROVAL_FLOW.replace("shipped: true", "shipped: false")
    exc = await refused(d.http.signal(OP, eid, "go", 1, definition=drifted))
    assert exc.status == 409 and exc.detail.startswith("definition drift: ")
    exc = await refused(d.http.approve(OP, eid, "gate", "ok", definition=drifted))
    assert exc.status == 409 and exc.detail.startswith("definition drift: ")
    await d.http.signal(OP, eid, "go", 1, definition=APPROVAL_FLOW)
    await d.http.approve(OP, eid, "gate", "ok", definition=APPROVAL_FLOW)
    await d.api.drain()
    view = await d.http.get(VIEW, eid)
    assert view["status"] == "completed" and view["output"] == {"shipped": True}


async def test_invalid_definition_is_422_with_line_and_column(d: Both) -> None:
    bad = APPROVAL_FLOW.replace("needs: [gate, go]", "needs: [gate, nowhere]")
    exc = await refused(d.http.start(OP, bad))
    assert exc.status == 422
    (problem,) = exc.problems
    assert problem["line"] == 16 and problem["column"] and "nowhere" in problem["message"]


async def test_idempotency_key_same_body_same_execution_other_body_422(d: Both) -> None:
    first = await d.http.start(OP, APPROVAL_FLOW, idempotency_key="k-1")
    again = await d.http.start(OP, APPROVAL_FLOW, idempotency_key="k-1")
    assert first["id"] == again["id"]
    exc = await refused(d.http.start(OP, TICK, idempotency_key="k-1"))
    assert exc.status == 422 and "Idempotency-Key" in exc.detail


async def test_cancel_is_durable_then_409_and_others_get_404_or_403(d: Both) -> None:
    eid = (await d.http.start(OP, APPROVAL_FLOW))["id"]
    assert (await refused(d.http.get("tenant-b:viewer", eid))).status == 404
    assert (await refused(d.http.cancel("tenant-b:operator", eid, "theirs"))).status == 404
    assert (await refused(d.http.cancel(VIEW, eid, "a viewer"))).status == 403
    assert (await refused(d.http.get("tenant-a:revoked", eid))).status == 401
    cancelled = await d.http.cancel(OP, eid, "no longer needed")
    assert cancelled["status"] == "cancelled"
    exc = await refused(d.http.cancel(OP, eid, "again"))
    assert exc.status == 409 and "cancelled" in exc.detail
    assert (await refused(d.http.get(VIEW, "nope"))).status == 404


async def test_list_filters_and_keyset_pages_newest_first(d: Both) -> None:
    ids = []
    for n in range(5):
        flow = TICK if n % 2 else APPROVAL_FLOW
        ids.append((await d.http.start(OP, flow, id=f"e-{n}", labels={"n": str(n)}))["id"])
    page = await d.http.list(VIEW, limit=2)
    assert [i["id"] for i in page["items"]] == ["e-4", "e-3"] and page["next_cursor"]
    rest = await d.http.list(VIEW, limit=10, cursor=page["next_cursor"])
    assert [i["id"] for i in rest["items"]] == ["e-2", "e-1", "e-0"] and rest["next_cursor"] is None
    ticks = await d.http.list(VIEW, workflow="tick")
    assert [i["id"] for i in ticks["items"]] == ["e-3", "e-1"]
    labelled = await d.http.list(VIEW, labels={"n": "2"})
    assert [i["id"] for i in labelled["items"]] == ["e-2"]
    assert (await d.http.list("tenant-b:viewer"))["items"] == []
    assert (await refused(d.http.list(VIEW, cursor="garbage"))).status == 400


async def test_history_pages(d: Both) -> None:
    eid = (await d.http.start(OP, APPROVAL_FLOW))["id"]
    await d.api.drain()
    whole = await d.http.history(VIEW, eid, after_seq=0, limit=1000)
    total = whole["total"]
    assert [e["seq"] for e in whole["items"]] == list(range(1, total + 1))
    newest = await d.http.history(VIEW, eid, limit=2)
    assert [e["seq"] for e in newest["items"]] == [total - 1, total]
    first = await d.http.history(VIEW, eid, after_seq=0, limit=2)
    assert [e["seq"] for e in first["items"]] == [1, 2] and first["next_after_seq"] == 2


async def test_quota_429_says_when_to_retry(d: Both) -> None:
    d.api.engine.for_tenant("tenant-a").set_quotas(Quotas(executions_per_day=1), by="test")
    await d.http.start(OP, TICK)
    exc = await refused(d.http.start(OP, TICK))
    assert exc.status == 429 and exc.retry_after == 15 * 3600  # 09:00 UTC to midnight
    assert "executions per day is 1" in exc.detail


async def test_definitions_apply_conflict_list_show(d: Both) -> None:
    applied = await d.http.apply(OP, TICK)
    assert (applied["name"], applied["version"], applied["result"]) == ("tick", "1", "applied")
    assert (await d.http.apply(OP, TICK))["result"] == "unchanged"
    exc = await refused(d.http.apply(OP, TICK.replace("x: 1", "x: 2")))
    assert exc.status == 409
    assert [x["name"] for x in await d.http.definitions(VIEW)] == ["tick"]
    shown = await d.http.definition(VIEW, "tick", "1")
    assert shown["hash"] == applied["hash"] and shown["definition"]["metadata"]["name"] == "tick"
    assert (await refused(d.http.definition("tenant-b:viewer", "tick"))).status == 404
    exc = await refused(d.http.apply(OP, "kind: Workflow\n"))
    assert exc.status == 422 and exc.problems


async def test_schedule_lifecycle(d: Both) -> None:
    made = await d.http.create_schedule(OP, "s-1", definition=TICK, every="1h", note="n")
    assert made["id"] == "s-1" and made["paused"] is False and len(made["next_fire_times"]) == 5
    exc = await refused(d.http.create_schedule(OP, "s-2", definition=TICK))
    assert exc.status == 422
    assert (await d.http.pause(OP, "s-1", "quiet"))["paused"] is True
    started = (await d.http.trigger(OP, "s-1"))["execution_id"]
    assert (await d.http.get(VIEW, started))["workflow"] == "tick"
    assert (await refused(d.http.schedule("tenant-b:viewer", "s-1"))).status == 404
    assert await d.http.delete_schedule(OP, "s-1") is None
    assert (await refused(d.http.schedule(VIEW, "s-1"))).status == 404


async def test_secrets_are_listed_by_name_never_value(d: Both) -> None:
    put = await d.http.put_secret(ADMIN, "TOKEN", "s3cret-value")
    assert put["name"] == "TOKEN" and "s3cret-value" not in str(put)
    listed = await d.http.secrets(ADMIN)
    assert [s["name"] for s in listed] == ["TOKEN"] and "s3cret-value" not in str(listed)
    assert (await refused(d.http.secrets(OP))).status == 403
    assert await d.http.delete_secret(ADMIN, "TOKEN") is None
    assert await d.http.secrets(ADMIN) == []


async def test_retention_is_read_and_set_by_an_admin(d: Both) -> None:
    assert (await d.http.retention(ADMIN))["days"] is None
    stored = await d.http.set_retention(ADMIN, 30, {"tick": 7})
    assert (stored["days"], stored["workflows"], stored["export"]) == (30, {"tick": 7}, False)
    assert await d.http.retention(ADMIN) == stored
    assert (await d.http.retention("tenant-b:admin"))["days"] is None
    assert (await refused(d.http.set_retention(OP, 1, {}))).status == 403
    assert (await refused(d.http.set_retention(ADMIN, 0, {}))).status == 422
