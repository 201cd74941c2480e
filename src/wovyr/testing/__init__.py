"""Testing workflows and agents: an engine on a `memory://` store and a ManualClock, a
scripted model (in process, or over real HTTP as an OpenAI-compatible server), recorded
transcripts, a fake MCP server (tools from plain functions; the `mcp` extra), and a pytest
plugin (`engine`, `clock`, `model`, `activities` and `mcp_server` fixtures).

    from wovyr.testing import drain, memory_engine

    engine = memory_engine()
    engine.start(definition, {"order_id": "A-1"})
    drain(engine)                      # run everything runnable now
    engine.clock.advance(hours=2)      # move time; due timers fire on the next drain
    drain(engine)
    drain(engine, skip_time=True)      # or skip to each timer until none is left

See docs/testing.md. The names load on first use, so the pytest plugin costs nothing in a
test run that does not use it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wovyr.testing.engines import EPOCH, CrashPoint, crash, drain, memory_engine
    from wovyr.testing.mcp_server import FakeMCPServer, ToolCall
    from wovyr.testing.model import (
        Answer,
        Recorded,
        Reply,
        ScriptedModel,
        malformed,
        raw,
        status,
        text,
        tool_calls,
    )
    from wovyr.testing.model_server import ScriptedLLM
    from wovyr.testing.transcript import Transcript

__all__ = [
    "EPOCH",
    "Answer",
    "CrashPoint",
    "FakeMCPServer",
    "Recorded",
    "Reply",
    "ScriptedLLM",
    "ScriptedModel",
    "ToolCall",
    "Transcript",
    "crash",
    "drain",
    "malformed",
    "memory_engine",
    "raw",
    "status",
    "text",
    "tool_calls",
]

_WHERE = {
    "EPOCH": "wovyr.testing.engines",
    "CrashPoint": "wovyr.testing.engines",
    "crash": "wovyr.testing.engines",
    "drain": "wovyr.testing.engines",
    "memory_engine": "wovyr.testing.engines",
    "Answer": "wovyr.testing.transcript",
    "Recorded": "wovyr.testing.model",
    "Reply": "wovyr.testing.model",
    "ScriptedModel": "wovyr.testing.model",
    "malformed": "wovyr.testing.model",
    "raw": "wovyr.testing.model",
    "status": "wovyr.testing.model",
    "text": "wovyr.testing.model",
    "tool_calls": "wovyr.testing.model",
    "ScriptedLLM": "wovyr.testing.model_server",
    "FakeMCPServer": "wovyr.testing.mcp_server",
    "ToolCall": "wovyr.testing.mcp_server",
    "Transcript": "wovyr.testing.transcript",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'wovyr.testing' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
