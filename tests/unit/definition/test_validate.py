"""Cross-field validation: ids, needs, cycles, expression references, inputs, retries."""

from __future__ import annotations

import pytest
from tests.counting import counting_calls

from wovyr.definition import Workflow, load_definition, validate
from wovyr.definition.parse import Limits

from .conftest import HEADER, only_problem, problems_of, workflow_text


def messages(text: str) -> list[str]:
    return [p.message for p in problems_of(text)]


def test_duplicate_ids_point_at_the_second() -> None:
    problem = only_problem(
        workflow_text("""\
        activities:
          - {id: a, set: {}}
          - {id: a, set: {}}
        """)
    )
    assert problem.message == "duplicate activity id 'a' (first at line 5)"
    assert (problem.line, problem.path) == (6, "activities[1].id")


def test_unknown_needs_suggest_a_close_id() -> None:
    problem = only_problem(
        workflow_text("""\
        activities:
          - {id: reserve, set: {}}
          - {id: ship, needs: [reserv], set: {}}
        """)
    )
    assert problem.message == "needs unknown activity 'reserv'"
    assert problem.hint == "did you mean 'reserve'?"
    assert problem.path == "activities[1].needs[0]"


def test_a_need_listed_twice() -> None:
    assert messages(
        workflow_text("""\
        activities:
          - {id: a, set: {}}
          - {id: b, needs: [a, a], set: {}}
        """)
    ) == ["activity 'a' is listed twice in needs"]


@pytest.mark.parametrize(
    ("body", "cycle"),
    [
        ("  - {id: a, needs: [a], set: {}}\n", "a -> a"),
        (
            "  - {id: a, needs: [c], set: {}}\n  - {id: b, needs: [a], set: {}}\n"
            "  - {id: c, needs: [b], set: {}}\n",
            "a -> c -> b -> a",
        ),
        (
            "  - {id: x, set: {}}\n  - {id: a, needs: [x, b], set: {}}\n"
            "  - {id: b, needs: [a], set: {}}\n",
            "a -> b -> a",
        ),
    ],
)
def test_cycles_are_printed_as_paths(body: str, cycle: str) -> None:
    problem = only_problem(HEADER + "activities:\n" + body)
    assert problem.message == f"dependency cycle: {cycle}"
    assert problem.hint is not None and "'needs'" in problem.hint


def test_every_separate_cycle_is_reported() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - {id: a, needs: [b], set: {}}
          - {id: b, needs: [a], set: {}}
          - {id: c, needs: [d], set: {}}
          - {id: d, needs: [c], set: {}}
        """)
    )
    assert found == ["dependency cycle: a -> b -> a", "dependency cycle: c -> d -> c"]


def test_a_long_chain_validates_without_recursion() -> None:
    body = "".join(
        f"  - {{id: a{i}, needs: [a{i - 1}], set: {{v: '${{{{ activities.a0.output }}}}'}}}}\n"
        for i in range(1, 3000)
    )
    text = HEADER + "activities:\n  - {id: a0, set: {}}\n" + body
    with counting_calls() as work:
        workflow = load_definition(text, limits=Limits(max_activities=3000))  # over the cap
    assert len(workflow.activities) == 3000
    assert work.total < 1_000 * 3000, work.total  # linear: about 360 calls per activity today


def test_reading_an_upstream_activity_transitively_is_fine() -> None:
    load_definition(
        workflow_text("""\
        activities:
          - {id: a, set: {v: 1}}
          - {id: b, needs: [a], set: {}}
          - {id: c, needs: [b], set: {v: "${{ activities.a.output.v + 1 }}"}}
        """)
    )


def test_reading_a_non_upstream_activity_says_to_add_it_to_needs() -> None:
    problem = only_problem(
        workflow_text("""\
        activities:
          - {id: pay, set: {}}
          - {id: ship, set: {v: "${{ activities.pay.output.id }}"}}
        """)
    )
    assert problem.message == "activity 'ship' reads activities.pay but 'pay' is not upstream of it"
    assert problem.hint == "add 'pay' to the needs of 'ship'"
    assert (problem.line, problem.path) == (6, "activities[1].set.v")


def test_bracket_references_are_checked_too() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - {id: pay, set: {}}
          - {id: ship, set: {v: "${{ activities['pay'].output }}"}}
        """)
    )
    assert found == ["activity 'ship' reads activities.pay but 'pay' is not upstream of it"]


