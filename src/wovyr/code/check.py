"""The determinism checker: what in a workflow function's source would make a replay differ
from the run it replays (the wall clock, randomness, the network, files, threads, the
environment, real sleeps). Run by `wovyr validate FILE.py` and by `check_workflow` in a
user's tests; read from the source (`ast`), so it finds the calls a function makes by
their names and cannot follow a helper it calls (keep the effects of helpers in steps).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from wovyr.code.workflow import CodeWorkflow

__all__ = ["Finding", "check_workflow"]

# a dotted call (or its last parts) -> why it must not run in a workflow function
_CALLS: dict[str, str] = {
    "time.time": "reads the wall clock: use ctx.now()",
    "time.time_ns": "reads the wall clock: use ctx.now()",
    "time.monotonic": "reads a clock: use ctx.now()",
    "time.perf_counter": "reads a clock: use ctx.now()",
    "time.sleep": "blocks the worker: use await ctx.sleep(...)",
    "datetime.now": "reads the wall clock: use ctx.now()",
    "datetime.utcnow": "reads the wall clock: use ctx.now()",
    "datetime.today": "reads the wall clock: use ctx.now()",
    "date.today": "reads the wall clock: use ctx.now()",
    "uuid.uuid1": "is random: use ctx.uuid()",
    "uuid.uuid4": "is random: use ctx.uuid()",
    **{
        f"os.{name}": why
        for name, why in (
            ("urandom", "is random: use ctx.random() or ctx.uuid()"),
            ("getenv", "reads the environment, which differs between workers: pass an input"),
            ("system", "runs a program: do it in an activity (await ctx.run(...))"),
        )
    },
    "asyncio.sleep": "waits on the clock: use await ctx.sleep(...)",
    "asyncio.wait_for": "waits on the clock: give the step a timeout= instead",
    "asyncio.to_thread": "runs code in a thread: do it in an activity (await ctx.run(...))",
    "open": "reads or writes a file: do it in an activity (await ctx.run(...))",
    "input": "reads the terminal: use await ctx.signal(...)",
}
# a call into any of these modules
_MODULES: dict[str, str] = {
    "random": "is random: use ctx.random()",
    "secrets": "is random: use ctx.uuid() or ctx.random()",
    "requests": "uses the network: do it in an activity (await ctx.run(...))",
    "httpx": "uses the network: do it in an activity (await ctx.run(...))",
    "urllib": "uses the network: do it in an activity (await ctx.run(...))",
    "socket": "uses the network: do it in an activity (await ctx.run(...))",
    "subprocess": "runs a program: do it in an activity (await ctx.run(...))",
    "threading": "uses threads: do it in an activity (await ctx.run(...))",
    "sqlite3": "uses a database: do it in an activity (await ctx.run(...))",
}
_READS = {"os.environ": "reads the environment, which differs between workers: pass it as an input"}


@dataclass(frozen=True)
class Finding:
    """One call a replay could not repeat, where the source makes it."""

    file: str
    line: int
    column: int
    message: str

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


def check_workflow(workflow: CodeWorkflow) -> list[Finding]:
    """What in `workflow`'s function a replay could not repeat (empty: nothing found)."""
    fn = workflow.fn
    try:
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError):
        return []
    tree = ast.parse(textwrap.dedent("".join(lines)))
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            why = _why(name) if name is not None else None
            if why is not None:
                found.append(_finding(file, start, node, f"{name}() {why}"))
        elif isinstance(node, ast.Attribute | ast.Subscript):
            target = node.value if isinstance(node, ast.Subscript) else node
            name = _dotted(target)
            if name in _READS:
                found.append(_finding(file, start, node, f"{name} {_READS[name]}"))
    unique = {(f.line, f.column, f.message): f for f in found}
    return sorted(unique.values(), key=lambda f: (f.line, f.column))


def _finding(file: str, start: int, node: ast.expr, message: str) -> Finding:
    return Finding(
        file, start + node.lineno - 1, node.col_offset + 1, f"workflow function {message}"
    )


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _why(name: str) -> str | None:
    parts = name.split(".")
    for size in range(len(parts), 0, -1):  # `datetime.datetime.now` is `datetime.now`
        why = _CALLS.get(".".join(parts[-size:]))
        if why is not None and (size > 1 or len(parts) == 1):
            return why
    if len(parts) > 1 and parts[0] in _MODULES:
        return _MODULES[parts[0]]
    return None
