"""The decider is pure: importing it loads the language and the declared kinds
(`wovyr.kinds`), and no activity code, store, worker, driver or event loop - the import
contract in pyproject.toml checks the import graph; this checks what a process loads."""

from __future__ import annotations

import json
import subprocess
import sys

from wovyr.activities.kinds import KINDS

FORBIDDEN = ("wovyr.activities", "wovyr.store", "wovyr.worker", "wovyr.platform", "httpx")


def loaded_by(statement: str) -> dict[str, object]:
    code = (
        "import json, sys\n"
        f"{statement}\n"
        "from wovyr.kinds import DECLARED\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'kinds': DECLARED.names()}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


def test_importing_the_decider_loads_no_activity_code_and_declares_every_built_in_kind() -> None:
    loaded = loaded_by("import wovyr.engine.core.decide")
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert "wovyr.engine.core.decide" in modules
    assert [m for m in modules if m.startswith(FORBIDDEN)] == []
    # the language knows every built-in kind all the same: declarations are pure data
    assert loaded["kinds"] == KINDS.names()  # each registered kind, in the same order


def test_parsing_a_definition_validates_a_kind_whose_executor_is_not_loaded() -> None:
    loaded = loaded_by(
        "from wovyr.definition import load_definition\n"
        "load_definition('apiVersion: wovyr/v1\\nkind: Workflow\\nmetadata: {name: w}\\n"
        "activities:\\n  - {id: a, tool: greet, with: {name: ada}}\\n')"
    )
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert [m for m in modules if m.startswith("wovyr.activities")] == []
