"""Python CEL runtimes compared: conformance to the CEL specification, and speed.

Conformance runs the cel-spec repository's `tests/simple/testdata/*.textproto` files (the
official conformance suite; the `cel-python` sdist on PyPI ships a copy in its `features/`
folder: `pip download --no-deps --no-binary :all: cel-python`) through one runtime and counts,
per file, the tests passed, failed and not applicable (protocol-buffer messages and enums,
which workflow data never holds; type-check-only tests; partial evaluation).

Speed runs the same expressions on JSON-like data through each runtime and reports each
timing as a ratio to the same work written as a plain Python function, measured in the same
run (machines here differ 3x from day to day; ratios do not).

The runtimes cannot share one environment (three of them install a top-level `cel` package),
so each run measures the runtimes importable in the current environment:

    python bench/bench_expr.py conformance DIR [--runtime NAME] [--json]
    python bench/bench_expr.py speed [--runtime NAME] [--json]

Runtimes: `wovyr` (our expression layer as users see it: JSON results, our function list),
`common-expression-language` (cel-rust), `cel-expr-python` (Google's, over cel-cpp),
`cel-python` (celpy, pure Python) and `python-cel` (an older cel-rust binding).

Measured when Wovyr chose its runtime (cel-spec v0.24.0 as shipped by cel-python 0.5.0; the
core files, extension libraries apart; "applicable" leaves out protocol-buffer tests):

    runtime                             core passed/applicable   speed vs cel-expr-python
    cel-expr-python 0.1.3 (cel-cpp)      923 / 926                1
    common-expression-language 0.10.0    855 / 920                1.0x-5.7x slower
    cel-python 0.5.0 (pure Python)       785 / 920                20x-90x slower
    python-cel 0.1.1 (cel-rust)          584 / 920                fails `l.qty * 2` on data
    wovyr (our layer, cel-expr-python)   900 / 917                see docs/dsl.md for the 17

Not compared: `cel-bind` (cel-cpp too, but variables must be typed from a JSON schema: no
`dyn` or map declarations) and `mimicel` 0.0.1 (needs protobuf modules generated from the
cel-spec repository with protoc, which it does not ship).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------- textproto


Message = dict[str, list[Any]]

_TOKEN = re.compile(
    r"""(?P<skip>\s+|\#[^\n]*|[,;])
      | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      | (?P<number>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFuU]?)
      | (?P<word>-?[A-Za-z_][\w.]*)
      | (?P<punct>[:{}<>\[\]/])""",
    re.VERBOSE,
)
_SIMPLE_ESCAPES = {
    "n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v",
    "\\": b"\\", "'": b"'", '"': b'"', "?": b"?",
}  # fmt: skip


def _unescape(body: str) -> bytes:
    """The bytes of a textproto string literal's body (C escapes; \\u gives UTF-8)."""
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        esc = body[i + 1]
        if esc in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[esc]
            i += 2
        elif esc in "xX":
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            assert digits
            out.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        elif esc in "uU":
            width = 4 if esc == "u" else 8
            out += chr(int(body[i + 2 : i + 2 + width], 16)).encode("utf-8", "surrogatepass")
            i += 2 + width
        else:
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert digits, body
            out.append(int(digits.group(), 8))
            i += 1 + len(digits.group())
    return bytes(out)


