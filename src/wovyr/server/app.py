"""The HTTP application: API v1, health and metrics, the web UI when present, and the
background worker (claims, timers, schedules) for as long as the app runs.

    app = create_app(engine, settings)          # uvicorn.run(app) / `wovyr serve`

`create_app` registers a metrics observer with `engine.store` (`wovyr.platform.metrics`):
the engine needs no metrics code, and the store the handlers see is the engine's own.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from wovyr import assemble
from wovyr._version import __version__
from wovyr.clock import Clock
from wovyr.engine.artifacts import MAX_ARTIFACT_BYTES
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import served
from wovyr.platform.auth import Authenticator, bearer_token
from wovyr.platform.metrics import meter
from wovyr.platform.secrets import Secrets, open_secrets
from wovyr.server.api import (
    admin,
    agents,
    artifacts,
    audit,
    batches,
    definitions,
    events,
    flow,
    health,
    limits,
    mcp_servers,
    memory,
    policy,
    providers,
    quotas,
    retention,
    schedules,
    secrets,
    workflows,
)
from wovyr.server.api.openapi import install_openapi, operation_id
from wovyr.server.background import Background
from wovyr.server.deps import ServerContext
from wovyr.server.guard import RequestGuard
from wovyr.server.problems import ApiProblem, install_problem_handlers
from wovyr.settings import Settings

__all__ = ["MCP_PATH", "create_app"]

MCP_PATH = "/mcp"


def _ui_mounter() -> Callable[..., Any] | None:
    """`wovyr.server.ui.mount_ui`, when the web UI is installed."""
    try:
        module = importlib.import_module("wovyr.server.ui")
    except ModuleNotFoundError as exc:
        if exc.name in ("wovyr.server.ui",):
            return None
        raise
    mount: Callable[..., Any] | None = getattr(module, "mount_ui", None)
    return mount


class _McpOnFirstUse:
    """ASGI at `MCP_PATH`: 401 unless the request carries a valid API key, then Wovyr's MCP
    server (`wovyr.server.mcp.http_app`, the `mcp` extra), built for the first request that
    does. Importing the SDK and building the server on it took about a second of CPU (a
    third of what a `wovyr serve` spent starting, its worker process included) and memory
    to hold: a server no MCP client calls never pays them, and no request without a key
    makes it. It serves within the app's lifespan: `sessions` is the lifespan's exit
    stack, which stops the MCP sessions at shutdown."""

    def __init__(self, engine: Engine, authenticator: Authenticator) -> None:
        self._engine = engine
        self._authenticator = authenticator
        self._built: asyncio.Task[ASGIApp] | None = None
        self.sessions: AsyncExitStack | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = bearer_token(Headers(scope=scope))
        principal = None
        if token is not None:
            principal = await asyncio.to_thread(self._authenticator.verify, token)
        if principal is None:
            response = ApiProblem(
                401, "a valid API key is required", headers={"WWW-Authenticate": "Bearer"}
            ).response()
            await response(scope, receive, send)
            return
        if self._built is None:
            self._built = asyncio.create_task(self._build())
        # shielded: a request that gives up meanwhile does not stop the build half-way
        app = await asyncio.shield(self._built)
        await app(scope, receive, send)

    async def _build(self) -> ASGIApp:
        sessions = self.sessions
        if sessions is None:
            raise RuntimeError("the MCP server is served only while the app runs (lifespan)")
        module = await asyncio.to_thread(importlib.import_module, "wovyr.server.mcp")
        if self.sessions is not sessions:
            raise RuntimeError("the app stopped while its MCP server was being built")
        app, running = module.http_app(self._engine, self._authenticator, MCP_PATH)
        await sessions.enter_async_context(running())
        built: ASGIApp = app
        return built


def create_app(
    engine: Engine,
    settings: Settings,
    *,
    start_background: bool = True,
    clock: Clock | None = None,
) -> FastAPI:
    """The app. With `start_background`, its lifespan runs a Worker (executions, due timers,
    due schedules every `settings.dispatch_interval`) and stops it gracefully at shutdown."""
    metrics = meter(engine.store)
    clock = clock or engine.clock
    served(engine.store, clock.now())  # tenant default is the owner's only until served
    authenticator = Authenticator(engine.store, clock)
    if isinstance(engine.secrets, Secrets):
        stored = engine.secrets
    else:  # the KMS of the server's home, loaded on first use
        stored = open_secrets(engine.store, settings.home)
    # tenants' stored providers' keys are resolved through the secrets
    engine = assemble.with_secrets(engine, stored)
    ctx = ServerContext(engine, settings, authenticator, metrics, clock, clock.now())
    ctx.secrets = stored

    mcp: _McpOnFirstUse | None = None  # `/mcp`, when the `mcp` SDK is installed

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if start_background:
            ctx.background = Background(engine, settings, metrics)
            ctx.background.start()
        try:
            async with AsyncExitStack() as sessions:
                if mcp is not None:
                    mcp.sessions = sessions
                try:
                    yield
                finally:
                    if mcp is not None:  # stopping: nothing more is built
                        mcp.sessions = None
        finally:
            if ctx.background is not None:
                await ctx.background.stop()

    app = FastAPI(
        title="Wovyr",
        version=__version__,
        summary="Durable execution for declarative YAML workflows.",
        openapi_url="/openapi.json",
        docs_url=None,  # FastAPI's pages load scripts from a CDN: /docs is ours instead
        redoc_url=None,
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
    )
    app.state.wovyr = ctx
    app.state.engine = engine
    app.state.settings = settings
    app.state.authenticator = authenticator
    install_problem_handlers(app)
    install_openapi(app)
    for module in (
        workflows,
        batches,
        definitions,
        agents,
        schedules,
        admin,
        policy,
        quotas,
        retention,
        limits,
        flow,
        secrets,
        providers,
        mcp_servers,
        memory,
        events,
        artifacts,
        audit,
        health,
    ):
        app.include_router(module.router)
    if importlib.util.find_spec("mcp") is not None:
        mcp = _McpOnFirstUse(engine, authenticator)
        app.router.routes.append(Route(MCP_PATH, endpoint=mcp, include_in_schema=False))
    mount_ui = _ui_mounter()
    if mount_ui is not None:
        mount_ui(app, engine, settings, authenticator)
    app.add_middleware(
        RequestGuard,
        max_body_bytes=settings.max_body_bytes,
        metrics=metrics,
        large_bodies={"/api/v1/artifacts": MAX_ARTIFACT_BYTES},
    )
    return app
