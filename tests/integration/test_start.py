"""The one start path (`Engine.submit`, which `Engine.start` returns the record of) on every
store: what may be started (a model or text, a file, a registered name), the checks made
once (id, inputs, the name's existence, the tenant), and an id that already exists."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from wovyr.activities.policy import TRUSTED
from wovyr.clock import ManualClock
from wovyr.definition.model import Workflow
from wovyr.definition.parse import load_definition, load_definition_file
from wovyr.definition.pin import canonical_json, content_hash
from wovyr.engine.engine import Engine, Started
from wovyr.engine.tenants import set_policy
from wovyr.errors import DefinitionConflict, DefinitionError, InputError, NotFound
from wovyr.events import EventType
from wovyr.store.base import DefinitionRecord, Store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

FLOW = textwrap.dedent("""\
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: flow, version: "1"}
    inputs:
      n: {type: integer, required: true}
    activities:
      - id: double
        set: {value: "${{ inputs.n * 2 }}"}
    output: "${{ activities.double.output.value }}"
    """)


def events(engine: Engine, execution_id: str) -> list[tuple[str, object]]:
    return [(e.type, e.data) for e in engine.history(execution_id)]


def test_every_form_starts_the_same_pinned_definition(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(FLOW)
    model = load_definition(FLOW)
    engine.apply(FLOW)
    forms: dict[str, Started] = {
        "text": engine.submit(FLOW, {"n": 1}, execution_id="text"),
        "model": engine.submit(model, {"n": 1}, execution_id="model"),
        "path": engine.submit(path=path, input={"n": 1}, execution_id="path"),
        "name": engine.submit(name="flow", input={"n": 1}, execution_id="name"),
        "version": engine.submit(name="flow", version="1", input={"n": 1}, execution_id="version"),
    }
    assert all(s.created for s in forms.values())
    assert {s.record.definition_hash for s in forms.values()} == {content_hash(model)}
    # The same start whatever named the definition: identical events, only the id differs.
    assert len({str(events(engine, s.record.id)) for s in forms.values()}) == 1
    assert engine.start(FLOW, {"n": 2}).workflow == "flow"  # the record, as before


def test_a_string_is_always_a_document_never_a_name_or_a_file(engine: Engine) -> None:
    engine.apply(FLOW)
    for text in ("flow", str(EXAMPLES / "hello.yaml")):
        with pytest.raises(DefinitionError, match="must be a mapping"):
            engine.start(text, {"n": 1})
    assert engine.list().items == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"definition": FLOW, "name": "flow"},
        {"name": "flow", "path": Path("flow.yaml")},
        {"definition": FLOW, "version": "1"},
    ],
    ids=["none", "definition-and-name", "name-and-path", "version-without-name"],
)
def test_exactly_one_thing_is_started(engine: Engine, kwargs: dict[str, object]) -> None:
    engine.apply(FLOW)
    with pytest.raises(InputError) as caught:
        engine.submit(input={"n": 1}, **kwargs)  # type: ignore[arg-type]
    assert caught.value.problems[0].path in ("definition", "version")
    assert engine.list().items == []


def test_bad_ids_bad_inputs_and_unknown_names_are_refused_before_anything_is_stored(
    engine: Engine,
) -> None:
    claimed: list[str] = []

    def claim() -> str:
        claimed.append("x")
        return "claimed"

    with pytest.raises(InputError) as bad_id:
        engine.submit(FLOW, {"n": 1}, execution_id="bad id/..")
    assert bad_id.value.problems[0].path == "id"
    assert "execution ids are" in bad_id.value.problems[0].message
    for bad in ({}, {"n": "ten"}, {"n": 1, "m": 2}):
        with pytest.raises(InputError):
            engine.submit(FLOW, bad, claim_id=claim)
    with pytest.raises(NotFound, match="no workflow 'nope'"):
        engine.submit(name="nope", claim_id=claim)
    engine.apply(FLOW)
    with pytest.raises(NotFound, match="version '9'"):
        engine.submit(name="flow", version="9", input={"n": 1})
    assert claimed == []  # a claim (an Idempotency-Key) is never spent on an invalid start
    assert engine.list().items == []


def test_an_existing_id_returns_that_execution_unchanged(engine: Engine) -> None:
    first = engine.submit(FLOW, {"n": 1}, execution_id="order-1")
    before = events(engine, "order-1")
    # Other inputs, even ones the definition refuses, and another definition: the execution
    # that has the id answers, as it was started (what a resumed `wovyr run --id` relies on).
    for again in (
        engine.submit(FLOW, {"n": 99}, execution_id="order-1"),
        engine.submit(FLOW, {}, execution_id="order-1"),
        engine.submit(path=EXAMPLES / "hello.yaml", execution_id="order-1"),
    ):
        assert (again.created, again.record.id) == (False, "order-1")
        assert again.record.input == {"n": 1} == first.record.input
    assert events(engine, "order-1") == before
    claimed = engine.submit(FLOW, {"n": 5}, claim_id=lambda: "order-1")
    assert (claimed.created, claimed.record.id) == (False, "order-1")
    fresh = engine.submit(FLOW, {"n": 5}, claim_id=lambda: "order-2")
    assert (fresh.created, fresh.record.id, fresh.record.input) == (True, "order-2", {"n": 5})


def test_another_tenants_id_is_another_execution(engine: Engine) -> None:
    engine.for_tenant("a").start(FLOW, {"n": 7}, execution_id="shared")
    set_policy(engine.store, "b", TRUSTED, by="test", at=engine.clock.now())  # hello: shell
    b = engine.for_tenant("b")
    # Before b has it, reading it answers exactly what a missing id answers.
    with pytest.raises(NotFound) as theirs:
        b.query("shared")
    with pytest.raises(NotFound) as missing:
        b.query("absent")
    assert str(theirs.value) == str(missing.value).replace("absent", "shared")
    assert b.list().items == []
    first = b.submit(FLOW, {"n": 1}, execution_id="shared")
    assert first.created and first.record.tenant == "b" and first.record.input == {"n": 1}
    for attempt in (  # every form of start now finds b's own
        lambda: b.submit(FLOW, {"n": 2}, execution_id="shared"),
        lambda: b.submit(path=EXAMPLES / "hello.yaml", execution_id="shared"),
        lambda: b.submit(FLOW, {"n": 3}, claim_id=lambda: "shared"),
    ):
        again = attempt()
        assert not again.created and again.record.input == {"n": 1}
    assert engine.for_tenant("a").query("shared").input == {"n": 7}
    assert [r.id for r in b.list().items] == ["shared"]


def test_a_leased_start_carries_its_first_decision(engine: Engine) -> None:
    leased = engine.submit(FLOW, {"n": 3}, execution_id="leased", lease_owner="w1")
    plain = engine.submit(FLOW, {"n": 3}, execution_id="plain")
    assert (leased.record.lease_owner, plain.record.lease_owner) == ("w1", None)
    assert [t for t, _ in events(engine, "plain")] == [EventType.EXECUTION_STARTED]
    first, *decided = [t for t, _ in events(engine, "leased")]
    assert first == EventType.EXECUTION_STARTED and EventType.ACTIVITY_SCHEDULED in decided


# --- pinned definitions read back -----------------------------------------------------------


def test_a_stored_definition_loads_from_its_canonical_json(
    store: Store, clock: ManualClock
) -> None:
    """An engine with cold caches reads each pinned definition back from the store: the same
    model, hence the same content hash, for every example."""
    for path in sorted(EXAMPLES.glob("*.yaml")):
        workflow = load_definition_file(path)
        digest = Engine(store, clock=clock).register(workflow)
        cold = Engine(store, clock=clock)
        loaded = cold.definition(digest)
        assert loaded == workflow, path
        assert content_hash(loaded) == digest == content_hash(workflow)


def test_a_pinned_definition_is_not_revalidated(store: Store, clock: ManualClock) -> None:
    """A definition stored by an older release keeps loading when today's validator would
    refuse it (here: `needs` names no activity): the model is read from canonical JSON."""
    workflow = Workflow.model_validate(
        {
            "apiVersion": "wovyr/v1",
            "kind": "Workflow",
            "metadata": {"name": "old"},
            "activities": [{"id": "a", "needs": ["gone"], "set": {"x": 1}}],
        }
    )
    source = canonical_json(workflow)
    with pytest.raises(DefinitionError, match="gone"):
        load_definition(source)
    digest = content_hash(workflow)
    store.put_definition(DefinitionRecord(digest, "old", "1", source, clock.now(), "default"))
    assert Engine(store, clock=clock).definition(digest) == workflow


def test_a_stored_yaml_source_still_loads(store: Store, clock: ManualClock) -> None:
    """A row whose source is a YAML document rather than canonical JSON is read as one."""
    digest = content_hash(load_definition(FLOW))
    store.put_definition(DefinitionRecord(digest, "flow", "1", FLOW, clock.now(), "default"))
    assert Engine(store, clock=clock).definition(digest) == load_definition(FLOW)
    # one with a key new documents are refused since (`metadata.labels`) still loads
    labelled = FLOW.replace('version: "1"}', 'version: "1", labels: {team: ops}}')
    with pytest.raises(DefinitionError, match=r"metadata\.labels"):
        load_definition(labelled)
    store.put_definition(
        DefinitionRecord("sha256:old", "flow", "1", labelled, clock.now(), "default")
    )
    assert Engine(store, clock=clock).definition("sha256:old").metadata.labels == {"team": "ops"}


def test_revise_registers_an_edit_as_the_next_development_revision(
    store: Store, clock: ManualClock
) -> None:
    """What `wovyr dev` asks: the file, edited without a new `metadata.version`, is what
    runs by name, registered as `VERSION+dev.N`; the same content again registers nothing."""
    engine = Engine(store, clock=clock)
    assert engine.apply(FLOW, revise=True)[0] == "applied"
    edited = FLOW.replace("inputs.n * 2", "inputs.n * 3")
    with pytest.raises(DefinitionConflict, match="already applied with different content"):
        engine.apply(edited)
    clock.advance(1)
    outcome, first = engine.apply(edited, revise=True)
    assert outcome == "revised" and engine.definition(first).version == "1+dev.1"
    assert engine.apply(edited, revise=True) == ("unchanged", first)
    assert engine.named("flow")[1] == first
    clock.advance(1)
    outcome, back = engine.apply(FLOW, revise=True)  # back to the content of version 1
    assert outcome == "revised" and engine.definition(back).version == "1+dev.2"
    assert engine.named("flow")[1] == back and back != content_hash(load_definition(FLOW))
    assert engine.apply(FLOW, revise=True) == ("unchanged", back)
    assert engine.apply(FLOW) == ("unchanged", content_hash(load_definition(FLOW)))
    versions = [r.version for r in store.list_registered("default")]
    assert sorted(versions) == ["1", "1+dev.1", "1+dev.2"]