def test_unknown_activity_in_an_expression() -> None:
    problem = only_problem(
        workflow_text("""\
        activities:
          - {id: reserve, set: {}}
        output: "${{ activities.reserv.output }}"
        """)
    )
    assert problem.message == "unknown activity 'reserv' in an expression"
    assert problem.hint == "did you mean 'reserve'?"


def test_self_reference_is_only_allowed_in_compensate() -> None:
    assert messages(
        workflow_text("""\
        activities:
          - {id: a, set: {v: "${{ activities.a.output }}"}}
        """)
    ) == ["activity 'a' cannot read its own result"]
    load_definition(
        workflow_text("""\
        activities:
          - id: a
            tool: inventory.reserve
            compensate: {tool: inventory.release, with: {id: "${{ activities.a.output.id }}"}}
        """)
    )


def test_the_output_may_read_any_activity_but_not_item() -> None:
    load_definition(
        workflow_text("""\
        activities:
          - {id: a, set: {}}
          - {id: b, set: {}}
        output: {a: "${{ activities.a.output }}", b: "${{ activities['b'].status }}"}
        """)
    )
    problem = only_problem(
        workflow_text("""\
        activities: [{id: a, set: {}}]
        output: "${{ item }}"
        """)
    )
    assert problem.message == "unknown name 'item' in an expression"
    assert problem.hint == "'item' exists only inside an activity"


def test_item_and_index_are_in_scope_only_inside_a_for_each() -> None:
    load_definition(
        workflow_text("""\
        inputs: {xs: {type: array, default: [1]}}
        activities:
          - {id: a, for_each: "${{ inputs.xs }}", set: {v: "${{ item }}", i: "${{ index }}"}}
        """)
    )
    found = messages(
        workflow_text("""\
        activities: [{id: a, set: {v: "${{ item }}"}}]
        """)
    )
    assert len(found) == 1 and "item" in found[0]


def test_for_each_must_be_one_expression() -> None:
    found = messages(
        workflow_text("""\
        activities: [{id: a, for_each: "items", set: {v: 1}}]
        """)
    )
    assert found == ["'for_each' must be a single '${{ ... }}' expression yielding a list"]


def test_dynamic_activity_access_inside_an_activity_is_refused() -> None:
    assert messages(
        workflow_text("""\
        inputs: {which: {type: string}}
        activities: [{id: a, set: {v: "${{ activities[inputs.which] }}"}}]
        """)
    ) == ["activities must be read by name (activities.ID) inside an activity"]


def test_unknown_names_inputs_and_execution_fields() -> None:
    found = problems_of(
        workflow_text("""\
        inputs: {order_id: {type: string}}
        activities:
          - id: a
            set:
              x: "${{ input.order_id }}"
              y: "${{ inputs.ordr_id }}"
              z: "${{ execution.started }}"
              w: "${{ [1, 2].map(n, n * 2) }}"
        """)
    )
    assert [(p.message, p.hint) for p in found] == [
        ("unknown name 'input' in an expression", "did you mean 'inputs'?"),
        ("unknown input 'ordr_id' in an expression", "did you mean 'order_id'?"),
        ("unknown execution field 'started'", "did you mean 'started_at'?"),
    ]


