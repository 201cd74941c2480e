"""`wovyr artifacts put|list`, each test run on this host's store and through a live
`wovyr serve` (same JSON keys): a file stored prints its ref, the same file again is the
same artifact, a file of no type an artifact may have exits non-zero, the list pages newest
first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.acceptance.test_cli_both_ways import Cli
from tests.acceptance.test_cli_both_ways_platform import cli, server

from wovyr.store.artifacts import artifact_digest

pytestmark = pytest.mark.slow

__all__ = ["cli", "server"]


def test_artifacts_put_and_list(cli: Cli, tmp_path: Path) -> None:
    png, pdf, text = tmp_path / "a.png", tmp_path / "r.pdf", tmp_path / "notes.txt"
    png.write_bytes(b"\x89PNG\r\n\x1a\n a picture")
    pdf.write_bytes(b"%PDF-1.4\n%%EOF\n")
    text.write_text("plain text")
    code, out, err = cli("artifacts", "put", str(png))
    assert code == 0, out + err
    digest = artifact_digest(png.read_bytes())
    assert json.loads(out) == {"type": "image", "artifact": digest}
    again = cli.json("artifacts", "put", str(png))
    assert (again["digest"], again["media_type"], again["size"]) == (digest, "image/png", 18)
    stored = cli.json("artifacts", "put", str(pdf))
    assert stored["ref"]["type"] == "file" and stored["media_type"] == "application/pdf"
    code, out, err = cli("artifacts", "put", str(text))
    assert code != 0 and "not a PNG, JPEG, GIF, WebP or PDF file" in out + err
    first = cli.json("artifacts", "list", "--limit", "1")
    assert len(first["items"]) == 1 and first["next_cursor"]
    rest = cli.json("artifacts", "list", "--limit", "1", "--cursor", first["next_cursor"])
    assert rest["next_cursor"] is None
    listed = {i["digest"] for i in first["items"] + rest["items"]}
    assert listed == {digest, stored["digest"]}
