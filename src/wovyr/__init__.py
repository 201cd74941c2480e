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

from wovyr.activities.base import (
    ActivityContext,
    ActivityError,
    ActivityRegistry,
    NonRetryableError,
    activity,
    current_activity,
)
from wovyr.clock import Clock, ManualClock, SystemClock
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

__all__ = [
    "ActivityContext",
    "ActivityError",
    "ActivityNotRegistered",
    "ActivityRegistry",
    "Clock",
    "ConfigError",
    "Conflict",
    "DefinitionError",
    "Engine",
    "ExecutionFinished",
    "ExecutionView",
    "ExpressionError",
    "InputError",
    "LeaseLost",
    "ManualClock",
    "NonRetryableError",
    "NotFound",
    "Started",
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
]
