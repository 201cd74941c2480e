"""Content hashes: the same for the same meaning, different for different content."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wovyr.definition import canonical_json, content_hash, load_definition, load_definition_file

from .conftest import EXAMPLES

YAML_TEXT = """\
# a comment
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: pin-test, version: "2"}
inputs:
  order_id: {type: string, required: true}
activities:
  - id: reserve
    tool: inventory.reserve
    with: {order_id: "${{ inputs.order_id }}", qty: 2}
    retry: {max_attempts: 5, initial_interval: 1s, max_interval: 1m}
    timeout: 90s
  - id: ship
    needs: [reserve]
    wait: {timer: {at: "2027-01-01T10:00:00+01:00"}}
output: {id: "${{ activities.reserve.output.id }}"}
"""

DATA = {
    "kind": "Workflow",
    "output": {"id": "${{ activities.reserve.output.id }}"},
    "activities": [
        {
            "timeout": "PT1M30S",
            "with": {"qty": 2, "order_id": "${{ inputs.order_id }}"},
            "retry": {"max_interval": 60, "initial_interval": "1000ms", "max_attempts": 5},
            "id": "reserve",
            "tool": "inventory.reserve",
            "needs": [],
            "compensate": None,
        },
        {"wait": {"timer": {"at": "2027-01-01T09:00:00Z"}}, "id": "ship", "needs": ["reserve"]},
    ],
    "metadata": {"version": "2", "name": "pin-test", "labels": {}},
    "apiVersion": "wovyr/v1",
    "inputs": {"order_id": {"required": True, "type": "string"}},
}


def test_yaml_and_json_with_other_spellings_hash_the_same() -> None:
    from_yaml = load_definition(YAML_TEXT)
    from_json = load_definition(json.dumps(DATA, indent=3))
    assert canonical_json(from_yaml) == canonical_json(from_json)
    assert content_hash(from_yaml) == content_hash(from_json)
    assert content_hash(from_yaml).startswith("sha256:")
    assert len(content_hash(from_yaml)) == len("sha256:") + 64


def test_any_change_of_content_changes_the_hash() -> None:
    base = content_hash(load_definition(YAML_TEXT))
    for old, new in [("qty: 2", "qty: 3"), ('version: "2"', 'version: "3"'), ("90s", "91s")]:
        assert content_hash(load_definition(YAML_TEXT.replace(old, new))) != base


def test_the_canonical_form_is_compact_sorted_and_reloads_to_the_same_workflow() -> None:
    workflow = load_definition(YAML_TEXT)
    text = canonical_json(workflow)
    assert " " not in text.replace("${{ ", "").replace(" }}", "")
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    assert load_definition(text) == workflow
    assert content_hash(load_definition(text)) == content_hash(workflow)


def test_examples_round_trip_through_their_canonical_form() -> None:
    for path in EXAMPLES:
        workflow = load_definition(path.read_bytes())
        assert load_definition(canonical_json(workflow)) == workflow, path.name


def _shuffled(value: object, rng: random.Random) -> object:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def _to_yaml(value: object, indent: int, rng: random.Random) -> str:
    """Block YAML with a random indent step and comments, from JSON-able data."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            comment = "  # note" if rng.random() < 0.3 else ""
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{json.dumps(key)}:{comment}\n{_to_yaml(item, indent + 2, rng)}")
            else:
                lines.append(f"{pad}{json.dumps(key)}: {json.dumps(item)}{comment}\n")
        return "".join(lines)
    if isinstance(value, list) and value:
        out = []
        for item in value:
            body = _to_yaml(item, indent + 2, rng)
            out.append(
                f"{pad}-\n{body}"
                if isinstance(item, dict | list) and item
                else f"{pad}- {json.dumps(item)}\n"
            )
        return "".join(out)
    return f"{pad}{json.dumps(value)}\n"


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32), indent=st.integers(0, 4))
def test_hash_is_invariant_under_key_order_and_formatting(seed: int, indent: int) -> None:
    rng = random.Random(seed)
    expected = content_hash(load_definition(json.dumps(DATA)))
    shuffled = _shuffled(DATA, rng)
    as_json = json.dumps(shuffled, indent=rng.choice([None, 1, 4]))
    header = "# header comment\n" if rng.random() < 0.5 else ""
    as_yaml = header + _to_yaml(shuffled, indent, rng)  # a root may be indented as a whole
    assert content_hash(load_definition(as_json)) == expected
    assert content_hash(load_definition(as_yaml)) == expected


def test_example_hashes_never_change() -> None:
    """Stored executions and registered versions are keyed by these hashes: a change to the
    model that alters the canonical form of an existing document must not land."""
    expected = json.loads((Path(__file__).with_name("hashes.json")).read_text())
    assert sorted(expected) == sorted(p.name for p in EXAMPLES)
    for path in EXAMPLES:
        assert content_hash(load_definition_file(path)) == expected[path.name], path.name
