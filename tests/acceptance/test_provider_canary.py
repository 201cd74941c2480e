"""Acceptance: a real `wovyr serve` (its worker in a child process) runs an `llm` step named
for a provider stored over the API, whose key is a canary secret: the scripted model server
started here sees `Authorization: Bearer <canary>`, and the canary (plain or base64) is in
none of the database files, the API answers (the provider shows its secret's name) or the
server's output."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import httpx
import pytest
from tests.server.test_serve_process import WOVYR, Server, wait_for

from wovyr.testing.model_server import ScriptedLLM, text

pytestmark = pytest.mark.slow

ROOT_KEY = "5d" * 32
CANARY = "sk-serve-canary-0c4e8b61d2"
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ask}
activities:
  - id: ask
    llm: {provider: acme, prompt: "hi"}
output: "${{ activities.ask.output }}"
"""


def leaks(data: bytes) -> bool:
    return CANARY.encode() in data or base64.b64encode(CANARY.encode()) in data


@pytest.mark.timeout(180)
def test_a_stored_provider_in_a_served_worker(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    server = Server(
        home,
        {
            "WOVYR_DISPATCH_INTERVAL_SECONDS": "0.2",
            "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
            "WOVYR_LLM_BASE_URL": "",
            "WOVYR_LLM_API_KEY": "",
        },
    )
    answers: list[bytes] = []
    with ScriptedLLM([text("served", usage=(100, 10))]) as llm:
        host = llm.base_url.split("/")[2]  # the model is on loopback: the policy lists it
        allow = [*WOVYR, "admin", "tenants", "set", "default", "--allow-host", host]
        done = subprocess.run(allow, check=False, env=server.env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        server.start()
        try:
            token = server.bootstrap_token()
            with httpx.Client(
                base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=30
            ) as http:

                def call(method: str, path: str, **kw: object) -> httpx.Response:
                    r = http.request(method, path, **kw)  # type: ignore[arg-type]
                    answers.append(r.content)
                    return r

                assert call("PUT", "/api/v1/secrets/ACME_KEY", json={"value": CANARY}).is_success
                body = {"base_url": llm.base_url, "api_key_secret": "ACME_KEY",
                        "default_model": "m1", "price_in": 10, "price_out": 20}  # fmt: skip
                assert call("PUT", "/api/v1/providers/acme", json=body).is_success
                r = call("POST", "/api/v1/workflows", json={"definition": FLOW, "id": "e1"})
                assert r.status_code == 201, r.text

                def done() -> dict[str, object] | None:
                    view = call("GET", "/api/v1/workflows/e1").json()
                    return view if view["status"] in ("completed", "failed") else None

                view = wait_for(done, 60, "the llm step")
                assert view["status"] == "completed", view["activities"]["ask"]["error"]
                output = view["output"]
                assert isinstance(output, dict)
                assert output["text"] == "served"
                assert output["cost"] == pytest.approx((100 * 10 + 10 * 20) / 1e6)
                shown = call("GET", "/api/v1/providers/acme").json()
                assert shown["api_key_secret"] == "ACME_KEY"
                call("GET", "/api/v1/providers")
                call("GET", "/api/v1/workflows/e1/history")
                call("GET", "/api/v1/workflows")
            assert [c.authorization for c in llm.completions] == [f"Bearer {CANARY}"]
        finally:
            server.stop()
    assert not any(leaks(a) for a in answers)
    assert not leaks(server.output().encode())
    files = [p for p in home.iterdir() if p.name.startswith("wovyr.db")]
    assert files
    for path in files:
        assert not leaks(path.read_bytes()), path.name


@pytest.mark.timeout(180)
def test_a_stored_provider_in_wovyr_worker(tmp_path: Path) -> None:
    """The same through the CLI: `wovyr secrets set`, `wovyr providers set`, `wovyr run
    --detach`, then a `wovyr worker` process drives the step."""
    home = tmp_path / "home"
    env = {**Server(home, {}).env, "WOVYR_KMS_ROOT_KEY": ROOT_KEY, "WOVYR_LLM_BASE_URL": ""}
    flow = tmp_path / "ask.yaml"
    flow.write_text(FLOW)

    def wovyr(*args: str, stdin: str = "") -> str:
        done = subprocess.run(
            [*WOVYR, *args], check=False, env=env, input=stdin.encode(), capture_output=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout.decode() + done.stderr.decode()

    outputs: list[str] = []
    with ScriptedLLM([text("worked", usage=(10, 1))]) as llm:
        outputs.append(wovyr("secrets", "set", "ACME_KEY", stdin=CANARY))
        outputs.append(wovyr("providers", "set", "acme", "--base-url", llm.base_url,
                             "--api-key-secret", "ACME_KEY", "--default-model", "m1"))  # fmt: skip
        outputs.append(wovyr("run", str(flow), "--id", "e1", "--detach"))
        with (tmp_path / "worker.out").open("wb") as out:
            worker = subprocess.Popen(
                [*WOVYR, "worker", "--poll-interval", "0.1"], stdout=out,
                stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        try:
            wait_for(lambda: llm.completions, 60, "the model call")

            def finished() -> str | None:
                shown = wovyr("workflows", "show", "e1", "--json")
                return shown if '"completed"' in shown or '"failed"' in shown else None

            outputs.append(wait_for(finished, 60, "the execution to finish"))
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        assert [c.authorization for c in llm.completions] == [f"Bearer {CANARY}"]
    assert '"completed"' in outputs[-1], outputs[-1]
    outputs.append(wovyr("providers", "show", "acme", "--json"))
    outputs.append(wovyr("workflows", "history", "e1", "--json"))
    outputs.append((tmp_path / "worker.out").read_text(errors="replace"))
    assert not any(leaks(o.encode()) for o in outputs)
    for path in (p for p in home.iterdir() if p.name.startswith("wovyr.db")):
        assert not leaks(path.read_bytes()), path.name
