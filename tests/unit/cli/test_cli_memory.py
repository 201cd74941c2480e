"""`wovyr memory` in-process over a real SQLite home and the scripted model server's
embeddings endpoint: put (value, text, ttl), get, list, search with scores, delete; another
tenant's namespace answers like a missing one (exit 4); bad input is a clear error."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main
from wovyr.store import open_store
from wovyr.testing.model_server import ScriptedLLM


class Cli:
    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch):
        self.home, self.capsys, self.mp = home, capsys, mp

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        self.mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        code = main([*args, "--home", str(self.home)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, (code, out, err)
        return json.loads(out)


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name in ("WOVYR_DATABASE_URL", "WOVYR_TENANT", "WOVYR_LLM_API_KEY", "WOVYR_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path / "home", capsys, monkeypatch)


def test_put_get_list_search_delete(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([]) as llm:
        monkeypatch.setenv("WOVYR_LLM_BASE_URL", llm.base_url)
        put = cli.json(
            "memory", "put", "kb", "refund", "--value", '{"who": "alice"}',
            "--text", "Alice asked for a refund of her invoice", "--ttl", "30d",
        )  # fmt: skip
        assert put == {"key": "refund", "version": 1, "replaced": False, "applied": True}
        cli.json("memory", "put", "kb", "office", "--text", "The office moved to Berlin")
        cli.json("memory", "put", "kb", "plain", "--value", "7")
        assert len(llm.embeddings) == 2  # a value alone is not embedded
        got = cli.json("memory", "get", "kb", "refund")
        assert got["value"] == {"who": "alice"} and got["expires_at"] is not None
        listed = cli.json("memory", "list", "kb")
        assert [i["key"] for i in listed] == ["office", "plain", "refund"]
        hits = cli.json("memory", "search", "kb", "who wants a refund?", "--top-k", "1")
        assert [h["key"] for h in hits] == ["refund"] and hits[0]["score"] > 0.3
        code, out, _ = cli("memory", "search", "kb", "berlin office")
        assert code == 0 and "office" in out.splitlines()[1]
        code, out, _ = cli("memory", "list", "kb")
        assert code == 0 and "refund" in out and "Alice asked" in out
        assert cli.json("memory", "delete", "kb", "refund")["deleted"] is True
        assert cli("memory", "get", "kb", "refund")[0] == 4
        assert cli("memory", "delete", "kb", "refund")[0] == 4
    store = open_store(f"sqlite:///{cli.home / 'wovyr.db'}")
    try:
        audited = [(r.action, r.target, r.tenant) for r in store.audit_records()]
        assert audited == [
            ("memory.put", "kb/refund", "default"),
            ("memory.put", "kb/office", "default"),
            ("memory.put", "kb/plain", "default"),
            ("memory.delete", "kb/refund", "default"),
        ]
        assert all(r.actor.startswith("local:") for r in store.audit_records())
    finally:
        store.close()


def test_another_tenants_namespace_is_missing(cli: Cli) -> None:
    cli.json("memory", "put", "kb", "k", "--value", '"mine"')
    code, _, err = cli("memory", "get", "kb", "k", "--tenant", "other")
    assert code == 4 and "no item 'k'" in err
    assert cli.json("memory", "list", "kb", "--tenant", "other") == []
    assert cli("memory", "delete", "kb", "k", "--tenant", "other")[0] == 4
    assert cli.json("memory", "get", "kb", "k")["value"] == "mine"


def test_bad_input_is_refused(cli: Cli) -> None:
    code, _, err = cli("memory", "put", "kb", "k")
    assert code == 2 and "--value or --text" in err
    code, _, err = cli("memory", "put", "kb", "k", "--value", "{not json")
    assert code == 2 and "not JSON" in err
    code, _, err = cli("memory", "list", "bad namespace")
    assert code == 2 and "invalid memory namespace" in err


def test_search_without_numpy_names_the_memory_extra(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core install has no numpy: a search says which extra brings it, and what was
    written stays (put and get need no numpy)."""
    with ScriptedLLM([]) as llm:
        monkeypatch.setenv("WOVYR_LLM_BASE_URL", llm.base_url)
        cli.json("memory", "put", "kb", "office", "--text", "The office moved to Berlin")
        monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
        code, out, err = cli("memory", "search", "kb", "berlin office")
        assert code != 0
        assert "pip install 'wovyr[memory]'" in out + err
        assert cli.json("memory", "get", "kb", "office")["key"] == "office"
