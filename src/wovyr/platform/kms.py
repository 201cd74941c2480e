"""The key management service: the root key, tenants' data keys, sealing and opening.

**The root key** (32 bytes) comes from `WOVYR_KMS_ROOT_KEY` (64 hex digits): the production
mode. Without it, a development key is generated once into `WOVYR_HOME/kms-root.key`
(written with `atomic_write`, mode 0600) and every process that loads it warns loudly that
the key must be escrowed: whoever loses it loses every secret. A key of the wrong length or
not hex is a clear error, never a guess. The key itself is never logged or shown; its id
(`key_id`, 16 hex digits of a hash of a key derived from it) names it in the store and in
`wovyr admin kms status`.

**Envelope encryption**: each tenant has a data key (32 random bytes, created on first
use), stored wrapped by the root key with the id of the root key that wrapped it. Values are
sealed with AES-256-GCM under the tenant's data key, with a random 96-bit nonce and
associated data binding the tenant, the object's kind, its name and the data key's version,
so a ciphertext copied to another tenant, kind or name does not open. A sealed blob is
`b"\\x01" + nonce + ciphertext`.

**Derived keys**: `derive_key(purpose)` is HKDF-SHA256 of the root key for one purpose (32
bytes). It changes with the root key: a key that must outlive a rotation (the audit
anchors') comes from a data key instead (`wovyr.platform.secrets.audit_anchor_key`).

**Audit**: `record_escrow` (`kms.escrowed`) and the final step of `rotate` (`kms.rotate`,
the write that marks the rotation done) take an `actor` and append their record in that
write's transaction. The KMS is the host's, not a tenant's: their records have tenant `""`
(listed by `wovyr admin audit list`, shown to no tenant over the API).

**Rotation** (`rotate`): re-wraps every data key under a new root key, one row per
transaction, each a compare-and-set on the wrapping key's id. A rotation killed at any point
leaves each data key wrapped by the old key or by the new one (the row says which); a
process that knows both (the *next* key: `WOVYR_KMS_NEW_ROOT_KEY`, or in development
`kms-root.key.next`) reads all of them, and running the rotation again finishes it. Only data
keys are re-wrapped: the values they seal are untouched, so a rotation costs one small write
per tenant.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from wovyr.errors import KmsError
from wovyr.files import atomic_write
from wovyr.settings import read
from wovyr.store.audit import AuditEntry
from wovyr.store.secrets import SHREDDED, DataKeyRecord, KmsRootRecord, SecretStore

__all__ = [
    "DEV_KEY_FILE",
    "HOST_TENANT",
    "NEW_ROOT_ENV",
    "NEXT_KEY_FILE",
    "ROOT_ENV",
    "Kms",
    "KmsStatus",
    "RootKey",
    "Rotation",
    "kms_status",
    "load_kms",
    "parse_root_key",
    "record_escrow",
    "rotate",
    "rotate_development",
]

log = logging.getLogger("wovyr.kms")

ROOT_ENV = "WOVYR_KMS_ROOT_KEY"
NEW_ROOT_ENV = "WOVYR_KMS_NEW_ROOT_KEY"
DEV_KEY_FILE = "kms-root.key"
NEXT_KEY_FILE = "kms-root.key.next"
KEY_BYTES = 32
NONCE_BYTES = 12
_FORMAT = b"\x01"
Mode = Literal["production", "development"]


def parse_root_key(text: str, source: str) -> bytes:
    """32 bytes from 64 hex digits; `KmsError` naming `source` (never echoing the text)."""
    cleaned = text.strip()
    try:
        key = bytes.fromhex(cleaned)
    except ValueError:
        raise KmsError(
            f"{source} is not a hex string",
            hint="a root key is 64 hex digits (32 bytes): python -c 'import secrets; "
            "print(secrets.token_hex(32))'",
        ) from None
    if len(key) != KEY_BYTES:
        raise KmsError(
            f"{source} holds {len(key)} bytes; a root key is {KEY_BYTES} bytes "
            f"({2 * KEY_BYTES} hex digits)",
            hint="generate one with: python -c 'import secrets; print(secrets.token_hex(32))'",
        )
    return key


def _hkdf(key: bytes, purpose: str) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(),
        length=KEY_BYTES,
        salt=None,
        info=b"wovyr/" + purpose.encode("utf-8"),
    ).derive(key)


@dataclass(frozen=True)
class RootKey:
    """A root key and its id; `repr` never shows the key."""

    key: bytes = field(repr=False)
    source: str = ""  # where it came from (an env variable's name or a file), for messages

    @property
    def key_id(self) -> str:
        return hashlib.sha256(_hkdf(self.key, "key-id")).hexdigest()[:16]

    @classmethod
    def generate(cls, source: str = "") -> RootKey:
        return cls(secrets.token_bytes(KEY_BYTES), source)


def _aad(tenant: str, kind: str, name: str, key_version: int) -> bytes:
    return json.dumps(["wovyr", tenant, kind, name, key_version], separators=(",", ":")).encode()


def _seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES)
    return _FORMAT + nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _open(key: bytes, blob: bytes, aad: bytes) -> bytes | None:
    if len(blob) < 1 + NONCE_BYTES + 16 or blob[:1] != _FORMAT:
        return None
    nonce, body = blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :]
    try:
        return AESGCM(key).decrypt(nonce, body, aad)
    except InvalidTag:
        return None


class Kms:
    """The root key (and, during a rotation, the next one) of one process."""

    def __init__(
        self,
        root: RootKey,
        mode: Mode,
        *,
        next_key: RootKey | None = None,
        path: Path | None = None,
    ) -> None:
        self.root = root
        self.mode: Mode = mode
        self.next_key = next_key if next_key is None or next_key.key_id != root.key_id else None
        self.path = path  # the development key file
        self._keys = {root.key_id: root}
        if self.next_key is not None:
            self._keys[self.next_key.key_id] = self.next_key
        self._unwrapped: dict[tuple[str, int, str, bytes], bytes] = {}

    def __repr__(self) -> str:
        return f"Kms(mode={self.mode!r}, key_id={self.key_id!r})"

    @property
    def key_id(self) -> str:
        return self.root.key_id

    @property
    def wrapping(self) -> RootKey:
        """The key new data keys are wrapped by: the next one while a rotation is under way."""
        return self.next_key or self.root

    def derive_key(self, purpose: str) -> bytes:
        """A 32-byte key for `purpose` (HKDF-SHA256 of the root key)."""
        if not purpose:
            raise ValueError("a derived key needs a purpose")
        return _hkdf(self.root.key, purpose)

    # --- data keys -----------------------------------------------------------------------

    def wrap(self, tenant: str, version: int, data_key: bytes, by: RootKey | None = None) -> bytes:
        key = by or self.wrapping
        return _seal(key.key, data_key, _aad(tenant, "data-key", "", version))

    def unwrap(self, record: DataKeyRecord) -> bytes:
        """The data key of `record`; `KmsError` when this process lacks the root key that
        wrapped it, or the wrapped key does not open."""
        cache_key = (record.tenant, record.version, record.root_id, record.wrapped)
        known = self._unwrapped.get(cache_key)
        if known is not None:
            return known
        if record.root_id == SHREDDED:
            raise KmsError(
                f"the data key of tenant {record.tenant!r} (version {record.version}) was "
                "shredded: what it sealed is gone for good",
                hint="set the secret again",
            )
        root = self._keys.get(record.root_id)
        if root is None:
            raise KmsError(
                f"the data key of tenant {record.tenant!r} is wrapped by root key "
                f"{record.root_id}, and this process has root key {self.key_id}",
                hint=f"start it with the root key this store was sealed with ({ROOT_ENV}); "
                "during a rotation, also give the new one in " + NEW_ROOT_ENV,
            )
        opened = _open(
            root.key, record.wrapped, _aad(record.tenant, "data-key", "", record.version)
        )
        if opened is None or len(opened) != KEY_BYTES:
            raise KmsError(
                f"the data key of tenant {record.tenant!r} (version {record.version}) does "
                "not open: its stored form is corrupt",
            )
        self._unwrapped[cache_key] = opened
        return opened

    def new_data_key(self, tenant: str, version: int, at: datetime) -> DataKeyRecord:
        data_key = secrets.token_bytes(KEY_BYTES)
        wrapped = self.wrap(tenant, version, data_key)
        return DataKeyRecord(tenant, version, wrapped, self.wrapping.key_id, at)

    # --- values --------------------------------------------------------------------------

    def seal(
        self, data_key: bytes, tenant: str, kind: str, name: str, key_version: int, value: bytes
    ) -> bytes:
        return _seal(data_key, value, _aad(tenant, kind, name, key_version))

    def open(
        self, data_key: bytes, tenant: str, kind: str, name: str, key_version: int, blob: bytes
    ) -> bytes:
        opened = _open(data_key, blob, _aad(tenant, kind, name, key_version))
        if opened is None:
            raise KmsError(
                f"the {kind} {name!r} of tenant {tenant!r} does not decrypt: its stored "
                "form is corrupt or was not sealed for it",
                hint="set it again",
            )
        return opened

    def register(self, store: SecretStore, at: datetime) -> KmsRootRecord:
        """The store's row of this root key (added the first time the key is used)."""
        record = store.kms_root(self.key_id)
        if record is None:
            record = KmsRootRecord(self.key_id, at)
            store.put_kms_root(record)
        return record


