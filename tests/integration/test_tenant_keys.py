"""Idempotency keys never collide across tenants: two tenants' executions with the same id
hand their handlers (and the outside systems those call) different keys, while tenant
`default` keeps the key format it always had."""

from __future__ import annotations

from wovyr.activities.base import ActivityContext, ActivityRegistry, key_scope
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: charge}
activities:
  - id: pay
    tool: pay
"""


def test_same_execution_id_in_two_tenants_gives_two_keys() -> None:
    seen: list[tuple[str, str, str]] = []
    registry = ActivityRegistry()

    def pay(ctx: ActivityContext) -> None:
        seen.append((ctx.tenant, ctx.idempotency_key, ctx.activity_key))

    registry.register("pay", pay)
    engine = Engine(SQLiteStore(), activities=registry)
    for tenant in ("default", "acme", "globex"):
        engine.for_tenant(tenant).start(FLOW, execution_id="order-7")
    drain(engine)
    keys = {tenant: (key, activity) for tenant, key, activity in seen}
    assert keys == {
        "default": ("order-7/pay/1", "order-7/pay"),  # unchanged for the local owner
        "acme": ("acme@order-7/pay/1", "acme@order-7/pay"),
        "globex": ("globex@order-7/pay/1", "globex@order-7/pay"),
    }


def test_key_scope() -> None:
    assert key_scope("default") == ""
    assert key_scope("team-1.eu") == "team-1.eu@"
