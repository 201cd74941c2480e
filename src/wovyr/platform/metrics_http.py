"""A minimal `/metrics`, `/healthz` and `/readyz` endpoint for processes without the HTTP
server (`wovyr worker`).

A stdlib `ThreadingHTTPServer` in a daemon thread, bound only to the address it is given,
answering `GET /metrics` with the Prometheus text format, `GET /healthz` (the process
answers, and its version) and `GET /readyz` (200 or 503 with the checks, as the server's),
and 404 for anything else. It has no authentication: it shows every tenant's series, like
the operator's own view, so bind it to a loopback or private address that only the scraper
and the orchestrator's probes reach.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from wovyr._version import __version__
from wovyr.errors import ConfigError
from wovyr.store import capabilities
from wovyr.store.base import Store

__all__ = ["CONTENT_TYPE", "Checks", "MetricsEndpoint", "parse_address", "store_checks"]

# a readiness probe's answer: {check: state}, ready when every state is "ok" (or "n/a")
Checks = Callable[[], dict[str, str]]

log = logging.getLogger("wovyr.metrics")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_address(text: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port` for IPv6) -> (host, port); port 0 picks a free one."""
    host, sep, port = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            f"bad metrics address {text!r}",
            hint="give host:port, e.g. 127.0.0.1:9464 or [::1]:9464",
        )
    return host, int(port)


def store_checks(store: Store) -> dict[str, str]:
    """Readiness of `store`: `store` is ok or unreachable, `migrations` ok, n/a (a store
    without them) or what differs between the schema and the one this code expects."""
    schema = capabilities(store).migrations
    try:
        if schema is None:
            store.next_timer_at()  # a cheap read: the store answers
            return {"store": "ok", "migrations": "n/a"}
        current, known = schema.schema_version(), schema.latest_migration()
    except Exception:
        return {"store": "unreachable", "migrations": "unknown"}
    if current == known:
        return {"store": "ok", "migrations": "ok"}
    return {"store": "ok", "migrations": f"schema {current}, this process expects {known}"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    render: Callable[[], str]
    checks: Checks | None


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def version_string(self) -> str:
        return "wovyr-metrics"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._json(200, {"status": "ok", "version": __version__})
            return
        if path == "/readyz" and self.server.checks is not None:
            self._ready(self.server.checks)
            return
        if path != "/metrics":
            self._reply(404, "text/plain; charset=utf-8", b"not found: try /metrics\n")
            return
        try:
            body = self.server.render().encode("utf-8")
        except Exception:
            log.exception("metrics: rendering failed")
            self._reply(500, "text/plain; charset=utf-8", b"metrics unavailable\n")
            return
        self._reply(200, CONTENT_TYPE, body)

    def _ready(self, checks: Checks) -> None:
        try:
            found = checks()
        except Exception:
            log.exception("readyz: a check failed")
            found = {"checks": "failed"}
        ready = all(state in ("ok", "n/a") for state in found.values())
        body: dict[str, object] = {"status": "ready" if ready else "not ready", "checks": found}
        self._json(200 if ready else 503, body)

    def _json(self, status: int, body: dict[str, object]) -> None:
        self._reply(status, "application/json", json.dumps(body).encode("utf-8"))

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("metrics: " + format, *args)


class MetricsEndpoint:
    """Serves `render()` on `GET /metrics` at `address` until `close()`, the liveness probe
    on `/healthz` and, given `checks`, the readiness probe on `/readyz`."""

    def __init__(
        self, address: str, render: Callable[[], str], checks: Checks | None = None
    ) -> None:
        host, port = parse_address(address)
        cls = _Server6 if ":" in host else _Server
        try:
            self._server = cls((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {address}: {exc}") from None
        self._server.render = render
        self._server.checks = checks
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="wovyr-metrics", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port): with port 0, the one the system picked."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> MetricsEndpoint:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
