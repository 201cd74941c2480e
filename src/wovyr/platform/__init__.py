"""Platform services beside the engine: API keys and roles (`auth`)."""

from __future__ import annotations

from wovyr.platform.auth import ROLES, Authenticator, Principal, role_at_least

__all__ = ["ROLES", "Authenticator", "Principal", "role_at_least"]
