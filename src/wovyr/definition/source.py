"""Where things are in a document: a map from data paths to 1-based line and column.

The parser records the mark of every node (and of every mapping key) while it converts YAML
events to plain Python data, so later stages (the model, the validator) can report problems
as `file:line:column` although they only ever see dicts and lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from wovyr.errors import Problem

__all__ = ["DataPath", "SourceMap", "format_path"]

#: A path into parsed data: mapping keys and list indexes, from the root.
DataPath = tuple[str | int, ...]


def format_path(path: Sequence[str | int]) -> str:
    """`activities[2].retry.max_attempts` from ("activities", 2, "retry", "max_attempts")."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif step.isidentifier():
            out += f".{step}" if out else step
        else:
            out += f"[{step!r}]"
    return out


@dataclass
class SourceMap:
    """Marks of a parsed document. `nodes[path]` is where the value at `path` starts;
    `keys[path]` is where the key that introduces it starts (mapping entries only)."""

    filename: str = "<input>"
    nodes: dict[DataPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[DataPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: Sequence[str | int], *, key: bool = False) -> tuple[int, int]:
        """The mark of `path`, or of its nearest recorded ancestor (else 1:1)."""
        current = tuple(path)
        if key and current in self.keys:
            return self.keys[current]
        while current:
            if current in self.nodes:
                return self.nodes[current]
            current = current[:-1]
        return self.nodes.get((), (1, 1))

    def problem(
        self,
        message: str,
        path: Sequence[str | int] = (),
        *,
        key: bool = False,
        hint: str | None = None,
    ) -> Problem:
        """A Problem located at `path` (at its key when `key` is true)."""
        line, column = self.locate(path, key=key)
        return Problem(
            message=message,
            path=format_path(path),
            file=self.filename,
            line=line,
            column=column,
            hint=hint,
        )
