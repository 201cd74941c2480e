"""Workers: claim runnable executions through leases, drive them, fire due timers."""

from wovyr.worker.worker import Worker, run_workflow

__all__ = ["Worker", "run_workflow"]