def test_expression_problems_are_all_reported() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - id: a
            set:
              x: "${{ 1 + }}"
              y: "${{ }}"
              z: "half ${{ open"
              w: "${{ [1].map(x, [1].map(y, [1].map(z, z))) }}"
        """)
    )
    assert len(found) == 4
    assert found[0].startswith("invalid expression '1 +'")
    assert found[1] == "empty expression"
    assert found[2].startswith("unterminated '${{'")
    assert found[3] == "comprehensions are nested 3 deep (limit 2)"


@pytest.mark.parametrize("when", ['"inputs.x > 1"', '"${{ true }} and ${{ false }}"'])
def test_when_must_be_one_whole_expression(when: str) -> None:
    problem = only_problem(
        workflow_text(f"""\
        inputs: {{x: {{type: number}}}}
        activities: [{{id: a, set: {{}}, when: {when}}}]
        """)
    )
    assert problem.message.startswith("'when' must be true, false or a single")


def test_retry_bounds_and_zero_timeouts() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - id: a
            tool: t
            timeout: 0s
            retry: {initial_interval: 5m, max_interval: 1m}
            compensate: {tool: u, retry: {initial_interval: 2h}}
          - {id: b, wait: {approval: {timeout: 0}}}
        timeout: 0
        """)
    )
    assert found == [
        "a timeout must be longer than zero",
        "retry initial_interval (5m) is longer than max_interval (1m)",
        "retry initial_interval (2h) is longer than max_interval (1m)",
        "a timeout must be longer than zero",
        "a timeout must be longer than zero",
    ]


def test_input_declarations() -> None:
    found = messages(
        workflow_text("""\
        inputs:
          count: {type: integer, default: true}
          ratio: {type: number, default: 1.5}
          mode: {type: string, enum: [fast, 1], default: slow}
          flag: {type: boolean, required: true, default: false}
          empty: {type: array, enum: []}
          bad-name: {type: string}
        activities: [{id: a, set: {}}]
        """)
    )
    assert found == [
        "default of input 'count' must be integer, not boolean",
        "enum value of input 'mode' must be string, not integer",
        "default of input 'mode' is not one of its enum values",
        "input 'flag' is required and has a default",
        "enum of input 'empty' is empty",
        "input name 'bad-name' is not an identifier",
    ]


def test_a_workflow_that_starts_itself_needs_a_condition() -> None:
    text = workflow_text("activities: [{id: a, workflow: {name: test}}]\n")
    assert messages(text) == ["the workflow starts itself as a child, which never ends"]
    load_definition(text.replace("{name: test}}", "{name: test}, when: false}"))


def test_validate_without_a_source_map_has_no_positions() -> None:
    workflow = Workflow.model_validate(
        {
            "apiVersion": "wovyr/v1",
            "kind": "Workflow",
            "metadata": {"name": "t"},
            "activities": [{"id": "a", "set": {"v": "${{ activities.b.output }}"}}],
        }
    )
    (problem,) = validate(workflow, filename="api")
    assert problem.message == "unknown activity 'b' in an expression"
    assert (problem.file, problem.line, problem.column) == ("api", None, None)


