"""The TypeScript client (clients/typescript: types generated from docs/openapi.json by
openapi-typescript, a thin wrapper, type-checked and compiled by tsc) against a real
server: `node` runs its compiled live script (clients/typescript/test/live.ts), which
starts, lists every page, signals, waits for and cancels executions, and reads a 404.

CI builds it first (`npm ci && npm run build` in .ci/run); locally the test is skipped
with that command when node or the build is missing, and fails in CI (CI=true)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.ui.test_browser import LiveServer, live_server

__all__ = ["live_server"]  # the fixture, shared with tests/ui/test_browser.py

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
SCRIPT = PACKAGE / "dist" / "test" / "live.js"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _node() -> str:
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "node is not installed (Node 20+ runs the TypeScript client)"
    elif not SCRIPT.exists():
        problem = f"the TypeScript client is not built: cd {PACKAGE} && npm ci && npm run build"
    if problem is not None:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    assert node is not None
    return node


def test_the_typescript_client_against_a_live_server(live_server: LiveServer) -> None:
    node = _node()
    _, token = live_server.authenticator.create_key("acme", "operator", "ts")
    env = {**os.environ, "WOVYR_SERVER": live_server.url, "WOVYR_API_KEY": token}
    done = subprocess.run(
        [node, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert sorted(seen["listed"]) == ["ts-1", "ts-2", "ts-3"]
    assert seen["output"] == {"value": "hello ts"}
    assert seen["cancelled"] == "cancelled"
    assert seen["missing"] == "urn:wovyr:problem:not-found"
    other = live_server.engine.for_tenant("other")
    assert other.list().items == []  # the key's tenant only
