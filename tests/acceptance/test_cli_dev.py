"""`wovyr dev`: one command serves the API, the UI and a worker on the embedded store,
registers the workflow files it is given, and reloads on change: an edited workflow file
is registered again, an edited activity module restarts the server, which carries on with
the new code; it prints the UI address and an admin key, and Ctrl-C (SIGINT) stops it."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 90.0

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: greet, version: "{version}"}}
activities:
  - id: hello
    tool: greet
output: "${{{{ activities.hello.output }}}}{suffix}"
"""
TOOLS = """\
import wovyr


@wovyr.activity("greet")
def greet() -> str:
    return "{word}"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Dev:
    """The `wovyr dev` process, its output lines read on a thread."""

    def __init__(self, project: Path, home: Path, port: int, *extra: str) -> None:
        env = {**os.environ, "WOVYR_HOME": str(home), "PYTHONPATH": str(project)}
        env.pop("WOVYR_DATABASE_URL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wovyr", "dev", "flows", "-a", "dev_tools.py",
             "--port", str(port), *extra],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # its server child goes with it when a test fails
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # its group: the server child too
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, pattern: str) -> re.Match[str]:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.seen))


def _run(api: httpx.Client, body: dict[str, Any]) -> Any:
    started = api.post("/api/v1/workflows", json=body)
    assert started.status_code == 201, started.text
    eid = started.json()["id"]
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        view = api.get(f"/api/v1/workflows/{eid}").json()
        if view["status"] in ("completed", "failed"):
            assert view["status"] == "completed", view
            return view["output"]
        time.sleep(0.05)
    raise AssertionError(f"{eid} did not finish")


def test_dev_serves_registers_and_reloads(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "flows").mkdir(parents=True)
    (project / "flows" / "greet.yaml").write_text(FLOW.format(version="1", suffix=""))
    (project / "dev_tools.py").write_text(TOOLS.format(word="hello"))
    dev = Dev(project, tmp_path / "home", _free_port())
    try:
        dev.expect(r"^greet\.yaml: registered greet v1$")  # before the server started
        url = dev.expect(r"UI (http://\S+)/ui").group(1)
        key = dev.expect(r"admin key \(tenant default\): (\S+)").group(1)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as api:
            assert _run(api, {"workflow": "greet"}) == "hello"

            (project / "dev_tools.py").write_text(TOOLS.format(word="hi"))
            dev.expect(r"reloaded \(server restarted\): dev_tools\.py")
            assert _run(api, {"workflow": "greet"}) == "hi"  # the restarted server's new code

            (project / "flows" / "greet.yaml").write_text(FLOW.format(version="2", suffix="!"))
            dev.expect(r"^reloaded greet\.yaml: registered greet v2$")
            assert _run(api, {"workflow": "greet"}) == "hi!"  # the newest version by name
            assert _run(api, {"workflow": "greet", "version": "1"}) == "hi"

            # edited without a new version: registered as a development revision, and said
            (project / "flows" / "greet.yaml").write_text(FLOW.format(version="2", suffix="?"))
            dev.expect(
                r"^reloaded greet\.yaml: registered greet v2\+dev\.1, a development revision "
                r"\(v2 is applied with other content"
            )
            assert _run(api, {"workflow": "greet"}) == "hi?"
            assert _run(api, {"workflow": "greet", "version": "2"}) == "hi!"
            (project / "flows" / "greet.yaml").write_text(FLOW.format(version="2", suffix="?"))
            dev.expect(r"^reloaded greet\.yaml: greet v2\+dev\.1 unchanged$")
            (project / "flows" / "greet.yaml").write_text("kind: Workflow\n")
            dev.expect(r"^greet\.yaml: not registered: ")  # and its problems, located:
            dev.expect(r"greet\.yaml:1:1: .*apiVersion")

        # a second start revokes the first start's key: only one dev key is live
        dev.process.send_signal(signal.SIGINT)
        assert dev.process.wait(timeout=DEADLINE) == 0
        again = Dev(project, tmp_path / "home", _free_port(), "--json")
        try:
            ready = json.loads(again.expect(r'^\{"event": "ready"').string)
            url, second = ready["ui"].removesuffix("/ui"), ready["key"]
            assert ready["tenant"] == "default" and ready["watching"]
            health = "/api/v1/workflows?limit=1"
            old = httpx.get(url + health, headers={"Authorization": f"Bearer {key}"})
            new = httpx.get(url + health, headers={"Authorization": f"Bearer {second}"})
            assert (old.status_code, new.status_code) == (401, 200)
        finally:
            again.process.send_signal(signal.SIGINT)
            assert again.process.wait(timeout=DEADLINE) == 0
            again.close()
    finally:
        dev.close()
