"""Today's usage as the quota status shows it (`Engine.quota_usage`, `wovyr admin quotas
show`, `GET /api/v1/admin/quotas`), on every store: the executions a tenant started today
are counted whether or not it has a quota (the ledger counts a budget only once its quota is
set: the status used to read 0 until then), and so are the model tokens and cost; a daily
budget nobody counts reads as not counted, never as 0."""

from __future__ import annotations

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import parse_quotas
from wovyr.testing import drain

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: tick}
activities:
  - {id: a, set: {x: 1}}
"""


def test_the_executions_started_today_are_counted_with_no_quota_set(
    engine: Engine, clock: ManualClock
) -> None:
    engine.start(FLOW, execution_id="yesterday")  # yesterday's run is not today's
    clock.advance(hours=24)
    for n in range(3):
        engine.start(FLOW, execution_id=f"today-{n}")
    drain(engine)
    other = engine.for_tenant("acme")  # another tenant's are its own
    other.start(FLOW, execution_id="theirs")
    usage = engine.quota_usage()
    # seconds and bytes are not counted without a quota; model usage always is
    model = {"model_tokens": 0, "model_cost": 0}
    assert usage["used"] == {"executions": 3, **model}
    assert other.quota_usage()["used"] == {"executions": 1, **model}
    # with a quota, the status shows what counts against it: the ledger, from when it was
    # set; a budget with a quota and no use yet reads 0
    engine.set_quotas(parse_quotas({"executions_per_day": 10}), by="test")
    engine.start(FLOW, execution_id="today-3")
    assert engine.quota_usage()["used"] == {"executions": 1, **model}
    engine.set_quotas(parse_quotas({"activity_seconds_per_day": 500}), by="test")
    assert engine.quota_usage()["used"] == {"executions": 4, "activity_seconds": 0, **model}
