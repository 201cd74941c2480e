"""The events and webhooks pages: read-only, for every role that signs in (viewer and up).

- `/ui/events`: the tenant's received events, newest first (topic, trigger, outcome and
  why, the execution it started, signalled or names as a duplicate, linked; never the
  payload), a page at a time (`after=<time>~<id>`, `trigger=` to narrow), and its triggers
  (topic, what each starts or signals, the webhook path; secrets by NAME only).
- `/ui/deliveries`: the tenant's outbound webhook deliveries, newest first (status,
  attempts, last error; `status=`, `endpoint=`), and its endpoints (events, filter, secret
  NAMES). An endpoint's URL may carry a token in its path: only an admin (who may read it
  over the API) sees it whole, everyone else its scheme and host.

Every read goes through the signed-in tenant's store rows, so another tenant's events are
never listed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import Response

from wovyr.engine.triggers import list_events, list_triggers
from wovyr.server.ui.pages import cursor_text
from wovyr.server.ui.present import as_datetime
from wovyr.server.ui.routes import UiRoutes
from wovyr.server.ui.session import Session
from wovyr.store.events import TriggerRecord, WebhookEndpointRecord

__all__ = ["DELIVERY_STATUSES", "EventRoutes"]

DELIVERY_STATUSES = ("pending", "delivered", "filtered", "dead")
_PAGE = 50
_OUTCOME_BADGES = {
    "started": "completed",
    "signalled": "completed",
    "duplicate": "skipped",
    "filtered": "skipped",
    "unmatched": "cancelled",
    "limited": "waiting",
    "rejected": "failed",
    "failed": "failed",
}
_DELIVERY_BADGES = {
    "pending": "pending",
    "delivered": "completed",
    "filtered": "skipped",
    "dead": "failed",
}


def _after(query: Mapping[str, str]) -> tuple[tuple[datetime, str] | None, str | None]:
    """The page cursor of `after=<time>~<id>`, or the error that says it is not one."""
    raw = query.get("after") or ""
    if not raw:
        return None, None
    at_text, _, last_id = raw[:500].partition("~")
    at = as_datetime(at_text)
    if at is None or not last_id:
        return None, "after: not a page cursor from this list"
    return (at, last_id), None


def _next_url(base: str, page_next: tuple[datetime, str] | None, **kept: str) -> str | None:
    if page_next is None:
        return None
    query = {k: v for k, v in kept.items() if v} | {"after": cursor_text(page_next)}
    return f"{base}?{urlencode(query)}"


def _trigger_row(record: TriggerRecord) -> dict[str, Any]:
    spec = record.document.get("spec", {})
    start, signal = spec.get("start"), spec.get("signal")
    if isinstance(start, dict):
        action = f"start {start.get('workflow', '')}"
        if start.get("version"):
            action += f" v{start['version']}"
    elif isinstance(signal, dict):
        action = f"signal {signal.get('name', '')} to {signal.get('execution', '')}"
    else:
        action = ""
    dedup = spec.get("dedup")
    rate = spec.get("rate")
    return {
        "name": record.name,
        "topic": record.topic,
        "action": action,
        "filter": spec.get("filter"),
        "dedup": dedup.get("key") if isinstance(dedup, dict) else None,
        "rate": f"{rate.get('limit')} per {rate.get('per')}" if isinstance(rate, dict) else None,
        "webhook_path": None if record.hook_id is None else f"/api/v1/hooks/{record.hook_id}",
        "updated_at": record.updated_at,
    }


def _shown_url(url: str, admin: bool) -> str:
    """The whole URL for an admin; its scheme and host for anyone else."""
    if admin:
        return url
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…" if parts.path not in ("", "/") else url


def _endpoint_row(record: WebhookEndpointRecord, admin: bool) -> dict[str, Any]:
    return {
        "name": record.name,
        "url": _shown_url(record.url, admin),
        "events": record.events,
        "filter": record.filter,
        "secrets": record.secrets,
        "updated_at": record.updated_at,
    }


class EventRoutes:
    def __init__(self, ui: UiRoutes) -> None:
        self.ui = ui

    def router(self) -> APIRouter:
        r = APIRouter(include_in_schema=False)
        r.add_api_route("/ui/events", self.ui.page(self.events), methods=["GET"])
        r.add_api_route("/ui/deliveries", self.ui.page(self.deliveries), methods=["GET"])
        return r

    def events(self, request: Request, session: Session) -> Response:
        engine = self.ui.engine.for_tenant(session.tenant)
        trigger = (request.query_params.get("trigger") or "").strip()[:128]
        before, error = _after(request.query_params)
        context: dict[str, Any] = {
            "trigger": trigger,
            "error": error,
            "rows": [],
            "next_url": None,
            "triggers": [_trigger_row(t) for t in list_triggers(engine)],
            "href": lambda execution_id: quote(execution_id, safe=":"),
            "badge": _OUTCOME_BADGES,
        }
        if error is not None:
            return self.ui.render(request, "events.html", 400, session, **context)
        page = list_events(engine, trigger=trigger or None, before=before, limit=_PAGE)
        context.update(
            rows=list(page.items),
            next_url=_next_url(f"{self.ui.base(request)}/events", page.next, trigger=trigger),
        )
        return self.ui.render(request, "events.html", 200, session, **context)

    def deliveries(self, request: Request, session: Session) -> Response:
        store, tenant = self.ui.engine.store, session.tenant
        admin = session.can("admin")
        endpoint = (request.query_params.get("endpoint") or "").strip()[:128]
        status = (request.query_params.get("status") or "").strip()
        before, error = _after(request.query_params)
        if status and status not in DELIVERY_STATUSES:
            error, status = (
                f"status: {status[:40]!r} is not one of {', '.join(DELIVERY_STATUSES)}",
                "",
            )
        context: dict[str, Any] = {
            "endpoint": endpoint,
            "chosen": status,
            "error": error,
            "rows": [],
            "next_url": None,
            "endpoints": [_endpoint_row(e, admin) for e in store.list_webhook_endpoints(tenant)],
            "href": lambda execution_id: quote(execution_id, safe=":"),
            "badge": _DELIVERY_BADGES,
            "delivery_statuses": DELIVERY_STATUSES,
        }
        if error is not None:
            return self.ui.render(request, "deliveries.html", 400, session, **context)
        page = store.list_deliveries(
            tenant, endpoint=endpoint or None, status=status or None, before=before, limit=_PAGE
        )
        base = f"{self.ui.base(request)}/deliveries"
        context.update(
            rows=list(page.items),
            next_url=_next_url(base, page.next, endpoint=endpoint, status=status),
        )
        return self.ui.render(request, "deliveries.html", 200, session, **context)
