"""Release basics: one version everywhere, the license text, the changelog's shape."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from click.testing import CliRunner

from wovyr import __version__
from wovyr.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_is_written_once_and_shown_by_the_cli() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.dev\d+)?", __version__)
    assert version("wovyr") == __version__  # pyproject reads src/wovyr/_version.py
    result = CliRunner().invoke(cli, ["--version"], prog_name="wovyr")
    assert result.exit_code == 0
    assert result.output.strip() == f"wovyr, version {__version__}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"(?m)^version\s*=", pyproject)


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_changelog_keeps_a_changelog_and_has_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    released = re.findall(r"(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", text)
    assert released, "no released version section"
    assert __version__ in released, f"no section for {__version__}"
    for name in released:  # every section has its comparison link
        assert re.search(rf"(?m)^\[{re.escape(name)}\]: https://", text)
