"""Execution labels: short `key: value` texts set when an execution starts, for search.

They come from the definition's `labels` (values may be `${{ ... }}` expressions over
`inputs`, rendered at start) and from the start request (`--label k=v`, the API's
`labels`), which wins on a shared key. Bounded (a few dozen short texts) because every
label is an index row; an execution without labels writes none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wovyr.errors import InputError, Problem
from wovyr.labels import KEY_RULE, MAX_LABELS, MAX_VALUE, label_problems

if TYPE_CHECKING:
    from wovyr.definition.model import Workflow

__all__ = [
    "KEY_RULE",
    "MAX_LABELS",
    "MAX_VALUE",
    "check_labels",
    "execution_labels",
    "parse_label_pairs",
]


def check_labels(labels: Mapping[str, Any], where: str = "labels") -> dict[str, str]:
    """`labels` if every key and value is acceptable (`wovyr.labels`), else
    InputError naming each problem."""
    problems = [
        Problem(message, path=where if key is None else f"{where}.{key}", hint=hint)
        for message, key, hint in label_problems(labels)
    ]
    if problems:
        raise InputError(problems)
    return {key: str(value) for key, value in labels.items()}


def execution_labels(
    workflow: Workflow, inputs: Mapping[str, Any], given: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The labels of a new execution of `workflow` on `inputs`: the definition's, rendered,
    overlaid with `given` (checked)."""
    rendered: dict[str, Any] = {}
    if workflow.labels:
        from wovyr.definition.expr import render  # (listing labels needs no expressions)

        try:
            rendered = render(workflow.labels, {"inputs": dict(inputs)}, where="labels")
        except Exception as exc:  # an expression that fails refuses the start, clearly
            raise InputError([Problem(f"a label did not render: {exc}", path="labels")]) from None
    return check_labels({**rendered, **dict(given or {})})


def parse_label_pairs(pairs: list[str] | tuple[str, ...], where: str = "label") -> dict[str, str]:
    """`key=value` texts (CLI flags, query parameters) as labels; malformed ones refused."""
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(f"expected KEY=VALUE, got {pair!r}", path=where))
            continue
        if key.strip() in out:
            problems.append(Problem(f"label {key.strip()!r} is given twice", path=where))
            continue
        out[key.strip()] = value
    if problems:
        raise InputError(problems)
    return check_labels(out, where)
