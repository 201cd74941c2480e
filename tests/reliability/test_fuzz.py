"""Fuzzing the definition parser and validator, the expression evaluator and a whole run.

Under hypothesis, bounded for CI (raise the example counts with ``WOVYR_FUZZ_EXAMPLES``,
e.g. ``WOVYR_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest --timeout=0 -s
tests/reliability/test_fuzz.py``; a coverage-guided harness for atheris is in
`fuzz_atheris.py`). For every input:

- only the project's validation errors escape: `DefinitionError` from loading a document,
  `ExpressionError` from expressions, `InputError` from inputs; a run of a document that
  loaded ends finished or waiting, never in an engine error;
- each input is handled in at most 50 function calls per node the loader accepts (counted,
  not timed: machines here differ 3x from day to day; a document at the 100,000-node limit
  takes about 33 per node today), and the Python memory it allocates at its peak
  (tracemalloc) stays under 64 MiB. Work inside C (libyaml, the CEL runtime) is bounded by
  the sizes the code checks before it starts: the document's bytes, nodes and depth, and an
  expression's estimated cost.

Inputs: random text and bytes, YAML-ish text from the characters YAML cares about, hostile
shapes (deep nesting, anchors and aliases, huge scalars, many nodes, tags), random edits of
the example files, structured near-valid workflows (random activity graphs with random
expressions), and CEL expressions from a small grammar evaluated on random data.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.counting import counting_calls

from wovyr.activities.base import ActivityRegistry
from wovyr.definition import load_definition
from wovyr.definition.expr import evaluate, evaluate_condition, render
from wovyr.definition.inputs import resolve_inputs
from wovyr.definition.parse import MAX_NODES
from wovyr.errors import DefinitionError, ExpressionError, InputError
from wovyr.testing import drain, memory_engine

# bounded fuzzing: CI runs it; the fast tier (-m 'not slow') leaves it out.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in sorted((REPO / "examples").glob("*.yaml"))]
EXAMPLES = int(os.environ.get("WOVYR_FUZZ_EXAMPLES", "150"))
MAX_CALLS = 50 * MAX_NODES
MAX_PEAK_BYTES = 64 * 1024 * 1024
TRIED: dict[str, int] = {}

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    print(f"fuzz inputs tried: {sum(TRIED.values())} {TRIED}")


def _outcome(call: Callable[[], Any], allowed: tuple[type[Exception], ...]) -> Any:
    try:
        return call()
    except allowed as exc:
        return exc


def bounded(kind: str, call: Callable[[], Any], allowed: tuple[type[Exception], ...]) -> Any:
    """Run `call` on one input: only `allowed` errors may escape; it must make at most
    MAX_CALLS calls, then (run again, under tracemalloc, which is slow) peak under 64 MiB."""
    TRIED[kind] = TRIED.get(kind, 0) + 1
    with counting_calls() as work:
        result = _outcome(call, allowed)
    assert work.total <= MAX_CALLS, f"{kind}: {work.total} calls for one input"
    tracemalloc.start()
    try:
        _outcome(call, allowed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK_BYTES, f"{kind}: {peak / 2**20:.0f} MiB for one input"
    return result


def load(source: str | bytes) -> Any:
    """Load a document; a refusal must carry located problems."""
    result = bounded("definition", lambda: load_definition(source, "fuzz.yaml"), (DefinitionError,))
    if isinstance(result, DefinitionError):
        assert result.problems and all(p.message for p in result.problems)
    return result


# --- documents --------------------------------------------------------------------------

YAML_CHARS = st.sampled_from(list("abcxyz:-[]{},&*!|>'\"#%@`?\n\t ${}.0123456789~\\\x00é\u2028"))


@FUZZ
@given(st.binary(max_size=2000))
def test_bytes(source: bytes) -> None:
    load(source)


@FUZZ
@given(st.text(YAML_CHARS, max_size=400))
def test_yaml_like_text(source: str) -> None:
    load(source)


def _hostile() -> st.SearchStrategy[str]:
    depth = st.integers(1, 400)
    return st.one_of(
        depth.map(lambda n: "a: " + "[" * n + "]" * n),
        depth.map(lambda n: "a: " + "{b: " * n + "1" + "}" * n),
        depth.map(lambda n: "".join(f"{'  ' * i}k{i}:\n" for i in range(n)) + "  " * n + "v"),
        st.integers(1, 12).map(
            lambda n: (
                "a0: &a0 [x, x]\n"
                + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, n))
            )
        ),
        st.integers(1, 1_200_000).map(lambda n: "a: " + "x" * n),
        st.integers(1, 120_000).map(lambda n: "a: [" + "1," * n + "1]"),
        st.sampled_from(
            [
                "!!python/object:os.system [echo]",
                "a: !!binary aGVsbG8=",
                "<<: {a: 1}",
                "a: 1\na: 2",
                "--- 1\n--- 2",
                "? [a]\n: 1",
                "a: .nan",
                "a: 0x" + "f" * 40,
                "\ufeffapiVersion: wovyr/v1",
                "\xff\xfe",
            ]
        ),
    )


@settings(FUZZ, max_examples=max(40, EXAMPLES // 4))
@given(_hostile())
def test_hostile_shapes(source: str) -> None:
    load(source)


@FUZZ
@given(
    st.sampled_from(range(len(EXAMPLE_TEXTS))),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 8), st.text(YAML_CHARS, max_size=6)),
        min_size=1,
        max_size=6,
    ),
)
def test_mutated_examples(index: int, edits: list[tuple[int, int, str]]) -> None:
    text = EXAMPLE_TEXTS[index]
    for position, length, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + length :]
    load(text)


# --- expressions ------------------------------------------------------------------------

NAMES = ["inputs.n", "inputs.s", "inputs.xs", "inputs.m", "activities.a.output", "item", "index"]
NAMES += ["execution.id", "nope", "inputs.missing", "activities.zz.status", "__class__"]
LITERALS = ["0", "1", "-7", "2.5", "1e308", "9223372036854775807", "'s'", '"\\u00e9"', "true"]
LITERALS += ["null", "[]", "[1, 2, 3]", "{}", "{'k': 1}", "b'x'", "1u", "'a' * 3", "'(a+)+$'"]


def _cel() -> st.SearchStrategy[str]:
    atom = st.sampled_from(NAMES + LITERALS)
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.tuples(
                inner, st.sampled_from(["+", "-", "*", "/", "%", "==", "!=", "<", ">="]), inner
            ).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, st.sampled_from(["&&", "||", "in"]), inner).map(" ".join),
            st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
            inner.map(lambda x: f"!{x}"),
            st.tuples(
                st.sampled_from(["size", "string", "int", "double", "type", "dyn"]), inner
            ).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, st.sampled_from(["contains", "startsWith", "matches"]), inner).map(
                lambda t: f"{t[0]}.{t[1]}({t[2]})"
            ),
            st.tuples(
                inner, st.sampled_from(["all", "exists", "exists_one", "map", "filter"]), inner
            ).map(lambda t: f"{t[0]}.{t[1]}(x, {t[2]})"),
            st.tuples(inner, inner).map(lambda t: f"[{t[0]}, {t[1]}]"),
            st.tuples(inner, inner).map(lambda t: f"{{'k': {t[0]}, 'v': {t[1]}}}"),
            st.tuples(inner, st.sampled_from(["k", "output", "x"])).map(lambda t: f"{t[0]}.{t[1]}"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.sampled_from(["timestamp('2030-01-01T00:00:00Z')", "duration('90s')", "now()"]),
        ),
        max_leaves=12,
    )


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.dictionaries(st.text(max_size=4), children, max_size=6)
    ),
    max_leaves=40,
)
GOOD_INPUTS = st.fixed_dictionaries(
    {},
    optional={
        "n": st.integers(-5, 5),
        "s": st.text(max_size=5),
        "xs": st.lists(st.integers(0, 9), max_size=4),
    },
)


def _context(data: Any, n: Any, items: list[Any]) -> dict[str, Any]:
    return {
        "inputs": {"n": n, "s": "text", "xs": items, "m": data},
        "activities": {"a": {"output": data, "status": "completed", "error": None}},
        "execution": {"id": "e-1", "workflow": "w", "version": "1", "started_at": "2030"},
        "item": data,
        "index": 0,
    }


@FUZZ
@given(_cel(), JSON, JSON, st.lists(JSON, max_size=30))
def test_expressions(source: str, data: Any, n: Any, items: list[Any]) -> None:
    result = bounded(
        "expression", lambda: evaluate(source, _context(data, n, items)), (ExpressionError,)
    )
    if not isinstance(result, ExpressionError):
        json.dumps(result, allow_nan=False)  # a plain, finite JSON value


@FUZZ
@given(
    st.text(st.sampled_from(list("${}() .+-*/<>=!&|?:'\"[]x01inputsactivities")), max_size=80), JSON
)
def test_expression_like_text(source: str, data: Any) -> None:
    ctx = _context(data, 1, [])
    bounded("expression text", lambda: evaluate(source, ctx), (ExpressionError,))
    bounded("condition", lambda: evaluate_condition(source, ctx), (ExpressionError,))


@FUZZ
@given(
    st.recursive(
        st.one_of(_cel().map(lambda s: "${{ " + s + " }}"), st.text(max_size=8)),
        lambda c: st.one_of(
            st.lists(c, max_size=4),
            st.dictionaries(st.text(max_size=4), c, max_size=4),
            st.tuples(c, c).map(
                lambda t: (
                    f"{t[0]}-{t[1]}" if isinstance(t[0], str) and isinstance(t[1], str) else t[0]
                )
            ),
        ),
        max_leaves=8,
    ),
    JSON,
)
def test_templates(template: Any, data: Any) -> None:
    result = bounded(
        "template", lambda: render(template, _context(data, 2, [1])), (ExpressionError,)
    )
    if not isinstance(result, ExpressionError):
        json.dumps(result, allow_nan=False)


# --- structured documents: near-valid workflows, loaded, then run -----------------------

SIMPLE = ["inputs.n", "inputs.s", "size(inputs.xs)", "execution.id", "1", "'k'", "[1, 2]"]
SIMPLE += ["inputs.n > 1", "inputs.s + 'x'", "inputs.xs.map(x, x)", "true", "null"]


def _expression(upstream: list[str]) -> st.SearchStrategy[str]:
    """`${{ }}` text: mostly reads that validate (inputs, upstream outputs), some random."""
    reads = SIMPLE + [f"activities.{u}.output" for u in upstream]
    reads += [f"activities.{u}.status == 'completed'" for u in upstream]
    known = st.sampled_from(reads)
    source = st.one_of(known, known, known, _cel())  # mostly valid: the run gets exercised
    return st.one_of(
        source.map(lambda e: "${{ " + e + " }}"),
        source.map(lambda e: "id-${{ " + e + " }}!"),
    )


@st.composite
def _workflow(draw: st.DrawFn) -> dict[str, Any]:
    """A workflow document that is usually valid (a DAG of tool, set and wait activities
    reading declared inputs and upstream outputs), sometimes broken in one random way."""
    count = draw(st.integers(1, 5))
    ids = [f"a{i}" for i in range(count)]
    activities = []
    for i, aid in enumerate(ids):
        needs = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=2)) if i else []
        upstream = needs
        expr, value = _expression(upstream), JSON
        kind = draw(st.sampled_from(["tool", "set", "set", "signal", "timer", "child", "for_each"]))
        act: dict[str, Any] = {"id": aid, "needs": needs}
        if kind == "tool":
            act["tool"] = "t"
            act["with"] = draw(
                st.dictionaries(st.sampled_from(["x", "y"]), expr | value, max_size=2)
            )
        elif kind in ("set", "for_each"):
            act["set"] = draw(
                st.dictionaries(st.sampled_from(["v", "w"]), expr | value, max_size=2)
            )
            if kind == "for_each":
                act["for_each"] = draw(st.sampled_from(["${{ inputs.xs }}", "${{ [1, 2, 3] }}"]))
                act["max_concurrency"] = draw(st.integers(1, 3))
        elif kind == "signal":
            act["wait"] = {"signal": "go"}
        elif kind == "timer":
            act["wait"] = {"timer": {"after": "1s"}}
        else:
            act["workflow"] = {"name": "child"}
        if draw(st.booleans()):
            act["when"] = draw(_expression(upstream).filter(lambda e: e.startswith("${{")))
        if draw(st.booleans()):
            act["retry"] = {"max_attempts": draw(st.integers(1, 3)), "initial_interval": "0s"}
        if kind == "tool" and draw(st.booleans()):
            act["compensate"] = {"set": {"undone": "${{ execution.id }}"}}
        activities.append(act)
    document: dict[str, Any] = {
        "apiVersion": "wovyr/v1",
        "kind": "Workflow",
        "metadata": {"name": "fuzz"},
        "inputs": {
            "n": {"type": "integer", "default": 2},
            "s": {"type": "string", "default": "s"},
            "xs": {"type": "array", "default": [1, 2]},
        },
        "activities": activities,
        "output": draw(_expression(ids)),
    }
    return draw(_broken(document)) if draw(st.integers(0, 3)) == 0 else document


def _broken(document: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`document` with one thing wrong: a cycle, a dangling need, a duplicate id, an
    unknown field, a bad version, a bad input type or default, a bad duration."""
    acts = document["activities"]

    def with_(**changes: Any) -> dict[str, Any]:
        return {**document, **changes}

    def act0(**changes: Any) -> dict[str, Any]:
        return with_(activities=[{**acts[0], **changes}, *acts[1:]])

    return st.sampled_from(
        [
            act0(needs=[acts[-1]["id"]]),
            act0(needs=["nowhere"]),
            with_(activities=[*acts, acts[0]]),
            act0(bogus=1),
            with_(apiVersion="wovyr/v2"),
            with_(inputs={"n": {"type": "date"}}),
            with_(inputs={"n": {"type": "integer", "default": "two"}}),
            act0(timeout="soon"),
            act0(retry={"max_attempts": 0}),
            act0(when="${{ inputs.nope }}"),
            act0(max_concurrency=-1),
            with_(activities=[]),
        ]
    )


