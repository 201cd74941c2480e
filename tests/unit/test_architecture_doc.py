"""docs/architecture.md is the map of the code: every module under src/wovyr is named on
it (by its path below src/wovyr, a package's __init__ by its folder), and every internals
page it links to exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "wovyr"
DOC = ROOT / "docs" / "architecture.md"


def module_names() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if path.name == "__init__.py" and rel != "__init__.py":
            rel = rel.removesuffix("__init__.py")  # a package: `engine/core/`
        names.append(rel)
    return names


def test_every_module_is_named_on_the_map() -> None:
    text = DOC.read_text()
    unnamed = [name for name in module_names() if f"`{name}`" not in text]
    assert unnamed == [], f"name these in docs/architecture.md: {unnamed}"


def test_the_map_knows_modules_that_exist() -> None:
    names = module_names()
    assert "engine/core/decide.py" in names and "kinds/steps.py" in names
    assert len(names) > 200


def test_every_internals_page_it_links_exists() -> None:
    links = re.findall(r"\]\((internals/[^)#]+)\)", DOC.read_text())
    assert links
    assert [link for link in links if not (DOC.parent / link).is_file()] == []
