"""Platform services beside the engine: API keys and roles (`auth`), Prometheus metrics fed
by a store observer (`metrics`) and their endpoint for processes without the server
(`metrics_http`). Its modules are imported on use: a command that reads through one of
them (the sealed payloads a store read opens) loads no API-key code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wovyr.platform.auth import ROLES, Authenticator, Principal, role_at_least

__all__ = ["ROLES", "Authenticator", "Principal", "role_at_least"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from wovyr.platform import auth

        return getattr(auth, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
