"""The HTTP server: API v1, health and metrics, the web UI, and background dispatch."""

from __future__ import annotations

from wovyr.server.app import create_app

__all__ = ["create_app"]
