"""Every environment variable the code reads is in the settings table (`wovyr.settings`,
and so in docs/settings.md, generated from it and up to date), the table names none that the
code does not read, and nothing reads the environment around the table."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from wovyr.settings import VARIABLES

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "wovyr"
# a name as the code reads it: a string literal (read("X"), ENV = "X")
LITERAL = re.compile(r"""["']((?:WOVYR|OTEL)_[A-Z0-9_]*[A-Z0-9])["']""")
# a name the image's entry point reads: $NAME or ${NAME...}
SHELL = re.compile(r"\$\{?(WOVYR_[A-Z0-9_]*[A-Z0-9])")
ROW = re.compile(r"^\| `((?:WOVYR|OTEL)_[A-Z0-9_]+)` \|", re.MULTILINE)
# what reads the environment itself, around the table
DIRECT = re.compile(r"os\.environ\.get|os\.getenv|environ\(\)\[|environ\(\)\.get|envvar=")


def _script() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))  # its helper module beside it
    try:
        return _load_script()
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("settings_doc", ROOT / "scripts/settings_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code_text(path: Path) -> str:
    text = path.read_text()
    if path == SRC / "settings.py":  # the table itself names every one: only what reads
        text = text[text.index("_BY_NAME = ") :]
    return text


def _read_by_the_code() -> set[str]:
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        text = _code_text(path)
        for name in LITERAL.findall(text):  # not a module constant's name in its __all__
            if not re.search(rf"^{name}\s*=", text, re.MULTILINE):
                names.add(name)
    names |= set(SHELL.findall((ROOT / "deploy" / "entrypoint.sh").read_text()))
    return names


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    read = _read_by_the_code()
    assert {"WOVYR_HOME", "WOVYR_DATABASE_URL", "WOVYR_PORT"} <= read  # the scan finds them
    known = {v.name for v in VARIABLES} | {a for v in VARIABLES for a in v.aliases}
    missing = sorted(read - known)
    assert not missing, f"add these to VARIABLES in wovyr/settings.py: {missing}"


def test_the_table_names_only_what_the_code_reads() -> None:
    read = _read_by_the_code()
    stale = sorted({v.name for v in VARIABLES} - read)
    assert not stale, f"VARIABLES names variables nothing reads: {stale}"


def test_the_page_is_generated_from_the_table_and_up_to_date() -> None:
    committed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == _script().document(), "run: python scripts/settings_doc.py"
    rows = set(ROW.findall(committed.partition("## Deprecated names")[0]))
    public = {v.name for v in VARIABLES if not v.internal}
    assert rows == public  # one row each
    for var in VARIABLES:  # the internal ones are named too, and each old name
        assert f"`{var.name}`" in committed
        assert all(f"`{alias}`" in committed for alias in var.aliases)
        if var.file_variable:
            assert f"`{var.file_variable}`" in committed


def test_the_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    script = _script()
    script.TARGET = tmp_path / "settings.md"
    assert script.main(["--check"]) == 1  # missing
    script.TARGET.write_text("# old\n")
    assert script.main(["--check"]) == 1
    assert script.main([]) == 0
    assert script.main(["--check"]) == 0


def test_nothing_reads_the_environment_around_the_table() -> None:
    """Settings come through `wovyr.settings.lookup` (where aliases and `_FILE` work):
    no `os.environ.get`, `getenv` or click `envvar=` elsewhere."""
    around = {SRC / "settings.py", SRC / "withheld.py"}
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in sorted(SRC.rglob("*.py"))
        if path not in around
        for match in DIRECT.finditer(path.read_text())
    ]
    assert found == []


def test_the_secret_variables_are_the_withheld_ones_and_have_a_file_form() -> None:
    from wovyr.withheld import SECRET_VARIABLES

    secret = {v.name for v in VARIABLES if v.secret}
    assert secret >= SECRET_VARIABLES
    assert {v.file_variable for v in VARIABLES if v.secret and not v.internal} >= {
        "WOVYR_DATABASE_URL_FILE",
        "WOVYR_API_KEY_FILE",
        "WOVYR_KMS_ROOT_KEY_FILE",
        "WOVYR_KMS_NEW_ROOT_KEY_FILE",
        "WOVYR_BACKUP_PASSPHRASE_FILE",
        "WOVYR_LLM_API_KEY_FILE",
    }
