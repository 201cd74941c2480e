"""`continue_as_new` validation: `when` is one condition, `input` names declared inputs
with values of their types, expressions read what they may, every problem located."""

from __future__ import annotations

import pytest

from wovyr.definition import load_definition

from .conftest import only_problem, problems_of, workflow_text

BODY = """\
inputs:
  month: {{type: integer, default: 1}}
  customer: {{type: string, required: true}}
activities:
  - {{id: bill, set: {{month: "${{{{ inputs.month }}}}"}}}}
output: "${{{{ activities.bill.output }}}}"
continue_as_new:
  when: {when}
  input: {input}
"""


def doc(when: str = '"${{ output.month < 12 }}"', input: str = "{}") -> str:
    return workflow_text(BODY.format(when=when, input=input))


def test_a_good_one_loads() -> None:
    workflow = load_definition(doc(input='{month: "${{ inputs.month + 1 }}"}'), "wf.yaml")
    assert workflow.continue_as_new is not None
    assert workflow.continue_as_new.input == {"month": "${{ inputs.month + 1 }}"}


@pytest.mark.parametrize(
    "when", ['"output.month < 12"', '"${{ true }} and ${{ false }}"', '"always"']
)
def test_when_must_be_one_expression(when: str) -> None:
    problem = only_problem(doc(when=when))
    assert problem.message == "'continue_as_new.when' must be a single '${{ ... }}' expression"
    assert (problem.path, problem.line, problem.column) == ("continue_as_new.when", 11, 9)
    assert problem.hint is not None and "when:" in problem.hint


def test_an_unknown_input_is_located_at_its_key_with_a_suggestion() -> None:
    problem = only_problem(doc(input="\n    mnth: 2"))
    assert problem.message == "continue_as_new.input names unknown input 'mnth'"
    assert (problem.path, problem.line, problem.column) == ("continue_as_new.input.mnth", 13, 5)
    assert problem.hint == "did you mean 'month'?"


def test_a_literal_of_the_wrong_type_is_refused() -> None:
    problem = only_problem(doc(input="{month: soon}"))
    assert problem.message == "continue_as_new.input 'month' must be integer, not string"
    assert problem.path == "continue_as_new.input.month"


def test_expressions_read_declared_names_only() -> None:
    found = problems_of(
        doc(
            when='"${{ activities.bil.output.month < 12 }}"',
            input='{month: "${{ inputs.monht + 1 }}"}',
        )
    )
    assert [(p.path, p.message) for p in found] == [
        ("continue_as_new.when", "unknown activity 'bil' in an expression"),
        ("continue_as_new.input.month", "unknown input 'monht' in an expression"),
    ]


def test_a_workflow_that_continues_cannot_start_itself_as_a_child() -> None:
    text = workflow_text("""\
        activities:
          - {id: again, when: "${{ false }}", workflow: {name: test}}
        continue_as_new: {when: "${{ true }}"}
        """)
    problem = only_problem(text)
    assert problem.message.startswith("a workflow with continue_as_new cannot run as a child")
    assert problem.path == "activities[0].workflow.name"


def test_when_must_be_text() -> None:
    found = problems_of(doc(when="true"))
    assert any(p.path == "continue_as_new.when" for p in found)
