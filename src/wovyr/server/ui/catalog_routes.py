"""The schedules, definitions, workers and flow-control pages, the schedule actions (pause,
resume, trigger, backfill) and the rate-limit bucket actions (declare, delete). Like the
other pages: a session cookie, CSRF-checked form posts that redirect back (no JavaScript
needed), the operator role to act on schedules and the admin role on buckets (as over the
API), and every read and change through the signed-in tenant's engine, so another tenant's
schedule, definition or bucket is the same 404 as a missing one."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from wovyr.errors import (
    Conflict,
    DefinitionConflict,
    DefinitionError,
    InputError,
    NotFound,
    Problem,
    WovyrError,
)
from wovyr.scheduling.schedules import Schedules
from wovyr.server.ui.catalog import (
    definition_page,
    definition_rows,
    flow_page,
    schedule_rows,
    workers_page,
)
from wovyr.server.ui.present import as_datetime
from wovyr.server.ui.routes import (
    READ_ONLY,
    FormError,
    UiRoutes,
    action_handler,
    action_status,
    redirect,
)
from wovyr.server.ui.session import Session
from wovyr.server.ui.start_form import field_errors, parse_start_form, start_fields

__all__ = ["CatalogRoutes"]

SCHEDULE_ACTIONS = ("pause", "resume", "trigger", "backfill")
SCHEDULE_NOTICES = {
    "paused": "Schedule paused.",
    "resumed": "Schedule resumed.",
    "triggered": "Execution started.",
    "backfilled": "Backfill started.",
}
LIMIT_NOTICES = {"set": "Rate limit saved.", "deleted": "Rate limit deleted."}
DEFINITION_NOTICES = {
    "applied": "Definition applied.",
    "unchanged": "That document was applied already: nothing changed.",
}
# A pasted definition may be larger than an action form (the server's body limit still
# applies first).
DOCUMENT_LIMIT = 2 * 1024 * 1024


class CatalogRoutes:
    def __init__(self, ui: UiRoutes, lease_seconds: float = 30.0) -> None:
        self.ui = ui
        self.lease_seconds = lease_seconds

    def router(self) -> APIRouter:
        r = APIRouter(include_in_schema=False)
        r.add_api_route("/ui/schedules", self.ui.page(self.schedules), methods=["GET"])
        for action in SCHEDULE_ACTIONS:
            r.add_api_route(
                f"/ui/schedules/{{schedule_id}}/{action}",
                action_handler(self.act, action, "schedule_id", f"ui_schedule_{action}"),
                methods=["POST"],
            )
        r.add_api_route("/ui/definitions", self.ui.page(self.definitions), methods=["GET"])
        r.add_api_route("/ui/definitions", self.apply, methods=["POST"])
        r.add_api_route("/ui/definitions/{name}", self.ui.page(self.definition), methods=["GET"])
        r.add_api_route("/ui/definitions/{name}/start", self.start, methods=["POST"])
        r.add_api_route("/ui/workers", self.ui.page(self.workers), methods=["GET"])
        r.add_api_route("/ui/flow", self.ui.page(self.flow), methods=["GET"])
        r.add_api_route("/ui/flow/limits", self.set_limit, methods=["POST"])
        r.add_api_route("/ui/flow/limits/{key}/delete", self.delete_limit, methods=["POST"])
        return r

    # --- schedules -----------------------------------------------------------------------

    def schedules(self, request: Request, session: Session) -> Response:
        notice = SCHEDULE_NOTICES.get(request.query_params.get("notice", ""))
        started = request.query_params.get("started", "")[:200]
        return self.schedules_response(request, session, notice=notice, started=started)

    def schedules_response(
        self,
        request: Request,
        session: Session,
        *,
        status: int = 200,
        notice: str | None = None,
        error: str | None = None,
        started: str = "",
    ) -> Response:
        service = Schedules(self.ui.engine.for_tenant(session.tenant))
        return self.ui.render(
            request,
            "schedules.html",
            status,
            session,
            rows=schedule_rows(service),
            notice=notice,
            error=error,
            started=started,
            started_href=quote(started, safe=":"),
        )

    async def act(self, request: Request, schedule_id: str, action: str) -> Response:
        page = f"{self.ui.base(request)}/schedules"
        checked = await self.ui.form_post(request, page, "operator", READ_ONLY)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        service = Schedules(self.ui.acting(session))
        try:
            notice, started = await run_in_threadpool(perform, service, schedule_id, action, form)
        except NotFound:
            return self.ui.not_found(request, session, f"schedule {schedule_id!r}")
        except (FormError, InputError, Conflict, WovyrError) as exc:
            # Show the page again with the reason; nothing was changed.
            return await run_in_threadpool(
                functools.partial(
                    self.schedules_response,
                    request,
                    session,
                    status=action_status(exc),
                    error=str(exc),
                )
            )
        suffix = f"&started={quote(started, safe=':')}" if started else ""
        return redirect(f"{page}?notice={notice}{suffix}")

    # --- definitions ---------------------------------------------------------------------

    def definitions(self, request: Request, session: Session) -> Response:
        return self.definitions_response(request, session)

    def definitions_response(
        self,
        request: Request,
        session: Session,
        *,
        status: int = 200,
        document: str = "",
        problems: Sequence[str] = (),
    ) -> Response:
        engine = self.ui.engine.for_tenant(session.tenant)
        return self.ui.render(
            request,
            "definitions.html",
            status,
            session,
            rows=definition_rows(engine),
            can_apply=session.can("admin"),
            document=document,
            problems=list(problems),
        )

    async def apply(self, request: Request) -> Response:
        """Apply the pasted (or, with the page's script, uploaded) document: admins only,
        checked and audited as `POST /api/v1/definitions` is, as made by the session's key.
        A refused document comes back with its problems, at their lines."""
        page = f"{self.ui.base(request)}/definitions"
        refused = "Your role ({role}) may not apply definitions: that takes an admin."
        checked = await self.ui.form_post(request, page, "admin", refused, limit=DOCUMENT_LIMIT)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        text = form.get("document", "")
        if not text.strip():
            problems = ["Paste a workflow document (YAML or JSON), or choose a file."]
            return self.definitions_response(request, session, status=400, problems=problems)
        engine = self.ui.acting(session)
        try:
            # parsing and validating an untrusted document is CPU work: not on the loop
            outcome, digest = await run_in_threadpool(engine.apply, text)
        except (DefinitionError, InputError) as exc:
            found = [_located(p) for p in exc.problems] or [str(exc)]
            return self.definitions_response(
                request, session, status=400, document=text, problems=found
            )
        except (DefinitionConflict, WovyrError) as exc:
            said = str(exc) + (f" ({exc.hint})" if getattr(exc, "hint", None) else "")
            return self.definitions_response(
                request, session, status=action_status(exc), document=text, problems=[said]
            )
        workflow = engine.definition(digest)
        query = urlencode({"version": workflow.version, "notice": outcome})
        return redirect(f"{page}/{quote(workflow.name, safe='')}?{query}")

    def definition(self, request: Request, session: Session, name: str) -> Response:
        version = request.query_params.get("version", "").strip()[:128] or None
        notice = DEFINITION_NOTICES.get(request.query_params.get("notice", ""))
        return self.definition_response(request, session, name, version, notice=notice)

    def definition_response(
        self,
        request: Request,
        session: Session,
        name: str,
        version: str | None,
        *,
        status: int = 200,
        notice: str | None = None,
        posted: Mapping[str, str] | None = None,
        errors: Mapping[str, str] | None = None,
        problems: Sequence[str] = (),
    ) -> Response:
        engine = self.ui.engine.for_tenant(session.tenant)
        try:
            page = definition_page(engine, name, version, self.ui.base(request))
        except NotFound:
            shown = f"{name!r} version {version!r}" if version else repr(name)
            return self.ui.not_found(request, session, f"definition {shown}")
        return self.ui.render(
            request,
            "definition.html",
            status,
            session,
            page=page,
            notice=notice,
            fields=start_fields(page.workflow, posted, errors),
            posted=posted or {},
            problems=list(problems),
        )

    async def start(self, request: Request, name: str) -> Response:
        """Start an execution of the definition from its form: operators (and admins),
        as `POST /api/v1/workflows` allows them, for the session's tenant and audited as
        made by its key (the tenant's policy and quotas apply as to any start). A refused
        start shows the page again, each problem at its field, with what was typed."""
        page = f"{self.ui.base(request)}/definitions/{quote(name, safe='')}"
        refused = "Your role ({role}) may not start executions."
        checked = await self.ui.form_post(request, page, "operator", refused)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        version = form.get("version", "").strip()[:128] or None
        engine = self.ui.acting(session)
        try:
            workflow, _ = await run_in_threadpool(engine.named, name, version)
        except NotFound:
            return await run_in_threadpool(
                functools.partial(self.definition_response, request, session, name, version)
            )
        inputs, errors = parse_start_form(workflow, form)
        problems: list[str] = []
        if not errors:
            start = functools.partial(
                engine.start,
                name=name,
                version=workflow.version,
                input=inputs,
                execution_id=form.get("id", "").strip() or None,
            )
            try:
                record = await run_in_threadpool(start)
            except InputError as exc:
                errors, problems = field_errors(exc, workflow)
            except WovyrError as exc:
                problems = [str(exc)]
            else:
                started = quote(record.id, safe=":")
                return redirect(f"{self.ui.base(request)}/executions/{started}?notice=started")
        return await run_in_threadpool(
            functools.partial(
                self.definition_response,
                request,
                session,
                name,
                workflow.version,
                status=400,
                posted=form,
                errors=errors,
                problems=problems,
            )
        )

    # --- workers -------------------------------------------------------------------------

    def workers(self, request: Request, session: Session) -> Response:
        engine = self.ui.engine.for_tenant(session.tenant)
        server = getattr(request.app.state, "wovyr", None)  # None: the UI mounted alone
        background = server.background if server is not None else None
        page = workers_page(
            engine,
            engine.clock.now(),
            self.lease_seconds,
            admin=session.can("admin"),
            own=background.own_worker() if background is not None else None,
        )
        return self.ui.render(
            request,
            "workers.html",
            200,
            session,
            page=page,
            admin=session.can("admin"),
            lease_seconds=self.lease_seconds,
        )

    # --- flow control --------------------------------------------------------------------

    def flow(self, request: Request, session: Session) -> Response:
        notice = LIMIT_NOTICES.get(request.query_params.get("notice", ""))
        return self.flow_response(request, session, notice=notice)

    def flow_response(
        self,
        request: Request,
        session: Session,
        *,
        status: int = 200,
        notice: str | None = None,
        error: str | None = None,
    ) -> Response:
        engine = self.ui.engine.for_tenant(session.tenant)
        page = flow_page(engine, engine.clock.now(), self.ui.base(request))
        return self.ui.render(
            request,
            "flow.html",
            status,
            session,
            page=page,
            admin=session.can("admin"),
            notice=notice,
            error=error,
        )

    async def set_limit(self, request: Request) -> Response:
        return await self.limit_action(request, None)

    async def delete_limit(self, request: Request, key: str) -> Response:
        return await self.limit_action(request, key)

    async def limit_action(self, request: Request, deleted: str | None) -> Response:
        """Declare (or change) a bucket from the form, or delete bucket `deleted`: admins
        only, audited as made by the session's key, as `PUT`/`DELETE
        /api/v1/admin/limits/{key}` are."""
        page = f"{self.ui.base(request)}/flow"
        refused = "Your role ({role}) may not change rate limits."
        checked = await self.ui.form_post(request, page, "admin", refused)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        engine = self.ui.acting(session)
        try:
            if deleted is not None:
                await run_in_threadpool(engine.delete_rate_limit, deleted)
                return redirect(f"{page}?notice=deleted")
            key, limit, per, burst = limit_form(form)
            await run_in_threadpool(
                functools.partial(engine.set_rate_limit, key, limit, per, burst, by=session.key_id)
            )
        except NotFound:
            return self.ui.not_found(request, session, f"rate limit {deleted!r}")
        except (FormError, InputError, Conflict, WovyrError) as exc:
            return await run_in_threadpool(
                functools.partial(
                    self.flow_response, request, session, status=action_status(exc), error=str(exc)
                )
            )
        return redirect(f"{page}?notice=set")


def _located(problem: Problem) -> str:
    """A problem of a pasted document: `line 3, column 5: ...` (it has no file name)."""
    where = f"line {problem.line}, column {problem.column}: " if problem.line else ""
    path = f" (at {problem.path})" if problem.path and not problem.line else ""
    return where + problem.message + path + (f"; {problem.hint}" if problem.hint else "")


def limit_form(form: dict[str, str]) -> tuple[str, float, float, float | None]:
    """The bucket form's key, limit, period (seconds, default 1) and burst (default: the
    limit); the engine checks the ranges, this only that each is a finite number."""
    if not form.get("limit", "").strip():
        raise FormError(400, "A rate limit needs a limit (units per period).")
    burst = form.get("burst", "").strip()
    return (
        form.get("key", "").strip(),
        _form_number(form, "limit"),
        _form_number(form, "per", "1"),
        _form_number(form, "burst") if burst else None,
    )


def _form_number(form: dict[str, str], name: str, default: str = "") -> float:
    try:
        value = float(form.get(name, "").strip() or default)
    except ValueError:
        raise FormError(400, f"The {name} must be a number.") from None
    if not math.isfinite(value):
        raise FormError(400, f"The {name} must be a finite number.")
    return value


def perform(
    service: Schedules, schedule_id: str, action: str, form: dict[str, str]
) -> tuple[str, str]:
    """Carry out one schedule action: (notice code, first execution started or "")."""
    note = form.get("note", "").strip()[:2000] or None
    if action == "pause":
        service.pause(schedule_id, note)
        return "paused", ""
    if action == "resume":
        service.resume(schedule_id, note)
        return "resumed", ""
    if action == "trigger":
        return "triggered", service.trigger(schedule_id)
    service.get(schedule_id)  # 404 before 400: another tenant's id tells nothing
    start, end = as_datetime(form.get("start", "")), as_datetime(form.get("end", ""))
    if start is None or end is None:
        raise FormError(400, "A backfill needs a start and an end (UTC date and time).")
    started = service.backfill(schedule_id, start, end)
    return "backfilled", started[0] if started else ""
