"""Priority at every start path: the engine, a child workflow (inherits unless its activity
sets one), a schedule, the CLI (`--priority`) and the HTTP API (`priority`); it is in the
start event (the log is the truth) and shown by `query`."""

from __future__ import annotations

import asyncio
import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.cli.main import main
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.scheduling.schedules import Schedules
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker.worker import Worker

LEAF = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: leaf}
    activities:
      - {id: a, set: {x: 1}}
    """)
PARENT = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: parent}
    activities:
      - {id: inherit, workflow: {name: leaf, id: kid-inherit}}
      - {id: own, workflow: {name: leaf, id: kid-own, priority: 2}}
    """)


@pytest.fixture
def engine() -> Engine:
    return Engine(SQLiteStore(), clock=ManualClock(datetime(2030, 1, 1, tzinfo=UTC)))


def test_a_child_runs_at_its_parents_priority_unless_its_activity_sets_one(engine: Engine) -> None:
    engine.apply(LEAF)
    record = engine.start(PARENT, {}, execution_id="p", priority=7)
    asyncio.run(Worker(engine).run_until_idle())
    assert engine.query(record.id).status == "completed"
    assert engine.query("kid-inherit").priority == 7
    assert engine.query("kid-own").priority == 2
    started = engine.history("p")[0]
    assert started.type == "ExecutionStarted" and started.data["priority"] == 7


def test_priority_0_is_the_default_and_is_not_written(engine: Engine) -> None:
    record = engine.start(LEAF, {})
    assert engine.query(record.id).priority == 0
    assert "priority" not in engine.history(record.id)[0].data


def test_a_schedule_starts_its_executions_at_its_priority(engine: Engine) -> None:
    engine.apply(LEAF)
    service = Schedules(engine)
    record = service.create("s", workflow="leaf", every="1m", priority=4)
    assert record.spec["priority"] == 4
    execution_id = service.trigger("s")
    assert engine.query(execution_id).priority == 4
    service.update("s", every="2m")  # a change of spec keeps the priority
    assert service.get("s").spec["priority"] == 4
    with pytest.raises(InputError):
        service.create("bad", workflow="leaf", every="1m", priority=12)


def test_the_cli_starts_at_a_priority_and_refuses_one_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    path = tmp_path / "leaf.yaml"
    path.write_text(LEAF)
    home = ["--home", str(tmp_path / "home")]
    code = main(["run", str(path), "--id", "r1", "--priority", "8", "--json", *home])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["priority"] == 8
    code = main(["run", str(path), "--id", "r2", "--priority", "10", *home])
    assert code == 2 and "10 is not in the range 0<=x<=9" in capsys.readouterr().err
