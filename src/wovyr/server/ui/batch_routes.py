"""The batches pages (bulk actions: their progress and item outcomes) and the executions
list's "cancel / rerun all matching" action. Like the other pages: a session cookie, a
CSRF-checked form post that redirects (no JavaScript needed), a confirmation box that must
be ticked, the operator role to act, and every read and change through the signed-in
tenant's engine, so another tenant's batch is the same 404 as a missing one."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from wovyr.engine.bulk import Bulk
from wovyr.errors import Conflict, InputError, NotFound, WovyrError
from wovyr.server.ui.pages import ListFilters, bulk_filter
from wovyr.server.ui.routes import READ_ONLY, UiRoutes, redirect
from wovyr.server.ui.session import Session
from wovyr.store.bulk import BatchRecord

__all__ = ["LIST_ACTIONS", "BatchRoutes"]

LIST_ACTIONS = ("cancel", "rerun")  # what the executions list offers for all matching
_ITEMS = 200  # items per batch page
REFUSED = "Bulk action refused"  # the title of a refused submission's page


def _progress(b: BatchRecord) -> dict[str, Any]:
    done = b.ok + b.skipped + b.errors
    return {
        "done": done,
        "percent": 100 if b.finished else (int(100 * done / b.listed) if b.listed else 0),
        "known": b.listed_all,
    }


class BatchRoutes:
    def __init__(self, ui: UiRoutes) -> None:
        self.ui = ui

    def router(self) -> APIRouter:
        r = APIRouter(include_in_schema=False)
        r.add_api_route("/ui/batches", self.ui.page(self.batches), methods=["GET"])
        r.add_api_route("/ui/batches", self.submit, methods=["POST"])
        r.add_api_route("/ui/batches/{batch_id}", self.ui.page(self.batch), methods=["GET"])
        return r

    def batches(self, request: Request, session: Session) -> Response:
        found = Bulk(self.ui.engine.for_tenant(session.tenant)).batches(100)
        rows = [{"b": b, **_progress(b)} for b in found]
        return self.ui.render(request, "batches.html", 200, session, rows=rows)

    def batch(self, request: Request, session: Session, batch_id: str) -> Response:
        bulk = Bulk(self.ui.engine.for_tenant(session.tenant))
        raw = request.query_params.get("after", "")
        after = int(raw) if raw.isdigit() and len(raw) <= 12 else 0
        try:
            found = bulk.get(batch_id)
            items = bulk.items(batch_id, after, _ITEMS)
        except NotFound:
            return self.ui.not_found(request, session, f"batch {batch_id!r}")
        submitted = request.query_params.get("notice") == "submitted"
        return self.ui.render(
            request,
            "batch.html",
            200,
            session,
            b=found,
            items=items,
            progress=_progress(found),
            after=after,
            next_after=items[-1].n if len(items) == _ITEMS else None,
            notice="Bulk action submitted: it runs in the background." if submitted else None,
            live=not found.finished,
        )

    async def submit(self, request: Request) -> Response:
        page = f"{self.ui.base(request)}/batches"
        checked = await self.ui.form_post(request, page, "operator", READ_ONLY, REFUSED)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        action = form.get("action", "")
        if action not in LIST_ACTIONS:
            return self._error(request, session, 400, "Choose cancel or rerun.")
        if form.get("confirm") != "yes":
            return self._error(
                request,
                session,
                400,
                "Tick the box to confirm: the action applies to every execution the filter "
                "matches, not only those on the page.",
            )
        given = bulk_filter(ListFilters.parse(form))
        if given is None:
            return self._error(request, session, 400, "This filter cannot be acted on in bulk.")
        bulk = Bulk(self.ui.acting(session))
        try:
            _, made = await run_in_threadpool(bulk.submit, action, given)
        except (InputError, Conflict, WovyrError) as exc:
            return self._error(
                request, session, 409 if isinstance(exc, Conflict) else 400, str(exc)
            )
        server = getattr(request.app.state, "wovyr", None)
        background = getattr(server, "background", None)
        if background is not None:
            background.wake_batches()
        target = f"{self.ui.base(request)}/batches/{quote(made.id, safe='')}?notice=submitted"
        return redirect(target)

    def _error(self, request: Request, session: Session, status: int, message: str) -> Response:
        return self.ui.error(request, session, status, message, REFUSED)
