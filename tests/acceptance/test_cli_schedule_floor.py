"""The store-wide minimum schedule interval reaches the CLI: faster than one second is
refused unless the host sets `WOVYR_MIN_SCHEDULE_INTERVAL_SECONDS` lower."""

from __future__ import annotations

from pathlib import Path

import pytest

from wovyr.cli.main import main

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: tick}
activities:
  - {id: a, set: {v: 1}}
"""


def test_a_schedule_faster_than_the_floor_is_refused_until_the_host_lowers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    flow = tmp_path / "tick.yaml"
    flow.write_text(FLOW)
    create = ["schedules", "create", "fast", "--file", str(flow), "--every", "500ms"]
    assert main(create) == 1
    assert "minimum interval" in capsys.readouterr().err
    monkeypatch.setenv("WOVYR_MIN_SCHEDULE_INTERVAL_SECONDS", "0.1")
    assert main(create) == 0
