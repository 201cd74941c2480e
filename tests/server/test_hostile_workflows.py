"""Hostile workflows submitted over HTTP by an operator of a restricted tenant.

A tenant other than the local owner's starts restricted: no `shell`, and `http` reaches only
public addresses. Every form of a loopback, private or metadata target - written literally
(refused when the definition is accepted) or reached through an input, a DNS name or a
redirect (refused at dispatch) - fails the same way, and a listener on 127.0.0.1 receives
nothing. What the host's administrator allow-lists works; what a tenant admin may do over
the API is only to tighten. The store is real (every backend); the listener is a real
HTTP server on this machine.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from tests.isolation import require_isolation
from tests.server.conftest import Api

from wovyr.activities.policy import RESTRICTED
from wovyr.engine.tenants import set_policy

pytestmark = pytest.mark.anyio

OPERATOR = "tenant-b:operator"
ADMIN = "tenant-b:admin"


def refused(where: str, hosts: str = "") -> dict[str, str]:
    """The one error of every refused or unreachable target under tenant-b's policy: it
    names the policy and the command that admits a host, never the target."""
    return {
        "type": "TargetUnreachable",
        "message": "HTTP target not reachable: the side-effect policy of tenant 'tenant-b' "
        f"({where}) lets `http` steps, model providers and MCP servers reach public addresses "
        "only (private_network: false), and a refused address fails like one that does not "
        "answer; for a host on a loopback or private network (a local model server), the "
        f"host's administrator admits it with: wovyr admin tenants set tenant-b {hosts}"
        "--allow-host HOST:PORT",
    }


REFUSED = refused("restricted, its default")


class Listener(ThreadingHTTPServer):
    """Records every request's path; `/hop?to=URL` redirects, anything else answers ok."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[str] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: Listener

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        url = urlsplit(self.path)
        if url.path == "/hop":
            self.send_response(302)
            self.send_header("Location", parse_qs(url.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"secret": "internal-canary"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _listen() -> Iterator[Listener]:
    server = Listener()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    yield from _listen()


@pytest.fixture
def allowed() -> Iterator[Listener]:
    """A second internal service, the one the host's administrator allow-lists."""
    yield from _listen()


def http_flow(url: str, *, follow: bool = False) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: fetch}}
inputs:
  url: {{type: string, default: ""}}
activities:
  - id: get
    http: {{url: {url!r}, follow_redirects: {str(follow).lower()}}}
    retry: {{max_attempts: 1}}
    timeout: 10s
"""


def shell_flow(proof: Path) -> str:
    argv = [sys.executable, "-c", f"open({str(proof)!r}, 'w')"]
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: hostile}}
activities:
  - id: pwn
    shell: {{argv: {argv!r}}}
"""


async def start(api: Api, definition: str, **body: Any) -> Any:
    return await api.call(
        "POST", "/api/v1/workflows", OPERATOR, json={"definition": definition, **body}
    )


async def outcome(api: Api, execution_id: str) -> tuple[str, Any]:
    await api.drain()
    view = (await api.call("GET", f"/api/v1/workflows/{execution_id}", OPERATOR)).json()
    activity = view["activities"]["get"]
    error = activity.get("error") or {}
    return view["status"], {"type": error.get("type"), "message": error.get("message")}


# --- shell -----------------------------------------------------------------------------------


def cat_flow(path: str) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: peek}}
activities:
  - id: cat
    shell: {{argv: [cat, {path!r}]}}
    retry: {{max_attempts: 1}}
