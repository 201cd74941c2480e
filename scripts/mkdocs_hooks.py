"""mkdocs hooks: the HTTP API reference page is rendered from the server's own OpenAPI
document (built in-process on an in-memory store), so the page cannot drift from the code."""

from __future__ import annotations

import html
import tempfile
from pathlib import Path
from typing import Any

MARKER = "<!-- openapi-operations -->"


def _openapi() -> dict[str, Any]:
    import logging

    from wovyr.engine.engine import Engine
    from wovyr.server import create_app
    from wovyr.settings import Settings
    from wovyr.store.sqlite import SQLiteStore

    logging.getLogger("wovyr").setLevel(logging.ERROR)  # a served store's notices: not here
    with tempfile.TemporaryDirectory() as home, Engine(SQLiteStore()) as engine:
        app = create_app(engine, Settings(home=Path(home)), start_background=False)
        spec: dict[str, Any] = app.openapi()
        return spec


def _cell(text: object) -> str:
    return html.escape(str(text or "")).replace("|", "\\|").replace("\n", " ")


def operations_markdown(spec: dict[str, Any]) -> str:
    """One section per tag, one table row per operation: method, path, summary, id."""
    by_tag: dict[str, list[str]] = {}
    for path, methods in sorted(spec.get("paths", {}).items()):
        for method, op in methods.items():
            tag = (op.get("tags") or ["other"])[0]
            row = (
                f"| `{method.upper()}` | `{_cell(path)}` | {_cell(op.get('summary'))} "
                f"| `{_cell(op.get('operationId'))}` |"
            )
            by_tag.setdefault(tag, []).append(row)
    out = [f"OpenAPI {spec.get('openapi')}, API version {spec['info']['version']}.", ""]
    for tag in sorted(by_tag):
        out += [
            f"## {tag}",
            "",
            "| method | path | summary | operationId |",
            "| --- | --- | --- | --- |",
        ]
        out += [*by_tag[tag], ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, operations_markdown(_openapi()))
