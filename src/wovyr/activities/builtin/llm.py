"""The `llm` kind: one model answer from an OpenAI-compatible provider.

    - id: summarize
      llm:
        provider: default            # the provider's name (default: `default`)
        model: gpt-4o-mini           # default: the provider's default model
        system: You are terse.
        prompt: "Summarize: ${{ inputs.text }}"     # or messages: [{role, content}, ...]
        temperature: 0.2
        max_tokens: 300
        response_schema: {type: object, required: [title], properties: {title: {type: string}}}
        cache: true
        options: {seed: 7, top_p: 0.9}   # provider parameters, sent as they are

A message's `content` may be a list of parts (`wovyr.kinds.steps.ContentPart`: text, an
image by http(s) or `data:` URL, a PDF by `data:` URL, either by a stored artifact's digest),
mapped to each provider family's parts by `wovyr.activities.providers`, which checks an
image URL against the tenant's egress policy before the call. An artifact is read from the
tenant's store at call time (`with_artifacts`) and sent as inline data: the history keeps
only its digest.

Output: `{text, json, usage: {input_tokens, output_tokens}, cost, model, finish_reason}`
(`json` is the parsed answer when `response_schema` is given, else null; `cost` is null
unless the provider has prices). With `response_schema`, an answer that is not JSON or does
not validate is sent back to the model with the validation error, at most `schema_retries`
times (default 2) within the attempt; every rejected answer is kept in the output's
`schema_failures` (or in the failure's details, `SchemaValidationFailed`, not retried).

With `cache: true` an identical request (provider, model, messages, parameters, schema)
is answered from the tenant's response cache: the output then says `cached: true`, so the
hit is in the history. Only validated answers are cached.

With `stream: true` the answer is received as streamed chunks, and its text is journaled
as it arrives (in batches, beside the events): `GET /api/v1/workflows/{id}/stream` and
`wovyr workflows watch` show it live, and a retried answer opens with an attempt marker.

The call goes through `wovyr.activities.providers`: the engine's retry policy governs it
(429 and 5xx retried, a `Retry-After` honoured), the API key never leaves the request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime
from typing import Any

from wovyr.activities.base import NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, StreamSink, Usage, register_kind
from wovyr.activities.policy import SideEffectPolicy
from wovyr.activities.providers import (
    ChatResult,
    ModelAccess,
    chat,
    with_artifacts,
    with_options,
)
from wovyr.kinds.steps import LLM, LlmSpec, LlmStep, Message, check_json_schema

__all__ = [
    "KIND",
    "LlmSpec",
    "LlmStep",
    "Message",
    "check_json_schema",
    "model_for",
    "parse_json_answer",
    "schema_errors",
]


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """What is wrong with `value` under `schema` (at most 5 messages, each located)."""
    from jsonschema import Draft202012Validator

    found = []
    for error in Draft202012Validator(schema).iter_errors(value):
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        found.append(f"{where}: {error.message}"[:300])
        if len(found) == 5:
            break
    return found


def parse_json_answer(text: str | None) -> Any:
    """The JSON in a model's answer (a ```json fence around it is allowed); ValueError."""
    body = (text or "").strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return json.loads(body)


def model_for(access: ModelAccess, provider: str, model: str | None) -> str:
    if model:
        return model
    default = access.providers.get(provider).default_model
    if not default:
        raise NonRetryableError(
            f"no model given and provider {provider!r} has no default model "
            "(set `model:`, the provider's --default-model, or WOVYR_LLM_MODEL for `default`)",
            type="ModelNotGiven",
        )
    return default


def _messages(spec: LlmSpec) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if spec.system:
        out.append({"role": "system", "content": spec.system})
    if spec.prompt is not None:
        out.append({"role": "user", "content": spec.prompt})
    elif isinstance(spec.messages, list):
        out += [m.model_dump(mode="json", exclude_none=True) for m in spec.messages]
    else:
        raise NonRetryableError(
            "`messages` must render to a list of {role, content} messages", type="InvalidInput"
        )
    return out


def _body(spec: LlmSpec, model: str, messages: list[dict[str, Any]], family: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages}
    if spec.temperature is not None:
        body["temperature"] = spec.temperature
    if spec.max_tokens is not None:
        body["max_tokens"] = spec.max_tokens
    if spec.response_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": spec.response_schema},
        }
    if spec.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return with_options(body, spec.options, family)


def cache_key(provider: str, body: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"provider": provider, "request": body}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _access(dispatch: Dispatch) -> ModelAccess:
    if dispatch.models is None:
        raise NonRetryableError("this worker has no model providers", type="UnknownProvider")
    return dispatch.models


