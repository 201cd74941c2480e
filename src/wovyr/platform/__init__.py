"""Platform services beside the engine: API keys and roles (`auth`), Prometheus metrics fed
by a store observer (`metrics`) and their endpoint for processes without the server
(`metrics_http`)."""

from __future__ import annotations

from wovyr.platform.auth import ROLES, Authenticator, Principal, role_at_least

__all__ = ["ROLES", "Authenticator", "Principal", "role_at_least"]
