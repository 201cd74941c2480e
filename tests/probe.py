"""Asking a local test server whether it is ready, over plain HTTP, without a TLS context per
question.

`httpx.get` makes a client for its one request, and the client a TLS context, which loads the
CA bundle whatever the URL's scheme: 15-30 ms of CPU each time on this machine. A loop asking
every 50 ms while a server started beside it (two cores) spent more CPU than the server did.
The probes of a test process share one client (no connection kept between questions: a
server restarted on the same port gets a new one)."""

from __future__ import annotations

import httpx

__all__ = ["answers"]

_CLIENT = httpx.Client(timeout=2, limits=httpx.Limits(max_keepalive_connections=0))


def answers(base: str, path: str = "/readyz") -> bool:
    """Whether the server at `base` answers `path` with 200 (False while nothing listens)."""
    try:
        return _CLIENT.get(f"{base}{path}").status_code == 200
    except httpx.TransportError:
        return False
