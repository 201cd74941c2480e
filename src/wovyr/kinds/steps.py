"""The built-in activity kinds as the workflow language knows them: the keys each owns in
an activity (its model), the part of a step rendered before an attempt, how it settles.

What runs them is in `wovyr.activities.builtin` (one module per kind, registered with
`wovyr.activities.kinds.register_kind`); nothing here runs, reads a clock or does I/O, so
the decider and validation import these and no activity code.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from wovyr.fields import NAME_PATTERN, Duration, FrozenModel, Timestamp, Version
from wovyr.kinds.options import Options
from wovyr.kinds.table import Declaration, declare

__all__ = [
    "AGENT",
    "CHILD",
    "DEFAULT_EMBEDDING_MODEL",
    "DEFAULT_PROVIDER",
    "HTTP",
    "LLM",
    "MAX_TOP_K",
    "MCP",
    "MEMORY",
    "SET",
    "SHELL",
    "TOOL",
    "TOOL_PATTERN",
    "WAIT",
    "WORKFLOW_TOOL",
    "AgentBudget",
    "AgentSpec",
    "AgentStep",
    "ApprovalWait",
    "ChildStep",
    "ChildWorkflowSpec",
    "ContentPart",
    "EmbeddingSpec",
    "HttpSpec",
    "HttpStep",
    "LlmSpec",
    "LlmStep",
    "McpSpec",
    "McpStep",
    "MemorySpec",
    "MemoryStep",
    "Message",
    "SetStep",
    "ShellSpec",
    "ShellStep",
    "TimerWait",
    "ToolName",
    "ToolStep",
    "WaitSpec",
    "WaitStep",
    "check_json_schema",
]

DEFAULT_PROVIDER = "default"
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"  # when a memory spec names none
MAX_TOP_K = 100  # search results of a memory namespace at most


class ToolStep(FrozenModel):
    tool: str = Field(pattern=NAME_PATTERN, description="The registered activity to call")
    with_: dict[str, Any] = Field(
        default_factory=dict, alias="with", description="Its keyword arguments"
    )


class HttpSpec(FrozenModel):
    url: str
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    query: dict[str, Any] = Field(default_factory=dict)
    json_body: Any = Field(default=None, alias="json")
    body: str | None = None
    allowed_statuses: list[int] = Field(
        default_factory=list, description="Statuses that count as success (default: 2xx)"
    )
    max_response_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)
    follow_redirects: bool = Field(
        default=False, description="Follow 3xx redirects (off: a redirect is a response)"
    )


class HttpStep(FrozenModel):
    http: HttpSpec


class ShellSpec(FrozenModel):
    argv: list[str] = Field(min_length=1, description="Program and arguments; no shell is used")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the process")
    inherit_env: list[str] = Field(
        default_factory=lambda: ["PATH"],
        description="Variables copied from the worker (allow-list)",
    )
    max_output_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)
    secret_env: list[str] | None = Field(
        default=None, description="Names of `env` entries masked wherever the step is shown"
    )


class ShellStep(FrozenModel):
    shell: ShellSpec


class SetStep(FrozenModel):
    set: dict[str, Any]


class ApprovalWait(FrozenModel):
    timeout: Duration | None = None
    approvers: list[str] = Field(default_factory=list)


class TimerWait(FrozenModel):
    after: Duration | None = None
    at: Timestamp | None = None

    @model_validator(mode="after")
    def _one_of(self) -> TimerWait:
        if (self.after is None) == (self.at is None):
            raise ValueError("a timer takes exactly one of 'after' or 'at'")
        return self


class WaitSpec(FrozenModel):
    signal: str | None = Field(default=None, pattern=NAME_PATTERN)
    approval: ApprovalWait | None = None
    timer: TimerWait | None = None

    @model_validator(mode="after")
    def _one_of(self) -> WaitSpec:
        given = [k for k in ("signal", "approval", "timer") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a wait takes exactly one of 'signal', 'approval' or 'timer'")
        return self

    @property
    def kind(self) -> str:
        return "signal" if self.signal else "approval" if self.approval else "timer"


class WaitStep(FrozenModel):
    wait: WaitSpec


class ChildWorkflowSpec(FrozenModel):
    name: str = Field(pattern=NAME_PATTERN)
    version: Version | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    priority: int | None = Field(
        default=None, ge=0, le=9, description="0-9; default: the parent's priority"
    )


class ChildStep(FrozenModel):
    workflow: ChildWorkflowSpec


class EmbeddingSpec(FrozenModel):
    provider: str = Field(default=DEFAULT_PROVIDER, description="An OpenAI-compatible provider")
    model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL, min_length=1, description="The embedding model"
    )


MAX_INLINE_BYTES = 524_288  # the text of one `data:` URL at most (it is kept in the history)
_DATA_URL = re.compile(r"^data:([a-z0-9.+-]+/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]*={0,2})$")
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ARTIFACT_REF = re.compile(r"^sha256:[0-9a-f]{64}$")


class ContentPart(FrozenModel):
    """One part of a message's content: `{type: text, text}`, `{type: image, url}` (an
    http(s) URL, which the provider fetches, or a base64 `data:` URL of a PNG, JPEG, GIF or
    WebP image) or `{type: file, url, filename}` (a base64 `data:application/pdf` URL). An
    image or a file may name a stored artifact instead of a URL (`artifact: "sha256:..."`,
    `wovyr.store.artifacts`): the history keeps the reference, the bytes are read from the
    tenant's artifacts when the model is called."""

    type: Literal["text", "image", "file"]
    text: str | None = Field(default=None, description="The text of a `text` part")
    url: str | None = Field(
        default=None, description="An `image`'s http(s) or data: URL; a `file`'s data: URL"
    )
    filename: str | None = Field(default=None, max_length=256, description="A `file`'s name")
    artifact: str | None = Field(
        default=None,
        max_length=100,
        description="An `image`'s or `file`'s stored artifact (`sha256:<hex>`), instead of `url`",
    )

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> ContentPart:
        given = {k for k in ("text", "url", "filename", "artifact") if getattr(self, k) is not None}
        if self.type == "text":
            takes = {"text"}
            if "text" not in given:
                raise ValueError("a text part needs `text`")
        else:
            source = given & {"url", "artifact"}
            if not source:
                raise ValueError(f"{_an(self.type)} part needs `url` (or `artifact`)")
            if len(source) > 1:
                raise ValueError(f"{_an(self.type)} part takes one of `url` and `artifact`")
            takes = {*source, *(("filename",) if self.type == "file" else ())}
        extra = sorted(given - takes)
        if extra:
            raise ValueError(f"{_an(self.type)} part takes no `{'`, `'.join(extra)}`")
        if self.url is not None and "${{" not in self.url:  # rendered: checked again then
            _media_url_problem(self.type, self.url)
        named = self.artifact
        if named is not None and "${{" not in named and _ARTIFACT_REF.match(named) is None:
            raise ValueError("an artifact is named by its digest, `sha256:<64 hex digits>`")
        return self

    def media_type(self) -> str | None:
        """The media type of a `data:` URL (None for an http(s) URL or text)."""
        found = _DATA_URL.match(self.url or "")
        return found.group(1) if found else None


