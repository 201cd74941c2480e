"""Recorded model transcripts: the exchanges of a session (each request's body and the
answer it got), saved as JSON and replayed by the scripted model.

    with ScriptedLLM(replies, pick="turn") as llm:     # or a recording of a real session
        ...run the agent...
        llm.transcript().save(Path("tests/transcripts/research.json"))

    with ScriptedLLM(replay=Transcript.load(Path("tests/transcripts/research.json"))) as llm:
        ...run it again: every model call gets the recorded answer...

A request is answered by the recorded exchange whose path and body are identical (the
body compared as JSON, key order aside), so a call made again after a crash gets the same
answer, and a run that drifts from the recording (another prompt, another tool result)
gets a 400 `transcript_mismatch` naming the closest exchange and the first difference,
which fails the step with `ProviderBadRequest` and says why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "Answer", "Transcript"]

FORMAT = "wovyr-transcript/1"


@dataclass(frozen=True)
class Answer:
    """What the model sends back: a status, headers and a body, or (a stream) SSE events
    sent one after the other, `pause` seconds apart."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    events: tuple[bytes, ...] | None = None
    pause: float = 0.0

    @property
    def content(self) -> bytes:
        """The whole body as sent (a stream's events joined)."""
        return b"".join(self.events) if self.events is not None else self.body

    def json(self) -> Any:
        return json.loads(self.content)


def _canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Transcript:
    """Exchanges `{path, request, status, headers?, content_type, response}` (`response`
    the answer's body as text: a JSON document or a recorded SSE stream)."""

    exchanges: tuple[dict[str, Any], ...]

    def __len__(self) -> int:
        return len(self.exchanges)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.exchanges)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "exchanges": list(self.exchanges)}

    @classmethod
    def from_json(cls, data: Any) -> Transcript:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a transcript: expected an object with format {FORMAT!r}")
        exchanges = data.get("exchanges")
        if not isinstance(exchanges, list) or not all(
            isinstance(e, dict) and {"path", "request", "status", "response"} <= e.keys()
            for e in exchanges
        ):
            raise ValueError("a transcript's exchanges are {path, request, status, response}")
        return cls(tuple(exchanges))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: Path) -> Transcript:
        return cls.from_json(json.loads(path.read_text()))

    def answer(self, path: str, body: Any) -> Answer:
        """The recorded answer to an identical request, else a 400 `transcript_mismatch`."""
        wanted = _canonical(body)
        for exchange in self.exchanges:
            if exchange["path"] == path and _canonical(exchange["request"]) == wanted:
                return Answer(
                    int(exchange["status"]),
                    str(exchange["response"]).encode(),
                    tuple((exchange.get("headers") or {}).items()),
                    str(exchange.get("content_type") or "application/json"),
                )
        error = {"type": "transcript_mismatch", "message": self.mismatch(path, body)}
        return Answer(400, json.dumps({"error": error}).encode())

    def mismatch(self, path: str, body: Any) -> str:
        """Why no recorded exchange answers this request: the closest one (most of the
        conversation in common) and the first place they differ."""
        same_path = [(n, e) for n, e in enumerate(self.exchanges) if e["path"] == path]
        if not same_path:
            return f"the transcript holds no request to {path}"

        def common(exchange: dict[str, Any]) -> int:
            mine = (body or {}).get("messages") if isinstance(body, dict) else None
            theirs = (exchange["request"] or {}).get("messages")
            count = 0
            for a, b in zip(mine or [], theirs or [], strict=False):
                if a != b:
                    break
                count += 1
            return count

        n, closest = max(same_path, key=lambda item: common(item[1]))
        where = _first_difference(closest["request"], body, "")
        return (
            f"no recorded exchange matches this request; the closest, exchange {n}, "
            f"differs at {where or '(root)'}"
        )


def _first_difference(recorded: Any, sent: Any, where: str) -> str | None:
    if isinstance(recorded, dict) and isinstance(sent, dict):
        for key in sorted(recorded.keys() | sent.keys()):
            if key not in recorded or key not in sent:
                return f"{where}.{key}".lstrip(".")
            found = _first_difference(recorded[key], sent[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(sent, list):
        for i, (a, b) in enumerate(zip(recorded, sent, strict=False)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found is not None:
                return found
        return None if len(recorded) == len(sent) else f"{where} (length)".lstrip(".")
    return None if recorded == sent else where.lstrip(".")
