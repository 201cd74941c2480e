"""Parsing: YAML 1.2 scalars, JSON, marks, limits, and refusing what YAML should not do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wovyr.definition import Limits, load_definition, load_definition_file, parse_document
from wovyr.definition import parse as parse_module
from wovyr.errors import DefinitionError, Problem


def parse_problems(text: str | bytes, limits: Limits | None = None) -> list[Problem]:
    with pytest.raises(DefinitionError) as info:
        parse_document(text, "doc.yaml", limits)
    return info.value.problems


def at(problem: Problem) -> tuple[int | None, int | None]:
    return problem.line, problem.column


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO", "NO"),
        ("no", "no"),
        ("on", "on"),
        ("yes", "yes"),
        ("12:30", "12:30"),
        ("1_000", "1_000"),
        ("0755", 755),  # YAML 1.2 has no implicit octal
        ("0o17", 15),
        ("0x1f", 31),
        ("-12", -12),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("", None),
        ("'true'", "true"),
        ('"12"', "12"),
        ("2024-01-01", "2024-01-01"),  # no implicit timestamps either
    ],
)
def test_scalars_follow_the_yaml_1_2_core_schema(text: str, expected: object) -> None:
    data, _ = parse_document(f"v: {text}\n")
    assert data == {"v": expected}
    assert type(data["v"]) is type(expected)


def test_block_scalars_and_keys_are_strings() -> None:
    data, _ = parse_document("1: one\ntrue: yes\nnull: x\ntext: |\n  a\n  b\n")
    assert data == {"1": "one", "true": "yes", "null": "x", "text": "a\nb\n"}


def test_json_documents_parse_with_marks() -> None:
    text = json.dumps({"a": [1, {"b": "x"}], "c": None}, indent=2)
    data, smap = parse_document(text, "doc.json")
    assert data == {"a": [1, {"b": "x"}], "c": None}
    assert smap.locate(("a", 1, "b")) == (5, 12)
    assert smap.locate(("c",), key=True) == (8, 3)


def test_source_map_points_at_values_and_keys() -> None:
    _, smap = parse_document("top:\n  list:\n    - first\n    - {k: v}\n")
    assert smap.locate(("top", "list", 0)) == (3, 7)
    assert smap.locate(("top", "list", 1, "k")) == (4, 11)
    assert smap.locate(("top", "list", 1, "k"), key=True) == (4, 8)
    assert smap.locate(("top", "missing", 3)) == smap.locate(("top",))


def test_a_utf8_bom_is_accepted() -> None:
    data, _ = parse_document(b"\xef\xbb\xbfa: 1\n")
    assert data == {"a": 1}


@pytest.mark.parametrize(
    ("text", "message", "where"),
    [
        ("a: [1, 2\n", "invalid YAML", (2, 1)),
        ("a: b: c\n", "mapping values are not allowed", (1, 5)),
        ("a:\n\t- b\n", "invalid YAML", (2, 1)),
        ("a: 1\n---\nb: 2\n", "more than one document", (2, 1)),
        ("a: &x 1\n", "anchors are not allowed (&x)", (1, 4)),
        ("a: 1\nb: !!str 2\n", "tags are not allowed (!!str)", (2, 4)),
        ("a: !include x.yaml\n", "tags are not allowed (!include)", (1, 4)),
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' (first at line 1)", (3, 1)),
        ("a: .nan\n", "not a finite number", (1, 4)),
        ("a: -.Inf\n", "not a finite number", (1, 4)),
        ("a: 1e999\n", "not a finite number", (1, 4)),
        ("a: " + "9" * 30 + "\n", "more than 64 bits", (1, 4)),
        ("a: " + "9" * 5000 + "\n", "more than 64 bits", (1, 4)),
        ("a: b\x00c\n", "control character (#x0000)", (1, 5)),
        ("? [a]\n: 1\n", "a mapping key must be a string", (1, 3)),
    ],
)
def test_parse_problems_are_located(text: str, message: str, where: tuple[int, int]) -> None:
    found = parse_problems(text)
    assert any(message in p.message for p in found), [p.format() for p in found]
    assert at(found[0]) == where
    assert found[0].file == "doc.yaml"


def test_soft_problems_are_all_reported() -> None:
    found = parse_problems("a: &x 1\nb: !!int 2\nc: 3\nc: 4\n")
    assert [p.line for p in found] == [1, 2, 4]


def test_a_duplicate_value_does_not_overwrite_the_first_marks() -> None:
    with pytest.raises(DefinitionError):
        parse_document("a: {x: 1}\nb: 2\na: {x: 2}\n")
    builder_data = "a: {x: 1}\nb: 2\n"
    _, smap = parse_document(builder_data)
    assert smap.locate(("a", "x")) == (1, 8)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the document is empty"),
        ("# only a comment\n", "the document is empty"),
        ("---\n", "the document is empty"),
        ("null\n", "the document is empty"),
        ("- a\n- b\n", "must be a mapping"),
        ("just text\n", "must be a mapping"),
    ],
)
def test_documents_must_be_a_non_empty_mapping(text: str, message: str) -> None:
    (problem,) = parse_problems(text)
    assert message in problem.message
    assert at(problem) == ((2, 1) if text == "---\n" else (1, 1))


def test_non_utf8_is_located_at_the_bad_byte() -> None:
    (problem,) = parse_problems("a: 1\nb: caf\xe9\n".encode("latin-1"))
    assert "not valid UTF-8 (byte 0xe9)" in problem.message
    assert at(problem) == (2, 7)


def test_utf16_is_refused_with_a_hint() -> None:
    (problem,) = parse_problems("a: 1\n".encode("utf-16"))
    assert "UTF-16" in problem.message


def test_byte_limit_is_checked_before_parsing() -> None:
    (problem,) = parse_problems("a: [" + "1," * 100 + "1]\n", Limits(max_bytes=50))
    assert "limit 50" in problem.message


def test_depth_limit() -> None:
    parse_document("a: " + "[" * 9 + "]" * 9, limits=Limits(max_depth=10))
    (problem,) = parse_problems("a: " + "[" * 10 + "]" * 10, Limits(max_depth=10))
    assert "deeper than 10 levels" in problem.message
    assert at(problem) == (1, 13)


def test_node_limit() -> None:
    (problem,) = parse_problems("a: [" + "1, " * 20 + "1]\n", Limits(max_nodes=10))
    assert "more than 10 values" in problem.message


def test_scalar_limit() -> None:
    (problem,) = parse_problems("a: " + "x" * 101 + "\n", Limits(max_scalar_chars=100))
    assert "101 characters long (limit 100)" in problem.message


def test_load_definition_file_reports_unreadable_paths(tmp_path: Path) -> None:
    for path, message in [
        (tmp_path, "is a directory"),
        (tmp_path / "missing.yaml", "No such file"),
    ]:
        with pytest.raises(DefinitionError) as info:
            load_definition_file(path)
        (problem,) = info.value.problems
        assert message in problem.message
        assert (problem.file, problem.line, problem.column) == (str(path), 1, 1)


def test_load_definition_file_reads_at_most_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: " + b"x" * 5000)
    with pytest.raises(DefinitionError) as info:
        load_definition_file(big, Limits(max_bytes=1000))
    assert "larger than 1000 bytes" in info.value.problems[0].message


def test_load_definition_accepts_str_and_bytes() -> None:
    text = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: t}\n"
    text += "activities: [{id: a, set: {}}]\n"
    assert load_definition(text).name == "t"
    assert load_definition(text.encode()).name == "t"


PURE_PARSER_CASES = [
    "a: [1, {b: NO}]\nc: 12:30\n",
    "top:\n  - x\n  - {k: 0o17}\n",
    '{"json": [true, null, 1.5]}',
    "a: [1, 2\n",
    "a: &x 1\nb: *x\n",
    "a: !tag 1\na: 2\n",
    "a: 1\n---\nb: 2\n",
    "é: b\x00\n",
    "a: " + "[" * 70 + "]" * 70,
]


@pytest.mark.parametrize("text", PURE_PARSER_CASES)
def test_the_pure_python_parser_agrees_with_libyaml(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def outcome() -> object:
        try:
            data, smap = parse_document(text)
        except DefinitionError as err:
            return [(p.line, p.column) for p in err.problems]
        return data, smap.nodes, smap.keys

    with_libyaml = outcome()
    monkeypatch.setattr(parse_module, "_CParser", None)
    assert outcome() == with_libyaml
