"""The workflow language: parse, model, validate, expressions, inputs, hashes and schema.

from wovyr.definition import load_definition_file, resolve_inputs, content_hash

workflow = load_definition_file("examples/hello.yaml")   # DefinitionError if invalid
inputs = resolve_inputs(workflow, {"name": "Ada"})       # InputError if wrong
pin = content_hash(workflow)                              # "sha256:..."
"""

from __future__ import annotations

from wovyr.definition.expr import (
    TEMPLATE_RE,
    CompiledExpression,
    Refs,
    compile_expression,
    evaluate,
    evaluate_condition,
    iter_expressions,
    references,
    render,
)
from wovyr.definition.inputs import parse_cli_inputs, resolve_inputs
from wovyr.definition.model import (
    Activity,
    ApprovalWait,
    ChildWorkflowSpec,
    CompensateSpec,
    HttpSpec,
    InputSpec,
    Metadata,
    RetryPolicy,
    ShellSpec,
    TimerWait,
    WaitSpec,
    Workflow,
    activity_kinds,
)
from wovyr.definition.parse import (
    Limits,
    load_definition,
    load_definition_file,
    parse_document,
    read_source,
)
from wovyr.definition.pin import canonical_json, content_hash
from wovyr.definition.schema import json_schema, schema_text
from wovyr.definition.source import SourceMap
from wovyr.definition.validate import validate
from wovyr.fields import format_duration, parse_duration, parse_timestamp

__all__ = [  # noqa: RUF022 - plain sorted(), as the tests check
    "Activity",
    "ApprovalWait",
    "ChildWorkflowSpec",
    "CompensateSpec",
    "CompiledExpression",
    "HttpSpec",
    "InputSpec",
    "Limits",
    "Metadata",
    "Refs",
    "RetryPolicy",
    "ShellSpec",
    "SourceMap",
    "TEMPLATE_RE",
    "TimerWait",
    "WaitSpec",
    "Workflow",
    "activity_kinds",
    "canonical_json",
    "compile_expression",
    "content_hash",
    "evaluate",
    "evaluate_condition",
    "format_duration",
    "iter_expressions",
    "json_schema",
    "load_definition",
    "load_definition_file",
    "parse_cli_inputs",
    "parse_document",
    "parse_duration",
    "parse_timestamp",
    "read_source",
    "references",
    "render",
    "resolve_inputs",
    "schema_text",
    "validate",
]
