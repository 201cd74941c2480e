"""Write docs/openapi.json, the committed copy of the server's OpenAPI document.

tests/server/test_openapi.py fails while the served document differs from the copy, so
every change to the HTTP API shows up as a reviewed change of this file. After changing
the API on purpose:

    python scripts/openapi.py            # rewrite docs/openapi.json
    python scripts/openapi.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from generated import write_or_check

from wovyr.engine.engine import Engine
from wovyr.server import create_app
from wovyr.server.api.openapi import document_text
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "openapi.json"


def served_document() -> str:
    with tempfile.TemporaryDirectory() as home, Engine(SQLiteStore()) as engine:
        app = create_app(engine, Settings(home=Path(home)), start_background=False)
        return document_text(app)


def main(argv: list[str]) -> int:
    return write_or_check(TARGET, served_document(), argv, "scripts/openapi.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
