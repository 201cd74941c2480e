"""`wovyr admin limits set|list|delete` in-process: a tenant's declared buckets, per tenant,
and the errors (bad numbers, a missing key) without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wovyr.cli.main import main


def run(home: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*args, "--home", str(home)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_limits_are_set_listed_and_deleted_per_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    home = tmp_path / "home"
    code, out, _ = run(home, capsys, "admin", "limits", "set", "openai", "--limit", "500",
                       "--per", "1m", "--burst", "50", "--tenant", "acme", "--json")  # fmt: skip
    assert code == 0
    [row] = json.loads(out)
    assert (row["key"], row["burst"], row["declared"]) == ("openai", 50.0, True)
    assert row["per_second"] == pytest.approx(500 / 60)
    code, out, _ = run(home, capsys, "admin", "limits", "list", "--tenant", "acme", "--json")
    assert [r["key"] for r in json.loads(out)] == ["openai"]
    code, out, _ = run(home, capsys, "admin", "limits", "list", "--json")  # tenant default
    assert json.loads(out) == []
    code, _, err = run(home, capsys, "admin", "limits", "set", "x", "--limit", "0")
    assert code == 2 and "--limit" in err
    code, _, err = run(home, capsys, "admin", "limits", "set", "x", "--limit", "1", "--per", "soon")
    assert code == 2 and "--per" in err
    code, out, _ = run(home, capsys, "admin", "limits", "delete", "openai", "--tenant", "acme")
    assert code == 0 and "deleted" in out
    code, _, err = run(home, capsys, "admin", "limits", "delete", "openai", "--tenant", "acme")
    assert code == 4 and "rate limit openai not found" in err
    # each change is in the audit chain (and the refused second delete is not)
    code, out, _ = run(home, capsys, "admin", "audit", "list", "--tenant", "acme", "--json")
    assert code == 0
    trail = [(r["action"], r["target"]) for r in json.loads(out)]
    assert trail == [("limits.set", "openai"), ("limits.delete", "openai")]
    code, out, _ = run(home, capsys, "admin", "audit", "verify", "--json")
    assert code == 0 and json.loads(out)["ok"]
