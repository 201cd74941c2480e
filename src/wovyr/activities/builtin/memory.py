"""The `memory` kind: one operation on one of the tenant's durable memory namespaces.

    - id: remember
      memory:
        op: put                         # put | get | delete | list | search
        namespace: customers
        key: "${{ inputs.customer }}"
        value: {plan: pro}              # any JSON value
        text: "${{ inputs.note }}"      # optional: embedded for `search`
        ttl: 30d                        # optional: the item expires then
    - id: recall
      memory: {op: search, namespace: customers, text: "who asked about refunds?", top_k: 3}

`put` writes the item at `key` (`value` and/or `text`; a `text` is embedded by the
`embedding` provider and model, default provider `default`, model
`text-embedding-3-small`). `get`, `delete` and `list` (`prefix`, `after`, `limit`) read or
drop items; `search` embeds `text` and answers the `top_k` items (default 5) whose text is
nearest by cosine, each with its `score` (only items embedded by the same model compete).

A write is done once per attempt: it carries the attempt's idempotency key, recorded by the
store in the write's transaction, so an attempt run again after its worker died (the same
attempt, the same key) writes nothing again and outputs what the first run wrote.

Outputs: put `{key, version, replaced}`; get `{found, key, value, text, version,
updated_at, expires_at}`; delete `{key, deleted}`; list `{items: [...], next}` (`next`:
the `after` of the next page, or null); search `{results: [{key, value, text, score,
...}]}`. Another tenant's namespace is simply empty.
"""

from __future__ import annotations

from typing import Any

from wovyr.activities.base import NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, register_kind
from wovyr.activities.memory import (
    MAX_KEY_CHARS,
    EmbeddingSpec,
    MemoryAccess,
    check_namespace,
    embed_texts,
)
from wovyr.kinds.steps import MEMORY, MemorySpec, MemoryStep

__all__ = ["KIND", "MemorySpec", "MemoryStep", "run_memory_op"]


async def _execute(step: MemoryStep, rendered: Any, dispatch: Dispatch) -> Any:
    try:
        spec = MemorySpec.model_validate(rendered)
    except ValueError as exc:
        raise NonRetryableError(f"invalid memory input: {exc}", type="InvalidInput") from None
    return await run_memory_op(spec, dispatch, dispatch.context.idempotency_key)


async def run_memory_op(spec: MemorySpec, dispatch: Dispatch, write_id: str) -> dict[str, Any]:
    """Do `spec` in the attempt's tenant (a write recorded under `write_id`)."""
    import asyncio

    memory = _access(dispatch)
    namespace = check_namespace(spec.namespace)
    if spec.key is not None and not 0 < len(spec.key) <= MAX_KEY_CHARS:
        raise NonRetryableError(
            f"a memory key has 1 to {MAX_KEY_CHARS} characters", type="InvalidInput"
        )
    backend, embedding = memory.backend, spec.embedding or EmbeddingSpec()
    if spec.op == "put":
        assert spec.key is not None  # checked by the model
        vector = None
        if spec.text:
            [vector] = await embed_texts(
                dispatch.models,
                embedding,
                [spec.text],
                timeout=dispatch.timeout,
                policy=dispatch.policy,
            )
        done = await asyncio.to_thread(
            backend.put,
            namespace,
            spec.key,
            spec.value,
            spec.text,
            vector,
            embedding.model if vector is not None else None,
            spec.ttl,
            write_id,
        )
        return {k: done[k] for k in ("key", "version", "replaced")}
    if spec.op == "get":
        assert spec.key is not None
        item = await asyncio.to_thread(backend.get, namespace, spec.key)
        if item is None:
            return {"found": False, "key": spec.key, "value": None}
        return {"found": True, **item}
    if spec.op == "delete":
        assert spec.key is not None
        done = await asyncio.to_thread(backend.delete, namespace, spec.key, write_id)
        return {"key": done["key"], "deleted": done["deleted"]}
    if spec.op == "list":
        limit = spec.limit or 100
        items = await asyncio.to_thread(
            backend.list_items, namespace, spec.prefix or "", spec.after or "", limit
        )
        return {"items": items, "next": items[-1]["key"] if len(items) == limit else None}
    assert spec.text is not None  # search
    [vector] = await embed_texts(
        dispatch.models, embedding, [spec.text], timeout=dispatch.timeout, policy=dispatch.policy
    )
    results = await asyncio.to_thread(
        backend.search, namespace, vector, embedding.model, spec.top_k or 5
    )
    return {"results": results}


def _access(dispatch: Dispatch) -> MemoryAccess:
    if dispatch.memory is None:
        raise NonRetryableError("this worker has no memory store", type="MemoryUnavailable")
    return dispatch.memory


KIND = register_kind(
    ActivityKind.of(
        MEMORY,
        execute=_execute,
        side_effects=True,  # a text is embedded by a provider, checked like `http`'s target
        needs=frozenset({"models", "memory_namespaces"}),
    )
)
