"""`run_workflow`: start (or resume) one execution and drive it in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wovyr.definition.model import Workflow
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.worker.worker import Worker

__all__ = ["run_workflow"]


def run_workflow(
    engine: Engine,
    definition: Workflow | str | None = None,
    input: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    path: Path | None = None,
    execution_id: str | None = None,
) -> ExecutionView:
    """Start (or resume) an execution and drive it in this process until it completes,
    fails or waits (for a signal, an approval or a future timer). Name exactly one of
    `definition` (a model or YAML/JSON text), `path` (a file) or `name` (registered)."""

    async def main() -> str:
        worker = Worker(engine)
        try:
            record = await worker.start(
                definition, input, name=name, version=version, path=path, execution_id=execution_id
            )
            await worker.run_until_idle(only=[record.id])
            return record.id
        finally:
            await worker.close()

    return engine.query(asyncio.run(main()))
