"""CLI start-up imports only what a command needs: `wovyr --version` and `--help` load no
engine, no pydantic, no expression runtime; a command that reads (`workflows show`) loads
the store but never the server, the scheduler, the workers, an HTTP client or a database
driver it does not use, nor the expression runtime, the YAML parser, asyncio or the crypto
of sealed payloads; `workflows show|list|history` load neither the engine nor the workflow
language (pydantic, the models, the kinds' executors: `wovyr.engine.reads`); with --json
they do not load rich either. Checked in a fresh interpreter (this one has imported
everything)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

HEAVY_FOR_VERSION = (
    "pydantic", "cel_expr_python", "ruamel", "rich", "wovyr.engine", "wovyr.store",
    "wovyr.definition", "wovyr.activities", "fastapi", "httpx", "psycopg", "cronsim",
    "mcp", "httpx2", "opentelemetry",
)  # fmt: skip
NOT_FOR_READING = (
    "fastapi", "starlette", "uvicorn", "jinja2", "httpx", "psycopg", "cronsim",
    "wovyr.server", "wovyr.scheduling", "wovyr.worker", "mcp", "httpx2",
    "cel_expr_python", "ruamel", "asyncio", "cryptography", "wovyr.platform.kms", "numpy",
    "opentelemetry", "wovyr.platform.tracing",
)  # fmt: skip
# what `workflows show|list|history` read without (`wovyr.engine.reads.StoreReader`)
NOT_FOR_VIEWS = (
    *NOT_FOR_READING, "pydantic", "pydantic_core", "wovyr.engine.engine", "wovyr.definition",
    "wovyr.definition.model", "wovyr.kinds", "wovyr.kinds.steps", "wovyr.activities.kinds",
    "wovyr.activities.builtin", "wovyr.activities.dispatch", "wovyr.engine.definitions",
    "wovyr.engine.runtime", "wovyr.platform.auth", "wovyr.cli.commands_bulk",
    "wovyr.events.records",
)  # fmt: skip
# how many of Wovyr's modules such a read loads at most (84 when this was written: the CLI,
# the store and its SQLite driver, the sealed payloads, the views); a module more is a
# cost every read pays, so raise this only knowingly
READ_MODULES = 85
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: startup}
activities:
  - {id: a, set: {v: "${{ 1 + 1 }}"}}
"""


def loaded_after(argv: list[str], home: Path) -> dict[str, bool]:
    code = (
        "import json, sys\n"
        "from wovyr.cli.main import main\n"
        f"code = main({argv!r})\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    env = {**os.environ, "WOVYR_HOME": str(home)}
    env.pop("WOVYR_DATABASE_URL", None)
    argv_ = [sys.executable, "-c", code]
    done = subprocess.run(argv_, env=env, capture_output=True, text=True, check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    modules = set(report["modules"])
    return {"ok": report["code"] in (0, 4), **{m: m in modules for m in modules}}


def wovyr_modules(loaded: dict[str, bool]) -> list[str]:
    return sorted(m for m in loaded if m == "wovyr" or m.startswith("wovyr."))


def test_version_and_help_import_no_engine(tmp_path: Path) -> None:
    for argv in (["--version"], ["--help"]):
        loaded = loaded_after(argv, tmp_path)
        assert loaded["ok"], argv
        assert [m for m in HEAVY_FOR_VERSION if loaded.get(m)] == [], argv


def test_config_show_and_completion_import_no_engine(tmp_path: Path) -> None:
    """Light commands: the effective configuration and the completion scripts load no
    engine, store, platform or rich."""
    for argv in (["config", "show"], ["completion", "bash"]):
        loaded = loaded_after(argv, tmp_path)
        assert loaded["ok"], argv
        assert [m for m in (*HEAVY_FOR_VERSION, "wovyr.platform") if loaded.get(m)] == [], argv


def test_reading_an_execution_imports_no_server_scheduler_or_worker(tmp_path: Path) -> None:
    loaded = loaded_after(["workflows", "show", "no-such-id"], tmp_path)
    assert loaded["ok"] and loaded.get("wovyr.engine.reads")  # it did read the store
    assert [m for m in NOT_FOR_VIEWS if loaded.get(m)] == []


def test_listing_mcp_servers_imports_no_mcp_sdk(tmp_path: Path) -> None:
    loaded = loaded_after(["mcp", "list", "--json"], tmp_path)
    assert loaded["ok"] and loaded.get("wovyr.platform.mcp")
    assert [m for m in NOT_FOR_READING if loaded.get(m)] == []


def test_listing_memory_imports_no_numpy(tmp_path: Path) -> None:
    """numpy is the search's: a list (or a write without a text) never loads it."""
    loaded = loaded_after(["memory", "list", "kb", "--json"], tmp_path)
    assert loaded["ok"] and loaded.get("wovyr.store.vectors")
    assert not loaded.get("numpy")


def test_reading_a_stored_execution_loads_only_the_read_path(tmp_path: Path) -> None:
    """A real execution (its pinned definition is read back and its view built), shown,
    listed and its history printed as people and scripts do, with the filters a list
    takes: neither the engine nor the workflow language is loaded."""
    from wovyr.cli.main import main

    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    assert main(["run", str(flow), "--home", str(tmp_path), "--id", "r1"]) == 0
    reads = (
        ["workflows", "show", "r1"],
        ["workflows", "list"],
        ["workflows", "history", "r1"],
        ["workflows", "list", "--label", "k=v", "--status", "completed"],
    )
    for argv in reads:
        loaded = loaded_after(argv, tmp_path)
        assert loaded["ok"] and loaded.get("wovyr.engine.reads"), argv
        assert [m for m in NOT_FOR_VIEWS if loaded.get(m)] == [], argv
        assert len(wovyr_modules(loaded)) <= READ_MODULES, (argv, wovyr_modules(loaded))
        assert loaded.get("rich"), argv  # it printed a table
    for argv in (
        ["workflows", "show", "r1", "--json"],
        ["workflows", "list", "--json"],
        ["workflows", "history", "r1", "--json"],
    ):
        loaded = loaded_after(argv, tmp_path)
        assert loaded["ok"], argv
        assert [m for m in (*NOT_FOR_VIEWS, "rich") if loaded.get(m)] == [], argv


def test_the_public_api_still_loads_on_use() -> None:
    import wovyr

    assert wovyr.Engine.__name__ == "Engine" and callable(wovyr.activity)
    assert "Engine" in dir(wovyr)
    with pytest.raises(AttributeError, match="NoSuchThing"):
        wovyr.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_the_help_lines_are_the_commands_own() -> None:
    """`--help` lists commands without loading them: its lines must say what each says."""
    from wovyr.cli.main import _COMMANDS, _register, cli

    _register()
    ctx = click.Context(cli)
    for name, (_, line) in _COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=1000) == line, name


def test_only_a_server_loads_the_http_client(tmp_path: Path) -> None:
    """The definitions and schedules commands on the store load no httpx; `--server` does
    (and then opens no store: nothing is created under the home)."""
    for argv in (["definitions", "list", "--json"], ["schedules", "list", "--json"]):
        loaded = loaded_after(argv, tmp_path)
        assert loaded["ok"], argv
        assert not loaded.get("httpx") and not loaded.get("wovyr.client"), argv
    home = tmp_path / "remote-home"
    loaded = loaded_after(["--server", "http://127.0.0.1:9", "workflows", "list", "--json"], home)
    assert loaded.get("httpx") and loaded.get("wovyr.client.sync")
    assert not loaded.get("wovyr.server") and not home.exists()
