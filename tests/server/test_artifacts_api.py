"""Artifacts over the API on every store: the raw bytes stored by digest (201, then 200 for
the same bytes), read back with their media type, listed newest first by cursor; a media
type no content part takes is 415, a body over the cap 413, an unknown digest 404; the
tenant's stored-bytes quota refuses a put past it (429); another tenant sees nothing of
them."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from wovyr.engine.artifacts import MAX_ARTIFACT_BYTES
from wovyr.engine.quotas import Quotas
from wovyr.store.artifacts import artifact_digest

pytestmark = pytest.mark.anyio
OP_A, VIEW_A, VIEW_B = "tenant-a:operator", "tenant-a:viewer", "tenant-b:viewer"
PNG = b"\x89PNG\r\n\x1a\n" + b"an image of tenant a"
PNG_TYPE = {"Content-Type": "image/png"}


async def test_put_read_and_list_artifacts(api: Api) -> None:
    r = await api.call("POST", "/api/v1/artifacts", OP_A, content=PNG, headers=PNG_TYPE)
    assert r.status_code == 201, r.text
    digest = artifact_digest(PNG)
    body = r.json()
    assert body["digest"] == digest and body["media_type"] == "image/png"
    assert body["size"] == len(PNG)
    assert body["ref"] == {"type": "image", "artifact": digest}
    assert r.headers["location"] == f"/api/v1/artifacts/{digest}"
    again = await api.call("POST", "/api/v1/artifacts", OP_A, content=PNG, headers=PNG_TYPE)
    assert again.status_code == 200 and again.json()["digest"] == digest
    read = await api.call("GET", f"/api/v1/artifacts/{digest}", VIEW_A)
    assert read.status_code == 200 and read.content == PNG
    assert read.headers["content-type"] == "image/png"
    assert read.headers["content-disposition"].startswith("attachment;")
    assert read.headers["content-security-policy"] == "sandbox"
    pdf = b"%PDF-1.4\n%%EOF\n"
    r = await api.call(
        "POST", "/api/v1/artifacts", OP_A, content=pdf, headers={"Content-Type": "application/pdf"}
    )
    assert r.status_code == 201 and r.json()["ref"]["type"] == "file"
    first = (await api.call("GET", "/api/v1/artifacts?limit=1", VIEW_A)).json()
    assert len(first["items"]) == 1 and first["next_cursor"]
    rest = await api.call("GET", f"/api/v1/artifacts?limit=1&cursor={first['next_cursor']}", VIEW_A)
    listed = first["items"] + rest.json()["items"]
    assert {i["digest"] for i in listed} == {digest, artifact_digest(pdf)}
    assert rest.json()["next_cursor"] is None


async def test_what_is_refused(api: Api) -> None:
    r = await api.call(
        "POST", "/api/v1/artifacts", OP_A, content=b"<svg/>", headers={"Content-Type": "image/svg"}
    )
    assert r.status_code == 415, r.text
    big = b"\x89PNG" + b"\0" * MAX_ARTIFACT_BYTES
    r = await api.call("POST", "/api/v1/artifacts", OP_A, content=big, headers=PNG_TYPE)
    assert r.status_code == 413, r.text
    r = await api.call("POST", "/api/v1/artifacts", VIEW_A, content=PNG, headers=PNG_TYPE)
    assert r.status_code == 403
    missing = artifact_digest(b"none")
    assert (await api.call("GET", f"/api/v1/artifacts/{missing}", VIEW_A)).status_code == 404
    assert (await api.call("GET", "/api/v1/artifacts/sha256:zz", VIEW_A)).status_code in (404, 422)
    # a body of more than the API's usual cap (1 MiB) is taken here
    large = b"\x89PNG" + b"\1" * 2_000_000
    r = await api.call("POST", "/api/v1/artifacts", OP_A, content=large, headers=PNG_TYPE)
    assert r.status_code == 201, r.text


async def test_the_stored_bytes_quota_refuses_a_put_past_it(api: Api) -> None:
    api.engine.for_tenant("tenant-a").set_quotas(Quotas(stored_bytes_per_day=100), by="test")
    small = b"\x89PNG" + b"s" * 50
    r = await api.call("POST", "/api/v1/artifacts", OP_A, content=small, headers=PNG_TYPE)
    assert r.status_code == 201, r.text
    r = await api.call("POST", "/api/v1/artifacts", OP_A, content=PNG * 5, headers=PNG_TYPE)
    assert r.status_code == 429, r.text
    listed = (await api.call("GET", "/api/v1/artifacts", VIEW_A)).json()["items"]
    assert [i["digest"] for i in listed] == [artifact_digest(small)]
    # the same bytes again store nothing: not refused, not debited
    r = await api.call("POST", "/api/v1/artifacts", OP_A, content=small, headers=PNG_TYPE)
    assert r.status_code == 200


async def test_another_tenant_sees_nothing(api: Api) -> None:
    await api.call("POST", "/api/v1/artifacts", OP_A, content=PNG, headers=PNG_TYPE)
    digest = artifact_digest(PNG)
    r = await api.call("GET", f"/api/v1/artifacts/{digest}", VIEW_B)
    assert r.status_code == 404 and b"tenant a" not in r.content
    assert (await api.call("GET", "/api/v1/artifacts", VIEW_B)).json()["items"] == []
