"""A small Server-Sent Events reader for tests (over httpx, synchronous)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["Message", "messages"]


@dataclass(frozen=True)
class Message:
    id: str | None
    event: str
    data: Any


def messages(response: httpx.Response) -> Iterator[Message]:
    """The messages of an open `text/event-stream` response, as they arrive (comments and
    keep-alives skipped)."""
    ident: str | None = None
    event, data = "message", []
    for line in response.iter_lines():
        if not line:
            if data:
                yield Message(ident, event, json.loads("\n".join(data)))
            ident, event, data = None, "message", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                ident = value
            elif name == "event":
                event = value
            elif name == "data":
                data.append(value)
