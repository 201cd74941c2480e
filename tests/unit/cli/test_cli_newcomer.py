"""What a newcomer tripped on in the first hour with the `wovyr` command (issue 13, item 9):
the README's commands as written, `approve` without `--by`, ids cut outside a terminal,
the exit codes of not-found and malformed flags, "did you mean" for inputs, `--json` on
every command, several problems listed, `py.typed`."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from tests.unit.cli.test_cli_in_process import HELLO, ROOT, WAITS, Cli

import wovyr
from wovyr.cli.main import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    EXIT_WAITING,
    _register,
    cli,
)


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # what a pipe gets: the width that used to cut ids
    return Cli(tmp_path / "home", capsys)


def _readme_commands(*prefixes: str) -> list[list[str]]:
    """The README's `wovyr ...` command lines that start with one of `prefixes`, as argv."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command.startswith(prefixes):
                found.append(shlex.split(command)[1:])
    return found


def test_the_readme_line_after_serve_opens_what_a_local_developer_needs(
    run: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serving the store restricts tenant default: the README's hello example is refused,
    with the command that opens it, and the README's line after `wovyr serve` opens it."""
    from tests.isolation import require_isolation

    from wovyr.engine.tenants import served
    from wovyr.settings import load_settings
    from wovyr.store import open_store

    require_isolation()  # `--shell` on a restricted policy runs the step isolated
    monkeypatch.chdir(ROOT)
    assert run("run", "examples/hello.yaml", "-i", "name=Ada")[0] == 0  # the owner's, trusted
    store = open_store(load_settings(home=str(run.home)).store_url)
    try:
        assert served(store, datetime.now(UTC))  # what the first `wovyr serve` does
    finally:
        store.close()
    code, _, err = run("run", "examples/hello.yaml", "-i", "name=Ada")
    assert code == EXIT_FAILED
    assert "the host's administrator allows it with: wovyr admin tenants set default --shell" in err
    [allow] = _readme_commands("wovyr admin tenants set default")
    assert run(*allow)[0] == 0
    code, out, err = run("run", "examples/hello.yaml", "-i", "name=Ada")
    assert code == 0 and "Hello, Ada!" in out, err


def test_the_readme_registry_and_schedule_commands_work_as_written(
    run: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the README speaks from the repository root
    commands = _readme_commands(
        "wovyr definitions apply", "wovyr run --workflow", "wovyr schedules create"
    )
    assert [c[:2] for c in commands] == [
        ["definitions", "apply"],
        ["run", "--workflow"],
        ["run", "--workflow"],  # the order saga as a Python function
        ["schedules", "create"],
    ]
    for argv in commands:
        code, out, err = run(*argv)
        assert code == 0, (argv, out, err)


def test_approve_without_by_says_who_may_decide(run: Cli, tmp_path: Path) -> None:
    flow = tmp_path / "waits.yaml"
    flow.write_text(WAITS)
    assert run("run", str(flow), "--id", "w-1")[0] == EXIT_WAITING
    code, _, err = run("workflows", "approve", "w-1", "ok")
    assert code == EXIT_USAGE
    assert "may be decided only by ada: say who decides with --by NAME" in err
    assert "None" not in err


def test_workflows_list_outside_a_terminal_prints_ids_whole(run: Cli) -> None:
    started = [run.json("run", str(HELLO), "--detach")["id"] for _ in range(3)]
    assert all(len(i) >= 36 for i in started)
    code, out, _ = run("workflows", "list")
    assert code == 0
    assert set(started) <= set(out.split()), out


def test_not_found_has_its_own_exit_code(run: Cli) -> None:
    assert EXIT_NOT_FOUND not in (EXIT_FAILED, EXIT_USAGE, EXIT_WAITING)
    for argv in (
        ("workflows", "show", "nope"),
        ("workflows", "approve", "nope", "ok"),
        ("workflows", "cancel", "nope"),
        ("definitions", "show", "nobody"),
        ("schedules", "show", "nothing"),
        ("run", "--workflow", "nobody"),
    ):
        code, _, err = run(*argv)
        assert code == EXIT_NOT_FOUND, (argv, err)
        assert "not found" in err or "no workflow" in err, (argv, err)


def test_a_malformed_input_flag_is_a_usage_error(run: Cli) -> None:
    code, _, err = run("run", str(HELLO), "-i", "name")
    assert code == EXIT_USAGE and "expected KEY=VALUE, got 'name'" in err
    code, _, err = run(
        "schedules", "create", "s", "--file", str(HELLO), "--every", "1h", "-i", "=x"
    )
    assert code == EXIT_USAGE and "expected KEY=VALUE" in err


def test_a_misspelt_input_name_gets_did_you_mean(run: Cli) -> None:
    code, _, err = run("run", str(HELLO), "-i", "nme=Ada")
    assert code == EXIT_FAILED
    assert err == "error: unknown input 'nme' (did you mean 'name'?)\n"


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found.extend(_leaves(command, (*path, name)))
        else:
            found.append((" ".join((*path, name)), command))
    return found


def test_every_command_takes_json() -> None:
    _register()  # loads every command group (the CLI loads each on first use)
    leaves = _leaves(cli)
    assert len(leaves) >= 28
    lacking = [
        name for name, command in leaves if not any("--json" in p.opts for p in command.params)
    ]
    assert lacking == []


def test_json_of_the_schedule_changes(run: Cli) -> None:
    run.json("schedules", "create", "s", "--file", str(HELLO), "--every", "1h")
    assert run.json("schedules", "pause", "s")["paused"] is True
    assert run.json("schedules", "resume", "s")["paused"] is False
    assert run.json("schedules", "update", "s", "--every", "2h")["spec"]
    started = run.json("schedules", "trigger", "s")["execution_id"]
    assert run.json("workflows", "show", started)["workflow"] == "hello"
    assert run.json("schedules", "delete", "s") == {"id": "s", "deleted": True}


def test_several_problems_in_a_definition_are_each_listed(run: Cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: b}\n"
        "activities: [{id: a}, {id: b, needs: [zz]}]\n"
    )
    code, _, err = run("run", str(broken))
    assert code == EXIT_FAILED
    lines = err.splitlines()
    assert lines[0] == "error: 3 problems in the workflow definition:"
    assert [line.split(": ", 1)[0].strip() for line in lines[1:]] == [
        f"{broken}:4:14",
        f"{broken}:4:23",
        f"{broken}:4:39",
    ]
    assert "needs unknown activity 'zz'" in lines[3]
    code, out, _ = run("definitions", "apply", str(broken))
    assert code == EXIT_FAILED and "needs unknown activity 'zz'" in out
    code, out, _ = run("definitions", "apply", str(broken), "--json")
    assert len(json.loads(out)[0]["problems"]) == 3


def test_the_package_ships_py_typed() -> None:
    package = Path(wovyr.__file__).parent
    assert (package / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # The wheel takes the whole package folder, py.typed included.
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/wovyr"]
