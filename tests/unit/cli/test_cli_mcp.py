"""`wovyr mcp add|list|show|remove` in-process over a real SQLite home: stdio and HTTP
servers per tenant (another tenant's answers like a missing one: exit 4), every change
audited as the local user, header secrets stored by NAME; a restricted tenant cannot add a
stdio server (a clear error that stores nothing); bad names, URLs and flags refused."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main
from wovyr.store import open_store


class Cli:
    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch):
        self.home, self.capsys, self.mp = home, capsys, mp

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        self.mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        code = main([*args, "--home", str(self.home)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, (code, out, err)
        return json.loads(out)

    def audit(self) -> list[tuple[str, str, str]]:
        store = open_store(f"sqlite:///{self.home / 'wovyr.db'}")
        try:
            return [(r.action, r.target, r.tenant) for r in store.audit_records()]
        finally:
            store.close()


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in ("WOVYR_DATABASE_URL", "WOVYR_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path / "home", capsys, monkeypatch)


def test_add_list_show_remove(cli: Cli) -> None:
    added = cli.json("mcp", "add", "files", "--command", "python -m files_server '/data dir'")
    assert added["transport"] == "stdio"
    assert added["command"] == ["python", "-m", "files_server", "/data dir"]
    web = cli.json(
        "mcp", "add", "web", "--url", "https://mcp.example.com/mcp",
        "--header-secret", "Authorization=WEB_TOKEN",
    )  # fmt: skip
    assert web["header_secrets"] == {"Authorization": "WEB_TOKEN"}
    assert [s["name"] for s in cli.json("mcp", "list")] == ["files", "web"]
    code, out, _ = cli("mcp", "list")
    assert code == 0 and "Authorization=WEB_TOKEN" in out and "files_server" in out
    code, out, _ = cli("mcp", "show", "web")
    assert code == 0 and "secret WEB_TOKEN" in out
    # another tenant has none of them
    assert cli.json("mcp", "list", "--tenant", "acme") == []
    code, _, err = cli("mcp", "show", "web", "--tenant", "acme")
    assert code == 4 and "no MCP server 'web'" in err
    assert cli.json("mcp", "remove", "web") == {"removed": "web", "tenant": "default"}
    code, _, err = cli("mcp", "remove", "web")
    assert code == 4
    assert cli.audit() == [
        ("mcp.add", "files", "default"),
        ("mcp.add", "web", "default"),
        ("mcp.remove", "web", "default"),
    ]


def test_a_restricted_tenant_cannot_add_a_stdio_server(cli: Cli) -> None:
    code, _, err = cli("mcp", "add", "files", "--command", "python -m srv", "--tenant", "acme")
    assert code == 1
    assert "tenant 'acme' may not register a stdio server" in err
    assert "shell: false" in err
    assert cli.json("mcp", "list", "--tenant", "acme") == []
    # an http server it may add
    added = cli.json("mcp", "add", "web", "--url", "https://x.example/mcp", "--tenant", "acme")
    assert added["transport"] == "http"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bad name!", "--url", "https://x.example/mcp"], "an MCP server name is"),
        (["w", "--url", "ftp://x.example/mcp"], "must be http:// or https://"),
        (["w", "--url", "https://u:p@x.example/mcp"], "must not hold credentials"),
        (["w", "--url", "https://x.example/mcp", "--header-secret", "A=sk-1"], "NAME of a secret"),
        (["w", "--url", "https://x.example/mcp", "--header-secret", "nope"], "HEADER=SECRET"),
        (["w"], "either --command"),
        (["w", "--command", "x", "--url", "https://x.example/mcp"], "either --command"),
        (["w", "--command", "x 'unclosed"], "cannot be split"),
    ],
)
def test_bad_input_is_refused_and_stores_nothing(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli("mcp", "add", *args)
    assert code in (1, 2), (code, out, err)
    assert message in out + err
    assert cli.json("mcp", "list") == []
