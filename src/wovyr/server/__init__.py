"""The HTTP server: API v1, health and metrics, the web UI, and background dispatch.

`create_app` is imported on first use: the server's worker process
(`python -m wovyr.server.worker_process`) is in this package and needs none of the web
stack (importing it took seconds of CPU at every start of `wovyr serve`, while the server
was already answering)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wovyr.server.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from wovyr.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
