"""The stream journal: the text a running model call streams, journaled in batches beside
the execution's events so that a reader can be served (and re-served after a reconnect or
a worker crash) exactly what was sent.

It is side data, not the truth: the events and the checkpoint stay the record of what
happened (an `llm` answer is in its `ActivityCompleted`), and a chunk is never written in a
step's transaction. Each execution's chunks are numbered 1, 2, ... in the order they were
committed, so `(tenant, execution, n)` names one and a reader resumes after any `n`.

A generation (one model call streaming: an `llm` attempt, or one turn of an `agent`
attempt) opens with an `attempt` chunk naming `(activity, attempt, recovery, turn)` and
carries its text in `text` chunks after it. A retried generation (a new attempt after a
timeout or a 5xx, or the same attempt re-run after its worker died: `recovery` counts
those) opens with its own `attempt` chunk: a reader is told, never handed a splice of two
answers.

Appends are fenced like commits: they are refused, and nothing is written, once the
writer's lease was taken over (a worker that lost its execution cannot interleave its
chunks with the new owner's). Chunks are scoped by tenant like everything else, and go with
their execution when it is deleted (a trigger / foreign key in the SQL stores).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

from wovyr.store.frozen import record

__all__ = ["ChunkKind", "NewChunk", "StreamAppend", "StreamChunk", "StreamStore"]

ChunkKind = Literal["attempt", "text"]


@record
class NewChunk:
    """A chunk to journal: an `attempt` marker (no text) or a piece of a generation's text."""

    activity: str
    attempt: int
    turn: int  # the generation within the attempt (an agent's turn; 1 for an `llm` answer)
    kind: ChunkKind
    text: str = ""
    recovery: int = 0  # re-runs of this attempt after it was lost with a worker


@record
class StreamChunk:
    """A journaled chunk: its number in the execution's stream, and when it was committed."""

    n: int
    activity: str
    attempt: int
    turn: int
    kind: ChunkKind
    text: str
    at: datetime
    recovery: int = 0


@record
class StreamAppend:
    """A batch of `chunks` of `tenant`'s execution `execution_id`, written `at`, by the
    holder of the lease whose fence is `fence`."""

    tenant: str
    execution_id: str
    fence: int
    chunks: Sequence[NewChunk]
    at: datetime


class StreamStore(Protocol):
    """Each execution's stream journal (see the module docstring)."""

    def append_stream(self, append: StreamAppend) -> bool:
        """Journal `append.chunks` after the execution's last one, in one transaction,
        unless the execution's fence is no longer `append.fence` (then write nothing and
        answer False)."""
        ...

    def read_stream(
        self, tenant: str, execution_id: str, after: int = 0, limit: int = 500
    ) -> list[StreamChunk]:
        """The chunks numbered above `after`, in order, at most `limit`; another tenant's
        execution has none."""
        ...
