"""API v1 workflows: start, list, detail, history, signal, approve, cancel; idempotency keys;
validation errors with locations; limits; error bodies without internals."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from tests.server.conftest import APPROVAL_FLOW, Api

from wovyr.definition.parse import load_definition
from wovyr.definition.pin import canonical_json, content_hash
from wovyr.server.api.workflows import payload
from wovyr.store.base import StepWrite

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/workflows"


async def start(api: Api, body: dict[str, object] | None = None, **kw: object) -> dict[str, object]:
    r = await api.call("POST", BASE, OP, json=body or {"definition": APPROVAL_FLOW}, **kw)
    assert r.status_code in (200, 201), r.text
    data: dict[str, object] = r.json()
    return data


async def test_start_run_approve_signal_complete(api: Api) -> None:
    started = await start(api, {"definition": APPROVAL_FLOW, "input": {"note": "hi"}})
    eid = started["id"]
    assert started["status"] == "running"
    await api.drain()
    view = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert view["status"] == "waiting"
    assert {w["activity"] for w in view["pending_waits"]} == {"gate", "go"}
    assert view["activities"]["prepare"]["status"] == "completed"
    assert next(e["type"] for e in view["timeline"]) == "ExecutionStarted"

    r = await api.call(
        "POST", f"{BASE}/{eid}/approve", OP, json={"activity": "gate", "comment": "ok"}
    )
    assert r.status_code == 200, r.text
    r = await api.call("POST", f"{BASE}/{eid}/signal", OP, json={"name": "go", "payload": [1]})
    assert r.status_code == 200, r.text
    await api.drain()
    view = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert view["status"] == "completed"
    assert view["output"] == {"shipped": True}
    decided = [e for e in view["timeline"] if e["type"] == "ApprovalDecided"]
    assert decided[0]["data"]["by"] == "tenant-a-operator"  # who decided is recorded
    assert decided[0]["data"]["comment"] == "ok"


async def test_a_signal_or_decision_sent_with_the_pinned_definition_is_taken_and_another_refused(
    api: Api,
) -> None:
    """DUR-405: older clients upload the definition again with each signal and decision. The
    pinned one (compared by content hash: another spelling of it, or its JSON object, is the
    same) is accepted; another is refused with a drift error naming both hashes, and
    nothing is recorded."""
    eid = (await start(api))["id"]
    await api.drain()
    pinned = load_definition(APPROVAL_FLOW)
    respelled = json.loads(canonical_json(pinned))  # an object, keys in another order
    drifted = APPROVAL_FLOW.replace("shipped: true", "shipped: false")
    sent = content_hash(load_definition(drifted))
    hashes = {"pinned": content_hash(pinned), "sent": sent}
    for path, body in (
        ("signal", {"name": "go", "payload": 1}),
        ("approve", {"activity": "gate", "comment": "ok"}),
    ):
        r = await api.call("POST", f"{BASE}/{eid}/{path}", OP, json={**body, "definition": drifted})
        assert r.status_code == 409, r.text
        problem = r.json()
        assert problem["type"] == "urn:wovyr:problem:definition-drift"
        assert problem["detail"].startswith(
            f"definition drift: the definition sent ({hashes['sent']}) is not the one "
            f"execution {eid} is pinned to ({hashes['pinned']})"
        )
        history = (await api.call("GET", f"{BASE}/{eid}/history", VIEW)).json()["items"]
        assert not {"SignalReceived", "ApprovalDecided"} & {e["type"] for e in history}
    r = await api.call(
        "POST", f"{BASE}/{eid}/signal", OP, json={"name": "go", "definition": APPROVAL_FLOW}
    )
    assert r.status_code == 200, r.text
    r = await api.call(
        "POST", f"{BASE}/{eid}/approve", OP, json={"activity": "gate", "definition": respelled}
    )
    assert r.status_code == 200, r.text
    await api.drain()
    view = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert view["status"] == "completed" and view["output"] == {"shipped": True}
    # a definition that is not a workflow at all is refused as the invalid document it is
    r = await api.call("POST", f"{BASE}/{eid}/signal", OP, json={"name": "go", "definition": "x"})
    assert r.status_code == 422, r.text


class _Follower:
    """A store observer that, once, appends a signal `later` to the execution right after a
    commit of a step carrying the event `trigger`: another writer (a worker) moving the
    execution on between a steering call's commit and its response."""

    def __init__(self, api: Api, execution_id: str, trigger: str) -> None:
        self.engine = api.engine.for_tenant("tenant-a")
        self.execution_id, self.trigger, self.done = execution_id, trigger, False

    def created(self, new: object) -> None:
        pass

    def claimed(self, claims: object) -> None:
        pass

    def committed(self, steps: Sequence[StepWrite], outcomes: object) -> None:
        ours = [s for s in steps if s.execution_id == self.execution_id]
        if not self.done and any(e.type == self.trigger for s in ours for e in s.events):
            self.done = True
            self.engine.signal(self.execution_id, "later")


