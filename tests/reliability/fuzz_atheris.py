"""Coverage-guided fuzzing of the definition loader and the expression evaluator (atheris).

Not part of the test suite (no `test_` prefix); run it by hand or nightly:

    .venv/bin/pip install atheris==3.0.0       # a cp311 wheel; 3.1.0 is not served here
    mkdir -p /tmp/wovyr-corpus && cp examples/*.yaml /tmp/wovyr-corpus/
    .venv/bin/python tests/reliability/fuzz_atheris.py -max_total_time=600 /tmp/wovyr-corpus

Each input is a definition document, an expression or a template (the first byte picks
which). Anything but `DefinitionError`, `ExpressionError` or `InputError` escaping is a
crash that atheris reports with the input that caused it (saved as `crash-<sha1>`);
`-timeout=1` turns an input slower than a second into a finding, `-rss_limit_mb=512` one
that uses too much memory.
"""

from __future__ import annotations

import sys
from typing import Any

import atheris

with atheris.instrument_imports():
    from wovyr.definition import load_definition, resolve_inputs
    from wovyr.definition.expr import evaluate, render
    from wovyr.errors import DefinitionError, ExpressionError, InputError

CONTEXT: dict[str, Any] = {
    "inputs": {"n": 3, "s": "text", "xs": [1, 2, 3], "m": {"k": [1, {"x": None}]}},
    "activities": {"a": {"output": {"v": 1.5, "w": ["a", "b"]}, "status": "completed"}},
    "execution": {"id": "e-1", "workflow": "w", "version": "1", "started_at": "2030"},
    "item": {"k": 1},
    "index": 0,
}


def test_one_input(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    mode = provider.ConsumeIntInRange(0, 3)
    try:
        if mode <= 1:
            workflow = load_definition(provider.ConsumeBytes(provider.remaining_bytes()))
            resolve_inputs(workflow, {"n": 1})
        elif mode == 2:
            evaluate(provider.ConsumeUnicodeNoSurrogates(400), CONTEXT)
        else:
            render({"t": provider.ConsumeUnicodeNoSurrogates(400)}, CONTEXT)
    except (DefinitionError, ExpressionError, InputError):
        return


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
