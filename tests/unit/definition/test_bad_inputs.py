"""The issue's list of bad inputs: each gives a located DefinitionError, fast, and through the
CLI exit code 1 with FILE:LINE:COL and no traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.counting import counting_calls

from wovyr.cli.main import main
from wovyr.definition import load_definition_file
from wovyr.errors import DefinitionError

from .conftest import HEADER

ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def _write(content: str | bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / "bad.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return make


def _directory(tmp: Path) -> Path:
    (tmp / "a-directory.yaml").mkdir()
    return tmp / "a-directory.yaml"


def _expression(src: str) -> Callable[[Path], Path]:
    return _write(HEADER + 'activities:\n  - id: a\n    set:\n      v: "${{ ' + src + ' }}"\n')


BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "malformed": (_write("apiVersion: wovyr/v1\nkind: [Workflow\n"), "invalid YAML"),
    "alias bomb": (_write(ALIAS_BOMB), "anchors are not allowed"),
    "10 MB scalar": (_write("a: " + "x" * 10_000_000 + "\n"), "larger than"),
    "10,000-deep nesting": (_write("a: " + "[" * 10_000 + "]" * 10_000 + "\n"), "deeper"),
    "python tag": (_write("a: !!python/object/apply:os.system [ls]\n"), "tags are not allowed"),
    "custom tag": (_write("a: !secret value\n"), "tags are not allowed"),
    "duplicate keys": (_write(HEADER + "kind: Workflow\n"), "duplicate key 'kind'"),
    "typo": (
        _write(HEADER + "activities:\n  - id: a\n    set: {}\n    timout: 5s\n"),
        "did you mean 'timeout'?",
    ),
    "cycle": (
        _write(
            HEADER + "activities:\n  - {id: a, needs: [b], set: {}}\n"
            "  - {id: b, needs: [a], set: {}}\n"
        ),
        "a -> b -> a",
    ),
    "dunder": (_expression("''.__class__.__mro__"), "'__' are not allowed"),
    "range": (_expression("range(10**9) | list"), "invalid expression"),
    "string repeat": (_expression("'a' * 10**9"), "invalid expression"),
    "non-UTF-8": (_write("a: caf\xe9\n".encode("latin-1")), "not valid UTF-8"),
    "binary": (_write(bytes(range(256)) * 4), "not valid UTF-8"),
    "empty": (_write(""), "empty"),
    "directory": (_directory, "is a directory"),
    "missing": (lambda tmp: tmp / "missing.yaml", "cannot read the file"),
}


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Load one definition with an expression first: the parser's and the evaluator's lazy
    imports (tens of thousands of calls) are paid once per process, not by whichever case
    happens to run first in it (a case run alone failed its bound on imports alone)."""
    path = tmp_path_factory.mktemp("warm") / "ok.yaml"
    path.write_text(
        HEADER + "activities:\n  - {id: a, set: {x: '${{ 1 + 1 }}'}}\n", encoding="utf-8"
    )
    load_definition_file(path)


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gives_a_located_error_fast(case: str, tmp_path: Path, warm: None) -> None:
    make, expected = BAD_INPUTS[case]
    path = make(tmp_path)
    with counting_calls() as work, pytest.raises(DefinitionError) as info:
        load_definition_file(path)
    assert work.total < 20_000, f"{case} took {work.total} calls"  # at most about 1,600 today
    problems = info.value.problems
    assert any(expected in p.format() for p in problems), [p.format() for p in problems]
    for problem in problems:
        assert problem.file == str(path)
        assert problem.line is not None and problem.line >= 1
        assert problem.column is not None and problem.column >= 1


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_through_the_cli(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expected = BAD_INPUTS[case]
    path = make(tmp_path)
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: ", out, re.MULTILINE), out
    assert expected in out
    assert "Traceback" not in out + err


def test_the_alias_bomb_is_refused_before_any_alias_expands() -> None:
    from wovyr.definition import parse_document

    with pytest.raises(DefinitionError) as info:
        parse_document(ALIAS_BOMB)
    messages = [p.message for p in info.value.problems]
    # The anchors are reported, the first alias stops parsing: nothing was ever copied.
    assert messages[-1] == "aliases are not allowed (*a)"
