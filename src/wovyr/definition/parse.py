"""Reading workflow documents: safe YAML 1.2 (and JSON, which YAML 1.2 contains) with limits.

We consume ruamel.yaml's *event* stream and build plain dicts and lists ourselves instead of
letting a composer or constructor do it. That is what makes the limits hold before anything
big is built:

* the byte size is checked before decoding or parsing;
* an anchor, alias or tag is refused at its event, so an alias bomb never expands and no tag
  (`!!python/object`, `!custom`) can construct anything;
* nesting depth and node count are counted per event, without recursion;
* scalars are resolved by the YAML 1.2 core schema only: `NO`, `on`, `12:30` and `0755`-style
  strings of YAML 1.1 stay strings; `~`/`null`, `true`/`false`, integers and floats are typed;
* mapping keys are always strings (their source text), and a duplicate key is an error.

Every problem carries `file:line:column` (1-based). Parsing stops at the first syntax error
or exceeded limit; softer problems (duplicates, tags, anchors) are all collected first.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from wovyr.definition.locate import model_problems
from wovyr.definition.model import Workflow
from wovyr.definition.source import DataPath, SourceMap
from wovyr.definition.validate import validate, validate_data
from wovyr.errors import DefinitionError, Problem

if TYPE_CHECKING:
    from ruamel.yaml.error import MarkedYAMLError
    from ruamel.yaml.reader import ReaderError

__all__ = [  # noqa: RUF022 - plain sorted(), as the tests check
    "Limits",
    "MAX_ACTIVITIES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_SCALAR_CHARS",
    "load_definition",
    "load_definition_file",
    "parse_document",
    "read_source",
]

MAX_BYTES = 1_048_576
#: Activities in one definition. The decider settles a pass over every activity again after
#: each one that settles, so its work grows with the square of the count: 500 take about
#: 0.3 s in one decision, 6,000 took 110 s (untrusted definitions arrive over HTTP).
MAX_ACTIVITIES = 500
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_SCALAR_CHARS = 262_144
_INT64 = 2**63

# ruamel.yaml loads with the first document read (`_load_yaml`): reading a stored definition
# back (canonical JSON, through the model) or a command that reads none does not pay for it.
ev: Any = None  # ruamel.yaml.events
_UNSET: Any = object()
_CParser: Any = _UNSET  # libyaml's parser from ruamel.yaml.clib, when installed (else None)


def _load_yaml() -> None:
    global ev, _CParser  # loaded once, on first use
    if ev is None:
        from ruamel.yaml import events

        ev = events
    if _CParser is _UNSET:
        try:
            _CParser = importlib.import_module("ruamel.yaml.cyaml").CParser
        except ImportError:  # pragma: no cover - ruamel.yaml.clib is missing (e.g. PyPy)
            _CParser = None


@dataclass(frozen=True)
class Limits:
    """Hard limits on one document; exceeding any is a located DefinitionError."""

    max_bytes: int = MAX_BYTES
    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES
    max_scalar_chars: int = MAX_SCALAR_CHARS
    max_activities: int = MAX_ACTIVITIES


class _Stop(Exception):
    """Parsing cannot go on; the problem is already recorded."""


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^[-+]?[0-9]+$|^0o[0-7]+$|^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(
    r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"
    r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"
)


@dataclass
class _Frame:
    container: dict[str, Any] | list[Any]
    path: DataPath
    key: str | None = None  # the pending key of a mapping, once read
    skip: bool = False  # drop the pending value (its key is a duplicate)
    discarded: bool = False  # this container is inside a dropped value: record no marks


@dataclass
class _Builder:
    """Turns a YAML event stream into plain data plus a SourceMap, enforcing the limits."""

    smap: SourceMap
    limits: Limits
    problems: list[Problem] = field(default_factory=list)
    stack: list[_Frame] = field(default_factory=list)
    root: Any = None
    has_root: bool = False
    nodes: int = 0
    documents: int = 0

    def fail(self, message: str, mark: Any, *, hint: str | None = None, stop: bool = False) -> None:
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        self.problems.append(
            Problem(message, file=self.smap.filename, line=line, column=column, hint=hint)
        )
        if stop:
            raise _Stop

    def feed(self, event: Any) -> None:
        if isinstance(event, ev.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                self.fail("more than one document in the file", event.start_mark, stop=True)
        elif isinstance(event, ev.AliasEvent):
            self.fail(f"aliases are not allowed (*{event.anchor})", event.start_mark, stop=True)
        elif isinstance(event, ev.ScalarEvent | ev.CollectionStartEvent):
            self._check_node(event)
            if isinstance(event, ev.ScalarEvent):
                self._scalar(event)
            else:
                self._start(event)
        elif isinstance(event, ev.CollectionEndEvent):
            self._place(self.stack.pop().container)

    def _check_node(self, event: Any) -> None:
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            self.fail(
                f"the document has more than {self.limits.max_nodes} values",
                event.start_mark,
                stop=True,
            )
        if event.anchor is not None:
            self.fail(
                f"anchors are not allowed (&{event.anchor})",
                event.start_mark,
                hint="repeat the value instead of anchoring it",
            )
        if event.tag is not None:
            self.fail(
                f"tags are not allowed ({event.tag.replace('tag:yaml.org,2002:', '!!')})",
                event.start_mark,
                hint="write a plain value; quote it if it must be a string",
            )

    def _child_path(self) -> DataPath:
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.container, list):
            return (*top.path, len(top.container))
        return (*top.path, top.key if top.key is not None else "")

    def _expects_key(self) -> bool:
        top = self.stack[-1] if self.stack else None
        return top is not None and isinstance(top.container, dict) and top.key is None

    def _start(self, event: Any) -> None:
        if len(self.stack) >= self.limits.max_depth:
            self.fail(
                f"nesting is deeper than {self.limits.max_depth} levels",
                event.start_mark,
                stop=True,
            )
        if self._expects_key():
            self.fail("a mapping key must be a string", event.start_mark, stop=True)
        path = self._child_path()
        self._mark(path, event.start_mark)
        container: dict[str, Any] | list[Any] = (
            {} if isinstance(event, ev.MappingStartEvent) else []
        )
        top = self.stack[-1] if self.stack else None
        discarded = top is not None and (top.discarded or top.skip)
        self.stack.append(_Frame(container, path, discarded=discarded))

    def _scalar(self, event: Any) -> None:
        if len(event.value) > self.limits.max_scalar_chars:
            self.fail(
                f"a value is {len(event.value)} characters long "
                f"(limit {self.limits.max_scalar_chars})",
                event.start_mark,
                stop=True,
            )
        if self._expects_key():
            self._key(event)
            return
        self._mark(self._child_path(), event.start_mark)
        self._place(self._resolve(event))

    def _key(self, event: Any) -> None:
        top = self.stack[-1]
        assert isinstance(top.container, dict)
        key = str(event.value)
        path = (*top.path, key)
        top.key, top.skip = key, False
        if key in top.container:
            first = self.smap.keys.get(path, (0, 0))[0]
            self.fail(f"duplicate key {key!r} (first at line {first})", event.start_mark)
            top.skip = True
        elif not top.discarded:
            self.smap.keys[path] = (event.start_mark.line + 1, event.start_mark.column + 1)

    def _place(self, value: Any) -> None:
        if not self.stack:
            self.root, self.has_root = value, True
            return
        top = self.stack[-1]
        if isinstance(top.container, list):
            top.container.append(value)
            return
        if not top.skip and top.key is not None:
            top.container[top.key] = value
        top.key, top.skip = None, False

    def _mark(self, path: DataPath, mark: Any) -> None:
        top = self.stack[-1] if self.stack else None
        if top is None or not (top.skip or top.discarded):
            self.smap.nodes[path] = (mark.line + 1, mark.column + 1)

    def _resolve(self, event: Any) -> Any:
        text = event.value
        if event.style or event.tag is not None:  # style is None or "" when plain
            return text  # quoted and block scalars are strings
        if _NULL.match(text):
            return None
        if text in _BOOL:
            return _BOOL[text]
        if _INT.match(text):
            return self._integer(text, event)
        if _FLOAT.match(text):
            number = float(text.lower().replace(".inf", "inf").replace(".nan", "nan"))
            if not math.isfinite(number):
                # JSON (and so expressions, stored events and the content hash) has no NaN.
                self.fail(f"{text} is not a finite number", event.start_mark)
            return number
        return text

    def _integer(self, text: str, event: Any) -> int | None:
        digits = text.lstrip("+-")
        if len(digits) > 40:
            self.fail("integer is too large (more than 64 bits)", event.start_mark)
            return None
        base = 16 if digits.startswith("0x") else 8 if digits.startswith("0o") else 10
        number = int(digits[2:] if base != 10 else digits, base)
        number = -number if text.startswith("-") else number
        if not -_INT64 <= number < _INT64:
            self.fail("integer is too large (more than 64 bits)", event.start_mark)
        return number


def _decode(source: str | bytes, smap: SourceMap, limits: Limits) -> str:
    """The text of `source`; located problems for size and encoding."""
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    if len(data) > limits.max_bytes:
        raise DefinitionError(
            [smap.problem(f"the document is {len(data)} bytes (limit {limits.max_bytes})")]
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DefinitionError([smap.problem("the file is UTF-16; save it as UTF-8")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[start : exc.start].decode("utf-8", "replace")) + 1
        problem = Problem(
            f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
            file=smap.filename,
            line=line,
            column=column,
            hint="save the file as UTF-8",
        )
        raise DefinitionError([problem]) from None
    return text.removeprefix("\ufeff")


def parse_document(
    source: str | bytes, filename: str = "<input>", limits: Limits | None = None
) -> tuple[Any, SourceMap]:
    """Plain data (dicts, lists, scalars) and its SourceMap; DefinitionError on any problem."""
    from ruamel.yaml.error import MarkedYAMLError
    from ruamel.yaml.reader import ReaderError

    _load_yaml()
    limits = limits or Limits()
    smap = SourceMap(filename)
    text = _decode(source, smap, limits)
    builder = _Builder(smap, limits)
    try:
        for event in _events(text):
            builder.feed(event)
    except _Stop:
        pass
    except MarkedYAMLError as exc:
        builder.problems.append(_syntax_problem(exc, smap))
    except ReaderError as exc:
        builder.problems.append(_reader_problem(exc, text, smap))
    except Exception as exc:
        # ruamel.yaml is a third-party parser fed hostile input: whatever else it raises is a
        # problem of the input, and callers must only ever see DefinitionError.
        builder.problems.append(smap.problem(f"invalid YAML: {exc}"))
    if builder.problems:
        raise DefinitionError(builder.problems)
    if not builder.has_root or builder.root is None:
        raise DefinitionError([smap.problem("the document is empty", hint=_SKELETON)])
    if not isinstance(builder.root, dict):
        raise DefinitionError([smap.problem("the document must be a mapping", hint=_SKELETON)])
    return builder.root, smap


def _events(text: str) -> Iterator[Any]:
    """YAML events of `text`: from libyaml when ruamel.yaml.clib is installed (about 25 times
    faster, which keeps a 100,000-node document well under a second), else pure Python."""
    if _CParser is None:  # pragma: no cover - e.g. PyPy
        from ruamel.yaml import YAML

        yield from YAML(typ="safe", pure=True).parse(text)
        return
    parser = _CParser(text)
    try:
        while True:
            event = parser.get_event()
            yield event
            if event is None or isinstance(event, ev.StreamEndEvent):
                return
    finally:
        parser.dispose()


_SKELETON = "a workflow starts with 'apiVersion: wovyr/v1', 'kind: Workflow', metadata, activities"


def _syntax_problem(exc: MarkedYAMLError, smap: SourceMap) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context or 'syntax error'}"
    if exc.context and exc.problem and exc.context_mark is not None:
        message += f" ({exc.context} started at line {exc.context_mark.line + 1})"
    hint = "indent with spaces, not tabs" if "\\t" in message or "\t" in message else None
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Problem(message, file=smap.filename, line=line, column=column, hint=hint)


def _reader_problem(exc: ReaderError, text: str, smap: SourceMap) -> Problem:
    position = max(0, min(int(exc.position), len(text)))
    if _CParser is not None and not text.isascii():
        # libyaml counts bytes of the UTF-8 encoding; we count characters.
        position = len(text.encode("utf-8")[:position].decode("utf-8", "ignore"))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[0])
    return Problem(
        f"the file contains a control character (#x{character:04x})",
        file=smap.filename,
        line=line,
        column=column,
        hint="remove it; is this a binary file?",
    )


def load_definition(
    source: str | bytes, filename: str = "<input>", limits: Limits | None = None
) -> Workflow:
    """Parse, model and validate a workflow; DefinitionError carries every problem found."""
    limits = limits or Limits()
    data, smap = parse_document(source, filename, limits)
    activities = data.get("activities")
    if isinstance(activities, list) and len(activities) > limits.max_activities:
        problem = smap.problem(
            f"the workflow has {len(activities)} activities (limit {limits.max_activities})",
            ("activities",),
            key=True,
            hint="split it into child workflows (a `workflow:` activity), or use for_each",
        )
        raise DefinitionError([problem])
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        # Report what the model rejects *and* what the graph and expression checks can still
        # see in the raw data, so one run shows every problem.
        problems = model_problems(exc, data, smap) + validate_data(data, smap)
        raise DefinitionError(_sorted_unique(problems)) from None
    problems = validate(workflow, smap, filename)
    if problems:
        raise DefinitionError(problems)
    return workflow


def _sorted_unique(problems: list[Problem]) -> list[Problem]:
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: (p.line or 0, p.column or 0))


def load_definition_file(path: str | Path, limits: Limits | None = None) -> Workflow:
    """`load_definition` on a file; unreadable paths are DefinitionErrors too, never OSError."""
    limits = limits or Limits()
    name = str(path)
    return load_definition(read_source(path, limits), name, limits)


def read_source(path: str | Path, limits: Limits | None = None) -> bytes:
    """At most `max_bytes + 1` bytes of the file (enough to tell that it is too big)."""
    limits = limits or Limits()
    name = str(path)
    try:
        if Path(path).is_dir():
            raise DefinitionError([SourceMap(name).problem("is a directory, not a file")])
        with open(path, "rb") as handle:
            data = handle.read(limits.max_bytes + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise DefinitionError(
            [SourceMap(name).problem(f"cannot read the file: {reason}")]
        ) from None
    if len(data) > limits.max_bytes:
        problem = SourceMap(name).problem(f"the file is larger than {limits.max_bytes} bytes")
        raise DefinitionError([problem])
    return data