def _read_key_file(path: Path) -> RootKey:
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KmsError(f"cannot read the KMS key file {path}: {exc}") from None
    return RootKey(parse_root_key(text, f"the KMS key file {path}"), str(path))


def load_kms(
    home: Path, env: Mapping[str, str] | None = None, *, warn: bool = True, create: bool = True
) -> Kms:
    """The KMS of this process: production when `WOVYR_KMS_ROOT_KEY` is set, else the
    development key under `home` (generated on first use, unless not `create`: a command
    that only checks, like `wovyr admin audit verify`, gets `KmsError` instead of a new
    key). Warns (log `wovyr.kms`) that a development key must be escrowed, every time."""
    configured = read(ROOT_ENV, env)  # or WOVYR_KMS_ROOT_KEY_FILE's file
    next_text = read(NEW_ROOT_ENV, env)
    next_key = RootKey(parse_root_key(next_text, NEW_ROOT_ENV), NEW_ROOT_ENV) if next_text else None
    if configured:
        return Kms(
            RootKey(parse_root_key(configured, ROOT_ENV), ROOT_ENV), "production", next_key=next_key
        )
    path = home / DEV_KEY_FILE
    if not path.exists() and not create:
        raise KmsError(
            f"no root key: {ROOT_ENV} is not set and there is no development key {path}",
            hint=f"set {ROOT_ENV} to the store's root key (or put its key file there)",
        )
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(path, secrets.token_hex(KEY_BYTES) + "\n", 0o600, exclusive=True)
    root = _read_key_file(path)
    pending = home / NEXT_KEY_FILE
    if next_key is None and pending.exists():
        next_key = _read_key_file(pending)
    kms = Kms(root, "development", next_key=next_key, path=path)
    if warn:
        log.warning(
            "KMS: development root key %s in %s (no %s). It alone decrypts every secret of "
            "this store: ESCROW IT (copy it somewhere safe, apart from the database), and in "
            "production set %s instead",
            kms.key_id,
            path,
            ROOT_ENV,
            ROOT_ENV,
        )
    return kms


