"""The web UI's HTTP side: sign in/out, the executions list, one execution's page and its
actions. Every page works without JavaScript (forms post, the server redirects); every
engine call goes through `engine.for_tenant(session.tenant)`, so another tenant's
execution is the same 404 as a missing one."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from wovyr.engine.engine import Engine
from wovyr.engine.streams import StreamCursor
from wovyr.errors import Conflict, InputError, NotFound, WovyrError
from wovyr.platform.auth import role_at_least
from wovyr.server.streams import EventStream, StreamHub
from wovyr.server.ui.gantt import span_text
from wovyr.server.ui.pages import (
    LIST_STATUSES,
    ListFilters,
    bulk_filter,
    cursor_text,
    execution_page,
    find_executions,
    list_rows,
    status_counts,
)
from wovyr.server.ui.present import WAIT_KINDS, time_tag
from wovyr.server.ui.session import Authenticator, Principal, Session, SessionCodec

__all__ = ["UiRoutes"]

SESSION_COOKIE = "wovyr_session"
UI_ROLE = "viewer"  # the least role that signs in: the UI shows the tenant's executions
LOGIN_COOKIE = "wovyr_login"
FORM_LIMIT = 64 * 1024
FORM_FIELDS = 256  # a start form has a field per input of its workflow
_HERE = Path(__file__).parent
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
NOTICES = {
    "approved": "Approved.",
    "rejected": "Rejected.",
    "signalled": "Signal sent.",
    "cancelled": "Cancellation recorded.",
    "rerun": "Rerun started.",
    "started": "Execution started.",
}


class FormError(WovyrError):
    """The form was refused; `status` is the HTTP status of the page that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _static_versions() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12]
        for p in sorted((_HERE / "static").iterdir())
        if p.is_file()
    }


