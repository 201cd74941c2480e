"""The `memory` kind and an agent's memory tools end to end on SQLite, against the scripted
model server's embeddings endpoint: put/get/list/search/delete in a workflow, ttl under a
ManualClock, tenant isolation, exactly one effect when an attempt (or a tool call) is run
again after a crash between its write and its commit, and search quality on a labelled set.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.activities.builtin import memory as memory_kind
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.memory import EmbeddingSpec, MemoryAccess
from wovyr.activities.memory_tools import memory_call
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ModelAccess, ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.definition import load_definition
from wovyr.engine.engine import Engine
from wovyr.engine.memory import TenantMemory
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
KEY = "sk-canary-memory-5e1f"


def _engine(db: Path, llm: ScriptedLLM, tenant: str = "default", **kw: Any) -> Engine:
    provider = ProviderConfig("default", llm.base_url, default_model="m1", api_key=KEY)
    return Engine(
        SQLiteStore(db),
        clock=kw.pop("clock", None) or ManualClock(T0),
        activities=kw.pop("activities", None) or ActivityRegistry(),
        providers=Providers({"default": provider}),
        tenant=tenant,
        **kw,
    )


WRITE_AND_READ = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: notes}
inputs:
  who: {type: string, required: true}
activities:
  - id: put_a
    memory:
      op: put
      namespace: customers
      key: "${{ inputs.who }}"
      value: {plan: pro, seats: 3}
      text: "${{ inputs.who + ' asked for a refund of the annual invoice' }}"
  - id: put_b
    memory:
      op: put
      namespace: customers
      key: bob
      text: bob loves the new dashboard charts
      ttl: 1h
      embedding: {provider: default, model: emb-1}
  - id: put_c
    needs: [put_a]
    memory: {op: put, namespace: customers, key: carol, value: 7, text: carol moved offices}
  - id: get_a
    needs: [put_a]
    memory: {op: get, namespace: customers, key: "${{ inputs.who }}"}
  - id: missing
    memory: {op: get, namespace: customers, key: nobody}
  - id: listed
    needs: [put_a, put_b, put_c]
    memory: {op: list, namespace: customers, limit: 2}
  - id: found
    needs: [put_a, put_b, put_c]
    memory: {op: search, namespace: customers, text: "who wants a refund?", top_k: 2}
  - id: forget
    needs: [found, listed]
    memory: {op: delete, namespace: customers, key: carol}
output:
  got: "${{ activities.get_a.output }}"
  missing: "${{ activities.missing.output }}"
  listed: "${{ activities.listed.output }}"
  found: "${{ activities.found.output }}"
  forget: "${{ activities.forget.output }}"
  put: "${{ activities.put_a.output }}"
"""


