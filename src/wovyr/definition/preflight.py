"""A valid workflow checked against the activity handlers loaded in this process.

Validation alone cannot tell that `tool: greet` has no handler or that `with: {nmae: Ada}`
misspells its handler's `name`: that depends on the modules loaded with `--activities`.
Each kind that can tell answers in its `preflight` (see `wovyr.activities.kinds`); this
module asks every activity and compensation of a workflow, and locates what they answer at
the key in the document. A foreground `wovyr run` refuses to start on any of it (else the
activities before the bad one would run first), and `wovyr validate --activities MODULE`
reports it with the document's own problems.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import wovyr.activities.builtin  # noqa: F401  (registers what runs the built-in kinds)
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.kinds import KINDS
from wovyr.activities.policy import SideEffectPolicy
from wovyr.definition.model import Activity, CompensateSpec, Workflow
from wovyr.definition.parse import parse_document, read_source
from wovyr.definition.source import DataPath, SourceMap, format_path
from wovyr.errors import DefinitionError, Problem

__all__ = ["handler_problems", "policy_problems", "workflow_steps"]


def handler_problems(
    workflow: Workflow, tools: ActivityRegistry, *, path: str | Path | None = None
) -> list[Problem]:
    """What would fail for want of a handler, or for inputs its handler does not take, in
    document order; located at the key in the file at `path` (the workflow's source) when
    given, else by data path only (a stored definition has no lines)."""
    found: list[tuple[DataPath, str, str | None]] = []
    for where, _, spec in workflow_steps(workflow):
        check = KINDS.get(spec.kind).preflight
        if check is not None:
            found += [((*where, *p.path), p.message, p.hint) for p in check(spec.step, tools)]
    if not found:
        return []
    smap = _source_map(path) if path is not None else None
    if smap is None:
        source = f"workflow {workflow.name} v{workflow.version}"
        return [Problem(m, path=format_path(at), file=source, hint=h) for at, m, h in found]
    located = [smap.problem(m, at, key=True, hint=h) for at, m, h in found]
    return sorted(located, key=lambda p: (p.line or 0, p.column or 0))


def policy_problems(
    workflow: Workflow, policy: SideEffectPolicy
) -> list[tuple[str, str, str, str, str | None]]:
    """What `policy` refuses of the steps of `workflow` before anything runs (each kind's
    `admits`), as (activity id, kind, data path, message, the `wovyr admin tenants set`
    flags that would allow it or None) in document order."""
    found: list[tuple[str, str, str, str, str | None]] = []
    for where, act, spec in workflow_steps(workflow):
        check = KINDS.get(spec.kind).admits
        if check is not None:
            for p in check(spec.step, policy):
                path = format_path((*where, *p.path))
                found.append((act.id, spec.kind, path, p.message, p.hint))
    return found


def workflow_steps(
    workflow: Workflow,
) -> Iterator[tuple[DataPath, Activity, Activity | CompensateSpec]]:
    """Every step of `workflow` in document order: each activity, then its compensation,
    with its data path and the activity it belongs to."""
    for index, act in enumerate(workflow.activities):
        yield ("activities", index), act, act
        if act.compensate is not None:
            yield ("activities", index, "compensate"), act, act.compensate


def _source_map(path: str | Path) -> SourceMap | None:
    try:
        return parse_document(read_source(path), str(path))[1]
    except DefinitionError:  # changed since it was loaded: report by data path
        return None
