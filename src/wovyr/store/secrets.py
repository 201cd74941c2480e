"""Records and contract of the KMS and secrets tables (`SecretStore`).

Nothing here is ever plaintext: a data key row holds a tenant's data key *wrapped*
(encrypted) by the root key, with the id (fingerprint) of the root key that wrapped it; a
secret row holds the value encrypted with its tenant's data key. Encryption and the root key
live in `wovyr.platform.kms`; the store only keeps bytes. A KMS root row records, per root key
id, when that key was first used, when its escrow was acknowledged and when data keys were
last re-wrapped onto it (`wovyr admin kms status`).

Re-wrapping (`rewrap_data_key`) is a compare-and-set on the wrapping key's id, one row per
transaction: a rotation killed at any point leaves every row wrapped by the old root key or
by the new one, and the row says which.

The audited writes (`put_secret`, `delete_secret`, `shred_data_keys`, `put_kms_root`) take
`audit=`, appended to the audit chain in the change's transaction (`wovyr.store.audit`):
`delete_secret` appends it only when a secret was deleted.

**Scrubbing** (`scrub_data_keys`, after a shred): a database keeps earlier versions of a row
after it changed (SQLite: freed space in its pages, and whole pages in the WAL until a
checkpoint; PostgreSQL: dead row versions until a vacuum, and the write-ahead log), and with
the root key an earlier version of a data key's row opens what the shred destroyed. The
store removes what it can from its own files and says what it could not.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record

__all__ = [
    "SHREDDED",
    "DataKeyRecord",
    "KmsRootRecord",
    "NewSecret",
    "SecretRecord",
    "SecretStore",
]

#: The `root_id` of a shredded data key (its `wrapped` is empty): the versions stay, so a
#: tenant's next data key gets a higher one, and what the shredded keys sealed never opens.
SHREDDED = "shredded"


@record
class DataKeyRecord:
    tenant: str
    version: int  # the data key's version (bound into every ciphertext it makes)
    wrapped: bytes  # nonce + AES-256-GCM(root key, data key)
    root_id: str  # the id of the root key that wrapped it
    created_at: datetime


@record
class SecretRecord:
    tenant: str
    name: str
    version: int  # 1 for the first value, +1 for each `set` after it
    ciphertext: bytes  # nonce + AES-256-GCM(data key, value)
    key_version: int  # the tenant's data key version that encrypted it
    created_at: datetime
    updated_at: datetime
    updated_by: str = ""


@record
class NewSecret:
    """A new value of `tenant`'s secret `name`, sealed (`ciphertext`) under the tenant's data
    key `key_version`, set `at` by `by`."""

    tenant: str
    name: str
    ciphertext: bytes
    key_version: int
    at: datetime
    by: str


@record
class KmsRootRecord:
    root_id: str
    created_at: datetime  # first used with this store
    escrowed_at: datetime | None = None  # `wovyr admin kms escrowed`
    escrowed_by: str = ""
    rotated_at: datetime | None = None  # when a rotation onto it completed


class SecretStore(Protocol):
    # --- data keys -----------------------------------------------------------------------

    def add_data_key(self, record: DataKeyRecord) -> DataKeyRecord:
        """Insert `record` unless (tenant, version) exists; return the row stored now (two
        processes creating a tenant's first key at once agree on one)."""
        ...

    def data_key(self, tenant: str, version: int | None = None) -> DataKeyRecord | None:
        """`tenant`'s data key of `version` (None: its latest)."""
        ...

    def list_data_keys(self) -> list[DataKeyRecord]:
        """Every tenant's data keys, by tenant and version."""
        ...

    def rewrap_data_key(
        self, tenant: str, version: int, old_root_id: str, wrapped: bytes, root_id: str
    ) -> bool:
        """Replace the wrapping of (tenant, version) if it is still by `old_root_id`; False
        when it is not (already re-wrapped, or gone)."""
        ...

    def shred_data_keys(self, tenant: str, *, audit: AuditEntry | None = None) -> int:
        """Destroy every data key of `tenant` (each row kept as a `SHREDDED` tombstone with
        nothing wrapped); return how many were destroyed now. `audit` is appended even when
        none was left (the shred was asked for)."""
        ...

    def scrub_data_keys(self) -> list[str]:
        """Remove earlier versions of the data keys' rows (a shredded key's, a key wrapped by
        a retired root key) from the store's own files as far as the database allows;
        return what may still hold one ([]: nothing). SQLite: the table is written anew
        with `secure_delete` on (freed space zeroed) and the WAL checkpointed and truncated;
        PostgreSQL: `VACUUM` of the table (its write-ahead log keeps them regardless)."""
        ...

    # --- secrets -------------------------------------------------------------------------

    def put_secret(self, new: NewSecret, *, audit: AuditEntry | None = None) -> SecretRecord:
        """Insert or replace the value of (tenant, name), its version one more than the
        last; return the row."""
        ...

    def get_secret(self, tenant: str, name: str) -> SecretRecord | None: ...

    def list_secrets(self, tenant: str) -> list[SecretRecord]:
        """`tenant`'s secrets, by name."""
        ...

    def delete_secret(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        """False if `tenant` has no secret `name` (and `audit` is not appended)."""
        ...

    # --- root keys -----------------------------------------------------------------------

    def kms_root(self, root_id: str) -> KmsRootRecord | None: ...

    def put_kms_root(self, record: KmsRootRecord, *, audit: AuditEntry | None = None) -> None:
        """Insert or replace the row of `record.root_id`."""
        ...
