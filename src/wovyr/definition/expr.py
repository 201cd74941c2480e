"""Expressions: the one interface to the expression engine (CEL, via `common-expression-language`).

A definition embeds expressions as `${{ ... }}`. Everything else in Wovyr calls only this
module, so the engine behind it could change without touching callers.

Why CEL: it is not Turing-complete (no loops, recursion or assignment; comprehension macros
iterate only over finite lists and maps), it has no attribute access to host objects (a field
selection works only on maps, so `''.__class__` is a type error, and we reject `__` names
statically anyway), no functions for files, clock, imports or environment, and a compiled
program can list the names it reads, so references are checked before anything runs.

Rendering rules (see `render`):

* a string that is exactly one `${{ expr }}` (nothing around it, not even spaces) yields the
  expression's value with its JSON type: number, boolean, null, list, object or string;
* an expression inside other text is converted to text and spliced in: strings as they are,
  everything else as compact JSON with sorted keys (`true`, `false`, `null`, `1.5`, `[1,2]`,
  `{"a":1}`);
* an expression ends at the first `}}`; write `} }` for a nested map literal. There is no
  escape for a literal `${{`, and values coming *from* the context are never rendered again,
  so data cannot inject expressions.

Results are plain JSON values: timestamps become RFC 3339 strings (`...Z`), durations
`"<seconds>s"` and bytes base64 strings (the proto3 JSON mapping CEL itself uses), optionals
their value or null. NaN and infinities are errors.

Bounds (`ExpressionError` when exceeded): source length, comprehension nesting, the depth of
the data an expression reads, an estimate of the work comprehensions will do (the CEL runtime
holds the GIL and cannot be interrupted, so the bound is enforced *before* running: `map` and
`filter` cost grows with the square of the list size in this implementation) and the size of
the result once encoded as JSON.
"""

from __future__ import annotations

import base64
import difflib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import cel

from wovyr.definition.expr_static import analyse
from wovyr.errors import ExpressionError

__all__ = [  # noqa: RUF022 - plain sorted(), as the tests check
    "CONTEXT_ROOTS",
    "CompiledExpression",
    "EXECUTION_FIELDS",
    "FUNCTIONS",
    "MAX_COST",
    "MAX_DATA_DEPTH",
    "MAX_MACRO_DEPTH",
    "MAX_RESULT_BYTES",
    "MAX_SOURCE_CHARS",
    "Refs",
    "TEMPLATE_RE",
    "compile_expression",
    "evaluate",
    "evaluate_condition",
    "iter_expressions",
    "references",
    "render",
    "template_sources",
    "to_json_value",
]

