"""A daily quota survives a SIGKILLed server: `wovyr serve` refuses the start over quota
with 429 and Retry-After, is killed with SIGKILL, starts again on the same store, and
still refuses the same UTC day (the count lives in the store's ledger, not in the process)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from tests.server.test_serve_process import WOVYR, Server, client, make_server  # noqa: F401

FLOW = {
    "apiVersion": "wovyr/v1",
    "kind": "Workflow",
    "metadata": {"name": "counted"},
    "activities": [{"id": "a", "set": {"v": 1}}],
}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_daily_quota_holds_after_the_server_is_sigkilled(
    make_server: Callable[..., Server],  # noqa: F811
) -> None:
    server = make_server()
    server.start()  # the first start prints the bootstrap admin key of tenant default
    subprocess.run(
        [*WOVYR, "admin", "quotas", "set", "default", "--executions-per-day", "2"],
        env=server.env,
        check=True,
        capture_output=True,
    )
    with client(server) as http:
        day = datetime.now(UTC).date()
        codes = [http.post("/api/v1/workflows", json={"definition": FLOW}).status_code
                 for _ in range(3)]  # fmt: skip
        refused = http.post("/api/v1/workflows", json={"definition": FLOW})
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        server.start()
        again = http.post("/api/v1/workflows", json={"definition": FLOW})
        same_day = datetime.now(UTC).date() == day
    assert server.stop() == 0

    assert codes == [201, 201, 429]
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert 0 < int(refused.headers["retry-after"]) <= 86_400
    if same_day:  # (a run that straddles midnight UTC is allowed its new day's first start)
        assert again.status_code == 429, again.text
        assert 0 < int(again.headers["retry-after"]) <= int(refused.headers["retry-after"])
    else:  # pragma: no cover - only across midnight UTC
        assert again.status_code == 201
