"""`wovyr secrets` and `wovyr admin kms` in-process: a value from standard input or a file
(never an argument; one trailing newline dropped), listed without values, deleted (a
missing one exits 4), per tenant; the KMS status, escrow and rotation; a bad root key is
a one-line error, never a traceback."""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main
from wovyr.errors import KmsError
from wovyr.platform.kms import NEW_ROOT_ENV, ROOT_ENV, load_kms
from wovyr.platform.secrets import open_secrets
from wovyr.store import open_store

VALUE = "sk-from-stdin-0042"


class Cli:
    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch):
        self.home, self.capsys, self.mp = home, capsys, mp

    def __call__(self, *args: str, stdin: str = "") -> tuple[int, str, str]:
        self.capsys.readouterr()
        self.mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = main([*args, "--home", str(self.home)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def json(self, *args: str, stdin: str = "") -> Any:
        code, out, err = self(*args, "--json", stdin=stdin)
        assert code == 0, (code, out, err)
        return json.loads(out)

    def resolve(self, tenant: str, name: str) -> str:
        store = open_store(f"sqlite:///{self.home / 'wovyr.db'}")
        try:
            return open_secrets(store, self.home).resolve_secret(tenant, name)
        finally:
            store.close()


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in ("WOVYR_DATABASE_URL", ROOT_ENV, NEW_ROOT_ENV, "WOVYR_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path / "home", capsys, monkeypatch)


def test_set_from_stdin_or_a_file_list_and_delete(cli: Cli, tmp_path: Path) -> None:
    info = cli.json("secrets", "set", "API_KEY", stdin=VALUE + "\n")
    assert (info["name"], info["version"]) == ("API_KEY", 1)
    assert cli.resolve("default", "API_KEY") == VALUE  # the newline was dropped
    source = tmp_path / "value.txt"
    source.write_text("from-a-file\r\n")
    code, out, _ = cli("secrets", "set", "API_KEY", "--from-file", str(source))
    assert code == 0 and "version 2" in out
    assert cli.resolve("default", "API_KEY") == "from-a-file"
    cli.json("secrets", "set", "OTHER", "--tenant", "t2", stdin="value-two")
    listed = cli.json("secrets", "list")
    assert [(s["name"], s["version"]) for s in listed] == [("API_KEY", 2)]
    code, out, _ = cli("secrets", "list")
    assert "API_KEY" in out and VALUE not in out and "from-a-file" not in out
    assert [s["name"] for s in cli.json("secrets", "list", "--tenant", "t2")] == ["OTHER"]
    # another tenant's secret is missing; deleting it exits 4 and changes nothing
    code, _, err = cli("secrets", "delete", "OTHER")
    assert code == 4 and "no secret 'OTHER'" in err
    assert cli.json("secrets", "delete", "OTHER", "--tenant", "t2")["deleted"] == "OTHER"
    assert cli.json("secrets", "list", "--tenant", "t2") == []


def test_a_value_is_never_an_argument_and_bad_input_is_refused(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("secrets", "set", "API_KEY", VALUE)
    assert code == 2 and "unexpected extra argument" in err.lower()
    code, _, err = cli("secrets", "set", "bad-name", stdin=VALUE)
    assert code == 1 and "a secret name is a letter" in err
    code, _, err = cli("secrets", "set", "EMPTY", stdin="\n")
    assert code == 1 and "non-empty" in err
    code, _, err = cli("secrets", "set", "PIN", stdin="4711\n")
    assert code == 1 and "at least 8 characters" in err and "4711" not in err
    code, _, err = cli("secrets", "set", "X", "--from-file", str(tmp_path / "nope"))
    assert code == 1 and "cannot read" in err
    assert cli.json("secrets", "list") == []


def test_kms_status_escrow_and_rotation(cli: Cli) -> None:
    cli.json("secrets", "set", "API_KEY", stdin=VALUE)
    status = cli.json("admin", "kms", "status")
    assert status["mode"] == "development" and status["escrowed_at"] is None
    key = (cli.home / "kms-root.key").read_text().strip()
    assert key not in json.dumps(status)
    code, _, err = cli("admin", "kms", "status")
    assert code == 0 and "no escrow of this root key is recorded" in err
    escrowed = cli.json("admin", "kms", "escrowed", "--by", "ops")
    assert escrowed["key_id"] == status["key_id"]
    assert cli.json("admin", "kms", "status")["escrowed_by"] == "ops"
    rotated = cli.json("admin", "kms", "rotate")
    assert rotated["old_key_id"] == status["key_id"] != rotated["new_key_id"]
    assert rotated["rewrapped"] == 1
    after = cli.json("admin", "kms", "status")
    assert after["key_id"] == rotated["new_key_id"] and after["rotated_at"] is not None
    assert after["escrowed_at"] is None  # the new key is not escrowed yet
    assert after["data_keys"] == {rotated["new_key_id"]: 1}
    assert cli.resolve("default", "API_KEY") == VALUE
    assert load_kms(cli.home, {}, warn=False).key_id == rotated["new_key_id"]


def test_a_root_key_of_the_wrong_length_is_a_one_line_error(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOT_ENV, "abcd")
    code, _, err = cli("secrets", "set", "API_KEY", stdin=VALUE)
    assert code == 1
    assert err.startswith("error: WOVYR_KMS_ROOT_KEY holds 2 bytes; a root key is 32 bytes")
    assert "abcd" not in err
    code, _, err = cli("admin", "kms", "status")
    assert code == 1 and "32 bytes" in err
    monkeypatch.setenv(ROOT_ENV, "ab" * 32)
    code, _, err = cli("admin", "kms", "rotate")
    assert code == 1 and "a rotation needs the new root key" in err


def test_shredding_a_tenant_needs_yes_and_leaves_others_readable(cli: Cli) -> None:
    cli.json("secrets", "set", "A", "--tenant", "t1", stdin="value-one")
    cli.json("secrets", "set", "A", "--tenant", "t2", stdin="value-two")
    code, _, err = cli("admin", "tenants", "shred", "t1")
    assert code == 2 and "--yes" in err
    assert cli.resolve("t1", "A") == "value-one"
    done = cli.json("admin", "tenants", "shred", "t1", "--yes")
    assert done == {
        "tenant": "t1",
        "data_keys_destroyed": 1,
        "executions_failed": 0,
        "scrubbed": True,  # SQLite: neither the file nor its WAL keeps the key
        "remains": [],
    }
    assert cli.resolve("t2", "A") == "value-two"
    with pytest.raises(KmsError, match="was shredded"):
        cli.resolve("t1", "A")


def test_secret_kms_and_shred_changes_are_audited_and_anchors_survive_rotation(
    cli: Cli,
) -> None:
    import getpass
    import sqlite3

    weak = "hunter22"  # low entropy: neither it nor a hash of it may be recorded
    cli.json("secrets", "set", "API_KEY", stdin=weak)
    cli.json("secrets", "set", "API_KEY", "--tenant", "acme", stdin="acme-value")
    cli.json("secrets", "set", "OTHER", "--tenant", "acme", stdin="x-value-1")
    cli.json("secrets", "delete", "OTHER", "--tenant", "acme")
    assert cli("secrets", "delete", "NOPE")[0] == 4  # nothing deleted: nothing audited
    first = cli.json("admin", "audit", "anchor")
    assert first["anchored"] and first["seq"] == 4
    key_id = cli.json("admin", "kms", "status")["key_id"]
    cli.json("admin", "kms", "escrowed", "--by", "ops")
    rotated = cli.json("admin", "kms", "rotate")
    assert rotated["rewrapped"] == 3  # default's, acme's and the audit anchor key's
    assert cli.json("admin", "tenants", "shred", "acme", "--yes")["data_keys_destroyed"] == 1
    listed = cli.json("admin", "audit", "list")
    assert [(r["action"], r["tenant"], r["target"]) for r in listed] == [
        ("secret.set", "default", "API_KEY"),
        ("secret.set", "acme", "API_KEY"),
        ("secret.set", "acme", "OTHER"),
        ("secret.delete", "acme", "OTHER"),
        ("kms.escrowed", "", key_id),
        ("kms.rotate", "", rotated["new_key_id"]),
        ("tenant.shred", "acme", "acme"),
    ]
    assert {r["actor"] for r in listed} == {f"local:{getpass.getuser()}"}
    assert listed[0]["details"] == {"key_version": 1}
    assert listed[4]["details"] == {"by": "ops"}
    assert listed[5]["details"] == {"from": key_id, "rewrapped": 3, "already": 0}
    text = json.dumps(listed)
    assert weak not in text and "acme-value" not in text
    assert hashlib.sha256(weak.encode()).hexdigest() not in text
    # the anchor signed before the rotation and the shred still verifies, with a new one
    assert cli.json("admin", "audit", "anchor")["seq"] == 7
    verdict = cli.json("admin", "audit", "verify")
    assert verdict["ok"] and verdict["anchors"] == 2 and verdict["anchors_verified"]
    assert verdict["note"] is None
    # a record rewritten with a recomputed hash, after the rotation, is still caught
    db = sqlite3.connect(cli.home / "wovyr.db")
    db.execute("UPDATE audit_log SET target = 'other' WHERE seq = 7")
    db.commit()
    db.close()
    code, out, _ = cli("admin", "audit", "verify")
    assert code == 1 and "BROKEN at seq 7" in out
