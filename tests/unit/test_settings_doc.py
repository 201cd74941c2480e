"""Every environment variable the code reads is in the settings table (docs/settings.md),
and the table names none that the code does not read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a name as the code reads it: a string literal (env.get("X"), ENV = "X", envvar="X")
LITERAL = re.compile(r"""["']((?:WOVYR|OTEL)_[A-Z0-9_]*[A-Z0-9])["']""")
# a name the image's entry point reads: $NAME or ${NAME...}
SHELL = re.compile(r"\$\{?(WOVYR_[A-Z0-9_]*[A-Z0-9])")
ROW = re.compile(r"^\| `((?:WOVYR|OTEL)_[A-Z0-9_]+)` \|", re.MULTILINE)
INTERNAL = re.compile(r"`(WOVYR_[A-Z0-9_]+)`")


def _read_by_the_code() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "src" / "wovyr").rglob("*.py"):
        text = path.read_text()
        for name in LITERAL.findall(text):  # not a module constant's name in its __all__
            if not re.search(rf"^{name}\s*=", text, re.MULTILINE):
                names.add(name)
    names |= set(SHELL.findall((ROOT / "deploy" / "entrypoint.sh").read_text()))
    return names


def _documented() -> tuple[set[str], set[str]]:
    text = (ROOT / "docs" / "settings.md").read_text()
    table, _, internal = text.partition("## Internal")
    return set(ROW.findall(table)), set(INTERNAL.findall(internal))


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    read = _read_by_the_code()
    table, internal = _documented()
    assert {"WOVYR_HOME", "WOVYR_DATABASE_URL", "WOVYR_PORT"} <= read  # the scan finds them
    missing = sorted(read - table - internal)
    assert not missing, f"add these to docs/settings.md: {missing}"


def test_the_table_names_only_what_the_code_reads() -> None:
    read = _read_by_the_code()
    table, internal = _documented()
    stale = sorted((table | internal) - read)
    assert not stale, f"docs/settings.md names variables nothing reads: {stale}"
