"""`on_failure: continue` end to end on every store: the fallback example routes around a
primary that fails after its retries, and completes with the failure recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityError, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.testing import drain

EXAMPLE = Path(__file__).parents[2] / "examples" / "llm-with-fallback.yaml"


def models(registry: ActivityRegistry, calls: list[str]) -> None:
    def primary(prompt: str, available: bool) -> dict[str, Any]:
        calls.append("primary")
        if not available:
            raise ActivityError("the primary model is unavailable", type="ModelUnavailable")
        return {"text": f"[large] {prompt}"}

    def fallback(prompt: str) -> dict[str, Any]:
        calls.append("fallback")
        return {"text": f"[small] {prompt}"}

    registry.register("models.primary", primary)
    registry.register("models.fallback", fallback)


def test_the_fallback_answers_when_the_primary_fails_for_good(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    calls: list[str] = []
    models(registry, calls)
    record = engine.start(path=EXAMPLE, input={"prompt": "hi", "primary_available": False})
    for _ in range(5):  # the primary's retry back-offs are durable timers
        drain(engine)
        clock.advance(1)
    view = engine.query(record.id)

    assert view.status == "completed"
    assert calls == ["primary"] * 3 + ["fallback"]
    assert view.output == {
        "answer": "[small] hi",
        "primary_error": "the primary model is unavailable",
    }
    assert view.activities["primary"]["status"] == "failed"
    assert view.activities["primary"]["error"]["type"] == "ModelUnavailable"
    assert view.error is None


def test_the_fallback_is_skipped_when_the_primary_answers(
    engine: Engine, registry: ActivityRegistry
) -> None:
    calls: list[str] = []
    models(registry, calls)
    record = engine.start(path=EXAMPLE, input={"prompt": "hi"})
    drain(engine)
    view = engine.query(record.id)

    assert (view.status, view.output) == (
        "completed",
        {"answer": "[large] hi", "primary_error": None},
    )
    assert calls == ["primary"]
    assert view.activities["fallback"]["status"] == "skipped"
