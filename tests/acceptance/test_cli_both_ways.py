"""The `workflows`, `schedules` and `definitions` commands, each test run twice with the same
assertions: once on this host's store (`--home`), once through a live `wovyr serve` process
(`--server URL`, the key in `WOVYR_API_KEY`). Same JSON, same tables, same exit codes.

What differs between the two is only how an execution is driven (here `wovyr run` resumes
it; there the server's worker does, and the test polls against a deadline) and who
decides an approval (`--by NAME` here; there the key, whose name is recorded).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.probe import answers

from wovyr.cli.main import main
from wovyr.client import Client

pytestmark = pytest.mark.slow

WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
GREET = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: greet, version: "1"}
    inputs:
      name: {type: string, default: world}
    activities:
      - {id: compose, set: {greeting: "Hello, ${{ inputs.name }}!"}}
    output: {greeting: "${{ activities.compose.output.greeting }}"}
    """)
WAITS = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: waits, version: "2"}
    inputs:
      who: {type: string, default: me}
    activities:
      - {id: hello, set: {to: "${{ inputs.who }}"}}
      - {id: go, needs: [hello], wait: {signal: go}}
      - {id: ok, needs: [go], wait: {approval: {approvers: [ada]}}}
    output: {signal: "${{ activities.go.output }}"}
    """)
BROKEN = (
    "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: broken}\nactivities:\n  - {id: a}\n"
)


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One `wovyr serve` process on a free loopback port, for the whole module (loading the
    `activities` modules or files given)."""

    def __init__(self, home: Path, activities: tuple[str, ...] = ()) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "WOVYR_HOME": str(home), "WOVYR_DISPATCH_INTERVAL_SECONDS": "0.2"}
        env.pop("WOVYR_DATABASE_URL", None)
        env.pop("WOVYR_SERVER", None)
        home.mkdir(parents=True, exist_ok=True)
        with (home / "serve.out").open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    *WOVYR,
                    "serve",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                    *[arg for module in activities for arg in ("-a", module)],
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        wait_for(self._ready, 60, "the server to be ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError((self.home / "serve.out").read_text(errors="replace"))
        return answers(self.url)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("served") / "home")
    yield served
    served.stop()