def test_for_each_pairs_with_runnable_kinds_and_max_concurrency_needs_it() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - {id: a, for_each: "${{ [1] }}", wait: {signal: go}}
          - {id: b, max_concurrency: 2, set: {v: 1}}
        """)
    )
    assert found == [
        "a wait cannot run once per item",
        "max_concurrency only applies to a for_each activity",
    ]


# --- on_failure: continue --------------------------------------------------------------------


def test_an_unguarded_output_read_of_a_continuing_activity_is_located() -> None:
    problem = only_problem(
        workflow_text("""\
        activities:
          - {id: primary, tool: t, on_failure: continue}
          - {id: use, needs: [primary], set: {v: "${{ activities.primary.output.text }}"}}
        """)
    )
    assert problem.message.startswith("activities.primary.output is read without checking")
    assert "on_failure: continue" in problem.message
    assert "activities.primary.status == 'completed'" in (problem.hint or "")
    assert (problem.line, problem.path) == (6, "activities[1].set.v")


@pytest.mark.parametrize(
    "reader",
    [
        # the reading activity's `when` checks the status (or the error)
        """{id: use, needs: [primary], when: "${{ activities.primary.status == 'completed' }}",
             set: {v: "${{ activities.primary.output }}"}}""",
        """{id: use, needs: [primary], when: "${{ activities.primary.error == null }}",
             set: {v: "${{ activities.primary.output }}"}}""",
        # the expression itself checks it, in either spelling
        """{id: use, needs: [primary], set: {v: "${{ activities.primary.status == 'completed'
             ? activities['primary']['output'] : 'none' }}"}}""",
        # reading only the status or the error needs no guard
        """{id: use, needs: [primary], set: {v: "${{ activities.primary.error }}"}}""",
    ],
)
def test_a_guarded_read_is_fine(reader: str) -> None:
    text = workflow_text(f"""\
        activities:
          - {{id: primary, tool: t, on_failure: continue}}
          - {reader}
        """)
    assert load_definition(text).activity("primary").continues  # no problem raised


def test_the_workflow_output_must_guard_too_and_other_activities_need_no_guard() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - {id: primary, tool: t, on_failure: continue}
          - {id: plain, tool: t}
        output:
          a: "${{ activities.primary.output }}"
          b: "${{ activities.plain.output }}"
        """)
    )
    assert len(found) == 1 and found[0].startswith("activities.primary.output is read")


def test_on_failure_takes_fail_or_continue() -> None:
    found = messages(
        workflow_text("""\
        activities:
          - {id: primary, tool: t, on_failure: ignore}
        """)
    )
    assert len(found) == 1 and "'fail' or 'continue'" in found[0]


def test_a_rate_limit_asking_more_units_than_its_bucket_holds_is_refused_where_it_says_so() -> None:
    # One attempt could never start: the bucket never holds 5 units (burst 3, else limit 2).
    problem = only_problem(
        workflow_text("""\
        activities:
          - id: call
            tool: t.call
            rate_limit: {key: api, limit: 10, per: 1m, burst: 3, units: 5}
        """)
    )
    assert problem.message == (
        "rate_limit.units (5) is more than the bucket holds (burst 3): no attempt could start"
    )
    assert (problem.path, problem.line) == ("activities[0].rate_limit.units", 7)
    assert problem.hint == "raise burst to at least 5, or take fewer units per attempt"
    assert messages(
        workflow_text("""\
        activities:
          - id: call
            tool: t.call
            rate_limit: {key: api, limit: 2, units: 3}
        """)
    ) == ["rate_limit.units (3) is more than the bucket holds (limit 2): no attempt could start"]
    # units within the bucket, units from an expression, and a declared bucket (no limit:
    # its numbers are the admin's) are checked when the attempt asks
    for spec in (
        "{key: api, limit: 2, units: 2}",
        '{key: api, limit: 2, units: "${{ input.size }}"}',
        "{key: api, units: 50}",
    ):
        text = workflow_text(f"""\
            activities:
              - id: call
                tool: t.call
                rate_limit: {spec}
            """)
        assert load_definition(text).activities[0].rate_limit is not None, spec


def test_metadata_labels_are_refused_at_their_key_with_the_place_that_labels() -> None:
    problem = only_problem(
        """\
apiVersion: wovyr/v1
kind: Workflow
metadata:
  name: test
  labels: {team: ops}
activities:
  - {id: a, set: {}}
"""
    )
    assert problem.format() == (
        "wf.yaml:5:3: `metadata.labels` labels nothing: the labels of each execution are the "
        "top-level `labels:` (at metadata.labels); move them there: `labels: {team: ...}`; "
        "values may be `${{ inputs.NAME }}`"
    )
    # the canonical form's empty mapping is no label at all
    empty = HEADER.replace("name: test", "name: test, labels: {}")
    assert load_definition(empty + "activities: [{id: a, set: {}}]\n").name == "test"
