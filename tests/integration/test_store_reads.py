"""`wovyr workflows show|list|history` read through the store alone (`StoreReader`: the
definition's outline read from its stored JSON, no workflow language, no engine): what they
answer is exactly what the engine's `query`, `list` and `history` answer, for executions of
every shape - waiting, failed with a traceback, a map, a child, a continued chain, an agent
run, a saga, a repeat, credentials masked in rendered inputs - and through the CLI's
backend (`LocalBackend`, the dicts `--json` prints)."""

from __future__ import annotations

import json
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.cli.backend import LocalBackend
from wovyr.clock import ManualClock
from wovyr.definition import canonical_json, content_hash, load_definition
from wovyr.engine.definitions import outline_of
from wovyr.engine.engine import Engine
from wovyr.engine.outline import outline_from_source
from wovyr.engine.reads import StoreReader, history, list_executions, query
from wovyr.settings import load_settings
from wovyr.store.base import DefinitionRecord
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)

CHILD = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: shipping, version: "2"}
inputs:
  order: {type: string}
activities:
  - {id: label, set: {order: "${{ inputs.order }}"}}
output: "${{ activities.label.output }}"
"""

KITCHEN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: kitchen}
labels: {team: ops}
activities:
  - id: call
    http:
      url: "URL"
      method: POST
      headers: {Authorization: Bearer literal-token-1234, X-Trace: t1}
    retry: {max_attempts: 1}
    on_failure: continue
  - id: run
    shell:
      argv: [printf, hi]
      env: {TOKEN: hunter2hunter2, PLAIN: p}
      secret_env: [TOKEN]
  - id: each
    for_each: "${{ [1, 2, 3] }}"
    tool: double
    with: {n: "${{ item }}"}
    retry: {initial_interval: 1s}
  - id: ship
    needs: [each]
    workflow: {name: shipping, input: {order: o-1}}
  - id: again
    needs: [ship]
    set: {v: "${{ iteration }}"}
    repeat: {until: "${{ output.v >= 2 }}", max_iterations: 5}
  - id: approve
    needs: [again]
    wait: {approval: {approvers: [ada]}}
"""

SAGA = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: saga}
activities:
  - id: reserve
    tool: double
    with: {n: 1}
    compensate: {tool: double, with: {n: 0}}
  - id: charge
    needs: [reserve]
    tool: boom
    retry: {max_attempts: 2, initial_interval: 1s}
"""

CHAIN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chain}
inputs:
  n: {type: integer, default: 1}
activities:
  - {id: count, set: {n: "${{ inputs.n }}"}}
output: "${{ activities.count.output }}"
continue_as_new:
  when: "${{ inputs.n < 3 }}"
  input: {n: "${{ inputs.n + 1 }}"}
"""

AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper}
activities:
  - id: think
    agent: {model: m1, instructions: Answer., input: "What is 2 + 3?"}
  - id: wait
    needs: [think]
    wait: {signal: go}
