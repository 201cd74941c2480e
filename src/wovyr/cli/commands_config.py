"""`wovyr config show` (the effective configuration) and `wovyr completion` (shell
completion scripts): light commands, they import no engine, store or rich."""

from __future__ import annotations

import json
from typing import Any

import click

from wovyr.cli.main import cli
from wovyr.errors import ConfigError
from wovyr.settings import VARIABLES, Value, load_settings, lookup, switch

__all__: list[str] = []

SHELLS = ("bash", "zsh", "fish")


@cli.group("config")
def config_group() -> None:
    """The effective configuration: every setting, its value and where it came from."""


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_command(as_json: bool) -> None:
    """Every environment variable Wovyr reads (docs/settings.md), its effective value and
    its source: default, env, file (a secret's NAME_FILE) or deprecated alias. Secrets are
    redacted (a URL keeps all but its password). Exits 1 when the configuration is invalid
    (each problem is shown)."""
    values: list[Value] = []
    problems: list[str] = []
    for var in VARIABLES:
        if var.internal:
            continue
        try:
            values.append(lookup(var.name, warn=False))
        except ConfigError as exc:
            problems.append(str(exc))
            values.append(Value(var, None, "error", ""))
    problems += _checked(values)
    if as_json:
        click.echo(json.dumps(_as_json(values, problems), indent=2, ensure_ascii=False))
    else:
        _print_table(values, problems)
    if problems:
        raise click.exceptions.Exit(1)


def _checked(values: list[Value]) -> list[str]:
    """What loading the settings from these values refuses (a number that is not one, a
    switch that is not 1 or 0, ...), read as the new names (their aliases already shown)."""
    env = {v.variable.name: v.text for v in values if v.source not in ("default", "error")}
    problems = []
    try:
        load_settings({k: t for k, t in env.items() if t is not None})
    except ConfigError as exc:
        problems.append(str(exc))
    for value in values:  # the switches the commands read themselves
        if value.variable.type == "switch" and value.source != "error":
            try:
                switch(value)
            except ConfigError as exc:
                problems.append(str(exc))
    return list(dict.fromkeys(problems))


def _as_json(values: list[Value], problems: list[str]) -> dict[str, Any]:
    settings = {
        v.variable.name: {
            "value": v.shown(),
            "source": v.source,
            "from": v.origin or None,
            "default": v.variable.default or None,
            "secret": v.variable.secret,
        }
        for v in values
    }
    return {"settings": settings, "problems": problems}


def _print_table(values: list[Value], problems: list[str]) -> None:
    rows = [("variable", "value", "source")]
    for v in values:
        shown = v.shown()
        if shown is None:
            shown = (v.variable.default_doc or "(none)").replace("`", "")
        source = f"{v.source} {v.origin}" if v.source in ("file", "deprecated alias") else v.source
        rows.append((v.variable.name, shown, source))
    name_width = max(len(r[0]) for r in rows)
    value_width = min(48, max(len(r[1]) for r in rows))
    for name, shown, source in rows:
        click.echo(f"{name:<{name_width}}  {shown:<{value_width}}  {source}".rstrip())
    for problem in problems:
        click.echo(f"error: {problem}", err=True)


@cli.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.option("--json", "as_json", is_flag=True, help='Print {"shell": ..., "script": ...}.')
def completion_command(shell: str, as_json: bool) -> None:
    """Print the shell completion script for bash, zsh or fish.

    \b
    bash:  eval "$(wovyr completion bash)"       (in ~/.bashrc; bash 4.4 or later)
    zsh:   eval "$(wovyr completion zsh)"        (in ~/.zshrc)
    fish:  wovyr completion fish > ~/.config/fish/completions/wovyr.fish
    """
    from click.shell_completion import get_completion_class

    completion = get_completion_class(shell)
    assert completion is not None  # every one of SHELLS is click's
    script = completion(cli, {}, "wovyr", "_WOVYR_COMPLETE").source()
    if as_json:
        click.echo(json.dumps({"shell": shell, "script": script}, indent=2))
    else:
        click.echo(script)
