"""Acceptance: a canary secret reaches an `http` header (a local HTTP server started here
sees it), a shell `env` entry (the step writes it to a file read here) and a tool argument,
and appears - plain, base64, URL-encoded, JSON-escaped - nowhere else: not in the SQLite
database file or its WAL, the server's logs, any API response (show, history, list,
metrics, secrets, problem bodies) or the UI pages. Then a second process with the same
`WOVYR_KMS_ROOT_KEY` and a copy of the store reads the secret; with another key it gets a
clear error, and nothing else breaks.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
from tests.probe import answers
from tests.server.test_serve_process import WOVYR, free_port, wait_for

pytestmark = pytest.mark.slow

ACTIVITIES = Path(__file__).with_name("secret_activities.py")
ROOT_KEY = "7f" * 32
# Characters that JSON, URLs and base64 each encode differently from the plain text.
CANARY = 'cnry-5e1f9a0b77/+"&=x-c4n4ry'

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: canary}
inputs:
  out: {type: string}
activities:
  - id: call
    http:
      url: "http://127.0.0.1:PORT/hook"
      method: POST
      headers:
        Authorization: "Bearer ${{ secrets.CANARY }}"
        X-Api-Key: "a-literal-key-shown-masked"
      json: {hello: world}
  - id: sh
    shell:
      argv: ["/bin/sh", "-c", "printf %s \\"$TOKEN\\" > \\"$OUT\\"; echo done $TOKEN"]
      env: {TOKEN: "${{ secrets.CANARY }}", OUT: "${{ inputs.out }}/shell.txt"}
      secret_env: [TOKEN]
  - id: tool
    tool: keep_token
    with: {token: "${{ secrets.CANARY }}", path: "${{ inputs.out }}/tool.txt"}
output:
  status: "${{ activities.call.output.status }}"
  tool: "${{ activities.tool.output }}"
"""


def forms(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        quote(value, safe=""),
        quote_plus(value, safe=""),
        json.dumps(value)[1:-1],
    ]


def leaks(text: bytes | str) -> list[str]:
    data = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
    return [f for f in forms(CANARY) if f.encode() in data]


