"""Entry point of the `wovyr` command.

Exit codes: 0 success, 1 the work failed or a document is invalid, 2 usage error (a bad
flag, a malformed `-i KEY=VALUE`), 3 the execution is waiting (for a signal, an approval or
a later timer), 4 not found (no such execution, definition, schedule or key). Errors from
Wovyr are printed without a traceback; several problems are listed one per line. Under
`--json` an error is printed (on stderr) as one JSON object, `{"error": {"type", "message",
"hint", "exit_code", "problems"}}`, with the same exit code.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from wovyr.errors import (
    DefinitionError,
    InputError,
    NotFound,
    Problem,
    RemoteError,
    WovyrError,
)
from wovyr.withheld import withhold

__all__ = ["cli", "env_default", "error_text", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_WAITING = 3
EXIT_NOT_FOUND = 4


# Where each top-level command lives, and its one-line help: its module (and any that
# extend it) is imported only when that command runs, so `wovyr --version`, `wovyr --help`
# or `wovyr workflows show` never import the server, the scheduler or the workers they do
# not use. (tests/unit/cli/test_cli_startup.py checks these lines against the commands.)
_COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "admin": (
        (
            "admin",
            "commands_admin",
            "commands_kms",
            "commands_audit",
            "commands_backup",
            "commands_limits",
            "commands_retention",
        ),
        "Administration on the server host: API keys, tenants' policies and quotas, the KMS, "
        "the audit chain, backups, rate limits, retention.",
    ),
    "agents": (
        ("commands_agents",),
        "Agents: apply, list and show agent definitions, run one in the foreground.",
    ),
    "artifacts": (
        ("commands_artifacts",),
        "Artifacts: images and PDFs stored once by digest, which content parts reference.",
    ),
    "batches": (("commands_bulk",), "Bulk-action batches: list, show."),
    "completion": (
        ("commands_config",),
        "Print the shell completion script for bash, zsh or fish.",
    ),
    "config": (
        ("commands_config",),
        "The effective configuration: every setting, its value and where it came from.",
    ),
    "db": (("commands_db",), "The store's schema: apply migrations, show the version."),
    "dev": (
        ("commands_dev",),
        "Serve the API, UI and a worker, registering workflow files and reloading on change.",
    ),
    "definitions": (
        ("commands_registry",),
        "Register workflow definitions by name and version.",
    ),
    "events": (
        ("commands_events",),
        "Events: send one to a topic's triggers, list those received.",
    ),
    "mcp": (
        ("commands_mcp",),
        "MCP: the tenant's MCP servers (add, list, show, remove), and Wovyr as one (serve).",
    ),
    "memory": (
        ("commands_memory",),
        "A tenant's durable memory namespaces: list, get, put, delete, search.",
    ),
    "providers": (
        ("commands_providers",),
        "Tenants' model providers for `llm` and `agent` steps: set, list, show, delete.",
    ),
    "triggers": (
        ("commands_events",),
        "Event triggers: apply, list, show and delete `kind: Trigger` documents.",
    ),
    "webhooks": (
        ("commands_events",),
        "Outbound webhooks: the tenant's endpoints for execution events, their deliveries.",
    ),
    "run": (
        ("commands_run",),
        "Run the workflow in FILE (or --workflow NAME) here, with its child workflows, map "
        "items, retries, short timers and flow-control holds, until it completes or fails, or "
        "waits for a signal, an approval, or a timer or hold later than --wait-up-to.",
    ),
    "schedules": (("commands_schedules",), "Run workflows on a cron or interval schedule."),
    "schema": (
        ("commands_definition",),
        "Print the JSON Schema (draft-07) of workflow documents, for editors (it is JSON "
        "already: --json changes only the report of --output).",
    ),
    "secrets": (
        ("commands_secrets",),
        "Tenants' secrets: set, list, delete (values are never shown).",
    ),
    "serve": (
        ("commands_server",),
        "Run the API, the web UI, the worker and the timer and schedule dispatchers.",
    ),
    "validate": (
        ("commands_definition",),
        "Check workflow files; print every problem as FILE:LINE:COL: message.",
    ),
    "worker": (
        ("commands_server",),
        "Run a worker (and the timer dispatcher) until SIGINT or SIGTERM.",
    ),
    "workflows": (
        ("commands_workflows",),  # its `bulk` group loads when named (`commands_bulk`)
        "Inspect and steer executions.",
    ),
}


def env_default(name: str, *, flag: bool = False) -> Callable[[], Any]:
    """An option's default when it is not given: the variable `name`, read through the
    settings table (`wovyr.settings.lookup`: deprecated names, `NAME_FILE`); `flag`: a 1/0
    switch, as a bool. (Imported when a command runs, never by `wovyr --version`.)"""

    def default() -> Any:
        from wovyr.settings import lookup, switch

        value = lookup(name)
        return bool(switch(value)) if flag else value.text

    return default


# The commands that work through a server (`--server URL`), not only on this host's store:
# `validate` and `schema` read no store at all; of `admin`, what a tenant's admin key may do
# (its keys, policy, quotas, rate limits, retention, audit records), each of the host's own
# subcommands refusing a server (`refuse_remote`). The others refuse a server rather than
# quietly act on a local store: those of the host itself (its processes, its database,
# `run` in the foreground here), and those whose API the CLI does not speak yet.
REMOTE_COMMANDS = frozenset(
    {
        "admin",
        "agents",
        "artifacts",
        "batches",
        "definitions",
        "events",
        "mcp",
        "providers",
        "schedules",
        "schema",
        "secrets",
        "triggers",
        "validate",
        "webhooks",
        "workflows",
    }
)
NOT_YET_REMOTE = frozenset({"memory"})


class _LazyGroup(click.Group):
    """The top-level group: commands are known by name and loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(_COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for module in _COMMANDS.get(cmd_name, ((), ""))[0]:
            importlib.import_module(f"wovyr.cli.{module}")  # it adds itself to `cli`
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from `_COMMANDS`: `--help` loads no command module."""
        limit = formatter.width - 6 - max(len(name) for name in _COMMANDS)
        rows = []
        for name in self.list_commands(ctx):
            known = _COMMANDS.get(name)
            stand_in = click.Command(name, help=known[1]) if known else self.commands[name]
            rows.append((name, stand_in.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="wovyr")
@click.option(
    "--server",
    metavar="URL",
    default=env_default("WOVYR_SERVER"),
    help="Talk to this Wovyr server's API instead of the local store (every command but the "
    "host's own: run, serve, worker, dev, db, memory and the host's admin commands), with "
    "the key in WOVYR_API_KEY (or WOVYR_API_KEY_FILE). Env: WOVYR_SERVER.",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour in tables and statuses: auto (on a terminal, unless NO_COLOR is set), "
    "always, or never.",
)
@click.pass_context
def cli(ctx: click.Context, server: str | None, color: str) -> None:
    """Wovyr: durable execution for declarative workflows."""
    ctx.meta["wovyr.color"] = color
    ctx.color = {"always": True, "never": False}.get(color)
    if not server:
        return
    name = ctx.invoked_subcommand
    if name in NOT_YET_REMOTE:
        raise click.UsageError(
            f"`wovyr {name}` does not go through a server yet: run it on the server's host "
            f"without --server (and WOVYR_SERVER), or use the HTTP API (wovyr.client)."
        )
    if name not in REMOTE_COMMANDS:
        raise click.UsageError(
            f"`wovyr {name}` works on this host's store, not through a server: leave out "
            f"--server (and unset WOVYR_SERVER). Through a server: "
            f"{', '.join(sorted(REMOTE_COMMANDS))}."
        )
    from wovyr.cli.target import API_KEY_ENV, Remote
    from wovyr.settings import read

    ctx.meta["wovyr.remote"] = Remote(server, read(API_KEY_ENV))


def _register() -> None:
    """Load every command (for callers that walk the whole tree; `main` loads lazily)."""
    for modules, _ in _COMMANDS.values():
        for module in modules:
            importlib.import_module(f"wovyr.cli.{module}")


def error_text(err: WovyrError) -> str:
    """The error as the CLI prints it: several problems of a document or of the inputs are
    each on their own line, under a count."""
    problems = err.problems if isinstance(err, DefinitionError | InputError | RemoteError) else []
    if isinstance(err, RemoteError) and problems:  # the server's detail, then each problem
        lines = [p.format() if p.file else _input_problem(p, at=True) for p in problems]
        return str(err) + "".join(f"\n  {line}" for line in lines)
    if len(problems) < 2:
        return str(err)
    what = "the workflow definition" if isinstance(err, DefinitionError) else "the inputs"
    lines = [p.format() if p.file else _input_problem(p) for p in problems]
    return f"{len(problems)} problems in {what}:\n" + "\n".join(f"  {line}" for line in lines)


def _input_problem(problem: Problem, *, at: bool = False) -> str:
    where = f" (at {problem.path})" if at and problem.path else ""
    return problem.message + where + (f" ({problem.hint})" if problem.hint else "")


def main(argv: list[str] | None = None) -> int:
    """The `wovyr` command: `argv` None means this is the process's entry point, which first
    moves secret variables out of its environment (`wovyr.withheld`; the process may be
    executed again for it). A caller passing `argv` runs a command in its own process."""
    if argv is None:
        withhold()
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
    except click.ClickException as err:
        code = EXIT_USAGE if isinstance(err, click.UsageError) else err.exit_code
        if _wants_json(sys.argv[1:] if argv is None else argv):
            _echo_error("usage" if code == EXIT_USAGE else "error", err.format_message(), code)
        else:
            err.show()
        return code
    except WovyrError as err:
        code = EXIT_NOT_FOUND if isinstance(err, NotFound) else EXIT_FAILED
        if _wants_json(sys.argv[1:] if argv is None else argv):
            _echo_error(type(err).__name__, err.message, code, err)
        else:
            click.echo(f"error: {error_text(err)}", err=True)
        return code
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


def _wants_json(args: list[str]) -> bool:
    """Whether the command line asks for `--json` output: the command it names has a
    `--json` option, given (parsed again, leniently: the failed parse is gone), or, naming
    no command there is, `--json` is among its words."""
    try:
        ctx = cli.make_context("wovyr", list(args), resilient_parsing=True)
        command: click.Command = cli
        while isinstance(command, click.Group):
            rest = [*ctx._protected_args, *ctx.args]
            if not rest:
                break
            name, sub, rest = command.resolve_command(ctx, rest)
            if sub is None or name is None:
                raise click.UsageError(f"no command {name!r}")
            ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=True)
            command = sub
    except (click.ClickException, WovyrError):  # an unknown command: the word decides
        return "--json" in args[: args.index("--") if "--" in args else len(args)]
    return any(
        isinstance(p, click.Option) and "--json" in p.opts and bool(ctx.params.get(p.name or ""))
        for p in command.params
    )


def _echo_error(kind: str, message: str, code: int, err: WovyrError | None = None) -> None:
    """The error as one JSON object on stderr (under `--json`)."""
    problems = getattr(err, "problems", None) or []
    body = {
        "type": kind,
        "message": message,
        "hint": getattr(err, "hint", None),
        "exit_code": code,
        "problems": [p.to_dict() for p in problems if isinstance(p, Problem)],
    }
    click.echo(json.dumps({"error": body}, ensure_ascii=False), err=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
