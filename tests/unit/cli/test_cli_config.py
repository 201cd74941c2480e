"""`wovyr config show` (the effective configuration, secrets redacted, each value's
source), `wovyr completion`, the global `--color`, and errors as JSON under `--json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from wovyr.cli.main import main
from wovyr.settings import VARIABLES

ROOT = Path(__file__).resolve().parents[3]
HELLO = ROOT / "examples" / "hello.yaml"
ESC = "\x1b["


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting of the machine running the tests leaks into what these show."""
    for var in VARIABLES:
        for name in (var.name, *var.aliases, var.file_variable or ""):
            if name:
                monkeypatch.delenv(name, raising=False)
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def shown(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run(capsys, "config", "show", "--json")
    assert code == 0, err
    settings: dict[str, Any] = json.loads(out)["settings"]
    return settings


def test_config_show_lists_every_setting_with_its_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = tmp_path / "api.key"
    key.write_text("wk_live_secret\n")
    monkeypatch.setenv("WOVYR_API_KEY_FILE", str(key))
    monkeypatch.setenv("WOVYR_DATABASE_URL", "postgresql://wovyr:hunter2@db:5432/wovyr")
    monkeypatch.setenv("WOVYR_LEASE_SECONDS", "12")
    monkeypatch.setenv("WOVYR_SHUTDOWN_GRACE_SECS", "4")
    settings = shown(capsys)
    assert set(settings) == {v.name for v in VARIABLES if not v.internal}
    assert settings["WOVYR_LEASE_SECONDS"] == {
        "value": "12",
        "source": "env",
        "from": "WOVYR_LEASE_SECONDS",
        "default": "30",
        "secret": False,
    }
    assert settings["WOVYR_CONCURRENCY"]["value"] == "64"
    assert settings["WOVYR_CONCURRENCY"]["source"] == "default"
    assert settings["WOVYR_SHUTDOWN_GRACE_SECONDS"]["source"] == "deprecated alias"
    assert settings["WOVYR_SHUTDOWN_GRACE_SECONDS"]["from"] == "WOVYR_SHUTDOWN_GRACE_SECS"
    assert settings["WOVYR_API_KEY"] == {
        "value": "***",
        "source": "file",
        "from": str(key),
        "default": None,
        "secret": True,
    }
    assert settings["WOVYR_DATABASE_URL"]["value"] == "postgresql://wovyr:***@db:5432/wovyr"

    code, out, err = run(capsys, "config", "show")
    assert code == 0
    assert "wk_live_secret" not in out + err and "hunter2" not in out + err
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["WOVYR_LEASE_SECONDS"].split() == ["WOVYR_LEASE_SECONDS", "12", "env"]
    assert lines["WOVYR_API_KEY"].split() == ["WOVYR_API_KEY", "***", "file", str(key)]
    assert lines["WOVYR_SHUTDOWN_GRACE_SECONDS"].split()[1:] == [
        "4",
        "deprecated",
        "alias",
        "WOVYR_SHUTDOWN_GRACE_SECS",
    ]
    assert "(the SQLite file in WOVYR_HOME)" not in lines["WOVYR_DATABASE_URL"]  # it is set


def test_config_show_reports_an_invalid_configuration_with_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WOVYR_LEASE_SECONDS", "soon")
    monkeypatch.setenv("WOVYR_ACCESS_LOG", "maybe")
    monkeypatch.setenv("WOVYR_LLM_API_KEY", "sk-1")
    monkeypatch.setenv("WOVYR_LLM_API_KEY_FILE", str(tmp_path / "missing"))
    code, out, err = run(capsys, "config", "show", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["settings"]["WOVYR_LLM_API_KEY"]["source"] == "error"
    assert report["settings"]["WOVYR_LLM_API_KEY"]["value"] is None
    problems = "\n".join(report["problems"])
    assert "both WOVYR_LLM_API_KEY and WOVYR_LLM_API_KEY_FILE are set" in problems
    assert "WOVYR_LEASE_SECONDS must be a number" in problems
    assert "WOVYR_ACCESS_LOG must be 1 or 0" in problems
    assert "sk-1" not in out + err
    code, out, err = run(capsys, "config", "show")
    assert code == 1
    assert "error: WOVYR_LEASE_SECONDS must be a number, got 'soon'" in err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shell_script(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "completion", shell)
    assert code == 0
    assert "_WOVYR_COMPLETE" in out and f"{shell}_complete" in out
    code, out, _ = run(capsys, "completion", shell, "--json")
    assert code == 0
    assert json.loads(out)["shell"] == shell
    assert json.loads(out)["script"].strip() == run(capsys, "completion", shell)[1].strip()


def test_completion_refuses_another_shell(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "completion", "tcsh")
    assert code == 2 and "'tcsh' is not one of 'bash', 'zsh', 'fish'" in err


def test_the_completion_completes_commands_and_options(tmp_path: Path) -> None:
    """What the shell script asks the program (as bash does): the commands, lazily loaded
    ones included, and a command's options."""

    def complete(words: str) -> list[str]:
        env = {
            **os.environ,
            "WOVYR_HOME": str(tmp_path),
            "_WOVYR_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
        }
        done = subprocess.run(
            [sys.executable, "-m", "wovyr"], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert {"completion", "config"} <= set(complete("wovyr co"))
    assert "workflows" in complete("wovyr w")
    assert "--json" in complete("wovyr config show --")


def test_color_always_never_and_no_color(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(capsys, "run", str(HELLO))
    assert code == 0 and ESC not in out  # auto, and not a terminal
    code, out, _ = run(capsys, "--color", "always", "workflows", "list")
    assert code == 0 and f"{ESC}32mcompleted" in out  # the status in green
    monkeypatch.setenv("FORCE_COLOR", "1")  # as if a terminal
    code, out, _ = run(capsys, "workflows", "list")
    assert ESC in out
    code, out, _ = run(capsys, "--color", "never", "workflows", "list")
    assert ESC not in out and "completed" in out
    monkeypatch.setenv("NO_COLOR", "1")
    code, out, _ = run(capsys, "workflows", "list")
    assert f"{ESC}32m" not in out  # auto honours NO_COLOR
    code, out, _ = run(capsys, "--color", "always", "workflows", "list")
    assert f"{ESC}32mcompleted" in out  # the flag says otherwise


def test_color_refuses_another_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--color", "sometimes", "config", "show")
    assert code == 2 and "sometimes" in err


def error_of(err: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err)["error"]
    return body


def test_under_json_errors_are_a_json_object_with_the_same_exit_codes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "workflows", "show", "no-such-id", "--json")
    assert code == 4 and out == ""
    body = error_of(err)
    assert body["type"] == "NotFound" and body["exit_code"] == 4
    assert "no-such-id" in body["message"]
    code, _, err = run(capsys, "workflows", "show", "no-such-id")  # without: text
    assert code == 4 and err.startswith("error: ")

    code, _, err = run(capsys, "workflows", "list", "--json", "--status", "bogus")
    assert code == 2
    assert error_of(err) == {
        "type": "usage",
        "message": error_of(err)["message"],
        "hint": None,
        "exit_code": 2,
        "problems": [],
    }
    assert "bogus" in error_of(err)["message"]
    code, _, err = run(capsys, "no-such-command", "--json")
    assert code == 2 and "no-such-command" in error_of(err)["message"]
    code, _, err = run(capsys, "no-such-command")
    assert code == 2 and err.startswith("Usage:")

    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: b}\nactivities: []\n")
    code, _, err = run(capsys, "run", str(bad), "-i", "x=1", "--json")
    assert code == 1
    body = error_of(err)
    assert body["type"] == "DefinitionError" and body["exit_code"] == 1
    assert body["problems"] and body["problems"][0]["file"] == str(bad)


def test_a_json_error_of_the_configuration(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WOVYR_LEASE_SECONDS", "soon")
    code, out, err = run(capsys, "workflows", "list", "--json")
    assert code == 1 and out == ""
    body = error_of(err)
    assert body["type"] == "ConfigError"
    assert body["message"] == "WOVYR_LEASE_SECONDS must be a number, got 'soon'"


class _Recorder(BaseHTTPRequestHandler):
    """A server that refuses every request (401), keeping the Authorization it was sent."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        body = b'{"detail": "invalid API key"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_cli_sends_the_api_key_read_from_its_file(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    recorder: str,
) -> None:
    key = tmp_path / "api.key"
    key.write_text("wk_from_a_file\n")
    monkeypatch.setenv("WOVYR_API_KEY_FILE", str(key))
    monkeypatch.setenv("WOVYR_SERVER", recorder)
    code, out, err = run(capsys, "workflows", "list", "--json")
    assert code == 1 and out == ""
    assert error_of(err)["type"] == "AccessDenied"  # the 401
    assert _Recorder.seen == ["Bearer wk_from_a_file"]
    monkeypatch.setenv("WOVYR_API_KEY", "wk_too")  # both ways: refused before any request
    code, _, err = run(capsys, "workflows", "list")
    assert code == 1 and "both WOVYR_API_KEY and WOVYR_API_KEY_FILE are set" in err
    assert len(_Recorder.seen) == 1
