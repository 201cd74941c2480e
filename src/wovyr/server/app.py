"""The HTTP application: API v1, health and metrics, the web UI when present, and the
background worker (claims, timers, schedules) for as long as the app runs.

    app = create_app(engine, settings)          # uvicorn.run(app) / `wovyr serve`

`create_app` registers a metrics observer with `engine.store` (`wovyr.platform.metrics`):
the engine needs no metrics code, and the store the handlers see is the engine's own.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from wovyr import assemble
from wovyr._version import __version__
from wovyr.clock import Clock
from wovyr.engine.artifacts import MAX_ARTIFACT_BYTES
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import served
from wovyr.platform.auth import Authenticator
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
from wovyr.server.problems import install_problem_handlers
from wovyr.settings import Settings

__all__ = ["create_app"]


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


def _mcp_mounter() -> Callable[..., Any] | None:
    """`wovyr.server.mcp.mount` (Wovyr's MCP server at /mcp), when the `mcp` SDK is
    installed (the `mcp` extra)."""
    if importlib.util.find_spec("mcp") is None:
        return None
    module = importlib.import_module("wovyr.server.mcp")
    mount: Callable[..., Any] = module.mount
    return mount


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

    mcp_running: Callable[[], Any] | None = None  # the MCP mount's sessions (`mcp` extra)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if start_background:
            ctx.background = Background(engine, settings, metrics)
            ctx.background.start()
        try:
            if mcp_running is None:
                yield
            else:
                async with mcp_running():
                    yield
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
    mount_mcp = _mcp_mounter()
    if mount_mcp is not None:
        mcp_running = mount_mcp(app, engine, authenticator)
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
