"""`secret_forms` and `scrub`: a resolved secret is masked in the encodings it is likely to
be echoed in - plain, JSON-escaped, URL-encoded as a component, a form value, a path (as
urllib and as httpx and browsers write one) or a query, base64 (standard and URL-safe, on
its own or inside a longer encoded text such as `Basic user:secret`), hex - and ordinary
text around it is left alone."""

from __future__ import annotations

import base64
import binascii
import json
from urllib.parse import quote, quote_plus

import httpx
import pytest

from wovyr.activities.redact import MASK, MIN_SECRET_CHARS, scrub, secret_forms

SECRETS = [
    'lg-9c1e4f/+"&=z c~a7n',  # characters every encoding treats differently
    "plainalnum12",
    "päss wörd/ü{x}`",  # non-ASCII, and what a path encodes and a query does not
    "12345678",
]


def echoes(secret: str) -> dict[str, str]:
    """`secret` as a careless handler or an echoing server shows it, inside other text."""
    raw = secret.encode()
    url = httpx.URL(f"https://api.example/v1/{secret}/send")
    params = httpx.URL("https://api.example/v1", params={"token": secret})
    return {
        "plain": f"token={secret};",
        "json": json.dumps({"token": secret}),
        "component": f"/cb?next={quote(secret, safe='')}",
        "form": f"a=1&token={quote_plus(secret)}&b=2",
        "urllib path": f"https://api.example/{quote(secret)}/x",
        "httpx path": str(url),
        "httpx raw path": url.raw_path.decode(),
        "httpx params": str(params),
        "base64": f"b64:{base64.b64encode(raw).decode()}.",
        "urlsafe base64": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "basic auth": "Basic " + base64.b64encode(b"user:" + raw).decode(),
        "basic auth 2": "Basic " + base64.b64encode(b"usr:" + raw).decode(),
        "basic auth 3": "Basic " + base64.b64encode(b"me:" + raw).decode(),
        "base64 with suffix": base64.b64encode(raw + b"@host").decode(),
        "hex": f"0x{raw.hex()}",
        "HEX": binascii.hexlify(raw).decode().upper(),
    }


@pytest.mark.parametrize("secret", SECRETS)
def test_every_listed_encoding_of_a_secret_is_masked(secret: str) -> None:
    forms = secret_forms([secret])
    shown = scrub(echoes(secret), forms)
    for name, text in shown.items():
        assert MASK in text, (name, text)
        left = text.replace(MASK, "\0")
        for form in forms:
            assert form not in left, (name, form, text)
    # and each echo's own encoding of the secret is gone
    raw = secret.encode()
    for name, text in shown.items():
        assert secret not in text and base64.b64encode(raw).decode().rstrip("=") not in text
        assert raw.hex() not in text.lower(), name


def test_text_around_a_secret_is_kept() -> None:
    forms = secret_forms(["plainalnum12"])
    assert scrub({"k": "a plainalnum12 b"}, forms) == {"k": f"a {MASK} b"}
    assert scrub("nothing to hide here, 1234 abcd", forms) == "nothing to hide here, 1234 abcd"
    assert all(len(form) >= 4 for form in forms)


def test_the_shortest_secret_that_may_be_stored_has_no_form_too_short_to_hunt() -> None:
    secret = "a" * MIN_SECRET_CHARS
    forms = secret_forms([secret])
    assert forms and min(len(f) for f in forms) >= 6
