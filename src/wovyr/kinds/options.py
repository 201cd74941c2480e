"""Provider parameters passed through as they are (`options:` of an `llm` or `agent` step,
and of a provider), each checked against the allow-list of the protocol that receives it.

A step does not know which protocol its provider speaks until dispatch (a provider name is
looked up in the tenant's providers then), so a definition's `options` are checked when it
is parsed against every family's list (a key no family takes is a located error with the
closest name), and again when the call is made against its provider's family (a key that
family does not take fails the attempt with `UnsupportedOption`, not retried).

Keys the step sets itself are not options: `model`, `messages`, `tools`, `stream`,
`stream_options` (the kind builds them; and the Responses API's `input` and `instructions`,
which the messages become), `temperature` and `max_tokens` (the step's own keys;
`max_tokens` is sent as `max_completion_tokens` or `max_output_tokens` where the provider
wants it), and for the `llm` kind `response_format` only when `response_schema` is not given.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = [
    "ANTHROPIC_OPTIONS",
    "MANAGED_KEYS",
    "OPENAI_OPTIONS",
    "OPTIONS",
    "RESPONSES_OPTIONS",
    "Options",
    "option_problems",
]

# Chat completions (https://platform.openai.com/docs/api-reference/chat/create): every
# request parameter but the ones the kinds build, `n` (one answer is read) and the audio
# and web-search ones (an answer is text and tool calls).
OPENAI_OPTIONS = frozenset(
    {
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "metadata",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "tool_choice",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
    }
)
# Messages (https://docs.anthropic.com/en/api/messages): the same rule.
ANTHROPIC_OPTIONS = frozenset(
    {
        "metadata",
        "service_tier",
        "stop_sequences",
        "thinking",
        "tool_choice",
        "top_k",
        "top_p",
    }
)
# Responses (https://platform.openai.com/docs/api-reference/responses/create): the same
# rule, and not what would keep the conversation on the provider's side instead of in the
# journal (`previous_response_id`, `conversation`, `prompt`) or answer later (`background`).
RESPONSES_OPTIONS = frozenset(
    {
        "include",
        "max_tool_calls",
        "metadata",
        "parallel_tool_calls",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "text",
        "tool_choice",
        "top_logprobs",
        "top_p",
        "truncation",
        "user",
    }
)
OPTIONS: Mapping[str, frozenset[str]] = {
    "openai": OPENAI_OPTIONS,
    "anthropic": ANTHROPIC_OPTIONS,
    "openai-responses": RESPONSES_OPTIONS,
}
_ANY_FAMILY = frozenset().union(*OPTIONS.values())
MANAGED_KEYS = frozenset(
    {
        "input",
        "instructions",
        "max_completion_tokens",
        "max_output_tokens",
        "max_tokens",
        "messages",
        "model",
        "stream",
        "stream_options",
        "temperature",
        "tools",
    }
)
_OWN_KEY = {
    "max_tokens": "the step's `max_tokens:`",
    "max_completion_tokens": "the step's `max_tokens:` (sent as max_completion_tokens "
    "where the provider wants it)",
    "max_output_tokens": "the step's `max_tokens:` (sent as max_output_tokens to a "
    "Responses provider)",
    "instructions": "the step's system message",
    "input": "the step's messages",
    "temperature": "the step's `temperature:`",
}


def option_problems(options: Mapping[str, Any], family: str | None = None) -> list[str]:
    """What is wrong with `options` for `family` (`openai`, `anthropic`,
    `openai-responses`), or for any family when None: one message per key, naming the
    closest allowed key."""
    allowed = OPTIONS[family] if family is not None else _ANY_FAMILY
    problems = []
    for key in options:
        if key in allowed:
            continue
        if key in MANAGED_KEYS:
            own = _OWN_KEY.get(key, "the kind")
            problems.append(f"{key!r} is not an option: {own} sets it")
            continue
        where = f"{family} providers" if family is not None else "any provider family"
        message = f"option {key!r} is not taken by {where}"
        close = difflib.get_close_matches(key, sorted(allowed), n=1)
        if close:
            message += f" (did you mean {close[0]!r}?)"
        problems.append(message)
    return problems


def _known_option(key: str) -> str:
    problems = option_problems({key: None})
    if problems:
        raise ValueError(problems[0])
    return key


# `options:` of a step: a key no family takes is refused where it is written (the
# definition's located problems point at the key)
Options = dict[Annotated[str, AfterValidator(_known_option)], Any]
