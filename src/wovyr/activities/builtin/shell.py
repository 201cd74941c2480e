"""The `shell` kind: one program from an argv list (see `wovyr.activities.shell`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from wovyr.activities.kinds import ActivityKind, Dispatch, register_kind
from wovyr.fields import FrozenModel

__all__ = ["KIND", "ShellSpec", "ShellStep"]


class ShellSpec(FrozenModel):
    argv: list[str] = Field(min_length=1, description="Program and arguments; no shell is used")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the process")
    inherit_env: list[str] = Field(
        default_factory=lambda: ["PATH"],
        description="Variables copied from the worker (allow-list)",
    )
    max_output_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)


class ShellStep(FrozenModel):
    shell: ShellSpec


async def _execute(step: ShellStep, rendered: Any, dispatch: Dispatch) -> Any:
    from wovyr.activities.shell import run_shell  # subprocess machinery only where it runs

    return await run_shell(ShellSpec.model_validate(rendered), timeout=dispatch.timeout)


KIND = register_kind(
    ActivityKind(
        name="shell",
        model=ShellStep,
        spec=lambda step: step.shell.model_dump(mode="json", exclude_none=True),
        execute=_execute,
        description="one program, run without a shell",
    )
)
