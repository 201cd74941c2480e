"""`wovyr definitions apply|list|show`: the definition registry."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from wovyr.cli.backend import open_backend, refuse_remote
from wovyr.cli.common import (
    applied_at,
    console,
    echo_json,
    echo_listing,
    json_option,
    tenant_options,
)
from wovyr.cli.main import EXIT_FAILED, cli, error_text
from wovyr.engine.definitions import DEV_REVISION
from wovyr.errors import DefinitionConflict, DefinitionError, InputError
from wovyr.settings import Settings

__all__: list[str] = []


@cli.group("definitions")
def definitions() -> None:
    """Register workflow definitions by name and version."""


@definitions.command("apply")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--revise",
    is_flag=True,
    help="A FILE edited under a name and version already applied is registered as the next "
    "development revision, VERSION+dev.N, instead of refused (what `wovyr dev` does); "
    "this host's store only.",
)
@json_option
@tenant_options
def apply_command(files: tuple[Path, ...], revise: bool, as_json: bool, settings: Settings) -> None:
    """Register each FILE under its metadata name and version (idempotent)."""
    if revise:
        refuse_remote("definitions apply --revise", "development revisions are for `wovyr dev`")
    with open_backend(settings) as backend:
        apply_files(files, functools.partial(backend.apply_definition, revise=revise), as_json)


def apply_files(
    files: tuple[Path, ...],
    apply_one: Callable[[Path], tuple[str, str, str, str]],
    as_json: bool,
    what: str = "",
) -> None:
    """Apply each file with `apply_one` (-> outcome, hash, name, version), going on past a
    file that fails; print a line (or a JSON object) per file; exit 1 if any failed. `what`
    names the kind of document in the lines ("agent ")."""
    results: list[dict[str, Any]] = []
    for file in files:
        try:
            outcome, digest, name, version = apply_one(file)
            results.append(
                {
                    "file": str(file),
                    "name": name,
                    "version": version,
                    "hash": digest,
                    "result": outcome,
                }
            )
        except (DefinitionError, DefinitionConflict, InputError) as exc:
            problems = exc.problems if isinstance(exc, DefinitionError | InputError) else []
            results.append(
                {
                    "file": str(file),
                    "result": "error",
                    "error": error_text(exc),
                    "problems": [p.to_dict() for p in problems],
                }
            )
    if as_json:
        echo_json(results)
    else:
        for r in results:
            if r["result"] == "error":
                console.print(f"{r['file']}: {r['error']}", style="red", markup=False)
            else:
                console.print(
                    f"{r['file']}: {what}{r['name']} v{r['version']} {r['result']} "
                    f"({r['hash'][:19]})" + _revised(r["result"], r["version"]),
                )
    if any(r["result"] == "error" for r in results):
        raise click.exceptions.Exit(EXIT_FAILED)


def _revised(result: str, version: str) -> str:
    """What a development revision is, said where one is registered."""
    if result != "revised":
        return ""
    base = version.rpartition(DEV_REVISION)[0]
    return f": a development revision, as v{base} is applied with other content"


@definitions.command("list")
@json_option
@tenant_options
def list_command(as_json: bool, settings: Settings) -> None:
    """List registered definitions, newest first."""
    with open_backend(settings) as backend:
        records = backend.definitions()
    rows = ((r["name"], r["version"], applied_at(r), r["hash"][:19]) for r in records)
    echo_listing(as_json, records, ("name", "version", "applied", "hash"), rows)


@definitions.command("show")
@click.argument("name")
@click.option("--version", "version", help="A specific version (default: the latest).")
@json_option
@tenant_options
def show_command(name: str, version: str | None, as_json: bool, settings: Settings) -> None:
    """Print a registered definition (canonical JSON)."""
    with open_backend(settings) as backend:
        found = backend.definition(name, version)
    if as_json:
        echo_json({"hash": found["hash"], "definition": found["definition"]})
    else:
        console.print(f"{found['name']} v{found['version']}  {found['hash']}")
        echo_json(found["definition"])
