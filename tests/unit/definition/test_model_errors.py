"""Model (pydantic) errors become located problems with readable messages and hints."""

from __future__ import annotations

from wovyr.definition.locate import model_at, suggest
from wovyr.definition.model import Activity, RetryPolicy, Workflow

from .conftest import HEADER, only_problem, problems_of, workflow_text


def test_unknown_field_points_at_the_key_and_suggests() -> None:
    problem = only_problem(
        workflow_text("""\
            activities:
              - id: a
                tool: x.y
                retry: {max_atempts: 3}
            """)
    )
    assert problem.message == "unknown field 'max_atempts'"
    assert problem.hint == "did you mean 'max_attempts'?"
    assert problem.path == "activities[0].retry.max_atempts"
    assert (problem.line, problem.column) == (7, 13)


def test_unknown_field_without_a_close_match_lists_the_allowed_ones() -> None:
    problem = only_problem(HEADER + "activities: [{id: a, set: {}}]\nzzz: 1\n")
    assert problem.hint is not None
    assert problem.hint.startswith("allowed fields: activities, apiVersion")


def test_missing_fields_are_named_at_their_parent() -> None:
    found = problems_of("apiVersion: wovyr/v1\nkind: Workflow\nmetadata:\n  version: 2\n")
    messages = {p.message: (p.line, p.column) for p in found}
    assert messages["missing required field 'name'"] == (4, 3)
    assert "missing required field 'activities'" in messages


def test_union_alternatives_are_merged_into_one_problem() -> None:
    problem = only_problem(workflow_text("activities: [{id: a, set: {}, when: [1]}]\n"))
    assert problem.message == "expected a valid string or a valid boolean"
    assert problem.path == "activities[0].when"


def test_wrong_values_say_what_was_given() -> None:
    problem = only_problem(
        "apiVersion: wovyr/v2\nkind: Workflow\nmetadata: {name: t}\n"
        "activities: [{id: a, set: {}}]\n"
    )
    assert problem.message == "expected 'wovyr/v1', got 'wovyr/v2'"
    assert (problem.line, problem.column) == (1, 13)


def test_kind_keys_are_checked_per_activity() -> None:
    found = problems_of(
        workflow_text("""\
            activities:
              - {id: a, tool: x, shell: {argv: [ls]}}
              - {id: b}
              - {id: c, set: {}, compensate: {with: {}}}
            """)
    )
    text = [(p.line, p.message) for p in found]
    assert (
        5,
        "an activity takes exactly one of tool, http, shell, set, wait, workflow, llm, "
        "agent, mcp, memory (found tool, shell)",
    ) in text
    assert any(line == 6 and "(found none)" in m for line, m in text)
    assert any(line == 7 and "a compensation takes exactly one" in m for line, m in text)


def test_duration_and_timestamp_errors_keep_their_hint() -> None:
    found = problems_of(
        workflow_text("""\
            activities:
              - {id: a, set: {}, timeout: 5 minutes}
              - {id: b, wait: {timer: {at: "2027-01-01T09:00:00"}}}
            """)
    )
    assert "invalid duration '5 minutes'" in found[0].message
    assert "has no time zone" in found[1].message


def test_model_and_graph_problems_are_reported_together() -> None:
    found = problems_of(
        workflow_text("""\
            activities:
              - {id: a, set: {}, timout: 1s}
              - {id: b, needs: [c], set: {}}
            """)
    )
    assert [p.message for p in found] == [
        "unknown field 'timout'",
        "needs unknown activity 'c'",
    ]


def test_model_at_walks_lists_dicts_and_optionals() -> None:
    assert model_at(()) is Workflow
    assert model_at(("activities", 3)) is Activity
    assert model_at(("activities", 0, "retry")) is RetryPolicy
    assert model_at(("activities", 0, "compensate", "retry")) is RetryPolicy
    assert model_at(("activities", 0, "nope")) is None
    assert model_at(("inputs", "x", "type")) is None


def test_suggest() -> None:
    assert suggest("timout", ["timeout", "tool"]) == "did you mean 'timeout'?"
    assert suggest("zzz", ["timeout"]) is None
