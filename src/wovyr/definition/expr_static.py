"""Static analysis of CEL source: which names an expression reads, without running it.

The CEL runtime does not tell a free name (`inputs`) from a comprehension variable (`x` in
`items.map(x, x * 2)`), nor which activity an expression selects (`activities.ship`), nor how
deeply comprehensions nest, nor which functions an expression calls. This module answers those
questions with a small lexer over source that the CEL parser has already accepted, so it never
has to report syntax errors.

It tracks scopes: a comprehension variable is bound only inside the parentheses of its macro.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MACROS", "TYPE_NAMES", "Analysis", "Token", "analyse", "tokenize"]

#: CEL comprehension macros; the first argument of each binds a new name.
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_KEYWORDS = frozenset({"true", "false", "null", "in"})
#: Type denotations: names of values the language itself defines (`type(x) == int`).
TYPE_NAMES = frozenset(
    {"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"}
)
#: Operations whose work grows with the size of an operand: inside a comprehension they
#: iterate once more (`xs.all(x, x in xs)` does len(xs) ** 2 steps).
_LINEAR_FUNCTIONS = frozenset({"contains", "startsWith", "endsWith", "matches"})

_TOKEN_RE = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
                |'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[uU]?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    kind: str  # "string", "number", "ident", "op" or "other"
    text: str
    pos: int


def tokenize(src: str) -> list[Token]:
    """Tokens of `src`, whitespace and comments dropped; unknown characters become "other"."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(src):
        match = _TOKEN_RE.match(src, pos)
        if match is None:
            tokens.append(Token("other", src[pos], pos))
            pos += 1
            continue
        kind = match.lastgroup or "other"
        if kind != "space":
            tokens.append(Token(kind, match.group(), pos))
        pos = match.end()
    return tokens


def _string_value(text: str) -> str | None:
    """The value of a simple string literal, or None when it has escapes or is raw/bytes."""
    if text[0] not in "'\"" or "\\" in text:
        return None
    quote = text[:3] if text[:3] in ("'''", '"""') else text[0]
    return text[len(quote) : len(text) - len(quote)]


@dataclass
class Analysis:
    """What an expression reads. `members[root]` lists the names selected right after a root
    (`inputs.order_id` -> members["inputs"] = {"order_id"}); `dynamic` lists roots used whole
    or with a computed key (`activities[inputs.which]`), which a static check cannot follow."""

    free: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)  # the functions called, macros excluded
    members: dict[str, set[str]] = field(default_factory=dict)
    dynamic: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)
    dunders: set[str] = field(default_factory=set)
    macro_depth: int = 0
    macro_count: int = 0
    accumulates: bool = False  # map/filter build lists: their cost grows with the square
    concatenations: int = 0
    #: The deepest nesting of an operation linear in a collection (`in`, `+` on data, string
    #: search) inside comprehensions: 1 + the number of macros around it; 0 when none is.
    linear_depth: int = 0
    #: What `map` bodies read from outside their own element: (root, member or None for the
    #: whole root). A body yielding `inputs.s` copies that value once per item.
    map_reads: set[tuple[str, str | None]] = field(default_factory=set)
    #: How many `map` macros enclose the deepest such read (0: none).
    map_read_depth: int = 0


@dataclass
class _Frame:
    """One open bracket; `binds` is the comprehension variable it introduces, if any."""

    closer: str
    macro: bool = False
    binds: str | None = None
    name: str = ""  # the macro's name


def analyse(src: str) -> Analysis:
    """Free names, selected members, comprehension nesting and dunder names of `src`."""
    tokens = tokenize(src)
    result = Analysis()
    stack: list[_Frame] = []
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.kind == "ident" and tok.text.startswith("__"):
            result.dunders.add(tok.text)
        if tok.kind == "op":
            _bracket(tok, tokens, i, stack, result)
        elif tok.kind == "ident" and nxt is not None and nxt.text == "(":
            if tok.text not in MACROS and tok.text != "has":
                result.functions.add(tok.text)
        elif tok.kind == "ident" and not _is_selected(prev):
            _root(tok, tokens, i, stack, result, nxt)
        if _is_linear(tokens, i, stack):
            depth = 1 + sum(1 for f in stack if f.macro)
            result.linear_depth = max(result.linear_depth, depth)
    return result