class UiRoutes:
    """Holds what the handlers share and builds the router."""

    def __init__(
        self,
        engine: Engine,
        authenticator: Authenticator,
        codec: SessionCodec,
    ) -> None:
        self.engine = engine
        self.authenticator = authenticator
        self.codec = codec
        self.streams = StreamHub()  # when the UI is mounted without the API's (tests)
        lookup = getattr(authenticator, "principal_for_key", None)
        self.principal_for_key: Callable[[str], Principal | None] | None = (
            lookup if callable(lookup) else None
        )
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        versions = _static_versions()
        self.templates.globals["static_version"] = versions
        self.templates.globals["statuses"] = LIST_STATUSES
        self.templates.globals["wait_kinds"] = WAIT_KINDS
        self.templates.globals["span_text"] = span_text

    # --- plumbing ------------------------------------------------------------------------

    def base(self, request: Request) -> str:
        return f"{request.scope.get('root_path', '')}/ui"

    def session(self, request: Request) -> Session | None:
        """The signed-in session, re-checked against the key it came from (when the
        authenticator can look keys up): a revoked key ends it, a changed role applies. A
        session whose role is below `viewer` (a `metrics` key's, signed in before that was
        refused) is none: the UI shows a tenant's executions, which such a key may not
        read."""
        session = self.codec.read(request.cookies.get(SESSION_COOKIE))
        if session is None or not session.can(UI_ROLE):
            return None
        if self.principal_for_key is None:
            return session
        try:
            current = self.principal_for_key(session.key_id)
        except WovyrError:
            return None
        if current is None or current.tenant != session.tenant:
            return None
        if not role_at_least(current.role, UI_ROLE):
            return None
        return session if current.role == session.role else replace(session, role=current.role)

    def render(
        self,
        request: Request,
        template: str,
        status: int = 200,
        session: Session | None = None,
        **context: Any,
    ) -> HTMLResponse:
        now = self.engine.clock.now()
        html = self.templates.get_template(template).render(
            base=self.base(request),
            principal=session,
            csrf=self.codec.csrf_token(session) if session else "",
            now=now,
            when=lambda value, clock=False: time_tag(value, now, clock=clock),
            can_act=bool(session and session.can("operator")),
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        secure_headers(response)
        return response

    def page(self, show: Callable[..., Response]) -> Callable[..., Response]:
        """The route of a page: `show(request, session, **path)` for a signed-in user, the
        way to sign in and come back for anyone else. The route is named as `show` and takes
        its path parameters (each a `str`, as FastAPI reads them from the signature)."""

        def handle(request: Request, **path: str) -> Response:
            session = self.session(request)
            if session is None:
                return self.to_login(request)
            return show(request, session, **path)

        params = list(inspect.signature(show).parameters)[2:]  # after request and session
        handle.__name__ = show.__name__
        handle.__signature__ = _route_signature(*params)  # type: ignore[attr-defined]
        return handle

    def to_login(self, request: Request, target: str | None = None) -> RedirectResponse:
        if target is None:
            target = request.url.path
            if request.url.query:
                target += "?" + request.url.query
        return redirect(f"{self.base(request)}/login?{urlencode({'next': target})}")

    def not_found(self, request: Request, session: Session, what: str) -> HTMLResponse:
        """The 404 page: "There is no `what` here" (another tenant's is as missing)."""
        return self.error(request, session, 404, f"There is no {what} here.", "Not found")

    def error(
        self, request: Request, session: Session, status: int, message: str, title: str = "Error"
    ) -> HTMLResponse:
        return self.render(request, "error.html", status, session, title=title, message=message)

    def acting(self, session: Session) -> Engine:
        """The session's tenant's engine, its changes audited as made by the key the session
        signed in with."""
        actor = f"key:{session.key_id}/{session.role}"
        return self.engine.for_tenant(session.tenant).acting(actor)

    # --- routes --------------------------------------------------------------------------

    def router(self) -> APIRouter:
        r = APIRouter(include_in_schema=False)
        r.add_api_route("/", self.root, methods=["GET"])
        r.add_api_route("/ui", self.page(self.list_page), methods=["GET"])
        r.add_api_route("/ui/", self.page(self.list_page), methods=["GET"])
        r.add_api_route("/ui/login", self.login_form, methods=["GET"])
        r.add_api_route("/ui/login", self.login, methods=["POST"])
        r.add_api_route("/ui/logout", self.logout, methods=["POST"])
        r.add_api_route("/ui/executions/{execution_id}", self.page(self.execution), methods=["GET"])
        r.add_api_route("/ui/executions/{execution_id}/live", self.live, methods=["GET"])
        r.add_api_route("/ui/executions/{execution_id}/stream", self.stream, methods=["GET"])
        for action in ("signal", "approve", "cancel", "rerun"):
            r.add_api_route(
                f"/ui/executions/{{execution_id}}/{action}",
                action_handler(self.act, action, "execution_id", f"ui_{action}"),
                methods=["POST"],
            )
        return r

    def root(self, request: Request) -> Response:
        return redirect(self.base(request), 307)

    def login_form(self, request: Request) -> Response:
        next = request.query_params.get("next", "")
        if self.session(request) is not None:
            return redirect(safe_next(next, self.base(request)))
        return self.login_page(request, next, None, 200)

    def login_page(self, request: Request, next: str, error: str | None, status: int) -> Response:
        nonce = secrets.token_urlsafe(18)
        response = self.render(
            request,
            "login.html",
            status,
            None,
            next=safe_next(next, self.base(request)),
            login_token=self.codec.login_token(nonce),
            error=error,
        )
        response.set_cookie(
            LOGIN_COOKIE,
            nonce,
            max_age=3600,
            path=self.base(request),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def login(self, request: Request) -> Response:
        try:
            form = await read_form(request)
        except FormError as exc:
            return self.login_page(request, "", str(exc), exc.status)
        next_url = form.get("next", "")
        if not self.codec.check_login(request.cookies.get(LOGIN_COOKIE), form.get("csrf_token")):
            return self.login_page(
                request, next_url, "The sign-in form expired; please try again.", 403
            )
        token = form.get("api_key", "").strip()
        principal = await run_in_threadpool(self.authenticator.verify, token) if token else None
        if principal is None:
            return self.login_page(request, next_url, "That API key is not valid.", 401)
        if not role_at_least(principal.role, UI_ROLE):
            refused = (
                f"A key of role {principal.role} cannot sign in to the web UI: it shows the "
                f"tenant's executions, which need a key of role {UI_ROLE} or above."
            )
            return self.login_page(request, next_url, refused, 403)
        _, cookie = self.codec.issue(principal)
        response = redirect(safe_next(next_url, self.base(request)))
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=self.codec.lifetime_seconds,
            path=self.base(request),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_COOKIE, path=self.base(request))
        return response

    async def logout(self, request: Request) -> Response:
        session = await run_in_threadpool(self.session, request)
        response = redirect(f"{self.base(request)}/login")
        if session is not None:
            try:
                form = await read_form(request)
            except FormError as exc:
                return self.error(request, session, exc.status, str(exc))
            if not self.codec.check_csrf(session, form.get("csrf_token")):
                return self.forbidden(request, session, "The form expired; reload and retry.")
            await run_in_threadpool(self.codec.end, session)
        response.delete_cookie(SESSION_COOKIE, path=self.base(request))
        return response

    def forbidden(self, request: Request, session: Session, message: str) -> HTMLResponse:
        return self.error(request, session, 403, message, "Forbidden")

    async def form_post(
        self,
        request: Request,
        page: str,
        role: str,
        refused: str,
        title: str = "Error",
        limit: int = FORM_LIMIT,
    ) -> tuple[Session, dict[str, str]] | Response:
        """What an action form's POST checks first, in order: a session (signed out
        meanwhile: sign in and come back to `page`, not to the POST), a readable form (else
        an error page titled `title`), its CSRF token and the `role` (else 403, saying
        `refused`, in which `{role}` is the session's). The session and the form, or the
        response to send instead."""
        session = await run_in_threadpool(self.session, request)
        if session is None:
            return self.to_login(request, page)
        try:
            form = await read_form(request, limit)
        except FormError as exc:
            return self.error(request, session, exc.status, str(exc), title)
        if not self.codec.check_csrf(session, form.get("csrf_token")):
            return self.forbidden(request, session, "The form expired; reload the page and retry.")
        if not session.can(role):
            return self.forbidden(request, session, refused.format(role=session.role))
        return session, form

    def list_page(self, request: Request, session: Session) -> Response:
        """The list. `?partial=rows` (what the page's script polls) renders only the rows
        and skips the status counts, so a refresh costs one indexed query."""
        filters = ListFilters.parse(request.query_params)
        partial = request.query_params.get("partial") == "rows"
        template = "list_rows.html" if partial else "list.html"
        engine = self.engine.for_tenant(session.tenant)
        context: dict[str, Any] = {
            "f": filters,
            "rows": [],
            "counts": {},
            "found": None,
            "next_query": None,
            "live": False,
            "bulkable": bulk_filter(filters) is not None,
        }
        if filters.errors:
            return self.render(request, template, 400, session, **context)
        found = find_executions(engine, filters)
        rows = list_rows(engine, found.items, engine.clock.now())
        context.update(
            rows=rows,
            found=found,
            counts={} if partial else status_counts(engine, filters),
            next_query=filters.query(after=cursor_text(found.next_cursor))
            if found.next_cursor
            else None,
            live=any(r["status"] in ("running", "waiting") for r in rows),
        )
        return self.render(request, template, 200, session, **context)

    def execution(self, request: Request, session: Session, execution_id: str) -> Response:
        notice = NOTICES.get(request.query_params.get("notice", ""))
        return self.execution_response(
            request, session, execution_id, notice=notice, events_from=events_param(request)
        )

    def execution_response(
        self,
        request: Request,
        session: Session,
        execution_id: str,
        *,
        status: int = 200,
        notice: str | None = None,
        error: str | None = None,
        events_from: int | None = None,
        form: dict[str, str] | None = None,
        template: str = "execution.html",
    ) -> Response:
        engine = self.engine.for_tenant(session.tenant)
        try:
            page = execution_page(engine, execution_id, engine.clock.now(), events_from)
        except NotFound:
            return self.not_found(request, session, f"execution {execution_id!r}")
        return self.render(
            request,
            template,
            status,
            session,
            page=page,
            href=f"{self.base(request)}/executions/{quote(execution_id, safe=':')}",
            notice=notice,
            error=error,
            form=form or {},
        )

    def live(self, request: Request, execution_id: str) -> Response:
        session = self.session(request)
        if session is None:
            return Response(status_code=401)
        return self.execution_response(
            request, session, execution_id, events_from=events_param(request), template="live.html"
        )

    async def stream(self, request: Request, execution_id: str) -> Response:
        """The execution's live stream (`GET /api/v1/workflows/{id}/stream`) for the signed-in
        session: what the page shows as the model's text arrives. `Last-Event-ID` resumes."""
        session = await run_in_threadpool(self.session, request)
        if session is None:
            return Response(status_code=401)
        engine = self.engine.for_tenant(session.tenant)
        position = request.headers.get("last-event-id")
        try:
            cursor = StreamCursor.parse(position) if position else StreamCursor()
        except ValueError:
            return Response(status_code=400)
        if await run_in_threadpool(engine.store.load, execution_id, engine.tenant) is None:
            return Response(status_code=404)
        server = getattr(request.app.state, "wovyr", None)
        hub: StreamHub = server.streams if server is not None else self.streams
        frames = hub.messages(engine.store, engine.tenant, execution_id, cursor)
        response = EventStream(frames, headers={"X-Accel-Buffering": "no"})
        secure_headers(response)
        return response

    async def act(self, request: Request, execution_id: str, action: str) -> Response:
        page = f"{self.base(request)}/executions/{quote(execution_id, safe=':')}"
        checked = await self.form_post(request, page, "operator", READ_ONLY)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        engine = self.acting(session)
        try:
            notice = await run_in_threadpool(perform, engine, session, execution_id, action, form)
        except NotFound:
            return self.not_found(request, session, f"execution {execution_id!r}")
        except (FormError, InputError, Conflict, WovyrError) as exc:
            # Show the page again with the reason and what was typed, so it can be fixed.
            return await run_in_threadpool(
                functools.partial(
                    self.execution_response,
                    request,
                    session,
                    execution_id,
                    status=action_status(exc),
                    error=str(exc),
                    form=form,
                )
            )
        if notice.startswith("rerun:"):  # to the new execution's page
            started = quote(notice.removeprefix("rerun:"), safe=":")
            return redirect(f"{self.base(request)}/executions/{started}?notice=rerun")
        return redirect(f"{page}?notice={notice}")


def action_handler(
    act: Callable[[Request, str, str], Awaitable[Response]], action: str, param: str, name: str
) -> Callable[..., Awaitable[Response]]:
    """The route of one action, named `name`: `act(request, <path parameter param>, action)`
    (the signature names `param`, as FastAPI reads path parameters from it)."""

    async def handle(request: Request, **path: str) -> Response:
        return await act(request, path[param], action)

    handle.__name__ = name
    handle.__signature__ = _route_signature(param)  # type: ignore[attr-defined]
    return handle


def _route_signature(*path: str) -> inspect.Signature:
    """The signature FastAPI reads a route's parameters from: the request and the path
    parameters `path`, each a `str`."""
    return inspect.Signature(
        [inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)]
        + [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=str) for p in path]
    )


