"""Agent frameworks made durable by code workflows: their model calls and tool calls run as
the steps of a `@wovyr.workflow` function (docs/python-workflows.md, "Agents of other
frameworks").

- `wovyr.integrations.pydantic_ai`: `DurableAgent` around a `pydantic_ai.Agent` (the
  `pydantic-ai` extra)
- `wovyr.integrations.openai_agents`: `DurableRunner` for the OpenAI Agents SDK (the
  `openai-agents` extra)

Each module imports its framework when it is imported; `import wovyr` imports neither.
"""
