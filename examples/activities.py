"""Example activity handlers for the order examples (an in-process stand-in for real
inventory, payment and shipping services).

    wovyr run examples/order-saga.yaml -a examples/activities.py -i order_id=A-1 -i amount=42
    wovyr run examples/order-saga.yaml -a examples/activities.py -i order_id=A-2 -i amount=-1

A negative amount makes the card decline, so the saga compensates the reservation.
Handlers are at-least-once: each uses its idempotency key so a retried attempt is harmless.
"""

from __future__ import annotations

import hashlib
from typing import Any

import wovyr


def _ref(prefix: str, key: str) -> str:
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


@wovyr.activity("inventory.reserve")
def reserve(order_id: str, items: list[Any], ctx: wovyr.ActivityContext) -> dict[str, Any]:
    return {"reservation_id": _ref("R", ctx.activity_key), "order_id": order_id,
            "items": len(items)}


@wovyr.activity("inventory.release")
def release(reservation_id: str) -> dict[str, Any]:
    return {"released": reservation_id}


@wovyr.activity("payments.charge")
def charge(order_id: str, amount: float, currency: str, description: str,
           ctx: wovyr.ActivityContext) -> dict[str, Any]:
    if amount < 0:
        raise wovyr.NonRetryableError(f"card declined for {order_id}", type="CardDeclined")
    return {"charge_id": _ref("C", ctx.activity_key), "amount": amount, "currency": currency,
            "description": description}


@wovyr.activity("payments.refund")
def refund(charge_id: str, amount: float) -> dict[str, Any]:
    return {"refunded": charge_id, "amount": amount}


@wovyr.activity("shipping.ship")
def ship(order_id: str, reservation_id: str, express: bool,
         ctx: wovyr.ActivityContext) -> dict[str, Any]:
    return {"tracking_number": _ref("T", ctx.activity_key), "express": express}


@wovyr.activity("models.primary")
def primary_model(prompt: str, available: bool) -> dict[str, Any]:
    """A stand-in for a large model behind a flaky endpoint: down when `available` is false."""
    if not available:
        raise wovyr.ActivityError("the primary model is unavailable", type="ModelUnavailable")
    return {"text": f"[large] {prompt}", "model": "large"}


@wovyr.activity("models.fallback")
def fallback_model(prompt: str) -> dict[str, Any]:
    return {"text": f"[small] {prompt}", "model": "small"}


@wovyr.activity("jobs.check")
def check_job(job: str, ready_after: int, n: int) -> dict[str, Any]:
    """A stand-in for polling a remote job: it reports `done` from check `ready_after` on."""
    return {"job": job, "state": "done" if n >= ready_after else "running", "check": n}


@wovyr.activity("billing.charge")
def charge_month(customer: str, month: int, amount: float,
                 ctx: wovyr.ActivityContext) -> dict[str, Any]:
    """A stand-in for a payment provider: one charge per month (the idempotency key names
    the run, so a retried month is charged once by a real provider)."""
    return {"customer": customer, "month": month, "amount": amount,
            "charge_id": _ref("B", ctx.idempotency_key)}
