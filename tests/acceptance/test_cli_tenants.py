"""`wovyr admin tenants list|show|set` on the embedded store: the host's administrator opens
and closes what a tenant's shell and http steps may reach, and the engine obeys at once."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.isolation import require_isolation

from wovyr.cli.main import main
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.store.sqlite import SQLiteStore

SHELL = f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: s}}
activities:
  - id: step
    shell: {{argv: ["{sys.executable}", "-c", "print(1)"]}}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    monkeypatch.delenv("WOVYR_DB", raising=False)
    monkeypatch.delenv("WOVYR_STORE_URL", raising=False)
    return tmp_path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_new_tenant_is_restricted_and_default_is_the_trusted_local_owner(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beta = run_json(capsys, "admin", "tenants", "show", "beta")
    assert (beta["source"], beta["policy"]["shell"], beta["policy"]["private_network"]) == (
        "default", False, False,
    )  # fmt: skip
    owner = run_json(capsys, "admin", "tenants", "show", "default")
    assert owner["policy"]["shell"] is True and owner["policy"]["private_network"] is True
    listed = run_json(capsys, "admin", "tenants", "list")
    assert [t["tenant"] for t in listed] == ["default"]


def test_set_opens_a_tenant_and_the_engine_obeys_then_default_closes_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_ = run_json(
        capsys, "admin", "tenants", "set", "beta", "--shell", "--shell-command", sys.executable,
        "--allow-network", "10.0.0.0/8", "--allow-host", "db.internal:5432", "--cpu-seconds", "5",
    )  # fmt: skip
    policy = set_["policy"]
    assert set_["source"] == "set" and set_["updated_by"] == "cli"
    assert policy["shell"] is True and policy["shell_commands"] == [sys.executable]
    assert policy["allow_networks"] == ["10.0.0.0/8"]
    assert policy["allow_hosts"] == ["db.internal:5432"]
    assert policy["shell_cpu_seconds"] == 5
    assert policy["private_network"] is False  # from the tenant's restricted default

    store = SQLiteStore(home / "wovyr.db")
    try:
        engine = Engine(store).for_tenant("beta")
        assert engine.start(SHELL).status == "running"  # accepted now
        # later flags change only what they name
        after = run_json(capsys, "admin", "tenants", "set", "beta", "--no-shell")
        assert after["policy"]["shell"] is False and after["policy"]["shell_cpu_seconds"] == 5
        with pytest.raises(InputError, match="tenant 'beta'"):
            engine.start(SHELL)
        back = run_json(capsys, "admin", "tenants", "set", "beta", "--preset", "default")
        assert back["source"] == "default" and back["policy"]["shell"] is False
        assert [t["tenant"] for t in run_json(capsys, "admin", "tenants", "list")] == [
            "beta", "default",
        ]  # fmt: skip
    finally:
        store.close()


def test_a_policy_file_and_presets(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "policy.json"
    file.write_text(json.dumps({"shell": True, "shell_env": ["PATH", "LANG"]}))
    got = run_json(capsys, "admin", "tenants", "set", "beta", "--policy-file", str(file))
    assert got["policy"]["shell_env"] == ["PATH", "LANG"] and got["policy"]["shell"] is True
    trusted = run_json(capsys, "admin", "tenants", "set", "beta", "--preset", "trusted")
    assert trusted["policy"]["private_network"] is True and trusted["source"] == "set"
    locked = run_json(capsys, "admin", "tenants", "set", "default", "--preset", "restricted")
    assert locked["policy"]["shell"] is False


def test_a_shell_grant_is_followed_by_a_warning_of_what_it_grants(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_isolation()
    granted = main(["admin", "tenants", "set", "beta", "--shell", "--shell-command", "cat"])
    isolated = capsys.readouterr()
    unisolated_code = main(["admin", "tenants", "set", "beta", "--no-shell-isolation", "--json"])
    unisolated = capsys.readouterr()
    closed_code = main(["admin", "tenants", "set", "beta", "--no-shell"])
    closed = capsys.readouterr()

    assert granted == unisolated_code == closed_code == 0
    assert "shell isolated (1 commands)" in isolated.out
    assert "WARNING: tenant 'beta' may run programs" in isolated.err
    assert "names programs, not what they do" in isolated.err
    assert "Isolated:" in isolated.err and "This host can isolate shell steps." in isolated.err
    policy = json.loads(unisolated.out)["policy"]  # stdout stays JSON; the warning is stderr
    assert policy["shell"] is True and policy["shell_isolation"] is False
    assert "UNISOLATED" in unisolated.err and "KMS root key" in unisolated.err
    assert closed.err == ""  # no shell, nothing to warn of


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--allow-network", "10.0.0.0/33"], 1, "not a network in CIDR form"),
        (["--allow-host", "db"], 1, "not host:port"),
        (["--cpu-seconds", "0"], 2, "--cpu-seconds"),
        (["--shell-command", "git", "--any-command"], 2, "exclude each other"),
        (["--policy-file", "{file}"], 1, "unknown policy field 'shel'"),
    ],
)
def test_bad_settings_are_refused_and_nothing_changes(
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    says: str,
) -> None:
    file = tmp_path / "bad.json"
    file.write_text(json.dumps({"shel": True}))
    argv = [a.replace("{file}", str(file)) for a in argv]
    assert main(["admin", "tenants", "set", "beta", *argv]) == code
    assert says in capsys.readouterr().err
    assert run_json(capsys, "admin", "tenants", "show", "beta")["source"] == "default"


def test_a_bad_tenant_name_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "tenants", "set", "../etc", "--shell"]) == 1
    assert "a tenant is 1-64 letters" in capsys.readouterr().err
