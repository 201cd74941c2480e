"""Tenants' side-effect policies reach `shell` through the engine, on every store: a step the
tenant's policy refuses is refused when the definition is accepted (start, apply, schedule
create), a policy tightened after the start stops the execution at dispatch (not retried,
nothing run), and a sandboxed step runs under its limits, isolated unless the host accepted
otherwise, with what the engine's `shell_sandbox` hides out of its sight. The local owner's
tenant `default` is trusted until restricted; every other tenant is restricted until
opened."""

from __future__ import annotations

import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.isolation import sandbox_python

from wovyr.activities.policy import RESTRICTED, TRUSTED, SideEffectPolicy
from wovyr.activities.sandbox import ShellSandbox
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import policy_of, set_policy
from wovyr.errors import InputError
from wovyr.scheduling.schedules import Schedules
from wovyr.store.platform import TenantRecord
from wovyr.testing import drain

# Shell granted and accepted unisolated; ISOLATED: granted as the host grants it by default.
SANDBOX = replace(RESTRICTED, shell=True, shell_env=("PATH",), shell_isolation=False)
ISOLATED = replace(SANDBOX, shell_isolation=True)


def shell_step(code: str, python: str = sys.executable) -> str:
    argv = [python, "-c", code]
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


def opened(engine: Engine, tenant: str, policy: SideEffectPolicy) -> Engine:
    """`engine` acting for `tenant`, whose stored policy is now `policy`."""
    set_policy(engine.store, tenant, policy, by="test", at=engine.clock.now())
    return engine.for_tenant(tenant)


def failure(engine: Engine, execution_id: str) -> tuple[int, dict[str, Any]]:
    history = engine.history(execution_id)
    failed = [e for e in history if e.type == "ActivityFailed"]
    started = [e for e in history if e.type == "ActivityStarted"]
    assert len(failed) == 1, [e.type for e in history]
    error: dict[str, Any] = failed[0].data["error"]
    return len(started), error


def test_a_new_tenant_is_restricted_and_its_shell_step_is_refused_at_start(
    engine: Engine, tmp_path: Path
) -> None:
    beta = engine.for_tenant("beta")
    assert policy_of(engine.store, "beta").policy == RESTRICTED
    assert policy_of(engine.store, "default").policy == TRUSTED

    with pytest.raises(InputError) as caught:
        beta.start(shell_step("print(1)"), execution_id="refused-1")

    (problem,) = caught.value.problems
    assert problem.path == "activities[0].shell"
    assert "activity 'step' (shell)" in problem.message
    assert "tenant 'beta'" in problem.message and "shell: false" in problem.message
    assert "wovyr admin tenants set beta" in (problem.hint or "")
    assert engine.store.load("refused-1", "default") is None  # nothing was stored


def test_apply_and_schedule_create_refuse_what_the_policy_refuses(engine: Engine) -> None:
    beta = engine.for_tenant("beta")
    with pytest.raises(InputError, match="refused by the side-effect policy"):
        beta.apply(shell_step("print(1)"))
    assert engine.store.registered_definition("sandboxed", None, "beta") is None
    with pytest.raises(InputError, match="refused by the side-effect policy"):
        Schedules(beta).create("nightly", workflow=beta.resolve(shell_step("print(1)"))[0],
                               every="1h")  # fmt: skip
    assert engine.store.get_schedule("nightly", "beta") is None


def test_a_policy_tightened_after_the_start_stops_the_execution_at_dispatch(
    engine: Engine, tmp_path: Path
) -> None:
    proof = tmp_path / "ran"
    record = engine.start(shell_step(f"open({str(proof)!r}, 'w')"))  # default: trusted

    set_policy(engine.store, "default", RESTRICTED, by="test", at=engine.clock.now())
    drain(engine)

    assert engine.query(record.id).status == "failed"
    attempts, error = failure(engine, record.id)
    assert attempts == 1  # not retried
    assert error["type"] == "PolicyDenied" and "shell" in error["message"]
    assert not proof.exists()


def test_a_policy_set_back_to_the_default_and_a_broken_stored_policy(engine: Engine) -> None:
    set_policy(engine.store, "beta", TRUSTED, by="test", at=engine.clock.now())
    assert policy_of(engine.store, "beta").policy == TRUSTED
    back = set_policy(engine.store, "beta", None, by="test", at=engine.clock.now())
    assert back.policy == RESTRICTED and back.source == "default"
    # a row written by hand that does not parse fails closed, for the trusted tenant too
    engine.store.put_tenant(TenantRecord("default", {"shell": "yes"}, engine.clock.now()))
    assert policy_of(engine.store, "default").policy == RESTRICTED


def test_an_engine_given_one_policy_applies_it_to_every_tenant(engine: Engine) -> None:
    fixed = Engine(engine.store, clock=engine.clock, side_effects=RESTRICTED)
    with pytest.raises(InputError, match="tenant 'default'"):
        fixed.start(shell_step("print(1)"))
    assert fixed.for_tenant("beta").side_effect_policy() == RESTRICTED


def test_a_sandboxed_step_is_stopped_at_its_cpu_limit_and_not_retried(engine: Engine) -> None:
    sandboxed = opened(engine, "beta", replace(SANDBOX, shell_cpu_seconds=1))

    record = sandboxed.start(shell_step("while True: pass"))
    drain(sandboxed)

    assert sandboxed.query(record.id).status == "failed"
    attempts, error = failure(sandboxed, record.id)
    assert attempts == 1
    assert error["type"] == "CpuLimitExceeded"


@pytest.mark.parametrize("isolated", [False, True], ids=["unisolated", "isolated"])
def test_a_sandboxed_step_completes_in_its_fresh_directory(engine: Engine, isolated: bool) -> None:
    sandboxed = opened(engine, "beta", ISOLATED if isolated else SANDBOX)
    python = sandbox_python() if isolated else sys.executable

    record = sandboxed.start(shell_step("import os; print(sorted(os.listdir('.')))", python))
    drain(sandboxed)

    view = sandboxed.query(record.id)
    assert view.status == "completed", view.activities["step"]
    assert view.activities["step"]["output"]["stdout"] == "[]\n"


@pytest.fixture
def readable_home() -> Iterator[Path]:
    """A WOVYR_HOME any user could read (outside pytest's private temp tree) with a key file."""
    home = Path(tempfile.mkdtemp(prefix="wovyr-home-"))
    home.chmod(0o755)
    key = home / "kms-root.key"
    key.write_text("k" * 64)
    key.chmod(0o644)
    yield home
    key.unlink()
    home.rmdir()


def test_an_isolated_step_does_not_see_what_the_engines_sandbox_hides(
    engine: Engine, readable_home: Path
) -> None:
    python = sandbox_python()
    sandbox = ShellSandbox.of_host(readable_home, engine.store.url)
    hiding = Engine(engine.store, clock=engine.clock, shell_sandbox=sandbox)
    look = shell_step(f"import os; print(os.listdir({str(readable_home)!r}))", python)
    outputs = []

    for each in (hiding, engine):  # the engine without a sandbox hides nothing
        beta = opened(each, "beta", ISOLATED)
        record = beta.start(look)
        drain(beta)
        outputs.append(beta.query(record.id).activities["step"]["output"]["stdout"])

    assert outputs == ["[]\n", "['kms-root.key']\n"]
