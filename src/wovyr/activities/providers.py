"""The model-provider gateway: OpenAI-compatible chat completions (and the Anthropic
Messages API, `kind: anthropic`, mapped in `wovyr.activities.anthropic`, and OpenAI's
Responses API, `kind: openai-responses`, mapped in `wovyr.activities.openai_responses`)
over httpx.

One call is one HTTP exchange and nothing more: no retry of its own. The engine's retry
policy governs every model call (a failed call fails the attempt, whose retry is a durable
timer), so a failure is mapped here to an `ActivityError` whose `type` says what happened:

- `ProviderRateLimited` (429), `ProviderOverloaded` (529, Anthropic's `overloaded_error`)
  and `ProviderUnavailable` (other 5xx, connection refused or reset): retryable; a
  `Retry-After` header (seconds or an HTTP date; for a 429 without one, OpenAI's
  `x-ratelimit-reset-*`) becomes the attempt's `retry_after`, the delay of the next
  attempt's timer.
- `ProviderQuotaExhausted` (429 `insufficient_quota`: no credit left, which waiting does
  not cure), `ProviderAuthFailed` (401, 403), `ModelNotFound` (404),
  `ContextLengthExceeded` (a 4xx saying the conversation is too long for the model),
  `ContentFiltered` (a 4xx `content_filter`, Azure OpenAI's refusal of a prompt),
  `ProviderBadRequest` (other 4xx): not retryable. A filtered *answer* is not an error: it
  is a result whose `finish_reason` is `content_filter`.
- `ProviderMalformedResponse` (a 200 whose body is not a chat completion): retryable.
- A response that fails after a 200 (an `error` event in a stream, a Responses API
  response whose `status` is `failed`) is mapped as the HTTP status its error stands for:
  Anthropic's `overloaded_error` as a 529, any other as a 5xx; a Responses error by its
  `code` (`rate_limit_exceeded` as a 429, `server_error` as a 500, `invalid_prompt`,
  `invalid_image`, ... and `context_length_exceeded` as a 400).
- `Timeout`: retryable.

The request: a kind builds a chat-completions body; `provider_body` adds the provider's
`options` (under the step's) and sends the answer's token limit as `max_completion_tokens`
where the provider wants it (`ProviderConfig.token_limit_key`); `anthropic` maps it to a
Messages request, `openai-responses` to a Responses request.

A provider's key comes from its `ProviderConfig` alone, the one record an attempt read:
either the key the host configured with that very endpoint (`ProviderConfig.api_key`, e.g.
`WOVYR_LLM_API_KEY` of `default`: bound to that base URL, sent nowhere else), or the tenant's
secret a stored provider names (`api_key_secret`, opened through the one seam
`CredentialResolver`, `wovyr.platform.providers.SecretCredentials`). `ModelAccess` resolves
it once per attempt. The key is sent only in the `Authorization` header (`x-api-key` for
Anthropic), and is scrubbed from every message this module builds: errors end up in the
durable event log.

The request is sent through `wovyr.activities.outbound.send_checked`, so the tenant's
`SideEffectPolicy` applies to a provider like to any `http` target (a loopback provider is
reachable where the policy allows private networks, or lists the host).

With tracing on, each call inside an attempt is a span, a child of the attempt's
(`model.chat <provider>`, `model.embeddings <provider>`): the provider, its protocol, the
model asked and the one that answered, the tokens; never the key, the prompt or the texts.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from wovyr.activities import egress
from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.outbound import send_checked, tls_context
from wovyr.activities.policy import TRUSTED, SideEffectPolicy
from wovyr.kinds.options import option_problems
from wovyr.kinds.steps import DEFAULT_EMBEDDING_MODEL, DEFAULT_PROVIDER
from wovyr.traces import Attribute, call_span

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "DEFAULT_PROVIDER",
    "MAX_RESPONSE_BYTES",
    "PROVIDER_KINDS",
    "TOKEN_LIMITS",
    "ArtifactReader",
    "BoundCredentials",
    "ChatResult",
    "CredentialResolver",
    "Embeddings",
    "ModelAccess",
    "ProviderConfig",
    "Providers",
    "ResponseCache",
    "chat",
    "chat_request",
    "embed",
    "price_problems",
    "provider_body",
    "with_artifacts",
    "with_options",
]

MAX_EMBEDDING_INPUTS = 256  # texts in one embeddings request
ProviderKind = Literal["openai", "anthropic", "openai-responses"]
PROVIDER_KINDS: tuple[ProviderKind, ...] = ("openai", "anthropic", "openai-responses")
TokenLimit = Literal["max_tokens", "max_completion_tokens"]
TOKEN_LIMITS: tuple[TokenLimit, ...] = ("max_tokens", "max_completion_tokens")
# where each protocol's chat call is sent, under the base URL
_CHAT_PATHS = {"openai": "/chat/completions", "anthropic": "/messages"}
_CHAT_PATHS["openai-responses"] = "/responses"
MAX_RESPONSE_BYTES = 8 * 1_048_576
_ERROR_EXCERPT = 512


@dataclass(frozen=True)
class ProviderConfig:
    """A model endpoint: OpenAI-compatible chat completions (`kind="openai"`), the
    Anthropic Messages API (`kind="anthropic"`) or OpenAI's Responses API
    (`kind="openai-responses"`). Prices are per 1M tokens (None: cost unknown).

    Its API key is one of two, never both: `api_key`, a key the host configured together
    with this endpoint (bound to this `base_url`: a config built from anything else, such as
    a tenant's stored provider of the same name, does not carry it); or `api_key_secret`,
    the NAME of the tenant's secret holding the key of a tenant's stored provider. Neither:
    no key is sent."""

    name: str
    base_url: str  # up to the version: `https://api.openai.com/v1`
    default_model: str | None = None
    price_in: float | None = None
    price_out: float | None = None
    kind: ProviderKind = "openai"
    api_key: str | None = field(default=None, repr=False, compare=False)  # never printed
    api_key_secret: str | None = None
    # how an answer's token limit is sent (`openai` kind): None picks `max_completion_tokens`
    # for OpenAI's own API (api.openai.com, where reasoning models refuse `max_tokens`) and
    # `max_tokens` for any other server (vLLM, Ollama, llama.cpp, LiteLLM, ...)
    token_limit: TokenLimit | None = None
    # provider parameters sent with every call (a step's `options` override them)
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # prices per 1M tokens of given models, `{model: {input: X, output: Y}}`, over
    # `price_in`/`price_out` (a name prices its dated versions: `gpt-4o`, `gpt-4o-2024-08-06`)
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.api_key is not None and self.api_key_secret is not None:
            raise ValueError("a provider's key is its own api_key or a secret, not both")
        problems = option_problems(self.options, self.kind) + price_problems(self.prices)
        if problems:
            raise ValueError(f"provider {self.name!r}: " + "; ".join(problems))

    @property
    def token_limit_key(self) -> str:
        """The request key of an answer's token limit (see `token_limit`)."""
        if self.kind == "openai-responses":
            return "max_output_tokens"  # the Responses API's one key
        if self.kind != "openai":
            return "max_tokens"  # the Messages API's one key
        if self.token_limit is not None:
            return self.token_limit
        if _host(self.base_url) == "api.openai.com":
            return "max_completion_tokens"
        return "max_tokens"

    def price(self, model: str | None = None) -> tuple[float, float] | None:
        """The prices per 1M input and output tokens of `model`: its entry in `prices` (the
        exact name, else the longest entry it extends with a version, `-` and a digit:
        `gpt-4o` prices `gpt-4o-2024-08-06`, not `gpt-4o-mini`), else the provider's; None
        when none is known."""
        if model and self.prices:
            found = self.prices.get(model)
            if found is None:
                extended = [
                    k
                    for k in self.prices
                    if model.startswith(k + "-") and model[len(k) + 1 : len(k) + 2].isdigit()
                ]
                found = self.prices[max(extended, key=len)] if extended else None
            if found is not None:
                return float(found["input"]), float(found["output"])
        if self.price_in is None or self.price_out is None:
            return None
        return self.price_in, self.price_out

    def cost(self, input_tokens: int, output_tokens: int, model: str | None = None) -> float | None:
        price = self.price(model)
        if price is None:
            return None
        return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def price_problems(prices: Any) -> list[str]:
    """What is wrong with a price table (`ProviderConfig.prices`): `{model: {input: X,
    output: Y}}`, each price a finite number of 0 or more per 1M tokens."""
    if not isinstance(prices, Mapping):
        return ["prices is a map of model names to {input, output} prices per 1M tokens"]
    problems = []
    for model, price in prices.items():
        where = f"prices.{model}"
        if not isinstance(model, str) or not model.strip() or len(model) > 256:
            problems.append(f"{where}: a model name is non-empty text (at most 256)")
            continue
        if not isinstance(price, Mapping) or set(price) != {"input", "output"}:
            problems.append(f"{where} is {{input: X, output: Y}} (per 1M tokens)")
            continue
        for part, value in price.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value < 0:
                problems.append(f"{where}.{part} is a finite number, 0 or more")
    return problems


class Providers:
    """The providers a worker knows, by name."""

    def __init__(self, providers: Mapping[str, ProviderConfig] | None = None) -> None:
        self._providers = dict(providers or {})

    def get(self, name: str) -> ProviderConfig:
        try:
            return self._providers[name]
        except KeyError:
            known = ", ".join(sorted(self._providers)) or "none"
            hint = (
                " (set WOVYR_LLM_BASE_URL for `default`, or `wovyr providers set`)"
                if name == DEFAULT_PROVIDER
                else " (set it: `wovyr providers set`)"
            )
            raise NonRetryableError(
                f"no model provider named {name!r} is configured{hint}; configured: {known}",
                type="UnknownProvider",
            ) from None

    def names(self) -> list[str]:
        return sorted(self._providers)


class CredentialResolver(Protocol):
    """How a provider's API key is found, from its config alone (the seam the tenant's
    secrets store plugs into): its bound `api_key`, or the value of its `api_key_secret`.
    None: the provider needs no key."""

    def api_key(self, tenant: str, provider: ProviderConfig) -> str | None: ...


class BoundCredentials:
    """The resolver of a worker without a secrets store: a provider's own bound key; a
    provider whose key is a tenant's secret cannot be called."""

    def api_key(self, tenant: str, provider: ProviderConfig) -> str | None:
        if provider.api_key_secret is not None:
            raise NonRetryableError(
                f"the API key of model provider {provider.name!r} is secret "
                f"{provider.api_key_secret!r}, and this worker has no secrets store",
                type="SecretUnreadable",
            )
        return provider.api_key

    def __repr__(self) -> str:
        return "BoundCredentials()"


class ResponseCache(Protocol):
    """The per-tenant memo of `llm` responses (`cache: true`), keyed by request hash."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, response: dict[str, Any]) -> None: ...


class ArtifactReader(Protocol):
    """One tenant's stored artifacts as its model calls read them (the worker builds it)."""

    def read(self, digest: str) -> tuple[str, bytes] | None:
        """The media type and bytes of the tenant's artifact `digest`, or None."""
        ...


@dataclass(frozen=True)
class ModelAccess:
    """What a model-calling kind gets for one attempt (built by the worker): the providers
    read for this attempt, and each one's key resolved from that same config, once."""

    tenant: str
    providers: Providers
    credentials: CredentialResolver = field(repr=False)
    cache: ResponseCache | None = field(default=None, repr=False)
    # the tenant's artifacts, which content parts name by digest (`with_artifacts`)
    artifacts: ArtifactReader | None = field(default=None, repr=False)
    # why the tenant may make no model call today (a daily model quota used up), or None
    quota: Callable[[], str | None] | None = field(default=None, repr=False)
    # the model calls of this attempt not journaled by its kind (an `llm` step's), each
    # `{provider, model, input_tokens, output_tokens, cached_tokens?, cost, latency,
    # error?}`: they ride on the attempt's result event (`model_calls`)
    calls: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)
    # the time a call's latency is measured with (the worker's injected clock)
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), repr=False)
    _keys: dict[str, str | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def api_key(self, provider: str) -> str | None:
        """The key of `providers.get(provider)`, resolved from that config alone, once: a
        provider changed or deleted meanwhile cannot pair this attempt's endpoint with
        another record's key (or the host's key with a tenant's endpoint)."""
        if provider not in self._keys:
            config = self.providers.get(provider)
            self._keys[provider] = self.credentials.api_key(self.tenant, config)
        return self._keys[provider]


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


@dataclass(frozen=True)
class ChatResult:
    message: dict[str, Any]  # the assistant message: role, content, tool_calls
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    model: str
    cached_tokens: int = 0  # of the input tokens, read from the provider's prompt cache
    latency: float = 0.0  # seconds from the request to the end of the answer

    def record(self, provider: ProviderConfig) -> dict[str, Any]:
        """The call as its event keeps it (`ModelAccess.calls`)."""
        out: dict[str, Any] = {
            "provider": provider.name,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": provider.cost(self.input_tokens, self.output_tokens, self.model),
            "latency": round(self.latency, 6),
        }
        if self.cached_tokens:
            out["cached_tokens"] = self.cached_tokens
        return out


def _cached_input(usage: Any) -> int:
    """The input tokens a provider's `usage` says it read from its prompt cache: OpenAI's
    `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`."""
    if not isinstance(usage, dict):
        return 0
    details = usage.get("prompt_tokens_details")
    found = details.get("cached_tokens") if isinstance(details, dict) else None
    found = found if found is not None else usage.get("cache_read_input_tokens")
    return int(found) if isinstance(found, int) and not isinstance(found, bool) else 0


async def chat(
    provider: ProviderConfig,
    api_key: str | None,
    body: dict[str, Any],
    *,
    timeout: float | None,
    policy: SideEffectPolicy = TRUSTED,
    client: httpx.AsyncClient | None = None,
    on_text: Callable[[str], None] | None = None,
) -> ChatResult:
    """One `POST {base_url}/chat/completions` with `body` (streamed when `body["stream"]`:
    the chunks are assembled into one result, and `on_text` is handed each piece of the
    answer's text as it arrives); for an `anthropic` provider one `POST {base_url}/messages`
    with `body` mapped (`wovyr.activities.anthropic`), for an `openai-responses` one one
    `POST {base_url}/responses` (`wovyr.activities.openai_responses`)."""
    import asyncio  # with the first call, as httpx: importing the module loads neither

    import httpx

    url = provider.base_url.rstrip("/") + _CHAT_PATHS[provider.kind]
    body = provider_body(provider, body)
    await _check_media_urls(body, policy)
    named = body.get("model")
    model = named if isinstance(named, str) else None
    attributes = _call_attributes(provider, "chat", model)
    with call_span(f"chat {model}" if model else "chat", attributes) as span:
        with _provider_errors(provider, timeout, policy, api_key):
            async with asyncio.timeout(timeout):
                if client is not None:
                    result = await _exchange(
                        client, url, api_key, body, policy, on_text, provider.kind
                    )
                else:
                    # One TLS context per process: building one (loading the CA bundle)
                    # costs more than a local model call.
                    async with httpx.AsyncClient(timeout=None, verify=tls_context()) as owned:
                        result = await _exchange(
                            owned, url, api_key, body, policy, on_text, provider.kind
                        )
        span.record(
            {
                "gen_ai.response.model": result.model,
                "gen_ai.usage.input_tokens": result.input_tokens,
                "gen_ai.usage.output_tokens": result.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": result.cached_tokens or None,
                "gen_ai.response.finish_reasons": (
                    (result.finish_reason,) if result.finish_reason else None
                ),
            }
        )
    return result


async def _check_media_urls(body: dict[str, Any], policy: SideEffectPolicy) -> None:
    """Every http(s) URL of a message's content parts checked as an `http` step's target
    is (`wovyr.activities.egress`): the provider fetches it for the tenant, so an address
    the tenant's policy refuses (a private one, unless allowed) fails the call before it
    is made, not retried; a host that does not resolve is retried. The error locates the
    part and never carries the URL (it may carry a token)."""
    if policy.private_network:
        return
    from urllib.parse import urlsplit

    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            url = part.get("url") if isinstance(part, dict) else None
            if not isinstance(url, str) or url.startswith("data:"):
                continue
            where = f"messages[{i}].content[{j}]"
            try:
                split = urlsplit(url)
                scheme, host = split.scheme, split.hostname or ""
                port = split.port or (443 if scheme == "https" else 80)
            except ValueError:
                scheme, host, port = "", "", 0
            if scheme not in ("http", "https") or not host:
                raise NonRetryableError(
                    f"the {part.get('type')} URL of {where} is not an http(s) URL",
                    type="InvalidInput",
                )
            try:
                await egress.checked_addresses(host, port, policy)
            except ActivityError as exc:
                if exc.retryable:
                    raise ActivityError(
                        f"the host of the {part.get('type')} URL of {where} does not resolve",
                        type=exc.type,
                    ) from None
                raise NonRetryableError(
                    f"the {part.get('type')} URL of {where} is at an address the tenant's "
                    "egress policy refuses (a private network; allow it in the policy's "
                    "allow_hosts or allow_networks)",
                    type="MediaUrlRefused",
                ) from None


def provider_body(provider: ProviderConfig, body: dict[str, Any]) -> dict[str, Any]:
    """`body` (a chat-completions request a kind built) as `provider` is sent it, before
    a protocol mapping: the provider's `options` under the step's, and the answer's token
    limit under the key the provider wants (`ProviderConfig.token_limit_key`)."""
    sent = {**provider.options, **body} if provider.options else dict(body)
    key = provider.token_limit_key
    if key != "max_tokens" and "max_tokens" in sent:
        sent[key] = sent.pop("max_tokens")
    return sent


def _call_attributes(
    provider: ProviderConfig, operation: str, model: str | None
) -> dict[str, Attribute]:
    """What a model call's span says from the start, per OpenTelemetry's GenAI semantic
    conventions: whom it asks (the protocol's provider, the server's host and port), for
    what (never the key, which no span attribute may carry, nor the base URL, which may
    hold one)."""
    from urllib.parse import urlsplit

    split = urlsplit(provider.base_url)
    attributes: dict[str, Attribute] = {
        "wovyr.provider": provider.name,
        # the conventions' name of the provider: `openai` for either OpenAI protocol
        "gen_ai.provider.name": "openai" if provider.kind == "openai-responses" else provider.kind,
        "gen_ai.operation.name": operation,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    if split.hostname:
        attributes["server.address"] = split.hostname
        try:
            port = split.port or (443 if split.scheme == "https" else 80)
        except ValueError:  # a port the URL check refused already; said nowhere here
            port = None
        if port is not None:
            attributes["server.port"] = port
    return attributes


@contextlib.contextmanager
def _provider_errors(
    provider: ProviderConfig, timeout: float | None, policy: SideEffectPolicy, api_key: str | None
) -> Iterator[None]:
    """A call to `provider`'s failures as attempt errors: a timeout and an unreachable host
    retryable, a bad base URL not; and never the key in a message."""
    import httpx

    try:
        yield
    except (TimeoutError, httpx.TimeoutException) as exc:
        after = f" after {timeout}s" if timeout is not None else ""
        raise ActivityError(
            f"model provider {provider.name!r} did not answer{after}", type="Timeout"
        ) from exc
    except httpx.TransportError as exc:
        if not policy.private_network:
            raise egress.unreachable(retryable=True) from exc
        raise ActivityError(
            f"model provider {provider.name!r} is unreachable: {type(exc).__name__}",
            type="ProviderUnavailable",
        ) from exc
    except httpx.InvalidURL as exc:
        raise NonRetryableError(
            f"model provider {provider.name!r} has an invalid base URL", type="InvalidUrl"
        ) from exc
    except ActivityError as exc:
        if api_key and api_key in exc.message:  # never: messages are built without it
            exc.message = exc.message.replace(api_key, "***")
        raise


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]  # one per input text, in order
    model: str
    input_tokens: int


async def embed(
    provider: ProviderConfig,
    api_key: str | None,
    model: str,
    texts: list[str],
    *,
    timeout: float | None,
    policy: SideEffectPolicy = TRUSTED,
) -> Embeddings:
    """One `POST {base_url}/embeddings` (OpenAI's protocol) of `texts` with `model`; errors
    mapped as `chat`'s are (429 and 5xx retryable, other 4xx not); an `openai-responses`
    provider is asked the same (OpenAI's API has both). An `anthropic` provider has no
    embeddings endpoint (`EmbeddingsUnsupported`, not retried)."""
    import asyncio

    import httpx

    if provider.kind == "anthropic":
        raise NonRetryableError(
            f"provider {provider.name!r} ({provider.kind}) has no embeddings endpoint; name an "
            "OpenAI-compatible provider in `embedding.provider`",
            type="EmbeddingsUnsupported",
        )
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise NonRetryableError(
            f"{len(texts)} texts in one embeddings request (at most {MAX_EMBEDDING_INPUTS})",
            type="InvalidInput",
        )
    url = provider.base_url.rstrip("/") + "/embeddings"
    attributes = _call_attributes(provider, "embeddings", model)
    with call_span(f"embeddings {model}", attributes) as span:
        with _provider_errors(provider, timeout, policy, api_key):
            async with asyncio.timeout(timeout):
                async with httpx.AsyncClient(timeout=None, verify=tls_context()) as client:
                    result = await _embed_exchange(client, url, api_key, model, texts, policy)
        span.record(
            {
                "gen_ai.response.model": result.model,
                "gen_ai.usage.input_tokens": result.input_tokens,
                "wovyr.embeddings.count": len(result.vectors),
            }
        )
    return result


async def _embed_exchange(
    client: httpx.AsyncClient,
    url: str,
    api_key: str | None,
    model: str,
    texts: list[str],
    policy: SideEffectPolicy,
) -> Embeddings:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = {"model": model, "input": texts}
    request = client.build_request("POST", url, headers=headers, content=_json_bytes(body))
    response = await send_checked(client, request, policy, follow=False)
    try:
        if response.status_code != 200:
            raise await _status_error(response, model)
        content = bytearray()
        async for chunk in response.aiter_bytes():
            content += chunk
            if len(content) > MAX_RESPONSE_BYTES:
                raise _malformed("the response is larger than 8 MiB")
    finally:
        await response.aclose()
    return _parse_embeddings(bytes(content), model, len(texts))


def _parse_embeddings(content: bytes, model: str, count: int) -> Embeddings:
    try:
        data = json.loads(content)
        rows = sorted(data["data"], key=lambda row: int(row.get("index", 0)))
        vectors = [[float(x) for x in row["embedding"]] for row in rows]
        if len(vectors) != count:
            raise ValueError(f"{len(vectors)} embeddings for {count} texts")
        if len({len(v) for v in vectors}) > 1 or any(not v for v in vectors):
            raise ValueError("embeddings of different or no dimensions")
        if any(not math.isfinite(x) for v in vectors for x in v):
            raise ValueError("an embedding holds a non-finite number")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}"[:200]) from None
    usage = data.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
    return Embeddings(vectors, str(data.get("model") or model), tokens)


