"""Entry point of the `wovyr` command.

Exit codes: 0 success, 1 the work failed or a document is invalid, 2 usage error (a bad
flag, a malformed `-i KEY=VALUE`), 3 the execution is waiting (for a signal, an approval or
a later timer), 4 not found (no such execution, definition, schedule or key). Errors from
Wovyr are printed without a traceback; several problems are listed one per line.
"""

from __future__ import annotations

import sys

import click

from wovyr.errors import DefinitionError, InputError, NotFound, Problem, WovyrError

__all__ = ["cli", "error_text", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_WAITING = 3
EXIT_NOT_FOUND = 4


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="wovyr")
def cli() -> None:
    """Wovyr: durable execution for declarative workflows."""


def _register() -> None:
    # Each command group lives in its own module and adds itself to `cli`.
    from wovyr.cli import (  # noqa: F401
        commands_admin,
        commands_db,
        commands_definition,
        commands_registry,
        commands_run,
        commands_schedules,
        commands_server,
        commands_workflows,
    )


def error_text(err: WovyrError) -> str:
    """The error as the CLI prints it: several problems of a document or of the inputs are
    each on their own line, under a count."""
    problems = err.problems if isinstance(err, DefinitionError | InputError) else []
    if len(problems) < 2:
        return str(err)
    what = "the workflow definition" if isinstance(err, DefinitionError) else "the inputs"
    lines = [p.format() if p.file else _input_problem(p) for p in problems]
    return f"{len(problems)} problems in {what}:\n" + "\n".join(f"  {line}" for line in lines)


def _input_problem(problem: Problem) -> str:
    return problem.message + (f" ({problem.hint})" if problem.hint else "")


def main(argv: list[str] | None = None) -> int:
    _register()
    try:
        # Without standalone mode, click catches `Exit` (ctx.exit) itself and *returns* the code.
        code = cli.main(args=argv, prog_name="wovyr", standalone_mode=False)
        if isinstance(code, int):
            return code
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.UsageError as err:
        err.show()
        return EXIT_USAGE
    except click.ClickException as err:
        err.show()
        return EXIT_USAGE if err.exit_code == 2 else err.exit_code
    except WovyrError as err:
        click.echo(f"error: {error_text(err)}", err=True)
        return EXIT_NOT_FOUND if isinstance(err, NotFound) else EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
