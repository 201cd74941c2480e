"""The tenant's platform commands, each test run twice with the same assertions: on this
host's store (`--home`) and through a live `wovyr serve` process (`--server URL`, an admin
key of the tenant in `WOVYR_API_KEY`): secrets, model providers, MCP servers, agents (the
registry and a run), bulk actions and batches, and what a tenant's admin key may do of
`wovyr admin` (keys, policy, quotas, rate limits, retention, audit records). Same JSON
keys, same lines, same exit codes; a secret's value is never printed either way.

The host's own commands (`admin tenants set ... --allow-host`, run without a server on the
store's home) open the scripted model's loopback port to the tenant in both modes.
"""

from __future__ import annotations

import io
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.acceptance.test_cli_both_ways import Cli, Server, both_ways

from wovyr.cli.main import main
from wovyr.testing.model_server import ScriptedLLM, text

pytestmark = pytest.mark.slow

CANARY = "s3cr3t-canary-value-91f2"
AGENT = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Agent
    metadata: {name: helper, version: "1"}
    spec:
      model: m1
      instructions: Be brief.
    """)
WAITS = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: waits, version: "1"}
    activities:
      - {id: go, wait: {signal: go}}
    """)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("served") / "home")
    yield served
    served.stop()


@pytest.fixture(params=["local", "server"])
def cli(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cli]:
    yield from both_ways(request, tmp_path, capsys, monkeypatch, prefix="p-", role="admin")


def host(cli: Cli, *args: str) -> None:
    """A command of the store's host (never through the server), on the store `cli` uses."""
    home = cli.home if cli.server is None else cli.server.home
    cli.capsys.readouterr()
    assert main([*args, "--home", str(home)]) == 0, cli.capsys.readouterr().err
    cli.capsys.readouterr()