async def _exchange(
    client: httpx.AsyncClient,
    url: str,
    api_key: str | None,
    body: dict[str, Any],
    policy: SideEffectPolicy,
    on_text: Callable[[str], None] | None = None,
    kind: str = "openai",
) -> ChatResult:
    from wovyr.activities import anthropic, openai_responses

    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if kind == "anthropic":
        headers, sent = anthropic.headers(api_key), anthropic.request_body(body)
    else:
        mapped = openai_responses.request_body if kind == "openai-responses" else chat_request
        sent = mapped(body)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
    request = client.build_request("POST", url, headers=headers, content=_json_bytes(sent))
    response = await send_checked(client, request, policy, follow=False)
    model = str(body.get("model"))
    try:
        if response.status_code != 200:
            raise await _status_error(response, model)
        if body.get("stream"):
            read = _STREAM_READERS.get(kind, _read_stream)
            return await read(response, model, on_text)
        content = bytearray()
        async for chunk in response.aiter_bytes():
            content += chunk
            if len(content) > MAX_RESPONSE_BYTES:
                raise _malformed("the response is larger than 8 MiB")
        parse = _PARSERS.get(kind, _parse_completion)
        return parse(bytes(content), model)
    finally:
        await response.aclose()


_PART_TYPES = {"image": ("image/png", "image/jpeg", "image/gif", "image/webp"),
               "file": ("application/pdf",)}  # fmt: skip


