"""Helpers for the workflow-language tests: small documents and problem assertions."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from wovyr.definition import load_definition
from wovyr.errors import DefinitionError, Problem

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))

HEADER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: test}
"""


def workflow_text(body: str) -> str:
    """A document: the standard header followed by `body` (dedented)."""
    return HEADER + textwrap.dedent(body)


def problems_of(text: str | bytes, filename: str = "wf.yaml") -> list[Problem]:
    """The problems load_definition reports (fails the test when there are none)."""
    with pytest.raises(DefinitionError) as info:
        load_definition(text, filename)
    assert info.value.problems, "a DefinitionError must carry problems"
    return info.value.problems


def only_problem(text: str | bytes) -> Problem:
    found = problems_of(text)
    assert len(found) == 1, [p.format() for p in found]
    return found[0]


@pytest.fixture
def doc() -> Callable[[str], str]:
    return workflow_text
