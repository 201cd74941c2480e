"""A workflow whose checkpoint is far over the size from which stores write deltas
(`wovyr.store.checkpoints`), run by the engine on every store: half of it by one engine,
the rest - after a signal - by a new engine on a new store object (a restart: nothing
remembered of what was written), and the stored checkpoint equals the fold of its history
at the wait and at the end."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import STORE_KINDS, make_store

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.core.state import fold, state_to_json
from wovyr.engine.engine import Engine
from wovyr.events import Event
from wovyr.store.base import Store
from wovyr.store.checkpoints import DELTA_FROM
from wovyr.store.codec import dumps
from wovyr.testing import drain

STEPS = 60  # chained activities before the wait and as many after it


def _wide() -> str:
    lines = [
        "apiVersion: wovyr/v1",
        "kind: Workflow",
        "metadata: {name: wide}",
        "activities:",
        "  - {id: s0, tool: add, with: {x: 0}}",
    ]
    for i in range(1, STEPS):
        lines.append(
            f"  - {{id: s{i}, needs: [s{i - 1}], tool: add,"
            f" with: {{x: '${{{{ activities.s{i - 1}.output }}}}'}}}}"
        )
    lines.append(f"  - {{id: gate, needs: [s{STEPS - 1}], wait: {{signal: go}}}}")
    lines.append(
        "  - {id: t0, needs: [gate], tool: add, with: {x: '${{ activities.gate.output }}'}}"
    )
    for i in range(1, STEPS):
        lines.append(
            f"  - {{id: t{i}, needs: [t{i - 1}], tool: add,"
            f" with: {{x: '${{{{ activities.t{i - 1}.output }}}}'}}}}"
        )
    lines.append(f"output: '${{{{ activities.t{STEPS - 1}.output }}}}'")
    return "\n".join(lines) + "\n"


def _folded(store: Store, execution_id: str) -> dict[str, object]:
    records = store.history(execution_id, tenant="default")
    state = fold([Event(r.type, r.at, r.data) for r in records], id=execution_id)
    return dict(state_to_json(state))


def _assert_stored_is_the_fold(store: Store, execution_id: str) -> None:
    record = store.load(execution_id, "default")
    assert record is not None and record.checkpoint is not None
    assert len(dumps(record.checkpoint)) > 3 * DELTA_FROM
    assert record.checkpoint == _folded(store, execution_id)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_wide_workflow_runs_across_a_restart_on_its_stored_deltas(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> None:
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    registry = ActivityRegistry()

    @registry.activity("add")
    def add(x: int, ctx: ActivityContext) -> int:
        return x + 1

    first = make_store(kind, tmp_path, url)
    engine = Engine(first, clock=clock, activities=registry)
    record = engine.start(_wide())
    drain(engine)
    assert engine.query(record.id).status == "waiting"
    _assert_stored_is_the_fold(first, record.id)
    first.close()
    second = make_store(kind, tmp_path, url)
    again = Engine(second, clock=clock, activities=registry)
    again.signal(record.id, "go", 1000)
    drain(again)
    view = again.query(record.id)
    assert view.status == "completed" and view.output == 1000 + STEPS
    _assert_stored_is_the_fold(second, record.id)
    second.close()