def with_artifacts(body: dict[str, Any], reader: ArtifactReader | None) -> dict[str, Any]:
    """`body` with each content part that names an artifact (`{type, artifact}`, see
    `wovyr.kinds.steps.ContentPart`) given its bytes as a base64 `data:` URL instead, read
    by `reader` (so each provider family maps it as it maps inline data); a body that names
    none is returned as it is. An artifact the tenant does not have, or of a media type its
    part does not take, is a `NonRetryableError` that locates the part."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(p, dict) and "artifact" in p
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for p in m["content"]
    ):
        return body
    out = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            parts = [_artifact_part(p, reader, f"messages[{i}].content[{j}]")
                     for j, p in enumerate(content)]  # fmt: skip
            out.append({**message, "content": parts})
        else:
            out.append(message)
    return {**body, "messages": out}


def _artifact_part(part: Any, reader: ArtifactReader | None, where: str) -> Any:
    if not isinstance(part, dict) or "artifact" not in part:
        return part
    digest, kind = part["artifact"], part.get("type")
    found = reader.read(str(digest)) if reader is not None else None
    if found is None:
        raise NonRetryableError(
            f"the artifact {digest} of the {kind} part {where} is not stored for this tenant "
            "(put it with `wovyr artifacts put` or POST /api/v1/artifacts)",
            type="ArtifactNotFound",
        )
    media_type, data = found
    if media_type not in _PART_TYPES.get(str(kind), ()):
        raise NonRetryableError(
            f"the artifact {digest} of the {kind} part {where} is {media_type}, which "
            f"{_an(str(kind))} part does not take",
            type="InvalidInput",
        )
    url = f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
    return {**{k: v for k, v in part.items() if k != "artifact"}, "url": url}


def _an(kind: str) -> str:
    return ("an " if kind[:1] in ("a", "e", "i", "o", "u") else "a ") + kind


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions `body` as the wire takes it: a message's content parts (see
    `wovyr.kinds.steps.ContentPart`) become `text`, `image_url` and `file` (`file_data`,
    the data URL) parts; a body without parts is sent as it is."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m.get("content"), list) for m in messages
    ):
        return body
    return {
        **body,
        "messages": [
            {**m, "content": [_chat_part(p) for p in m["content"]]}
            if isinstance(m.get("content"), list)
            else m
            for m in messages
        ],
    }


def _chat_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": part.get("url")}}
    if kind == "file":
        name = part.get("filename") or "file.pdf"
        return {"type": "file", "file": {"filename": name, "file_data": part.get("url")}}
    return {"type": "text", "text": part.get("text")}


def _json_bytes(body: dict[str, Any]) -> bytes:
    """The request body as JSON: orjson (a conversation of many turns is re-sent whole on
    every call; the standard library took a tenth of an agent turn's engine time), the
    standard library for what orjson refuses (integers beyond 64 bits)."""
    import orjson

    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return json.dumps(body, separators=(",", ":")).encode()


async def _status_error(response: httpx.Response, model: str) -> ActivityError:
    """A refused call as the attempt's error, classified by its status and, where the
    status alone does not say, by the error object of the body (OpenAI's `error.code`,
    Anthropic's `error.type` and message): see the module docstring."""
    status = response.status_code
    head = bytearray()
    async for chunk in response.aiter_bytes():
        head += chunk
        if len(head) >= _ERROR_READ:
            break
    excerpt = bytes(head[:_ERROR_EXCERPT]).decode("utf-8", errors="replace")
    code, said = _error_object(bytes(head))
    details: dict[str, Any] = {"status": status, "body": excerpt}
    return _classified(status, code, said, details, response.headers, model)


def _classified(
    status: int,
    code: str | None,
    said: str,
    details: dict[str, Any],
    headers: Mapping[str, str],
    model: str,
    where: str | None = None,
) -> ActivityError:
    """The error a refusal of `status` is (or a failure after a 200 that stands for that
    status, said to have come `where`), its error object's `code` and message `said`
    deciding where the status alone does not."""
    if code:
        details["code"] = code
    at = where or f"HTTP {status}"
    quoted = f": {said[:200]}" if said else ""
    if status == 429 and code == "insufficient_quota":
        return NonRetryableError(
            "the model provider refuses for want of quota or credit "
            f"({where or '429'} insufficient_quota){quoted}",
            type="ProviderQuotaExhausted",
            details=details,
        )
    if status == 429:
        after = retry_after_seconds(headers.get("retry-after"))
        if after is None:
            after = _rate_limit_reset(headers)
        if after is not None:
            details["retry_after"] = after
        return ActivityError(
            f"the model provider is rate limiting ({where or '429'})"
            + (f"; it asks to retry after {after:g}s" if after is not None else ""),
            type="ProviderRateLimited",
            details=details,
            retry_after=after,
        )
    if status == 529 or code == "overloaded_error":
        return ActivityError(
            f"the model provider is overloaded ({at})",
            type="ProviderOverloaded",
            details=details,
            retry_after=retry_after_seconds(headers.get("retry-after")),
        )
    if status >= 500:
        after = retry_after_seconds(headers.get("retry-after"))
        return ActivityError(
            f"the model provider failed ({at}){quoted if where else ''}",
            type="ProviderUnavailable",
            details=details,
            retry_after=after,
        )
    if status in (401, 403):
        return NonRetryableError(
            f"the model provider refused the credentials ({at}): check the API key "
            "of the provider (WOVYR_LLM_API_KEY for `default`)",
            type="ProviderAuthFailed",
            details=details,
        )
    if status == 404:
        return NonRetryableError(
            f"the model provider does not know model {model!r} or the endpoint (HTTP 404)",
            type="ModelNotFound",
            details=details,
        )
    lowered = said.lower()
    if code == "context_length_exceeded" or any(s in lowered for s in _CONTEXT_SIGNS):
        return NonRetryableError(
            f"the conversation is longer than model {model!r} takes ({at}){quoted}",
            type="ContextLengthExceeded",
            details=details,
        )
    if code in _FILTERED_CODES:
        return NonRetryableError(
            f"the model provider's content filter refused the request ({at}){quoted}",
            type="ContentFiltered",
            details=details,
        )
    return NonRetryableError(
        f"the model provider refused the request ({at}){quoted}",
        type="ProviderBadRequest",
        details=details,
    )


# the codes of a prompt refused by a content filter: Azure OpenAI's, and the Responses
# API's refusal of an image
_FILTERED_CODES = ("content_filter", "content_policy_violation", "image_content_policy_violation")


def _failed_response(error: Mapping[str, Any], model: str, where: str) -> ActivityError:
    """A Responses API response that failed after its 200 (`status: failed`, a
    `response.failed` or `error` event) as the error of the status its `code` stands for
    (`openai_responses.failure_status`)."""
    from wovyr.activities import openai_responses

    code = error.get("code")
    code = str(code) if isinstance(code, str | int) and code != "" else None
    said = error.get("message")
    said = said if isinstance(said, str) else ""
    status = openai_responses.failure_status(code)
    details = {"failed": where, "message": said[:_ERROR_EXCERPT]}
    return _classified(status, code, said, details, {}, model, where)


_ERROR_READ = 65_536  # of an error body, to classify it (the details keep an excerpt)
# how providers word a conversation too long for the model: OpenAI ("This model's maximum
# context length is ..."), Anthropic ("prompt is too long: 208310 tokens > 200000 maximum"),
# vLLM and llama.cpp servers (which send no code)
_CONTEXT_SIGNS = ("maximum context length", "prompt is too long", "context window", "n_ctx")


def _error_object(body: bytes) -> tuple[str | None, str]:
    """The code and message of an error body: OpenAI's `{"error": {"message", "type",
    "code"}}` (code, else type) or Anthropic's `{"type": "error", "error": {"type",
    "message"}}`; (None, "") for anything else."""
    try:
        data = json.loads(body)
    except ValueError:
        return None, ""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None, ""
    code = error.get("code") or error.get("type")
    message = error.get("message")
    return (
        str(code) if isinstance(code, str | int) else None,
        message if isinstance(message, str) else "",
    )


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _rate_limit_reset(headers: Mapping[str, str]) -> float | None:
    """When a 429 without `Retry-After` may be retried, from OpenAI's
    `x-ratelimit-reset-requests`/`-tokens` (`1s`, `6m0s`, `20ms`): the reset of a limit
    whose `x-ratelimit-remaining-*` is 0, else the later of the two; None without them."""
    resets: dict[str, float] = {}
    for limit in ("requests", "tokens"):
        value = (headers.get(f"x-ratelimit-reset-{limit}") or "").strip()
        parts = _DURATION_PART.findall(value)
        if parts and "".join(n + u for n, u in parts) == value:
            resets[limit] = sum(float(n) * _DURATION_UNIT[u] for n, u in parts)
    spent = [s for k, s in resets.items() if headers.get(f"x-ratelimit-remaining-{k}") == "0"]
    chosen = spent or list(resets.values())
    return min(max(chosen), 86_400.0) if chosen else None


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds (a number, or an HTTP date relative to now), at most a day."""
    if not value:
        return None
    from email.utils import parsedate_to_datetime

    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if math.isnan(seconds) or seconds < 0:
        return 0.0
    return min(seconds, 86_400.0)


def _malformed(why: str) -> ActivityError:
    return ActivityError(
        f"the model provider sent a malformed response: {why}", type="ProviderMalformedResponse"
    )


def _parse_completion(content: bytes, model: str) -> ChatResult:
    try:
        data = json.loads(content)
        choice = data["choices"][0]
        message = choice["message"]
        if not isinstance(message, dict):
            raise TypeError("message is not an object")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}"[:200]) from None
    usage = data.get("usage") or {}
    return ChatResult(
        message=_clean_message(message),
        finish_reason=choice.get("finish_reason"),
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        model=str(data.get("model") or model),
        cached_tokens=_cached_input(usage),
    )


def _parse_anthropic(content: bytes, model: str) -> ChatResult:
    from wovyr.activities import anthropic

    try:
        data = json.loads(content)
        message, finish, tokens_in, tokens_out, name = anthropic.parse_message(data)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}"[:200]) from None
    cached = _cached_input(data.get("usage"))
    return ChatResult(message, finish, tokens_in, tokens_out, str(name or model), cached)


def _parse_responses(content: bytes, model: str) -> ChatResult:
    """A Responses API response (`openai_responses.parse_response`); one whose `status`
    is `failed` fails the call as its error."""
    from wovyr.activities import openai_responses

    try:
        data = json.loads(content)
        parsed = openai_responses.parse_response(data)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _malformed(f"{type(exc).__name__}: {exc}"[:200]) from None
    message, finish, tokens_in, tokens_out, name, cached, failed = parsed
    if failed is not None:
        raise _failed_response(failed, model, "a failed response")
    return ChatResult(message, finish, tokens_in, tokens_out, str(name or model), cached)


def _clean_message(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if isinstance(message.get("refusal"), str):  # structured outputs: why it would not answer
        out["refusal"] = message["refusal"]
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {
                "id": str(c.get("id")),
                "type": "function",
                "function": {
                    "name": str((c.get("function") or {}).get("name")),
                    "arguments": str((c.get("function") or {}).get("arguments") or ""),
                },
            }
            for c in calls
        ]
    return out


class _EventStream(Protocol):
    """A streamed answer of typed events being assembled (`anthropic.MessageStream`,
    `openai_responses.ResponseStream`)."""

    @property
    def done(self) -> bool: ...

    @property
    def failed(self) -> Any: ...  # what an error event said, or None

    def feed(self, event: dict[str, Any]) -> str | None: ...

    def result(self) -> tuple[dict[str, Any], str | None, int, int, str, int]: ...


async def _read_events(
    response: httpx.Response,
    stream: _EventStream,
    on_text: Callable[[str], None] | None,
    failure: Callable[[Any], ActivityError],
    last: str,
) -> ChatResult:
    """Assemble a stream of typed server-sent events into `stream`, each text piece handed
    to `on_text` as it arrives; an error event fails the call as `failure` maps what it
    said; a stream that ends before its `last` event is malformed."""
    data: list[str] = []  # the `data:` lines of the event being read
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        if line or not data:
            continue  # `event:` names the type the data says again; a blank line ends one
        event, data = "\n".join(data), []
        try:
            piece = stream.feed(json.loads(event))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise _malformed(f"a stream event: {type(exc).__name__}: {exc}"[:200]) from None
        if stream.failed is not None:
            raise failure(stream.failed)
        if piece and on_text is not None:
            on_text(piece)
        if stream.done:
            break
    if not stream.done:
        where = " in the middle of an event" if data else ""
        raise _malformed(f"the stream ended{where} before {last}")
    message, finish, tokens_in, tokens_out, name, cached = stream.result()
    return ChatResult(message, finish, tokens_in, tokens_out, name, cached)


async def _read_anthropic_stream(
    response: httpx.Response, model: str, on_text: Callable[[str], None] | None = None
) -> ChatResult:
    """Assemble a streamed Messages answer (`anthropic.MessageStream`); an `error` event
    fails the call as that error."""
    from wovyr.activities import anthropic

    def failure(failed: str) -> ActivityError:
        if failed == "overloaded_error":
            return ActivityError(
                "the model provider is overloaded (an error event in its stream)",
                type="ProviderOverloaded",
            )
        return ActivityError(
            f"the model provider's stream failed: {failed}", type="ProviderUnavailable"
        )

    stream = anthropic.MessageStream(model)
    return await _read_events(response, stream, on_text, failure, "message_stop")


async def _read_responses_stream(
    response: httpx.Response, model: str, on_text: Callable[[str], None] | None = None
) -> ChatResult:
    """Assemble a streamed Responses answer (`openai_responses.ResponseStream`); a
    `response.failed` or `error` event fails the call as its error (`_failed_response`)."""
    from wovyr.activities import openai_responses

    def failure(failed: dict[str, Any]) -> ActivityError:
        return _failed_response(failed, model, "an error event in its stream")

    stream = openai_responses.ResponseStream(model)
    return await _read_events(response, stream, on_text, failure, "response.completed")


async def _read_stream(
    response: httpx.Response, model: str, on_text: Callable[[str], None] | None = None
) -> ChatResult:
    """Assemble SSE chunks: content pieces concatenated (each handed to `on_text` as it
    arrives), tool call fragments by `index`."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: dict[str, Any] = {}
    name = model
    done = False
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise _malformed("a stream chunk is not JSON") from None
        name = str(chunk.get("model") or name)
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                piece = str(delta["content"])
                content.append(piece)
                if on_text is not None:
                    on_text(piece)
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(int(piece.get("index", 0)), {"arguments": ""})
                if piece.get("id"):
                    call["id"] = piece["id"]
                function = piece.get("function") or {}
                if function.get("name"):
                    call["name"] = function["name"]
                call["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    if not done:
        raise _malformed("the stream ended before [DONE]")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": str(c.get("id")),
                "type": "function",
                "function": {"name": str(c.get("name")), "arguments": c["arguments"]},
            }
            for _, c in sorted(calls.items())
        ]
    return ChatResult(
        message=message,
        finish_reason=finish,
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        model=name,
        cached_tokens=_cached_input(usage),
    )


_PARSERS: dict[str, Callable[[bytes, str], ChatResult]] = {
    "anthropic": _parse_anthropic,
    "openai-responses": _parse_responses,
}
_STREAM_READERS = {"anthropic": _read_anthropic_stream, "openai-responses": _read_responses_stream}


def with_options(
    body: dict[str, Any], options: Mapping[str, Any] | None, family: str
) -> dict[str, Any]:
    """`body` with a step's `options` added, each checked against `family`'s list (a key it
    does not take: `UnsupportedOption`, not retried); a key the kind set itself is kept."""
    if not options:
        return body
    problems = option_problems(options, family)
    if problems:
        raise NonRetryableError("; ".join(problems), type="UnsupportedOption")
    return {**options, **body}
