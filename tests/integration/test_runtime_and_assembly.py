"""An engine is one frozen `Runtime`: its views for another tenant or actor share the
store, the listeners and the caches, nothing is assigned to it after it is built, and the
edges build theirs in one place (`wovyr.assemble`) from settings that build nothing."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from wovyr import assemble
from wovyr.activities.providers import BoundCredentials
from wovyr.engine.engine import Engine
from wovyr.engine.runtime import Limits, Runtime
from wovyr.platform.providers import SecretCredentials
from wovyr.platform.secrets import Secrets, open_secrets
from wovyr.settings import Settings, load_settings
from wovyr.store.sqlite import SQLiteStore

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: hello, version: "1"}
activities:
  - id: a
    set: {x: 1}
"""


def test_views_share_the_store_listeners_and_caches_and_differ_only_in_who(
    engine: Engine,
) -> None:
    told: list[tuple[str, str]] = []
    engine.add_listener(lambda tenant, eid: told.append((tenant, eid)))
    other = engine.for_tenant("tenant-b").acting("local:someone")
    assert (other.tenant, other.actor) == ("tenant-b", "local:someone")
    assert (engine.tenant, engine.actor) == ("default", None)  # the original is unchanged
    shared = [f.name for f in fields(Runtime) if f.name not in ("tenant", "actor")]
    assert [n for n in shared if getattr(other.runtime, n) is not getattr(engine.runtime, n)] == []
    assert engine.for_tenant("default") is engine and engine.acting(None) is engine
    started = other.start(FLOW)
    assert told == [("tenant-b", started.id)]  # the listener added to the original is told
    assert engine.runtime.caches.stored.get(("tenant-b", started.definition_hash))
    with pytest.raises(Exception, match="not found"):
        engine.get(started.id)  # another tenant's execution answers as a missing one


def test_nothing_is_assigned_to_an_engine(engine: Engine) -> None:
    with pytest.raises(AttributeError):
        engine.side_effects = None  # type: ignore[misc]
    with pytest.raises(AttributeError):
        engine.max_items = 1  # type: ignore[misc]


def test_options_go_to_the_runtime_and_its_limits_and_wrong_ones_are_refused(
    tmp_path: Path,
) -> None:
    engine = Engine(SQLiteStore(tmp_path / "w.db"), max_items=7, min_continue_interval=0)
    try:
        assert engine.limits == Limits(max_items=7, min_continue_interval=0)
        assert (engine.max_items, engine.min_continue_interval) == (7, 0)
        assert engine.value_limits.execution_bytes == engine.max_execution_bytes
        with pytest.raises(TypeError, match="unknown engine options: max_itmes"):
            Engine(engine.store, max_itmes=7)  # type: ignore[call-arg]
        with pytest.raises(ValueError, match="max_recoveries"):
            Engine(engine.store, max_recoveries=-1)
    finally:
        engine.close()


def test_settings_build_nothing() -> None:
    builders = ("tracer", "model_providers", "shell_sandbox")
    assert [name for name in builders if hasattr(Settings, name)] == []
    assert [name for name in builders if callable(getattr(assemble, name))] == list(builders)


def test_the_composition_root_builds_the_edges_engine_from_settings(tmp_path: Path) -> None:
    settings = load_settings(
        {"WOVYR_HOME": str(tmp_path), "WOVYR_DEFAULT_TIMEOUT_SECONDS": "12"}, tenant="tenant-a"
    )
    engine = assemble.open_engine(settings, activities=False)
    try:
        assert engine.tenant == "tenant-a" and engine.actor is None
        assert engine.default_timeout == 12.0
        assert isinstance(engine.secrets, Secrets)  # sealing tenants' payloads use its KMS
        assert isinstance(engine.credentials, SecretCredentials)
        assert engine.shell_sandbox is not None
        assert engine.store.url == settings.store_url
    finally:
        engine.close()


def test_an_app_over_a_bare_engine_serves_with_the_secrets_of_its_home(
    engine: Engine, tmp_path: Path
) -> None:
    assert engine.secrets is None and isinstance(engine.credentials, BoundCredentials)
    secrets = open_secrets(engine.store, tmp_path)  # its KMS loads on first use
    served = assemble.with_secrets(engine, secrets)
    assert served.secrets is secrets and isinstance(served.credentials, SecretCredentials)
    assert served.runtime.listeners is engine.runtime.listeners
    assert engine.secrets is None  # the bare engine is not changed
    assert assemble.with_secrets(served, secrets) is served
