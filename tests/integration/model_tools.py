"""What the tests of each provider family against the scripted model server share: an
engine on a SQLite file whose one provider is the given config, an agent run's workflow and
the tools it calls (one that adds, one that looks a city up, one that breaks) with what it
must end with, and the check that a provider's key is nowhere in the database files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)


def provider_engine(
    db: Path,
    provider: ProviderConfig,
    registry: ActivityRegistry | None = None,
    clock: ManualClock | None = None,
) -> Engine:
    return Engine(
        SQLiteStore(db),
        clock=clock or ManualClock(T0),
        activities=registry or ActivityRegistry(),
        providers=Providers({provider.name: provider}),
    )


def no_key_in_store(db: Path, key: str) -> None:
    for path in db.parent.iterdir():
        if path.name.startswith(db.name):
            assert key.encode() not in path.read_bytes(), path.name


def agent_tools(seen: list[str]) -> ActivityRegistry:
    """`math.add`, `geo.lookup` and `explode` (which raises), each noting its call in
    `seen`."""
    registry = ActivityRegistry()

    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        seen.append("add")
        return a + b

    def lookup(city: str) -> dict[str, Any]:
        """Where a city is."""
        seen.append("lookup")
        return {"city": city, "country": "FR"}

    def explode() -> None:
        seen.append("explode")
        raise RuntimeError("the tool broke")

    registry.register("math.add", add)
    registry.register("geo.lookup", lookup)
    registry.register("explode", explode)
    return registry


def agent_flow(provider: str, model: str, extra: str = "") -> str:
    """A workflow whose one step is an agent of `provider` offered the `agent_tools`
    (`extra`: more keys of the step, YAML at its indentation)."""
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: helper}}
activities:
  - id: think
    agent:
      provider: {provider}
      model: {model}
      instructions: Use the tools.
      input: What is 2 + 3, and where is Paris?
      tools: [math.add, geo.lookup, explode]
      max_tokens: 512
{extra}output: "${{{{ activities.think.output }}}}"
"""


def assert_agent_answered(engine: Engine, execution: str, seen: list[str]) -> None:
    """The agent of `agent_flow`, scripted to call two tools a turn for two turns (one of
    them unknown) and answer `5; Paris is in FR.` on the third, ended so."""
    view = engine.query(execution)
    assert view.status == "completed", view.activities["think"]
    out = view.output
    assert out["text"] == "5; Paris is in FR."
    assert (out["turns"], out["finish_reason"]) == (3, "stop")
    assert out["usage"] == {"input_tokens": 30, "output_tokens": 15}
    assert sorted(seen) == ["add", "explode", "lookup"]
