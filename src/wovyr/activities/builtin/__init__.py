"""The built-in activity kinds, one module each; importing this package registers them.

`tool` (a registered Python function), `http` (one HTTP request), `shell` (one program),
`set` (values computed from expressions), `wait` (a signal, an approval or a durable timer),
`workflow` (a child workflow), `llm` (one model answer), `agent` (a tool-calling loop) and
`mcp` (one call of an MCP server's tool) and `memory` (one operation on a durable memory
namespace).
Each registers what runs its kind over the kind's declaration in `wovyr.kinds.steps` (its
model, spec and flags: what the language and the decider read), with
`wovyr.activities.kinds.register_kind(ActivityKind.of(...))` (docs/architecture.md).
"""

from __future__ import annotations

# The order of registration is the order in which errors and the schema list the kinds.
from wovyr.activities.builtin import tool  # isort: skip
from wovyr.activities.builtin import http  # isort: skip
from wovyr.activities.builtin import shell  # isort: skip
from wovyr.activities.builtin import set  # isort: skip
from wovyr.activities.builtin import wait  # isort: skip
from wovyr.activities.builtin import child  # isort: skip
from wovyr.activities.builtin import llm  # isort: skip
from wovyr.activities.builtin import agent  # isort: skip
from wovyr.activities.builtin import mcp  # isort: skip
from wovyr.activities.builtin import memory  # isort: skip

__all__ = ["agent", "child", "http", "llm", "mcp", "memory", "set", "shell", "tool", "wait"]