# --- status, escrow, rotation ----------------------------------------------------------------


@dataclass(frozen=True)
class KmsStatus:
    mode: Mode
    key_id: str
    key_file: str | None
    next_key_id: str | None
    created_at: datetime | None
    escrowed_at: datetime | None
    escrowed_by: str
    rotated_at: datetime | None
    data_keys: dict[str, int]  # root key id -> data keys it wraps

    def to_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "mode": self.mode,
            "key_id": self.key_id,
            "key_file": self.key_file,
            "next_key_id": self.next_key_id,
            "first_used_at": iso(self.created_at),
            "escrowed_at": iso(self.escrowed_at),
            "escrowed_by": self.escrowed_by or None,
            "rotated_at": iso(self.rotated_at),
            "data_keys": dict(sorted(self.data_keys.items())),
        }


def kms_status(kms: Kms, store: SecretStore) -> KmsStatus:
    record = store.kms_root(kms.key_id)
    counts: dict[str, int] = {}
    for key in store.list_data_keys():
        counts[key.root_id] = counts.get(key.root_id, 0) + 1
    return KmsStatus(
        kms.mode,
        kms.key_id,
        None if kms.path is None else str(kms.path),
        None if kms.next_key is None else kms.next_key.key_id,
        record.created_at if record else None,
        record.escrowed_at if record else None,
        record.escrowed_by if record else "",
        record.rotated_at if record else None,
        counts,
    )