"""


async def test_a_cat_grant_reads_nothing_of_the_worker_it_runs_on(api: Api) -> None:
    # The host grants tenant-b only `cat`. The worker is this process: what it was started
    # with (its environment: where a root key or a database URL would be) is one `cat` away.
    require_isolation()
    granted = replace(RESTRICTED, shell=True, shell_commands=("cat",))
    peek = cat_flow(f"/proc/{os.getpid()}/environ")
    seen = {}
    for name in ("isolated", "unisolated"):  # as granted; then as accepted by the host
        policy = replace(granted, shell_isolation=name == "isolated")
        set_policy(api.engine.store, "tenant-b", policy, by="host", at=api.clock.now())
        r = await start(api, peek, id=f"peek-{name}")
        assert r.status_code == 201, r.text
        await api.drain()
        view = (await api.call("GET", f"/api/v1/workflows/peek-{name}", OPERATOR)).json()
        seen[name] = (view["status"], view["activities"]["cat"])

    status, cat = seen["isolated"]
    assert status == "failed" and cat["error"]["type"] == "NonZeroExit"
    assert "No such file" in cat["error"]["details"]["stderr"]  # not in the step's /proc
    status, cat = seen["unisolated"]
    assert status == "completed" and "PATH=" in cat["output"]["stdout"]


async def test_shell_is_refused_at_submit_naming_the_activity_kind_and_policy(
    api: Api, tmp_path: Path
) -> None:
    proof = tmp_path / "ran"
    r = await start(api, shell_flow(proof), id="hostile-1")

    assert r.status_code == 422, r.text
    (problem,) = r.json()["problems"]
    assert problem["path"] == "activities[0].shell"
    assert "activity 'pwn' (shell)" in problem["message"]
    assert "side-effect policy of tenant 'tenant-b'" in problem["message"]
    assert "shell: false" in problem["message"]
    missing = await api.call("GET", "/api/v1/workflows/hostile-1", OPERATOR)
    assert missing.status_code == 404  # nothing was stored
    await api.drain()
    assert not proof.exists()


async def test_schedule_create_refuses_shell_too(api: Api, tmp_path: Path) -> None:
    r = await api.call(
        "POST",
        "/api/v1/schedules",
        OPERATOR,
        json={"id": "nightly", "definition": shell_flow(tmp_path / "x"), "every": "1h"},
    )
    assert r.status_code == 422 and "(shell)" in r.text


async def test_shell_started_before_the_policy_was_tightened_is_stopped_at_dispatch(
    api: Api, tmp_path: Path
) -> None:
    proof = tmp_path / "ran"
    opened = replace(RESTRICTED, shell=True)
    set_policy(api.engine.store, "tenant-b", opened, by="host", at=api.clock.now())
    r = await start(api, shell_flow(proof), id="early")
    assert r.status_code == 201, r.text

    # the tenant's own admin tightens it over the API before a worker picks the step up
    tightened = await api.call("PATCH", "/api/v1/admin/policy", ADMIN, json={"shell": False})
    assert tightened.status_code == 200, tightened.text
    await api.drain()

    view = (await api.call("GET", "/api/v1/workflows/early", OPERATOR)).json()
    assert view["status"] == "failed"
    error = view["activities"]["pwn"]["error"]
    assert error["type"] == "PolicyDenied" and "shell: false" in error["message"]
    history = (await api.call("GET", "/api/v1/workflows/early/history", OPERATOR)).json()
    started = [e for e in history["items"] if e["type"] == "ActivityStarted"]
    assert len(started) == 1  # refused once, not retried
    assert not proof.exists()


# --- http ------------------------------------------------------------------------------------

LITERAL_FORMS = [
    "127.0.0.1:{port}",
    "localhost:{port}",
    "127.1:{port}",
    "2130706433:{port}",
    "0x7f.1:{port}",
    "0.0.0.0:{port}",
    "[::1]:{port}",
    "[::ffff:127.0.0.1]:{port}",
    "10.0.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.100.100.200",
    "[fd00:ec2::254]",
]


async def test_every_literal_private_target_is_refused_at_submit(
    api: Api, listener: Listener
) -> None:
    for host in LITERAL_FORMS:
        url = f"http://{host.format(port=listener.port)}/latest/meta-data/"
        r = await start(api, http_flow(url))

        assert r.status_code == 422, (host, r.text)
        (problem,) = r.json()["problems"]
        assert problem["path"] == "activities[0].http.url"
        assert "activity 'get' (http)" in problem["message"]
    await api.drain()
    assert listener.seen == []


async def test_every_private_target_given_at_run_time_fails_the_same_way(
    api: Api, listener: Listener
) -> None:
    port = listener.port
    loopback_name = socket.gethostname()  # resolved by the system resolver, not a literal
    resolved = {a[4][0] for a in socket.getaddrinfo(loopback_name, port, type=socket.SOCK_STREAM)}
    assert resolved and not any(a.startswith(("1.", "8.")) for a in resolved), resolved
    urls = [f"http://{form.format(port=port)}/x" for form in LITERAL_FORMS] + [
        f"http://{loopback_name}:{port}/x",  # a DNS name that resolves to this machine
        f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/closed-port",
    ]
    errors = []
    for i, url in enumerate(urls):
        r = await start(api, http_flow("${{ inputs.url }}"), input={"url": url}, id=f"ssrf-{i}")
        assert r.status_code == 201, r.text
        status, error = await outcome(api, f"ssrf-{i}")
        assert status == "failed", url
        errors.append(error)

    assert errors == [REFUSED] * len(urls)  # one error: no port scanning, no oracle
    assert listener.seen == []


async def test_a_redirect_chain_ending_at_loopback_is_refused_at_the_hop(
    api: Api, listener: Listener, allowed: Listener
) -> None:
    policy = replace(RESTRICTED, allow_hosts=(f"127.0.0.1:{allowed.port}",))
    set_policy(api.engine.store, "tenant-b", policy, by="host", at=api.clock.now())
    target = f"http://127.0.0.1:{listener.port}/internal"
    second = f"http://127.0.0.1:{allowed.port}/hop?to={quote(target, safe='')}"
    first = f"http://127.0.0.1:{allowed.port}/hop?to={quote(second, safe='')}"

    r = await start(api, http_flow(first, follow=True), id="redirect")
    assert r.status_code == 201, r.text
    status, error = await outcome(api, "redirect")
    hosts = f"--allow-host 127.0.0.1:{allowed.port} "
    assert (status, error) == ("failed", refused("custom, set by host", hosts))
    assert len(allowed.seen) == 2  # both allowed hops were made
    assert listener.seen == []  # the last one never left


async def test_an_allow_listed_internal_address_works(api: Api, allowed: Listener) -> None:
    policy = replace(RESTRICTED, allow_hosts=(f"127.0.0.1:{allowed.port}",))
    set_policy(api.engine.store, "tenant-b", policy, by="host", at=api.clock.now())

    r = await start(api, http_flow(f"http://127.0.0.1:{allowed.port}/status"), id="inside")
    assert r.status_code == 201, r.text
    await api.drain()

    view = (await api.call("GET", "/api/v1/workflows/inside", OPERATOR)).json()
    assert view["status"] == "completed", view
    assert view["activities"]["get"]["output"]["json"] == {"secret": "internal-canary"}
    assert allowed.seen == ["/status"]


# --- what a tenant admin may change over the API -----------------------------------------------


async def test_a_tenant_admin_sees_and_tightens_its_policy_but_cannot_open_it(api: Api) -> None:
    shown = await api.call("GET", "/api/v1/admin/policy", ADMIN)
    assert shown.status_code == 200
    body = shown.json()
    assert (body["tenant"], body["source"]) == ("tenant-b", "default")
    assert body["policy"]["shell"] is False and body["policy"]["private_network"] is False

    for widen in (
        {"shell": True},
        {"private_network": True},
        {"allow_networks": ["127.0.0.0/8"]},
        {"allow_hosts": ["127.0.0.1:22"]},
        {"shell_cpu_seconds": None},
        {"shell_env": None},
        {"shell_isolation": False},
    ):
        r = await api.call("PATCH", "/api/v1/admin/policy", ADMIN, json=widen)
        assert r.status_code == 403, (widen, r.text)
        assert "wovyr admin tenants set tenant-b" in r.json()["detail"]

    tighter = await api.call("PATCH", "/api/v1/admin/policy", ADMIN, json={"shell_cpu_seconds": 5})
    assert tighter.status_code == 200, tighter.text
    assert tighter.json()["policy"]["shell_cpu_seconds"] == 5
    assert tighter.json()["updated_by"] == api.key_ids[ADMIN]
    bad = await api.call("PATCH", "/api/v1/admin/policy", ADMIN, json={"shel": False})
    assert bad.status_code == 422 and bad.json()["problems"][0]["path"] == "policy.shel"
    # tenant a is untouched; operators and viewers may not read or change it
    a = (await api.call("GET", "/api/v1/admin/policy", "tenant-a:admin")).json()
    assert a["source"] == "default" and a["policy"]["shell_cpu_seconds"] == 60
    for who in (OPERATOR, "tenant-b:viewer"):
        assert (await api.call("GET", "/api/v1/admin/policy", who)).status_code == 403


# --- the local owner's tenant once the store is served ------------------------------------------


async def test_serving_a_store_restricts_tenant_default_unless_it_was_set(
    api: Api, tmp_path: Path
) -> None:
    from wovyr.engine.tenants import policy_of, served

    found = policy_of(api.engine.store, "default")
    assert found.policy == RESTRICTED and found.source == "set"
    assert found.stored is not None and found.stored.updated_by == "serve"
    # an operator of tenant default gets no shell either
    _, token = api.authenticator.create_key("default", "operator", "colleague")
    r = await api.client.post(
        "/api/v1/workflows",
        json={"definition": shell_flow(tmp_path / "ran")},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 422 and "tenant 'default'" in r.text
    # an explicit choice of the host's administrator is never overridden
    set_policy(api.engine.store, "default", replace(RESTRICTED, shell=True), by="cli",
               at=api.clock.now())  # fmt: skip
    assert served(api.engine.store, api.clock.now()) is False
    assert policy_of(api.engine.store, "default").policy.shell is True
