"""WOVYR_LOG_FORMAT selects JSON lines for the server and the worker; anything else but
`text` is refused at start with the reason."""

from __future__ import annotations

import json
import logging
import logging.config
from collections.abc import Iterator

import pytest

from wovyr.activities.logs import bind, log_config
from wovyr.errors import ConfigError
from wovyr.settings import load_settings


def test_the_setting_is_read_and_checked() -> None:
    assert load_settings({}).log_format == "text"
    assert load_settings({"WOVYR_LOG_FORMAT": "JSON"}).log_format == "json"
    with pytest.raises(ConfigError, match="WOVYR_LOG_FORMAT must be text or json"):
        load_settings({"WOVYR_LOG_FORMAT": "xml"})


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """The configuration `dictConfig` changes, put back (other tests read these loggers)."""
    names = ("", "wovyr", "uvicorn", "uvicorn.access")
    saved = {
        n: (list(lg.handlers), lg.level, lg.propagate, lg.disabled)
        for n in names
        for lg in [logging.getLogger(n)]
    }
    yield
    for n, (handlers, level, propagate, disabled) in saved.items():
        lg = logging.getLogger(n)
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate, lg.disabled = propagate, disabled


@pytest.mark.usefixtures("restored_logging")
def test_the_json_config_writes_ids_on_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    logging.config.dictConfig(log_config(True, "info"))
    log = logging.getLogger("wovyr.test_log_format")
    log.info("outside any execution")
    with bind(execution_id="e1", activity_id="a", attempt=2, tenant="t", forms=["s3cr3t!"]):
        log.warning("inside, saying s3cr3t!")
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines()]
    assert [(x["execution_id"], x["activity_id"], x["attempt"]) for x in lines] == [
        (None, None, None),
        ("e1", "a", 2),
    ]
    assert lines[1]["message"] == "inside, saying ***" and lines[1]["tenant"] == "t"