"""


def _registry() -> ActivityRegistry:
    registry = ActivityRegistry()

    def double(n: int) -> int:
        return 2 * n

    def boom() -> None:
        raise RuntimeError("the card was declined")

    registry.register("double", double)
    registry.register("boom", boom)
    return registry


@pytest.fixture
def executions(tmp_path: Path) -> tuple[Path, list[str]]:
    """A store holding executions of every shape (and the ids to read them by)."""
    db = tmp_path / "w.db"
    with ScriptedLLM([text("5")]) as llm:
        provider = ProviderConfig("default", llm.base_url, api_key="sk-reads-1")
        engine = Engine(
            SQLiteStore(db),
            clock=ManualClock(T0),
            activities=_registry(),
            providers=Providers({"default": provider}),
        )
        engine.apply(CHILD)
        engine.start(KITCHEN.replace("URL", f"{llm.base_url}/nowhere"), execution_id="k1")
        engine.start(SAGA, execution_id="s1")
        engine.start(CHAIN, execution_id="c1")
        engine.start(AGENT, execution_id="a1")
        drain(engine, skip_time=True)
        engine.close()
    return db, ["k1", "s1", "c1", "a1"]


def test_the_store_reads_answer_as_the_engine_does(executions: tuple[Path, list[str]]) -> None:
    db, ids = executions
    engine = Engine(SQLiteStore(db), clock=ManualClock(T0))
    reader = StoreReader(engine.store, engine.tenant)
    views = {i: engine.query(i) for i in ids}
    # the shapes this test is about are there
    kitchen = views["k1"].activities
    assert views["k1"].status == "waiting" and kitchen["approve"]["status"] == "waiting"
    assert kitchen["call"]["input"]["headers"]["Authorization"] == "***"
    assert kitchen["run"]["input"]["env"] == {"TOKEN": "***", "PLAIN": "p"}
    assert kitchen["each"]["items"] and kitchen["ship"]["child"]
    assert kitchen["again"]["iterations"] == 2 and kitchen["again"]["max_iterations"] == 5
    assert views["s1"].status == "failed" and "traceback" in json.dumps(views["s1"].error)
    assert views["s1"].activities["reserve"]["compensation_step"] == 0
    assert views["c1"].chain == {"root": "c1", "run": 3}
    assert views["a1"].activities["think"]["status"] == "completed"
    child = kitchen["ship"]["child"]
    every = [*ids, child, views["c1"].id]
    for execution_id in every:
        for follow in (True, False):
            want = engine.query(execution_id, follow=follow).to_dict()
            assert query(reader, execution_id, follow=follow).to_dict() == want
            assert history(reader, execution_id, follow=follow) == engine.history(
                execution_id, follow=follow
            )
    assert history(reader, "k1", 3, 4) == engine.history("k1", 3, 4)
    for filters in ({}, {"status": "waiting"}, {"workflow": "kitchen"}, {"name": "SHIP"}):
        page = list_executions(reader, limit=3, **filters)  # type: ignore[arg-type]
        assert page == engine.list(limit=3, **filters)  # type: ignore[arg-type]
        assert page.items
    assert list_executions(reader, labels={"team": "ops"}) == engine.list(labels={"team": "ops"})
    # and through the CLI's backend, as `--json` prints them
    settings = load_settings(database_url=f"sqlite:///{db}", home=str(db.parent))
    with ExitStack() as opened:
        backend = LocalBackend(settings, opened)
        for execution_id in every:
            view = backend.execution(execution_id, follow=True)
            assert view == engine.query(execution_id).to_dict()
            events = backend.history(execution_id, 0, None, follow=True)
            assert events == [
                {"seq": e.seq, "type": e.type, "at": e.at.isoformat(), "data": e.data}
                for e in engine.history(execution_id)
            ]
        listed, _ = backend.list_executions(
            limit=50,
            cursor=None,
            workflow=None,
            status=None,
            created_after=None,
            created_before=None,
            labels={},
            id_prefix=None,
            name=None,
        )
        assert [r["id"] for r in listed] == [r.id for r in engine.list(limit=50).items]
        assert "engine" not in vars(backend)  # reads never opened the engine
    engine.close()


def test_the_outline_read_from_stored_json_is_the_models() -> None:
    for source in (KITCHEN, SAGA, CHAIN, AGENT, CHILD):
        workflow = load_definition(source)
        assert outline_from_source(canonical_json(workflow)) == outline_of(workflow)
    workflow = load_definition(KITCHEN)
    outline = outline_of(workflow)
    assert [a.max_attempts for a in outline.activities] == [1, 3, 3, 1, 3, 1]


def test_a_definition_stored_as_its_source_text_is_read_through_the_language(
    tmp_path: Path,
) -> None:
    """Older releases stored a definition's text: it is no JSON the outline reads, so the
    reader falls back on the language and answers the same."""
    store = SQLiteStore(tmp_path / "w.db")
    workflow = load_definition(SAGA)
    digest = content_hash(workflow)
    store.put_definition(DefinitionRecord(digest, "saga", "1", SAGA, T0, "default"))
    assert outline_from_source(SAGA) is None
    assert StoreReader(store, "default").outline(digest) == outline_of(workflow)
    assert outline_from_source('{"activities": [{"id": "a", "custom": {}}]}') is None
    store.close()
