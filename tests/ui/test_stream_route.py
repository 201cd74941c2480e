"""The execution page's live output: `/ui/executions/{id}/stream` serves the signed-in
session's tenant the same Server-Sent Events as the API (401 signed out, 404 for another
tenant's execution), and the page of a running execution carries the live-output panel."""

from __future__ import annotations

from tests.sse import Message
from tests.ui.conftest import Keys, UiClient, start_waiting

from wovyr.engine.engine import Engine
from wovyr.store.streams import NewChunk, StreamAppend


def _parse(body: str) -> list[Message]:
    import json

    out = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append(Message(fields.get("id"), fields["event"], json.loads(fields["data"])))
    return out


def test_the_stream_of_a_finished_execution_ends(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    execution_id = start_waiting(ui_engine)
    record = ui_engine.store.load(execution_id, "acme")
    assert record is not None
    chunks = [NewChunk("ship", 1, 1, "attempt"), NewChunk("ship", 1, 1, "text", "<b>hi</b>")]
    assert ui_engine.store.append_stream(
        StreamAppend("acme", execution_id, record.fence, chunks, record.updated_at)
    )
    ui_engine.for_tenant("acme").cancel(execution_id)
    assert client.get(f"/ui/executions/{execution_id}/stream").status_code == 401
    client.sign_in(keys.viewer_a)
    response = client.get(f"/ui/executions/{execution_id}/stream")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = _parse(response.text)
    assert [m.data["text"] for m in messages if m.event == "token"] == ["<b>hi</b>"]
    assert messages[-1].event == "end" and messages[-1].data == {"status": "cancelled"}
    resumed = client.get(
        f"/ui/executions/{execution_id}/stream", headers={"Last-Event-ID": messages[-2].id or ""}
    )
    assert [m.event for m in _parse(resumed.text)] == ["end"]


def test_another_tenants_stream_is_not_found(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    execution_id = start_waiting(ui_engine)
    theirs = make_client()  # type: ignore[operator]
    theirs.sign_in(keys.operator_b)
    assert theirs.get(f"/ui/executions/{execution_id}/stream").status_code == 404
    assert theirs.get("/ui/executions/nope/stream").status_code == 404


def test_a_running_execution_page_has_the_live_output_panel(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    execution_id = start_waiting(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get(f"/ui/executions/{execution_id}")
    assert f'data-stream-url="/ui/executions/{execution_id}/stream"' in page.text
    ui_engine.for_tenant("acme").cancel(execution_id)
    assert "data-stream-url" not in client.get(f"/ui/executions/{execution_id}").text
