"""What the scripts that write a generated, committed file share: write it, or (`--check`)
exit 1 when the committed copy differs from what they would write."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(target: Path, text: str, argv: list[str], script: str) -> int:
    if "--check" in argv:
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            print(f"{target} is out of date: run python {script}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0
