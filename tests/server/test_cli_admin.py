"""`wovyr admin keys create|list|revoke` against the embedded store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wovyr.cli.main import main
from wovyr.platform.auth import Authenticator
from wovyr.store.sqlite import SQLiteStore


def test_keys_create_list_revoke(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    assert (
        main(
            [
                "admin",
                "keys",
                "create",
                "--tenant",
                "acme",
                "--role",
                "operator",
                "--name",
                "ci",
                "--json",
            ]
        )
        == 0
    )
    created = json.loads(capsys.readouterr().out)
    assert created["token"].startswith("wvr_") and created["tenant"] == "acme"

    store = SQLiteStore(tmp_path / "wovyr.db")
    try:
        principal = Authenticator(store).verify(created["token"])
        assert principal is not None and principal.role == "operator"
    finally:
        store.close()

    assert main(["admin", "keys", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [k["id"] for k in listed] == [created["id"]]
    assert created["token"] not in json.dumps(listed)

    assert main(["admin", "keys", "list"]) == 0
    table = capsys.readouterr().out
    assert created["id"] in table and "active" in table

    assert main(["admin", "keys", "revoke", created["id"]]) == 0
    capsys.readouterr()
    assert main(["admin", "keys", "list", "--tenant", "acme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["revoked_at"] is not None
    assert main(["admin", "keys", "list", "--tenant", "other", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_keys_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    assert main(["admin", "keys", "revoke", "key_missing"]) == 4  # not found
    assert "not found" in capsys.readouterr().err
    assert main(["admin", "keys", "create", "--tenant", "a b", "--role", "viewer"]) == 1
    assert main(["admin", "keys", "create", "--tenant", "a", "--role", "root"]) == 2


def test_admin_commands_are_audited_as_the_local_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import getpass

    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    argv = ["admin", "keys", "create", "--tenant", "acme", "--role", "viewer", "--json"]
    assert main(argv) == 0
    key_id = json.loads(capsys.readouterr().out)["id"]
    assert main(["admin", "keys", "revoke", key_id]) == 0
    assert main(["admin", "tenants", "set", "acme", "--no-shell"]) == 0
    assert main(["admin", "quotas", "set", "acme", "--executions-per-day", "5"]) == 0
    assert main(["admin", "keys", "revoke", "key_nope"]) == 4  # not found: nothing audited
    capsys.readouterr()
    assert main(["admin", "audit", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["action"], r["tenant"], r["target"]) for r in listed] == [
        ("api_key.create", "acme", key_id),
        ("api_key.revoke", "acme", key_id),
        ("tenant.policy", "acme", "acme"),
        ("tenant.quotas", "acme", "acme"),
    ]
    assert {r["actor"] for r in listed} == {f"local:{getpass.getuser()}"}
    assert main(["admin", "audit", "list", "--tenant", "other", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["admin", "audit", "verify"]) == 0
