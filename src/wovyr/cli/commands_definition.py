"""`wovyr validate` and `wovyr schema`: the workflow-language commands.

`validate` prints each problem as `FILE:LINE:COL: message (at path); hint` on stdout and a
summary on stderr; it exits 0 when every file is valid, 1 when any problem is found and 2 on
usage errors (no file given). Unreadable paths (directories, missing files) are problems of
that file, not usage errors, so one bad path does not hide the results for the others.
With `--activities MODULE`, a valid file is also checked against the handlers that module
(and the `wovyr.activities` entry points) registers: tools with no handler, `with:` keys no
parameter takes, required inputs left out. A `.py` file is imported, and each workflow
function it registers (`@wovyr.workflow`) is checked for what a replay could not repeat
(`wovyr.code.check`: the wall clock, randomness, the network, files, threads).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from wovyr.activities.base import ENTRY_POINT_GROUP, default_registry, load_activity_modules
from wovyr.cli.main import EXIT_FAILED, cli
from wovyr.definition.parse import load_definition_file
from wovyr.definition.preflight import handler_problems
from wovyr.definition.schema import schema_text
from wovyr.errors import DefinitionError, Problem
from wovyr.files import atomic_write

__all__ = ["schema_command", "validate_command"]


def _problems_of(path: str, handlers: bool = False) -> list[Problem]:
    if path.endswith(".py"):
        return _code_problems(path)
    try:
        workflow = load_definition_file(path)
    except DefinitionError as err:
        return err.problems or [Problem(err.message, file=path, line=1, column=1)]
    return handler_problems(workflow, default_registry, path=path) if handlers else []


def _code_problems(path: str) -> list[Problem]:
    """What the determinism checker finds in the workflow functions `path` registers."""
    from wovyr.code.check import check_workflow
    from wovyr.code.workflow import registered

    file = Path(path).resolve()
    if not file.is_file():
        return [Problem(f"{path} is not a file", file=path, line=1, column=1)]
    try:
        (module,) = load_activity_modules([str(file)])
    except Exception as exc:  # the module itself fails to import: its problem
        return [Problem(f"cannot import {path}: {exc}", file=path, line=1, column=1)]
    problems = []
    for wf in registered():
        if wf.fn.__module__ != module:
            continue
        for found in check_workflow(wf):
            problems.append(Problem(found.message, file=path, line=found.line, column=found.column))
    return problems


@cli.command("validate")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of problems.")
@click.option(
    "--activities",
    "-a",
    multiple=True,
    metavar="MODULE",
    help="Also check tools and their with: keys against the handlers this module or .py file "
    "registers (repeatable).",
)
@click.pass_context
def validate_command(
    ctx: click.Context, files: tuple[str, ...], as_json: bool, activities: tuple[str, ...]
) -> None:
    """Check workflow files; print every problem as FILE:LINE:COL: message."""
    if activities:
        load_activity_modules(activities, entry_point_group=ENTRY_POINT_GROUP)
    found: list[Problem] = []
    invalid = 0
    for path in files:
        problems = _problems_of(path, handlers=bool(activities))
        found.extend(problems)
        invalid += bool(problems)
        if not as_json:
            for problem in problems:
                click.echo(problem.format())
            if not problems:
                click.echo(f"{path}: ok")
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in found], indent=2, ensure_ascii=False))
    elif found:
        click.echo(f"{len(found)} problem(s) in {invalid} of {len(files)} file(s)", err=True)
    if found:
        ctx.exit(EXIT_FAILED)


@cli.command("schema")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the schema to this file instead of stdout.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="With --output, print what was written as JSON."
)
def schema_command(output: Path | None, as_json: bool) -> None:
    """Print the JSON Schema (draft-07) of workflow documents, for editors (it is JSON
    already: --json changes only the report of --output)."""
    text = schema_text()
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        atomic_write(output, text)
    except OSError as exc:
        raise click.FileError(str(output), hint=exc.strerror or str(exc)) from None
    if as_json:
        click.echo(json.dumps({"wrote": str(output), "bytes": len(text.encode())}))
    else:
        click.echo(f"wrote {output}", err=True)
