"""Web UI sessions: a signed cookie, session-bound CSRF tokens, and the server secret.

Signing in checks an API key once with the authenticator; the cookie then carries only a
random session id, the key's id, its tenant and role and an expiry, signed with HMAC-SHA256
under a server secret. The raw key is never stored in the cookie or on the server. CSRF
tokens are an HMAC of the session id, so a form posted from another site (which cannot
read our pages) cannot carry one. Signing out records the session id in the store
(`SessionStore.revoke_session`) until the session would have expired: a replayed cookie is
refused by every server sharing the store, and after a restart.

The server secret lives in `WOVYR_HOME/ui-session.key` (`SecretFile`), read again whenever
the file changes: `rotate_secret` (`wovyr admin rotate-session-key`) replaces it, and every
server reading that file signs everyone out at its next request, without a restart. Backups
never carry it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from wovyr.files import atomic_write
from wovyr.platform.auth import role_at_least
from wovyr.store.platform import SessionStore

__all__ = [
    "Authenticator",
    "Principal",
    "SecretFile",
    "Session",
    "SessionCodec",
    "load_secret",
    "rotate_secret",
]

SECRET_FILE = "ui-session.key"
_LIFETIME = 12 * 3600
_MAX_COOKIE = 4096


class Principal(Protocol):
    """Who is calling: what `Authenticator.verify` returns."""

    @property
    def tenant(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def key_id(self) -> str: ...


class Authenticator(Protocol):
    """`wovyr.platform.auth.Authenticator` fits; a `principal_for_key(key_id)` method, when
    present, lets sessions notice revoked keys and changed roles at once."""

    def verify(self, token: str) -> Principal | None: ...


@dataclass(frozen=True)
class Session:
    """A signed-in browser: satisfies `Principal`."""

    sid: str
    key_id: str
    tenant: str
    role: str
    expires: int
    actor: str = ""  # how this person's decisions are recorded (an approval's `by`)

    def can(self, needed: str) -> bool:
        """The API's ranking (`wovyr.platform.auth`): a session may do what its key may."""
        return role_at_least(self.role, needed)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionCodec:
    """Issues and reads session cookies; remembers sessions signed out in `revoked` (the
    store), or in this process only when there is none."""

    def __init__(
        self,
        secret: bytes | SecretFile,
        *,
        lifetime_seconds: int = _LIFETIME,
        now: Callable[[], float] = time.time,
        revoked: SessionStore | None = None,
    ) -> None:
        if isinstance(secret, bytes) and len(secret) < 16:
            raise ValueError("the UI session secret must be at least 16 bytes")
        self._secret = secret
        self.lifetime_seconds = lifetime_seconds
        self._now = now
        self._revoked = revoked
        self._ended: dict[str, int] = {}  # sid -> expiry: sign-outs, when there is no store
        self._lock = threading.Lock()

    def _mac(self, purpose: str, data: str) -> bytes:
        secret = self._secret if isinstance(self._secret, bytes) else self._secret.current()
        return hmac.new(secret, f"{purpose}|{data}".encode(), hashlib.sha256).digest()

    def issue(self, principal: Principal) -> tuple[Session, str]:
        session = Session(
            sid=secrets.token_urlsafe(18),
            key_id=str(principal.key_id),
            tenant=str(principal.tenant),
            role=str(principal.role),
            expires=int(self._now()) + self.lifetime_seconds,
            actor=str(getattr(principal, "actor", "") or principal.key_id)[:200],
        )
        body = _b64(
            json.dumps(
                {
                    "sid": session.sid,
                    "kid": session.key_id,
                    "ten": session.tenant,
                    "rol": session.role,
                    "exp": session.expires,
                    "act": session.actor,
                },
                separators=(",", ":"),
                sort_keys=True,
            ).encode()
        )
        return session, f"{body}.{_b64(self._mac('session', body))}"

    def read(self, cookie: str | None) -> Session | None:
        """The session in `cookie`, or None if it is absent, forged, expired or ended."""
        if not cookie or len(cookie) > _MAX_COOKIE or cookie.count(".") != 1:
            return None
        body, mac = cookie.split(".")
        try:
            given = _unb64(mac)
            if not hmac.compare_digest(given, self._mac("session", body)):
                return None
            data: Any = json.loads(_unb64(body))
            session = Session(
                sid=str(data["sid"]),
                key_id=str(data["kid"]),
                tenant=str(data["ten"]),
                role=str(data["rol"]),
                expires=int(data["exp"]),
                actor=str(data.get("act") or data["kid"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.expires <= self._now():
            return None
        with self._lock:
            if session.sid in self._ended:
                return None
        if self._revoked is not None and self._revoked.session_revoked(session.sid):
            return None
        return session

    def end(self, session: Session) -> None:
        """Sign out: this cookie stops working (here, and wherever the store is shared) even
        if a copy of it is replayed."""
        if self._revoked is not None:  # the store remembers it, for every process
            self._revoked.revoke_session(session.sid, datetime.fromtimestamp(session.expires, UTC))
            return  # (a copy here would grow with every sign-out for a session's lifetime)
        now = self._now()
        with self._lock:
            for sid in [s for s, exp in self._ended.items() if exp <= now]:
                del self._ended[sid]
            self._ended[session.sid] = session.expires

    def csrf_token(self, session: Session) -> str:
        return _b64(self._mac("csrf", session.sid))[:32]

    def check_csrf(self, session: Session, token: str | None) -> bool:
        if not token:
            return False
        return hmac.compare_digest(token.encode(), self.csrf_token(session).encode())

    def login_token(self, nonce: str) -> str:
        """The token the sign-in form carries (double-submit: the nonce is a cookie)."""
        return _b64(self._mac("login", nonce))[:32]

    def check_login(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(token.encode(), self.login_token(nonce).encode())


class SecretFile:
    """The secret in `home/ui-session.key`, read again when the file changes (another
    inode, size or modification time: `rotate_secret` replaces it atomically), and made
    anew (`load_secret`) when it was deleted. One `stat` per use."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._secret = b""
        self.current()  # a bad file fails now, at the server's start

    def current(self) -> bytes:
        path = self.home / SECRET_FILE
        try:
            info = path.stat()
        except FileNotFoundError:
            info = None
        stamp = None if info is None else (info.st_ino, info.st_size, info.st_mtime_ns)
        if stamp is not None and stamp == self._stamp:
            return self._secret
        with self._lock:
            secret = load_secret(self.home)
            info = path.stat()
            self._stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            self._secret = secret
            return secret


def rotate_secret(home: Path) -> None:
    """Replace the session secret under `home` with a new random one (atomically, 0600):
    every session signed with the old one ends, on every server reading this file."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(home / SECRET_FILE, secrets.token_hex(32), 0o600)


def load_secret(home: Path, configured: str | bytes | None = None) -> bytes:
    """The configured secret, else the one persisted under `home` (created on first use
    with mode 0600 and published atomically, so concurrent servers agree on one)."""
    if configured:
        return configured.encode() if isinstance(configured, str) else configured
    path = home / SECRET_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read_secret(path)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    # exclusive: if another process published first, its secret is kept and used
    atomic_write(path, secrets.token_hex(32), 0o600, exclusive=True)
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    text = path.read_text(encoding="ascii").strip()
    if len(text) < 32:
        raise ValueError(f"{path} holds no usable UI session secret; delete it to regenerate")
    return text.encode()
