"""`wovyr validate` and `wovyr schema` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wovyr.definition
from wovyr.cli.main import main
from wovyr.definition import schema_text

from .conftest import EXAMPLES, HEADER


def test_all_examples_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *map(str, EXAMPLES)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"{p}: ok" for p in EXAMPLES]
    assert err == ""


def test_problems_of_several_files_are_all_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEADER + "activities:\n  - {id: a, set: {}, timout: 1s}\n  - {id: a, set: {}}\n")
    assert main(["validate", str(EXAMPLES[0]), str(bad), str(tmp_path / "gone.yaml")]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{EXAMPLES[0]}: ok",
        f"{bad}:5:22: unknown field 'timout' (at activities[0].timout); did you mean 'timeout'?",
        f"{bad}:6:10: duplicate activity id 'a' (first at line 5) (at activities[1].id)",
        f"{tmp_path / 'gone.yaml'}:1:1: cannot read the file: No such file or directory",
    ]
    assert err.strip() == "3 problem(s) in 2 of 3 file(s)"


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\na: 2\n")
    assert main(["validate", "--json", str(bad), str(EXAMPLES[0])]) == 1
    out, _ = capsys.readouterr()
    assert json.loads(out) == [
        {
            "file": str(bad),
            "line": 2,
            "column": 1,
            "path": "",
            "message": "duplicate key 'a' (first at line 1)",
            "hint": None,
        }
    ]
    assert main(["validate", "--json", str(EXAMPLES[0])]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_no_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 2
    assert "Missing argument" in capsys.readouterr().err


def test_schema_prints_or_writes_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == schema_text()
    target = tmp_path / "schema.json"
    assert main(["schema", "--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == schema_text()
    assert main(["schema", "-o", str(tmp_path / "no" / "such" / "dir.json")]) == 1


def test_the_package_exports_a_sorted_all() -> None:
    names = wovyr.definition.__all__
    assert names == sorted(names)
    assert all(hasattr(wovyr.definition, name) for name in names)
