"""`wovyr dev`'s inputs: the workflow files it finds, the sources it watches, and clear usage
errors (exit 2, no traceback) for a missing path or an activity module that is not there.
The running command (serve, register, reload) is tests/acceptance/test_cli_dev.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from wovyr.cli.commands_dev import module_sources, workflow_files
from wovyr.cli.main import main


def test_workflow_files_from_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "flows" / "deep").mkdir(parents=True)
    for name in ("flows/a.yaml", "flows/deep/b.yml", "flows/notes.txt", "one.yaml"):
        (tmp_path / name).write_text("x")
    found = workflow_files([tmp_path / "flows", tmp_path / "one.yaml", tmp_path / "flows"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "flows/a.yaml",
        "flows/deep/b.yml",
        "one.yaml",
    ]


def test_module_sources_are_found_without_importing(tmp_path: Path) -> None:
    assert module_sources([str(tmp_path / "tools.py")]) == [(tmp_path / "tools.py").resolve()]
    [email] = module_sources(["email"])  # a package: its directory
    assert email.is_dir() and email.name == "email"
    [json_file] = module_sources(["json.decoder"])
    assert json_file.name == "decoder.py"


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = ["--home", str(tmp_path / "home")]
    assert main(["dev", str(tmp_path / "missing"), *home]) == 2
    err = capsys.readouterr().err
    assert "missing does not exist" in err and "Traceback" not in err
    assert main(["dev", "-a", "no_such_module_here", *home]) == 2
    err = capsys.readouterr().err
    assert "no module 'no_such_module_here'" in err and "Traceback" not in err