@pytest.mark.parametrize("call", ["signal", "approve"])
async def test_a_steering_answer_shows_the_state_it_left(api: Api, call: str) -> None:
    """A signal's or a decision's answer is the execution as that call left it, with the
    events up to it, even when another writer moved the execution on before the answer was
    built (read again, it would show the other writer's step, depending on timing)."""
    eid = str((await start(api))["id"])
    await api.drain()
    trigger = "SignalReceived" if call == "signal" else "ApprovalDecided"
    follower = _Follower(api, eid, trigger)
    api.engine.store.add_observer(follower)
    body = {"name": "go"} if call == "signal" else {"activity": "gate"}
    r = await api.call("POST", f"{BASE}/{eid}/{call}", OP, json=body)
    assert r.status_code == 200, r.text
    assert follower.done  # the other writer did move it on
    answer = r.json()
    assert answer["timeline"][-1]["type"] == trigger
    assert answer["timeline"][-1]["seq"] == answer["event_count"]
    now = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert now["event_count"] == answer["event_count"] + 1
    assert now["timeline"][-1]["data"]["name"] == "later"


async def test_detail_is_the_engines_query_plus_a_timeline(api: Api) -> None:
    """The API's ExecutionDetail mirrors the engine's ExecutionView: nothing left out, nothing
    renamed (a field added to one and not the other fails here)."""
    eid = (await start(api, {"definition": APPROVAL_FLOW, "input": {"note": "hi"}}))["id"]
    await api.drain()
    detail = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    timeline = detail.pop("timeline")
    view = api.engine.for_tenant("tenant-a").query(str(eid))
    assert detail == json.loads(json.dumps(view.to_dict(), default=str))
    assert [e["seq"] for e in timeline] == list(range(1, view.event_count + 1))


async def test_start_by_registered_name_and_json_object(api: Api) -> None:
    engine = api.engine.for_tenant("tenant-a")
    engine.apply(APPROVAL_FLOW)
    by_name = await start(api, {"workflow": "purchase", "input": {}})
    assert by_name["workflow"] == "purchase"
    as_object = {
        "apiVersion": "wovyr/v1",
        "kind": "Workflow",
        "metadata": {"name": "obj"},
        "activities": [{"id": "a", "set": {"x": 1}}],
    }
    one_line = await start(api, {"definition": as_object})
    assert one_line["workflow"] == "obj"
    missing = await api.call("POST", BASE, OP, json={"workflow": "nope"})
    assert missing.status_code == 422
    assert missing.json()["problems"][0]["path"] == "workflow"


SCRATCH = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: research-agent, version: "1"}
activities:
  - {id: draft, set: {from: scratch}}
output: "${{ activities.draft.output }}"
"""


async def test_start_by_name_starts_only_an_applied_definition(api: Api) -> None:
    """A definition run from its text is stored by hash and claims no name: starting by name
    refuses it (422), and applying other content under the same name and version succeeds
    and is what a start by name then runs."""
    engine = api.engine.for_tenant("tenant-a")
    ad_hoc = await start(api, {"definition": SCRATCH})
    await api.drain()
    refused = await api.call("POST", BASE, OP, json={"workflow": "research-agent"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["problems"][0]["path"] == "workflow"
    assert "research-agent" in refused.json()["detail"]
    applied = SCRATCH.replace("from: scratch", "from: applied")
    outcome, digest = engine.apply(applied)
    assert outcome == "applied" and digest != ad_hoc["definition_hash"]
    by_name = await start(api, {"workflow": "research-agent"})
    assert by_name["definition_hash"] == digest
    await api.drain()
    done = (await api.call("GET", f"{BASE}/{by_name['id']}", VIEW)).json()
    assert done["status"] == "completed" and done["output"] == {"from": "applied"}


LINE = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: line}
activities:
  - {id: hold, wait: {signal: go}}
"""

ORDER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: order}
activities:
  - {id: line_widget, workflow: {name: line, input: {}}}
  - {id: line_gadget, workflow: {name: line, input: {}}}