def action_status(exc: Exception) -> int:
    """The status of the page that says why an action was refused."""
    if isinstance(exc, FormError):
        return exc.status
    if isinstance(exc, InputError):
        return 400
    if isinstance(exc, Conflict):
        return 409
    return 503  # the store was busy or unavailable: the same post may work in a moment


def perform(
    engine: Engine, session: Session, execution_id: str, action: str, form: dict[str, str]
) -> str:
    """Carry out one action; returns the notice code for the redirect (`rerun:<id>` for a
    rerun: its page is the new execution's)."""
    by = session.actor or session.key_id
    if action == "rerun":
        start_from = form.get("from", "").strip() or None
        record = engine.rerun(execution_id, start_from=start_from, latest=bool(form.get("latest")))
        return f"rerun:{record.id}"
    if action == "approve":
        activity = form.get("activity", "").strip()
        decision = form.get("decision", "")
        if not activity or decision not in ("approve", "reject"):
            raise FormError(400, "Choose an approval and approve or reject it.")
        comment = form.get("comment", "").strip()[:2000] or None
        engine.approve(execution_id, activity, decision == "approve", by=by, comment=comment)
        return "approved" if decision == "approve" else "rejected"
    if action == "signal":
        name = form.get("name", "").strip()
        if not name:
            raise FormError(400, "A signal needs a name.")
        payload = parse_payload(form.get("payload", ""))
        engine.signal(execution_id, name, payload)
        return "signalled"
    reason = form.get("reason", "").strip()[:2000] or None
    engine.cancel(execution_id, reason, by=by)
    return "cancelled"


