"""A tool for the secrets tests (loaded with --activities FILE): `keep_token` writes the
token it was given to `path` (so the test sees what reached it) and returns it, as a
careless handler might (the worker must scrub it from the stored output)."""

from __future__ import annotations

import os

import wovyr


@wovyr.activity("keep_token")
def keep_token(token: str, path: str) -> dict[str, str]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, token.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"echo": token, "note": f"got {token}"}
