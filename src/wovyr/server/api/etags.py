"""Entity tags for the objects people edit from two places at once (definitions, schedules,
a tenant's policy, providers): `GET` answers with an `ETag`, and a write sent with
`If-Match` is refused with a 412 when the object changed since that `ETag` was read (or no
longer exists), so a stale editor cannot overwrite someone else's change unseen.

A tag is a hash of what the object holds as the API shows it, without what changes on
its own (a schedule's next fire times, counts and recent runs). `If-Match: *` asks only
that the object exists. The check reads the object just before the write: two writers
that both read the same tag and write within the same instant can both pass it (the store
has no compare-and-set for these objects).
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, TypeVar

from fastapi import Header, Response
from pydantic import BaseModel

from wovyr.server.problems import ApiProblem, problem_responses

__all__ = [
    "ETAG_HEADER",
    "PRECONDITION",
    "TAGGED",
    "IfMatch",
    "check_if_match",
    "check_unchanged",
    "etag_of",
    "tag",
]

M = TypeVar("M", bound=BaseModel)

IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        max_length=1000,
        description="The `ETag` the change was based on (or `*`): a 412 when the object "
        "changed since (or does not exist).",
    ),
]
ETAG_HEADER: dict[str, Any] = {
    "ETag": {
        "description": "The object's entity tag: send it back as `If-Match` on a change.",
        "schema": {"type": "string"},
    }
}
# The error responses of a route that takes `If-Match` (add to its `responses`).
PRECONDITION = problem_responses(412)
# The `responses` of a route that answers with the object's `ETag`.
TAGGED: dict[int | str, dict[str, Any]] = {200: {"headers": ETAG_HEADER}}


def etag_of(model: BaseModel, exclude: set[str] | None = None) -> str:
    """A strong tag of `model` as the API shows it (`exclude`: fields that move by
    themselves)."""
    text = model.model_dump_json(exclude=exclude)
    return '"' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def tag(response: Response, model: M, exclude: set[str] | None = None) -> M:
    """`model`, its tag set as the response's `ETag`."""
    response.headers["ETag"] = etag_of(model, exclude)
    return model


def check_if_match(if_match: str | None, current: str | None) -> None:
    """Refuse (412) unless `if_match` is absent, or names `current` (the object's tag now;
    None: there is no object), or is `*` and the object exists."""
    if if_match is None:
        return
    wanted = {t.strip().removeprefix("W/") for t in if_match.split(",") if t.strip()}
    if current is not None and ("*" in wanted or current in wanted):
        return
    detail = (
        "The object does not exist."
        if current is None
        else "The object changed since that ETag was read: read it again, then change it."
    )
    raise ApiProblem(412, detail, headers={"ETag": current} if current else None)


def check_unchanged(
    if_match: str | None, current: BaseModel | None, exclude: set[str] | None = None
) -> None:
    """`check_if_match` against the tag of `current`, the object as the API shows it now
    (None: there is no object; `exclude` as for `etag_of`)."""
    check_if_match(if_match, None if current is None else etag_of(current, exclude))
