"""`wovyr triggers` and `wovyr events`, each test run on this host's store and through a live
`wovyr serve` (same JSON keys, same exit codes): a trigger applied, listed and shown; an
event sent starts an execution once (its dedup key), a filtered one starts nothing and
exits 1; the events are listed newest first, a page at a time; a deleted trigger is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.acceptance.test_cli_both_ways import Cli
from tests.acceptance.test_cli_both_ways_platform import cli, server
from tests.server.test_triggers_api import FLOW, TRIGGER

pytestmark = pytest.mark.slow

__all__ = ["cli", "server"]  # the fixtures, shared with the platform commands' tests


def test_a_trigger_from_apply_to_delete(cli: Cli, tmp_path: Path) -> None:
    flow, trigger = tmp_path / "flow.yaml", tmp_path / "trigger.yaml"
    flow.write_text(FLOW)
    trigger.write_text(TRIGGER)
    code, out, err = cli("definitions", "apply", str(flow))
    assert code == 0, out + err
    [applied] = cli.json("triggers", "apply", str(trigger))
    assert (applied["name"], applied["topic"], applied["result"]) == (
        "orders",
        "orders.created",
        "applied",
    )
    assert cli.json("triggers", "apply", str(trigger))[0]["result"] == "unchanged"
    [listed] = cli.json("triggers", "list")
    assert listed["name"] == "orders" and listed["webhook_path"] is None
    code, out, _ = cli("triggers", "show", "orders")
    assert code == 0 and json.loads(out)["document"]["spec"]["topic"] == "orders.created"

    sent = cli.json("events", "send", "orders.created", '{"order": 3, "total": 500}')
    [started] = sent["events"]
    assert started["outcome"] == "started" and started["dedup_key"] == "3"
    again = cli.json("events", "send", "orders.created", '{"order": 3, "total": 500}')
    assert again["events"][0]["outcome"] == "duplicate"
    assert again["events"][0]["execution_id"] == started["execution_id"]
    code, out, _ = cli("events", "send", "orders.created", '{"order": 4, "total": 1}')
    assert code == 1 and "filtered" in out

    first = cli.json("events", "list", "--limit", "2")
    assert [e["outcome"] for e in first["items"]] == ["filtered", "duplicate"]
    rest = cli.json("events", "list", "--limit", "2", "--cursor", first["next_cursor"])
    assert [e["outcome"] for e in rest["items"]] == ["started"] and rest["next_cursor"] is None

    assert cli("triggers", "delete", "orders")[0] == 0
    assert cli.json("triggers", "list") == []
    code, _, err = cli("triggers", "show", "orders")
    assert code == 4 and err.startswith("error: ")


QUICK = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - {id: a, set: {ok: true}}
"""


def test_webhook_endpoints_and_their_deliveries(cli: Cli, tmp_path: Path) -> None:
    args = ["--url", "https://hooks.example.com/wovyr", "--event", "execution.completed"]
    made = cli.json("webhooks", "set", "ops", *args, "--secret", "WH_KEY")
    assert (made["name"], made["events"], made["secrets"]) == (
        "ops",
        ["execution.completed"],
        ["WH_KEY"],
    )
    code, _, err = cli("webhooks", "set", "bad", *args, "--secret", "not a name")
    assert code != 0 and err.startswith("error: ")
    assert [e["name"] for e in cli.json("webhooks", "list")] == ["ops"]
    flow = tmp_path / "quick.yaml"
    flow.write_text(QUICK)
    cli.start(flow, "x1")
    [delivery] = cli.json("webhooks", "deliveries")["items"]
    assert (delivery["event"], delivery["execution_id"]) == ("execution.completed", "x1")
    shown = json.loads(cli("webhooks", "delivery", delivery["id"])[1])
    assert shown["id"] == delivery["id"] and isinstance(shown["attempts_made"], list)
    assert cli("webhooks", "delete", "ops")[0] == 0
    assert cli.json("webhooks", "list") == []
