"""Shared fixtures: every store the machine offers, a ManualClock, a fresh registry."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.store.base import Store

if TYPE_CHECKING:
    from tests.pg_schemas import SchemaPool

    from wovyr.engine.engine import Engine

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# The tests start hundreds of Python processes. Under PYTHONDONTWRITEBYTECODE (which many
# shells and container images set) each would compile every module it imports again, and
# pytest would rewrite the asserts of every test module on every run: the suite writes its
# bytecode (`__pycache__`, ignored by git) whatever the shell says, as CI does.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False
# A test that sets no WOVYR_HOME (and every process it starts) gets a private home, never the
# user's ~/.wovyr: a CLI or worker run there would write a development KMS key and a store.
if not os.environ.get("WOVYR_HOME"):
    os.environ["WOVYR_HOME"] = tempfile.mkdtemp(prefix="wovyr-test-home-")
# The PostgreSQL server of the test machine (override with WOVYR_TEST_POSTGRES_URL).
POSTGRES_URL = os.environ.get(
    "WOVYR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
STORE_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
# The crash-point sweeps, fault injections, soak, process kills and the API fuzz test take
# the longest (each a minute or more on a loaded two-core machine): they are handed to the
# pytest workers first, so the tier does not end with one worker still in a sweep while the
# others are idle.
LONGEST_FIRST = ("tests/reliability/", "tests/chaos/", "tests/server/test_fuzz.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        found = (i for i, folder in enumerate(LONGEST_FIRST) if item.nodeid.startswith(folder))
        return next(found, len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the collection's order within each rank


def make_store(kind: str, tmp_path: Path, postgres_url: str | None = None) -> Store:
    if kind == "sqlite":
        from wovyr.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "wovyr.db")
    if kind == "postgres":
        from wovyr.store.postgres import PostgresStore

        assert postgres_url is not None, "use the postgres_url fixture"
        return PostgresStore(postgres_url, max_size=4)
    raise ValueError(kind)


_postgres_problem: list[str] = []  # why the server did not answer (checked once per session)


def _require_postgres() -> None:
    """Skip (locally) or fail (CI=true: a missing server must fail CI) without a server."""
    if not _postgres_problem:
        try:
            import psycopg

            with psycopg.connect(POSTGRES_URL, connect_timeout=3):
                pass
            _postgres_problem.append("")
        except Exception as exc:
            _postgres_problem.append(f"PostgreSQL at {POSTGRES_URL} does not answer: {exc}")
    if _postgres_problem[0]:
        if IN_CI:
            pytest.fail(_postgres_problem[0])
        pytest.skip(_postgres_problem[0])


@pytest.fixture(scope="session")  # before the module fixtures that already trace
def strace_installed() -> None:
    """Skip locally, but fail in CI (CI=true), when strace is missing: CI must run the
    crash-point, kill-point and I/O-fault tests it claims to run (`.ci/run` installs it)."""
    if shutil.which("strace") is None:
        problem = "strace is not installed (Debian: apt-get install strace)"
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)


@pytest.fixture(scope="session")
def schema_pool() -> Iterator[SchemaPool]:
    # imported here: an install without the `postgres` extra runs the other tests
    # (scripts/check-extras.sh)
    from tests.pg_schemas import SchemaPool

    pool = SchemaPool(POSTGRES_URL)
    yield pool
    pool.close()


@pytest.fixture
def postgres_url(schema_pool: SchemaPool) -> Iterator[str]:
    """A URL whose search_path is a fresh, empty schema, dropped after the test: no test
    sees another's rows."""
    from tests.pg_schemas import schema_url

    _require_postgres()
    schema = schema_pool.fresh()
    try:
        yield schema_url(POSTGRES_URL, schema)
    finally:
        schema_pool.drop(schema)


@pytest.fixture
def migrated_postgres_url(schema_pool: SchemaPool) -> Iterator[str]:
    """A URL whose search_path is a migrated schema no other test is using, with no rows
    but the ones the migrations write (`tests/pg_schemas.py`: emptied and handed on to the
    next test in this process unless the test changed its catalog)."""
    from tests.pg_schemas import schema_url

    _require_postgres()
    schema = schema_pool.take_migrated()
    try:
        yield schema_url(POSTGRES_URL, schema)
    finally:
        schema_pool.give_back(schema)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = request.getfixturevalue("migrated_postgres_url") if request.param == "postgres" else None
    s = make_store(request.param, tmp_path, url)
    yield s
    s.close()


@contextmanager
def fresh_default_registry() -> Iterator[None]:
    """The default registry and the loaded activity files as a fresh `wovyr` process has them:
    no handler registered, no file loaded (a file loaded by an earlier test is loaded once per
    process, so its handlers would not register again); both given back after."""
    from wovyr.activities.base import default_registry
    from wovyr.code.workflow import _REGISTRY as workflow_functions

    def user_modules() -> list[str]:
        return [name for name in sys.modules if name.startswith("wovyr_user_")]

    handlers = default_registry._handlers
    functions = dict(workflow_functions)
    loaded = {name: sys.modules.pop(name) for name in user_modules()}
    default_registry._handlers = {}
    workflow_functions.clear()
    try:
        yield
    finally:
        default_registry._handlers = handlers
        workflow_functions.clear()
        workflow_functions.update(functions)
        for name in user_modules():
            del sys.modules[name]
        sys.modules.update(loaded)


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """`fresh_default_registry` for one test."""
    with fresh_default_registry():
        yield


@pytest.fixture
def tls_builds(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each TLS context built from here to the test's end, after the process's own ones
    (`wovyr.activities.outbound.tls_context`, `wovyr.client.base.tls_context`): building
    one loads the CA bundle (15-30 ms of CPU), which no request or client made should pay."""
    import ssl

    from wovyr.activities.outbound import tls_context
    from wovyr.client.base import tls_context as client_tls_context

    tls_context()
    client_tls_context()
    built: list[object] = []
    build = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(args)
        return build(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    return built


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2030, 1, 1, 9, 0, tzinfo=UTC))


@pytest.fixture
def registry() -> ActivityRegistry:
    return ActivityRegistry()


@pytest.fixture
def engine(store: Store, clock: ManualClock, registry: ActivityRegistry) -> Engine:
    from wovyr.engine.engine import Engine

    return Engine(store, clock=clock, activities=registry)
