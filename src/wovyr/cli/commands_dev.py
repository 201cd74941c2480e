"""`wovyr dev`: the server, its worker and the UI on the embedded store, for local work.

This process supervises a `wovyr serve` child. It registers the workflow files it is given
(`definitions apply`, in a fresh process each time, so a handler module is imported anew),
watches them and the activity modules' sources, and on a change re-registers the files and,
when Python changed, restarts the child: execution is durable, so a restart loses nothing,
and the new child runs the new code (an attempt in flight is re-run, as after any crash).
It prints the UI's address and a fresh admin key of tenant `default` (keys it made before
are revoked), so signing in is one paste.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from wovyr.cli.common import engine_options, open_engine
from wovyr.cli.main import cli
from wovyr.engine.definitions import DEV_REVISION
from wovyr.errors import ConfigError
from wovyr.settings import Settings
from wovyr.withheld import handing_over

__all__: list[str] = []

DEV_KEY_NAME = "wovyr dev"
WORKFLOW_SUFFIXES = (".yaml", ".yml")
START_DEADLINE = 60.0  # seconds for a (re)started server to answer /readyz


def workflow_files(paths: Iterable[Path]) -> list[Path]:
    """The YAML files named, and those under the directories named, sorted; a path that does
    not exist is a usage error."""
    found: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found.update(p for p in path.rglob("*") if p.suffix in WORKFLOW_SUFFIXES)
        elif path.is_file():
            found.add(path)
        else:
            raise click.BadParameter(f"{path} does not exist", param_hint="PATH")
    return sorted(found)


def module_sources(activities: Iterable[str]) -> list[Path]:
    """Where each `--activities` entry's source lives, to watch it: a `.py` file, or the file
    (or the package directory) a module name resolves to, found without importing it."""
    sources = []
    for entry in activities:
        if entry.endswith(".py"):
            sources.append(Path(entry).resolve())
            continue
        try:
            spec = importlib.util.find_spec(entry)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None:
            raise click.BadParameter(f"no module {entry!r} to import", param_hint="--activities")
        origin = Path(spec.origin).resolve()
        sources.append(origin.parent if spec.submodule_search_locations else origin)
    return sources


def _store_args(settings: Settings) -> list[str]:
    return ["--home", str(settings.home)]


def _handover(settings: Settings) -> contextlib.AbstractContextManager[tuple[dict[str, str], int]]:
    """A child's environment and the fd of the secrets it is handed (`wovyr.withheld`): this
    process's withheld ones (the root key), and the store URL (it may hold a password: not
    on the child's command line, which any user reads)."""
    url = {"WOVYR_DATABASE_URL": settings.database_url} if settings.database_url else {}
    return handing_over(url)


def _activity_args(settings: Settings) -> list[str]:
    return [arg for entry in settings.activities for arg in ("--activities", entry)]


def _wovyr(*args: str) -> list[str]:
    return [sys.executable, "-m", "wovyr", *args]


def apply_workflows(files: list[Path], settings: Settings) -> list[dict[str, Any]]:
    """Register the files in a fresh process (`definitions apply --revise`: an edited file
    whose version was applied before becomes a development revision, `VERSION+dev.N`); the
    outcome of each file, as `--json` prints it."""
    if not files:
        return []
    command = _wovyr(
        "definitions",
        "apply",
        *map(str, files),
        *_store_args(settings),
        *_activity_args(settings),
        "--revise",
        "--json",
    )
    with _handover(settings) as (env, fd):
        done = subprocess.run(
            command, check=False, env=env, pass_fds=(fd,), stdout=subprocess.PIPE, text=True
        )
    try:
        results: list[dict[str, Any]] = json.loads(done.stdout)
    except ValueError:  # it could not even start (its error went to stderr, shown above)
        error = f"`wovyr definitions apply` exited with code {done.returncode} (see above)"
        return [{"file": str(f), "result": "error", "error": error} for f in files]
    return results


def registered_text(result: dict[str, Any]) -> str:
    """One file's outcome in words: what was registered, under which version, and why."""
    file, outcome = Path(result["file"]).name, result["result"]
    if outcome == "error":
        return f"{file}: not registered: {result['error']}"
    what = f"{result['name']} v{result['version']}"
    if outcome == "unchanged":
        return f"{file}: {what} unchanged"
    if outcome == "revised":
        base = str(result["version"]).rpartition(DEV_REVISION)[0]
        return (
            f"{file}: registered {what}, a development revision (v{base} is applied with "
            "other content; bump metadata.version to name a release)"
        )
    return f"{file}: registered {what}"


def dev_key(settings: Settings) -> str:
    """A new admin key of tenant `default` named `wovyr dev`; earlier ones are revoked."""
    from wovyr.platform.auth import Authenticator

    with open_engine(settings, load_activities=False) as engine:
        auth = Authenticator(engine.store, clock=engine.clock)
        for record in auth.list_keys("default"):
            if record.name == DEV_KEY_NAME and record.revoked_at is None:
                auth.revoke(record.id, actor=engine.actor)
        _, token = auth.create_key("default", "admin", DEV_KEY_NAME, actor=engine.actor)
    return token


