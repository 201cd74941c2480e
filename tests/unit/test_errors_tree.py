"""Every public exception class of Wovyr is in the one tree rooted at `WovyrError`
(`wovyr.errors`), so an edge that catches `WovyrError` prints or answers every error of
ours; the request guard's two Starlette `HTTPException`s are the named exception (the
framework answers them while a body is read)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from starlette.exceptions import HTTPException

import wovyr
from wovyr.errors import KmsError, WovyrError

# the guard raises these from inside the body read: the framework must answer them (413, 400)
_FRAMEWORK_ANSWERS = {"wovyr.server.guard.BodyTooLarge", "wovyr.server.guard.BadJson"}


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(wovyr.__path__, "wovyr."):
        if info.name == "wovyr.__main__":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_public_exception_is_in_the_tree() -> None:
    found = _public_exceptions()
    assert "wovyr.activities.base.ActivityError" in found  # the walk reached the packages
    outside = sorted(
        name
        for name, cls in found.items()
        if not issubclass(cls, WovyrError) and name not in _FRAMEWORK_ANSWERS
    )
    assert outside == []
    for name in _FRAMEWORK_ANSWERS:
        assert issubclass(found[name], HTTPException), name


def test_classes_that_joined_the_tree_keep_their_messages_and_their_other_bases() -> None:
    from wovyr.activities.base import ActivityError, NonRetryableError
    from wovyr.activities.tool_schema import InvalidToolArguments
    from wovyr.store.codec import PayloadRefused
    from wovyr.store.sealing import NotSealed, PayloadKeyShredded, PayloadUndecryptable

    error = NonRetryableError("no such order", type="OrderMissing")
    assert (str(error), error.message, error.type, error.retryable) == (
        "no such order",
        "no such order",
        "OrderMissing",
        False,
    )
    assert isinstance(error, ActivityError) and error.args == ("no such order",)
    refused = PayloadRefused("PayloadTooLarge", "the output is 9 bytes")
    assert (str(refused), refused.message, refused.type) == (
        "the output is 9 bytes",
        "the output is 9 bytes",
        "PayloadTooLarge",
    )
    assert issubclass(InvalidToolArguments, ValueError) and issubclass(NotSealed, ValueError)
    assert issubclass(PayloadKeyShredded, KmsError) and issubclass(PayloadUndecryptable, KmsError)