class Hook(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        Hook.seen.append(dict(self.headers.items()))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def hook() -> Iterator[int]:
    Hook.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def wovyr(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WOVYR, *args],
        check=False,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_canary_secret_reaches_its_destinations_and_nothing_else(
    tmp_path: Path, hook: int
) -> None:
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    out.mkdir()
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    done = wovyr(env, "secrets", "set", "CANARY", stdin=CANARY + "\n")
    assert done.returncode == 0, done.stderr
    assert not leaks(done.stdout + done.stderr)
    trusted = wovyr(env, "admin", "tenants", "set", "default", "--preset", "trusted")
    assert trusted.returncode == 0, trusted.stderr

    port = free_port()
    log_path = home / "serve.out"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [*WOVYR, "serve", "--port", str(port), "--activities", str(ACTIVITIES)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert server.poll() is None, log_path.read_text()
            return answers(base)

        wait_for(ready, 60, "the server")
        token = next(
            line.strip()
            for line in log_path.read_text().splitlines()
            if line.strip().startswith("wvr_")
        )
        responses: list[httpx.Response] = []
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as http:

            def call(method: str, path: str, **kw: Any) -> httpx.Response:
                response = http.request(method, path, **kw)
                responses.append(response)
                return response

            body = {"definition": FLOW.replace("PORT", str(hook)), "input": {"out": str(out)}}
            started = call("POST", "/api/v1/workflows", json=body)
            assert started.status_code == 201, started.text
            execution = started.json()["id"]

            def finished() -> dict[str, Any] | None:
                shown = call("GET", f"/api/v1/workflows/{execution}").json()
                return shown if shown["status"] in ("completed", "failed") else None

            shown = wait_for(finished, 60, "the execution")
            assert shown["status"] == "completed", shown
            # it reached its three destinations
            assert Hook.seen[0]["Authorization"] == f"Bearer {CANARY}"
            assert (out / "shell.txt").read_text() == CANARY
            assert (out / "tool.txt").read_text() == CANARY
            # what is shown: references, masks, and the echoed value scrubbed
            acts = shown["activities"]
            headers = acts["call"]["input"]["headers"]
            assert headers == {
                "Authorization": "Bearer ${{ secrets.CANARY }}",
                "X-Api-Key": "***",
            }
            assert acts["sh"]["input"]["env"]["TOKEN"] == "${{ secrets.CANARY }}"
            assert shown["output"]["tool"] == {"echo": "***", "note": "got ***"}
            assert acts["sh"]["output"]["stdout"] == "done ***\n"
            assert "a-literal-key-shown-masked" not in json.dumps(shown)

            call("GET", f"/api/v1/workflows/{execution}/history", params={"limit": 1000})
            call("GET", "/api/v1/workflows")
            call("GET", "/metrics")
            listed = call("GET", "/api/v1/secrets")
            assert [s["name"] for s in listed.json()] == ["CANARY"]
            assert call("GET", "/api/v1/secrets/CANARY").json()["version"] == 1
            assert call("GET", "/api/v1/secrets/NOPE").status_code == 404
            bad = call("PUT", "/api/v1/secrets/CANARY", json={"value": 1, "v": CANARY})
            assert bad.status_code == 422  # the problem body never echoes the request
            assert call("GET", "/api/v1/workflows/nope").status_code == 404

            # the UI: sign in, then the list and the execution's page
            ui = httpx.Client(base_url=base, timeout=30)
            login = ui.get("/ui/login")
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
            assert csrf is not None
            signed = ui.post(
                "/ui/login", data={"api_key": token, "csrf_token": csrf.group(1), "next": "/ui"}
            )
            assert signed.status_code in (200, 303), signed.text
            pages = [ui.get("/ui"), ui.get(f"/ui/executions/{execution}")]
            assert all(p.status_code == 200 for p in pages)
            assert "secrets.CANARY" in pages[1].text
            ui.close()
            responses.extend(pages)
    finally:
        server.terminate()
        server.wait(timeout=60)

    for response in responses:
        assert not leaks(response.content), (response.request.url, leaks(response.content))
    for name in ("wovyr.db", "wovyr.db-wal", "serve.out"):  # and the backup's, below
        path = home / name
        if path.exists():
            assert not leaks(path.read_bytes()), name

    # A backup holds the secret sealed: no form of the canary in any of its files.
    backup = tmp_path / "backup"
    made = wovyr(env, "admin", "backup", str(backup), "--json")
    assert made.returncode == 0, made.stderr
    assert not leaks(made.stdout + made.stderr)
    files = [p for p in backup.rglob("*") if p.is_file()]
    assert any(p.name.startswith("store") for p in files), files
    for path in files:
        assert not leaks(path.read_bytes()), path.name

    # A second process, same root key, a copy of the store: reads the secret.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("wovyr.db", "wovyr.db-wal"):
        if (home / name).exists():
            shutil.copy(home / name, copy / name)
    second = {**env, "WOVYR_HOME": str(copy)}
    flow = tmp_path / "read.yaml"
    flow.write_text(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: read}\nactivities:\n"
        "  - id: t\n    tool: keep_token\n"
        f"    with: {{token: '${{{{ secrets.CANARY }}}}', path: '{out}/second.txt'}}\n"
    )
    ran = wovyr(second, "run", str(flow), "--activities", str(ACTIVITIES))
    assert ran.returncode == 0, ran.stderr
    assert (out / "second.txt").read_text() == CANARY
    assert not leaks(ran.stdout + ran.stderr)

    # ...and with another root key: a clear error, and everything else still works.
    other = {**second, "WOVYR_KMS_ROOT_KEY": "01" * 32}
    refused = wovyr(other, "run", str(flow), "--activities", str(ACTIVITIES), "--json")
    assert refused.returncode != 0
    assert "SecretUnreadable" in refused.stdout
    assert "root key" in refused.stdout
    assert "Traceback" not in refused.stdout + refused.stderr
    listed_again = wovyr(other, "secrets", "list", "--json")
    assert listed_again.returncode == 0
    assert [s["name"] for s in json.loads(listed_again.stdout)] == ["CANARY"]
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: plain}\nactivities:\n"
        "  - id: s\n    set: {ok: true}\n"
    )
    assert wovyr(other, "run", str(plain)).returncode == 0
