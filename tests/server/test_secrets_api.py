"""`/api/v1/secrets` on every store: an admin sets, reads (metadata only), lists and
deletes its own tenant's secrets; viewers and operators are refused; another tenant's
secret answers exactly like a missing one; bad bodies are 422 without echoing the value."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from wovyr.errors import NotFound

pytestmark = pytest.mark.anyio

BASE = "/api/v1/secrets"
ADMIN_A, ADMIN_B = "tenant-a:admin", "tenant-b:admin"
VALUE = "sk-api-value-0123"


async def test_an_admin_sets_reads_lists_and_deletes_without_ever_seeing_a_value(
    api: Api,
) -> None:
    put = await api.call("PUT", f"{BASE}/OPENAI_KEY", ADMIN_A, json={"value": VALUE})
    assert put.status_code == 200, put.text
    assert put.json()["version"] == 1 and put.json()["name"] == "OPENAI_KEY"
    again = await api.call("PUT", f"{BASE}/OPENAI_KEY", ADMIN_A, json={"value": VALUE + "2"})
    assert again.json()["version"] == 2
    got = await api.call("GET", f"{BASE}/OPENAI_KEY", ADMIN_A)
    assert got.status_code == 200
    assert set(got.json()) == {"name", "version", "created_at", "updated_at", "updated_by"}
    assert got.json()["updated_by"] == api.key_ids[ADMIN_A]
    listed = await api.call("GET", BASE, ADMIN_A)
    assert [s["name"] for s in listed.json()] == ["OPENAI_KEY"]
    for response in (put, again, got, listed):
        assert VALUE not in response.text
    assert api.engine.secrets is not None
    assert api.engine.secrets.resolve_secret("tenant-a", "OPENAI_KEY") == VALUE + "2"
    deleted = await api.call("DELETE", f"{BASE}/OPENAI_KEY", ADMIN_A)
    assert deleted.status_code == 204
    assert (await api.call("GET", f"{BASE}/OPENAI_KEY", ADMIN_A)).status_code == 404
    with pytest.raises(NotFound):
        api.engine.secrets.resolve_secret("tenant-a", "OPENAI_KEY")


async def test_another_tenants_secret_answers_like_a_missing_one(api: Api) -> None:
    await api.call("PUT", f"{BASE}/SHARED", ADMIN_A, json={"value": VALUE})
    theirs = await api.call("GET", f"{BASE}/SHARED", ADMIN_B)
    missing = await api.call("GET", f"{BASE}/NEVER", ADMIN_B)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    gone = await api.call("DELETE", f"{BASE}/SHARED", ADMIN_B)
    assert gone.status_code == 404 and gone.json() == missing.json()
    assert (await api.call("GET", BASE, ADMIN_B)).json() == []
    assert (await api.call("GET", f"{BASE}/SHARED", ADMIN_A)).status_code == 200  # untouched


async def test_a_value_too_short_to_mask_is_refused_and_nothing_is_stored(api: Api) -> None:
    short = await api.call("PUT", f"{BASE}/PIN", ADMIN_A, json={"value": "4711"})
    assert short.status_code == 422, short.text
    (problem,) = short.json()["problems"]
    assert problem["path"] == "value" and "at least 8 characters" in problem["message"]
    assert "4711" not in short.text
    assert (await api.call("GET", f"{BASE}/PIN", ADMIN_A)).status_code == 404


@pytest.mark.parametrize("who", ["tenant-a:viewer", "tenant-a:operator"])
async def test_only_admins_manage_secrets(api: Api, who: str) -> None:
    assert (await api.call("GET", BASE, who)).status_code == 403
    put = await api.call("PUT", f"{BASE}/X", who, json={"value": VALUE})
    assert put.status_code == 403
    assert (await api.call("DELETE", f"{BASE}/X", who)).status_code == 403
    assert (await api.call("GET", BASE)).status_code == 401


@pytest.mark.parametrize(
    "body",
    [{"value": 12}, {"value": VALUE, "extra": VALUE}, {}, {"value": ""}],
)
async def test_bad_bodies_are_422_and_never_echo_the_value(
    api: Api, body: dict[str, object]
) -> None:
    refused = await api.call("PUT", f"{BASE}/GOOD", ADMIN_A, json=body)
    assert refused.status_code == 422
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert VALUE not in refused.text
    bad_name = await api.call("PUT", f"{BASE}/1bad-name", ADMIN_A, json={"value": VALUE})
    assert bad_name.status_code == 422 and VALUE not in bad_name.text
    assert (await api.call("GET", BASE, ADMIN_A)).json() == []
