"""Expressions: the one interface to the expression engine (CEL, via Google's `cel-expr-python`).

A definition embeds expressions as `${{ ... }}`. Everything else in Wovyr calls only this
module, so the engine behind it could change without touching callers.

Why CEL: it is not Turing-complete (no loops, recursion or assignment; comprehension macros
iterate only over finite lists and maps), it has no attribute access to host objects (a field
selection works only on maps, so `''.__class__` is an error, and we reject `__` names
statically anyway), no functions for files, clock, imports or environment, and the names an
expression reads are known before it runs, so references are checked before anything runs.

Why this runtime: `cel-expr-python` wraps cel-cpp, Google's reference implementation; it
passes 923 of the 926 applicable tests of the CEL conformance suite (the Rust-based
`common-expression-language` used before passed 855 of 920) and is as fast or faster
(bench/bench_expr.py). Expressions are type-checked at compile time with every name declared
`dyn`, so `-false` or `'a' * 3` are refused before a workflow runs.

Rendering rules (see `render`):

* a string that is exactly one `${{ expr }}` (nothing around it, not even spaces) yields the
  expression's value with its JSON type: number, boolean, null, list, object or string;
* an expression inside other text is converted to text and spliced in: strings as they are,
  everything else as compact JSON with sorted keys (`true`, `false`, `null`, `1.5`, `[1,2]`,
  `{"a":1}`);
* an expression ends at the first `}}`; write `} }` for a nested map literal. There is no
  escape for a literal `${{`, and values coming *from* the context are never rendered again,
  so data cannot inject expressions.

Results are plain JSON values, as in the proto3 JSON mapping CEL itself uses: timestamps
become RFC 3339 strings in UTC (`2026-01-01T08:00:00Z`, with 3 or 6 fractional digits when
needed), durations exact seconds (`"1209600s"`, `"123456.789s"`), bytes base64 strings and
type values their CEL names (`"int"`). Timestamps and durations carry microseconds once out
of an expression (Python's own precision). NaN and infinities are errors.

Bounds (`ExpressionError` when exceeded): source length, comprehension nesting, the depth of
the data an expression reads, an estimate of the work comprehensions will do (the CEL runtime
holds the GIL and cannot be interrupted, so the bound is enforced *before* running: `map` and
`filter` cost grows with the square of the list size in this implementation, and so does an
operation linear in a collection inside a comprehension, such as `x in xs`) and the size of
the result once encoded as JSON.
"""

from __future__ import annotations

import base64
import difflib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from wovyr.definition.expr_static import analyse
from wovyr.errors import ExpressionError

__all__ = [  # noqa: RUF022 - plain sorted(), as the tests check
    "CONTEXT_ROOTS",
    "CompiledExpression",
    "Costs",
    "EXECUTION_FIELDS",
    "FUNCTIONS",
    "MAX_COPY_BYTES",
    "MAX_COST",
    "MAX_DATA_DEPTH",
    "MAX_ITEMS_WORK",
    "MAX_MACRO_DEPTH",
    "MAX_NESTING",
    "MAX_RESULT_BYTES",
    "MAX_SOURCE_CHARS",
    "PASS_WORK",
    "Refs",
    "SECRET_REF",
    "SECRET_SOURCE",
    "TEMPLATE_RE",
    "compile_expression",
    "duration_text",
    "evaluate",
    "evaluate_condition",
    "items_work",
    "iter_expressions",
    "references",
    "render",
    "secret_names",
    "substitute_secrets",
    "template_sources",
    "timestamp_text",
    "to_json_value",
]

