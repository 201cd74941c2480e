"""Generate src/wovyr/client/sync.py (`Client`) from src/wovyr/client/aio.py (`AsyncClient`).

The two clients have one source: the sync one is the async one with `async`/`await`
taken out (as httpcore's unasync does). `--check` exits 1 when sync.py is not what this
would write (tests/client/test_unasync.py runs it).

    python scripts/unasync_client.py [--check]
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src/wovyr/client/aio.py"
TARGET = ROOT / "src/wovyr/client/sync.py"

HEADER = '''"""`Client`: the whole HTTP API of a Wovyr server (blocking calls).

GENERATED from wovyr/client/aio.py by scripts/unasync_client.py: do not edit by hand.
"""
'''

# (pattern, replacement), applied in order, on word boundaries
RULES = [
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncBaseTransport\b", "BaseTransport"),
    (r"\bAsyncClient\b", "Client"),
    (r"\baiter_lines\b", "iter_lines"),
    (r"\baread\b", "read"),
    (r"\baclose\b", "close"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\basyncio code\b", "blocking code"),
    (r"^from asyncio import sleep$", "from time import sleep"),
    # an async generator passing on another's items: `yield from` in a plain one
    (r"^( *)for (\w+) in (.+):\n\1    yield \2$", r"\1yield from \3"),
]


def generate(source: str) -> str:
    body = source.split('"""', 2)[2]  # the async module's docstring is replaced
    for pattern, replacement in RULES:
        body = re.sub(pattern, replacement, body, flags=re.MULTILINE)
    return HEADER + "\n" + body.lstrip("\n")


def formatted(text: str) -> str:
    """As `ruff` sorts its imports (`from time import sleep` moves) and formats it (a
    shorter line may now fit where the async one did not)."""
    for command in (["check", "--select", "I", "--fix", "--quiet"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(TARGET), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def main(argv: list[str]) -> int:
    text = formatted(generate(SOURCE.read_text()))
    if "--check" in argv:
        if TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run scripts/unasync_client.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
