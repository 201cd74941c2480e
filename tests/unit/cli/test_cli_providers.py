"""`wovyr providers` in-process over a real SQLite home: set, list, show, delete per tenant
(another tenant's provider answers like a missing one: exit 4), every change audited as the
local user, bad names, URLs and prices refused with a clear error that stores nothing; and
`wovyr run` of an `llm` step naming a stored provider sends the key from the tenant's
secret (a scripted server started here sees it) while the key is in none of the database
files nor any output."""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main
from wovyr.platform.kms import NEW_ROOT_ENV, ROOT_ENV
from wovyr.store import open_store
from wovyr.testing.model_server import ScriptedLLM, text

CANARY = "sk-cli-canary-5c0e17d9a3"


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

    def audit(self) -> list[tuple[str, str, str, str]]:
        store = open_store(f"sqlite:///{self.home / 'wovyr.db'}")
        try:
            return [(r.action, r.target, r.tenant, r.actor) for r in store.audit_records()]
        finally:
            store.close()


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in ("WOVYR_DATABASE_URL", ROOT_ENV, NEW_ROOT_ENV, "WOVYR_TENANT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("BASE_URL", "API_KEY", "MODEL", "PRICE_IN", "PRICE_OUT"):
        monkeypatch.delenv(f"WOVYR_LLM_{name}", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path / "home", capsys, monkeypatch)


def test_set_list_show_delete_per_tenant_audited(cli: Cli) -> None:
    info = cli.json(
        "providers", "set", "openai", "--base-url", "https://api.example.com/v1",
        "--api-key-secret", "OPENAI_KEY", "--default-model", "gpt-x",
        "--price-in", "2.5", "--price-out", "10",
    )  # fmt: skip
    assert {k: info[k] for k in ("name", "api_key_secret", "price_in", "price_out")} == {
        "name": "openai",
        "api_key_secret": "OPENAI_KEY",
        "price_in": 2.5,
        "price_out": 10.0,
    }
    optioned = cli.json(
        "providers", "set", "local", "--base-url", "http://127.0.0.1:8000/v1",
        "--option", "seed=7", "--option", "reasoning_effort=low", "--model-price", "m1=3:6",
    )  # fmt: skip
    assert optioned["options"] == {"seed": 7, "reasoning_effort": "low"}
    assert optioned["prices"] == {"m1": {"input": 3.0, "output": 6.0}}
    code, out, _ = cli("providers", "show", "local")
    assert 'options:        reasoning_effort="low", seed=7' in out
    assert "price of m1: in 3, out 6" in out
    limited = cli.json(
        "providers", "set", "azure", "--base-url", "https://azure.example/openai/v1",
        "--token-limit", "max_completion_tokens",
    )  # fmt: skip
    assert limited["token_limit"] == "max_completion_tokens"
    code, out, _ = cli("providers", "show", "azure")
    assert "token limit as: max_completion_tokens" in out
    responses = cli.json(
        "providers", "set", "gpt", "--kind", "openai-responses", "--base-url",
        "https://api.openai.com/v1", "--option", 'reasoning={"effort": "low"}',
    )  # fmt: skip
    assert (responses["kind"], responses["options"]) == (
        "openai-responses",
        {"reasoning": {"effort": "low"}},
    )
    assert responses["token_limit"] is None
    for name in ("azure", "gpt"):
        cli.json("providers", "delete", name)
    cli.json("providers", "set", "b-only", "--base-url", "http://b/v1", "--tenant", "t2")
    assert [p["name"] for p in cli.json("providers", "list")] == ["local", "openai"]
    assert [p["name"] for p in cli.json("providers", "list", "--tenant", "t2")] == ["b-only"]
    shown = cli.json("providers", "show", "openai")
    assert (shown["base_url"], shown["default_model"]) == ("https://api.example.com/v1", "gpt-x")
    code, out, _ = cli("providers", "show", "openai")
    assert code == 0 and "OPENAI_KEY" in out and "gpt-x" in out
    code, out, _ = cli("providers", "list")
    assert code == 0 and "openai" in out and "local" in out
    code, _, err = cli("providers", "show", "openai", "--tenant", "t2")
    assert code == 4 and "no provider 'openai'" in err
    code, _, err = cli("providers", "delete", "openai", "--tenant", "t2")
    assert code == 4
    assert cli.json("providers", "delete", "openai") == {"deleted": "openai", "tenant": "default"}
    code, _, _ = cli("providers", "show", "openai")
    assert code == 4
    actions = [(a, t, tenant) for a, t, tenant, _ in cli.audit()]
    assert actions == [
        ("provider.set", "openai", "default"),
        ("provider.set", "local", "default"),
        ("provider.set", "azure", "default"),
        ("provider.set", "gpt", "default"),
        ("provider.delete", "azure", "default"),
        ("provider.delete", "gpt", "default"),
        ("provider.set", "b-only", "t2"),
        ("provider.delete", "openai", "default"),
    ]
    assert all(actor.startswith("local:") for *_, actor in cli.audit())


@pytest.mark.parametrize(
    ("args", "exit", "says"),
    [
        (["bad name!", "--base-url", "http://x/v1"], 1, "provider name"),
        (["p", "--base-url", "ftp://x/v1"], 1, "http:// or https://"),
        (["p", "--base-url", "not a url"], 1, "http:// or https://"),
        (["p", "--base-url", "https://user:pw@x/v1"], 1, "must not hold credentials"),
        (["p", "--base-url", "http://x/v1", "--api-key-secret", "sk-live-123"], 1, "NAME of a"),
        (["p", "--base-url", "http://x/v1", "--price-in", "1"], 1, "both prices"),
        (["p", "--base-url", "http://x/v1", "--price-in", "-1", "--price-out", "1"], 1, "0 or"),
        (["p", "--base-url", "http://x/v1", "--price-in", "x", "--price-out", "1"], 2, "price-in"),
        (["p"], 2, "--base-url"),
        (["p", "--base-url", "http://x/v1", "--option", "sede=1"], 1, "did you mean 'seed'"),
        (["p", "--base-url", "http://x/v1", "--option", "seed"], 2, "KEY=VALUE"),
        (["p", "--base-url", "http://x/v1", "--model-price", "m1=3"], 2, "MODEL=IN:OUT"),
        (["p", "--base-url", "http://x/v1", "--model-price", "m1=-1:2"], 1, "finite number"),
        (["p", "--base-url", "http://x/v1", "--token-limit", "max"], 2, "--token-limit"),
        (
            [
                "p",
                "--base-url",
                "http://x/v1",
                "--kind",
                "anthropic",
                "--token-limit",
                "max_tokens",
            ],
            1,
            "token_limit applies to kind openai only",
        ),
        (
            [
                "p",
                "--base-url",
                "http://x/v1",
                "--kind",
                "openai-responses",
                "--option",
                "reasoning_effort=1",
            ],
            1,
            "did you mean 'reasoning'",
        ),
    ],
)
def test_bad_input_is_a_clear_error_and_stores_nothing(
    cli: Cli, args: list[str], exit: int, says: str
) -> None:
    code, out, err = cli("providers", "set", *args)
    assert code == exit, (out, err)
    assert says in err
    code, out, _ = cli("providers", "list", "--json")
    assert json.loads(out) == []
    assert cli.audit() == []


FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ask}
activities:
  - id: ask
    llm: {provider: acme, prompt: "hi"}