class ServerChild:
    """The `wovyr serve` child: started, health-checked, stopped gracefully."""

    def __init__(self, settings: Settings, host: str, port: int) -> None:
        self.settings, self.host, self.port = settings, host, port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        command = _wovyr(
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *_store_args(self.settings),
            *_activity_args(self.settings),
        )
        with _handover(self.settings) as (env, fd):
            self.process = subprocess.Popen(command, env=env, pass_fds=(fd,))
        deadline = time.monotonic() + START_DEADLINE
        while not self._healthy():
            if self.process.poll() is not None:
                raise ConfigError(
                    f"the server exited with code {self.process.returncode} while starting"
                    " (see its output above)"
                )
            if time.monotonic() > deadline:
                raise ConfigError(f"the server did not answer {self.url}/readyz in time")
            time.sleep(0.1)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=self.settings.shutdown_grace + 10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a wedged child
            self.process.kill()
            self.process.wait()


def _json_line(value: dict[str, Any]) -> None:
    click.echo(json.dumps(value, ensure_ascii=False))


def _say_registered(results: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        _json_line({"event": "registered", "definitions": results})
        return
    for result in results:
        click.echo(registered_text(result))


def _changes(paths: list[Path], stop: threading.Event) -> Iterator[set[Path]]:
    """Each batch of changed files under `paths` (debounced by watchfiles)."""
    try:
        import watchfiles
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            f"`wovyr dev` needs the server extra: pip install 'wovyr[server]' ({exc})"
        ) from None
    for batch in watchfiles.watch(*paths, stop_event=stop, yield_on_timeout=False):
        yield {Path(p) for _, p in batch}


def _watched(paths: list[Path], sources: list[Path]) -> list[Path]:
    """The directories to watch: each named directory, and the parent of each named file
    (editors replace files by renaming, which a watch on the file itself would miss)."""
    dirs = {p.resolve() if p.is_dir() else p.resolve().parent for p in [*paths, *sources]}
    return sorted(dirs)


@cli.command("dev")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON lines (ready, reloaded) for tools."
)
@engine_options
def dev_command(
    paths: tuple[Path, ...], host: str, port: int, as_json: bool, settings: Settings
) -> None:
    """Serve the API, UI and a worker, registering workflow files and reloading on change.

    PATHS are workflow files or directories of them (*.yaml, *.yml). A change to a workflow
    file registers it again (a new version when its content changed); a change to an
    activity module (--activities) restarts the server, which picks the executions up where
    they were. Prints the UI address and an admin key. Ctrl-C stops.
    """
    files = workflow_files(paths)
    sources = module_sources(settings.activities)
    _say_registered(apply_workflows(files, settings), as_json)
    token = dev_key(settings)
    child = ServerChild(settings, host, port)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    originals = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child.start()
        watched = _watched(list(paths), sources)
        if as_json:
            _json_line(
                {
                    "event": "ready",
                    "ui": f"{child.url}/ui",
                    "api": f"{child.url}/api/v1",
                    "tenant": "default",
                    "key": token,
                    "watching": [str(p) for p in watched],
                }
            )
        else:
            click.echo(f"wovyr dev: UI {child.url}/ui  API {child.url}/api/v1")
            click.echo(f"admin key (tenant default): {token}")
            click.echo("watching: " + (", ".join(map(str, watched)) or "nothing"), err=True)
        sys.stdout.flush()
        for changed in _changes(watched, stop) if watched else iter(()):
            files = workflow_files(paths)
            python = {p for p in changed if p.suffix == ".py"}
            yaml = {p for p in changed if p.suffix in WORKFLOW_SUFFIXES}
            if not python and not yaml:
                continue
            edited = {p.resolve() for p in yaml}
            results = [  # what the edit did; and what else changed (an import error)
                r
                for r in apply_workflows(files, settings)
                if Path(r["file"]).resolve() in edited or r["result"] != "unchanged"
            ]
            if python:
                child.stop()
                child.start()
            names = sorted(p.name for p in python | yaml)
            if as_json:
                _json_line(
                    {
                        "event": "reloaded",
                        "restarted": bool(python),
                        "files": names,
                        "definitions": results,
                    }
                )
            else:
                if python:
                    click.echo(
                        f"reloaded (server restarted): {', '.join(sorted(p.name for p in python))}"
                    )
                for result in results:
                    click.echo(
                        ("reloaded " if result["result"] != "error" else "")
                        + registered_text(result)
                    )
            sys.stdout.flush()
        if not watched:
            stop.wait()
    finally:
        for s, handler in originals.items():
            signal.signal(s, handler)
        with contextlib.suppress(Exception):
            child.stop()