def parse_textproto(text: str) -> Message:
    """A protocol-buffer text-format document as nested dicts of repeated fields."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"textproto: unexpected {text[pos : pos + 20]!r}")
        if match.lastgroup != "skip":
            tokens.append((match.lastgroup or "", match.group()))
        pos = match.end()
    message, end = _parse_fields(tokens, 0, None)
    assert end == len(tokens)
    return message


def _parse_fields(tokens: list[tuple[str, str]], i: int, closer: str | None) -> tuple[Message, int]:
    message: Message = {}
    while i < len(tokens) and tokens[i][1] != closer:
        if tokens[i][1] == "[":  # an Any's expanded type URL: [type.googleapis.com/x.Y]
            j = _find(tokens, i, "]")
            name = "[" + "".join(t for _, t in tokens[i + 1 : j]) + "]"
            i = j + 1
        else:
            name = tokens[i][1]
            i += 1
        if tokens[i][1] == ":":
            i += 1
        kind, text = tokens[i]
        value: Any
        if text in ("{", "<"):
            value, i = _parse_fields(tokens, i + 1, "}" if text == "{" else ">")
            i += 1
        elif kind == "string":
            chunks = []
            while i < len(tokens) and tokens[i][0] == "string":
                chunks.append(_unescape(tokens[i][1][1:-1]))
                i += 1
            value = b"".join(chunks)
        elif text == "[":  # a repeated scalar list: [1, 2]
            j = _find(tokens, i, "]")
            for _, item in tokens[i + 1 : j]:
                message.setdefault(name, []).append(item)
            i = j + 1
            continue
        else:
            value = text
            i += 1
        message.setdefault(name, []).append(value)
    return message, i


def _find(tokens: list[tuple[str, str]], i: int, text: str) -> int:
    while tokens[i][1] != text:
        i += 1
    return i


def _one(message: Message, name: str, default: Any = None) -> Any:
    values = message.get(name)
    return values[0] if values else default


# --------------------------------------------------------------------------- CEL values


class NotApplicable(Exception):
    """A test needing what workflow data never holds (protocol-buffer messages, enums)."""


@dataclass(frozen=True)
class Uint:
    value: int


@dataclass(frozen=True)
class TypeName:
    name: str


def _number(text: str) -> float:
    lowered = text.lower()
    if lowered[-1:] == "f" and not lowered.endswith("inf"):
        lowered = lowered[:-1]
    if lowered in ("inf", "infinity"):
        return math.inf
    if lowered in ("-inf", "-infinity"):
        return -math.inf
    if lowered in ("nan", "-nan"):
        return math.nan
    return float(lowered)


def _int(text: str) -> int:
    return int(text.rstrip("uU"), 0)


_WRAPPERS = {
    "Int64Value": _int, "Int32Value": _int, "UInt64Value": _int, "UInt32Value": _int,
    "DoubleValue": _number, "FloatValue": _number,
}  # fmt: skip


def cel_value(message: Message) -> Any:
    """A `cel.expr.Value` as a Python value (`Uint`, `TypeName` for what Python lacks)."""
    (name, values), *_ = message.items()
    raw = values[0]
    if name == "null_value":
        return None
    if name == "bool_value":
        return raw == "true"
    if name == "int64_value":
        return _int(raw)
    if name == "uint64_value":
        return Uint(_int(raw))
    if name == "double_value":
        return _number(raw)
    if name == "string_value":
        return raw.decode("utf-8", "surrogateescape")
    if name == "bytes_value":
        return raw
    if name == "list_value":
        return [cel_value(v) for v in raw.get("values", [])] if raw else []
    if name == "map_value":
        entries = raw.get("entries", []) if raw else []
        return {_key(cel_value(e["key"][0])): cel_value(e["value"][0]) for e in entries}
    if name == "type_value":
        return TypeName(raw.decode() if isinstance(raw, bytes) else raw)
    if name == "object_value":
        return _any(raw)
    raise NotApplicable(name)


def _key(key: Any) -> Any:
    return key.value if isinstance(key, Uint) else key


def _any(message: Message) -> Any:
    (url, values), *_ = message.items()
    kind = url.rsplit("/", 1)[-1].rstrip("]")
    body: Message = values[0]
    seconds = int(_one(body, "seconds", "0"))
    nanos = int(_one(body, "nanos", "0"))
    if kind == "google.protobuf.Duration":
        return timedelta(seconds=seconds, microseconds=nanos // 1000)
    if kind == "google.protobuf.Timestamp":
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
            seconds=seconds, microseconds=nanos // 1000
        )
    short = kind.removeprefix("google.protobuf.")
    if short in _WRAPPERS:
        return _WRAPPERS[short](_one(body, "value", "0"))
    if short in ("StringValue", "BytesValue"):
        raw = _one(body, "value", b"")
        return raw.decode() if short == "StringValue" else raw
    if short == "BoolValue":
        return _one(body, "value") == "true"
    raise NotApplicable(kind)


def same(actual: Any, expected: Any) -> bool:
    """CEL equality of a runtime's Python result and an expected value, types included
    (int and uint are both Python int in every runtime, so they compare as numbers)."""
    if isinstance(expected, Uint):
        expected = expected.value
    if expected is None or isinstance(expected, bool):
        return actual is expected
    if isinstance(expected, TypeName):
        name = actual.name if isinstance(actual, TypeName) else str(actual)
        return name.rsplit(".", 1)[-1] == expected.name.rsplit(".", 1)[-1]
    if isinstance(expected, int):
        return isinstance(actual, int) and not isinstance(actual, bool) and actual == expected
    if isinstance(expected, float):
        if not isinstance(actual, float):
            return False
        return (math.isnan(actual) and math.isnan(expected)) or actual == expected
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, dict):
        if not isinstance(actual, Mapping) or len(actual) != len(expected):
            return False
        found = {_plain_key(k): v for k, v in actual.items()}
        return all(
            _plain_key(k) in found and same(found[_plain_key(k)], v) for k, v in expected.items()
        )
    return type(actual) is type(expected) and bool(actual == expected)


def _plain_key(key: Any) -> Any:
    return ("b", key) if isinstance(key, bool) else key


# --------------------------------------------------------------------------- runtimes

Bindings = dict[str, Any]
Declarations = dict[str, Message | None]  # a declared variable's cel.expr.Type, or None


class Runtime:
    """One CEL runtime behind a common face: compile, then evaluate to Python values."""

    name = ""
    module = ""

    def __init__(self) -> None:
        self.lib: Any = importlib.import_module(self.module)

    def prepare(
        self, src: str, declarations: Declarations, *, check: bool, container: str
    ) -> Callable[[Bindings], Any]:
        raise NotImplementedError

    def plain(self, value: Any) -> Any:
        return value


def _binding_values(bindings: Bindings) -> Bindings:
    return {k: _native(v) for k, v in bindings.items()}


def _native(value: Any) -> Any:
    if isinstance(value, Uint):
        return value.value
    if isinstance(value, list):
        return [_native(v) for v in value]
    if isinstance(value, dict):
        return {_native(k): _native(v) for k, v in value.items()}
    return value


class CelRust(Runtime):
    name = "common-expression-language"
    module = "cel"

    def prepare(
        self, src: str, declarations: Declarations, *, check: bool, container: str
    ) -> Callable[[Bindings], Any]:
        if container:
            raise NotApplicable("container")
        program = self.lib.compile(src)
        return lambda bindings: self.plain(program.execute(_binding_values(bindings)))

    def plain(self, value: Any) -> Any:
        if isinstance(value, self.lib.OptionalValue):
            raise NotApplicable("optional")
        return value


class PythonCel(Runtime):
    name = "python-cel"
    module = "cel"

    def prepare(
        self, src: str, declarations: Declarations, *, check: bool, container: str
    ) -> Callable[[Bindings], Any]:
        if container:
            raise NotApplicable("container")
        program = self.lib.Program(src)
        return lambda bindings: program.execute(self.lib.Context(_binding_values(bindings)))


_CPP_TYPE_NAMES = {
    "null": "null_type",
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
}


class CelExprPython(Runtime):
    name = "cel-expr-python"
    module = "cel_expr_python.cel"

    def prepare(
        self, src: str, declarations: Declarations, *, check: bool, container: str
    ) -> Callable[[Bindings], Any]:
        variables = {name: self._type(t) for name, t in declarations.items()}
        env = self.lib.NewEnv(variables=variables, container=container or None)
        expression = env.compile(src, disable_check=not check)

        def run(bindings: Bindings) -> Any:
            result = expression.eval(data=_binding_values(bindings))
            if result.type() == self.lib.Type.ERROR:
                raise RuntimeError(str(result.value()))
            return self.plain(result.plain_value())

        return run

    def plain(self, value: Any) -> Any:
        if isinstance(value, self.lib.Type):
            name = value.name().lower().split("<")[0]
            return TypeName(_CPP_TYPE_NAMES.get(name, name))
        if isinstance(value, bytearray):
            return bytes(value)
        if isinstance(value, list):
            return [self.plain(v) for v in value]
        if isinstance(value, dict):
            return {k: self.plain(v) for k, v in value.items()}
        if isinstance(value, datetime) and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    def _type(self, declared: Message | None) -> Any:
        t = self.lib.Type
        if declared is None:
            return t.DYN
        (kind, values), *_ = declared.items()
        raw = values[0]
        if kind == "primitive":
            names = {"INT64": t.INT, "UINT64": t.UINT, "DOUBLE": t.DOUBLE, "BOOL": t.BOOL}
            names.update({"STRING": t.STRING, "BYTES": t.BYTES})
            return names[raw]
        if kind == "well_known":
            return {"TIMESTAMP": t.TIMESTAMP, "DURATION": t.DURATION}.get(raw, t.DYN)
        if kind == "list_type":
            return t.List(self._type(_one(raw, "elem_type")))
        if kind == "map_type":
            return t.Map(self._type(_one(raw, "key_type")), self._type(_one(raw, "value_type")))
        if kind == "null":
            return t.NULL
        if kind in ("message_type", "wrapper", "abstract_type", "type"):
            raise NotApplicable(kind)
        return t.DYN


class CelPy(Runtime):
    name = "cel-python"
    module = "celpy"

    def prepare(
        self, src: str, declarations: Declarations, *, check: bool, container: str
    ) -> Callable[[Bindings], Any]:
        if container:
            raise NotApplicable("container")
        env = self.lib.Environment()
        program = env.program(env.compile(src))
        adapter = importlib.import_module("celpy.adapter")

        def run(bindings: Bindings) -> Any:
            activation = {k: adapter.json_to_cel(v) for k, v in _binding_values(bindings).items()}
            result = program.evaluate(activation)
            if isinstance(result, self.lib.CELEvalError):
                raise RuntimeError(str(result))
            return self.plain(result)

        return run

    def plain(self, value: Any) -> Any:
        types = importlib.import_module("celpy.celtypes")
        if isinstance(value, types.BoolType):
            return bool(value)
        if isinstance(value, types.TypeType):
            return TypeName(getattr(value, "__name__", str(value)))
        if isinstance(value, type):
            return TypeName(value.__name__.removesuffix("Type").lower())
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, str):
            return str(value)
        if isinstance(value, bytes):
            return bytes(value)
        if isinstance(value, datetime):
            return datetime.fromtimestamp(value.timestamp(), UTC).replace(
                microsecond=value.microsecond
            )
        if isinstance(value, timedelta):
            return timedelta(seconds=value.total_seconds())
        if isinstance(value, list):
            return [self.plain(v) for v in value]
        if isinstance(value, Mapping):
            return {self.plain(k): self.plain(v) for k, v in value.items()}
        return value


class Wovyr(Runtime):
    """Our layer: the function list, bounds and JSON results users get."""

    name = "wovyr"
    module = "wovyr.definition.expr"

    def prepare(
        self, src: str, declarations: Declarations, *, check: bool, container: str
    ) -> Callable[[Bindings], Any]:
        if container:
            raise NotApplicable("container")
        compiled = self.lib.compile_expression(src)
        return lambda bindings: compiled.evaluate(_binding_values(bindings))


def wovyr_expected(value: Any) -> Any:
    """The JSON value our layer gives for an expected CEL value (timestamps as text, ...)."""
    lib = importlib.import_module("wovyr.definition.expr")
    if isinstance(value, TypeName):
        return value.name
    if isinstance(value, float) and not math.isfinite(value):
        raise NotApplicable("non-finite results are errors in workflow data")
    return lib.to_json_value(_native(value))


RUNTIMES: dict[str, type[Runtime]] = {
    r.name: r for r in (Wovyr, CelRust, CelExprPython, CelPy, PythonCel)
}


def available(only: str | None) -> list[Runtime]:
    found: list[Runtime] = []
    for name, cls in RUNTIMES.items():
        if only and name != only:
            continue
        try:
            runtime = cls()
        except ImportError:
            continue
        if cls is CelRust and hasattr(runtime.lib, "evaluate_expression"):
            continue  # the `cel` package installed is another binding
        if cls is PythonCel and not hasattr(runtime.lib, "evaluate_expression"):
            continue
        found.append(runtime)
    return found


# --------------------------------------------------------------------------- conformance

#: Files of CEL extension libraries, which Wovyr does not enable (reported apart).
EXTENSION_FILES = frozenset(
    {"bindings_ext", "block_ext", "encoders_ext", "macros2", "math_ext", "string_ext",
     "optionals", "proto2_ext"}
)  # fmt: skip
_PROTO_WORDS = re.compile(r"TestAllTypes|NestedMessage|NestedEnum|GlobalEnum|google\.protobuf")


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)


def run_test(runtime: Runtime, test: Message) -> str:
    """'pass', 'fail: why' or 'skip: why' for one SimpleTest."""
    src = _one(test, "expr", b"").decode("utf-8", "surrogateescape")
    if _one(test, "check_only") == "true" or "unknown" in test or "any_unknowns" in test:
        return "skip: check-only or partial evaluation"
    if _PROTO_WORDS.search(src) or "cel.expr.conformance" in _one(test, "container", b"").decode():
        return "skip: protocol-buffer messages"
    try:
        declarations = {
            _one(d, "name").decode(): _one(_one(d, "ident", {}), "type")
            for d in test.get("type_env", [])
        }
        bindings = {
            _one(b, "key").decode(): cel_value(_one(_one(b, "value"), "value"))
            for b in test.get("bindings", [])
        }
        for name in bindings:
            declarations.setdefault(name, None)
        wants_error = "eval_error" in test or "any_eval_errors" in test
        expected = None if wants_error else cel_value(_expected(test))
        if isinstance(runtime, Wovyr) and not wants_error:
            expected = wovyr_expected(expected)
    except NotApplicable as why:
        return f"skip: {why}"
    check = _one(test, "disable_check") != "true"
    container = _one(test, "container", b"").decode()
    try:
        run = runtime.prepare(src, declarations, check=check, container=container)
        actual = run(bindings)
    except NotApplicable as why:
        return f"skip: {why}"
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the native bindings raise many types, and panics
        if wants_error:
            return "pass"
        return f"fail: {type(exc).__name__}: {str(exc)[:120]}"
    if wants_error:
        return f"fail: no error, got {actual!r:.80}"
    if isinstance(runtime, Wovyr):
        ok = _same_json(actual, expected)
    else:
        ok = same(actual, expected)
    return "pass" if ok else f"fail: got {actual!r:.80}, want {expected!r:.80}"


def _expected(test: Message) -> Message:
    if "typed_result" in test:
        return _one(test["typed_result"][0], "result")  # type: ignore[no-any-return]
    return _one(test, "value", {"bool_value": ["true"]})  # type: ignore[no-any-return]


def _same_json(actual: Any, expected: Any) -> bool:
    return json.dumps(actual, sort_keys=True) == json.dumps(expected, sort_keys=True) and type(
        actual
    ) is type(expected)


def conformance(folder: Path, runtime: Runtime) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    for path in sorted(folder.glob("*.textproto")):
        tally = tallies[path.stem] = Tally()
        document = parse_textproto(path.read_text(encoding="utf-8"))
        for section in document.get("section", []):
            for test in section.get("test", []):
                outcome = run_test(runtime, test)
                label = (
                    f"{path.stem}/{_one(section, 'name').decode()}/{_one(test, 'name').decode()}"
                )
                if outcome == "pass":
                    tally.passed += 1
                elif outcome.startswith("skip"):
                    tally.skipped += 1
                else:
                    tally.failed += 1
                    tally.failures.append(f"{label}: {outcome[6:]}")
    return tallies


def summarise(tallies: dict[str, Tally]) -> dict[str, Any]:
    def total(names: list[str]) -> dict[str, int]:
        picked = [tallies[n] for n in names]
        return {
            "passed": sum(t.passed for t in picked),
            "failed": sum(t.failed for t in picked),
            "not_applicable": sum(t.skipped for t in picked),
        }

    core = [n for n in tallies if n not in EXTENSION_FILES]
    ext = [n for n in tallies if n in EXTENSION_FILES]
    return {
        "core": total(core),
        "extensions": total(ext),
        "files": {n: total([n]) for n in tallies},
        "failures": [f for n in core for f in tallies[n].failures],
    }


# --------------------------------------------------------------------------- speed


@dataclass(frozen=True)
class Case:
    name: str
    src: str
    data: dict[str, Any]
    python: Callable[[dict[str, Any]], Any]


def _cases() -> list[Case]:
    xs = list(range(1000))
    order = {
        "id": "o-1",
        "amount": 1250.5,
        "lines": [{"sku": f"s{i}", "qty": i} for i in range(20)],
    }
    inputs = {"xs": xs, "order": order, "name": "Ada"}
    data = {"inputs": inputs}
    return [
        Case("field + compare", "inputs.order.amount > 1000.0", data,
             lambda d: d["inputs"]["order"]["amount"] > 1000.0),
        Case("string concat", "'Hello, ' + inputs.name + '!'", data,
             lambda d: "Hello, " + d["inputs"]["name"] + "!"),
        Case("map over 20 lines", "inputs.order.lines.map(l, l.qty * 2)", data,
             lambda d: [line["qty"] * 2 for line in d["inputs"]["order"]["lines"]]),
        Case("exists over 1,000", "inputs.xs.exists(x, x == 999)", data,
             lambda d: any(x == 999 for x in d["inputs"]["xs"])),
        Case("filter over 1,000", "inputs.xs.filter(x, x % 2 == 0).size()", data,
             lambda d: len([x for x in d["inputs"]["xs"] if x % 2 == 0])),
        Case("membership over 1,000 x 1,000", "inputs.xs.all(x, x in inputs.xs)", data,
             lambda d: all(x in d["inputs"]["xs"] for x in d["inputs"]["xs"])),
    ]  # fmt: skip


def _timed(fn: Callable[[], Any], budget: float = 0.2) -> float:
    """Seconds per call: the best of 3 runs of enough calls to fill `budget` seconds."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(budget / once))
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def speed(runtime: Runtime) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for case in _cases():
        declarations: Declarations = dict.fromkeys(case.data)
        try:
            run = runtime.prepare(case.src, declarations, check=True, container="")
            run(case.data)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            rows[case.name] = f"error: {type(exc).__name__}: {str(exc)[:80]}"
            continue
        baseline = _timed(lambda c=case: c.python(c.data))  # type: ignore[misc]
        rows[case.name] = round(_timed(lambda r=run, c=case: r(c.data)) / baseline, 1)  # type: ignore[misc]
    return rows


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    sub = parser.add_subparsers(dest="command", required=True)
    conf = sub.add_parser("conformance")
    conf.add_argument("folder", type=Path)
    conf.add_argument("--failures", action="store_true", help="list every failed test")
    for p in (conf, sub.add_parser("speed")):
        p.add_argument("--runtime", choices=sorted(RUNTIMES))
        p.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runtimes = available(args.runtime)
    if not runtimes:
        print("no CEL runtime importable here", file=sys.stderr)
        return 1
    report: dict[str, Any] = {}
    for runtime in runtimes:
        if args.command == "conformance":
            summary = summarise(conformance(args.folder, runtime))
            if not args.failures:
                summary.pop("failures")
            report[runtime.name] = summary
        else:
            report[runtime.name] = speed(runtime)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for name, summary in report.items():
        print(f"== {name}")
        if args.command == "conformance":
            print(f"  core:       {summary['core']}")
            print(f"  extensions: {summary['extensions']}")
            for failure in summary.get("failures", []):
                print(f"  FAIL {failure}")
        else:
            print("  time per evaluation / the same work in plain Python:")
            for case, ratio in summary.items():
                print(f"  {case:32} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
