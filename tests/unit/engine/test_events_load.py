"""`wovyr.events` loads its typed records (`wovyr.events.records`) when one of them is first
asked for: importing `Event` and `EventType` does not build them. Checked in a fresh
interpreter (this one has loaded them)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wovyr import events
from wovyr.events import records

FRESH = """
import json, sys
import wovyr.events as events
from wovyr.events import Event, EventType, model_calls
loaded = ["wovyr.events.records" in sys.modules]
from wovyr.events import ActivityStarted
loaded.append("wovyr.events.records" in sys.modules)
missing = [n for n in events.__all__ if n not in vars(events)]
print(json.dumps({"loaded": loaded, "missing": missing}))
"""


def test_the_records_load_when_one_is_first_asked_for() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, text=True, check=True
    ).stdout
    report = json.loads(out)
    assert report["loaded"] == [False, True]
    assert report["missing"] == []  # every record is then a name of the package


def test_the_package_names_the_records_of_its_module() -> None:
    assert set(records.__all__) < set(events.__all__)
    for name in records.__all__:
        assert getattr(events, name) is getattr(records, name)
    with pytest.raises(AttributeError, match="no attribute 'ActivityStartd'"):
        events.ActivityStartd  # noqa: B018