def _registry() -> ActivityRegistry:
    registry = ActivityRegistry()
    registry.register("t", lambda **kwargs: {"echo": kwargs})
    return registry


@settings(FUZZ, max_examples=max(40, EXAMPLES // 3))
@given(
    _workflow(),
    GOOD_INPUTS | st.dictionaries(st.sampled_from(["n", "s", "xs", "other"]), JSON, max_size=3),
    st.booleans(),
)
def test_structured_workflows_load_and_run(
    document: dict[str, Any], inputs: dict[str, Any], as_json: bool
) -> None:
    text = json.dumps(document) if as_json else _yaml(document)
    workflow = load(text)
    if isinstance(workflow, DefinitionError):
        return
    resolved = bounded("inputs", lambda: resolve_inputs(workflow, inputs), (InputError,))
    if isinstance(resolved, InputError):
        return

    def run() -> str:
        with memory_engine(_registry()) as engine:
            record = engine.start(workflow, resolved)
            drain(engine)
            return engine.query(record.id).status

    status = bounded("run", run, (InputError,))
    assert status in ("completed", "failed", "cancelled", "waiting", "running", "compensating")


def _yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for plain data (JSON-quoted scalars keep their types)."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "\n" + "".join(
            f"{pad}{json.dumps(str(k))}: {_yaml(v, indent + 1)}\n" for k, v in value.items()
        ).rstrip("\n")
    if isinstance(value, list):
        if not value:
            return "[]"
        return "\n" + "".join(f"{pad}- {_yaml(v, indent + 1).lstrip()}\n" for v in value).rstrip(
            "\n"
        )
    return json.dumps(value)
