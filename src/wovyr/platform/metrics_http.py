"""A minimal `/metrics` endpoint for processes without the HTTP server (`wovyr worker`).

A stdlib `ThreadingHTTPServer` in a daemon thread, bound only to the address it is given,
answering `GET /metrics` with the Prometheus text format and 404 for anything else. It has
no authentication: it shows every tenant's series, like the operator's own view, so bind it
to a loopback or private address that only the scraper reaches.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from wovyr.errors import ConfigError

__all__ = ["CONTENT_TYPE", "MetricsEndpoint", "parse_address"]

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    render: Callable[[], str]


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def version_string(self) -> str:
        return "wovyr-metrics"

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._reply(404, "text/plain; charset=utf-8", b"not found: try /metrics\n")
            return
        try:
            body = self.server.render().encode("utf-8")
        except Exception:
            log.exception("metrics: rendering failed")
            self._reply(500, "text/plain; charset=utf-8", b"metrics unavailable\n")
            return
        self._reply(200, CONTENT_TYPE, body)

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("metrics: " + format, *args)


class MetricsEndpoint:
    """Serves `render()` on `GET /metrics` at `address` until `close()`."""

    def __init__(self, address: str, render: Callable[[], str]) -> None:
        host, port = parse_address(address)
        cls = _Server6 if ":" in host else _Server
        try:
            self._server = cls((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {address}: {exc}") from None
        self._server.render = render
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
