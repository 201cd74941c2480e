"""`wovyr validate` and `wovyr schema`: the workflow-language commands.

`validate` prints each problem as `FILE:LINE:COL: message (at path); hint` on stdout and a
summary on stderr; it exits 0 when every file is valid, 1 when any problem is found and 2 on
usage errors (no file given). Unreadable paths (directories, missing files) are problems of
that file, not usage errors, so one bad path does not hide the results for the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from wovyr.cli.main import EXIT_FAILED, cli
from wovyr.definition.parse import load_definition_file
from wovyr.definition.schema import schema_text
from wovyr.errors import DefinitionError, Problem

__all__ = ["schema_command", "validate_command"]


def _problems_of(path: str) -> list[Problem]:
    try:
        load_definition_file(path)
    except DefinitionError as err:
        return err.problems or [Problem(err.message, file=path, line=1, column=1)]
    return []


@cli.command("validate")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of problems.")
@click.pass_context
def validate_command(ctx: click.Context, files: tuple[str, ...], as_json: bool) -> None:
    """Check workflow files; print every problem as FILE:LINE:COL: message."""
    found: list[Problem] = []
    invalid = 0
    for path in files:
        problems = _problems_of(path)
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
def schema_command(output: Path | None) -> None:
    """Print the JSON Schema (draft-07) of workflow documents, for editors."""
    text = schema_text()
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise click.FileError(str(output), hint=exc.strerror or str(exc)) from None
    click.echo(f"wrote {output}", err=True)