TEMPLATE_RE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
MAX_SOURCE_CHARS = 4096
MAX_MACRO_DEPTH = 2
MAX_RESULT_BYTES = 1_048_576
MAX_DATA_DEPTH = 256  # the CEL binding converts data recursively and crashes near 10,000 levels
MAX_COST = 2_000_000  # roughly 0.1 s of comprehension work on this runtime
#: The names the engine puts in an evaluation context.
CONTEXT_ROOTS = ("inputs", "activities", "execution", "item", "index")
#: Functions of the CEL runtime we use (standard definitions it implements). Anything else,
#: such as now() or an extension library, fails at compile time rather than on the first run.
FUNCTIONS = frozenset(
    {
        *("size", "contains", "startsWith", "endsWith", "matches"),
        *("string", "int", "uint", "double", "bytes", "timestamp", "duration", "dyn", "type"),
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
    width: int  # how many collections `+` may join into one
    literal_items: int  # an upper bound on the length of a list literal in the source
    program: Any

    def evaluate(self, context: Mapping[str, Any], *, where: str = "") -> Any:
        """The JSON value of this expression in `context`; ExpressionError on any failure."""
        data = self._select(context)
        largest = _measure(data, where)
        self._check_cost(largest, where)
        try:
            raw = self.program.execute(data)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # the Rust binding raises many types, and panics
            message, hint = _runtime_message(exc)
            raise ExpressionError(message, where=where, hint=hint) from None
        value = to_json_value(raw, where=where)
        _check_size(value, where)
        return value

    def _select(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """Only the roots this expression reads: less to convert, measure and expose."""
        data = {name: context[name] for name in self.refs.roots if name in context}
        acts = data.get("activities")
        if isinstance(acts, Mapping) and "activities" not in self.refs.dynamic:
            data["activities"] = {a: acts[a] for a in self.refs.activities if a in acts}
        return data

    def _check_cost(self, largest: int, where: str) -> None:
        if not self.macro_count:
            return
        size = max(largest, self.literal_items, 1) * self.width
        cost = self.macro_count * size ** (self.macro_depth + int(self.accumulates))
        if cost > MAX_COST:
            raise ExpressionError(
                f"expression would do too much work (about {cost:.1e} steps iterating "
                f"collections of up to {size} items at comprehension depth {self.macro_depth})",
                where=where,
                hint="iterate a smaller list, avoid nesting, or compute this in an activity",
            )


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
    try:
        program = cel.compile(src)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        raise _Invalid(_syntax_message(src, exc)) from None
    info = analyse(src)
    _check_static(info.dunders, info.macro_depth, info.bound)
    _check_functions(program.functions())
    free = frozenset(info.free | (set(program.variables()) - info.bound))
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
        width=info.concatenations + 1,
        literal_items=src.count(",") + 1,
        program=program,
    )


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


def _check_functions(used: list[str]) -> None:
    # Operators are listed too, as '_+_', '@in', '!_' and the like: they are not names.
    for name in used:
        if name[:1].isalpha() and name not in FUNCTIONS:
            close = difflib.get_close_matches(name, sorted(FUNCTIONS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            raise _Invalid(f"unknown function {name!r}", hint or "see the expression docs")


def _syntax_message(src: str, exc: BaseException) -> str:
    """'syntax error at column N: ...' from the binding's multi-line parse error."""
    text = str(exc)
    match = re.search(r"<input>:(\d+):(\d+): (.*)", text)
    if not match:
        return f"invalid expression: {text.splitlines()[0] if text else type(exc).__name__}"
    line, column, detail = match.groups()
    detail = detail.split(" expecting ", 1)[0]
    where = f"column {column}" if line == "1" else f"line {line}, column {column}"
    return f"invalid expression {src[:80]!r}: {detail[:200]} at {where} of the expression"


def _runtime_message(exc: BaseException) -> tuple[str, str | None]:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0]!r}" if exc.args else "no such key", None
    text = str(exc).strip() or type(exc).__name__
    first, _, rest = text.partition(". ")
    return first.rstrip("."), (rest.strip() or None)


def references(src: str) -> Refs:
    """The names `src` reads (CEL source, or a whole `${{ }}` template)."""
    return compile_expression(src).refs


def evaluate(src: str, context: Mapping[str, Any], *, where: str = "") -> Any:
    """Evaluate CEL source (or one whole `${{ }}` template) to a JSON value."""
    return compile_expression(src, where).evaluate(context, where=where)


def evaluate_condition(
    when: str | bool | None, context: Mapping[str, Any], *, where: str = ""
) -> bool:
    """A `when:` value: None means true; a string must be one `${{ }}` giving a boolean."""
    if when is None or isinstance(when, bool):
        return True if when is None else when
    sources = template_sources(when, where=where)
    if len(sources) != 1 or TEMPLATE_RE.fullmatch(when) is None:
        raise ExpressionError(
            "a condition must be true, false or a single '${{ ... }}' expression", where=where
        )
    value = evaluate(sources[0], context, where=where)
    if not isinstance(value, bool):
        raise ExpressionError(
            f"a condition must give true or false, not {_json_type(value)}",
            where=where,
            hint="compare explicitly, e.g. '${{ size(inputs.items) > 0 }}'",
        )
    return value


def render(value: Any, context: Mapping[str, Any], *, where: str = "") -> Any:
    """`value` with every `${{ }}` replaced (see the module docstring for typing rules).
    Keys of mappings are literal; `where` grows with the path (`with.order`, `argv[1]`)."""
    if isinstance(value, str):
        return _render_text(value, context, where)
    if isinstance(value, Mapping):
        return {k: render(v, context, where=_join(where, f".{k}")) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render(v, context, where=_join(where, f"[{i}]")) for i, v in enumerate(value)]
    return value


def _join(where: str, step: str) -> str:
    return where + step if where else step.lstrip(".")


def _render_text(text: str, context: Mapping[str, Any], where: str) -> Any:
    if "${{" not in text:
        return text
    template_sources(text, where=where)  # rejects an unterminated '${{'
    matches = list(TEMPLATE_RE.finditer(text))
    if len(matches) == 1 and matches[0].span() == (0, len(text)):
        return evaluate(matches[0].group(1), context, where=where)
    pieces: list[str] = []
    last = 0
    for match in matches:
        pieces.append(text[last : match.start()])
        pieces.append(_as_text(evaluate(match.group(1), context, where=where)))
        last = match.end()
    pieces.append(text[last:])
    result = "".join(pieces)
    _check_size(result, where)
    return result


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


def _measure(data: Any, where: str) -> int:
    """The length of the largest list or map inside `data`; reject data nested too deeply."""
    largest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if depth > MAX_DATA_DEPTH:
                raise ExpressionError(
                    f"the data this expression reads is nested more than {MAX_DATA_DEPTH} deep",
                    where=where,
                )
            largest = max(largest, len(item))
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return largest


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
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, cel.OptionalValue):
        inner = value.value() if value.has_value() else None
        return to_json_value(inner, where=where, _depth=depth + 1)
    raise ExpressionError(f"result of type {type(value).__name__} is not JSON", where=where)


def _json_key(key: Any, where: str) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | str):
        return str(key)
    raise ExpressionError(f"map key {key!r} cannot be a JSON object key", where=where)


def _check_size(value: Any, where: str) -> None:
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


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", int: "a number", float: "a number"}
    names.update({dict: "an object", list: "a list"})
    return names.get(type(value), type(value).__name__)
