"""The OpenAPI document as generated clients want it.

- Every operation has a stable `operationId` in camelCase (`startWorkflow`,
  `listExecutions`): the handler's name unless `OPERATION_IDS` renames it. A generated
  client's method names are these ids, so renaming a handler must not rename a method:
  `docs/openapi.json` (the committed copy a test compares with) catches it.
- Errors are one `Problem` schema (RFC 9457) and one shared response per status under
  `components/responses`, referenced by every operation (FastAPI copies the schema into
  each response, and declares a 422 of its own that this server never sends).
- `Retry-After` is declared on the 429 and 503 responses.

Refresh the committed copy after a reviewed API change with `python scripts/openapi.py`.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from wovyr.server.problems import LOCATED_SCHEMA, PROBLEM_JSON, PROBLEM_SCHEMA, TITLES

__all__ = ["OPERATION_IDS", "RESPONSE_NAMES", "document_text", "install_openapi", "operation_id"]

# handler name -> operationId, where camelCasing the handler's name would not read well
OPERATION_IDS = {
    "list_workflows": "listExecutions",
    "get_workflow": "getExecution",
    "cancel_workflow": "cancelExecution",
    "get_history": "getExecutionHistory",
    "get_items": "listExecutionItems",
    "stream_workflow": "streamExecution",
    "get_logs": "getExecutionLogs",
    "signal_workflow": "signalExecution",
    "query_workflow": "queryExecution",
    "approve_workflow": "approveExecution",
    "rerun_workflow": "rerunExecution",
    "latest_definition": "getDefinition",
    "one_definition": "getDefinitionVersion",
    "list_all": "listAgents",
    "apply": "applyAgent",
    "get_run": "getAgentRun",
    "show": "getAgent",
    "run": "runAgent",
    "list_items": "listMemoryItems",
    "get_item": "getMemoryItem",
    "delete_item": "deleteMemoryItem",
    "put_retention": "setRetention",
    "flow_state": "getFlowState",
    "get_providers": "listProviders",
    "remove_provider": "deleteProvider",
    "get_mcp_servers": "listMcpServers",
    "list_audit": "listAuditRecords",
    "apply_trigger_document": "applyTrigger",
    "list_trigger_documents": "listTriggers",
    "delete_trigger_document": "deleteTrigger",
    "post_event": "sendEvent",
    "receive_hook": "receiveWebhook",
    "list_received_events": "listEvents",
    "put_webhook": "putWebhook",
    "metrics": "getMetrics",
}
# status -> the name of its shared response under components/responses
RESPONSE_NAMES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    412: "PreconditionFailed",
    413: "ContentTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    428: "PreconditionRequired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "Unavailable",
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 0},
    }
}
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def operation_id(route: APIRoute) -> str:
    """The route's operationId (FastAPI's `generate_unique_id_function`)."""
    if route.name in OPERATION_IDS:
        return OPERATION_IDS[route.name]
    head, *rest = route.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _shared_response(status: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": TITLES[status],
        "content": {PROBLEM_JSON: {"schema": _PROBLEM_REF}},
    }
    if status in (429, 503):
        out["headers"] = _RETRY_AFTER
    return out


def _is_error_response(response: dict[str, Any]) -> bool:
    content = response.get("content", {})
    if PROBLEM_JSON in content:
        return True
    schema = content.get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref") == "#/components/schemas/HTTPValidationError")


def _refine(doc: dict[str, Any]) -> dict[str, Any]:
    used: set[int] = set()
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            for code, response in list(responses.items()):
                status = int(code) if code.isdigit() else 0
                if status in RESPONSE_NAMES and _is_error_response(response):
                    responses[code] = {"$ref": f"#/components/responses/{RESPONSE_NAMES[status]}"}
                    used.add(status)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    schemas["LocatedProblem"] = LOCATED_SCHEMA
    components["responses"] = {RESPONSE_NAMES[s]: _shared_response(s) for s in sorted(used)}
    return doc


def install_openapi(app: FastAPI) -> None:
    """Serve the refined document at `app.openapi_url` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = _refine(doc)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document_text(app: FastAPI) -> str:
    """The document as committed in `docs/openapi.json` (the version left out: it changes
    with every release, the API does not)."""
    doc = dict(app.openapi())
    doc["info"] = {k: v for k, v in doc["info"].items() if k != "version"}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
