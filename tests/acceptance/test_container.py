"""The container image as far as this machine allows: no container runtime runs here
(podman installs but cannot start a container, and no base image can be pulled), so the
Dockerfile is linted (hadolint, from the `dev` group) and checked for what the image must
have, the compose file for its services, and the image's entry point script runs the
server and a worker from this virtualenv as the image would (a non-default port from
WOVYR_PORT, the first admin key in a 0600 file and nowhere in the output, the health check
without curl, SIGTERM ending both with status 0)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from ruamel.yaml import YAML
from tests.acceptance.test_worker_metrics import free_port, wait_for
from tests.unit.test_log_lines import STAMP

from wovyr._version import __version__

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_dockerfile_has_what_the_image_promises() -> None:
    steps = _instructions()
    stages = [args for word, args in steps if word == "FROM"]
    assert len(stages) >= 2 and all("-slim" in s for s in stages)  # multi-stage, slim
    final = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM") :]
    found = dict(final)
    assert found["USER"].split(":")[0] not in ("0", "root")
    assert found["VOLUME"] == '["/data"]'
    assert "WOVYR_HOME=/data" in found["ENV"] and "WOVYR_HOST=0.0.0.0" in found["ENV"]
    assert found["STOPSIGNAL"] == "SIGTERM"
    assert "healthcheck" in found["HEALTHCHECK"] and "curl" not in found["HEALTHCHECK"]
    assert found["ENTRYPOINT"] == '["wovyr-entrypoint"]' and found["CMD"] == '["serve"]'
    labels = found["LABEL"]
    for key in ("title", "version", "licenses", "source"):
        assert f"org.opencontainers.image.{key}=" in labels
    assert any("deploy/entrypoint.sh" in args for word, args in final if word == "COPY")
    assert any('".[all]"' in args for word, args in steps if word == "RUN")


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        if os.environ.get("CI"):
            pytest.fail("hadolint is missing: CI installs it with the dev group")
        pytest.skip("hadolint is not installed (pip install --group dev)")
    run = subprocess.run(
        [hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_compose_file_runs_a_server_two_workers_and_postgres() -> None:
    compose = YAML(typ="safe").load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "migrate", "server", "worker-1", "worker-2"} <= set(services)
    assert services["migrate"]["command"] == ["db-upgrade"]
    assert "--bootstrap-key-file" in services["server"]["command"]
    for name in ("server", "worker-1", "worker-2"):
        service = services[name]
        url = service["environment"]["WOVYR_DATABASE_URL"]
        assert url.startswith("postgresql://") and "@postgres:5432/" in url
        done = service["depends_on"]["migrate"]["condition"]
        assert done == "service_completed_successfully"
    for name in ("worker-1", "worker-2"):
        assert services[name]["command"][0] == "worker"
        assert services[name]["environment"]["WOVYR_HEALTHCHECK_URL"].endswith(":9464/readyz")
    assert services["otel-collector"]["profiles"] == ["otel"]
    config = services["otel-collector"]["volumes"][0].split(":")[0]
    assert (ROOT / config).is_file()


def _env(home: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WOVYR_", "OTEL_"))}
    bin_dir = str(Path(sys.executable).parent)
    return {**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}", "WOVYR_HOME": str(home), **more}


def _healthy(env: dict[str, str]) -> bool:
    probe = subprocess.run(
        ["sh", str(ENTRYPOINT), "healthcheck"], env=env, capture_output=True, check=False
    )
    return probe.returncode == 0


def _start(command: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["sh", str(ENTRYPOINT), command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_entrypoint_runs_db_upgrade_serve_and_worker(tmp_path: Path) -> None:
    home, key_file = tmp_path / "data", tmp_path / "secrets" / "admin.key"
    base = _env(home)
    upgraded = subprocess.run(
        ["sh", str(ENTRYPOINT), "db-upgrade"], env=base, capture_output=True, text=True, check=False
    )
    assert upgraded.returncode == 0, upgraded.stderr

    port = free_port()
    env = _env(
        home,
        WOVYR_HOST="127.0.0.1",
        WOVYR_PORT=str(port),
        WOVYR_BOOTSTRAP_KEY_FILE=str(key_file),
        WOVYR_LOG_FORMAT="json",
        WOVYR_ACCESS_LOG="1",
    )
    assert not _healthy(env)  # nothing listens yet: the probe fails
    server = _start("serve", env)
    try:
        wait_for(lambda: server.poll() is not None or _healthy(env), 60, "the server's /readyz")
        assert server.poll() is None, "the server exited"
        token = key_file.read_text().strip()
        assert token.startswith("wvr_")
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        listed = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/workflows",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert listed.status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["version"]
    finally:
        server.send_signal(signal.SIGTERM)  # `exec`: the signal reaches wovyr itself
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert token not in out + err
    assert str(key_file) in out  # it says where the key went
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # JSON, all
    banner = next(line for line in lines if line.get("event") == "start")
    assert banner["url"] == f"http://127.0.0.1:{port}" and banner["version"] == __version__
    assert all(STAMP.fullmatch(line["at"]) for line in lines)
    assert {"method": "GET", "path": "/api/v1/workflows", "status": 200}.items() <= next(
        line for line in lines if line.get("path") == "/api/v1/workflows"
    ).items()

    metrics = free_port()
    worker_env = _env(
        home,
        WOVYR_METRICS_ADDR=f"127.0.0.1:{metrics}",
        WOVYR_HEALTHCHECK_URL=f"http://127.0.0.1:{metrics}/readyz",
    )
    worker = _start("worker", worker_env)
    try:
        wait_for(
            lambda: worker.poll() is not None or _healthy(worker_env), 60, "the worker's /readyz"
        )
        assert worker.poll() is None, "the worker exited"
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
