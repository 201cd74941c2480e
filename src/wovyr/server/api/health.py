"""`/healthz`, `/readyz`, `/metrics` and the interactive API browser (`/docs`, vendored)."""

from __future__ import annotations

import functools
import gzip
import html
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from wovyr._version import __version__
from wovyr.platform.auth import METRICS_ROLE
from wovyr.platform.metrics import Sample, store_gauges
from wovyr.platform.metrics_http import store_checks
from wovyr.server.deps import Caller, Ctx, ServerContext
from wovyr.server.problems import ApiProblem, problem_responses

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process answers, and its version")
def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


def _check_store(ctx: ServerContext) -> tuple[str, str]:
    checks = store_checks(ctx.engine.store)
    return checks["store"], checks["migrations"]


@router.get(
    "/readyz",
    summary="Readiness: store reachable, migrations current, background tasks alive",
    responses={503: {"description": "Not ready"}},
)
def readyz(ctx: Ctx) -> JSONResponse:
    store, migrations = _check_store(ctx)
    if ctx.background is None:
        background = "disabled"
    else:
        background = "ok" if ctx.background.alive() else "stopped"
    checks = {"store": store, "migrations": migrations, "background": background}
    ready = store == "ok" and migrations in ("ok", "n/a") and background in ("ok", "disabled")
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )


def _sampled(ctx: ServerContext) -> list[Sample]:
    out = store_gauges(ctx.engine.store, ctx.clock.now())
    bg = ctx.background
    if bg is not None:
        status = bg.status()
        out += [
            (
                "wovyr_worker_executions",
                "gauge",
                "Executions this server's worker drives now.",
                float(status["running"]),
            ),
            (
                "wovyr_worker_restarts_total",
                "counter",
                "Times the background worker failed and was replaced.",
                float(status["restarts"]),
            ),
        ]
    return out


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics: the caller's tenant's series (a metrics key: every series)",
    responses=problem_responses(401, 403),
)
def metrics(ctx: Ctx, principal: Caller) -> PlainTextResponse:
    if principal.role == METRICS_ROLE:  # the host's scraper: every tenant, process gauges
        text = ctx.metrics.render(None, _sampled(ctx))
    elif principal.can("viewer"):
        text = ctx.metrics.render(principal.tenant)
    else:  # pragma: no cover - every other role ranks at least viewer
        raise ApiProblem(403, "This key may not read metrics.")
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


# RapiDoc (MIT, rapidoc.LICENSE), vendored from npm `rapidoc` 9.3.8 `dist/rapidoc-min.js`,
# stored gzipped (218 KB): the interactive /docs loads nothing from elsewhere
_VENDOR = Path(__file__).resolve().parents[1] / "vendor"
_BROWSER = _VENDOR / "rapidoc-min.js.gz"
# the page and its script come from this server only; the fonts are the system's
_DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
def docs(request: Request) -> HTMLResponse:
    """The interactive API browser over /openapi.json (RapiDoc, served from this package),
    with the operations listed in plain HTML for a browser without scripts."""
    spec = request.app.openapi()
    rows = []
    for path, operations in sorted(spec.get("paths", {}).items()):
        for method, op in operations.items():
            rows.append(
                f"<tr><td><code>{html.escape(method.upper())}</code></td>"
                f"<td><code>{html.escape(path)}</code></td>"
                f"<td>{html.escape(str(op.get('summary', '')))}</td></tr>"
            )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Wovyr API</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<link rel='icon' href='data:,'>"
        "<script type='module' src='/docs/rapidoc.js'></script>"
        "<style>body{font-family:system-ui,sans-serif;margin:0}noscript{display:block;"
        "margin:2rem}td{padding:.2rem .8rem}</style></head><body>"
        "<rapi-doc spec-url='/openapi.json' load-fonts='false' render-style='read' "
        "show-header='false' allow-server-selection='false' allow-authentication='true' "
        "regular-font='system-ui, sans-serif' mono-font='ui-monospace, monospace' "
        "theme='light'></rapi-doc>"
        "<noscript><h1>Wovyr API v1</h1>"
        "<p>The full document: <a href='/openapi.json'>/openapi.json</a> (OpenAPI 3.1). "
        "Authenticate with <code>Authorization: Bearer wvr_...</code>.</p>"
        f"<table>{''.join(rows)}</table></noscript></body></html>"
    )
    return HTMLResponse(page, headers={"Content-Security-Policy": _DOCS_POLICY})


@functools.cache
def _browser_script() -> bytes:
    return _BROWSER.read_bytes()


@router.get("/docs/rapidoc.js", include_in_schema=False)
def docs_script(request: Request) -> Response:
    """The vendored browser script: gzipped as stored when the client takes gzip."""
    body = _browser_script()
    headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
    else:
        body = gzip.decompress(body)
    return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)