async def call_model(
    access: ModelAccess,
    provider_name: str,
    body: dict[str, Any],
    *,
    timeout: float | None,
    policy: SideEffectPolicy,
    stream: StreamSink | None = None,
    turn: int = 1,
    journaled: bool = False,
) -> ChatResult:
    """One model call through the gateway, with the provider's key from the resolver; none
    when the tenant's daily model quota is used up (`QuotaExceeded`, not retried). A
    streamed call (`body["stream"]`) journals its text as generation `turn` of the attempt
    in `stream`, when given (every piece journaled before this returns or raises).

    The result carries the call's latency; the call (its usage, cost and latency, or the
    error it ended with) joins the attempt's `access.calls`, unless it answered and the
    caller journals it in an event of its own (`journaled`: an `agent`'s
    `ModelCallCompleted`)."""
    import asyncio  # by the first run, not by importing the kind (a read loads every kind)

    provider = access.providers.get(provider_name)
    if access.quota is not None:
        reason = await asyncio.to_thread(access.quota)
        if reason is not None:
            raise NonRetryableError(reason, type="QuotaExceeded")
    key = await asyncio.to_thread(access.api_key, provider_name)
    body = await asyncio.to_thread(with_artifacts, body, access.artifacts)
    began = access.now()
    try:
        if stream is None or not body.get("stream"):
            result = await chat(provider, key, body, timeout=timeout, policy=policy)
        else:
            generation = stream.generation(turn)
            try:
                result = await chat(
                    provider, key, body, timeout=timeout, policy=policy, on_text=generation.text
                )
            finally:
                await generation.close()
    except Exception as exc:  # (kept even for an agent: no event journals a failed call)
        access.calls.append(_failed_call(provider.name, body, exc, _since(access, began)))
        raise
    result = dataclasses.replace(result, latency=_since(access, began))
    if not journaled:
        access.calls.append(result.record(provider))
    return result


def _since(access: ModelAccess, began: datetime) -> float:
    """Seconds from `began` to now, by the attempt's clock."""
    return max(0.0, (access.now() - began).total_seconds())


def _failed_call(
    provider: str, body: dict[str, Any], exc: Exception, seconds: float
) -> dict[str, Any]:
    """A call that ended in an error, as `ModelAccess.calls` keeps it (no usage known)."""
    named = body.get("model")
    return {
        "provider": provider,
        "model": named if isinstance(named, str) else "",
        "input_tokens": 0,
        "output_tokens": 0,
        "cost": None,
        "latency": round(seconds, 6),
        "error": str(getattr(exc, "type", None) or type(exc).__name__),
    }


async def _execute(step: LlmStep, rendered: Any, dispatch: Dispatch) -> Any:
    import asyncio  # by the first run, not by importing the kind (a read loads every kind)

    try:
        spec = LlmSpec.model_validate(rendered)
    except ValueError as exc:
        raise NonRetryableError(f"invalid llm input: {exc}", type="InvalidInput") from None
    access = _access(dispatch)
    model = model_for(access, spec.provider, spec.model)
    messages = _messages(spec)
    provider = access.providers.get(spec.provider)
    body = _body(spec, model, messages, provider.kind)
    key = cache_key(spec.provider, body) if spec.cache else None
    cache = access.cache
    if key is not None and cache is not None:
        hit = await asyncio.to_thread(cache.get, key)
        if hit is not None:
            return {**hit, "cached": True}
    usage = {"input_tokens": 0, "output_tokens": 0}
    failures: list[dict[str, Any]] = []
    while True:
        result = await call_model(
            access,
            spec.provider,
            body,
            timeout=dispatch.timeout,
            policy=dispatch.policy,
            stream=dispatch.stream,
            turn=len(failures) + 1,
        )
        usage["input_tokens"] += result.input_tokens
        usage["output_tokens"] += result.output_tokens
        text = result.message.get("content")
        parsed, problem = _validated(text, spec.response_schema)
        if problem is None:
            break
        failures.append({"text": text, "error": problem})
        if len(failures) > spec.schema_retries:
            raise NonRetryableError(
                f"the model's answer did not match response_schema after {len(failures)} "
                f"tries: {problem}",
                type="SchemaValidationFailed",
                details={
                    "failures": failures,
                    "usage": usage,
                    "cost": provider.cost(
                        usage["input_tokens"], usage["output_tokens"], result.model
                    ),
                },
            )
        body = {
            **body,
            "messages": [
                *body["messages"],
                {"role": "assistant", "content": text or ""},
                {
                    "role": "user",
                    "content": "Your answer does not match the required JSON schema: "
                    f"{problem}. Answer again with only the corrected JSON.",
                },
            ],
        }
    output: dict[str, Any] = {
        "text": text,
        "json": parsed,
        "usage": usage,
        "cost": provider.cost(usage["input_tokens"], usage["output_tokens"], result.model),
        "model": result.model,
        "finish_reason": result.finish_reason,
    }
    if failures:
        output["schema_failures"] = failures
    if key is not None and cache is not None:
        await asyncio.to_thread(cache.put, key, output)
        output["cached"] = False
    return output


def _validated(text: str | None, schema: dict[str, Any] | None) -> tuple[Any, str | None]:
    """(the parsed answer, None) or (None, what is wrong); (None, None) without a schema."""
    if schema is None:
        return None, None
    try:
        value = parse_json_answer(text)
    except ValueError as exc:
        return None, f"the answer is not JSON ({exc})"
    errors = schema_errors(value, schema)
    if errors:
        return None, "; ".join(errors)
    return value, None


def _usage(output: Any) -> Usage:
    """The tokens and cost of the answer in `output` (none for one from the cache)."""
    if not isinstance(output, dict) or output.get("cached"):
        return Usage()
    usage, cost = output.get("usage") or {}, output.get("cost")
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    return Usage(tokens=tokens, cost=float(cost or 0.0))


KIND = register_kind(
    ActivityKind.of(
        LLM,
        execute=_execute,
        side_effects=True,  # the provider's address is checked at dispatch, like `http`'s
        needs=frozenset({"models", "stream"}),
        usage=_usage,
    )
)