def _an(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _media_url_problem(kind: str, url: str) -> None:
    """ValueError saying why `url` cannot be the URL of an `image` or `file` part."""
    if url.startswith("data:"):
        if len(url) > MAX_INLINE_BYTES:
            raise ValueError(
                f"a data: URL of {len(url)} characters is larger than {MAX_INLINE_BYTES} "
                "(inline data is kept in the execution's history; link a larger one by URL)"
            )
        found = _DATA_URL.match(url)
        if found is None:
            raise ValueError("a data: URL is `data:<media type>;base64,<base64 data>`")
        allowed = _IMAGE_TYPES if kind == "image" else ("application/pdf",)
        if found.group(1) not in allowed:
            raise ValueError(f"{_an(kind)} part's data is one of {', '.join(allowed)}")
        return
    if kind == "file":
        raise ValueError("a file part's url is a base64 data: URL (data:application/pdf;...)")
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in ("http", "https") or not rest:
        raise ValueError("an image part's url is an http(s) URL or a base64 data: URL")


def _text_or_list(value: Any) -> str:
    return "list" if isinstance(value, list) else "text"


# Text or a list: only the member the value's shape picks is tried, so a problem inside the
# list is located where it is (not merged with "expected a string").
Content = Annotated[
    Annotated[str | None, Tag("text")] | Annotated[list[ContentPart], Tag("list")],
    Discriminator(_text_or_list),
]


class Message(FrozenModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: Content = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _media_from_the_user(self) -> Message:
        media = isinstance(self.content, list) and any(p.type != "text" for p in self.content)
        if media and self.role != "user":
            raise ValueError("only a user message's content may hold image or file parts")
        return self


class LlmSpec(FrozenModel):
    provider: str = Field(default=DEFAULT_PROVIDER, description="The provider's name")
    model: str | None = Field(default=None, description="Default: the provider's model")
    system: str | None = Field(default=None, description="The system message")
    prompt: str | None = Field(default=None, description="The user message")
    messages: Annotated[
        Annotated[str | None, Tag("text")] | Annotated[list[Message], Tag("list")],
        Discriminator(_text_or_list),
    ] = Field(default=None, description="The conversation (instead of prompt), or an expression")
    temperature: float | str | None = Field(default=None, description="0 to 2")
    max_tokens: int | str | None = Field(default=None, description="The answer's token limit")
    response_schema: dict[str, Any] | None = Field(
        default=None, description="A JSON Schema the answer must be JSON valid against"
    )
    schema_retries: int = Field(
        default=2, ge=0, le=5, description="Answers sent back with their validation error"
    )
    cache: bool = Field(default=False, description="Answer an identical request from cache")
    stream: bool = Field(default=False, description="Receive the answer as streamed chunks")
    options: Options | None = Field(
        default=None,
        description="Provider parameters sent as they are (reasoning_effort, top_p, seed, "
        "stop, response_format, tool_choice, ...), checked against the provider's family",
    )

    @model_validator(mode="after")
    def _one_prompt(self) -> LlmSpec:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of `prompt` and `messages`")
        if self.response_schema is not None and "response_format" in (self.options or {}):
            raise ValueError(
                "give `response_schema` or `options.response_format`, not both "
                "(response_schema sends a json_schema response_format and checks the answer)"
            )
        return self

    @field_validator("response_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_json_schema(value)
        return value


class LlmStep(FrozenModel):
    llm: LlmSpec


def check_json_schema(schema: dict[str, Any]) -> None:
    """ValueError naming what is wrong when `schema` is not a JSON Schema (draft 2020-12)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise ValueError(
            f"not a valid JSON Schema: {exc.message}" + (f" (at {where})" if where else "")
        ) from None


WORKFLOW_TOOL = "workflow:"  # the prefix of a tool that is a registered workflow
# A registered tool's name, `workflow:NAME` (a registered workflow), an MCP server's
# tools: `mcp:SERVER` or `mcp:SERVER/TOOL`, or a memory namespace's tools: `memory:NS`
# (`memory:NS/forget` and the like name one of them, for `require_approval`).
TOOL_PATTERN = (
    r"^(?:(?:workflow:)?"
    + NAME_PATTERN.removeprefix("^").removesuffix("$")
    + r"|mcp:[A-Za-z0-9][A-Za-z0-9._\-]{0,63}(?:/[^\s/]{1,256})?"
    + r"|memory:[A-Za-z0-9][A-Za-z0-9._\-]{0,127}(?:/(?:remember|recall|search|forget))?)$"
)


def _tool_entry(value: Any) -> Any:
    """A tool entry as text: `{workflow: NAME}` is `workflow:NAME` (YAML reads an unquoted
    `workflow:NAME` inside `[...]` as a key, so both forms are taken)."""
    if (
        isinstance(value, dict)
        and list(value) == ["workflow"]
        and isinstance(value["workflow"], str)
    ):
        return WORKFLOW_TOOL + value["workflow"]
    return value


ToolName = Annotated[str, BeforeValidator(_tool_entry), Field(pattern=TOOL_PATTERN)]


class AgentBudget(FrozenModel):
    tokens: int | None = Field(default=None, ge=1, description="Input + output tokens")
    cost: float | None = Field(default=None, gt=0, description="In the provider's prices")
    on_exhausted: Literal["fail", "approval"] | None = Field(
        default=None,
        description="fail (the default): stop with BudgetExceeded; approval: pause until a "
        "person grants more budget (or stops the run)",
    )


class AgentSpec(FrozenModel):
    provider: str = Field(default=DEFAULT_PROVIDER, description="The provider's name")
    model: str | None = Field(default=None, description="Default: the provider's model")
    instructions: str | None = Field(default=None, description="The system message")
    input: Any = Field(description="The task (text, or any value sent as JSON)")
    tools: list[ToolName] = Field(
        default_factory=list,
        description="Registered tools it may call; `workflow:NAME` a registered workflow "
        "(run as a child execution, its inputs the tool's arguments); mcp:SERVER/TOOL or "
        "mcp:SERVER for MCP tools; memory:NAMESPACE for remember/recall/search/forget tools "
        "over a memory namespace",
    )
    embedding: EmbeddingSpec | None = Field(
        default=None, description="The provider and model that embed memory texts"
    )
    max_turns: int = Field(default=10, ge=1, le=1000, description="Model calls at most")
    attachments: list[ContentPart] = Field(
        default_factory=list,
        description="Content parts sent after the input in the task's message: images "
        "(by http(s) or data: URL), PDF files (by data: URL), text",
    )
    budget: AgentBudget = Field(default_factory=AgentBudget)
    require_approval: list[ToolName] = Field(
        default_factory=list, description="Tools whose every call waits for a person's approval"
    )
    approval_timeout: Duration | None = Field(
        default=None,
        description="How long an approval (a call in require_approval, a budget pause) "
        "waits; at the timeout it counts as denied",
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, description="Per model answer")
    stream: bool | None = Field(default=None, description="Stream and journal each answer's text")
    options: Options | None = Field(
        default=None,
        description="Provider parameters sent with every model call (reasoning_effort, "
        "top_p, seed, stop, tool_choice, ...), checked against the provider's family",
    )


class AgentStep(FrozenModel):
    agent: AgentSpec


class McpSpec(FrozenModel):
    server: str = Field(pattern=NAME_PATTERN, description="A registered MCP server's name")
    tool: str = Field(min_length=1, max_length=256, description="The tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's input")


class McpStep(FrozenModel):
    mcp: McpSpec


Op = Literal["put", "get", "delete", "list", "search"]
_OP_NEEDS: dict[str, tuple[str, ...]] = {
    "put": ("key",),
    "get": ("key",),
    "delete": ("key",),
    "list": (),
    "search": ("text",),
}


class MemorySpec(FrozenModel):
    op: Op = Field(description="put, get, delete, list or search")
    namespace: str = Field(min_length=1, max_length=128, description="The namespace")
    key: str | None = Field(default=None, description="The item's key (put, get, delete)")
    value: Any = Field(default=None, description="put: the item's value (any JSON value)")
    text: str | None = Field(
        default=None, description="put: the item's text, embedded for search; search: the query"
    )
    ttl: Duration | None = Field(default=None, description="put: the item expires after it")
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K, description="search: results")
    prefix: str | None = Field(default=None, description="list: keys starting with it")
    after: str | None = Field(default=None, description="list: keys after it (paging)")
    limit: int | None = Field(default=None, ge=1, le=1000, description="list: items at most")
    embedding: EmbeddingSpec | None = Field(
        default=None, description="The provider and model that embed texts (put, search)"
    )

    @model_validator(mode="after")
    def _fields_of_op(self) -> MemorySpec:
        missing = [name for name in _OP_NEEDS[self.op] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"memory op {self.op!r} needs {' and '.join(missing)}")
        if self.op == "put" and self.value is None and self.text is None:
            raise ValueError("memory op 'put' needs a value or a text")
        if self.ttl is not None and self.ttl <= 0:
            raise ValueError("ttl must be positive")
        return self


class MemoryStep(FrozenModel):
    memory: MemorySpec


# The order of declaration is the order in which errors and the schema list the kinds.
TOOL = declare(
    Declaration(
        name="tool",
        model=ToolStep,
        spec=lambda step: step.with_,
        description="a registered Python function",
        secrets=True,
    )
)
HTTP = declare(
    Declaration(
        name="http",
        model=HttpStep,
        spec=lambda step: step.http.model_dump(by_alias=True, mode="json", exclude_none=True),
        description="one HTTP request",
        secrets=True,
    )
)
SHELL = declare(
    Declaration(
        name="shell",
        model=ShellStep,
        spec=lambda step: step.shell.model_dump(mode="json", exclude_none=True),
        description="one program, run without a shell",
        secrets=True,
    )
)
SET = declare(
    Declaration(
        name="set",
        model=SetStep,
        spec=lambda step: step.set,
        settle="value",
        description="values computed from expressions",
    )
)
WAIT = declare(
    Declaration(
        name="wait",
        model=WaitStep,
        spec=lambda step: None,
        settle="wait",
        description="a signal, an approval or a durable timer",
        default_attempts=1,
        compensates=False,
        per_item=False,
    )
)
CHILD = declare(
    Declaration(
        name="workflow",
        model=ChildStep,
        spec=lambda step: step.workflow.model_dump(mode="json", exclude_none=True),
        description="a child workflow",
        default_attempts=1,
        compensates=False,
        repeat_lost=True,
    )
)
LLM = declare(
    Declaration(
        name="llm",
        model=LlmStep,
        spec=lambda step: step.llm.model_dump(mode="json", exclude_none=True),
        description="one answer of a model (an OpenAI-compatible provider)",
    )
)
AGENT = declare(
    Declaration(
        name="agent",
        model=AgentStep,
        # Without attachments the input is the one agents have always recorded.
        spec=lambda step: step.agent.model_dump(
            mode="json",
            exclude_none=True,
            exclude=None if step.agent.attachments else {"attachments"},
        ),
        description="a tool-calling loop, each model call and tool call a durable step",
        default_attempts=3,
        compensates=False,
        per_item=False,  # its steps are recorded per activity
    )
)
MCP = declare(
    Declaration(
        name="mcp",
        model=McpStep,
        spec=lambda step: step.mcp.model_dump(mode="json"),
        description="one call of a tool of a registered MCP server",
        default_attempts=3,
        secrets=True,  # arguments may carry ${{ secrets.NAME }}, resolved at dispatch
    )
)
MEMORY = declare(
    Declaration(
        name="memory",
        model=MemoryStep,
        spec=lambda step: step.memory.model_dump(mode="json", exclude_none=True),
        description="one operation on a durable memory namespace of the tenant",
        default_attempts=3,
    )
)
