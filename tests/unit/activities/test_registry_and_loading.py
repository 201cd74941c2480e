"""The activity registry, handler calls with a context, and loading user activity modules."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import (
    ActivityContext,
    ActivityRegistry,
    activity,
    call_handler,
    current_activity,
    default_registry,
    load_activity_modules,
)
from wovyr.errors import ActivityNotRegistered, ConfigError

CTX = ActivityContext(
    execution_id="e-1", activity_id="a", attempt=2, workflow="w", idempotency_key="e-1/a/2"
)


def test_registry_lookup_names_and_merge() -> None:
    first, second = ActivityRegistry(), ActivityRegistry()
    first.register("a", lambda: 1)

    @second.activity("b")
    def b() -> int:
        return 2

    assert "a" in first and "b" not in first and 3 not in first
    merged = first.merged(second)
    assert merged.names() == ["a", "b"] and merged.get("b") is b
    with pytest.raises(ActivityNotRegistered) as info:
        first.get("missing")
    assert "registered: a" in str(info.value)
    assert "load modules with --activities" in str(info.value)


def test_activity_keys_and_the_current_context() -> None:
    assert CTX.activity_key == "e-1/a"
    with pytest.raises(RuntimeError, match="outside an activity"):
        current_activity()

    seen: list[Any] = []

    def sync_with_ctx(x: int, ctx: ActivityContext) -> int:
        seen.append((ctx.attempt, current_activity().idempotency_key))
        return x + 1

    async def async_without_ctx(x: int) -> int:
        seen.append(current_activity().activity_key)
        return x * 2

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, ctx: ActivityContext) -> str:
            return ctx.workflow

    async def main() -> list[Any]:
        return [
            await call_handler(sync_with_ctx, {"x": 1}, CTX),
            await call_handler(async_without_ctx, {"x": 5}, CTX),
            await call_handler(Unhashable(), {}, CTX),
        ]

    assert asyncio.run(main()) == [2, 10, "w"]
    assert seen == [(2, "e-1/a/2"), "e-1/a"]
    with pytest.raises(RuntimeError):
        current_activity()  # reset after each call


@pytest.mark.usefixtures("fresh_registry")
def test_loading_activity_files_and_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = tmp_path / "plugin_acts.py"
    plugin.write_text(
        "import wovyr\n\n@wovyr.activity('plugin.echo')\ndef echo(x):\n    return x\n"
    )
    load_activity_modules([str(plugin)])
    assert default_registry.get("plugin.echo")(x=3) == 3
    load_activity_modules([str(plugin)])  # loaded once per path

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "dotted_acts.py").write_text(
        "from wovyr.activities.base import activity\n\n"
        "@activity('dotted.ping')\ndef ping():\n    return 'pong'\n"
    )
    monkeypatch.chdir(package)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(package)])
    load_activity_modules(["dotted_acts, ", ""], entry_point_group="wovyr.no-such-group")
    assert default_registry.get("dotted.ping")() == "pong"

    with pytest.raises(ConfigError, match="activities file not found"):
        load_activity_modules([str(tmp_path / "absent.py")])
    broken = tmp_path / "broken_acts.py"
    broken.write_text("raise ValueError('boom')\n")
    with pytest.raises(ConfigError, match=r"cannot import activities module .*boom"):
        load_activity_modules([str(broken)])
    with pytest.raises(ConfigError, match="cannot import activities module 'no_such_mod_xyz'"):
        load_activity_modules(["no_such_mod_xyz"])


def test_the_module_level_decorator_uses_the_default_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(default_registry, "_handlers", dict(default_registry._handlers))

    @activity("decorated.tool")
    def tool() -> str:
        return "ok"

    assert default_registry.get("decorated.tool") is tool