def _is_linear(tokens: list[Token], i: int, stack: list[_Frame]) -> bool:
    """Whether tokens[i] is an operation linear in a collection, inside a comprehension."""
    if not any(f.macro for f in stack):
        return False
    tok = tokens[i]
    if tok.text == "in" or (tok.kind == "ident" and tok.text in _LINEAR_FUNCTIONS):
        return True
    if tok.text != "+":
        return False
    # `l.qty + 1`, `'#' + x` and `a.price + a.tax` (comprehension variables on both sides)
    # are constant work; `xs + inputs.more` copies a collection from the data every time.
    before, after = tokens[i - 1], tokens[i + 1] if i + 1 < len(tokens) else None
    if before.kind in ("number", "string") or (after and after.kind in ("number", "string")):
        return False
    bound = {f.binds for f in stack if f.binds}
    return not (_operand_root(tokens, i, -1) in bound and _operand_root(tokens, i, 1) in bound)


def _operand_root(tokens: list[Token], i: int, step: int) -> str | None:
    """The first name of the selection chain (`a.b.c`) on one side of tokens[i], if simple."""
    j = i + step
    names: list[str] = []
    while 0 <= j < len(tokens) and (tokens[j].kind == "ident" or tokens[j].text == "."):
        if tokens[j].kind == "ident":
            names.append(tokens[j].text)
        j += step
    if not names:
        return None
    return names[-1] if step < 0 else names[0]


def _is_selected(prev: Token | None) -> bool:
    return prev is not None and prev.text == "."


def _bracket(tok: Token, tokens: list[Token], i: int, stack: list[_Frame], out: Analysis) -> None:
    if tok.text == "+":
        out.concatenations += 1
    elif tok.text in "([{":
        frame = _Frame({"(": ")", "[": "]", "{": "}"}[tok.text])
        name = tokens[i - 1] if i else None
        if (
            tok.text == "("
            and name
            and name.text in MACROS
            and i >= 2
            and tokens[i - 2].text == "."
        ):
            frame.macro = True
            frame.name = name.text
            frame.binds = _bound_name(tokens, i)
            out.macro_count += 1
            out.accumulates = out.accumulates or name.text in ("map", "filter")
            depth = 1 + sum(1 for f in stack if f.macro)
            out.macro_depth = max(out.macro_depth, depth)
            if frame.binds:
                out.bound.add(frame.binds)
        stack.append(frame)
    elif tok.text in ")]}" and stack and stack[-1].closer == tok.text:
        stack.pop()


def _bound_name(tokens: list[Token], i: int) -> str | None:
    """The comprehension variable of the macro whose `(` is tokens[i]."""
    if i + 2 < len(tokens) and tokens[i + 1].kind == "ident" and tokens[i + 2].text == ",":
        return tokens[i + 1].text
    return None


def _root(
    tok: Token,
    tokens: list[Token],
    i: int,
    stack: list[_Frame],
    out: Analysis,
    nxt: Token | None,
) -> None:
    name = tok.text
    if name in _KEYWORDS or name in TYPE_NAMES or (nxt is not None and nxt.text == "("):
        return  # a keyword, a type name or a global function call such as size(x) or has(x.y)
    if any(frame.binds == name for frame in stack):
        return  # a comprehension variable (its declaration or a use) inside its macro
    out.free.add(name)
    member = _member(tokens, i)
    if member is None:
        out.dynamic.add(name)
    else:
        out.members.setdefault(name, set()).add(member)
    maps = sum(1 for frame in stack if frame.macro and frame.name == "map")
    if maps:
        out.map_reads.add((name, member))
        out.map_read_depth = max(out.map_read_depth, maps)


def _member(tokens: list[Token], i: int) -> str | None:
    """The name selected right after the root at tokens[i]: `.name` or `["name"]`."""
    rest = tokens[i + 1 : i + 4]
    if len(rest) >= 2 and rest[0].text == "." and rest[1].kind == "ident":
        is_call = len(rest) == 3 and rest[2].text == "("
        return None if is_call else rest[1].text
    if len(rest) == 3 and rest[0].text == "[" and rest[1].kind == "string" and rest[2].text == "]":
        return _string_value(rest[1].text)
    return None
