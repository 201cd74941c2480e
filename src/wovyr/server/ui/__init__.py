"""The web UI: server-rendered pages over the engine, mounted on the API's FastAPI app.

`mount_ui(app, engine, settings, authenticator)` adds `/ui/...` (and `/` -> `/ui`). Pages
are Jinja2 templates plus one small script and one stylesheet shipped in this package; no
CDN and no build step. The DAG is laid out and drawn as SVG on the server (`dag.py`).
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from wovyr.engine.engine import Engine
from wovyr.server.ui.batch_routes import BatchRoutes
from wovyr.server.ui.catalog_routes import CatalogRoutes
from wovyr.server.ui.event_routes import EventRoutes
from wovyr.server.ui.routes import UiRoutes
from wovyr.server.ui.session import Authenticator, SecretFile, SessionCodec, load_secret
from wovyr.settings import Settings

__all__ = ["STATIC_DIR", "TEMPLATE_DIR", "mount_ui"]

log = logging.getLogger("wovyr.server.ui")

STATIC_DIR = Path(__file__).parent / "static"
TEMPLATE_DIR = Path(__file__).parent / "templates"


def mount_ui(
    app: FastAPI,
    engine: Engine,
    settings: Settings,
    authenticator: Authenticator,
    *,
    secret: str | bytes | None = None,
    session_lifetime_seconds: int = 12 * 3600,
) -> None:
    """Register the UI's routes and static files on `app`.

    The session-signing secret is `secret`, else `settings.ui_secret` when the settings
    have one, else a random one persisted under `settings.home` (mode 0600) and read again
    when that file changes (`wovyr admin rotate-session-key`)."""
    configured = secret or getattr(settings, "ui_secret", None)
    home = Path(settings.home)
    key: bytes | SecretFile
    try:
        key = load_secret(home, configured) if configured else SecretFile(home)
    except OSError as exc:  # a read-only home: the UI still works, sessions end at restart
        log.warning(
            "web UI: cannot keep a session secret under %s (%s); using one in memory", home, exc
        )
        key = secrets.token_bytes(32)
    codec = SessionCodec(key, lifetime_seconds=session_lifetime_seconds, revoked=engine.store)
    routes = UiRoutes(engine, authenticator, codec)
    app.include_router(routes.router())
    lease = float(getattr(settings, "lease_seconds", 30.0))
    app.include_router(CatalogRoutes(routes, lease_seconds=lease).router())
    app.include_router(BatchRoutes(routes).router())
    app.include_router(EventRoutes(routes).router())
    app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="wovyr-ui-static")
