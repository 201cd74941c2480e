"""An agent's memory tools: a tool entry `memory:NAMESPACE` offers the model four functions
over that namespace of the tenant's memory (`wovyr.activities.memory`):

- `remember(key, text, value?)`: store a note under a key (its text embedded for search);
- `recall(key)`: the note stored under a key;
- `search(query, top_k?)`: the notes whose text is nearest to the query, with scores;
- `forget(key)`: drop the note under a key.

Each is the ref `memory:NAMESPACE/<function>` (what a call is recorded as, and what
`require_approval` may name). A call's problems (arguments that do not fit, a provider
error) are the call's error, told to the model like any tool's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wovyr.activities.base import ActivityError
from wovyr.activities.memory import MAX_TOP_K, EmbeddingSpec
from wovyr.activities.tool_schema import call_arguments

if TYPE_CHECKING:
    from wovyr.activities.dispatch import Dispatch

__all__ = ["MEMORY_TOOL_PREFIX", "memory_call", "memory_functions"]

MEMORY_TOOL_PREFIX = "memory:"

_KEY = {"type": "string", "minLength": 1, "maxLength": 512, "description": "The note's key"}
_FUNCTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "remember": (
        "Store a note in memory namespace {ns} under a key (replacing the note there); "
        "its text can be found again by search.",
        {
            "type": "object",
            "properties": {
                "key": _KEY,
                "text": {"type": "string", "description": "The note, in words"},
                "value": {"description": "Optional structured data kept with the note"},
            },
            "required": ["key", "text"],
        },
    ),
    "recall": (
        "Read the note stored under a key in memory namespace {ns}.",
        {"type": "object", "properties": {"key": _KEY}, "required": ["key"]},
    ),
    "search": (
        "Find the notes in memory namespace {ns} whose text is nearest in meaning to a "
        "query; each result has a score (cosine similarity, higher is nearer).",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K},
            },
            "required": ["query"],
        },
    ),
    "forget": (
        "Delete the note stored under a key in memory namespace {ns}.",
        {"type": "object", "properties": {"key": _KEY}, "required": ["key"]},
    ),
}


def memory_functions(tools: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(ref, OpenAI function without its name) for every memory tool `tools` names, each
    namespace once, in order."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for entry in tools:
        if not entry.startswith(MEMORY_TOOL_PREFIX):
            continue
        namespace = entry.removeprefix(MEMORY_TOOL_PREFIX).split("/", 1)[0]
        if namespace in seen:
            continue
        seen.add(namespace)
        for op, (description, parameters) in _FUNCTIONS.items():
            function = {"description": description.format(ns=namespace), "parameters": parameters}
            out.append((f"{MEMORY_TOOL_PREFIX}{namespace}/{op}", function))
    return out


async def memory_call(
    ref: str,
    text: Any,
    dispatch: Dispatch,
    embedding: EmbeddingSpec | None,
    write_id: str,
) -> tuple[Any, Any, dict[str, Any] | None]:
    """(arguments, result, error) of one call of memory tool `ref`."""
    from wovyr.activities.builtin.memory import MemorySpec, run_memory_op

    arguments, refused = call_arguments(text)
    if refused is not None:
        return arguments, None, refused
    namespace, op = ref.removeprefix(MEMORY_TOOL_PREFIX).rsplit("/", 1)
    given: dict[str, Any] = {"namespace": namespace, "embedding": embedding}
    if op == "remember":
        given |= {"op": "put", "key": arguments.get("key"), "text": arguments.get("text")}
        given["value"] = arguments.get("value")
    elif op == "recall":
        given |= {"op": "get", "key": arguments.get("key")}
    elif op == "forget":
        given |= {"op": "delete", "key": arguments.get("key")}
    else:
        given |= {"op": "search", "text": arguments.get("query"), "top_k": arguments.get("top_k")}
    try:
        spec = MemorySpec.model_validate(given)
        result = await run_memory_op(spec, dispatch, write_id)
    except ValueError as exc:
        return arguments, None, {"type": "InvalidArguments", "message": str(exc)[:2000]}
    except ActivityError as exc:
        if exc.retryable:
            raise  # a provider's 429 or 5xx fails the attempt (retried), as a model call's
        return arguments, None, {"type": exc.type, "message": exc.message[:2000]}
    return arguments, result, None
