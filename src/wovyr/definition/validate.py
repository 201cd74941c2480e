"""Checks across fields that the model alone cannot make, all reported at once.

* activity ids are unique; every `needs` names an existing activity; the graph has no cycle
  (reported as a path, `a -> b -> a`, where an arrow means "needs");
* every expression parses and reads only declared inputs, `execution` fields, `item`/`index`
  (inside activities; reserved for for_each) and `activities.X` where X is upstream of the
  reading activity (a compensation may also read its own activity; the workflow `output` may
  read any activity);
* input defaults and enum values match the declared type; retry intervals and timeouts are
  sane; a workflow does not unconditionally start itself as a child;
* the `output` of an activity with `on_failure: continue` (which may end failed while the
  workflow goes on) is read only behind a guard: the same expression, or the reading
  activity's `when`, reads its `status` or `error`.

The checks run on plain data (as parsed) so that `parse.load_definition` can run them even
when the model rejected the document; every access is therefore defensive.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from wovyr.definition.expr import (
    CONTEXT_ROOTS,
    EXECUTION_FIELDS,
    SECRET_SOURCE,
    TEMPLATE_RE,
    Refs,
    compile_expression,
    template_sources,
)
from wovyr.definition.expr_static import Token, tokenize
from wovyr.definition.inputs import json_equal, type_matches, type_name
from wovyr.definition.locate import suggest
from wovyr.definition.model import IDENT_PATTERN, Workflow
from wovyr.definition.source import DataPath, SourceMap
from wovyr.errors import ExpressionError, Problem
from wovyr.fields import format_duration, parse_duration
from wovyr.ids import ID_RULE, is_chain_run_id, is_execution_id
from wovyr.kinds.table import DECLARED as KINDS
from wovyr.labels import label_problems

__all__ = ["validate", "validate_data"]

_INPUT_TYPES = ("string", "number", "integer", "boolean", "object", "array")
_ITEM_ROOTS = frozenset({"item", "index"})
_ITERATION = frozenset({"iteration"})  # in scope inside a `repeat` activity
_MAX_INSTANT_ITERATIONS = 1000  # a settled (`set`) repeat without `every`: one decision
_NOT_RENDERED = frozenset({"id", "needs", "description"})
_SECRETS = frozenset({"secrets"})  # in scope only in the input of a kind that reads secrets
_IDENT = re.compile(IDENT_PATTERN)


def validate(
    workflow: Workflow, source_map: SourceMap | None = None, filename: str = "<input>"
) -> list[Problem]:
    """Every cross-field problem of `workflow`, located through `source_map` when given."""
    smap = source_map or SourceMap(filename)
    problems = validate_data(workflow.model_dump(by_alias=True, exclude_unset=True), smap)
    if source_map is None:  # no marks: say so rather than pointing at 1:1
        problems = [replace(p, line=None, column=None) for p in problems]
    return problems


def validate_data(data: Any, smap: SourceMap) -> list[Problem]:
    """`validate` on plain parsed data, which may not satisfy the model."""
    if not isinstance(data, dict):
        return []
    problems = _Checker(data, smap).run()
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: (p.line or 0, p.column or 0))


@dataclass(frozen=True)
class _Scope:
    """What expressions at one place may read."""

    roots: frozenset[str]
    owner: str | None = None  # the activity id, None for the workflow output
    upstream: int = 0  # a bit set of upstream activities (bits from _Checker.bit)
    compensation: bool = False
    guarded: frozenset[str] = frozenset()  # activities whose status the owner's `when` reads


class _Checker:
    def __init__(self, data: dict[str, Any], smap: SourceMap) -> None:
        self.data = data
        self.smap = smap
        self.problems: list[Problem] = []
        raw = data.get("activities")
        self.activities = [
            (i, a)
            for i, a in enumerate(raw if isinstance(raw, list) else [])
            if isinstance(a, dict)
        ]
        self.position: dict[str, int] = {}  # id -> index of its first definition
        self.bit: dict[str, int] = {}  # id -> its bit in upstream sets
        inputs = data.get("inputs")
        self.inputs: dict[str, Any] = inputs if isinstance(inputs, dict) else {}
        # activities that may end failed while the workflow goes on
        self.continuing = {
            a["id"]
            for _, a in self.activities
            if a.get("on_failure") == "continue" and isinstance(a.get("id"), str)
        }

    def add(
        self, message: str, path: DataPath, *, hint: str | None = None, key: bool = False
    ) -> None:
        self.problems.append(self.smap.problem(message, path, hint=hint, key=key))

    def run(self) -> list[Problem]:
        self._ids()
        edges = self._needs()
        upstream = self._graph(edges)
        self._inputs()
        for index, act in self.activities:
            self._activity(index, act, upstream)
        self._output()
        self._metadata_labels()
        self._code()
        self._labels()
        self._continue_as_new()
        self._concurrency()
        self._duration_positive(self.data.get("timeout"), ("timeout",))
        return self.problems

    # -- graph ---------------------------------------------------------------------------

    def _ids(self) -> None:
        for index, act in self.activities:
            ident = act.get("id")
            if not isinstance(ident, str):
                continue
            if ident in self.position:
                first = self.smap.locate(("activities", self.position[ident], "id"))[0]
                self.add(
                    f"duplicate activity id {ident!r} (first at line {first})",
                    ("activities", index, "id"),
                )
            else:
                self.position[ident] = index

    def _needs(self) -> dict[str, list[str]]:
        edges: dict[str, list[str]] = {ident: [] for ident in self.position}
        for index, act in self.activities:
            ident, needs = act.get("id"), act.get("needs")
            if not isinstance(needs, list):
                continue
            for j, need in enumerate(needs):
                path = ("activities", index, "needs", j)
                if not isinstance(need, str):
                    continue
                if need not in self.position:
                    hint = suggest(need, self.position) or "needs lists activity ids"
                    self.add(f"needs unknown activity {need!r}", path, hint=hint)
                elif need in needs[:j]:
                    self.add(f"activity {need!r} is listed twice in needs", path)
                elif isinstance(ident, str) and self.position.get(ident) == index:
                    edges[ident].append(need)
        return edges

    def _graph(self, edges: dict[str, list[str]]) -> dict[str, int]:
        """Upstream activities of each activity as bit sets (integers, so 10,000 activities
        stay cheap); reports each cycle once."""
        names = list(self.position)
        bit = self.bit = {name: 1 << n for n, name in enumerate(names)}
        above: dict[str, int] = {}
        for component in _components(names, edges):
            members = set(component)
            bits = 0
            for name in component:
                for need in edges[name]:
                    bits |= bit[need] | above.get(need, 0)
            if len(component) > 1 or component[0] in edges[component[0]]:
                bits |= sum(bit[m] for m in members)
                self._cycle(members, edges)
            for name in component:
                above[name] = bits
        return above

    def _cycle(self, members: set[str], edges: dict[str, list[str]]) -> None:
        start = min(members, key=self.position.__getitem__)
        back: dict[str, str] = {}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for need in edges[node]:
                if need == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(back[chain[-1]])
                    self._report_cycle([*reversed(chain), start])
                    return
                if need in members and need not in back:
                    back[need] = node
                    queue.append(need)

    def _report_cycle(self, cycle: list[str]) -> None:
        start, following = cycle[0], cycle[1]
        index = self.position[start]
        needs = self.activities_by_index(index).get("needs", [])
        where = ("activities", index, "needs", needs.index(following))
        self.add(
            f"dependency cycle: {' -> '.join(cycle)}",
            where,
            hint="an arrow means 'needs'; remove one of these needs",
        )

    def activities_by_index(self, index: int) -> dict[str, Any]:
        return next(act for i, act in self.activities if i == index)

    # -- inputs --------------------------------------------------------------------------

    def _inputs(self) -> None:
        for name, spec in self.inputs.items():
            path = ("inputs", name)
            if not _IDENT.match(name):
                self.add(
                    f"input name {name!r} is not an identifier",
                    path,
                    key=True,
                    hint="use letters, digits and '_' so expressions can read inputs.NAME",
                )
            if isinstance(spec, dict):
                self._input_spec(name, spec, path)

    def _input_spec(self, name: str, spec: dict[str, Any], path: DataPath) -> None:
        declared = spec.get("type", "string")
        if declared not in _INPUT_TYPES:
            return
        default, enum = spec.get("default"), spec.get("enum")
        default_ok = default is None or type_matches(default, declared)
        if not default_ok:
            self.add(
                f"default of input {name!r} must be {declared}, not {type_name(default)}",
                (*path, "default"),
            )
        if spec.get("required") is True and default is not None:
            self.add(
                f"input {name!r} is required and has a default",
                (*path, "required"),
                hint="drop 'required' or the default",
            )
        if not isinstance(enum, list):
            return
        if not enum:
            self.add(f"enum of input {name!r} is empty", (*path, "enum"))
        for j, option in enumerate(enum):
            if not type_matches(option, declared):
                self.add(
                    f"enum value of input {name!r} must be {declared}, not {type_name(option)}",
                    (*path, "enum", j),
                )
        if default is not None and default_ok and not any(json_equal(default, o) for o in enum):
            self.add(f"default of input {name!r} is not one of its enum values", (*path, "default"))

    # -- activities ----------------------------------------------------------------------

    def _activity(self, index: int, act: dict[str, Any], upstream: dict[str, int]) -> None:
        ident = act.get("id") if isinstance(act.get("id"), str) else None
        base: DataPath = ("activities", index)
        mapped = act.get("for_each") is not None
        repeat = act.get("repeat")
        roots = frozenset(CONTEXT_ROOTS) - (frozenset() if mapped else _ITEM_ROOTS)
        scope = _Scope(
            roots=roots | (_ITERATION if isinstance(repeat, dict) else frozenset()),
            owner=ident,
            upstream=upstream.get(ident, 0) if ident else 0,
            guarded=_status_reads(act.get("when")),
        )
        self._runnable(act, base)
        self._when(act.get("when"), (*base, "when"))
        self._for_each(act, base)
        self._repeat(act, base)
        self._rate_limit(act.get("rate_limit"), (*base, "rate_limit"))
        for key, value in act.items():
            if key in _NOT_RENDERED:
                continue
            inner = replace(scope, compensation=True) if key == "compensate" else scope
            if key in ("for_each", "when"):  # decided before any item exists
                inner = replace(scope, roots=roots - _ITEM_ROOTS)
            if key == "compensate":  # undoes the activity as a whole, not one iteration
                inner = replace(inner, roots=roots)
            if key == "repeat":  # `until` reads the iteration's output too
                inner = replace(scope, roots=scope.roots | {"output"})
            if key == "rate_limit":  # `units` may read the attempt's rendered input
                inner = replace(scope, roots=scope.roots | {"input"})
            if key == "compensate" and isinstance(value, dict):
                for sub, part in value.items():
                    own = replace(inner, roots=inner.roots | _secret_roots(sub))
                    for path, text in _strings(part, (*base, key, sub)):
                        self._text(text, path, own)
                continue
            inner = replace(inner, roots=inner.roots | _secret_roots(key))
            for path, text in _strings(value, (*base, key)):
                self._text(text, path, inner)
        compensate = act.get("compensate")
        if isinstance(compensate, dict):
            self._runnable(compensate, (*base, "compensate"))
        self._wait(act.get("wait"), (*base, "wait"))
        self._child(act, base)

    def _repeat(self, act: dict[str, Any], base: DataPath) -> None:
        repeat = act.get("repeat")
        if not isinstance(repeat, dict):
            return
        path = (*base, "repeat")
        if act.get("for_each") is not None:
            self.add(
                "an activity cannot both repeat and run for_each items",
                path,
                hint="repeat a child workflow that maps, or map over a repeating child",
            )
        kind = next((k for k in KINDS.kinds() if k.name in act), None)
        if kind is not None and kind.settle == "wait":
            self.add(
                f"a {kind.name} step cannot repeat",
                path,
                hint="repeat the step that checks, with `every` between iterations",
            )
        if (
            kind is not None
            and kind.settle == "value"
            and repeat.get("every") is None
            and isinstance(repeat.get("max_iterations"), int)
            and repeat["max_iterations"] > _MAX_INSTANT_ITERATIONS
        ):
            self.add(
                f"a {kind.name} step repeated without `every` runs at most "
                f"{_MAX_INSTANT_ITERATIONS} iterations",
                (*path, "max_iterations"),
                hint="add `every` between iterations",
            )
        self._one_expression(
            repeat.get("until"),
            (*path, "until"),
            "'until' must be a single '${{ ... }}' expression",
            "e.g. until: \"${{ output.state == 'done' }}\"",
        )

    def _rate_limit(self, spec: Any, path: DataPath) -> None:
        """A literal `units` above what the activity's own bucket holds (`burst`, else
        `limit`) could never be granted: each attempt takes its units on its own. Units
        from an expression, and a bucket an admin declares, are weighed when an attempt
        asks (a request above the bucket waits, saying so)."""
        if not isinstance(spec, dict):
            return
        units, limit, burst = spec.get("units", 1), spec.get("limit"), spec.get("burst")
        which, capacity = ("burst", burst) if burst is not None else ("limit", limit)
        if _number(units) and _number(limit) and _number(capacity) and units > capacity:
            self.add(
                f"rate_limit.units ({_figure(units)}) is more than the bucket holds "
                f"({which} {_figure(capacity)}): no attempt could start",
                (*path, "units"),
                hint=f"raise {which} to at least {_figure(units)}, or take fewer units per attempt",
            )

    def _runnable(self, spec: dict[str, Any], base: DataPath) -> None:
        self._duration_positive(spec.get("timeout"), (*base, "timeout"))
        retry = spec.get("retry")
        if not isinstance(retry, dict):
            return
        first = _seconds(retry.get("initial_interval", 1.0))
        limit = _seconds(retry.get("max_interval", 60.0))
        if first is not None and limit is not None and first > limit:
            self.add(
                f"retry initial_interval ({format_duration(first)}) is longer than "
                f"max_interval ({format_duration(limit)})",
                (*base, "retry", "initial_interval"),
            )

    def _duration_positive(self, value: Any, path: DataPath) -> None:
        if _seconds(value) == 0:
            self.add("a timeout must be longer than zero", path, hint="omit it for no timeout")

    def _wait(self, wait: Any, path: DataPath) -> None:
        if isinstance(wait, dict) and isinstance(wait.get("approval"), dict):
            timeout = wait["approval"].get("timeout")
            self._duration_positive(timeout, (*path, "approval", "timeout"))

    def _child(self, act: dict[str, Any], base: DataPath) -> None:
        child, meta = act.get("workflow"), self.data.get("metadata")
        if not (isinstance(child, dict) and isinstance(meta, dict)):
            return
        if child.get("name") == meta.get("name") and act.get("when") is None:
            self.add(
                "the workflow starts itself as a child, which never ends",
                (*base, "workflow", "name"),
                hint="add a 'when' condition that ends it",
            )
        if child.get("name") == meta.get("name") and self.data.get("continue_as_new"):
            self.add(
                "a workflow with continue_as_new cannot run as a child (its chain would "
                "outlive the step that waits for it)",
                (*base, "workflow", "name"),
                hint="start the chain on its own, or drop continue_as_new",
            )
        chosen = child.get("id")
        if isinstance(chosen, str) and "${{" not in chosen:  # (a rendered one: at its start)
            if not is_execution_id(chosen):
                self.add(
                    f"the child workflow id {chosen!r} is refused: {ID_RULE}",
                    (*base, "workflow", "id"),
                )
            elif is_chain_run_id(chosen):
                self.add(
                    f"the child workflow id {chosen!r} ends like a continue-as-new chain's "
                    "runs ('~c<number>'): those ids are reserved",
                    (*base, "workflow", "id"),
                    hint="choose an id that does not end in '~c' and digits",
                )

    def _for_each(self, act: dict[str, Any], base: DataPath) -> None:
        value, path = act.get("for_each"), (*base, "for_each")
        if value is None:
            if act.get("max_concurrency") is not None:
                self.add(
                    "max_concurrency only applies to a for_each activity",
                    (*base, "max_concurrency"),
                    hint="add for_each or remove it",
                )
            return
        for key in act:
            kind = KINDS.get(key) if KINDS.owner_of(key) == key else None
            if kind is not None and not kind.per_item:
                self.add(
                    f"a {kind.name} cannot run once per item",
                    path,
                    hint=f"{kind.name} before or after the for_each activity instead",
                )
        whole = TEMPLATE_RE.fullmatch(value) if isinstance(value, str) else None
        if whole is None or "${{" in whole.group(1):
            self.add(
                "'for_each' must be a single '${{ ... }}' expression yielding a list",
                path,
                hint='e.g. for_each: "${{ inputs.orders }}"',
            )

    def _when(self, when: Any, path: DataPath) -> None:
        self._one_expression(
            when,
            path,
            "'when' must be true, false or a single '${{ ... }}' expression",
            'e.g. when: "${{ inputs.amount > 1000 }}"',
        )

    def _one_expression(self, value: Any, path: DataPath, message: str, hint: str) -> None:
        """A text that must be exactly one `${{ }}` (a condition): else `message`."""
        if not isinstance(value, str):
            return
        whole = TEMPLATE_RE.fullmatch(value)
        if whole is None or "${{" in whole.group(1):
            self.add(message, path, hint=hint)

    # -- expressions ---------------------------------------------------------------------

    def _output(self) -> None:
        scope = _Scope(roots=frozenset({"inputs", "activities", "execution"}))
        for path, text in _strings(self.data.get("output"), ("output",)):
            self._text(text, path, scope)

    def _metadata_labels(self) -> None:
        """`metadata.labels` is not part of the language: one place labels executions (the
        top-level `labels:`), and a key that did nothing must not look as if it did. An
        empty mapping (the canonical form writes one) says nothing."""
        metadata = self.data.get("metadata")
        labels = metadata.get("labels") if isinstance(metadata, dict) else None
        if not labels:
            return
        first = next(iter(labels), "KEY") if isinstance(labels, dict) else "KEY"
        self.add(
            "`metadata.labels` labels nothing: the labels of each execution are the "
            "top-level `labels:`",
            ("metadata", "labels"),
            key=True,
            hint=f"move them there: `labels: {{{first}: ...}}`; values may be "
            "`${{ inputs.NAME }}`",
        )

    def _code(self) -> None:
        """`code` is what `@wovyr.workflow` stores for a Python function, never written in
        a document: a key naming a function must not look as if it could load one."""
        if "code" in self.data:
            self.add(
                "`code` is not part of the language: a workflow written in Python is "
                "registered by its `@wovyr.workflow` function",
                ("code",),
                key=True,
                hint="see docs/python-workflows.md",
            )

    def _labels(self) -> None:
        """Execution labels are rendered at start: they read `inputs` only. They keep to the
        label rules (count, keys, literal values' length; a rendered value at the start)."""
        scope = _Scope(roots=frozenset({"inputs"}))
        for path, text in _strings(self.data.get("labels"), ("labels",)):
            self._text(text, path, scope)
        labels = self.data.get("labels")
        if isinstance(labels, dict):
            for message, key, hint in label_problems(labels, rendered=False):
                where: DataPath = ("labels",) if key is None else ("labels", key)
                self.add(message, where, hint=hint, key=key is not None and hint is not None)

    def _continue_as_new(self) -> None:
        """`when` is one condition; `input` names declared inputs only, literal values of
        their types; expressions read what the workflow `output` reads, and `output`."""
        spec = self.data.get("continue_as_new")
        if not isinstance(spec, dict):
            return
        base: DataPath = ("continue_as_new",)
        self._one_expression(
            spec.get("when"),
            (*base, "when"),
            "'continue_as_new.when' must be a single '${{ ... }}' expression",
            'e.g. when: "${{ output.next_month <= inputs.last_month }}"',
        )
        given = spec.get("input")
        if isinstance(given, dict):
            for name, value in given.items():
                path = (*base, "input", name)
                declared = self.inputs.get(name)
                if declared is None:
                    known = ", ".join(sorted(map(str, self.inputs))) or "none"
                    hint = suggest(str(name), map(str, self.inputs))
                    self.add(
                        f"continue_as_new.input names unknown input {name!r}",
                        path,
                        key=True,
                        hint=hint or f"declared inputs: {known}",
                    )
                    continue
                kind = declared.get("type") if isinstance(declared, dict) else None
                literal = not (isinstance(value, str) and "${{" in value)
                typed = literal and isinstance(kind, str) and value is not None
                if typed and not type_matches(value, str(kind)):
                    self.add(
                        f"continue_as_new.input {name!r} must be {kind}, not {type_name(value)}",
                        path,
                    )
        scope = _Scope(roots=frozenset({"inputs", "activities", "execution", "output"}))
        for key in ("when", "input"):
            for path, text in _strings(spec.get(key), (*base, key)):
                self._text(text, path, scope)

    def _concurrency(self) -> None:
        """The key is read at the start: its expressions may use `inputs` only."""
        spec = self.data.get("concurrency")
        if not isinstance(spec, dict):
            return
        scope = _Scope(roots=frozenset({"inputs"}))
        for path, text in _strings(spec.get("key"), ("concurrency", "key")):
            self._text(text, path, scope)

    def _text(self, text: str, path: DataPath, scope: _Scope) -> None:
        try:
            sources = template_sources(text)
        except ExpressionError as err:
            self.add(err.message, path, hint=err.hint)
            return
        for source in sources:
            try:
                refs = compile_expression(source).refs
            except ExpressionError as err:
                self.add(err.message, path, hint=err.hint)
                continue
            if "secrets" in refs.roots:
                self._secret(source, refs, path, scope)
            self._refs(refs, path, scope)
            if self.continuing & refs.activities:
                self._guarded(source, path, scope)

    def _guarded(self, source: str, path: DataPath, scope: _Scope) -> None:
        """An `output` read of an activity that may have failed needs a status check."""
        fields = _activity_fields(source)
        for name in sorted(self.continuing):
            if (name, "output") not in fields or name == scope.owner:  # own: its compensation
                continue
            if name in scope.guarded or {(name, "status"), (name, "error")} & fields:
                continue
            self.add(
                f"activities.{name}.output is read without checking that {name!r} completed: "
                "it may fail and let the workflow go on (on_failure: continue)",
                path,
                hint=f"guard it: when: \"${{{{ activities.{name}.status == 'completed' }}}}\", "
                f"or test activities.{name}.status in the same expression",
            )

    def _secret(self, source: str, refs: Refs, path: DataPath, scope: _Scope) -> None:
        """`secrets` is read only as `${{ secrets.NAME }}`, only where it is not stored."""
        if "secrets" not in scope.roots:
            self.add(
                "a secret can be read only in the input of an activity run by a worker "
                "(tool `with`, http, shell): here its value would be stored or shown",
                path,
                hint="pass the secret to the activity that needs it, never into an output, "
                "`set`, a condition, a child workflow's inputs or the workflow's output",
            )
        elif SECRET_SOURCE.match(source) is None:
            self.add(
                "a secret is read as '${{ secrets.NAME }}' alone in its expression",
                path,
                hint="combine it with text around the expression: 'Bearer ${{ secrets.TOKEN }}'",
            )

    def _refs(self, refs: Refs, path: DataPath, scope: _Scope) -> None:
        for root in sorted(refs.roots - scope.roots - _SECRETS):
            hint = suggest(root, scope.roots) or f"expressions here can read {_list(scope.roots)}"
            if root in ("item", "index"):
                hint = f"{root!r} exists only inside an activity"
            self.add(f"unknown name {root!r} in an expression", path, hint=hint)
        for name in sorted(refs.inputs - set(self.inputs)):
            hint = suggest(name, self.inputs) or "declare it under 'inputs'"
            self.add(f"unknown input {name!r} in an expression", path, hint=hint)
        for name in sorted(refs.execution - set(EXECUTION_FIELDS)):
            hint = suggest(name, EXECUTION_FIELDS) or f"execution has {_list(EXECUTION_FIELDS)}"
            self.add(f"unknown execution field {name!r}", path, hint=hint)
        for name in sorted(refs.activities):
            self._activity_ref(name, path, scope)
        if "activities" in refs.dynamic and scope.owner is not None:
            self.add(
                "activities must be read by name (activities.ID) inside an activity",
                path,
                hint="the name is how its dependencies are checked",
            )

    def _activity_ref(self, name: str, path: DataPath, scope: _Scope) -> None:
        owner = scope.owner
        if name not in self.position:
            hint = suggest(name, self.position)
            self.add(f"unknown activity {name!r} in an expression", path, hint=hint)
        elif owner is None or scope.upstream & self.bit[name]:
            return
        elif name == owner and not scope.compensation:
            self.add(
                f"activity {owner!r} cannot read its own result",
                path,
                hint="only its 'compensate' step can",
            )
        elif name != owner:
            self.add(
                f"activity {owner!r} reads activities.{name} but {name!r} is not upstream of it",
                path,
                hint=f"add {name!r} to the needs of {owner!r}",
            )


def _components(names: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each after those it needs."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in names:
        if root in order:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                order[node] = low[node] = len(order)
                stack.append(node)
                on_stack.add(node)
            children = edges[node]
            while i < len(children) and children[i] in order:
                if children[i] in on_stack:
                    low[node] = min(low[node], order[children[i]])
                i += 1
            if i < len(children):
                work += [(node, i + 1), (children[i], 0)]
                continue
            if low[node] == order[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def _secret_roots(key: str) -> frozenset[str]:
    """`secrets` where `key` belongs to a kind whose rendered input may read secrets."""
    owner = KINDS.owner_of(key)
    return _SECRETS if owner is not None and KINDS.get(owner).secrets else frozenset()


def _strings(value: Any, base: DataPath) -> Iterator[tuple[DataPath, str]]:
    """Every string (with its path) inside mapping values and lists of `value`."""
    stack: list[tuple[DataPath, Any]] = [(base, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            yield path, item
        elif isinstance(item, dict):
            stack.extend(((*path, k), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(item))))


def _seconds(value: Any) -> float | None:
    try:
        return parse_duration(value) if value is not None else None
    except ValueError:
        return None


def _list(names: Any) -> str:
    return ", ".join(sorted(names))


def _status_reads(when: Any) -> frozenset[str]:
    """The activities whose `status` or `error` a `when` reads."""
    if not isinstance(when, str):
        return frozenset()
    try:
        sources = template_sources(when)
    except ExpressionError:
        return frozenset()
    found = set()
    for source in sources:
        found |= {name for name, f in _activity_fields(source) if f in ("status", "error")}
    return frozenset(found)


def _activity_fields(source: str) -> set[tuple[str, str]]:
    """(activity, field) for each `activities.X.field` (or `activities["X"]["field"]`) read."""
    tokens = tokenize(source)
    found: set[tuple[str, str]] = set()
    for i, tok in enumerate(tokens):
        if tok.text != "activities" or (i and tokens[i - 1].text == "."):
            continue
        name, j = _selected(tokens, i + 1)
        if name is None:
            continue
        field, _ = _selected(tokens, j)
        if field is not None:
            found.add((name, field))
    return found


def _selected(tokens: list[Token], i: int) -> tuple[str | None, int]:
    """The name selected at tokens[i] (`.name` or `["name"]`) and the index after it."""
    rest = tokens[i : i + 3]
    if len(rest) >= 2 and rest[0].text == "." and rest[1].kind == "ident":
        return rest[1].text, i + 2
    if len(rest) == 3 and rest[0].text == "[" and rest[1].kind == "string" and rest[2].text == "]":
        text = rest[1].text
        if text[:1] in "'\"" and "\\" not in text and len(text) >= 2:
            return text[1:-1], i + 3
    return None, i


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _figure(value: float) -> str:
    """A number as written: 5 for 5.0."""
    return f"{value:g}"