def test_a_workflow_writes_reads_lists_searches_and_deletes(tmp_path: Path) -> None:
    with ScriptedLLM([]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(WRITE_AND_READ, execution_id="e1", input={"who": "alice"})
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities
        out = view.output
        assert out["put"] == {"key": "alice", "version": 1, "replaced": False}
        got = out["got"]
        assert got["found"] and got["value"] == {"plan": "pro", "seats": 3}
        assert got["text"] == "alice asked for a refund of the annual invoice"
        assert got["version"] == 1 and got["expires_at"] is None
        assert out["missing"] == {"found": False, "key": "nobody", "value": None}
        assert [i["key"] for i in out["listed"]["items"]] == ["alice", "bob"]
        assert out["listed"]["next"] == "bob"
        hits = out["found"]["results"]  # bob's text was embedded by another model
        assert [h["key"] for h in hits] == ["alice", "carol"]
        assert 0.3 < hits[0]["score"] <= 1.0 and hits[1]["score"] < hits[0]["score"]
        assert out["forget"] == {"key": "carol", "deleted": True}
        # the texts were embedded by the provider's embeddings endpoint, with its key
        models = [r.body["model"] for r in llm.embeddings]
        assert sorted(models) == ["emb-1"] + ["text-embedding-3-small"] * 3
        assert {r.authorization for r in llm.embeddings} == {f"Bearer {KEY}"}
        # what stays is durable: another engine on the file reads it
        again = _engine(tmp_path / "w.db", llm)
        memory = TenantMemory(again.store, "default", again.clock)
        assert [i["key"] for i in memory.list_items("customers", "", "", 10)] == ["alice", "bob"]
        bob = memory.get("customers", "bob")
        assert bob is not None and bob["expires_at"] == "2030-01-01T10:00:00+00:00"


def test_ttl_expires_items_on_the_engine_clock(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    doc = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ttl}
activities:
  - id: put
    memory: {op: put, namespace: n, key: k, value: 1, ttl: 10m}
"""
    read = doc.replace(
        "{op: put, namespace: n, key: k, value: 1, ttl: 10m}", "{op: get, namespace: n, key: k}"
    )
    with ScriptedLLM([]) as llm:
        engine = _engine(tmp_path / "w.db", llm, clock=clock)
        engine.start(doc, execution_id="w")
        drain(engine)
        clock.advance(599)
        engine.start(read, execution_id="r1")
        drain(engine)
        assert engine.query("r1").activities["put"]["output"]["found"] is True
        clock.advance(1)
        engine.start(read, execution_id="r2")
        drain(engine)
        assert engine.query("r2").activities["put"]["output"]["found"] is False


def test_another_tenants_namespace_is_empty(tmp_path: Path) -> None:
    with ScriptedLLM([]) as llm:
        # (the engine's own policy: tenants other than `default` may not reach loopback)
        mine = _engine(tmp_path / "w.db", llm, tenant="acme", side_effects=TRUSTED)
        mine.start(WRITE_AND_READ, execution_id="e1", input={"who": "alice"})
        drain(mine)
        assert mine.query("e1").status == "completed"
        theirs = _engine(tmp_path / "w.db", llm, tenant="globex", side_effects=TRUSTED)
        read = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: peek}
activities:
  - id: get
    memory: {op: get, namespace: customers, key: alice}
  - id: list
    memory: {op: list, namespace: customers}
  - id: search
    memory: {op: search, namespace: customers, text: refund}
  - id: delete
    memory: {op: delete, namespace: customers, key: alice}
"""
        theirs.start(read, execution_id="p1")
        drain(theirs)
        acts = theirs.query("p1").activities
        assert acts["get"]["output"] == {"found": False, "key": "alice", "value": None}
        assert acts["list"]["output"] == {"items": [], "next": None}
        assert acts["search"]["output"] == {"results": []}, acts["search"]["error"]
        assert acts["delete"]["output"] == {"key": "alice", "deleted": False}
        assert TenantMemory(mine.store, "acme", mine.clock).get("customers", "alice") is not None


def _dispatch(engine: Engine, ctx: ActivityContext) -> Dispatch:
    """A dispatch as the worker builds one (the tenant's providers, keys and memory)."""

    async def no_child() -> str:
        raise AssertionError("no child")

    models = ModelAccess(engine.tenant, engine.providers, engine.credentials)
    memory = MemoryAccess(engine.tenant, TenantMemory(engine.store, engine.tenant, engine.clock))
    return Dispatch(ctx, 30.0, engine.activities, no_child, models=models, memory=memory)


def _ctx(execution: str, activity: str, key: str) -> ActivityContext:
    return ActivityContext(
        execution_id=execution, activity_id=activity, attempt=1, workflow="w", idempotency_key=key
    )


ONE_PUT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: once}
activities:
  - id: remember
    memory: {op: put, namespace: audit, key: k, value: {n: 1}, text: a note}