TEMPLATE_RE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
#: The source of a secret reference, `${{ secrets.NAME }}`: the only form a secret is read
#: in. Rendering keeps it as written (normalised); only the worker's in-memory copy of an
#: attempt's input gets the value (`substitute_secrets`), so what is stored keeps the name.
SECRET_SOURCE = re.compile(r"^\s*secrets\.([A-Za-z_][A-Za-z0-9_]{0,127})\s*$")
#: A (normalised) secret reference inside rendered text.
SECRET_REF = re.compile(r"\$\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]{0,127})\s*\}\}")
MAX_SOURCE_CHARS = 4096
MAX_MACRO_DEPTH = 2
MAX_RESULT_BYTES = 1_048_576
MAX_DATA_DEPTH = 256  # the CEL binding converts data recursively and crashes near 10,000 levels
#: The CEL runtime's parser and planner refuse expressions nested deeper (a fixed limit).
MAX_NESTING = 32
MAX_COST = 2_000_000  # roughly 0.1 s of comprehension work on this runtime
#: The bytes an expression may copy: `+` chains and `map` bodies that yield data from
#: outside their element build new values, whose conversion back to Python is the slow part
#: (`xs.map(x, inputs.s)` over 1,400 items and a 900 KB string built 1.2 GB in 16 s).
MAX_COPY_BYTES = 64 * 1_048_576
#: What converting one value (number, string, list, map) costs, in bytes of string copied:
#: about 1 us against 2 ns per byte on this runtime, so the bound is about 0.1 s either way.
_VALUE_BYTES = 500
#: What one comprehension step costs in those bytes (MAX_COST steps take about as long as
#: MAX_COPY_BYTES bytes), and one evaluation besides its data (selecting, the call, the
#: conversion of its result: about 10 us).
_STEP_BYTES = MAX_COPY_BYTES // MAX_COST
_EVALUATION_BYTES = 5_000
#: The work one call of the decider may do before it stops and lets other executions' steps
#: run (`Costs.limit`): an eighth of the most one expression may do (about 12 ms), so that
#: one execution's call holds a worker for little more than the one expression it ends on.
PASS_WORK = MAX_COPY_BYTES // 8
#: The most work the items of one `for_each` may ask of their expressions together
#: (`items_work`, estimated before any item starts): each expression that reads `item` or
#: `index` converts what it reads once per item, so reading a large value from every item
#: costs the number of items times its size (about 1.6 s of the worker's time at most).
MAX_ITEMS_WORK = 16 * MAX_COPY_BYTES
#: The names the engine puts in an evaluation context.
CONTEXT_ROOTS = ("inputs", "activities", "execution", "item", "index")
#: Functions of the CEL runtime we use (standard definitions it implements). Anything else,
#: such as now() or an extension library, fails at compile time rather than on the first run.
FUNCTIONS = frozenset(
    {
        *("size", "contains", "startsWith", "endsWith", "matches"),
        *("bool", "string", "int", "uint", "double", "bytes", "timestamp", "duration", "dyn"),
        "type",
        *("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek"),
        *("getHours", "getMinutes", "getSeconds", "getMilliseconds"),
    }
)
#: The fields of `execution` in an evaluation context.
EXECUTION_FIELDS = ("id", "workflow", "version", "started_at")


@dataclass(frozen=True)
class Refs:
    """What an expression reads: free top-level names, the activities it selects
    (`activities.x` or `activities["x"]`), the inputs and execution fields it selects, and the
    roots it uses whole or with a computed key (`dynamic`), which cannot be checked statically."""

    roots: frozenset[str]
    activities: frozenset[str]
    inputs: frozenset[str] = frozenset()
    execution: frozenset[str] = frozenset()
    dynamic: frozenset[str] = frozenset()


