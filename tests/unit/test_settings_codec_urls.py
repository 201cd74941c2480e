"""Edges of the configuration, the SQL stores' encoding and store URLs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wovyr.errors import ConfigError
from wovyr.settings import load_settings
from wovyr.store import default_url, open_store, redact_url
from wovyr.store.codec import dumps, from_micros, loads, to_micros


def test_settings_from_env_and_flags(tmp_path: Path) -> None:
    env = {
        "WOVYR_HOME": str(tmp_path),
        "WOVYR_ACTIVITIES": "a.py,b",
        "WOVYR_LEASE_SECONDS": "12.5",
        "WOVYR_CONCURRENCY": "8",
        "WOVYR_POLL_INTERVAL_SECONDS": "",
    }
    settings = load_settings(
        env, activities=("c",), home=str(tmp_path / "other"), lease_seconds=None
    )
    assert settings.activities == ("a.py", "b", "c")
    assert settings.home == tmp_path / "other"
    assert settings.lease_seconds == 12.5 and settings.concurrency == 8
    assert settings.poll_interval == 1.0
    assert settings.store_url == f"sqlite:///{tmp_path / 'other' / 'wovyr.db'}"
    url = "postgresql://u@h/db"
    assert load_settings({"WOVYR_DATABASE_URL": url}).store_url == url


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("WOVYR_LEASE_SECONDS", "soon", "must be a number"),
        ("WOVYR_POLL_INTERVAL_SECONDS", "-1", "must be positive"),
        ("WOVYR_CONCURRENCY", "2.5", "must be a whole number"),
    ],
)
def test_bad_settings_are_config_errors(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({name: value})


def test_codec_round_trips_and_refuses_what_json_cannot_hold() -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert loads(dumps({"at": when, "s": {1}, "t": (1, 2), "é": "ü"})) == {
        "at": when.isoformat(),
        "s": [1],
        "t": [1, 2],
        "é": "ü",
    }
    assert loads(None) is None
    with pytest.raises(TypeError, match="cannot store a value of type object"):
        dumps(object())
    assert from_micros(to_micros(when)) == when
    assert to_micros(datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)) == -1_000_000
    assert from_micros(0) + timedelta(days=1) == datetime(1970, 1, 2, tzinfo=UTC)


@dataclass
class _Point:
    x: int


def test_codec_edges_keep_the_standard_library_meaning() -> None:
    # What the fast encoder refuses goes through the standard library, same text as before.
    big = {"n": 2**70, "k": {1: "one"}}
    assert dumps(big) == '{"n":1180591620717411303424,"k":{"1":"one"}}'
    assert loads(dumps(big)) == {"n": 2**70, "k": {"1": "one"}}
    deep: list[object] = []
    for _ in range(400):  # deeper than the fast encoder's limit
        deep = [deep]
    assert dumps(deep) == "[" * 401 + "]" * 401
    assert dumps("\ud800") == '"\ud800"'  # a lone surrogate is kept as the standard library did
    with pytest.raises(TypeError, match="cannot store a value of type _Point"):
        dumps({"p": _Point(1)})  # not silently turned into an object
    # JSON has no NaN: stored as null; text written by an older version still reads.
    assert dumps([float("nan"), float("inf")]) == "[null,null]"
    assert dumps({"n": 2**70, "x": [float("nan")]}) == '{"n":1180591620717411303424,"x":[null]}'
    assert math.isnan(loads('{"x": NaN}')["x"])
    assert loads(b'{"a":[1,2.5,"\\u00e9"]}') == {"a": [1, 2.5, "é"]}


def test_store_urls(tmp_path: Path) -> None:
    assert default_url(tmp_path) == f"sqlite:///{tmp_path / 'wovyr.db'}"
    assert default_url().endswith("/.wovyr/wovyr.db")
    assert redact_url("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://h/db") == "postgresql://h/db"
    with pytest.raises(ConfigError, match="needs a path"):
        open_store("sqlite:///")
    with pytest.raises(ConfigError, match="unknown store URL"):
        open_store("mysql://h/db")
    store = open_store("memory://")
    assert store.url == "memory://"
    store.close()
    sqlite = open_store(f"sqlite:///{tmp_path / 'x' / 'w.db'}")
    assert (tmp_path / "x" / "w.db").exists()
    sqlite.close()


def test_schedule_floor_and_tenant_cap_come_from_the_environment() -> None:
    default = load_settings({})
    assert (default.min_schedule_interval, default.max_per_tenant) == (1.0, None)
    tuned = load_settings(
        {"WOVYR_MIN_SCHEDULE_INTERVAL_SECONDS": "0.25", "WOVYR_MAX_PER_TENANT": "3"}
    )
    assert (tuned.min_schedule_interval, tuned.max_per_tenant) == (0.25, 3)
    with pytest.raises(ConfigError, match="must be positive"):
        load_settings({"WOVYR_MAX_PER_TENANT": "0"})


def test_the_chains_minimum_interval_comes_from_the_environment_and_may_be_0() -> None:
    assert load_settings({}).min_continue_interval == 1.0
    assert load_settings({"WOVYR_MIN_CONTINUE_INTERVAL_SECONDS": "0"}).min_continue_interval == 0
    assert load_settings({"WOVYR_MIN_CONTINUE_INTERVAL_SECONDS": "5"}).min_continue_interval == 5
    for bad in ("-1", "nan", "soon"):
        with pytest.raises(ConfigError, match="WOVYR_MIN_CONTINUE_INTERVAL_SECONDS must be"):
            load_settings({"WOVYR_MIN_CONTINUE_INTERVAL_SECONDS": bad})


def test_the_reserved_slots_come_from_the_environment_below_the_concurrency() -> None:
    assert load_settings({}).reserved_slots is None  # the worker's default: an eighth
    assert load_settings({"WOVYR_RESERVED_SLOTS": "0"}).reserved_slots == 0
    assert load_settings({"WOVYR_RESERVED_SLOTS": "4"}).reserved_slots == 4
    with pytest.raises(ConfigError, match=r"WOVYR_RESERVED_SLOTS \(8\) must be below"):
        load_settings({"WOVYR_RESERVED_SLOTS": "8", "WOVYR_CONCURRENCY": "8"})
    with pytest.raises(ConfigError, match="WOVYR_RESERVED_SLOTS must be 0 or more"):
        load_settings({"WOVYR_RESERVED_SLOTS": "-1"})
