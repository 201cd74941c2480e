"""`options:` of `llm` and `agent` steps and of agent documents: keys no provider family
takes are refused at the key (file:line:col, with the closest name), keys the step sets
itself are refused with the step key to use, and the content hash of a definition without
`options` is what it was before the key existed (golden hashes)."""

from __future__ import annotations

import pytest

from wovyr.definition import content_hash, load_definition
from wovyr.definition.agent import agent_workflow, load_agent
from wovyr.errors import DefinitionError, Problem

from .test_pin import YAML_TEXT

LLM = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: options-golden, version: "1"}
inputs:
  text: {type: string, required: true}
activities:
  - id: title
    llm:
      provider: default
      model: gpt-4o-mini
      system: You write titles.
      prompt: "A title for: ${{ inputs.text }}"
      temperature: 0.2
      max_tokens: 100
  - id: research
    needs: [title]
    agent:
      model: gpt-4o-mini
      instructions: Answer with sources.
      input: "${{ activities.title.output.text }}"
      tools: [search.web]
      max_turns: 4
output: "${{ activities.research.output }}"
"""
# computed before `options:` existed: a definition that does not use it keeps its hash
GOLDEN = {
    "pin": "sha256:5ac05df32993dcc80ca819b8bb212c8b088d0c25bfa5317eee120881a4c0186b",
    "llm": "sha256:6160b927eb2f4202cae6e4c2d585e839762e315e101d2d35aaace0de47756136",
}


def _problems(text: str) -> list[Problem]:
    with pytest.raises(DefinitionError) as raised:
        load_definition(text, "flow.yaml")
    return raised.value.problems


def test_definitions_without_options_keep_their_hashes() -> None:
    assert content_hash(load_definition(YAML_TEXT)) == GOLDEN["pin"]
    assert content_hash(load_definition(LLM)) == GOLDEN["llm"]
    explicit = LLM.replace("max_tokens: 100", "max_tokens: 100\n      options: null")
    assert content_hash(load_definition(explicit)) == GOLDEN["llm"]


def test_options_are_part_of_the_hash() -> None:
    one = LLM.replace("max_tokens: 100", "max_tokens: 100\n      options: {seed: 7}")
    two = LLM.replace("max_tokens: 100", "max_tokens: 100\n      options: {seed: 8}")
    assert len({content_hash(load_definition(t)) for t in (LLM, one, two)}) == 3


def test_known_options_of_every_family_load() -> None:
    text = LLM.replace(
        "max_tokens: 100",
        "max_tokens: 100\n"
        "      options:\n"
        "        reasoning_effort: low\n"
        "        top_p: 0.9\n"
        '        stop: ["\\n\\n"]\n'
        "        seed: ${{ inputs.text.size() }}\n"
        "        response_format: {type: json_object}\n"
        "        tool_choice: none\n"
        "        top_k: 40",
    ).replace("max_turns: 4", "max_turns: 4\n      options: {parallel_tool_calls: false}")
    workflow = load_definition(text)
    assert workflow.activities[0].step.llm.options["reasoning_effort"] == "low"  # type: ignore[union-attr]


def test_responses_options_load_and_are_located_when_misspelt() -> None:
    text = LLM.replace(
        "max_tokens: 100",
        "max_tokens: 100\n"
        "      options:\n"
        "        reasoning: {effort: low}\n"
        "        text: {verbosity: low}\n"
        "        truncation: auto\n"
        "        include: [reasoning.encrypted_content]",
    )
    workflow = load_definition(text)
    assert workflow.activities[0].step.llm.options["reasoning"] == {"effort": "low"}  # type: ignore[union-attr]
    (problem,) = _problems(
        LLM.replace("max_tokens: 100", "max_tokens: 100\n      options: {reasonning: {}}")
    )
    assert problem.message == (
        "option 'reasonning' is not taken by any provider family (did you mean 'reasoning'?)"
    )
    assert (problem.line, problem.column) == (15, 17)
    for key, own in (
        ("max_output_tokens", "the step's `max_tokens:`"),
        ("instructions", "the step's system message"),
        ("input", "the step's messages"),
    ):
        (problem,) = _problems(
            LLM.replace("max_tokens: 100", f"max_tokens: 100\n      options: {{{key}: 1}}")
        )
        assert problem.message.startswith(f"{key!r} is not an option: {own}")


def test_an_unknown_option_is_located_at_its_key() -> None:
    text = LLM.replace("max_tokens: 100", "max_tokens: 100\n      options: {top_p: 1, seedd: 7}")
    (problem,) = _problems(text)
    assert problem.message == (
        "option 'seedd' is not taken by any provider family (did you mean 'seed'?)"
    )
    assert (problem.file, problem.line, problem.column) == ("flow.yaml", 15, 27)
    assert problem.path == "activities[0].llm.options.seedd"


def test_an_agent_s_unknown_option_is_located_at_its_key() -> None:
    text = LLM.replace(
        "max_turns: 4", "max_turns: 4\n      options:\n        reasoning_efort: high"
    )
    (problem,) = _problems(text)
    assert "option 'reasoning_efort' is not taken" in problem.message
    assert "did you mean 'reasoning_effort'?" in problem.message
    assert (problem.line, problem.column) == (24, 9)


def test_a_key_the_step_sets_itself_is_not_an_option() -> None:
    text = LLM.replace("max_tokens: 100", "max_tokens: 100\n      options: {max_tokens: 5}")
    (problem,) = _problems(text)
    assert problem.message == "'max_tokens' is not an option: the step's `max_tokens:` sets it"
    for key in ("model", "messages", "stream", "tools", "temperature"):
        (problem,) = _problems(
            LLM.replace("max_tokens: 100", f"max_tokens: 100\n      options: {{{key}: 1}}")
        )
        assert f"{key!r} is not an option" in problem.message


def test_response_schema_and_a_response_format_option_are_one_too_many() -> None:
    text = LLM.replace(
        "max_tokens: 100",
        "max_tokens: 100\n      response_schema: {type: object}\n"
        "      options: {response_format: {type: json_object}}",
    )
    (problem,) = _problems(text)
    assert "give `response_schema` or `options.response_format`, not both" in problem.message
    assert (problem.path, problem.line) == ("activities[0].llm", 9)  # the llm mapping


AGENT = """\
apiVersion: wovyr/v1
kind: Agent
metadata: {name: helper}
spec:
  model: claude-sonnet-4-5
  options:
    top_k: 40
    thinking: {type: enabled, budget_tokens: 2048}
"""


def test_an_agent_document_passes_its_options_to_its_workflow() -> None:
    document, _ = load_agent(AGENT)
    step = agent_workflow(document).activities[0].step
    assert step.agent.options == {  # type: ignore[union-attr]
        "top_k": 40,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }


def test_an_agent_document_s_unknown_option_is_located() -> None:
    with pytest.raises(DefinitionError) as raised:
        load_agent(AGENT.replace("top_k", "topk"), "helper.yaml")
    (problem,) = raised.value.problems
    assert (problem.file, problem.line, problem.column) == ("helper.yaml", 7, 5)
    assert "did you mean 'top_k'?" in problem.message
