"""The worker runs every kind the same way: it names none of them (a kind declares what its
attempts need, `ActivityKind.needs`, and the worker hands exactly that)."""

from __future__ import annotations

import re
from pathlib import Path

import wovyr.activities.builtin  # registers the built-in kinds
import wovyr.worker
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import KINDS, NEED_FIELDS, NEEDS

WORKER = Path(wovyr.worker.__file__).parent


def test_no_module_of_the_worker_names_a_kind_it_runs() -> None:
    run_by_workers = sorted(k.name for k in KINDS.kinds() if k.settle == "worker")
    assert {"agent", "llm", "mcp", "memory", "shell", "workflow"} <= set(run_by_workers)
    alternatives = "|".join(map(re.escape, run_by_workers))
    named = re.compile(rf"""["']({alternatives})["']""")
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(WORKER.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if named.search(line)
    ]
    assert found == []


def test_every_service_a_kind_may_need_is_a_field_of_dispatch() -> None:
    fields = set(Dispatch.__dataclass_fields__)
    assert set(NEED_FIELDS) == NEEDS
    assert set(NEED_FIELDS.values()) <= fields
    for kind in KINDS.kinds():
        assert kind.needs <= NEEDS, kind.name
