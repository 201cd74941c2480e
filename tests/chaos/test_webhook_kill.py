"""Outbound webhooks under SIGKILL: a `wovyr worker` process killed after the step that
completed an execution committed (its delivery in the outbox) and while it is posting the
delivery (the receiver holds the request) loses nothing: the next worker sends it again
under the same delivery id once the dead one's lease ends, and it is recorded delivered.
A receiver that dedups on `Wovyr-Delivery` sees it once. The tenant seals its payloads, so
the outbox is written beside sealed events."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.server.test_serve_process import WOVYR, wait_for

from wovyr.platform.secrets import open_secrets
from wovyr.platform.webhooks import DELIVERY_HEADER
from wovyr.store.events import WebhookEndpointRecord
from wovyr.store.sqlite import SQLiteStore

ROOT_KEY = "5d" * 32
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - {id: a, set: {ok: true}}
"""


class HoldingReceiver:
    """Holds its first request until `release` is set (the worker is killed meanwhile);
    answers every later one at once. Records each request's delivery id."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.first = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.ids.append(self.headers[DELIVERY_HEADER])
                if len(receiver.ids) == 1:
                    receiver.first.set()
                    receiver.release.wait(60)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:  # the sender is gone
                    return

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving and close the listening socket (left to the garbage collector, it
        warns inside whichever test runs next in this worker)."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[HoldingReceiver]:
    held = HoldingReceiver()
    yield held
    held.close()


def run(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run(
        [*WOVYR, *args, "--json"], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_delivery_killed_mid_send_is_sent_again_under_its_id(
    tmp_path: Path, receiver: HoldingReceiver
) -> None:
    home = tmp_path / "home"
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("WOVYR_DATABASE_URL", None)
    run(env, "admin", "tenants", "set", "acme", "--seal-payloads")
    run(env, "admin", "tenants", "set", "acme", "--allow-host", f"127.0.0.1:{receiver.port}")
    store = SQLiteStore(home / "wovyr.db")
    now = datetime.now(UTC)
    secrets = open_secrets(store, home, {"WOVYR_KMS_ROOT_KEY": ROOT_KEY})
    secrets.set_secret("acme", "WH", "hook-key-0123456789abcdef", by="test", at=now)
    url = f"http://127.0.0.1:{receiver.port}/hook"
    endpoint = WebhookEndpointRecord(
        "acme", "ops", url, ("execution.completed",), None, ("WH",), now, "test"
    )
    store.put_webhook_endpoint(endpoint)
    started = run(env, "run", str(flow), "--tenant", "acme", "--detach")

    worker = [*WOVYR, "worker", "--poll-interval", "0.05", "--lease-seconds", "1"]
    first = subprocess.Popen(worker, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert receiver.first.wait(60), "the first worker never posted the delivery"
        first.send_signal(signal.SIGKILL)  # committed, posting, not recorded
        first.wait(30)
    finally:
        receiver.release.set()
    [pending] = store.list_deliveries("acme").items
    assert pending.status == "pending" and pending.attempts == 0
    assert pending.execution_id == started["id"]

    second = subprocess.Popen(worker, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def delivered() -> bool:
            found = store.get_delivery("acme", pending.id)
            return found is not None and found.status == "delivered"

        wait_for(delivered, 60, "the delivery to be sent again")
    finally:
        second.terminate()
        _, err = second.communicate(timeout=30)
    assert b"Traceback" not in err
    assert len(receiver.ids) == 2 and set(receiver.ids) == {pending.id}  # at least once
    assert len(set(receiver.ids)) == 1  # a receiver that dedups on the id: once
    [attempt] = store.delivery_attempts("acme", pending.id)
    assert attempt.status_code == 200
    store.close()