def keys_of(value: Any) -> Any:
    """The shape of a JSON value: its objects' keys, all the way down."""
    if isinstance(value, dict):
        return {k: keys_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [keys_of(v) for v in value[:1]]
    return None


def test_secrets_are_set_from_stdin_or_a_file_listed_by_name_and_deleted(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(f"{CANARY}\n".encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    made = cli.json("secrets", "set", "API_TOKEN")
    assert (made["name"], made["version"]) == ("API_TOKEN", 1)
    assert set(made) == {"name", "version", "created_at", "updated_at", "updated_by"}
    value = tmp_path / "value.txt"
    value.write_text(CANARY + "-2")
    code, out, err = cli("secrets", "set", "API_TOKEN", "--from-file", str(value))
    assert code == 0 and out == f"secret API_TOKEN of tenant {cli.tenant}: version 2\n", err
    listed = cli.json("secrets", "list")
    assert [(s["name"], s["version"]) for s in listed] == [("API_TOKEN", 2)]
    code, out, err = cli("secrets", "list")
    assert code == 0 and "API_TOKEN" in out and CANARY not in out + err
    assert cli.json("secrets", "delete", "API_TOKEN") == {
        "deleted": "API_TOKEN",
        "tenant": cli.tenant,
    }
    assert cli.json("secrets", "list") == []
    code, _, err = cli("secrets", "delete", "API_TOKEN")
    assert code == 4 and err.startswith("error: ")


def test_providers_and_mcp_servers_from_set_to_delete(cli: Cli) -> None:
    made = cli.json(
        "providers", "set", "local", "--base-url", "http://127.0.0.1:9/v1",
        "--api-key-secret", "API_TOKEN", "--default-model", "m1",
        "--price-in", "1", "--price-out", "2",
    )  # fmt: skip
    assert made["api_key_secret"] == "API_TOKEN" and made["kind"] == "openai"
    assert [p["name"] for p in cli.json("providers", "list")] == ["local"]
    shown = cli.json("providers", "show", "local")
    assert {k: v for k, v in shown.items() if k != "updated_at"} == {
        k: v for k, v in made.items() if k != "updated_at"
    }
    code, out, _ = cli("providers", "show", "local")
    assert code == 0 and out.startswith(f"provider local of tenant {cli.tenant}\n")
    assert "API key secret: API_TOKEN" in out
    code, out, _ = cli("providers", "delete", "local")
    assert code == 0 and out == f"deleted provider local of tenant {cli.tenant}\n"
    assert cli("providers", "show", "local")[0] == 4

    added = cli.json(
        "mcp", "add", "docs", "--url", "https://mcp.example.com/mcp",
        "--header-secret", "Authorization=MCP_TOKEN",
    )  # fmt: skip
    assert added["transport"] == "http"
    assert added["header_secrets"] == {"Authorization": "MCP_TOKEN"}
    code, out, _ = cli("mcp", "list")
    assert code == 0 and "docs" in out and "Authorization=MCP_TOKEN" in out
    assert cli.json("mcp", "show", "docs")["url"] == "https://mcp.example.com/mcp"
    # the tenant's policy (restricted) runs no program: a stdio server is refused either way
    code, _, err = cli("mcp", "add", "files", "--command", "cat")
    assert code == 1 and "may not register a stdio server" in err
    assert cli.json("mcp", "remove", "docs") == {"removed": "docs", "tenant": cli.tenant}
    assert cli.json("mcp", "list") == []


def test_agents_are_applied_listed_shown_and_run(cli: Cli, tmp_path: Path) -> None:
    agent = tmp_path / "helper.yaml"
    agent.write_text(AGENT)
    broken = tmp_path / "broken.yaml"
    broken.write_text(AGENT.replace("model: m1", "model: m1\n  max_turns: many"))
    with ScriptedLLM([text("Ada says hello back.")]) as llm:
        port = llm.base_url.split(":")[2].split("/")[0]
        host(cli, "admin", "tenants", "set", cli.tenant, "--allow-host", f"127.0.0.1:{port}")
        cli.json("providers", "set", "default", "--base-url", llm.base_url)
        code, out, _ = cli("agents", "apply", str(agent), str(broken), "--json")
        assert code == 1
        results = {Path(r["file"]).name: r for r in json.loads(out)}
        assert results["helper.yaml"]["result"] == "applied"
        [problem] = results["broken.yaml"]["problems"]
        assert (problem["line"], problem["path"], problem["file"]) == (
            7,
            "spec.max_turns",
            str(broken),
        )
        listed = cli.json("agents", "list")
        assert [(a["name"], a["model"], a["tools"]) for a in listed] == [("helper", "m1", [])]
        assert set(listed[0]) == {"name", "version", "hash", "model", "tools", "applied_at"}
        code, out, _ = cli("agents", "list")
        assert code == 0 and "helper" in out and "m1" in out
        shown = cli.json("agents", "show", "helper")
        assert shown["hash"] == listed[0]["hash"] and shown["agent"]["spec"]["model"] == "m1"
        code, out, err = cli("agents", "run", "helper", "--text", "Say hello", "--id", "r-1")
        assert code == 0, err
        assert out == "Ada says hello back.\n" and "run r-1: 1 turns" in err
        run = cli.json("agents", "run", "helper", "--text", "Again", "--id", "r-1")
        assert run["status"] == "completed" and run["result"]["text"] == "Ada says hello back."
        assert set(run) == {
            "id", "agent", "version", "status", "turns", "usage", "cost", "result", "error",
        }  # fmt: skip
    assert cli("agents", "show", "nobody")[0] == 4


def test_bulk_actions_and_batches(cli: Cli, tmp_path: Path) -> None:
    flow = tmp_path / "waits.yaml"
    flow.write_text(WAITS)
    for n in range(3):
        cli.start(flow, f"w-{n}")
    batch = cli.json(
        "workflows", "bulk", "cancel", "--workflow", "waits", "--idempotency-key", "k-1", "--wait"
    )
    assert batch["action"] == "cancel" and batch["status"] == "completed"
    assert batch["progress"]["ok"] == 3 and batch["progress"]["pending"] == 0
    code, out, _ = cli(
        "workflows", "bulk", "cancel", "--workflow", "waits", "--idempotency-key", "k-1"
    )
    assert code == 0 and f"batch {batch['id']} already submitted: cancel workflow=waits" in out
    assert [b["id"] for b in cli.json("batches", "list")["items"]] == [batch["id"]]
    shown = cli.json("batches", "show", batch["id"])
    assert sorted(i["execution_id"] for i in shown["items"]) == ["w-0", "w-1", "w-2"]
    assert {i["outcome"] for i in shown["items"]} == {"ok"}
    assert keys_of(shown) == {**keys_of(batch), "items": keys_of(shown["items"])}
    code, out, _ = cli("batches", "show", batch["id"])
    assert code == 0 and "3 ok, 0 skipped, 0 errors, 0 pending of 3" in out
    assert all(cli.json("workflows", "show", f"w-{n}")["status"] == "cancelled" for n in range(3))
    code, _, err = cli("batches", "show", "b-nope")
    assert code == 4 and err.startswith("error: ")


def test_a_tenants_administration(cli: Cli) -> None:
    made = cli.json("admin", "keys", "create", "--tenant", cli.tenant, "--role", "viewer")
    assert made["tenant"] == cli.tenant and made["token"].startswith("wvr_")
    listed = cli.json("admin", "keys", "list", "--tenant", cli.tenant)
    assert made["id"] in [k["id"] for k in listed]
    assert set(listed[0]) == {
        "id", "tenant", "role", "name", "prefix", "created_at", "revoked_at", "last_used_at",
    }  # fmt: skip
    assert cli.json("admin", "keys", "revoke", made["id"]) == {"id": made["id"], "revoked": True}

    policy = cli.json("admin", "tenants", "show", cli.tenant)
    assert policy["tenant"] == cli.tenant and policy["policy"]["shell"] is False
    tightened = cli.json("admin", "tenants", "set", cli.tenant, "--cpu-seconds", "30")
    assert tightened["policy"]["shell_cpu_seconds"] == 30 and tightened["source"] == "set"
    assert set(tightened) == set(policy)
    code, out, _ = cli("admin", "tenants", "show", cli.tenant)
    assert code == 0 and out.startswith(f"tenant {cli.tenant}: no shell; public network (set")

    quotas = cli.json("admin", "quotas", "set", cli.tenant, "--executions-per-day", "100")
    assert quotas["tenant"] == cli.tenant and quotas["quotas"]["executions_per_day"] == 100
    assert set(cli.json("admin", "quotas", "show", cli.tenant)) == set(quotas)
    code, out, _ = cli("admin", "quotas", "show", cli.tenant)
    assert code == 0 and "executions-per-day" in out and "100" in out

    bucket = cli.json("admin", "limits", "set", "openai", "--limit", "10", "--per", "1m")
    assert [(b["key"], b["burst"], b["declared"]) for b in bucket] == [("openai", 10, True)]
    assert [b["key"] for b in cli.json("admin", "limits", "list")] == ["openai"]
    assert cli.json("admin", "limits", "delete", "openai") == {"key": "openai", "deleted": True}

    kept = cli.json("admin", "retention", "set", cli.tenant, "--days", "30")
    assert kept == {"tenant": cli.tenant, "days": 30, "workflows": {}, "export_to": None}
    kept = cli.json("admin", "retention", "set", cli.tenant, "--workflow", "w", "--days", "7")
    assert kept["workflows"] == {"w": 7} and kept["days"] == 30
    assert cli.json("admin", "retention", "show", cli.tenant) == kept

    audit = cli.json("admin", "audit", "list", "--tenant", cli.tenant)
    actions = [r["action"] for r in audit]
    assert "tenant.policy" in actions and "limits.set" in actions
    assert set(audit[0]) == {
        "seq", "at", "tenant", "actor", "action", "target", "details", "prev_hash", "hash",
    }  # fmt: skip


def test_through_a_server_a_key_acts_for_its_own_tenant_only(
    server: Server, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.delenv("WOVYR_SERVER", raising=False)
    cli = Cli("server", tmp_path / "home", capsys, monkeypatch, "p-own-tenant", server)
    cli.use_key("admin", role="admin")
    code, _, err = cli("admin", "quotas", "show", "someone-else")
    assert code == 2 and "this key acts for tenant 'p-own-tenant', not 'someone-else'" in err
    code, _, err = cli("admin", "tenants", "set", "p-own-tenant", "--shell")
    assert code == 1 and "would widen shell" in err  # the server refuses a widening
    code, _, err = cli("admin", "quotas", "set", "p-own-tenant", "--clear", "executions-per-day")
    assert code == 0, err  # nothing set: clearing raises nothing
    cli.json("admin", "quotas", "set", "p-own-tenant", "--executions-per-day", "5")
    code, _, err = cli("admin", "quotas", "set", "p-own-tenant", "--executions-per-day", "6")
    assert code == 1 and "would raise executions_per_day" in err
    for argv, why in (
        (["admin", "tenants", "list"], "every tenant"),
        (["admin", "tenants", "shred", "p-own-tenant", "--yes"], "KMS"),
        (["admin", "kms", "status"], "root key"),
        (["admin", "retention", "run"], "purges"),
        (["admin", "audit", "verify"], "every tenant's records"),
        (["mcp", "serve"], "stdin/stdout"),
    ):
        code, _, err = cli(*argv)
        assert code == 2 and "does not go through a server" in err and why in err, argv
    cli.use_key("operator")  # an operator key may not read the tenant's secrets
    code, _, err = cli("secrets", "list")
    assert code == 1 and "admin" in err
