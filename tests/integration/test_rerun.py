"""Rerun on every store: a new execution linked to the original both ways, the results
upstream of `--from` recorded as reused (no side effect for them), the rest run; on the
pinned definition or the latest compatible one (an incompatible one refused, with why);
another tenant's execution is out of reach."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.errors import Conflict, InputError, NotFound
from wovyr.events import EventType
from wovyr.testing import drain

FIVE = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: five, version: "%s"}
inputs:
  n: {type: integer, default: 1}
activities:
  - {id: a, tool: step, with: {name: a, n: "${{ inputs.n }}"}}
  - {id: b, needs: [a], tool: step, with: {name: b, n: "${{ activities.a.output.n }}"}}
  - id: c
    needs: [b]
    tool: step
    with: {name: c, n: "${{ activities.b.output.n }}"}
    retry: {max_attempts: 1}
  - {id: d, needs: [c], tool: step, with: {name: d, n: "${{ activities.c.output.n }}"}}
  - {id: e, needs: [d], tool: step, with: {name: e, n: "${{ activities.d.output.n }}"}}
output: "${{ activities.e.output }}"
"""


@dataclass
class Effects:
    """Side effects per activity; the step named in `broken` fails."""

    counts: Counter[str] = field(default_factory=Counter)
    broken: set[str] = field(default_factory=lambda: {"c"})


@pytest.fixture
def effects(registry: ActivityRegistry) -> Effects:
    seen = Effects()

    def step(name: str, n: int) -> dict[str, object]:
        seen.counts[name] += 1
        if name in seen.broken:
            raise RuntimeError(f"{name} is broken")
        return {"name": name, "n": n + 1}

    registry.register("step", step)
    return seen


def _failed_run(engine: Engine) -> str:
    engine.apply(FIVE % "1")
    engine.start(name="five", input={"n": 10}, execution_id="orig")
    drain(engine)
    assert engine.query("orig").status == "failed"
    return "orig"


def test_a_rerun_from_the_middle_reuses_two_results_and_runs_three(
    engine: Engine, effects: Effects
) -> None:
    original = _failed_run(engine)
    assert dict(effects.counts) == {"a": 1, "b": 1, "c": 1}
    effects.broken.clear()
    before = Counter(effects.counts)

    rerun = engine.rerun(original, start_from="c")
    drain(engine)

    ran = effects.counts - before
    assert dict(ran) == {"c": 1, "d": 1, "e": 1}  # a and b caused no side effect
    view = engine.query(rerun.id)
    assert view.status == "completed"
    assert view.output == {"name": "e", "n": 15}  # the reused outputs fed c
    assert view.rerun_of == {"id": original, "from": "c"}
    assert [a for a, v in view.activities.items() if v["reused_from"] == original] == ["a", "b"]
    events = engine.history(rerun.id)
    reused = [e.data["activity"] for e in events if e.type == EventType.ACTIVITY_REUSED]
    started = [e.data["activity"] for e in events if e.type == EventType.ACTIVITY_STARTED]
    assert (reused, started) == (["a", "b"], ["c", "d", "e"])
    assert engine.query(original).reruns == [rerun.id]  # linked both ways


def test_a_rerun_without_from_runs_everything_again_with_overridden_inputs(
    engine: Engine, effects: Effects
) -> None:
    original = _failed_run(engine)
    effects.broken.clear()
    before = Counter(effects.counts)
    rerun = engine.rerun(original, input={"n": 100})
    drain(engine)
    assert dict(effects.counts - before) == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}
    view = engine.query(rerun.id)
    assert (view.status, view.input) == ("completed", {"n": 100})
    assert view.output == {"name": "e", "n": 105}
    assert view.rerun_of == {"id": original, "from": None}


def test_latest_reruns_on_a_compatible_newer_version_and_refuses_an_incompatible_one(
    engine: Engine, effects: Effects
) -> None:
    original = _failed_run(engine)
    effects.broken.clear()
    engine.apply(FIVE % "2")  # same shape: compatible
    rerun = engine.rerun(original, start_from="c", latest=True)
    drain(engine)
    view = engine.query(rerun.id)
    assert (view.version, view.status) == ("2", "completed")
    pinned = engine.rerun(original, start_from="c")  # without --latest: the pinned v1
    assert engine.query(pinned.id).version == "1"

    changed = (FIVE % "3").replace(
        '  - {id: b, needs: [a], tool: step, with: {name: b, n: "${{ activities.a.output.n }}"}}',
        "  - {id: b, needs: [a], set: {n: 1}}",
    )
    engine.apply(changed)
    with pytest.raises(Conflict) as refused:
        engine.rerun(original, start_from="c", latest=True)
    assert "activity 'b' is a 'set' activity in five v3" in str(refused.value)
    assert "without --latest" in str(refused.value)
    # a rerun from the start reuses nothing, so any newer version takes it
    assert engine.query(engine.rerun(original, latest=True).id).version == "3"


def test_rerun_refuses_a_running_execution_and_an_unknown_activity(
    engine: Engine, effects: Effects
) -> None:
    engine.apply(FIVE % "1")
    engine.start(name="five", execution_id="live")
    with pytest.raises(Conflict, match="only a completed, failed or cancelled"):
        engine.rerun("live")
    engine.cancel("live")
    with pytest.raises(InputError, match="has no activity 'zz'"):
        engine.rerun("live", start_from="zz")
    assert engine.query(engine.rerun("live", start_from="a").id).rerun_of == {
        "id": "live",
        "from": "a",
    }


def test_another_tenant_cannot_rerun_or_see_the_reruns(engine: Engine, effects: Effects) -> None:
    original = _failed_run(engine)
    other = engine.for_tenant("other")
    with pytest.raises(NotFound):
        other.rerun(original)
    engine.rerun(original)
    assert other.reruns(original) == []
    assert len(engine.reruns(original)) == 1


MAP = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: map}
activities:
  - id: items
    for_each: "${{ [1, 2, 3] }}"
    tool: item
    with: {v: "${{ item }}"}
    compensate: {tool: undo, with: {v: "${{ item }}"}}
  - {id: gate, needs: [items], wait: {signal: go}}
  - {id: boom, needs: [gate], tool: boom, retry: {max_attempts: 1}}
"""


def test_a_failing_rerun_undoes_a_reused_map_item_by_item(
    engine: Engine, registry: ActivityRegistry
) -> None:
    done: list[int] = []
    undone: list[int] = []

    def item(v: int) -> int:
        done.append(v)
        return v * 10

    def undo(v: int) -> None:
        undone.append(v)

    def boom() -> None:
        raise RuntimeError("boom")

    registry.register("item", item)
    registry.register("undo", undo)
    registry.register("boom", boom)
    engine.start(MAP, execution_id="m")
    drain(engine)
    engine.cancel("m")  # items done, the gate never passed: nothing undone
    assert (sorted(done), undone) == ([1, 2, 3], [])
    rerun = engine.rerun("m", start_from="gate")
    drain(engine)
    engine.signal(rerun.id, "go")
    drain(engine)
    view = engine.query(rerun.id)
    assert view.status == "failed"
    assert sorted(done) == [1, 2, 3]  # the map was not run again...
    assert undone == [3, 2, 1]  # ...but undone, item by item, when the rerun failed
    assert view.activities["items"]["reused_from"] == "m"
    assert view.activities["items"]["status"] == "compensated"
