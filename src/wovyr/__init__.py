"""Wovyr: durable execution for declarative YAML workflows.

import wovyr
from pathlib import Path

@wovyr.activity("inventory.reserve")
def reserve(order_id: str) -> dict: ...

engine = wovyr.Engine.open()                 # ~/.wovyr/wovyr.db
view = wovyr.run_workflow(engine, path=Path("examples/order-saga.yaml"), input={"order_id": "A-1"})
engine.start(name="order-saga", input={"order_id": "A-2"})   # a registered (applied) workflow
"""

from __future__ import annotations

# The public names load on first use (PEP 562): `import wovyr` (and so every `wovyr` CLI
# command, which lives in this package) does not pay for the engine, pydantic or the
# expression runtime until something asks for them. Type checkers see the real imports.
from importlib import import_module
from typing import TYPE_CHECKING, Any

from wovyr._version import __version__ as __version__

if TYPE_CHECKING:
    from wovyr.activities.base import (
        ActivityContext,
        ActivityError,
        ActivityRegistry,
        NonRetryableError,
        activity,
        current_activity,
    )
    from wovyr.clock import Clock, ManualClock, SystemClock
    from wovyr.code.workflow import (
        CodeWorkflow,
        Context,
        NonDeterminism,
        Query,
        StepFailed,
        workflow,
    )
    from wovyr.definition.model import Workflow
    from wovyr.definition.parse import load_definition, load_definition_file
    from wovyr.engine.engine import Engine, ExecutionView, Started
    from wovyr.errors import (
        ActivityNotRegistered,
        ConfigError,
        Conflict,
        DefinitionError,
        ExecutionFinished,
        ExpressionError,
        InputError,
        LeaseLost,
        NotFound,
        StoreError,
        WovyrError,
    )
    from wovyr.worker import Worker, arun_workflow, run_workflow

_WHERE = {
    "ActivityContext": "wovyr.activities.base",
    "ActivityError": "wovyr.activities.base",
    "ActivityRegistry": "wovyr.activities.base",
    "NonRetryableError": "wovyr.activities.base",
    "activity": "wovyr.activities.base",
    "current_activity": "wovyr.activities.base",
    "Clock": "wovyr.clock",
    "CodeWorkflow": "wovyr.code.workflow",
    "Context": "wovyr.code.workflow",
    "NonDeterminism": "wovyr.code.workflow",
    "Query": "wovyr.code.workflow",
    "StepFailed": "wovyr.code.workflow",
    "workflow": "wovyr.code.workflow",
    "ManualClock": "wovyr.clock",
    "SystemClock": "wovyr.clock",
    "Workflow": "wovyr.definition.model",
    "load_definition": "wovyr.definition.parse",
    "load_definition_file": "wovyr.definition.parse",
    "Engine": "wovyr.engine.engine",
    "ExecutionView": "wovyr.engine.engine",
    "Started": "wovyr.engine.engine",
    "ActivityNotRegistered": "wovyr.errors",
    "ConfigError": "wovyr.errors",
    "Conflict": "wovyr.errors",
    "DefinitionError": "wovyr.errors",
    "ExecutionFinished": "wovyr.errors",
    "ExpressionError": "wovyr.errors",
    "InputError": "wovyr.errors",
    "LeaseLost": "wovyr.errors",
    "NotFound": "wovyr.errors",
    "StoreError": "wovyr.errors",
    "WovyrError": "wovyr.errors",
    "Worker": "wovyr.worker",
    "arun_workflow": "wovyr.worker",
    "run_workflow": "wovyr.worker",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'wovyr' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ActivityContext",
    "ActivityError",
    "ActivityNotRegistered",
    "ActivityRegistry",
    "Clock",
    "CodeWorkflow",
    "ConfigError",
    "Conflict",
    "Context",
    "DefinitionError",
    "Engine",
    "ExecutionFinished",
    "ExecutionView",
    "ExpressionError",
    "InputError",
    "LeaseLost",
    "ManualClock",
    "NonDeterminism",
    "NonRetryableError",
    "NotFound",
    "Query",
    "Started",
    "StepFailed",
    "StoreError",
    "SystemClock",
    "Worker",
    "Workflow",
    "WovyrError",
    "activity",
    "arun_workflow",
    "current_activity",
    "load_definition",
    "load_definition_file",
    "run_workflow",
    "workflow",
]