@dataclass(frozen=True, eq=False)
class CompiledExpression:
    """A compiled, statically checked expression; evaluate it as often as needed."""

    source: str
    refs: Refs
    macro_depth: int
    macro_count: int
    accumulates: bool
    linear_depth: int  # see expr_static.Analysis.linear_depth
    width: int  # how many collections `+` may join into one
    literal_items: int  # an upper bound on the length of a list literal in the source
    map_reads: frozenset[tuple[str, str | None]]  # see expr_static.Analysis.map_reads
    map_read_depth: int
    program: Any
    roots: tuple[str, ...] = ()  # refs.roots, sorted

    def evaluate(
        self, context: Mapping[str, Any], *, where: str = "", costs: Costs | None = None
    ) -> Any:
        """The JSON value of this expression in `context`; ExpressionError on any failure.
        `costs`: shared by the evaluations of one decision (see `Costs`); else its own."""
        costs = Costs() if costs is None else costs
        read = tuple(context.get(name) for name in self.roots)
        known = costs.result(self, read)
        if known is not None:
            return known[0]
        data = self._select(context)
        size = costs.footprint(context, data)
        if size.weight > MAX_COPY_BYTES:  # refused whatever else it does
            self._check_copies(context, data, size, costs, where)
        if size.depth > MAX_DATA_DEPTH:
            raise ExpressionError(
                f"the data this expression reads is nested more than {MAX_DATA_DEPTH} deep",
                where=where,
            )
        steps = self._check_cost(size.largest, where)
        copies = self._check_copies(context, data, size, costs, where)
        costs.spend(_EVALUATION_BYTES + copies + steps * _STEP_BYTES)
        try:
            raw = self.program.eval(data=data)
            failed = raw.type() == _cel().Type.ERROR
            result = raw.value() if failed else raw.plain_value()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # the binding raises for data it cannot convert
            failed, result = True, str(exc) or type(exc).__name__
        if failed:
            message, hint = _runtime_message(str(result))
            raise ExpressionError(message, where=where, hint=hint) from None
        value = to_json_value(result, where=where)
        costs.spend(_check_size(value, where))
        costs.remember(self, read, value)
        return value

    def _select(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """Only the roots this expression reads: less to convert, measure and expose."""
        data = {name: context[name] for name in self.refs.roots if name in context}
        acts = data.get("activities")
        if isinstance(acts, Mapping) and "activities" not in self.refs.dynamic:
            data["activities"] = {a: acts[a] for a in self.refs.activities if a in acts}
        elif isinstance(acts, Mapping) and not isinstance(acts, dict):
            data["activities"] = dict(acts)  # a lazy view, read whole: plain data for CEL
        return data

    def _check_cost(self, largest: int, where: str) -> int:
        """The comprehension steps this expression will take at most (refused over
        MAX_COST)."""
        if not self.macro_count:
            return 0
        size = max(largest, self.literal_items, 1) * self.width
        power = max(self.macro_depth + int(self.accumulates), self.linear_depth)
        cost: int = self.macro_count * size**power
        if cost > MAX_COST:
            raise ExpressionError(
                f"expression would do too much work (about {cost:.1e} steps iterating "
                f"collections of up to {size} items at comprehension depth {self.macro_depth})",
                where=where,
                hint="iterate a smaller list, avoid nesting, or compute this in an activity",
            )
        return cost

    def _check_copies(
        self,
        context: Mapping[str, Any],
        data: Mapping[str, Any],
        size: _Footprint,
        costs: Costs,
        where: str,
    ) -> int:
        """Refuse an expression that would convert or build more than MAX_COPY_BYTES: the
        data it reads is converted for the runtime on every evaluation, a chain of `+`
        copies its operands once per step (a left fold: width**2 / 2 times the data at
        most), and a `map` body copies what it reads from outside its element once per item
        (at each level of nesting). A value costs like _VALUE_BYTES bytes of string.
        Return the estimate."""
        width = self.width
        copies = max(1, width * (width - 1) // 2) * size.weight
        if self.map_read_depth and copies <= MAX_COPY_BYTES:
            body = sum(
                costs.part(context, data, root, member).weight for root, member in self.map_reads
            )
            items = max(size.largest, self.literal_items, 1) ** self.map_read_depth
            copies += items * width * body
        if copies > MAX_COPY_BYTES:
            raise ExpressionError(
                f"expression would convert or build too much data (an estimated "
                f"{copies / 1_048_576:.0f} MiB or more, limit {MAX_COPY_BYTES // 1_048_576} MiB, "
                f"a value counting as {_VALUE_BYTES} bytes)",
                where=where,
                hint="read less data, concatenate less, map over what the element holds "
                "rather than copying other data into every item, or use an activity",
            )
        return copies


@dataclass(frozen=True)
class _Footprint:
    """What a value costs to convert: its weight (`_weight` with _VALUE_BYTES per value,
    counted up to just past MAX_COPY_BYTES), the length of its largest list or map, and how
    deeply its containers nest (the value itself 0 when it is one, -1 for a scalar; counted
    up to just past MAX_DATA_DEPTH)."""

    weight: int
    largest: int
    depth: int


class Costs:
    """What evaluating expressions costs, shared by the evaluations of one decision.

    The footprint of each value of a context that an expression reads (`inputs`, one
    activity's record, `item`) is measured once and reused by every later evaluation over a
    context holding the same object (the items of a `for_each`: their contexts share every
    root but `item` and `index`); and an expression's last value is reused while the
    values it reads are the same objects (an item's expression that reads no `item` or
    `index` is evaluated once for all the items). Each is kept with the objects it was
    made from and used only for those very objects, so contexts that differ never share
    one; data is never changed in place (states are immutable, and so are values once
    rendered), and expressions have no clock or randomness, so what is kept stays true.

    `spent` adds up the work done (in the bytes of `_check_copies`: data converted and
    built, a comprehension step as _STEP_BYTES, the result's JSON, and _EVALUATION_BYTES
    per evaluation); `limit`, when given, is what the caller means to allow (`exhausted`):
    the decider stops a call there and lets other executions' steps run (PASS_WORK).
    `evaluations` and `walked` (the values measured) count for tests and benchmarks."""

    __slots__ = ("_known", "_results", "evaluations", "limit", "spent", "walked")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.spent = 0
        self.evaluations = 0
        self.walked = 0
        self._known: dict[tuple[str, str | None], tuple[Any, Any, _Footprint]] = {}
        self._results: dict[CompiledExpression, tuple[tuple[Any, ...], Any]] = {}

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def spend(self, work: int) -> None:
        self.spent += work

    def result(self, expression: CompiledExpression, read: tuple[Any, ...]) -> tuple[Any] | None:
        """(the value) `expression` gave last over the very objects `read`, else None."""
        known = self._results.get(expression)
        if known is None or len(known[0]) != len(read):
            return None
        if all(a is b for a, b in zip(known[0], read, strict=True)):
            return (known[1],)
        return None

    def remember(self, expression: CompiledExpression, read: tuple[Any, ...], value: Any) -> None:
        self._results[expression] = (read, value)

    def footprint(self, context: Mapping[str, Any], data: Mapping[str, Any]) -> _Footprint:
        """The footprint of `data` (an expression's selection of `context`)."""
        self.evaluations += 1
        return _mapping({root: self.part(context, data, root, None) for root in data})

    def part(
        self, context: Mapping[str, Any], data: Mapping[str, Any], root: str, member: str | None
    ) -> _Footprint:
        """The footprint of `data[root][member]` (of `data[root]` when `member` is None or
        not one of its keys). The activities are measured one by one: an expression's
        selection of them is a map made for it, of records made when read."""
        value = data.get(root)
        if isinstance(value, Mapping) and member is not None and member in value:
            return self._known_or_measured(context, root, member, value[member])
        if root == "activities" and isinstance(value, Mapping):
            each = {a: self._known_or_measured(context, root, a, v) for a, v in value.items()}
            return _mapping(each)
        return self._known_or_measured(context, root, None, value)

    def _known_or_measured(
        self, context: Mapping[str, Any], root: str, member: str | None, value: Any
    ) -> _Footprint:
        """`value` (`context[root]`, or what `member` selects of it) measured once: a
        member is known by its root's object (an activity's record is made anew each time
        it is read, from the same view), a root by its own object."""
        owner = context.get(root)
        key = (root, member)
        known = self._known.get(key)
        if known is not None and known[0] is owner and (member is not None or known[1] is value):
            return known[2]
        measured = self._measure(value)
        self._known[key] = (owner, value, measured)
        return measured

    def _measure(self, value: Any) -> _Footprint:
        weight = largest = 0
        deepest = -1
        extra = _VALUE_BYTES - 1
        stack: list[tuple[Any, int]] = [(value, 0)]
        while stack and weight <= MAX_COPY_BYTES and deepest <= MAX_DATA_DEPTH:
            item, depth = stack.pop()
            self.walked += 1
            weight += extra
            if isinstance(item, str):
                weight += len(item) + 2
            elif isinstance(item, Mapping):
                weight += 2 + 2 * len(item)  # its keys count as text, not as values
                weight += sum(len(k) + 2 if isinstance(k, str) else 1 for k in item)
                largest, deepest = max(largest, len(item)), max(deepest, depth)
                stack.extend((child, depth + 1) for child in item.values())
            elif isinstance(item, list | tuple):
                weight += 2 + len(item)
                largest, deepest = max(largest, len(item)), max(deepest, depth)
                stack.extend((child, depth + 1) for child in item)
            else:
                weight += 1
        return _Footprint(weight, largest, deepest)


def _mapping(parts: Mapping[str, _Footprint]) -> _Footprint:
    """The footprint of a map whose values have the footprints `parts`."""
    weight = _VALUE_BYTES + 1 + sum(len(k) + 4 + p.weight for k, p in parts.items())
    largest = max((p.largest for p in parts.values()), default=0)
    depth = 1 + max((p.depth for p in parts.values()), default=-1)
    return _Footprint(weight, max(largest, len(parts)), depth)


class _Invalid(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def compile_expression(src: str, where: str = "") -> CompiledExpression:
    """Compile and statically check CEL source (without `${{ }}`); cached per source."""
    try:
        return _compile(_unwrap(src))
    except _Invalid as err:
        raise ExpressionError(err.message, where=where, hint=err.hint) from None


@lru_cache(maxsize=4096)
def _compile(src: str) -> CompiledExpression:
    src = src.strip()  # so that error columns count from the expression's first character
    if len(src) > MAX_SOURCE_CHARS:
        raise _Invalid(f"expression is {len(src)} characters long (limit {MAX_SOURCE_CHARS})")
    if not src:
        raise _Invalid("empty expression", "write something between '${{' and '}}'")
    _cel_compile(src, frozenset(), check=False)  # syntax first: the analysis needs valid source
    info = analyse(src)
    _check_static(info.dunders, info.macro_depth, info.bound)
    _check_functions(info.functions)
    free = frozenset(info.free)
    program = _cel_compile(src, free | frozenset(CONTEXT_ROOTS), check=True)
    refs = Refs(
        roots=free,
        activities=frozenset(info.members.get("activities", ())),
        inputs=frozenset(info.members.get("inputs", ())),
        execution=frozenset(info.members.get("execution", ())),
        dynamic=frozenset(info.dynamic & free),
    )
    return CompiledExpression(
        source=src,
        refs=refs,
        macro_depth=info.macro_depth,
        macro_count=info.macro_count,
        accumulates=info.accumulates,
        linear_depth=info.linear_depth,
        width=info.concatenations + 1,
        literal_items=src.count(",") + 1,
        map_reads=frozenset(info.map_reads),
        map_read_depth=info.map_read_depth,
        program=program,
        roots=tuple(sorted(free)),
    )


@lru_cache(maxsize=1)
def _cel() -> Any:
    """The CEL runtime, loaded when an expression is first compiled or evaluated (reading an
    execution or a stored definition does not need it)."""
    from cel_expr_python import cel

    return cel


@lru_cache(maxsize=64)
def _environment(names: frozenset[str]) -> Any:
    """A CEL environment declaring `names` as `dyn` (JSON data has no static types)."""
    cel = _cel()
    return cel.NewEnv(variables=dict.fromkeys(sorted(names), cel.Type.DYN))


def _cel_compile(src: str, names: frozenset[str], *, check: bool) -> Any:
    try:
        return _environment(names).compile(src, disable_check=not check)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        raise _Invalid(_syntax_message(src, exc)) from None


def _check_static(dunders: set[str], macro_depth: int, bound: set[str]) -> None:
    if dunders:
        raise _Invalid(
            f"names starting with '__' are not allowed ({', '.join(sorted(dunders))})",
            "expressions read workflow data only; there are no Python attributes to reach",
        )
    if macro_depth > MAX_MACRO_DEPTH:
        raise _Invalid(
            f"comprehensions are nested {macro_depth} deep (limit {MAX_MACRO_DEPTH})",
            "split the work into several activities",
        )
    shadowing = bound & set(CONTEXT_ROOTS)
    if shadowing:
        raise _Invalid(
            f"comprehension variable {sorted(shadowing)[0]!r} hides a context name",
            "pick another variable name, e.g. 'x'",
        )


def _check_functions(used: set[str]) -> None:
    for name in sorted(used):
        if name not in FUNCTIONS:
            close = difflib.get_close_matches(name, sorted(FUNCTIONS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            raise _Invalid(f"unknown function {name!r}", hint or "see the expression docs")


def _syntax_message(src: str, exc: BaseException) -> str:
    """'... at column N of the expression' from the binding's multi-line parse error."""
    text = _STATUS_RE.sub("", str(exc))
    if "recursion" in text:  # the parser's and planner's fixed limit
        raise _Invalid(
            f"expression is nested more than {MAX_NESTING} levels deep",
            "each bracket level counts, and so does each operand of a chain of '+':"
            " split it across several fields or a 'set' activity",
        )
    match = re.search(r"<input>:(\d+):(\d+): (.*)", text)
    if not match:
        return f"invalid expression: {text.splitlines()[0] if text else type(exc).__name__}"
    line, column, detail = match.groups()
    detail = detail.split(" expecting ", 1)[0].replace(" (in container '')", "")
    detail = re.sub(r"'(-_|!_|_(\S+?)_)'", lambda m: repr(_operator(m.group(1))), detail)
    where = f"column {column}" if line == "1" else f"line {line}, column {column}"
    return f"invalid expression {src[:80]!r}: {detail[:200]} at {where} of the expression"


_STATUS_RE = re.compile(r"^(?:[A-Z_]+: )+")
#: Runtime messages of the CEL runtime, reworded: (pattern, message, hint).
_MESSAGES: list[tuple[re.Pattern[str], str, str | None]] = [
    (re.compile(r'Key not found in map : "(.*)"$', re.S), "no such key: {0!r}", None),
    (
        re.compile(r'No value with name "(.*)" found in Activation'),
        "Undefined variable {0!r}",
        "the names in scope are " + ", ".join(CONTEXT_ROOTS),
    ),
    (
        re.compile(r"No matching overloads found : (.*)$", re.S),
        "Unsupported operation: {0} is not defined",
        "CEL does not convert between types: convert explicitly, e.g. double(x) or string(x)",
    ),
    (
        re.compile(r"Index error: index=(-?\d+) size=(\d+)"),
        "index out of bounds: {0} (size {1})",
        None,
    ),
    (re.compile(r"^divide by zero$"), "division by zero", None),
    (re.compile(r"^modulus by zero$"), "modulo by zero", None),
    (
        re.compile(r"Applying SELECT to non-message type"),
        "selecting a field of a value that is not a map",
        "check the value with has() or type() first",
    ),
    (
        re.compile(r"Non-CEL value type for '(.*)': (\w+)"),
        "the data in {0!r} holds a Python {1}, which is not a JSON value",
        None,
    ),
    (
        re.compile(r"basic_string: construction from null"),
        "the data holds a string that is not valid Unicode",
        None,
    ),
]


def _runtime_message(text: str) -> tuple[str, str | None]:
    text = _runtime_text(_STATUS_RE.sub("", text.strip())) or "evaluation failed"
    for pattern, message, hint in _MESSAGES:
        match = pattern.search(text)
        if match:
            return message.format(*match.groups()), hint
    return text, None


def _runtime_text(text: str) -> str:
    """Operators and types as written in CEL source: `_+_(string, int64)` -> `+(string, int)`."""
    text = re.sub(r"(?<![\w'])(-_|!_|_\[_\]|_[^\s_(]+_|@in)(?=\()", lambda m: _operator(m[1]), text)
    return re.sub(r"\b(u?)int64\b", r"\1int", text)


def _operator(name: str) -> str:
    """'+' for '_+_', 'unary -' for '-_', '[]' for '_[_]'; function names unchanged."""
    if name in ("-_", "!_"):
        return f"unary {name[0]}"
    if name == "_[_]":
        return "[]"
    if name == "@in":
        return "in"
    if name.startswith("_") and name.endswith("_") and len(name) > 2:
        return name[1:-1]
    return name


def references(src: str) -> Refs:
    """The names `src` reads (CEL source, or a whole `${{ }}` template)."""
    return compile_expression(src).refs


def evaluate(
    src: str, context: Mapping[str, Any], *, where: str = "", costs: Costs | None = None
) -> Any:
    """Evaluate CEL source (or one whole `${{ }}` template) to a JSON value."""
    return compile_expression(src, where).evaluate(context, where=where, costs=costs)


def evaluate_condition(
    when: str | bool | None,
    context: Mapping[str, Any],
    *,
    where: str = "",
    costs: Costs | None = None,
) -> bool:
    """A `when:` value: None means true; a string must be one `${{ }}` giving a boolean."""
    if when is None or isinstance(when, bool):
        return True if when is None else when
    sources = template_sources(when, where=where)
    if len(sources) != 1 or TEMPLATE_RE.fullmatch(when) is None:
        raise ExpressionError(
            "a condition must be true, false or a single '${{ ... }}' expression", where=where
        )
    value = evaluate(sources[0], context, where=where, costs=costs)
    if not isinstance(value, bool):
        raise ExpressionError(
            f"a condition must give true or false, not {_json_type(value)}",
            where=where,
            hint="compare explicitly, e.g. '${{ size(inputs.items) > 0 }}'",
        )
    return value


def render(
    value: Any, context: Mapping[str, Any], *, where: str = "", costs: Costs | None = None
) -> Any:
    """`value` with every `${{ }}` replaced (see the module docstring for typing rules).
    Keys of mappings are literal; `where` grows with the path (`with.order`, `argv[1]`).
    `costs`: shared by the evaluations of one decision (see `Costs`)."""
    return _render(value, context, where, Costs() if costs is None else costs)


def _render(value: Any, context: Mapping[str, Any], where: str, costs: Costs) -> Any:
    if isinstance(value, str):
        return _render_text(value, context, where, costs)
    if isinstance(value, Mapping):
        return {k: _render(v, context, _join(where, f".{k}"), costs) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_render(v, context, _join(where, f"[{i}]"), costs) for i, v in enumerate(value)]
    return value


def _join(where: str, step: str) -> str:
    return where + step if where else step.lstrip(".")


def _render_text(text: str, context: Mapping[str, Any], where: str, costs: Costs) -> Any:
    if "${{" not in text:
        return text
    template_sources(text, where=where)  # rejects an unterminated '${{'
    matches = list(TEMPLATE_RE.finditer(text))
    if any(SECRET_SOURCE.match(m.group(1)) for m in matches):
        return _render_with_secrets(text, matches, context, where, costs)
    if len(matches) == 1 and matches[0].span() == (0, len(text)):
        return evaluate(matches[0].group(1), context, where=where, costs=costs)
    pieces: list[str] = []
    last = 0
    for match in matches:
        pieces.append(text[last : match.start()])
        pieces.append(_as_text(evaluate(match.group(1), context, where=where, costs=costs)))
        last = match.end()
    pieces.append(text[last:])
    result = "".join(pieces)
    _check_size(result, where)
    return result


def _render_with_secrets(
    text: str,
    matches: list[re.Match[str]],
    context: Mapping[str, Any],
    where: str,
    costs: Costs,
) -> str:
    """Text holding secret references: they stay references (`${{ secrets.NAME }}`), the
    other expressions are spliced in as text, and a spliced value may not contain `${{`
    (data must never become a reference the worker would resolve)."""
    pieces: list[str] = []
    last = 0
    for match in matches:
        pieces.append(text[last : match.start()])
        secret = SECRET_SOURCE.match(match.group(1))
        if secret is not None:
            pieces.append("${{ secrets." + secret.group(1) + " }}")
        else:
            piece = _as_text(evaluate(match.group(1), context, where=where, costs=costs))
            if "${{" in piece:
                raise ExpressionError(
                    "a value spliced beside a secret reference may not contain '${{'",
                    where=where,
                )
            pieces.append(piece)
        last = match.end()
    pieces.append(text[last:])
    result = "".join(pieces)
    _check_size(result, where)
    return result


def secret_names(value: Any) -> list[str]:
    """The secrets referenced in the strings of `value` (a spec), each once, in order."""
    found: dict[str, None] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "secrets." in item:
                found.update(dict.fromkeys(m.group(1) for m in SECRET_REF.finditer(item)))
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return list(found)


def substitute_secrets(spec: Any, rendered: Any, lookup: Callable[[str], str]) -> Any:
    """`rendered` (the stored input rendered from `spec`) with the secret references that
    `spec` itself holds replaced by `lookup(name)`: only strings at the places of the spec
    that reference secrets are touched, so data that merely looks like a reference is
    never resolved. The result is for the attempt's in-memory use only."""
    if isinstance(spec, str):
        if isinstance(rendered, str) and SECRET_REF.search(spec):
            return SECRET_REF.sub(lambda m: lookup(m.group(1)), rendered)
        return rendered
    if isinstance(spec, Mapping) and isinstance(rendered, Mapping):
        return {
            k: substitute_secrets(spec[k], v, lookup) if k in spec else v
            for k, v in rendered.items()
        }
    if isinstance(spec, list | tuple) and isinstance(rendered, list | tuple):
        head = [substitute_secrets(s, r, lookup) for s, r in zip(spec, rendered, strict=False)]
        return head + list(rendered[len(spec) :])
    return rendered


_PER_ITEM = frozenset({"item", "index"})


def items_work(spec: Any, context: Mapping[str, Any], items: int, costs: Costs) -> int:
    """An estimate of the work of rendering `spec` once for each of `items` items (in
    `context` with `item` and `index` added), in the bytes of `Costs.spent`: each
    expression that reads `item` or `index` converts the rest of what it reads once per
    item; the others are evaluated once (their value is reused, see `Costs`)."""
    total = 0
    for src in iter_expressions(spec):
        if SECRET_SOURCE.match(src):
            continue
        compiled = compile_expression(src)
        if not compiled.refs.roots & _PER_ITEM:
            continue
        data = compiled._select(context)
        shared = {k: v for k, v in data.items() if k not in _PER_ITEM}
        total += items * (costs.footprint(context, shared).weight + _EVALUATION_BYTES)
    return total


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    # Sorted keys: CEL maps have no defined order, and the same data must give the same text.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _unwrap(src: str) -> str:
    """Accept '${{ expr }}' where bare CEL source is expected."""
    match = TEMPLATE_RE.fullmatch(src)
    if match and "${{" not in match.group(1):
        return match.group(1)
    return src


def template_sources(text: str, *, where: str = "") -> list[str]:
    """The CEL sources of every `${{ }}` in `text`; ExpressionError for an unterminated one."""
    sources = [m.group(1) for m in TEMPLATE_RE.finditer(text)]
    if "${{" in TEMPLATE_RE.sub("", text):
        raise ExpressionError(
            "unterminated '${{' (an expression ends with '}}')",
            where=where,
            hint="close the expression with '}}'",
        )
    return sources


def iter_expressions(value: Any) -> Iterator[str]:
    """Every expression source inside strings, lists and mapping values of `value`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield from template_sources(item)
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))


def _weight(value: Any, stop: int, per_value: int = 1) -> int:
    """With `per_value` 1, a lower bound on the bytes of `value` as JSON (a string counts its
    characters and quotes, any other scalar 1, a container 2 plus a comma per item); each
    value counts `per_value - 1` more otherwise. Counted up to just past `stop`: cheap to
    ask of any value, however big."""
    total = 0
    stack = [value]
    extra = per_value - 1
    while stack and total <= stop:
        item = stack.pop()
        total += extra
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, Mapping):
            total += 2 + 2 * len(item) - extra * len(item)  # keys are not values
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            total += 2 + len(item)
            stack.extend(item)
        else:
            total += 1
    return total


def to_json_value(value: Any, *, where: str = "", _depth: int = 0) -> Any:
    """A plain JSON value (dict, list, str, int, float, bool, None) from a CEL result."""
    if _depth > MAX_DATA_DEPTH:
        raise ExpressionError(f"result is nested more than {MAX_DATA_DEPTH} deep", where=where)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExpressionError(f"result {value} is not a finite number", where=where)
        return value
    if isinstance(value, Mapping):
        return {
            _json_key(k, where): to_json_value(v, where=where, _depth=_depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [to_json_value(v, where=where, _depth=_depth + 1) for v in value]
    return _json_scalar(value, where, _depth)


def _json_scalar(value: Any, where: str, depth: int) -> Any:
    if isinstance(value, datetime):
        return timestamp_text(value)
    if isinstance(value, timedelta):
        return duration_text(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, _cel().Type):
        name = value.name().lower().split("<", 1)[0]
        return _TYPE_NAMES.get(name, name)
    raise ExpressionError(f"result of type {type(value).__name__} is not JSON", where=where)


#: CEL's names for the types the runtime names otherwise (`type(null)` is `null_type`).
_TYPE_NAMES = {
    "null": "null_type",
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}


def _fraction(micros: int) -> str:
    """'', '.123' or '.123456': the proto3 JSON forms (0, 3 or 6 digits)."""
    if not micros:
        return ""
    digits = f"{micros:06d}"
    return "." + (digits[:3] if digits.endswith("000") else digits)


def duration_text(value: timedelta) -> str:
    """A duration as CEL's `string()` writes it: exact seconds (`"1209600s"`, `"-1.5s"`)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    seconds, fraction = divmod(abs(micros), 1_000_000)
    return f"{'-' if micros < 0 else ''}{seconds}{_fraction(fraction)}s"


def timestamp_text(value: datetime) -> str:
    """A timestamp as RFC 3339 in UTC (`2026-01-01T08:00:00Z`, `...:00.250Z`)."""
    utc = value.astimezone(UTC) if value.tzinfo else value
    whole = utc.replace(microsecond=0, tzinfo=None).isoformat()
    return f"{whole}{_fraction(utc.microsecond)}Z"


def _json_key(key: Any, where: str) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | str):
        return str(key)
    raise ExpressionError(f"map key {key!r} cannot be a JSON object key", where=where)


def _check_size(value: Any, where: str) -> int:
    """The bytes of `value` as JSON; ExpressionError over MAX_RESULT_BYTES."""
    if _weight(value, MAX_RESULT_BYTES) > MAX_RESULT_BYTES:  # over for sure: skip encoding it
        raise ExpressionError(
            f"result is more than {MAX_RESULT_BYTES} bytes as JSON (limit {MAX_RESULT_BYTES})",
            where=where,
            hint="return less data, e.g. select the fields you need",
        )
    if isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
    else:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_RESULT_BYTES:
        raise ExpressionError(
            f"result is {size} bytes as JSON (limit {MAX_RESULT_BYTES})",
            where=where,
            hint="return less data, e.g. select the fields you need",
        )
    return size


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", int: "a number", float: "a number"}
    names.update({dict: "an object", list: "a list"})
    return names.get(type(value), type(value).__name__)
