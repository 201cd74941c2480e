"""docs/testing.md works as written: its `# file:` code blocks (a user's agent workflow and
its pytest tests, one of them crashing the worker in the middle of a tool call, and an
agent calling a tool of the fake MCP server) are written
to a directory of their own and run by pytest in a subprocess, as a user would run them,
with nothing but the installed package and its pytest plugin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"```(?:yaml|python)\n# file: (?P<name>[\w.-]+)\n(?P<body>.*?)```", re.S)


def test_the_documented_agent_tests_pass(tmp_path: Path) -> None:
    files = {m["name"]: m["body"] for m in BLOCK.finditer(DOC.read_text())}
    assert set(files) == {"refund-agent.yaml", "test_refund_agent.py", "test_order_status.py"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WOVYR_", "PYTEST_"))}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_refund_agent.py",
            "test_order_status.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
