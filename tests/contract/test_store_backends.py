"""The backend table: every store URL names one row, and the rest of the code asks the
table instead of looking at a URL's scheme or a store's class."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import wovyr
from wovyr.errors import ConfigError, Conflict
from wovyr.platform.archive import STORE_FILES
from wovyr.store import open_store
from wovyr.store.backends import BACKENDS, backend_for, backend_of_kind, restorable_url
from wovyr.store.snapshots import latest_migration, stage_restore, target_held, target_in_use


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("sqlite:///x/wovyr.db", "sqlite"),
        ("sqlite:////abs/wovyr.db", "sqlite"),
        ("memory://", "memory"),
        ("memory:", "memory"),
        ("postgresql://u@h/db", "postgres"),
        ("postgres://u@h/db", "postgres"),
    ],
)
def test_every_store_url_names_one_backend(url: str, kind: str) -> None:
    assert [b.kind for b in BACKENDS if b.matches(url)] == [kind]
    assert backend_for(url).kind == kind


@pytest.mark.parametrize("url", ["mysql://h/db", "memory://x", "sqlite://rel.db", "/a/path"])
def test_an_unknown_url_is_refused_with_the_urls_that_work(url: str) -> None:
    with pytest.raises(ConfigError, match="unknown store URL") as caught:
        open_store(url)
    assert "sqlite:///" in (caught.value.hint or "")


def test_a_sqlite_url_without_a_path_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs a path"):
        open_store("sqlite:///")


def test_only_durable_stores_are_backed_up_and_restored_into() -> None:
    assert STORE_FILES == {"sqlite": "store.sqlite", "postgres": "store.pgdump"}
    assert not backend_for("memory://").durable
    assert restorable_url("memory://") is None
    assert restorable_url("/home/someone") is None
    assert restorable_url("sqlite:///x.db") is backend_of_kind("sqlite")
    with pytest.raises(ConfigError, match="unknown store kind 'memory'"):
        backend_of_kind("memory")
    with pytest.raises(ConfigError, match="restore target"):
        target_in_use("memory://")
    with pytest.raises(ConfigError, match="restores into a sqlite store, not memory"):
        stage_restore("sqlite", Path("x"), "memory://", dump_schema=None, force=True)


def test_the_sqlite_row_opens_checks_and_stages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'home' / 'wovyr.db'}"
    assert not target_in_use(url)
    store = open_store(url)
    try:
        assert store.url == url
        assert target_in_use(url)
        assert target_held(url) is not None  # this very connection holds it
        with pytest.raises(Conflict, match="not empty"):
            stage_restore("sqlite", tmp_path / "none", url, dump_schema=None, force=False)
    finally:
        store.close()
    assert target_held(url) is None
    assert latest_migration("sqlite") == backend_of_kind("sqlite").driver().latest_migration()


def test_a_memory_url_opens_a_private_sqlite_store() -> None:
    store = open_store("memory://")
    try:
        assert store.url == "memory://"
    finally:
        store.close()


_PROBES = re.compile(
    r"isinstance\([^)]*\b(SQLiteStore|PostgresStore)\b|hasattr\(\s*(self\.)?_?(store|inner)\b"
)


def test_no_module_probes_a_store_for_what_it_is() -> None:
    """Only `wovyr.store.capabilities` asks a store what it is; the rest asks it."""
    root = Path(wovyr.__file__).parent
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).as_posix() != "store/capabilities.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _PROBES.search(line)
    ]
    assert found == []
