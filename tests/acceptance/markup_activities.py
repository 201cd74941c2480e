"""A tool for the markup tests (loaded with --activities FILE): `markup.fail` fails, not
retried, with the text it was given as the error's message."""

from __future__ import annotations

import wovyr


@wovyr.activity("markup.fail")
def fail(text: str) -> None:
    raise wovyr.NonRetryableError(text, type="Refused")
