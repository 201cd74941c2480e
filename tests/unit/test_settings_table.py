"""The settings table: deprecated names still read (warned, naming the new one), secrets
read from `NAME_FILE`, clear errors, redaction, and defaults that agree with `Settings`."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

import wovyr.settings as settings_module
from wovyr.client.base import api_key_from
from wovyr.errors import ConfigError
from wovyr.platform.kms import load_kms
from wovyr.settings import (
    FILE_LIMIT,
    VARIABLES,
    Settings,
    load_settings,
    lookup,
    read,
    redacted,
    variable,
)

ALIASES = [(alias, v.name) for v in VARIABLES for alias in v.aliases]
ROOT_KEY = "ab" * 32


def test_all_is_sorted_and_the_names_are_unique() -> None:
    assert settings_module.__all__ == sorted(settings_module.__all__)
    names = [n for v in VARIABLES for n in (v.name, *v.aliases)]
    assert len(names) == len(set(names))


def test_the_table_defaults_are_the_settings_defaults() -> None:
    assert load_settings({}) == Settings()


def test_the_server_keeps_an_idle_connection_longer_than_clients_keep_theirs() -> None:
    """A server that closes an idle connection a client still holds answers the client's
    next request on it with nothing ("Server disconnected", a ReadError: the request was
    never read). httpx (Wovyr's clients) keeps one 5 s, a load balancer about 60 s; the
    server's keep-alive outlasts both (uvicorn's own is 5 s: they raced)."""
    assert Settings().keep_alive > max(httpx.Limits().keepalive_expiry or 0.0, 60.0)


def test_the_seconds_are_named_seconds() -> None:
    durations = [v.name for v in VARIABLES if v.type == "seconds"]
    assert durations and all(name.endswith("_SECONDS") for name in durations)
    assert not [v.name for v in VARIABLES if v.name.endswith("_SECS")]


@pytest.mark.parametrize(("old", "new"), ALIASES)
def test_a_deprecated_name_is_read_with_a_warning_and_a_log_line(
    old: str, new: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wovyr.settings")
    with pytest.warns(DeprecationWarning, match=f"^{old} is deprecated: use {new}$"):
        value = lookup(new, {old: "7"})
    assert (value.text, value.source, value.origin) == ("7", "deprecated alias", old)
    assert f"{old} is deprecated: use {new}" in caplog.messages


def test_settings_come_from_the_old_names_too() -> None:
    with pytest.warns(DeprecationWarning, match="_SECS is deprecated"):
        settings = load_settings({"WOVYR_SHUTDOWN_GRACE_SECS": "4", "WOVYR_AUDIT_ANCHOR_SECS": "9"})
    assert (settings.shutdown_grace, settings.audit_anchor_interval) == (4, 9)
    new = load_settings({"WOVYR_SHUTDOWN_GRACE_SECONDS": "4"})  # no warning (they are errors)
    assert new.shutdown_grace == 4


def test_a_bad_value_under_an_old_name_is_refused_naming_that_name() -> None:
    with (
        pytest.warns(DeprecationWarning, match="use WOVYR_DEFAULT_TIMEOUT_SECONDS"),
        pytest.raises(ConfigError, match="WOVYR_DEFAULT_TIMEOUT_SECS must be a number"),
    ):
        load_settings({"WOVYR_DEFAULT_TIMEOUT_SECS": "soon"})


def test_both_names_agreeing_is_accepted_disagreeing_is_an_error() -> None:
    env = {"WOVYR_POLL_INTERVAL": "2", "WOVYR_POLL_INTERVAL_SECONDS": "2"}
    with pytest.warns(DeprecationWarning, match="WOVYR_POLL_INTERVAL is deprecated"):
        assert lookup("WOVYR_POLL_INTERVAL_SECONDS", env).source == "env"
    env["WOVYR_POLL_INTERVAL"] = "3"
    with pytest.raises(ConfigError, match="both set, to different values"):
        lookup("WOVYR_POLL_INTERVAL_SECONDS", env)


def test_an_empty_variable_counts_as_unset() -> None:
    value = lookup("WOVYR_LEASE_SECONDS", {"WOVYR_LEASE_SECONDS": ""})
    assert (value.text, value.source) == ("30", "default")
    assert read("WOVYR_LLM_MODEL", {}) is None


def test_a_secret_is_read_from_its_file_without_the_trailing_newline(tmp_path: Path) -> None:
    url = tmp_path / "url"
    url.write_text("postgresql://wovyr:pw@db:5432/wovyr\n")
    value = lookup("WOVYR_DATABASE_URL", {"WOVYR_DATABASE_URL_FILE": str(url)})
    assert (value.text, value.source, value.origin) == (
        "postgresql://wovyr:pw@db:5432/wovyr",
        "file",
        str(url),
    )
    key = tmp_path / "key"
    key.write_bytes(b"wk_secret\r\n")
    settings = load_settings(
        {"WOVYR_DATABASE_URL_FILE": str(url), "WOVYR_LLM_API_KEY_FILE": str(key)}
    )
    assert settings.database_url == "postgresql://wovyr:pw@db:5432/wovyr"
    assert settings.llm_api_key == "wk_secret"
    assert api_key_from(None, {"WOVYR_API_KEY_FILE": str(key)}) == "wk_secret"


def test_the_kms_root_key_may_come_from_a_file(tmp_path: Path) -> None:
    key = tmp_path / "root.key"
    key.write_text(ROOT_KEY + "\n")
    kms = load_kms(tmp_path / "home", {"WOVYR_KMS_ROOT_KEY_FILE": str(key)}, warn=False)
    assert kms.mode == "production"
    assert kms.key_id == load_kms(tmp_path, {"WOVYR_KMS_ROOT_KEY": ROOT_KEY}).key_id
    assert not (tmp_path / "home").exists()  # no development key was made


def test_a_secret_and_its_file_both_set_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "pass"
    path.write_text("p\n")
    env = {"WOVYR_BACKUP_PASSPHRASE": "p", "WOVYR_BACKUP_PASSPHRASE_FILE": str(path)}
    with pytest.raises(ConfigError, match=r"both WOVYR_BACKUP_PASSPHRASE and .*_FILE are set"):
        read("WOVYR_BACKUP_PASSPHRASE", env)


def test_an_unreadable_empty_or_huge_secret_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=f"WOVYR_API_KEY_FILE: cannot read {missing}"):
        read("WOVYR_API_KEY", {"WOVYR_API_KEY_FILE": str(missing)})
    with pytest.raises(ConfigError, match="cannot read"):  # a folder
        read("WOVYR_API_KEY", {"WOVYR_API_KEY_FILE": str(tmp_path)})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        read("WOVYR_API_KEY", {"WOVYR_API_KEY_FILE": str(empty)})
    huge = tmp_path / "huge"
    huge.write_bytes(b"k" * (FILE_LIMIT + 1))
    with pytest.raises(ConfigError, match="larger than"):
        read("WOVYR_API_KEY", {"WOVYR_API_KEY_FILE": str(huge)})
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read("WOVYR_API_KEY", {"WOVYR_API_KEY_FILE": str(binary)})


def test_only_secrets_have_a_file_form(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("/elsewhere\n")
    assert variable("WOVYR_HOME").file_variable is None
    assert lookup("WOVYR_HOME", {"WOVYR_HOME_FILE": str(home)}).source == "default"
    assert variable("WOVYR_WORKER_PROCESS_CONFIG").file_variable is None  # internal


def test_secrets_are_redacted_when_shown(tmp_path: Path) -> None:
    url = lookup("WOVYR_DATABASE_URL", {"WOVYR_DATABASE_URL": "postgresql://u:pw@db/w"})
    assert url.shown() == "postgresql://u:***@db/w"
    key = lookup("WOVYR_LLM_API_KEY", {"WOVYR_LLM_API_KEY": "sk-live-1234"})
    assert key.shown() == "***"
    assert lookup("WOVYR_LLM_API_KEY", {}).shown() is None  # unset: nothing to hide
    plain = lookup("WOVYR_LLM_MODEL", {"WOVYR_LLM_MODEL": "m-1"})
    assert plain.shown() == "m-1"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://u:pw@db:5432/w", "postgresql://u:***@db:5432/w"),
        ("postgresql://u@db/w", "postgresql://u@db/w"),  # no password: nothing hidden
        ("postgresql://db/w?password=pw&x=1", "postgresql://db/w?***"),
        ("postgresql://u:p@ss@db", "postgresql://u:***@db"),
        ("sqlite:///data/w.db", "sqlite:///data/w.db"),
        ("not a url", "***"),
    ],
)
def test_a_url_keeps_all_but_its_password(text: str, shown: str) -> None:
    assert redacted(text, url=True) == shown
    assert redacted(text) == "***"