class Cli:
    """`wovyr ARGS` in this process, on the local store or through the server; returns
    (exit code, stdout, stderr)."""

    # May the output hold a failed handler's traceback (shown by `show` and `logs`)? A
    # command that crashes raises out of `main` either way.
    handler_tracebacks = False

    def __init__(
        self,
        mode: str,
        home: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        tenant: str,
        server: Server | None,
    ) -> None:
        self.mode, self.home, self.capsys, self.monkeypatch = mode, home, capsys, monkeypatch
        self.tenant, self.server = tenant, server
        self.keys: dict[str, str] = {}
        self.files: dict[str, Path] = {}
        if server is not None:
            self.use_key("operator")

    # how the two modes differ

    def use_key(self, name: str, role: str = "operator") -> None:
        """Act with the tenant's key called `name` (made on first use, with `role`)."""
        assert self.server is not None
        if name not in self.keys:
            self.capsys.readouterr()
            argv = ["admin", "keys", "create", "--tenant", self.tenant, "--role", role]
            code = main([*argv, "--name", name, "--json", "--home", str(self.server.home)])
            out, err = self.capsys.readouterr()
            assert code == 0, err
            self.keys[name] = json.loads(out)["token"]
        self.monkeypatch.setenv("WOVYR_API_KEY", self.keys[name])

    def by(self, name: str) -> list[str]:
        """Decide as `name`: `--by NAME` on the store; the key named so through a server."""
        if self.server is None:
            return ["--by", name]
        self.use_key(name)
        return []

    def start(self, path: Path, execution_id: str, **inputs: str) -> None:
        """Start an execution and let it run until it waits or ends."""
        self.files[execution_id] = path
        if self.server is None:
            pairs = [x for k, v in inputs.items() for x in ("-i", f"{k}={v}")]
            assert main(
                ["run", str(path), "--id", execution_id, *pairs, "--home", str(self.home)]
            ) in (0, 3)
            self.capsys.readouterr()
            return
        with self.client() as client:
            client.start_workflow(path.read_text(), id=execution_id, input=inputs)
        self.settle(execution_id, lambda view: view["status"] != "running")

    def settle(self, execution_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Let the execution go on (after a signal or a decision) until `done(view)`."""
        if self.server is None:
            path = self.files[execution_id]
            main(["run", str(path), "--id", execution_id, "--home", str(self.home)])
            self.capsys.readouterr()
            view = self.json("workflows", "show", execution_id)
            assert done(view), view
            return view

        def look() -> dict[str, Any] | None:
            with self.client() as client:
                view = dict(client.get_workflow(execution_id, events=0))
            return view if done(view) else None

        found: dict[str, Any] = wait_for(look, 30, f"{execution_id} to settle")
        return found

    def client(self) -> Client:
        assert self.server is not None
        return Client(self.server.url, api_key=os.environ["WOVYR_API_KEY"])

    # the commands themselves

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        if self.server is None:
            code = main([*args, "--home", str(self.home)])
        else:
            code = main(["--server", self.server.url, *args])
        out, err = self.capsys.readouterr()
        assert self.handler_tracebacks or "Traceback" not in out + err
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code in (0, 3), (code, out, err)
        return json.loads(out)


def both_ways(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    prefix: str = "t-",
    role: str = "operator",
) -> Iterator[Cli]:
    """The `cli` of a test run both ways (`request.param`), for a tenant of its own named
    after the test (the module's server is shared); through the server with a key of
    `role`."""
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.delenv("WOVYR_SERVER", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    tenant = prefix + request.node.name.split("[")[0].removeprefix("test_")[:40].replace("_", "-")
    if request.param == "local":
        monkeypatch.setenv("WOVYR_TENANT", tenant)
        yield Cli("local", tmp_path / "home", capsys, monkeypatch, tenant, None)
        return
    server = request.getfixturevalue("server")
    monkeypatch.delenv("WOVYR_TENANT", raising=False)
    made = Cli("server", tmp_path / "home", capsys, monkeypatch, tenant, server)
    if role != "operator":
        made.use_key(role, role=role)
    yield made
    assert not (tmp_path / "home").exists()  # no local store was opened: all went by HTTP


@pytest.fixture(params=["local", "server"])
def cli(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cli]:
    yield from both_ways(request, tmp_path, capsys, monkeypatch)


@pytest.fixture
def flows(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("greet", GREET), ("waits", WAITS), ("broken", BROKEN)):
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(text)
    return out


def test_a_waiting_execution_is_steered_through_the_cli(cli: Cli, flows: dict[str, Path]) -> None:
    cli.start(flows["waits"], "w-1", who="you")
    sent = cli.json("workflows", "signal", "w-1", "go", "--payload", '{"n": 1}')
    assert sent["id"] == "w-1" and sent["status"] in ("waiting", "running")
    view = cli.settle("w-1", lambda v: v["activities"]["go"]["status"] == "completed")
    assert view["status"] == "waiting" and view["activities"]["go"]["output"] == {"n": 1}
    code, _, err = cli("workflows", "approve", "w-1", "ok", *cli.by("bob"))
    assert code == 1 and err.startswith("error: 'bob' may not decide 'ok'")
    approved = cli.json("workflows", "approve", "w-1", "ok", *cli.by("ada"), "--comment", "fine")
    assert approved["activities"]["ok"]["status"] in ("waiting", "completed")
    cli.settle("w-1", lambda v: v["status"] == "completed")

    shown = cli.json("workflows", "show", "w-1")
    assert shown["output"] == {"signal": {"n": 1}} and "timeline" not in shown
    assert shown["input"] == {"who": "you"}
    code, out, _ = cli("workflows", "show", "w-1")
    assert code == 0 and "completed" in out and "waits v2" in out and "go" in out
    history = cli.json("workflows", "history", "w-1")
    assert history[0]["type"] == "ExecutionStarted" and history[-1]["type"] == "ExecutionCompleted"
    assert [e["seq"] for e in history] == list(range(1, len(history) + 1))
    assert history[0]["at"].endswith("+00:00")  # one time format either way
    assert [
        e["seq"] for e in cli.json("workflows", "history", "w-1", "--after", "2", "--limit", "3")
    ] == [3, 4, 5]
    code, out, _ = cli("workflows", "history", "w-1", "--after", "2", "--limit", "3")
    assert code == 0 and "ExecutionStarted" not in out
    assert len(out.strip().splitlines()) == 4  # the header and 3 events
    decided = [e for e in history if e["type"] == "ApprovalDecided"]
    assert decided[0]["data"]["by"] == "ada" and decided[0]["data"]["comment"] == "fine"


def test_list_filters_and_pages_the_same(cli: Cli, flows: dict[str, Path]) -> None:
    for n in range(3):
        cli.start(flows["greet"], f"g-{n}", name=f"n{n}")
    cli.start(flows["waits"], "w-9")
    listed = cli.json("workflows", "list", "--workflow", "greet", "--status", "completed")
    assert [i["id"] for i in listed["items"]] == ["g-2", "g-1", "g-0"]
    assert listed["next_cursor"] is None
    item = listed["items"][0]
    assert set(item) == {
        "id", "workflow", "version", "status", "created_at", "updated_at", "waiting_on",
        "parent_id", "labels",
    }  # fmt: skip
    assert item["created_at"].endswith("+00:00")
    waiting = cli.json("workflows", "list", "--status", "waiting")
    assert [(i["id"], i["waiting_on"]) for i in waiting["items"]] == [("w-9", "signal go")]
    first = cli.json("workflows", "list", "--limit", "2")
    assert [i["id"] for i in first["items"]] == ["w-9", "g-2"] and first["next_cursor"]
    rest = cli.json("workflows", "list", "--limit", "2", "--cursor", first["next_cursor"])
    assert [i["id"] for i in rest["items"]] == ["g-1", "g-0"]
    assert [i["id"] for i in cli.json("workflows", "list", "--id-prefix", "g-1")["items"]] == [
        "g-1"
    ]
    code, out, _ = cli("workflows", "list", "--limit", "1")
    assert code == 0 and "w-9" in out and "waits v2" in out and "more: --cursor" in out
    code, _, err = cli("workflows", "list", "--cursor", "garbage")
    assert code == 2 and "cursor" in err


def test_cancel_rerun_and_logs(cli: Cli, flows: dict[str, Path]) -> None:
    cli.start(flows["waits"], "c-1")
    cancelled = cli.json("workflows", "cancel", "c-1", "--reason", "test")
    assert cancelled["status"] == "cancelled"
    code, _, err = cli("workflows", "cancel", "c-1")
    assert code == 1 and "already cancelled" in err
    code, _, err = cli("workflows", "signal", "c-1", "go")
    assert code == 1 and "already cancelled" in err
    code, out, _ = cli("workflows", "cancel", "c-1")
    assert code == 1

    cli.start(flows["waits"], "r-1")
    cli.json("workflows", "signal", "r-1", "go")
    cli.settle("r-1", lambda v: v["activities"]["go"]["status"] == "completed")
    rejected = cli.json("workflows", "approve", "r-1", "ok", "--reject", *cli.by("ada"))
    assert rejected["activities"]["ok"]["status"] in ("waiting", "failed")
    failed = cli.settle("r-1", lambda v: v["status"] == "failed")
    assert failed["activities"]["ok"]["status"] == "failed"

    cli.start(flows["greet"], "g-1", name="Ada")
    rerun = cli.json("workflows", "rerun", "g-1", "-i", "name=Bob", "--id", "g-2")
    assert rerun["id"] == "g-2" and rerun["rerun_of"] == {"id": "g-1", "from": None}
    code, out, _ = cli("workflows", "rerun", "g-1", "--id", "g-3")
    assert code == 0 and "g-3 reruns g-1" in out
    code, _, err = cli("workflows", "rerun", "w-none")
    assert code == 4 and err.startswith("error: ")
    code, out, _ = cli("workflows", "logs", "g-1", "--json")
    assert code == 0


def test_watch_prints_the_stream_until_the_end(cli: Cli, flows: dict[str, Path]) -> None:
    cli.start(flows["greet"], "g-1", name="Ada")
    code, out, _ = cli("workflows", "watch", "g-1", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["event"] == "event" and lines[0]["data"]["type"] == "ExecutionStarted"
    assert lines[-1]["event"] == "end" and lines[-1]["data"] == {"status": "completed"}
    again = cli("workflows", "watch", "g-1", "--json", "--after", lines[-3]["id"])
    assert [json.loads(x)["event"] for x in again[1].splitlines()] == ["event", "end"]
    code, _, _ = cli("workflows", "watch", "nope")
    assert code == 4


def test_errors_exit_with_the_same_codes(cli: Cli) -> None:
    code, _, err = cli("workflows", "show", "nope")
    assert code == 4 and err.startswith("error: ")
    code, _, err = cli("workflows", "history", "nope")
    assert code == 4
    code, _, _ = cli("workflows", "list", "--limit", "0")
    assert code == 2
    code, _, err = cli("workflows", "signal", "nope", "go")
    assert code == 4


def test_definitions_apply_list_show(cli: Cli, flows: dict[str, Path]) -> None:
    code, out, _ = cli("definitions", "apply", str(flows["waits"]), str(flows["greet"]))
    assert code == 0 and "waits v2 applied" in out and "greet v1 applied" in out
    again = cli.json("definitions", "apply", str(flows["greet"]))
    assert [(r["name"], r["version"], r["result"]) for r in again] == [("greet", "1", "unchanged")]
    listed = cli.json("definitions", "list")
    assert {(d["name"], d["version"]) for d in listed} == {("waits", "2"), ("greet", "1")}
    assert all(d["applied_at"].endswith("+00:00") for d in listed)
    shown = cli.json("definitions", "show", "waits")
    assert shown["hash"] == next(d["hash"] for d in listed if d["name"] == "waits")
    assert shown["definition"]["metadata"]["name"] == "waits"
    code, out, _ = cli("definitions", "show", "waits", "--version", "2")
    assert code == 0 and out.startswith("waits v2  sha256:") and '"waits"' in out
    code, _, err = cli("definitions", "show", "nobody")
    assert code == 4 and err.startswith("error: ")
    code, out, _ = cli("definitions", "apply", str(flows["broken"]), "--json")
    assert code == 1
    (result,) = json.loads(out)
    assert result["result"] == "error" and result["file"] == str(flows["broken"])
    assert result["problems"] and result["problems"][0]["file"] == str(flows["broken"])
    assert result["problems"][0]["line"] == 5
    changed = flows["greet"].with_name("greet-changed.yaml")
    changed.write_text(GREET.replace("Hello", "Hi"))
    code, out, _ = cli("definitions", "apply", str(changed))
    assert code == 1 and "greet" in out


def test_schedules_from_create_to_delete(cli: Cli, flows: dict[str, Path]) -> None:
    greet = str(flows["greet"])
    made = cli.json(
        "schedules", "create", "nightly", "--file", greet, "--cron", "0 3 * * *",
        "--tz", "Europe/Paris", "-i", "name=cron", "--note", "n",
    )  # fmt: skip
    assert made["id"] == "nightly" and made["input"] == {"name": "cron"}
    assert made["describe"] and len(made["next_fire_times"]) == 5
    assert made["next_fire_times"][0].endswith("+00:00") and made["next_fire_at"]
    assert "created_at" not in made
    every = cli.json("schedules", "create", "often", "--file", greet, "--every", "15m")
    assert every["id"] == "often" and every["paused"] is False
    code, out, _ = cli("schedules", "list")
    assert code == 0 and "nightly" in out and "often" in out
    assert [s["id"] for s in cli.json("schedules", "list")] == ["nightly", "often"]
    assert cli.json("schedules", "show", "nightly") == {
        **made,
        "next_fire_times": made["next_fire_times"],
    }
    code, out, _ = cli("schedules", "show", "often")
    assert code == 0 and "often" in out and "overlap skip" in out
    code, out, _ = cli("schedules", "pause", "often", "--note", "quiet")
    assert code == 0 and out == "often paused\n"
    assert cli.json("schedules", "show", "often")["paused"] is True
    assert cli("schedules", "resume", "often")[0] == 0
    assert cli.json("schedules", "show", "often")["paused"] is False
    updated = cli.json("schedules", "update", "often", "--every", "1h", "--overlap", "allow_all")
    assert updated["overlap"] == "allow_all"
    code, out, _ = cli("schedules", "trigger", "often")
    assert code == 0 and out.startswith("started ")
    ids = cli.json(
        "schedules", "backfill", "often",
        "--start", "2030-01-01T00:00:00Z", "--end", "2030-01-01T03:00:00Z",
    )["execution_ids"]  # fmt: skip
    assert len(ids) == 3
    again = cli.json(
        "schedules", "backfill", "often",
        "--start", "2030-01-01T00:00:00Z", "--end", "2030-01-01T03:00:00Z",
    )["execution_ids"]  # fmt: skip
    assert sorted(again) == sorted(ids)  # nothing starts twice
    assert len(cli.json("workflows", "list", "--workflow", "greet")["items"]) == 4
    code, _, err = cli("schedules", "create", "often", "--file", greet, "--every", "1h")
    assert code == 1 and err.startswith("error: ")
    code, _, err = cli("schedules", "create", "bad", "--file", greet)
    assert code == 2 and err
    deleted = cli.json("schedules", "delete", "often")
    assert deleted == {"id": "often", "deleted": True}
    code, _, err = cli("schedules", "show", "often")
    assert code == 4 and err.startswith("error: ")
    code, _, err = cli("schedules", "trigger", "often")
    assert code == 4


def test_through_a_server_the_key_decides_tenant_and_approver(
    server: Server, flows: dict[str, Path], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.delenv("WOVYR_SERVER", raising=False)
    cli = Cli("server", tmp_path / "home", capsys, monkeypatch, "t-key-decides", server)
    cli.start(flows["waits"], "w-1")
    code, _, err = cli("workflows", "show", "w-1", "--tenant", "other")
    assert code == 2 and "the API key decides the tenant" in err
    code, _, err = cli("workflows", "approve", "w-1", "ok", "--by", "ada")
    assert code == 2 and "--by" in err
    monkeypatch.setenv("WOVYR_SERVER", server.url)  # the environment's server, no flag
    capsys.readouterr()
    assert main(["workflows", "show", "w-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "w-1"
    monkeypatch.setenv("WOVYR_API_KEY", "wvr_not-a-key")
    assert main(["workflows", "show", "w-1"]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_commands_of_the_host_refuse_a_server(
    capsys: pytest.CaptureFixture[str], flows: dict[str, Path]
) -> None:
    for argv in (["run", str(flows["greet"])], ["serve"], ["db", "upgrade"], ["dev"]):
        code = main(["--server", "http://127.0.0.1:9", *argv])
        err = capsys.readouterr().err
        assert code == 2 and f"`wovyr {argv[0]}` works on this host's store" in err, argv
    code = main(["--server", "http://127.0.0.1:9", "memory", "list", "notes"])
    err = capsys.readouterr().err
    assert code == 2 and "`wovyr memory` does not go through a server yet" in err
    for argv in (["admin", "backup", "verify", "x"], ["admin", "restore", "x"]):
        code = main(["--server", "http://127.0.0.1:9", *argv])
        err = capsys.readouterr().err
        assert code == 2 and f"`wovyr admin {argv[1]}` does not go through a server" in err
    export = ["workflows", "export", "--before", "2030-01-01", "-o", "out.jsonl"]
    assert main(["--server", "http://127.0.0.1:9", *export]) == 2
    assert "`wovyr workflows export` does not go through a server" in capsys.readouterr().err
    code = main(["--server", "http://127.0.0.1:9", "workflows", "show", "x"])
    assert code == 1 and "could not be reached" in capsys.readouterr().err
    code = main(["--server", "http://127.0.0.1:9", "validate", str(flows["greet"])])
    assert code == 0  # validate reads files only


def test_pages_of_the_api_are_read_through_to_the_limit(
    server: Server, flows: dict[str, Path], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    """The API pages lists (200) and histories (1000) more finely than the CLI's limits:
    with pages of 2 here, the commands still print what the store's commands print."""
    monkeypatch.delenv("WOVYR_SERVER", raising=False)
    cli = Cli("server", tmp_path / "home", capsys, monkeypatch, "t-pages", server)
    for n in range(5):
        cli.start(flows["greet"], f"g-{n}")
    whole = cli.json("workflows", "list")
    history = cli.json("workflows", "history", "g-0")
    monkeypatch.setattr("wovyr.cli.remote._PAGE", 2)
    monkeypatch.setattr("wovyr.cli.remote._EVENTS", 2)
    assert cli.json("workflows", "list") == whole
    three = cli.json("workflows", "list", "--limit", "3")
    assert three["items"] == whole["items"][:3] and three["next_cursor"]
    rest = cli.json("workflows", "list", "--cursor", three["next_cursor"])
    assert rest["items"] == whole["items"][3:] and rest["next_cursor"] is None
    assert cli.json("workflows", "history", "g-0") == history and len(history) == 4
    assert cli.json("workflows", "history", "g-0", "--after", "1", "--limit", "3") == history[1:4]


def _timeless(value: Any) -> Any:
    """`value` with every time replaced (the two runs happen at different moments)."""
    if isinstance(value, dict):
        return {
            k: "<time>" if (k == "at" or k.endswith(("_at", "_times"))) and v else _timeless(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_the_json_is_the_same_both_ways(
    server: Server, flows: dict[str, Path], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    """The same steps on the store and through the server print the same JSON, times
    aside: every field, every event, every schedule field."""
    monkeypatch.delenv("WOVYR_SERVER", raising=False)
    outputs: dict[str, list[Any]] = {}
    for mode in ("local", "server"):
        monkeypatch.setenv("WOVYR_TENANT", "t-same")
        home = tmp_path / mode
        cli = Cli(mode, home, capsys, monkeypatch, "t-same", server if mode == "server" else None)
        seen = outputs[mode] = []
        seen.append(cli.json("definitions", "apply", str(flows["waits"]), str(flows["greet"])))
        cli.start(flows["waits"], "w-1", who="you")
        seen.append(cli.json("workflows", "signal", "w-1", "go", "--payload", "[1]"))
        cli.settle("w-1", lambda v: v["activities"]["go"]["status"] == "completed")
        cli.json("workflows", "approve", "w-1", "ok", *cli.by("ada"), "--comment", "fine")
        cli.settle("w-1", lambda v: v["status"] == "completed")
        seen.append(cli.json("workflows", "show", "w-1"))
        seen.append(cli.json("workflows", "history", "w-1"))
        seen.append(cli.json("workflows", "list"))
        seen.append(cli("workflows", "logs", "w-1", "--json")[1])
        seen.append(cli.json("definitions", "list"))
        seen.append(cli.json("definitions", "show", "greet"))
        seen.append(
            cli.json("schedules", "create", "s", "--workflow", "greet", "--every", "1h",
                     "--start-at", "2030-01-01T00:00:00Z", "--note", "n")
        )  # fmt: skip
        seen.append(cli.json("schedules", "list"))
        seen.append(cli.json("schedules", "pause", "s"))
        seen.append(cli.json("schedules", "delete", "s"))
    for local, remote in zip(outputs["local"], outputs["server"], strict=True):
        assert _timeless(remote) == _timeless(local)
