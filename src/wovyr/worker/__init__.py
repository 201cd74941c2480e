"""Workers: claim runnable executions through leases, drive them, fire due timers."""

from __future__ import annotations

from wovyr.worker.run import arun_workflow, run_workflow
from wovyr.worker.worker import Worker, WorkerStats

__all__ = ["Worker", "WorkerStats", "arun_workflow", "run_workflow"]
