"""The order saga of `order-saga.yaml`, written as a Python function: the same activities
(`activities.py`, loaded beside it), the same retries, timeouts and compensations, on the same engine.

    wovyr run --workflow order-saga-py -a examples/activities.py -a examples/order_saga.py -i order_id=A-1 -i amount=42
    wovyr run --workflow order-saga-py -a examples/activities.py -a examples/order_saga.py -i order_id=A-2 -i amount=-1

A negative amount makes the card decline, so the function raises and the saga releases the
reservation. `wovyr validate examples/order_saga.py` checks the function for calls a replay
could not repeat.
"""

from __future__ import annotations

from typing import Any

import wovyr

RETRY = {"max_attempts": 5, "initial_interval": "1s", "backoff": 2.0, "max_interval": "1m"}


@wovyr.workflow(name="order-saga-py", description="The order saga as a Python function.")
async def order_saga(
    ctx: wovyr.Context,
    order_id: str,
    amount: float = 0,
    currency: str = "EUR",
    items: list = [],  # noqa: B006 - an input's default, recorded as JSON; never mutated
) -> dict[str, Any]:
    reserved = await ctx.run(
        "inventory.reserve",
        id="reserve",
        order_id=order_id,
        items=items,
        retry=RETRY,
        timeout="30s",
        compensate=("inventory.release", lambda out: {"reservation_id": out["reservation_id"]}),
    )
    charged = await ctx.run(
        "payments.charge",
        id="charge",
        order_id=order_id,
        amount=amount,
        currency=currency,
        description=f"Order {order_id} ({len(items)} items)",
        retry={"max_attempts": 3, "non_retryable": ["CardDeclined", "InvalidAmount"]},
        timeout="1m",
        compensate=(
            "payments.refund",
            lambda out: {"charge_id": out["charge_id"], "amount": amount},
        ),
    )
    shipped = await ctx.run(
        "shipping.ship",
        id="ship",
        order_id=order_id,
        reservation_id=reserved["reservation_id"],
        express=amount > 500,
        retry=RETRY,
        timeout="2m",
    )
    return {
        "order_id": order_id,
        "charge_id": charged["charge_id"],
        "tracking": shipped["tracking_number"],
    }
