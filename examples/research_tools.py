"""Tools for examples/research-agent.yaml: a small offline library to search and read, and
a notebook that keeps what the agent found (stand-ins for a web search API, a page fetcher
and a notes service).

    WOVYR_LLM_BASE_URL=http://localhost:11434/v1 WOVYR_LLM_MODEL=llama3.1 \\
      wovyr run examples/research-agent.yaml -a examples/research_tools.py \\
      -i question="How does a durable execution engine resume after a crash?"

Each tool's JSON Schema is derived from its signature and docstring; `notes.save` uses its
idempotency key so a call made again after a crash keeps one note.
"""

from __future__ import annotations

from typing import Any

import wovyr

LIBRARY = {
    "durable-execution": (
        "Durable execution",
        "A durable execution engine records every step's result in a log before it moves on. "
        "After a crash, a worker replays the log and resumes at the first step not recorded, "
        "so completed steps are never run again.",
    ),
    "event-sourcing": (
        "Event sourcing",
        "State is the fold of an append-only log of events; a checkpoint is that fold stored "
        "with the log in one transaction.",
    ),
    "idempotency": (
        "Idempotency keys",
        "A step that may run twice (at-least-once) passes a stable key to the service it "
        "calls, which then applies the effect once.",
    ),
}
NOTES: dict[str, dict[str, Any]] = {}


@wovyr.activity("search.web")
def search(query: str, limit: int = 3) -> list[dict[str, str]]:
    """Search the library; returns page ids and titles, best first."""
    words = {w.lower().strip("?.,") for w in query.split() if len(w) > 3}
    scored = []
    for page_id, (title, body) in LIBRARY.items():
        score = sum(w in body.lower() or w in title.lower() for w in words)
        if score:
            scored.append((score, page_id, title))
    scored.sort(reverse=True)
    return [{"id": page_id, "title": title} for _, page_id, title in scored[:limit]]


@wovyr.activity("pages.fetch")
def fetch(page_id: str) -> dict[str, str]:
    """Read one page of the library by its id."""
    if page_id not in LIBRARY:
        raise wovyr.NonRetryableError(f"no page {page_id!r}", type="PageNotFound")
    title, body = LIBRARY[page_id]
    return {"id": page_id, "title": title, "text": body}


@wovyr.activity("notes.save")
def save(title: str, text: str, ctx: wovyr.ActivityContext) -> dict[str, str]:
    """Keep a note of a finding (once per call, however often it is retried)."""
    NOTES.setdefault(ctx.idempotency_key, {"title": title, "text": text})
    return {"saved": title}