#: The tenant of the KMS's audit records: the root key is the host's, no tenant's.
HOST_TENANT = ""


def record_escrow(
    kms: Kms, store: SecretStore, *, by: str, at: datetime, actor: str | None = None
) -> KmsRootRecord:
    """Record that the root key in use was escrowed (by `by`, at `at`). With an `actor`,
    `kms.escrowed` is appended to the audit chain in the same transaction."""
    record = replace(kms.register(store, at), escrowed_at=at, escrowed_by=by)
    audit = None
    if actor is not None:
        audit = AuditEntry(at, HOST_TENANT, actor, "kms.escrowed", kms.key_id, {"by": by})
    store.put_kms_root(record, audit=audit)
    return record


@dataclass(frozen=True)
class Rotation:
    old_key_id: str
    new_key_id: str
    rewrapped: int  # data keys this run re-wrapped
    already: int  # data keys found under the new key already (an earlier, killed run)


def rotate(
    kms: Kms,
    store: SecretStore,
    new: RootKey,
    *,
    at: datetime,
    step: Callable[[DataKeyRecord], None] | None = None,
    actor: str | None = None,
) -> Rotation:
    """Re-wrap every data key under `new`, one compare-and-set per row (see the module
    docstring), until none is left under another key; `step` is called after each row.
    Running it again after a kill finishes the job. With an `actor`, `kms.rotate` is
    appended to the audit chain in the transaction of the last write, the one that marks
    the rotation done (a killed run leaves no record; the run that finishes it does)."""
    both = Kms(kms.root, kms.mode, next_key=new, path=kms.path)
    previous = store.kms_root(new.key_id)
    if previous is None:
        store.put_kms_root(KmsRootRecord(new.key_id, at))
    already = sum(1 for k in store.list_data_keys() if k.root_id == new.key_id)
    rewrapped = 0
    while True:  # again until none is left: a data key created meanwhile is caught too
        pending = [k for k in store.list_data_keys() if k.root_id not in (new.key_id, SHREDDED)]
        if not pending:
            break
        for record in pending:
            data_key = both.unwrap(record)
            wrapped = both.wrap(record.tenant, record.version, data_key, by=new)
            if store.rewrap_data_key(
                record.tenant, record.version, record.root_id, wrapped, new.key_id
            ):
                rewrapped += 1
            if step is not None:
                step(record)
    done = store.kms_root(new.key_id) or KmsRootRecord(new.key_id, at)
    audit = None
    if actor is not None:
        details = {"from": kms.key_id, "rewrapped": rewrapped, "already": already}
        audit = AuditEntry(at, HOST_TENANT, actor, "kms.rotate", new.key_id, details)
    store.put_kms_root(replace(done, rotated_at=at), audit=audit)
    return Rotation(kms.key_id, new.key_id, rewrapped, already)


def rotate_development(
    kms: Kms,
    store: SecretStore,
    *,
    at: datetime,
    step: Callable[[DataKeyRecord], None] | None = None,
    actor: str | None = None,
) -> Rotation:
    """A rotation of a development key file: the new key is written to `kms-root.key.next`
    first (or the one a killed run left there is reused), the data keys are re-wrapped, the
    new key replaces `kms-root.key`, and the `.next` file goes. Killed anywhere, the files
    hold every key a data key is wrapped by."""
    assert kms.path is not None
    pending = kms.path.parent / NEXT_KEY_FILE
    if pending.exists():
        new = _read_key_file(pending)
    else:
        new = RootKey.generate(str(pending))
        atomic_write(pending, new.key.hex() + "\n", 0o600)
    result = rotate(kms, store, new, at=at, step=step, actor=actor)
    atomic_write(kms.path, new.key.hex() + "\n", 0o600)
    pending.unlink(missing_ok=True)
    return result
