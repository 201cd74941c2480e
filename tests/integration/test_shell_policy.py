"""The side-effect policy reaches `shell` through the engine, on every store: a refusal fails
the activity at its first attempt (not retried, nothing run), a policy tightened after the
start stops the execution at dispatch, and a sandboxed step runs under its limits."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

from wovyr.activities.policy import RESTRICTED, SideEffectPolicy
from wovyr.engine.engine import Engine
from wovyr.testing import drain

SANDBOX = replace(RESTRICTED, shell=True, shell_env=("PATH",))


def shell_step(code: str) -> str:
    argv = [sys.executable, "-c", code]
    return textwrap.dedent(
        f"""\
        apiVersion: wovyr/v1
        kind: Workflow
        metadata: {{name: sandboxed}}
        activities:
          - id: step
            shell:
              argv: {argv!r}
            timeout: 30s
        """
    )


def under(engine: Engine, policy: SideEffectPolicy) -> Engine:
    return Engine(
        engine.store, clock=engine.clock, activities=engine.activities, side_effects=policy
    )


def failure(engine: Engine, execution_id: str) -> tuple[int, dict[str, Any]]:
    history = engine.history(execution_id)
    failed = [e for e in history if e.type == "ActivityFailed"]
    started = [e for e in history if e.type == "ActivityStarted"]
    assert len(failed) == 1, [e.type for e in history]
    error: dict[str, Any] = failed[0].data["error"]
    return len(started), error


def test_shell_refused_by_the_policy_fails_at_once_and_runs_nothing(
    engine: Engine, tmp_path: Path
) -> None:
    proof = tmp_path / "ran"
    restricted = under(engine, RESTRICTED)

    record = restricted.start(shell_step(f"open({str(proof)!r}, 'w')"))
    drain(restricted)

    assert restricted.query(record.id).status == "failed"
    attempts, error = failure(restricted, record.id)
    assert attempts == 1
    assert error["type"] == "PolicyDenied"
    assert "shell" in error["message"]
    assert not proof.exists()


def test_a_policy_tightened_after_the_start_stops_the_execution_at_dispatch(
    engine: Engine, tmp_path: Path
) -> None:
    proof = tmp_path / "ran"
    record = engine.start(shell_step(f"open({str(proof)!r}, 'w')"))  # TRUSTED: accepted

    tightened = under(engine, RESTRICTED)
    drain(tightened)

    assert tightened.query(record.id).status == "failed"
    assert failure(tightened, record.id)[1]["type"] == "PolicyDenied"
    assert not proof.exists()


def test_a_sandboxed_step_is_stopped_at_its_cpu_limit_and_not_retried(engine: Engine) -> None:
    sandboxed = under(engine, replace(SANDBOX, shell_cpu_seconds=1))

    record = sandboxed.start(shell_step("while True: pass"))
    drain(sandboxed)

    assert sandboxed.query(record.id).status == "failed"
    attempts, error = failure(sandboxed, record.id)
    assert attempts == 1
    assert error["type"] == "CpuLimitExceeded"


def test_a_sandboxed_step_completes_in_its_fresh_directory(engine: Engine) -> None:
    sandboxed = under(engine, SANDBOX)

    record = sandboxed.start(shell_step("import os; print(sorted(os.listdir('.')))"))
    drain(sandboxed)

    view = sandboxed.query(record.id)
    assert view.status == "completed"
    assert view.activities["step"]["output"]["stdout"] == "[]\n"