def events_param(request: Request) -> int | None:
    raw = request.query_params.get("events", "")
    return int(raw) if raw.isdigit() and len(raw) <= 12 else None


def parse_payload(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise FormError(400, f"The payload is not valid JSON: {exc}") from None


#: What a role that may not act is told (`UiRoutes.form_post`).
READ_ONLY = "Your role ({role}) may only read."


async def read_form(request: Request, limit: int = FORM_LIMIT) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body (or none), at most `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise FormError(413, "The form is too large.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise FormError(413, "The form is too large.")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded" and (kind or body):
        raise FormError(415, "Send the form as application/x-www-form-urlencoded.")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise FormError(400, "The form could not be read.") from None
    return dict(pairs)


def safe_next(target: str, base: str) -> str:
    """`target` if it is one of our own pages, else `base`: a path under `base` (no scheme,
    no host), with no `.` or `..` segment, no `//`, no backslash and no control character,
    as written and once percent-decoded (a browser resolves `%2e%2e` as `..`; decoding is
    repeated, so a doubly encoded one is refused too)."""
    if not (target == base or target.startswith((base + "/", base + "?"))):
        return base
    decoded = target
    while (again := unquote(decoded)) != decoded:  # (each pass shortens it: it ends)
        decoded = again
    for text in (target, decoded):
        if "//" in text or "\\" in text or any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
            return base
        path = text.split("?", 1)[0].split("#", 1)[0]
        if not (path == base or path.startswith(base + "/")):
            return base
        if any(segment in (".", "..") for segment in path.split("/")):
            return base
    return target


def redirect(url: str, status: int = 303) -> RedirectResponse:
    response = RedirectResponse(url, status_code=status)
    secure_headers(response)
    return response


def secure_headers(response: Response) -> None:
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