output: "${{ activities.ask.output }}"
"""


def test_run_uses_the_stored_provider_and_the_tenants_secret(cli: Cli, tmp_path: Path) -> None:
    flow = tmp_path / "ask.yaml"
    flow.write_text(FLOW)
    cli.json("secrets", "set", "ACME_KEY", stdin=CANARY)
    with ScriptedLLM([text("It resumes.", usage=(1000, 100))]) as llm:
        cli.json(
            "providers", "set", "acme", "--base-url", llm.base_url,
            "--api-key-secret", "ACME_KEY", "--default-model", "m-acme",
            "--price-in", "3", "--price-out", "15",
        )  # fmt: skip
        code, out, err = cli("run", str(flow), "--id", "e1", "--json")
        assert code == 0, (out, err)
        (request,) = llm.completions
        assert request.authorization == f"Bearer {CANARY}"
    result = json.loads(out)
    assert result["output"]["model"] == "m-acme"
    assert result["output"]["cost"] == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    code, history, _ = cli("workflows", "history", "e1", "--json")
    assert code == 0
    shown = cli.json("providers", "show", "acme")
    assert shown["api_key_secret"] == "ACME_KEY"
    forms = [CANARY.encode(), base64.b64encode(CANARY.encode())]
    for text_out in (out, history, json.dumps(shown)):
        assert not any(f in text_out.encode() for f in forms)
    files = [p for p in cli.home.iterdir() if p.name.startswith("wovyr.db")]
    assert files
    for path in files:
        assert not any(f in path.read_bytes() for f in forms), path.name


def test_run_names_an_unknown_provider_and_a_missing_secret(cli: Cli, tmp_path: Path) -> None:
    flow = tmp_path / "ask.yaml"
    flow.write_text(FLOW)
    code, out, err = cli("run", str(flow), "--id", "e1", "--json")
    assert code == 1
    assert "UnknownProvider" in out + err and "'acme'" in out + err
    cli.json("providers", "set", "acme", "--base-url", "http://127.0.0.1:9/v1",
             "--api-key-secret", "NOT_SET", "--default-model", "m")  # fmt: skip
    code, out, err = cli("run", str(flow), "--id", "e2", "--json")
    assert code == 1
    assert "SecretMissing" in out + err and "'NOT_SET'" in out + err