"""


async def test_a_parent_waiting_on_children_is_waiting_on_them_in_detail_and_list(
    api: Api,
) -> None:
    """`waiting` is a status of the list as of the detail, `?status=waiting` lists exactly the
    waiting executions and `?status=running` none of them; a child wait reads `child ID`."""
    api.engine.for_tenant("tenant-a").apply(LINE)
    parent = str((await start(api, {"definition": ORDER}))["id"])
    await api.drain()
    busy = str((await start(api, {"definition": ORDER}))["id"])  # started, not yet run
    kids = [f"{parent}::line_widget", f"{parent}::line_gadget"]
    detail = (await api.call("GET", f"{BASE}/{parent}", VIEW)).json()
    assert detail["status"] == "waiting"
    assert detail["waiting_on"] == f"child {kids[0]}; child {kids[1]}"
    listed = (await api.call("GET", BASE, VIEW, params={"limit": 200})).json()["items"]
    rows = {r["id"]: r for r in listed}
    assert rows[parent]["status"] == "waiting"
    assert rows[parent]["waiting_on"] == detail["waiting_on"]
    for kid in kids:
        assert rows[kid]["status"] == "waiting" and rows[kid]["waiting_on"] == "signal go"
    assert rows[busy]["status"] == "running" and rows[busy]["waiting_on"] is None

    def ids(page: dict[str, list[dict[str, str]]]) -> set[str]:
        return {r["id"] for r in page["items"]}

    waiting = await api.call("GET", BASE, VIEW, params={"status": "waiting"})
    assert waiting.status_code == 200, waiting.text
    assert ids(waiting.json()) == {parent, *kids}
    running = (await api.call("GET", BASE, VIEW, params={"status": "running"})).json()
    assert ids(running) == {busy}
    by_name = {"status": "waiting", "workflow": "order"}
    assert ids((await api.call("GET", BASE, VIEW, params=by_name)).json()) == {parent}


async def test_names_and_single_lines_are_never_read_as_server_files(
    api: Api, tmp_path: object
) -> None:
    secret = "/etc/hostname"
    for body in ({"workflow": secret}, {"definition": secret}, {"workflow": "x.yaml"}):
        r = await api.call("POST", BASE, OP, json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"] == "application/problem+json"


async def test_validation_error_is_422_with_line_and_column(api: Api) -> None:
    bad = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: x}\nactivities:\n"
    bad += "  - id: a\n    bogus: 1\n"
    r = await api.call("POST", BASE, OP, json={"definition": bad})
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["type"].startswith("urn:wovyr:problem:")
    assert body["status"] == 422 and body["title"]
    problem = body["problems"][0]
    assert (problem["line"], problem["column"]) == (6, 5)
    assert problem["path"] == "activities[0].bogus"
    assert set(problem) == {"file", "line", "column", "path", "message", "hint"}


async def test_bad_inputs_and_bad_ids_are_422(api: Api) -> None:
    flow = APPROVAL_FLOW.replace(
        'note: {type: string, default: ""}', "note: {type: string, required: true}"
    )
    r = await api.call("POST", BASE, OP, json={"definition": flow, "input": {}})
    assert r.status_code == 422 and r.json()["problems"]
    r = await api.call("POST", BASE, OP, json={"definition": APPROVAL_FLOW, "id": "bad id/.."})
    assert r.status_code == 422


async def test_malformed_json_and_wrong_shapes_never_500(api: Api) -> None:
    headers = {"content-type": "application/json"}
    for raw in (b"{", b"[]", b"null", b'{"definition": 3}', b"\xff\xfe", b'{"input": "x"}'):
        r = await api.call("POST", BASE, OP, content=raw, headers=headers)
        assert r.status_code in (400, 422), (raw, r.status_code, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert "Traceback" not in r.text
    r = await api.call("POST", f"{BASE}/x/signal", OP, content=b"{", headers=headers)
    assert r.status_code == 400


async def test_body_too_large_is_413_declared_or_streamed(api: Api) -> None:
    cap = api.app.state.settings.max_body_bytes
    big = json.dumps({"definition": APPROVAL_FLOW, "input": {"note": "x" * cap}}).encode()
    r = await api.call("POST", BASE, OP, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["status"] == 413

    async def chunks():  # no Content-Length: counted as it streams
        for _ in range(cap // 65536 + 2):
            yield b" " * 65536

    r = await api.call(
        "POST", BASE, OP, content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


async def test_idempotency_key_same_body_same_execution_other_body_422(api: Api) -> None:
    body = {"definition": APPROVAL_FLOW, "input": {"note": "once"}}
    key = {"Idempotency-Key": "order-17"}
    first = await api.call("POST", BASE, OP, json=body, headers=key)
    again = await api.call("POST", BASE, OP, json=body, headers=key)
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    location = f"{BASE}/{first.json()['id']}"
    assert first.headers["Location"] == again.headers["Location"] == location
    other = await api.call("POST", BASE, OP, json={**body, "input": {"note": "twice"}}, headers=key)
    assert other.status_code == 422
    assert other.json()["type"] == "urn:wovyr:problem:idempotency-key-reused"
    page = (await api.call("GET", BASE, VIEW)).json()
    assert len(page["items"]) == 1
    # Keys are per tenant: tenant B may use the same key for its own execution.
    b = await api.call("POST", BASE, "tenant-b:operator", json=body, headers=key)
    assert b.status_code == 201 and b.json()["id"] != first.json()["id"]


async def test_explicit_id_start_is_idempotent_and_other_tenants_ids_are_theirs(api: Api) -> None:
    first = await start(api, {"definition": APPROVAL_FLOW, "id": "order-1"})
    again = await api.call("POST", BASE, OP, json={"definition": APPROVAL_FLOW, "id": "order-1"})
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    # Ids are per tenant: tenant b's `order-1` is a new execution of its own.
    theirs = await api.call(
        "POST",
        BASE,
        "tenant-b:operator",
        json={"definition": APPROVAL_FLOW, "id": "order-1", "input": {"note": "b"}},
    )
    assert theirs.status_code == 201 and theirs.json()["id"] == "order-1"
    assert theirs.json()["input"] != first["input"]
    # An id that exists answers 200 with its execution, whatever the rest of the body says.
    other = await api.call(
        "POST", BASE, OP, json={"definition": APPROVAL_FLOW, "id": "order-1", "input": {"x": 1}}
    )
    assert other.status_code == 200 and other.json()["input"] == first["input"]


async def test_a_start_over_http_is_the_engines_start(api: Api) -> None:
    """The handler only translates: the events of a start over HTTP (text, JSON object, or
    registered name) are exactly those `Engine.start` stores for the same request."""
    engine = api.engine.for_tenant("tenant-a")
    engine.apply(APPROVAL_FLOW)
    as_object = json.loads(canonical_json(load_definition(APPROVAL_FLOW)))
    bodies = {
        "text": {"definition": APPROVAL_FLOW},
        "object": {"definition": as_object},
        "name": {"workflow": "purchase"},
    }
    for form, body in bodies.items():
        await start(api, {**body, "input": {"note": "same"}, "id": f"http-{form}"})
    engine.start(APPROVAL_FLOW, {"note": "same"}, execution_id="engine")

    def stored(execution_id: str) -> list[tuple[object, ...]]:
        return [(e.type, e.at, e.data) for e in engine.history(execution_id)]

    for form in bodies:
        assert stored(f"http-{form}") == stored("engine"), form


async def test_an_idempotency_key_is_not_spent_on_an_invalid_start(api: Api) -> None:
    key = {"Idempotency-Key": "k-1"}
    bad = await api.call(
        "POST", BASE, OP, json={"definition": APPROVAL_FLOW, "input": {"note": 5}}, headers=key
    )
    assert bad.status_code == 422 and bad.json()["type"] == "urn:wovyr:problem:invalid"
    good = await api.call(
        "POST", BASE, OP, json={"definition": APPROVAL_FLOW, "input": {"note": "5"}}, headers=key
    )
    assert good.status_code == 201, good.text


async def test_cancel_is_durable_then_409(api: Api) -> None:
    eid = (await start(api))["id"]
    await api.drain()
    r = await api.call("POST", f"{BASE}/{eid}/cancel", OP, json={"reason": "changed my mind"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    view = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert view["status"] == "cancelled"
    assert {view["activities"][a]["status"] for a in ("gate", "go", "ship")} == {"skipped"}
    history = (await api.call("GET", f"{BASE}/{eid}/history", VIEW)).json()
    cancelled = [e for e in history["items"] if e["type"] == "ExecutionCancelled"]
    assert cancelled and cancelled[0]["data"]["by"] == "tenant-a-operator"
    assert cancelled[0]["data"]["reason"] == "changed my mind"
    again = await api.call("POST", f"{BASE}/{eid}/cancel", OP)
    assert again.status_code == 409
    late = await api.call("POST", f"{BASE}/{eid}/signal", OP, json={"name": "go"})
    assert late.status_code == 409


async def test_list_filters_keyset_paging_newest_first(api: Api) -> None:
    ids = []
    for i in range(7):
        ids.append(
            (await start(api, {"definition": APPROVAL_FLOW, "input": {"note": str(i)}}))["id"]
        )
        api.clock.advance(1)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, object] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = (await api.call("GET", BASE, VIEW, params=params)).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    only_running = (await api.call("GET", BASE, VIEW, params={"status": "completed"})).json()
    assert only_running["items"] == []
    by_name = (
        await api.call("GET", BASE, VIEW, params={"workflow": "purchase", "limit": 200})
    ).json()
    assert len(by_name["items"]) == 7
    bad = await api.call("GET", BASE, VIEW, params={"cursor": "not-a-cursor"})
    assert bad.status_code == 400
    over = await api.call("GET", BASE, VIEW, params={"limit": 5000})
    assert over.status_code == 422


async def test_list_truncates_big_payloads_with_their_size(api: Api) -> None:
    note = "y" * 5000
    await start(api, {"definition": APPROVAL_FLOW, "input": {"note": note}})
    item = (await api.call("GET", BASE, VIEW)).json()["items"][0]
    assert item["input"]["truncated"] is True
    assert item["input"]["size"] > 5000
    assert len(item["input"]["preview"]) <= 256
    assert "checkpoint" not in item and "activities" not in item


@pytest.mark.parametrize(
    "value",
    [None, 0, "plain", "écrit, 書く, 🙂", {"a": [1, 2.5, True, None]}, [2**70], {1: "x"}],
)
def test_a_payload_is_sized_by_its_json_in_utf8_bytes(value: object) -> None:
    shown = payload(value)
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert shown["size"] == len(expected.encode("utf-8"))
    assert not shown["truncated"] and shown["value"] == value


def test_a_big_payload_previews_its_first_256_characters() -> None:
    text = "é書🙂" * 2000  # 2, 3 and 4 bytes a character
    shown = payload(text)
    assert shown["truncated"] and shown["value"] is None
    assert shown["size"] == len(json.dumps(text, ensure_ascii=False).encode("utf-8"))
    assert shown["preview"] == json.dumps(text, ensure_ascii=False)[:256]


async def test_history_pages_newest_first_by_default(api: Api) -> None:
    eid = (await start(api))["id"]
    await api.drain()
    full = (await api.call("GET", f"{BASE}/{eid}/history", VIEW, params={"limit": 1000})).json()
    total = full["total"]
    assert total == len(full["items"]) >= 4
    newest = (await api.call("GET", f"{BASE}/{eid}/history", VIEW, params={"limit": 2})).json()
    assert [e["seq"] for e in newest["items"]] == [total - 1, total]
    assert newest["next_after_seq"] is None
    first = (
        await api.call("GET", f"{BASE}/{eid}/history", VIEW, params={"after_seq": 0, "limit": 2})
    ).json()
    assert [e["seq"] for e in first["items"]] == [1, 2]
    assert first["next_after_seq"] == 2
    detail = (await api.call("GET", f"{BASE}/{eid}", VIEW, params={"events": 1})).json()
    assert [e["seq"] for e in detail["timeline"]] == [total]


async def test_unknown_routes_and_methods_are_problems(api: Api) -> None:
    r = await api.call("GET", "/api/v1/nothing-here", VIEW)
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    r = await api.call("PUT", BASE, OP, json={})
    assert r.status_code == 405 and r.headers["content-type"] == "application/problem+json"


async def test_json_the_stores_cannot_keep_is_a_400(api: Api) -> None:
    headers = {"content-type": "application/json"}
    eid = (await start(api))["id"]
    for raw in (
        b'{"name": "go", "payload": NaN}',
        b'{"name": "go", "payload": [Infinity]}',
        b'{"name": "go", "payload": 1e999}',
        b'{"name": "go", "payload": "\\ud800"}',
        b'{"name": "g\\u0000o"}',
        b'{"name": "go", "payload": {"k\\u0000": 1}}',
    ):
        r = await api.call("POST", f"{BASE}/{eid}/signal", OP, content=raw, headers=headers)
        assert r.status_code == 400, (raw, r.text)
    for path in (f"{BASE}/a%00b", f"{BASE}?workflow=a%00", "/api/v1/schedules/x%00"):
        r = await api.call("GET", path, VIEW)
        assert r.status_code == 400, (path, r.text)
    history = (await api.call("GET", f"{BASE}/{eid}/history", VIEW)).json()
    assert not [e for e in history["items"] if e["type"] == "SignalReceived"]
