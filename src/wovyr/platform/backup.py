"""Backups of an installation: a consistent snapshot of the store plus the files it needs.

A backup is a folder (`wovyr admin backup DEST`):

- `store.sqlite` (SQLite's online backup API) or `store.pgdump` (`pg_dump -Fc` of the
  store's schema): one consistent moment, taken while writers keep committing
  (`wovyr.store.capabilities.Snapshotting`);
- the development KMS root key `kms-root.key` only when asked (`include_root_key`): a
  backup that holds both the database and its root key opens every secret, so by default
  the root key comes from escrow (the manifest says where it is expected to come from).
  The web UI's session key is in none (whoever read a backup could sign cookies);
- `manifest.json`, written last with `atomic_write` and signed (`wovyr.platform.archive`:
  the manifest, its signature, checksums and encryption with a passphrase).

The folder is built as `.<name>.partial-*` beside DEST and renamed at the end: a backup
that was interrupted never looks complete.

**Verify** checks the manifest, every file's size and SHA-256, the signature when a key
for it is at hand, the snapshot's integrity (`PRAGMA integrity_check` / `pg_restore
--list`) and, for SQLite, that a copy's audit chain verifies and holds the recorded head.
**Restore** refuses, before it touches anything, a newer format or schema, a damaged file,
an unencrypted backup when a passphrase is given or the host requires encryption, a
manifest no key here shows to be genuine (unless `allow_unsigned`), a root key that does
not open the backup's data keys (a backup's root key never replaces the host's), a
non-empty target (unless forced) and a target a server or worker holds (even forced); it
then stages the store (a temporary file, or the target schema renamed aside), migrates and
checks it (data keys unwrap, audit chain verifies up to the recorded head), records
`backup.restore` in the audit chain, and only then swaps it in and writes the root key
file when the host had none.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityContext, ActivityRegistry, NonRetryableError
from wovyr.errors import BackupRefused, ConfigError, Conflict, KmsError
from wovyr.files import atomic_write
from wovyr.platform.archive import (
    CHUNK,
    ENC_SUFFIX,
    FORMAT,
    FORMAT_VERSION,
    HOME_FILES,
    LEGACY_HOME_FILES,
    MANIFEST,
    SCRYPT,
    STORE_FILES,
    Manifest,
    check_sound,
    derive_key,
    encrypt_file,
    in_clear,
    passphrase_signing_key,
    read_manifest,
    sha256_file,
    unlock,
    wovyr_version,
)
from wovyr.platform.audit import verify_chain
from wovyr.platform.kms import DEV_KEY_FILE, HOST_TENANT, ROOT_ENV, Kms, RootKey, parse_root_key
from wovyr.platform.secrets import Secrets, find_audit_anchor_key
from wovyr.settings import read
from wovyr.store import Store, open_store
from wovyr.store.audit import AuditEntry
from wovyr.store.backends import backend_for
from wovyr.store.capabilities import Snapshotting, capabilities
from wovyr.store.secrets import SHREDDED
from wovyr.store.snapshots import (
    check_snapshot,
    snapshot_store,
    stage_restore,
    target_held,
    target_in_use,
)

__all__ = [
    "BACKUP_TOOL",
    "BACKUP_WORKFLOW",
    "BACKUP_WORKFLOW_YAML",
    "FORMAT_VERSION",
    "HOME_FILES",
    "MANIFEST",
    "PASSPHRASE_ENV",
    "PLATFORM_TENANT",
    "REQUIRE_ENCRYPTION_ENV",
    "BackupReport",
    "Manifest",
    "RestoreReport",
    "VerifyReport",
    "backup_activity",
    "backup_name",
    "prune_backups",
    "read_manifest",
    "read_passphrase",
    "register_backup_activity",
    "restore_backup",
    "take_backup",
    "verify_backup",
]

log = logging.getLogger("wovyr.backup")

_PREFIX = "wovyr-backup-"
#: Where a passphrase comes from when no file is given, and the host's policy that every
#: backup must be encrypted (read by the edges, passed in).
PASSPHRASE_ENV = "WOVYR_BACKUP_PASSPHRASE"
REQUIRE_ENCRYPTION_ENV = "WOVYR_BACKUP_REQUIRE_ENCRYPTION"
#: A KMS and where its root key came from: environment, home (the host's) or backup.
RootKeySource = tuple[Kms, str]

# --- taking a backup -----------------------------------------------------------------------


def backup_name(at: datetime) -> str:
    """The folder name of a scheduled backup taken at `at` (sorts by time)."""
    return _PREFIX + at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")


@dataclass(frozen=True)
class BackupReport:
    path: Path
    manifest: Manifest
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        data = self.manifest.data
        return {
            "path": str(self.path),
            "bytes": self.bytes,
            "store": data["store"],
            "created_at": data["created_at"],
            "audit_head": data["audit_head"],
            "encrypted": self.manifest.encryption is not None,
            "root_key": data["kms"]["source"],
            "files": [{k: f[k] for k in ("name", "size", "sha256")} for f in data["files"]],
        }


def _root_source(kms: Kms | None, included: bool) -> dict[str, Any]:
    if kms is None:
        return {"mode": None, "key_id": None, "source": "none", "hint": "no KMS was loaded"}
    if kms.mode == "production":
        hint = f"set {ROOT_ENV} to the escrowed root key {kms.key_id} before restoring"
        return {"mode": kms.mode, "key_id": kms.key_id, "source": "environment", "hint": hint}
    if included:
        hint = f"{DEV_KEY_FILE} is in this backup: whoever holds it can open every secret"
        return {"mode": kms.mode, "key_id": kms.key_id, "source": "backup", "hint": hint}
    hint = (
        f"{DEV_KEY_FILE} (key {kms.key_id}) is NOT in this backup: put the escrowed copy in "
        f"the target home, or set {ROOT_ENV}, before restoring"
    )
    return {"mode": kms.mode, "key_id": kms.key_id, "source": "escrow", "hint": hint}


def _snapshots(store: Store) -> Snapshotting | None:
    """`store`'s snapshots, unless it is a `memory://` store: a backup of what ends with
    the process (and is empty in any other process) is no backup."""
    return capabilities(store).snapshots if backend_for(store.url).durable else None


def take_backup(
    store: Store,
    home: Path,
    dest: Path,
    *,
    kms: Kms | None,
    at: datetime,
    include_root_key: bool = False,
    passphrase: str | None = None,
    require_encryption: bool = False,
) -> BackupReport:
    """Write a backup of `store` and the files of `home` into the new folder `dest`, its
    manifest signed with the passphrase's key (encrypted) or the root key's (`kms`; without
    one it is not signed, and a restore needs `allow_unsigned`). `require_encryption` (the
    host's policy) refuses a backup without a passphrase."""
    if require_encryption and passphrase is None:
        raise ConfigError(
            f"this host takes encrypted backups only ({REQUIRE_ENCRYPTION_ENV})",
            hint=f"give --encrypt with --passphrase-file or {PASSPHRASE_ENV}",
        )
    snapshots = _snapshots(store)
    migrations = capabilities(store).migrations
    if snapshots is None or migrations is None:
        raise ConfigError(
            "this store cannot be backed up (only sqlite:/// and postgresql:// stores can)",
            hint="a memory:// store lives in one process and ends with it",
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise Conflict(f"{dest} exists and is not an empty folder", hint="give a new folder")
    if include_root_key and (kms is None or kms.path is None):
        raise ConfigError(
            "--include-root-key needs a development key file; a production root key comes "
            f"from {ROOT_ENV} and is escrowed apart from backups"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        # What the snapshot holds at least: read before it is taken (later writes only
        # append to the chain, so the snapshot has this head).
        head = store.audit_head()
        roots = sorted({k.root_id for k in store.list_data_keys() if k.root_id != SHREDDED})
        schema_version = migrations.schema_version()
        kind_file = work / ".snapshot"
        info = snapshots.snapshot(kind_file)
        plain: list[tuple[str, str, Path]] = [("store", STORE_FILES[info.kind], kind_file)]
        for name in HOME_FILES:
            if (home / name).is_file():
                plain.append(("home", name, home / name))
        if include_root_key:
            assert kms is not None and kms.path is not None
            plain.append(("root-key", DEV_KEY_FILE, kms.path))
        encryption: dict[str, Any] | None = None
        key = b""
        if passphrase is not None:
            if not passphrase:
                raise ConfigError("an empty passphrase encrypts nothing")
            encryption = {
                "cipher": "AES-256-GCM",
                "chunk_bytes": CHUNK,
                "kdf": "scrypt",
                "salt": secrets.token_hex(16),
                **SCRYPT,
            }
            key = derive_key(passphrase, encryption)
        files = []
        for role, name, source in plain:
            stored = name + (ENC_SUFFIX if encryption else "")
            if encryption:
                encrypt_file(source, work / stored, key, name)
            elif source.parent == work:
                os.replace(source, work / stored)
            else:
                shutil.copyfile(source, work / stored)
            os.chmod(work / stored, 0o600)
            if source == kind_file and kind_file.exists():
                kind_file.unlink()
            files.append(
                {
                    "name": name,
                    "file": stored,
                    "role": role,
                    "size": (work / stored).stat().st_size,
                    "sha256": sha256_file(work / stored),
                }
            )
        manifest = Manifest(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "wovyr_version": wovyr_version(),
                "created_at": at.astimezone(UTC).isoformat(),
                "store": {
                    "kind": info.kind,
                    "file": STORE_FILES[info.kind],
                    "schema_version": schema_version,
                    "schema": info.schema,
                },
                "audit_head": None if head is None else {"seq": head.seq, "hash": head.hash},
                "kms": {**_root_source(kms, include_root_key), "data_key_roots": roots},
                "encryption": encryption,
                "files": files,
            }
        )
        if encryption is not None:
            manifest = manifest.signed("passphrase", passphrase_signing_key(key))
        elif kms is not None:
            manifest = manifest.signed("root-key", kms.derive_key(_SIGNING), kms.key_id)
        atomic_write(work / MANIFEST, manifest.to_json(), 0o600)
        if dest.exists():
            dest.rmdir()  # empty (checked above)
        os.replace(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    size = sum(p.stat().st_size for p in dest.iterdir())
    if include_root_key:
        log.warning(
            "backup %s holds the KMS root key: it alone opens every secret in it; keep it as "
            "safe as the key's escrow",
            dest,
        )
    return BackupReport(dest, manifest, size)


def prune_backups(folder: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` complete backups named `wovyr-backup-*` in
    `folder` (and partial ones older than the newest); return what was removed."""
    if keep < 1:
        raise ConfigError("--keep must be at least 1")
    complete = sorted(
        p for p in folder.glob(_PREFIX + "*") if p.is_dir() and (p / MANIFEST).is_file()
    )
    removed = complete[:-keep]
    for path in removed:
        shutil.rmtree(path)
    return removed


# --- verifying ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditCheck:
    checked: bool
    records: int = 0
    anchors_verified: bool = False
    note: str = ""


def _check_audit(store: Store, manifest: Manifest, kms: Kms | None) -> AuditCheck:
    """The restored (or copied) store's chain verifies and holds the recorded head. With the
    backup's root key (`kms`), its anchors must verify (an anchor key that does not open is
    a refusal); without it they cannot be checked, and the note says so."""
    anchor_key: bytes | None = None
    note = ""
    if kms is not None:
        try:
            anchor_key = find_audit_anchor_key(Secrets(store, kms))
        except KmsError as exc:
            raise BackupRefused(
                f"the audit anchors in the backup cannot be checked: {exc}",
                hint="the backup was altered, or taken from another store than its root key's",
            ) from None
    else:
        note = "anchors not checked: no root key for this backup here"
    verdict = verify_chain(store, anchor_key, unchecked_anchors_ok=kms is None)
    if not verdict.ok and verdict.first is not None:
        seq, reason = verdict.first
        raise BackupRefused(f"the audit chain in the backup is broken at seq {seq}: {reason}")
    head = manifest.audit_head
    if head is not None:
        found = store.audit_records(after_seq=head[0] - 1, limit=1)
        if not found or found[0].seq != head[0] or found[0].hash != head[1]:
            raise BackupRefused(
                f"the audit chain in the backup does not hold the recorded head seq {head[0]}"
            )
    return AuditCheck(True, verdict.records, verdict.anchors_signed, note)


@dataclass(frozen=True)
class VerifyReport:
    path: Path
    manifest: Manifest
    decrypted: bool
    audit: AuditCheck
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "path": str(self.path),
            "created_at": self.manifest.data["created_at"],
            "store": self.manifest.data["store"],
            "files": len(self.manifest.files),
            "decrypted": self.decrypted,
            "audit_checked": self.audit.checked,
            "audit_records": self.audit.records,
            "anchors_verified": self.audit.anchors_verified,
            "notes": self.notes,
        }


def verify_backup(
    src: Path,
    *,
    passphrase: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    server: str | None = None,
) -> VerifyReport:
    """Check a backup without restoring it: the manifest, every file's size and SHA-256,
    the manifest's signature when a key for it is here, and (when it can be opened: not
    encrypted, or the passphrase given) the snapshot's integrity and the audit chain: of a
    copy for SQLite; for PostgreSQL of the dump restored into a scratch database on `server`
    (a PostgreSQL URL; without one, checked at restore). `BackupRefused` on any problem."""
    manifest = check_sound(src)
    notes: list[str] = []
    if manifest.encryption is not None and not passphrase:
        notes.append("encrypted and no passphrase given: checksums checked, contents not")
        return VerifyReport(src, manifest, False, AuditCheck(False), notes)
    key = unlock(src, manifest, passphrase)
    audit = AuditCheck(False)
    with in_clear(src, manifest, key) as clear:
        problems = check_snapshot(manifest.store_kind, clear / manifest.store_file)
        if problems:
            raise BackupRefused(f"the store snapshot in {src} is damaged: " + "; ".join(problems))
        kms, source = _verifying_kms(manifest, _root_keys(clear, home, env))
        why = _unproven(src, manifest, kms, source) if key is None else None
        if why is not None:
            notes.append(f"manifest signature not checked: {why}")
        elif key is not None and manifest.signed_by is None:
            notes.append(_LEGACY_ENCRYPTED)
        opened = snapshot_store(
            manifest.store_kind, clear / manifest.store_file, server, manifest.dump_schema
        )
        if opened is None:
            notes.append(
                "the audit chain of a PostgreSQL dump is checked in a scratch database on a "
                "PostgreSQL server (WOVYR_DATABASE_URL), or when it is restored"
            )
        else:
            with opened as store:
                audit = _check_audit(store, manifest, kms)
            if audit.note:
                notes.append(audit.note)
    return VerifyReport(src, manifest, True, audit, notes)


# --- restoring ---------------------------------------------------------------------------


_SIGNING = "backup-manifest"  # the root-key-derived key a manifest is signed with
_LEGACY_ENCRYPTED = (
    "the manifest is not signed (a backup of an earlier Wovyr); its files are authenticated "
    "by the encryption"
)


def _key_file(path: Path) -> Kms:
    with path.open("rb") as f:  # a key file is small; a crafted one is not read whole
        data = f.read(4096)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KmsError(f"the KMS key file {path} is not a hex key") from None
    root = RootKey(parse_root_key(text, f"the KMS key file {path}"), str(path))
    return Kms(root, "development", path=path)


def _root_keys(
    clear: Path, home: Path | None, env: Mapping[str, str] | None
) -> list[RootKeySource]:
    """The root keys at hand, by precedence: `WOVYR_KMS_ROOT_KEY`, the development key
    file of `home` (the host's), the key file in the backup."""
    found: list[RootKeySource] = []
    configured = read(ROOT_ENV, env)  # or WOVYR_KMS_ROOT_KEY_FILE's file
    if configured:
        root = RootKey(parse_root_key(configured, ROOT_ENV), ROOT_ENV)
        found.append((Kms(root, "production"), "environment"))
    if home is not None and (home / DEV_KEY_FILE).is_file():
        found.append((_key_file(home / DEV_KEY_FILE), "home"))
    if (clear / DEV_KEY_FILE).is_file():
        found.append((_key_file(clear / DEV_KEY_FILE), "backup"))
    return found


def _verifying_kms(manifest: Manifest, keys: list[RootKeySource]) -> tuple[Kms | None, str]:
    """For a check only: the first key at hand that wraps every data key of the backup (or
    that signed it, when it has none)."""
    wanted = set(manifest.root_ids)
    if not wanted and manifest.signing_key_id is not None:
        wanted = {manifest.signing_key_id}
    for kms, source in keys:
        if not wanted or kms.key_id in wanted:
            return kms, source
    return None, ""


def _restoring_kms(
    manifest: Manifest, keys: list[RootKeySource], home: Path
) -> tuple[Kms | None, str]:
    """The KMS the restored store will use: the host's root key when it has one (a restore
    never takes a backup's root key over it), else the one in the backup. `KmsError` when
    it does not wrap every data key of the backup."""
    host = [k for k in keys if k[1] != "backup"]
    carried = [k for k in keys if k[1] == "backup"]
    roots = set(manifest.root_ids)
    if not host and not carried:
        if roots:
            raise KmsError(
                f"no root key to open the backup's secrets (sealed under root key "
                f"{', '.join(sorted(roots))})",
                hint=f"set {ROOT_ENV} to the escrowed key, or put it in {home / DEV_KEY_FILE}",
            )
        return None, ""
    kms, source = (host or carried)[0]
    missing = roots - {kms.key_id}
    if missing:
        hint = f"set {ROOT_ENV} to the escrowed root key of that id"
        if carried and not missing - {carried[0][0].key_id}:
            hint = (
                f"the backup carries that root key, but a restore never puts a backup's root "
                f"key in place of the host's: if this host should use it, move "
                f"{home / DEV_KEY_FILE} aside yourself (keep it: it opens what this host's "
                "store sealed) and restore again"
            )
        raise KmsError(
            f"the root key {kms.key_id} (from {kms.root.source}) is not the one the backup's "
            f"secrets are sealed under ({', '.join(sorted(missing))}): they would not open",
            hint=hint,
        )
    return kms, source


def _unproven(src: Path, manifest: Manifest, kms: Kms | None, source: str) -> str | None:
    """Why nothing here shows who made this unencrypted backup: it is not signed, signed by
    another root key than the one at hand, or only by the root key it carries itself (which
    proves nothing about who made it). None when its signature by the host's root key holds;
    `BackupRefused` when the signature is forged."""
    signed_by, key_id = manifest.signed_by, manifest.signing_key_id
    if signed_by not in (None, "root-key"):
        raise BackupRefused(f"the manifest of {src} is signed by {signed_by!r} but not encrypted")
    if signed_by is None:
        return (
            "its manifest is not signed (a backup of an earlier Wovyr, or of a host whose "
            "KMS did not load)"
        )
    if kms is None or kms.key_id != key_id:
        here = "no root key is here" if kms is None else f"the root key here is {kms.key_id}"
        return f"its manifest is signed by root key {key_id} and {here}"
    if not manifest.signature_holds(kms.derive_key(_SIGNING)):
        raise BackupRefused(
            f"the manifest of {src} does not match its signature by root key {key_id}: it "
            "was altered, or made by someone without that key"
        )
    if source == "backup":
        return f"it is signed only by the root key it carries itself ({key_id})"
    return None


@dataclass(frozen=True)
class RestoreReport:
    source: Path
    target: str
    manifest: Manifest
    schema_version: int
    audit: AuditCheck
    data_keys: int
    files: list[str]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "target": self.target,
            "created_at": self.manifest.data["created_at"],
            "backup_schema_version": self.manifest.schema_version,
            "schema_version": self.schema_version,
            "audit_records": self.audit.records,
            "anchors_verified": self.audit.anchors_verified,
            "data_keys_opened": self.data_keys,
            "home_files": self.files,
            "notes": self.notes,
        }


def restore_backup(
    src: Path,
    target_url: str,
    home: Path,
    *,
    actor: str,
    at: datetime,
    force: bool = False,
    passphrase: str | None = None,
    env: Mapping[str, str] | None = None,
    latest_schema: Callable[[str], int] | None = None,
    redact: Callable[[str], str] = lambda url: url,
    require_encryption: bool = False,
    allow_unsigned: bool = False,
) -> RestoreReport:
    """Restore the backup `src` into the store at `target_url` and the files of `home`.

    Every refusal comes before the target is touched (`BackupRefused`, `KmsError`,
    `Conflict`): an unencrypted backup when a passphrase is given or the host requires
    encryption (`require_encryption`), one whose manifest no key here shows to be genuine
    (unless `allow_unsigned`), a target a server or worker holds (even with `force`); see
    the module docstring for the rest and the order of the work."""
    manifest = check_sound(src)
    if require_encryption and manifest.encryption is None:
        raise BackupRefused(
            f"the backup {src} is not encrypted, and this host restores encrypted backups "
            f"only ({REQUIRE_ENCRYPTION_ENV})"
        )
    newest = (latest_schema or _latest_schema)(manifest.store_kind)
    if manifest.schema_version > newest:
        raise BackupRefused(
            f"the backup's schema version {manifest.schema_version} is newer than this "
            f"Wovyr's ({newest}): it was taken by Wovyr {manifest.data['wovyr_version']}",
            hint="restore it with that version of Wovyr or a newer one",
        )
    key = unlock(src, manifest, passphrase)
    notes = [_LEGACY_ENCRYPTED] if key is not None and manifest.signed_by is None else []
    with in_clear(src, manifest, key) as clear:
        problems = check_snapshot(manifest.store_kind, clear / manifest.store_file)
        if problems:
            raise BackupRefused(f"the store snapshot in {src} is damaged: " + "; ".join(problems))
        keys = _root_keys(clear, home, env)
        kms, source = _restoring_kms(manifest, keys, home)
        why = _unproven(src, manifest, kms, source) if key is None else None
        if why is not None and not allow_unsigned:
            raise BackupRefused(
                f"the backup {src} is not encrypted and nothing here shows who made it: {why}",
                hint=f"set {ROOT_ENV} to the root key it was taken with, restore an encrypted "
                "backup, or, only if you know where this one came from, give --allow-unsigned",
            )
        if why is not None:
            notes.append(f"restored with --allow-unsigned although {why}")
        home_files, skipped = _home_files(manifest, clear, source)
        notes += skipped
        if target_in_use(target_url):
            if not force:
                raise Conflict(
                    f"the target store {redact(target_url)} is not empty",
                    hint="restore into an empty home or schema, or give --force to replace "
                    "it (stop every server and worker using it first)",
                )
            holder = target_held(target_url)
            if holder is not None:
                raise Conflict(
                    f"the target store {redact(target_url)} is in use: {holder}",
                    hint="stop every server and worker using it, then restore again",
                )
        staged = stage_restore(
            manifest.store_kind,
            clear / manifest.store_file,
            target_url,
            dump_schema=manifest.dump_schema,
            force=force,
        )
        try:
            store = open_store(staged.url, migrate=True)
            try:
                migrations = capabilities(store).migrations
                version = migrations.migrate() if migrations else 0
                opened = 0
                for record in store.list_data_keys():
                    if record.root_id != SHREDDED and kms is not None:
                        kms.unwrap(record)
                        opened += 1
                audit = _check_audit(store, manifest, kms)
                store.append_audit(
                    AuditEntry(
                        at,
                        HOST_TENANT,
                        actor,
                        "backup.restore",
                        str(manifest.data["created_at"]),
                        {
                            "backup": src.name,
                            "wovyr_version": manifest.data["wovyr_version"],
                            "schema_version": manifest.schema_version,
                            "audit_head_seq": (manifest.audit_head or (0, ""))[0],
                        },
                    )
                )
            finally:
                store.close()
        except BaseException:
            staged.abort()
            raise
        staged.commit()
        written = []
        for name, body in home_files:
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            if atomic_write(home / name, body, 0o600, exclusive=True):  # never over one
                written.append(name)
            else:
                notes.append(f"{home / name} appeared during the restore and was kept")
    return RestoreReport(src, redact(target_url), manifest, version, audit, opened, written, notes)


def _home_files(
    manifest: Manifest, clear: Path, source: str
) -> tuple[list[tuple[str, bytes]], list[str]]:
    """The home files to write: the root key the backup carries, when the restored store
    will use it (`source` backup: the host has none of its own); and notes on what is not
    written (the backup's root key beside the host's, the web UI's session key of a backup
    of format 1)."""
    out, notes = [], []
    for entry in manifest.files:
        name, role = str(entry["name"]), entry["role"]
        if role == "root-key" and source == "backup":
            out.append((name, (clear / name).read_bytes()))
        elif role == "root-key":
            notes.append(
                f"the backup's root key was not installed: this host has its own ({source})"
            )
        elif name in LEGACY_HOME_FILES:
            notes.append(
                f"the backup's {name} was not restored (backups no longer carry it): web UI "
                "sessions signed before end, and everyone signs in again"
            )
    return out, notes


def _latest_schema(kind: str) -> int:
    from wovyr.store.snapshots import latest_migration

    return latest_migration(kind)


# --- scheduled backups: a built-in workflow of the platform tenant --------------------------

#: The tenant the built-in backup workflow and its schedule belong to: `~` is outside the
#: tenant alphabet (`wovyr.platform.auth.validate_tenant`), so no API key, `--tenant` flag
#: or request can act for it; only the host's `wovyr admin backup schedule` creates it.
PLATFORM_TENANT = "~platform"
#: The tool the built-in workflow calls. Any definition may name it, but its handler runs
#: only for executions of `PLATFORM_TENANT`: for a tenant's execution it fails without
#: touching a file, so no tenant can use it to write files or read the database.
BACKUP_TOOL = "wovyr.backup"
BACKUP_WORKFLOW = "wovyr-backup"

BACKUP_WORKFLOW_YAML = f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: {BACKUP_WORKFLOW}, version: "2"}}
inputs:
  dest: {{type: string, required: true}}
  keep: {{type: integer, default: 24}}
  encrypt: {{type: boolean, default: false}}
  passphrase_file: {{type: string, default: ""}}
activities:
  - id: backup
    tool: {BACKUP_TOOL}
    with:
      dest: "${{{{ inputs.dest }}}}"
      keep: "${{{{ inputs.keep }}}}"
      encrypt: "${{{{ inputs.encrypt }}}}"
      passphrase_file: "${{{{ inputs.passphrase_file }}}}"
    retry: {{max_attempts: 3, initial_interval: 30s}}
    timeout: 1h
output: {{backup: "${{{{ activities.backup.output }}}}"}}
"""


_MAX_PASSPHRASE = 4096


def read_passphrase(path: Path) -> str:
    """The passphrase in the file `path`: its text without trailing newlines (a
    passphrase file is small: over `_MAX_PASSPHRASE` bytes is an error)."""
    with path.open("rb") as f:
        data = f.read(_MAX_PASSPHRASE + 1)
    if len(data) > _MAX_PASSPHRASE:
        raise ConfigError(f"{path} holds more than {_MAX_PASSPHRASE} bytes: not a passphrase")
    try:
        return data.decode("utf-8").rstrip("\n")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None


def backup_activity(
    store: Store,
    home: Path,
    kms: Callable[[], Kms | None],
    now: Callable[[], datetime],
    *,
    env: Mapping[str, str] | None = None,
    require_encryption: bool = False,
) -> Callable[..., dict[str, Any]]:
    """The handler of `BACKUP_TOOL` for a worker over `store` (whose home is `home`). An
    encrypted backup's passphrase is read when the backup is taken, from the schedule's
    `passphrase_file` (a file on the worker's host) or the worker's `WOVYR_BACKUP_PASSPHRASE`
    (`env`): never from the schedule, which the store keeps in clear. `require_encryption`
    (the host's policy) fails an unencrypted one."""
    worker_env = {} if env is None else env

    def run(
        dest: str,
        keep: int,
        ctx: ActivityContext,
        encrypt: bool = False,
        passphrase_file: str = "",
    ) -> dict[str, Any]:
        # whose run it is, not only whether the platform has a run of that id: ids are per
        # tenant, so a tenant's run may carry the id of a platform backup run
        if ctx.tenant != PLATFORM_TENANT or store.load(ctx.execution_id, PLATFORM_TENANT) is None:
            raise NonRetryableError(
                f"{BACKUP_TOOL} runs only in the platform's scheduled backup "
                "(`wovyr admin backup schedule`), not in a tenant's workflow",
                type="Forbidden",
            )
        passphrase = _scheduled_passphrase(encrypt, passphrase_file, worker_env)
        if require_encryption and passphrase is None:
            raise NonRetryableError(
                f"this host takes encrypted backups only ({REQUIRE_ENCRYPTION_ENV}): schedule "
                "them with `wovyr admin backup schedule --encrypt`",
                type="ConfigError",
            )
        folder = Path(dest)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        at = now()
        target = folder / backup_name(at)
        if target.exists():  # a retry of an attempt at the same instant
            target = folder / f"{target.name}-{secrets.token_hex(2)}"
        report = take_backup(store, home, target, kms=kms(), at=at, passphrase=passphrase)
        removed = prune_backups(folder, keep)
        head = report.manifest.audit_head
        return {
            "path": str(report.path),
            "bytes": report.bytes,
            "encrypted": passphrase is not None,
            "audit_head_seq": None if head is None else head[0],
            "removed": [p.name for p in removed],
        }

    return run


def _scheduled_passphrase(
    encrypt: bool, passphrase_file: str, env: Mapping[str, str]
) -> str | None:
    if not encrypt:
        return None
    try:
        passphrase = (
            read_passphrase(Path(passphrase_file)) if passphrase_file else read(PASSPHRASE_ENV, env)
        )
    except (OSError, ConfigError) as exc:
        raise NonRetryableError(
            f"the passphrase of the encrypted backup cannot be read: {exc}", type="ConfigError"
        ) from None
    if not passphrase:
        where = passphrase_file or f"{PASSPHRASE_ENV} in the worker's environment"
        raise NonRetryableError(
            f"the schedule takes encrypted backups and there is no passphrase ({where})",
            type="ConfigError",
        )
    return passphrase


def register_backup_activity(
    registry: ActivityRegistry,
    store: Store,
    home: Path,
    kms: Callable[[], Kms | None],
    now: Callable[[], datetime],
    *,
    env: Mapping[str, str] | None = None,
    require_encryption: bool = False,
) -> None:
    """Register `BACKUP_TOOL` in a worker's registry (a store without snapshots: not);
    `env` and `require_encryption` as for `backup_activity`."""
    if _snapshots(store) is not None:
        handler = backup_activity(
            store, home, kms, now, env=env, require_encryption=require_encryption
        )
        registry.register(BACKUP_TOOL, handler)
