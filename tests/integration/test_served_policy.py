"""A store served over HTTP restricts tenant `default` (`wovyr.engine.tenants.served`), and
every step that policy refuses says so: which tenant's policy, where it came from, the
setting, and the exact `wovyr admin tenants set` command that allows it. At dispatch an
unreachable target reads the same whatever the cause (refused, closed, unknown): the note
names the policy, never the target, so a workflow cannot probe ports with it."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.cli.main import main
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import served
from wovyr.errors import InputError
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
HEAD = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: probe}\n"
SHELL = HEAD + "activities:\n  - {id: speak, shell: {argv: [echo, hi]}}\n"
FETCH = (
    HEAD
    + "inputs: {url: {type: string}}\nactivities:\n"
    + '  - {id: fetch, http: {url: "${{ inputs.url }}"}, retry: {max_attempts: 1}}\n'
)
ASK = (
    HEAD
    + 'activities:\n  - {id: ask, llm: {model: m1, prompt: "hi"}}\n'
    + 'output: "${{ activities.ask.output.text }}"\n'
)
WHERE = (
    "the side-effect policy of tenant 'default' (restricted, given when this store was "
    "first served over HTTP)"
)


def _engine(db: Path, llm: ScriptedLLM) -> Engine:
    provider = ProviderConfig("default", llm.base_url, default_model="m1", api_key="k")
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(T0),
        activities=ActivityRegistry(),
        providers=Providers({"default": provider}),
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


def test_a_refused_step_names_the_policy_its_setting_and_the_command(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with ScriptedLLM([text("ok")]) as llm:
        engine = _engine(db, llm)
        assert served(engine.store, T0)

        # refused when accepted: each problem says where, and the flag that allows it
        with pytest.raises(InputError) as info:
            engine.start(SHELL)
        [shell] = info.value.problems
        assert shell.message == (
            f"activity 'speak' (shell) is refused by {WHERE}: `shell` is not allowed (shell: false)"
        )
        assert shell.hint == (
            "the host's administrator allows it with: wovyr admin tenants set default --shell"
        )
        literal = FETCH.replace("${{ inputs.url }}", f"http://127.0.0.1:{llm.port}/x")
        with pytest.raises(InputError) as info:
            engine.start(literal)
        assert info.value.problems[0].hint == (
            "the host's administrator allows it with: wovyr admin tenants set default "
            f"--allow-host 127.0.0.1:{llm.port}"
        )

        # refused at dispatch: one text for a model server, a closed port, an unknown name
        targets = {
            "open": f"http://127.0.0.1:{llm.port}/v1/models",
            "closed": f"http://127.0.0.1:{_closed_port()}/",
            "unknown": "http://wovyr-test.invalid/",
        }
        for name, url in targets.items():
            engine.start(FETCH, {"url": url}, execution_id=name)
        engine.start(ASK, execution_id="model")
        drain(engine)
        errors = {
            eid: engine.query(eid).activities[act]["error"]
            for eid, act in [*((n, "fetch") for n in targets), ("model", "ask")]
        }
        assert {e["type"] for e in errors.values()} == {"TargetUnreachable"}
        assert len({e["message"] for e in errors.values()}) == 1, errors
        message = errors["model"]["message"]
        assert message == (
            f"HTTP target not reachable: {WHERE} lets `http` steps, model providers and MCP "
            "servers reach public addresses only (private_network: false), and a refused "
            "address fails like one that does not answer; for a host on a loopback or private "
            "network (a local model server), the host's administrator admits it with: "
            "wovyr admin tenants set default --allow-host HOST:PORT"
        )
        assert llm.completions == []
        engine.close()

        # the command, as said, lets the model server's calls through
        command = message.rpartition("with: wovyr ")[2].replace(
            "HOST:PORT", f"127.0.0.1:{llm.port}"
        )
        assert main([*command.split(), "--db", f"sqlite:///{db}"]) == 0
        engine = _engine(db, llm)
        engine.start(ASK, execution_id="again")
        drain(engine)
        assert engine.query("again").output == "ok"
        engine.close()
