"""Child workflows, for_each maps and the registry with version pinning, on every store."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from typing import Any

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionConflict, NotFound
from wovyr.testing import drain


def wf(name: str, body: str, version: str = "1") -> str:
    head = (
        f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}, version: '{version}'}}\n"
    )
    return head + textwrap.dedent(body)


LINE = wf(
    "line",
    """
    inputs: {sku: {type: string, required: true}, wait: {type: boolean, default: false}}
    activities:
      - id: hold
        when: "${{ inputs.wait }}"
        wait: {signal: go}
      - id: price
        needs: [hold]
        set: {sku: "${{ inputs.sku }}", cents: 100}
    output: "${{ activities.price.output }}"
    """,
)


def children(engine: Engine, parent: str) -> list[Any]:
    return engine.list(parent_id=parent, limit=1000).items


def test_parent_fans_out_to_two_children_and_aggregates(engine: Engine) -> None:
    engine.apply(LINE)
    rec = engine.start(
        wf(
            "order",
            """
        activities:
          - {id: a, workflow: {name: line, input: {sku: A}}}
          - {id: b, workflow: {name: line, input: {sku: B}}}
          - id: total
            needs: [a, b]
            set: {skus: ["${{ activities.a.output.sku }}", "${{ activities.b.output.sku }}"]}
        output: "${{ activities.total.output }}"
        """,
        )
    )
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed", view.error
    assert view.output == {"skus": ["A", "B"]}
    kids = sorted(c.id for c in children(engine, rec.id))
    assert kids == [f"{rec.id}::a", f"{rec.id}::b"]
    assert engine.query(f"{rec.id}::a").parent_id == rec.id
    assert view.activities["a"]["child"] == f"{rec.id}::a"


MAP_OF_CHILDREN = wf(
    "batch",
    """
    inputs: {skus: {type: array, required: true}}
    activities:
      - id: lines
        for_each: "${{ inputs.skus }}"
        max_concurrency: 5
        workflow: {name: line, input: {sku: "${{ item }}", wait: true}}
    output: "${{ activities.lines.output }}"
    """,
)


def test_map_of_50_children_respects_max_concurrency(engine: Engine) -> None:
    engine.apply(LINE)
    skus = [f"S{i}" for i in range(50)]
    rec = engine.start(MAP_OF_CHILDREN, {"skus": skus})
    most = 0
    for _ in range(40):
        drain(engine)
        running = [c.id for c in children(engine, rec.id) if c.status == "running"]
        most = max(most, len(running))
        if not running:
            break
        for child in running:
            engine.signal(child, "go")
    view = engine.query(rec.id)
    assert view.status == "completed", view.error
    assert most == 5
    assert [o["sku"] for o in view.output] == skus
    assert len(children(engine, rec.id)) == 50


def test_child_failure_fails_the_activity_and_compensates(
    engine: Engine, registry: ActivityRegistry
) -> None:
    undone: list[str] = []

    def undo(what: str) -> None:
        undone.append(what)

    registry.register("undo", undo)
    engine.apply(
        wf(
            "broken",
            """
        activities:
          - {id: x, wait: {approval: {}}}
        """,
        )
    )
    rec = engine.start(
        wf(
            "parent",
            """
        activities:
          - id: reserve
            set: {id: R1}
            compensate: {tool: undo, with: {what: "${{ activities.reserve.output.id }}"}}
          - id: child
            needs: [reserve]
            workflow: {name: broken}
        """,
        )
    )
    drain(engine)
    child = f"{rec.id}::child"
    assert engine.query(rec.id).activities["child"]["status"] == "waiting"
    engine.approve(child, "x", False, by="ops")
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed"
    assert view.error["activity"] == "child"
    assert view.error["error"]["type"] == "ChildFailed"
    assert undone == ["R1"]


def test_cancelling_a_parent_cancels_running_children(engine: Engine) -> None:
    engine.apply(LINE)
    rec = engine.start(MAP_OF_CHILDREN, {"skus": ["A", "B", "C"]})
    drain(engine)
    assert {c.status for c in children(engine, rec.id)} == {"running"}
    engine.cancel(rec.id, "stop")
    drain(engine)
    assert {c.status for c in children(engine, rec.id)} == {"cancelled"}
    assert engine.query(rec.id).status == "cancelled"


def test_depth_guard_stops_runaway_recursion(engine: Engine) -> None:
    source = wf(
        "again",
        """
        activities:
          - id: deeper
            when: "${{ true }}"
            workflow: {name: again}
        """,
    )
    engine.apply(source)
    small = Engine(
        engine.store, clock=engine.clock, activities=engine.activities, max_child_depth=3
    )
    rec = small.start(name="again")
    drain(small)
    view = small.query(rec.id)
    assert view.status == "failed"
    chain = view.error
    while chain.get("error", {}).get("type") == "ChildFailed":
        chain = chain["error"]["details"]["error"]
    text = str(view.error)
    assert "ChildDepthExceeded" in text and "depth limit (3)" in text
    assert len(small.list(workflow="again", limit=100).items) == 4


def test_unknown_child_and_bad_for_each_fail_clearly(engine: Engine) -> None:
    rec = engine.start(
        wf(
            "p",
            """
        activities:
          - {id: c, workflow: {name: nowhere}}
        """,
        )
    )
    drain(engine)
    err = engine.query(rec.id).activities["c"]["error"]
    assert err["type"] == "NotFound" and "nowhere" in err["message"]
    rec = engine.start(
        wf(
            "m",
            """
        inputs: {xs: {type: object, default: {a: 1}}}
        activities:
          - {id: each, for_each: "${{ inputs.xs }}", set: {v: "${{ item }}"}}
        """,
        )
    )
    drain(engine)
    err = engine.query(rec.id).activities["each"]["error"]
    assert err["type"] == "ForEachNotAList" and "got dict" in err["message"]


def test_map_size_cap_is_configurable(engine: Engine) -> None:
    capped = Engine(engine.store, clock=engine.clock, max_items=100)
    rec = capped.start(
        wf(
            "m",
            """
        inputs: {xs: {type: array}}
        activities:
          - {id: each, for_each: "${{ inputs.xs }}", set: {v: "${{ item }}"}}
        """,
        ),
        {"xs": list(range(101))},
    )
    drain(capped)
    err = capped.query(rec.id).activities["each"]["error"]
    assert err["type"] == "ForEachTooLarge" and err["details"]["limit"] == 100


def test_map_items_retry_and_compensation_covers_completed_items(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    calls: list[tuple[int, int]] = []
    undone: list[int] = []

    def work(n: int, ctx: ActivityContext) -> int:
        calls.append((n, ctx.attempt))
        if n == 2 and ctx.attempt == 1:
            raise RuntimeError("flaky")
        if n == 4:
            raise RuntimeError("always")
        return n * 10

    def undo_item(n: int) -> None:
        undone.append(n)

    registry.register("work", work)
    registry.register("undo", undo_item)
    rec = engine.start(
        wf(
            "m",
            """
        inputs: {xs: {type: array}}
        activities:
          - id: each
            for_each: "${{ inputs.xs }}"
            max_concurrency: 2
            tool: work
            with: {n: "${{ item }}"}
            retry: {max_attempts: 2, initial_interval: 0}
            compensate: {tool: undo, with: {n: "${{ item }}"}}
        """,
        ),
        {"xs": [1, 2, 3, 4, 5]},
    )
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed"
    items = view.activities["each"]["items"]
    assert [i["status"] for i in items[:3]] == ["completed"] * 3
    assert items[3]["status"] == "failed" and items[3]["attempt"] == 2
    assert (2, 2) in calls
    assert sorted(undone, reverse=True) == undone and set(undone) == {1, 2, 3} | (
        {5} if items[4]["status"] == "completed" else set()
    )
    assert view.error["error"]["type"] == "ItemFailed"


def test_map_of_tools_collects_results_in_order(engine: Engine, registry: ActivityRegistry) -> None:
    registry.register("square", lambda n: n * n)
    rec = engine.start(
        wf(
            "m",
            """
        inputs: {xs: {type: array}}
        activities:
          - {id: sq, for_each: "${{ inputs.xs }}", tool: square, with: {n: "${{ item }}"}}
          - {id: none, for_each: "${{ [] }}", set: {v: 1}}
        output: ["${{ activities.sq.output }}", "${{ activities.none.output }}"]
        """,
        ),
        {"xs": [3, 1, 2]},
    )
    drain(engine)
    assert engine.query(rec.id).output == [[9, 1, 4], []]


V1 = wf(
    "flow",
    """
    activities:
      - id: first
        set: {v: 1}
      - id: gate
        needs: [first]
        wait: {signal: go}
      - id: last
        needs: [gate]
        set: {version: one}
    output: "${{ activities.last.output.version }}"
    """,
)
V2 = wf(
    "flow",
    """
    activities:
      - id: renamed_gate
        wait: {timer: {after: 1h}}
      - id: finish
        needs: [renamed_gate]
        set: {version: two}
    output: "${{ activities.finish.output.version }}"
    """,
    version="2",
)


def test_pinned_executions_finish_on_their_own_version(engine: Engine, clock: ManualClock) -> None:
    assert engine.apply(V1)[0] == "applied"
    assert engine.apply(V1)[0] == "unchanged"
    old = [engine.start(name="flow").id for _ in range(2)]
    drain(engine)
    assert engine.apply(V2)[0] == "applied"
    with pytest.raises(DefinitionConflict):
        engine.apply(V2.replace("two", "deux"))
    new = engine.start(name="flow").id
    drain(engine)  # arms v2's timer
    for execution_id in old:
        engine.signal(execution_id, "go")  # only the id is needed
    clock.advance(hours=1)
    drain(engine)
    assert [engine.query(i).output for i in old] == ["one", "one"]
    assert engine.query(new).output == "two"
    assert engine.query(new).version == "2" and engine.query(old[0]).version == "1"
    assert engine.named("flow", "1")[0].activities[1].id == "gate"


def test_a_parent_waiting_on_two_children_waits_on_them_by_id(engine: Engine) -> None:
    """Its `waiting_on` names each child (it once read `approval line_widget; ...`); the
    list shows it `waiting` as the view does, and `running` lists none of the waiting."""
    engine.apply(LINE)
    rec = engine.start(
        wf(
            "order",
            """
        activities:
          - {id: line_widget, workflow: {name: line, input: {sku: W, wait: true}}}
          - {id: line_gadget, workflow: {name: line, input: {sku: G, wait: true}}}
        """,
        )
    )
    drain(engine)
    kids = [f"{rec.id}::line_widget", f"{rec.id}::line_gadget"]
    view = engine.query(rec.id)
    assert view.status == "waiting"
    assert view.waiting_on == f"child {kids[0]}; child {kids[1]}"
    stored = engine.get(rec.id)
    assert stored.waiting_on == view.waiting_on and stored.shown_status == "waiting"
    assert {r.id for r in engine.list(status="waiting").items} == {rec.id, *kids}
    assert engine.list(status="running").items == []
    busy = engine.start(input={"sku": "X"}, name="line")  # started, not run yet
    assert [r.id for r in engine.list(status="running").items] == [busy.id]
    assert engine.get(busy.id).shown_status == engine.query(busy.id).status == "running"


def test_a_map_over_children_says_how_many_are_done(engine: Engine) -> None:
    engine.apply(LINE)
    rec = engine.start(MAP_OF_CHILDREN, {"skus": [f"S{i}" for i in range(6)]})
    drain(engine)
    assert engine.query(rec.id).waiting_on == "children 0/6 done"
    for index in (0, 1):
        engine.signal(f"{rec.id}::lines[{index}]", "go")
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "waiting" and view.waiting_on == "children 2/6 done"
    assert engine.get(rec.id).waiting_on == "children 2/6 done"


def test_a_for_each_in_back_off_says_its_progress_and_next_retry(
    engine: Engine, registry: ActivityRegistry
) -> None:
    def charge(n: int, ctx: ActivityContext) -> int:
        if n == 2 and ctx.attempt == 1:
            raise RuntimeError("declined")
        return n

    registry.register("charge", charge)
    rec = engine.start(
        wf(
            "charges",
            """
        activities:
          - id: pay
            for_each: "${{ [1, 2, 3] }}"
            tool: charge
            with: {n: "${{ item }}"}
            retry: {max_attempts: 2, initial_interval: 30s}
        """,
        )
    )
    drain(engine)
    at = (engine.clock.now() + timedelta(seconds=30)).isoformat()
    view = engine.query(rec.id)
    assert view.status == "waiting"
    assert view.waiting_on == f"items 2/3 done; retry pay[1] attempt 2 at {at}"
    assert engine.get(rec.id).shown_status == "waiting"


def test_children_and_starts_by_name_find_only_applied_definitions(engine: Engine) -> None:
    """A definition run from its text claims no name: a child workflow (or a start) naming
    it fails as unknown until it is applied; applying other content under the same name and
    version then succeeds, and that is what runs."""
    engine.start(LINE, {"sku": "ad hoc"})
    drain(engine)
    parent = wf("p", "activities:\n  - {id: c, workflow: {name: line, input: {sku: A}}}\n")
    rec = engine.start(parent)
    drain(engine)
    err = engine.query(rec.id).activities["c"]["error"]
    assert err["type"] == "NotFound" and "'line'" in err["message"]
    with pytest.raises(NotFound, match="no workflow 'line' is registered"):
        engine.start(name="line", input={"sku": "B"})
    assert engine.apply(LINE.replace("cents: 100", "cents: 250"))[0] == "applied"
    rec = engine.start(parent)
    drain(engine)
    assert engine.query(rec.id).status == "completed"
    assert engine.query(f"{rec.id}::c").output == {"sku": "A", "cents": 250}