"""


def test_a_write_run_again_after_a_crash_before_its_commit_is_one_write(tmp_path: Path) -> None:
    """The lost run wrote (with the attempt's key) and never committed its step; the worker
    that runs the attempt again (same attempt, same key) writes nothing: the item's version
    and the namespace's stay 1, and the activity's output is what the first write did."""
    with ScriptedLLM([]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(ONE_PUT, execution_id="e1")
        step = load_definition(ONE_PUT).activity("remember").step
        rendered = memory_kind.KIND.spec(step)
        lost = _dispatch(engine, _ctx("e1", "remember", "e1/remember/1"))
        first = asyncio.run(memory_kind.KIND.execute(step, rendered, lost))  # type: ignore[misc]
        assert first == {"key": "k", "version": 1, "replaced": False}
        assert engine.store.memory_version("default", "audit") == 1
        drain(engine)  # the worker runs attempt 1 (its key: e1/remember/1)
        view = engine.query("e1")
        assert view.status == "completed"
        assert view.activities["remember"]["output"] == first
        assert engine.store.memory_version("default", "audit") == 1  # one write, not two
        [item] = engine.store.get_memory("default", "audit", ["k"], engine.clock.now())
        assert item.version == 1
        # whereas another attempt (another key) is another write
        other = _dispatch(engine, _ctx("e1", "remember", "e1/remember/2"))
        again = asyncio.run(memory_kind.KIND.execute(step, rendered, other))  # type: ignore[misc]
        assert again == {"key": "k", "version": 2, "replaced": True}


AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper}
activities:
  - id: think
    agent:
      model: m1
      input: Remember that Dana prefers email, then tell me what you know about Dana.
      tools: ["memory:contacts"]
      embedding: {model: emb-2}
output: "${{ activities.think.output }}"
"""


def test_an_agent_uses_memory_tools(tmp_path: Path) -> None:
    replies = [
        tool_calls(
            (
                "memory_contacts_remember",
                {"key": "dana", "text": "Dana prefers email", "value": {"channel": "email"}},
            ),
        ),
        tool_calls(
            ("memory_contacts_search", {"query": "how does dana like to be contacted", "top_k": 1})
        ),
        tool_calls(
            ("memory_contacts_recall", {"key": "dana"}),
            ("memory_contacts_forget", {"key": "nobody"}),
        ),
        text("Dana prefers email."),
    ]
    with ScriptedLLM(replies, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(AGENT, execution_id="a1")
        drain(engine)
        view = engine.query("a1")
        assert view.status == "completed", view.activities["think"]
        out = view.output
        assert out["text"] == "Dana prefers email."
        calls = {c["tool"]: c for c in out["tool_calls"]}
        assert calls["memory:contacts/remember"]["result"] == {
            "key": "dana",
            "version": 1,
            "replaced": False,
        }
        [hit] = calls["memory:contacts/search"]["result"]["results"]
        assert hit["key"] == "dana" and hit["value"] == {"channel": "email"} and hit["score"] > 0
        assert calls["memory:contacts/recall"]["result"]["text"] == "Dana prefers email"
        assert calls["memory:contacts/forget"]["result"] == {"key": "nobody", "deleted": False}
        offered = {t["function"]["name"] for t in llm.completions[0].body["tools"]}
        assert offered == {
            "memory_contacts_remember",
            "memory_contacts_recall",
            "memory_contacts_search",
            "memory_contacts_forget",
        }
        assert {r.body["model"] for r in llm.embeddings} == {"emb-2"}
        # what the agent remembered stays, for the next run
        memory = TenantMemory(engine.store, "default", engine.clock)
        stored = memory.get("contacts", "dana")
        assert stored is not None and stored["value"] == {"channel": "email"}


def test_a_memory_tool_call_made_again_after_a_crash_writes_once(tmp_path: Path) -> None:
    """The lost run made the remember call (its write recorded under the call's key) and
    died before `ToolCallCompleted` was committed; the agent's next run makes the call
    again: the same key, no second write."""
    replies = [
        tool_calls(("memory_contacts_remember", {"key": "dana", "text": "Dana prefers email"})),
        text("ok"),
    ]
    with ScriptedLLM(replies, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(AGENT, execution_id="a1")
        lost = _dispatch(engine, _ctx("a1", "think", "a1/think/1"))
        arguments = json.dumps({"key": "dana", "text": "Dana prefers email"})
        _, result, error = asyncio.run(
            memory_call(
                "memory:contacts/remember",
                arguments,
                lost,
                EmbeddingSpec(model="emb-2"),
                "a1/think/t1/call_0",
            )
        )
        assert error is None and result == {"key": "dana", "version": 1, "replaced": False}
        drain(engine)
        view = engine.query("a1")
        assert view.status == "completed", view.activities["think"]
        [call] = view.output["tool_calls"]
        assert call["result"] == result
        assert engine.store.memory_version("default", "contacts") == 1


# A labelled set: 20 notes, and 20 questions each meant to find one of them.
DOCS = {
    "refund": "Customer Alice requested a refund for the annual invoice overcharge",
    "password": "Reset the admin password through the security settings page",
    "shipping": "Parcels ship from the Rotterdam warehouse within two business days",
    "outage": "The database outage on Friday was caused by a full disk",
    "pricing": "The pro plan costs forty dollars per seat each month",
    "vacation": "Bob is on vacation in Portugal until the end of August",
    "allergy": "Carol is allergic to peanuts; order lunch without nuts",
    "deploy": "Deployments to production happen every Tuesday after the standup",
    "contract": "The Globex contract renews automatically in March unless cancelled",
    "office": "The Berlin office moved to a new building near the river",
    "printer": "The third floor printer jams when printing double sided pages",
    "backup": "Nightly backups are encrypted and kept for ninety days",
    "hiring": "We are hiring two backend engineers who know PostgreSQL",
    "birthday": "Dana's birthday is on the twelfth of June; she likes chocolate cake",
    "laptop": "New laptops are ordered through the IT helpdesk portal",
    "parking": "Visitors can park in the underground garage using code 4411",
    "newsletter": "The monthly newsletter goes out on the first Monday",
    "latency": "API latency rose after the cache cluster was resized",
    "language": "Support answers tickets in English, German and Spanish",
    "budget": "The marketing budget for next quarter was cut by ten percent",
}
QUERIES = {
    "refund": "who asked for money back on an invoice?",
    "password": "how do I reset a password?",
    "shipping": "where do parcels ship from?",
    "outage": "what caused the database outage?",
    "pricing": "how much does a seat on the pro plan cost?",
    "vacation": "when is Bob back from vacation?",
    "allergy": "what food allergies should lunch orders avoid?",
    "deploy": "which day are production deployments?",
    "contract": "when does the Globex contract renew?",
    "office": "where is the new Berlin office building?",
    "printer": "why does the printer jam?",
    "backup": "how long are backups kept?",
    "hiring": "which engineers are we hiring?",
    "birthday": "what cake does Dana like for her birthday?",
    "laptop": "how do I order a new laptop?",
    "parking": "where can visitors park?",
    "newsletter": "when does the newsletter go out?",
    "latency": "why did API latency rise?",
    "language": "which languages does support answer in?",
    "budget": "what happened to the marketing budget?",
}


def test_search_finds_the_right_note_in_the_top_three(tmp_path: Path) -> None:
    with ScriptedLLM([]) as llm:
        engine = _engine(tmp_path / "w.db", llm)

        async def run() -> dict[str, list[str]]:
            for key, note in DOCS.items():
                put = {"op": "put", "namespace": "kb", "key": key, "text": note}
                d = _dispatch(engine, _ctx("q", "put", f"q/put/{key}"))
                await memory_kind.run_memory_op(
                    memory_kind.MemorySpec.model_validate(put), d, f"q/{key}"
                )
            found = {}
            for key, query in QUERIES.items():
                spec = memory_kind.MemorySpec.model_validate(
                    {"op": "search", "namespace": "kb", "text": query, "top_k": 3}
                )
                d = _dispatch(engine, _ctx("q", "search", f"q/search/{key}"))
                out = await memory_kind.run_memory_op(spec, d, f"q/s/{key}")
                found[key] = [r["key"] for r in out["results"]]
            return found

        found = asyncio.run(run())
        hits = [key for key, top in found.items() if key in top]
        assert len(hits) / len(QUERIES) >= 0.9, {k: v for k, v in found.items() if k not in v}
        # scores are ordered, best first
        assert len(found["refund"]) == 3


def test_an_invalid_spec_is_a_located_definition_error() -> None:
    from wovyr.errors import DefinitionError

    bad = ONE_PUT.replace(
        "{op: put, namespace: audit, key: k, value: {n: 1}, text: a note}",
        "{op: put, namespace: audit}",
    )
    with pytest.raises(DefinitionError) as err:
        load_definition(bad)
    assert "needs key" in str(err.value)


def test_a_sealing_tenants_memory_is_sealed_at_rest(tmp_path: Path) -> None:
    """Values and texts of a tenant that seals its payloads are stored sealed (a rendered
    text is in none of the database's files), and read, listed and searched as written."""
    from wovyr.engine.tenants import set_sealing
    from wovyr.platform.kms import Kms, RootKey
    from wovyr.platform.payloads import sealed_store
    from wovyr.platform.secrets import Secrets

    db = tmp_path / "sealed.db"
    inner = SQLiteStore(db)
    store = sealed_store(inner, Secrets(inner, Kms(RootKey(b"\x22" * 32), "production")))
    set_sealing(store, "default", True, by="test", at=T0)
    with ScriptedLLM([]) as llm:
        engine = Engine(
            store,
            clock=ManualClock(T0),
            activities=ActivityRegistry(),
            providers=Providers({"default": ProviderConfig("default", llm.base_url, api_key=KEY)}),
        )
        engine.start(WRITE_AND_READ, execution_id="e1", input={"who": "alice"})
        drain(engine)
        out = engine.query("e1").output
    assert out["got"]["value"] == {"plan": "pro", "seats": 3}
    assert out["got"]["text"] == "alice asked for a refund of the annual invoice"
    hit = out["found"]["results"][0]  # the nearest to "who wants a refund?"
    assert hit["key"] == "alice" and hit["text"].endswith("annual invoice")
    rows = inner._read("SELECT value, text FROM memory_items WHERE tenant = ?", ("default",))
    assert rows and all(r[0] == "null" or "$sealed" in r[0] for r in rows)  # bob: no value
    assert all(r[1] is None or "refund" not in r[1] for r in rows)
    engine.close()
    for path in tmp_path.glob("sealed.db*"):
        data = path.read_bytes()
        assert b"alice asked for a refund" not in data, path  # rendered: not in the definition
