"""Backups of an installation: a consistent snapshot of the store plus the files it needs.

A backup is a folder (`wovyr admin backup DEST`):

- `store.sqlite` (SQLite's online backup API) or `store.pgdump` (`pg_dump -Fc` of the
  store's schema): one consistent moment, taken while writers keep committing
  (`wovyr.store.capabilities.Snapshotting`);
- the files of `WOVYR_HOME` an installation needs besides the database: `ui-session.key`
  (web UI sessions signed before the backup keep working after a restore), and the
  development KMS root key `kms-root.key` only when asked (`include_root_key`): a backup
  that holds both the database and its root key opens every secret, so by default the root
  key comes from escrow (the manifest says where it is expected to come from);
- `manifest.json`, written last with `atomic_write`: format version, Wovyr version, schema
  version, store kind, creation time, the audit chain's head at the snapshot, the root key
  ids the data keys are wrapped by, and each file's size and SHA-256; its own `digest`
  (SHA-256 of the rest) catches an edited or damaged manifest.

The folder is built as `.<name>.partial-*` beside DEST and renamed at the end: a backup
that was interrupted never looks complete.

**Encryption** (a passphrase): every file but the manifest is sealed with AES-256-GCM under
a key derived with scrypt from the passphrase and a random salt (kept in the manifest), in
1 MiB chunks whose nonce is a per-file random prefix and the chunk's number, and whose
associated data binds the file's name, the chunk's number and whether it is the last: a
flipped, dropped, reordered or truncated chunk, or a file swapped for another, does not open.

**Verify** checks the manifest, every file's size and SHA-256, the snapshot's integrity
(`PRAGMA integrity_check` / `pg_restore --list`) and, for SQLite, that a copy's audit chain
verifies and holds the recorded head. **Restore** refuses, before it touches anything, a
newer format or schema, a damaged file, a non-empty target (unless forced) and a root key
that does not open the backup's data keys; it then stages the store (a temporary file, or
the target schema renamed aside), migrates and checks it (data keys unwrap, audit chain
verifies up to the recorded head), records `backup.restore` in the audit chain, and only
then swaps it in and writes the home files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from wovyr.activities.base import ActivityContext, ActivityRegistry, NonRetryableError
from wovyr.errors import BackupRefused, ConfigError, Conflict, KmsError
from wovyr.files import atomic_write
from wovyr.platform.audit import verify_chain
from wovyr.platform.kms import DEV_KEY_FILE, HOST_TENANT, ROOT_ENV, Kms, RootKey, parse_root_key
from wovyr.platform.secrets import Secrets, find_audit_anchor_key
from wovyr.store import Store, open_store
from wovyr.store.audit import AuditEntry
from wovyr.store.capabilities import capabilities
from wovyr.store.secrets import SHREDDED
from wovyr.store.snapshots import check_snapshot, scratch_store, stage_restore, target_in_use

__all__ = [
    "BACKUP_TOOL",
    "BACKUP_WORKFLOW",
    "BACKUP_WORKFLOW_YAML",
    "FORMAT_VERSION",
    "HOME_FILES",
    "MANIFEST",
    "PLATFORM_TENANT",
    "BackupReport",
    "Manifest",
    "RestoreReport",
    "VerifyReport",
    "backup_activity",
    "backup_name",
    "prune_backups",
    "read_manifest",
    "register_backup_activity",
    "restore_backup",
    "take_backup",
    "verify_backup",
]

log = logging.getLogger("wovyr.backup")

FORMAT = "wovyr-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: Files of WOVYR_HOME an installation needs besides the database (the web UI's session
#: secret: `wovyr.server.ui.session.SECRET_FILE`, checked equal by a test).
HOME_FILES = ("ui-session.key",)
_STORE_FILES = {"sqlite": "store.sqlite", "postgres": "store.pgdump"}
_PREFIX = "wovyr-backup-"
_ENC_SUFFIX = ".enc"
_MAGIC = b"WVYRENC1"
_CHUNK = 1 << 20
_TAG = 16  # AES-GCM's tag: a sealed chunk is at most _CHUNK + _TAG bytes
_SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
_READ = 1 << 20
#: The most a manifest, a key file in a backup, and scrypt (128 * n * r bytes) may take:
#: a backup is refused by what it declares before anything is allocated from it.
_MAX_MANIFEST = 1 << 20
_MAX_KEY_FILE = 4096
_MAX_SCRYPT_MEMORY = 1 << 28


def _wovyr_version() -> str:
    try:
        return metadata.version("wovyr")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


# --- the manifest ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    """`manifest.json` of a backup (see the module docstring)."""

    data: dict[str, Any]

    @property
    def store_kind(self) -> str:
        return str(self.data["store"]["kind"])

    @property
    def store_file(self) -> str:
        return str(self.data["store"]["file"])

    @property
    def schema_version(self) -> int:
        return int(self.data["store"]["schema_version"])

    @property
    def dump_schema(self) -> str | None:
        value = self.data["store"].get("schema")
        return None if value is None else str(value)

    @property
    def files(self) -> list[dict[str, Any]]:
        return list(self.data["files"])

    @property
    def encryption(self) -> dict[str, Any] | None:
        value = self.data.get("encryption")
        return dict(value) if value else None

    @property
    def audit_head(self) -> tuple[int, str] | None:
        head = self.data.get("audit_head")
        return None if not head else (int(head["seq"]), str(head["hash"]))

    @property
    def root_ids(self) -> list[str]:
        return list(self.data["kms"]["data_key_roots"])

    def to_json(self) -> str:
        return json.dumps({**self.data, "digest": _digest(self.data)}, indent=2, sort_keys=True)


def _digest(data: Mapping[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_manifest(src: Path) -> Manifest:
    """The manifest of the backup folder `src`; `BackupRefused` when it is missing, damaged,
    or from a newer format than this Wovyr reads."""
    path = src / MANIFEST
    if not src.is_dir():
        raise BackupRefused(f"{src} is not a backup folder", hint="give the folder of a backup")
    try:
        with path.open("rb") as f:
            text = f.read(_MAX_MANIFEST + 1)
        if len(text) > _MAX_MANIFEST:
            raise BackupRefused(
                f"the manifest of {src} is larger than {_MAX_MANIFEST} bytes: not a Wovyr "
                "backup manifest"
            )
        data = json.loads(text.decode("utf-8"))
    except FileNotFoundError:
        missing = f"{src} has no {MANIFEST}: not a backup, or an unfinished one"
        raise BackupRefused(missing) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BackupRefused(f"the manifest of {src} is damaged: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BackupRefused(f"{path} is not a Wovyr backup manifest")
    version = data.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise BackupRefused(
            f"the backup {src} has format version {version} and this Wovyr "
            f"({_wovyr_version()}) reads up to {FORMAT_VERSION}",
            hint=f"restore it with Wovyr {data.get('wovyr_version', 'of that version')} or newer",
        )
    if data.get("digest") != _digest(data):
        raise BackupRefused(f"the manifest of {src} was altered or damaged (its digest differs)")
    try:
        manifest = Manifest({k: v for k, v in data.items() if k != "digest"})
        _ = (manifest.store_kind, manifest.store_file, manifest.schema_version, manifest.files)
        _ = manifest.root_ids
        names = [(str(f["name"]), str(f["file"]), str(f["role"])) for f in manifest.files]
    except (KeyError, TypeError, ValueError) as exc:
        raise BackupRefused(f"the manifest of {src} lacks a field: {exc}") from None
    known = {*_STORE_FILES.values(), *HOME_FILES, DEV_KEY_FILE}
    for name, stored, _role in names:
        # Only the files a backup is made of, by plain name: a crafted manifest cannot
        # make a restore read or write anywhere else.
        if name not in known or stored not in (name, name + _ENC_SUFFIX):
            raise BackupRefused(f"the manifest of {src} lists an unexpected file {stored!r}")
    for entry in manifest.files:
        size = entry.get("size")
        if not isinstance(size, int) or size < 0:
            raise BackupRefused(f"the manifest of {src} gives {entry['file']!r} no size")
        if entry["name"] not in _STORE_FILES.values() and size > _MAX_KEY_FILE + 64:
            raise BackupRefused(
                f"the manifest of {src} declares {entry['file']!r} as {size} bytes; a key "
                f"file is at most {_MAX_KEY_FILE}"
            )
    if manifest.encryption is not None:
        _check_encryption(src, manifest.encryption)
    return manifest


def _check_encryption(src: Path, params: Mapping[str, Any]) -> None:
    """Refuse encryption parameters this Wovyr does not write (a crafted manifest could ask
    scrypt for any amount of memory, or chunks of any size)."""
    problem = ""
    try:
        n, r, p = int(params["n"]), int(params["r"]), int(params["p"])
        salt = bytes.fromhex(str(params["salt"]))
        if (params.get("cipher"), params.get("kdf")) != ("AES-256-GCM", "scrypt"):
            problem = f"cipher {params.get('cipher')!r} with kdf {params.get('kdf')!r}"
        elif int(params["chunk_bytes"]) != _CHUNK:
            problem = f"chunks of {params['chunk_bytes']} bytes (this Wovyr writes {_CHUNK})"
        elif n < 2 or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16:
            problem = f"scrypt n={n}, r={r}, p={p}"
        elif 128 * n * r > _MAX_SCRYPT_MEMORY:
            problem = f"scrypt n={n}, r={r}, which needs {128 * n * r >> 20} MiB"
        elif not 16 <= len(salt) <= 64:
            problem = f"a salt of {len(salt)} bytes"
    except (KeyError, TypeError, ValueError) as exc:
        problem = f"no valid encryption parameters ({exc})"
    if problem:
        raise BackupRefused(
            f"the manifest of {src} declares {problem}: refused before deriving any key",
            hint="not a backup this Wovyr wrote, or an altered one",
        )


# --- encryption --------------------------------------------------------------------------


def _derive(passphrase: str, params: Mapping[str, Any]) -> bytes:
    kdf = Scrypt(
        salt=bytes.fromhex(str(params["salt"])),
        length=32,
        n=int(params["n"]),
        r=int(params["r"]),
        p=int(params["p"]),
    )
    return kdf.derive(passphrase.encode("utf-8"))


def _aad(name: str, index: int, last: bool) -> bytes:
    return _MAGIC + name.encode("utf-8") + struct.pack(">Q?", index, last)


def _chunks(path: Path) -> Iterator[tuple[bytes, bool]]:
    """The file in chunks of `_CHUNK` bytes, each with whether it is the last (an empty
    file is one empty last chunk)."""
    with path.open("rb") as f:
        current = f.read(_CHUNK)
        while True:
            following = f.read(_CHUNK)
            yield current, not following
            if not following:
                return
            current = following


def _encrypt_file(plain: Path, sealed: Path, key: bytes, name: str) -> None:
    aes, prefix = AESGCM(key), secrets.token_bytes(4)
    with sealed.open("xb") as out:
        out.write(_MAGIC + prefix)
        for index, (chunk, last) in enumerate(_chunks(plain)):
            nonce = prefix + struct.pack(">Q", index)
            body = aes.encrypt(nonce, chunk, _aad(name, index, last))
            out.write(struct.pack(">I", len(body)) + body)
        out.flush()
        os.fsync(out.fileno())


def _decrypt_file(sealed: Path, plain: Path, key: bytes, name: str) -> None:
    aes = AESGCM(key)
    with sealed.open("rb") as f, plain.open("xb") as out:
        left = os.fstat(f.fileno()).st_size
        head = f.read(len(_MAGIC) + 4)
        left -= len(head)
        if head[: len(_MAGIC)] != _MAGIC or len(head) != len(_MAGIC) + 4:
            raise BackupRefused(f"{sealed.name} is not an encrypted backup file")
        prefix, index, last = head[len(_MAGIC) :], 0, False
        while not last:
            size_bytes = f.read(4)
            if len(size_bytes) != 4:
                raise BackupRefused(f"{sealed.name} is truncated (its last chunk is missing)")
            size = struct.unpack(">I", size_bytes)[0]
            left -= 4
            if size > _CHUNK + _TAG or size > left:  # never read what a size field claims
                raise BackupRefused(
                    f"{sealed.name} declares a chunk {index} of {size} bytes, where a chunk is "
                    f"at most {_CHUNK + _TAG} and {left} bytes are left: damaged or altered"
                )
            body = f.read(size)
            left -= size
            nonce = prefix + struct.pack(">Q", index)
            for last in (False, True):  # which one it is is bound in the associated data
                try:
                    out.write(aes.decrypt(nonce, body, _aad(name, index, last)))
                    break
                except InvalidTag:
                    continue
            else:
                raise BackupRefused(
                    f"{sealed.name} does not decrypt at chunk {index}: a wrong passphrase, "
                    "or the file was damaged or altered"
                )
            index += 1
        if f.read(1):
            raise BackupRefused(f"{sealed.name} has data after its last chunk")


# --- taking a backup -----------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_READ):
            h.update(block)
    return h.hexdigest()


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


def take_backup(
    store: Store,
    home: Path,
    dest: Path,
    *,
    kms: Kms | None,
    at: datetime,
    include_root_key: bool = False,
    passphrase: str | None = None,
) -> BackupReport:
    """Write a backup of `store` and the files of `home` into the new folder `dest`."""
    snapshots = capabilities(store).snapshots
    migrations = capabilities(store).migrations
    if snapshots is None or migrations is None:
        raise ConfigError(
            "this store cannot be backed up (only SQLite and PostgreSQL stores can)",
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
        plain: list[tuple[str, str, Path]] = [("store", _STORE_FILES[info.kind], kind_file)]
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
                "chunk_bytes": _CHUNK,
                "kdf": "scrypt",
                "salt": secrets.token_hex(16),
                **_SCRYPT,
            }
            key = _derive(passphrase, encryption)
        files = []
        for role, name, source in plain:
            stored = name + (_ENC_SUFFIX if encryption else "")
            if encryption:
                _encrypt_file(source, work / stored, key, name)
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
                    "sha256": _sha256(work / stored),
                }
            )
        manifest = Manifest(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "wovyr_version": _wovyr_version(),
                "created_at": at.astimezone(UTC).isoformat(),
                "store": {
                    "kind": info.kind,
                    "file": _STORE_FILES[info.kind],
                    "schema_version": schema_version,
                    "schema": info.schema,
                },
                "audit_head": None if head is None else {"seq": head.seq, "hash": head.hash},
                "kms": {**_root_source(kms, include_root_key), "data_key_roots": roots},
                "encryption": encryption,
                "files": files,
            }
        )
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


def _check_files(src: Path, manifest: Manifest) -> list[str]:
    problems = []
    for entry in manifest.files:
        path = src / str(entry["file"])
        if not path.is_file():
            problems.append(f"{entry['file']} is missing")
            continue
        size = path.stat().st_size
        if size != int(entry["size"]):
            problems.append(
                f"{entry['file']} has {size} bytes, the manifest says {entry['size']} (truncated "
                "or altered)"
            )
        elif _sha256(path) != entry["sha256"]:
            problems.append(f"{entry['file']} does not match its SHA-256 (damaged or altered)")
    if manifest.store_file not in {str(e["name"]) for e in manifest.files}:
        problems.append(f"the manifest lists no {manifest.store_file}")
    return problems


@contextlib.contextmanager
def _opened(src: Path, manifest: Manifest, passphrase: str | None) -> Iterator[Path]:
    """A private temporary folder with the backup's files in clear (decrypted, or copied
    when the backup is not encrypted), under their names; removed afterwards."""
    encryption = manifest.encryption
    if encryption is not None and not passphrase:
        raise BackupRefused(
            "the backup is encrypted: give its passphrase (--passphrase-file or "
            "WOVYR_BACKUP_PASSPHRASE)"
        )
    scratch = Path(tempfile.mkdtemp(prefix=".wovyr-restore-"))
    try:
        key = _derive(passphrase, encryption) if encryption and passphrase else b""
        for entry in manifest.files:
            name, stored = str(entry["name"]), src / str(entry["file"])
            if encryption:
                _decrypt_file(stored, scratch / name, key, name)
            else:
                shutil.copyfile(stored, scratch / name)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check_sound(src: Path, passphrase: str | None) -> Manifest:
    manifest = read_manifest(src)
    problems = _check_files(src, manifest)
    if problems:
        raise BackupRefused(
            f"the backup {src} is damaged: " + "; ".join(problems),
            hint="use another backup; this one cannot be restored",
        )
    return manifest


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
    and (when it can be opened: not encrypted, or the passphrase given) the snapshot's
    integrity and the audit chain: of a copy for SQLite; for PostgreSQL of the dump restored
    into a scratch database on `server` (a PostgreSQL URL; without one, checked at restore).
    `BackupRefused` on any problem."""
    manifest = _check_sound(src, passphrase)
    notes: list[str] = []
    if manifest.encryption is not None and not passphrase:
        notes.append("encrypted and no passphrase given: checksums checked, contents not")
        return VerifyReport(src, manifest, False, AuditCheck(False), notes)
    audit = AuditCheck(False)
    with _opened(src, manifest, passphrase) as clear:
        problems = check_snapshot(manifest.store_kind, clear / manifest.store_file)
        if problems:
            raise BackupRefused(f"the store snapshot in {src} is damaged: " + "; ".join(problems))
        if manifest.store_kind == "sqlite":
            kms = _backup_kms(manifest, clear, home, env, strict=False)
            store = open_store(f"sqlite:///{clear / manifest.store_file}")
            try:
                audit = _check_audit(store, manifest, kms)
            finally:
                store.close()
            if audit.note:
                notes.append(audit.note)
        elif server is not None and server.startswith(("postgresql://", "postgres://")):
            kms = _backup_kms(manifest, clear, home, env, strict=False)
            dump = clear / manifest.store_file
            with scratch_store(dump, server, manifest.dump_schema) as store:
                audit = _check_audit(store, manifest, kms)
            if audit.note:
                notes.append(audit.note)
        else:
            notes.append(
                "the audit chain of a PostgreSQL dump is checked in a scratch database on a "
                "PostgreSQL server (WOVYR_DATABASE_URL), or when it is restored"
            )
    return VerifyReport(src, manifest, True, audit, notes)


# --- restoring ---------------------------------------------------------------------------


def _backup_kms(
    manifest: Manifest,
    clear: Path,
    home: Path | None,
    env: Mapping[str, str] | None,
    *,
    strict: bool,
) -> Kms | None:
    """The KMS a restored store will use: `WOVYR_KMS_ROOT_KEY`, else the root key in the
    backup, else the development key file of the target home. With `strict`, a missing key
    or one that does not wrap the backup's data keys is refused (`KmsError`)."""
    env = os.environ if env is None else env
    kms: Kms | None = None
    if env.get(ROOT_ENV):
        kms = Kms(RootKey(parse_root_key(env[ROOT_ENV], ROOT_ENV), ROOT_ENV), "production")
    else:
        for path in (clear / DEV_KEY_FILE, *(() if home is None else (home / DEV_KEY_FILE,))):
            if path.is_file():
                text = path.read_text(encoding="ascii")
                kms = Kms(
                    RootKey(parse_root_key(text, f"the KMS key file {path}"), str(path)),
                    "development",
                    path=path,
                )
                break
    roots = set(manifest.root_ids)
    if kms is None:
        if strict and roots:
            raise KmsError(
                f"no root key to open the backup's secrets (sealed under root key "
                f"{', '.join(sorted(roots))})",
                hint=f"set {ROOT_ENV} to the escrowed key, or put it in "
                f"{(home or Path('HOME')) / DEV_KEY_FILE}",
            )
        return None
    missing = roots - {kms.key_id}
    if missing and strict:
        raise KmsError(
            f"the root key {kms.key_id} (from {kms.root.source}) is not the one the backup's "
            f"secrets are sealed under ({', '.join(sorted(missing))}): they would not open",
            hint=f"set {ROOT_ENV} to the escrowed root key of that id",
        )
    return kms if not missing else None


@dataclass(frozen=True)
class RestoreReport:
    source: Path
    target: str
    manifest: Manifest
    schema_version: int
    audit: AuditCheck
    data_keys: int
    files: list[str]

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
) -> RestoreReport:
    """Restore the backup `src` into the store at `target_url` and the files of `home`.

    Every refusal comes before the target is touched (`BackupRefused`, `KmsError`,
    `Conflict`); see the module docstring for the order of the work."""
    manifest = _check_sound(src, passphrase)
    newest = (latest_schema or _latest_schema)(manifest.store_kind)
    if manifest.schema_version > newest:
        raise BackupRefused(
            f"the backup's schema version {manifest.schema_version} is newer than this "
            f"Wovyr's ({newest}): it was taken by Wovyr {manifest.data['wovyr_version']}",
            hint="restore it with that version of Wovyr or a newer one",
        )
    with _opened(src, manifest, passphrase) as clear:
        problems = check_snapshot(manifest.store_kind, clear / manifest.store_file)
        if problems:
            raise BackupRefused(f"the store snapshot in {src} is damaged: " + "; ".join(problems))
        kms = _backup_kms(manifest, clear, home, env, strict=True)
        home_files = _home_files(manifest, clear, home, force=force)
        if target_in_use(target_url) and not force:
            raise Conflict(
                f"the target store {redact(target_url)} is not empty",
                hint="restore into an empty home or schema, or give --force to replace it "
                "(stop every server and worker using it first)",
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
        for name, body, mode in home_files:
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(home / name, body, mode)
            written.append(name)
    return RestoreReport(src, redact(target_url), manifest, version, audit, opened, written)


def _home_files(
    manifest: Manifest, clear: Path, home: Path, *, force: bool
) -> list[tuple[str, bytes, int]]:
    """The home files to write, each refused (`Conflict`) when the target home holds a
    different one and not `force`."""
    out = []
    for entry in manifest.files:
        if entry["role"] not in ("home", "root-key"):
            continue
        name = str(entry["name"])
        body = (clear / name).read_bytes()
        existing = home / name
        if existing.is_file() and existing.read_bytes() != body and not force:
            raise Conflict(
                f"{existing} exists and differs from the backup's",
                hint="restore into an empty home, or give --force to replace it",
            )
        out.append((name, body, 0o600))
    return out


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
metadata: {{name: {BACKUP_WORKFLOW}}}
inputs:
  dest: {{type: string, required: true}}
  keep: {{type: integer, default: 24}}
activities:
  - id: backup
    tool: {BACKUP_TOOL}
    with: {{dest: "${{{{ inputs.dest }}}}", keep: "${{{{ inputs.keep }}}}"}}
    retry: {{max_attempts: 3, initial_interval: 30s}}
    timeout: 1h
output: {{backup: "${{{{ activities.backup.output }}}}"}}
"""


def backup_activity(
    store: Store, home: Path, kms: Callable[[], Kms | None], now: Callable[[], datetime]
) -> Callable[..., dict[str, Any]]:
    """The handler of `BACKUP_TOOL` for a worker over `store` (whose home is `home`)."""

    def run(dest: str, keep: int, ctx: ActivityContext) -> dict[str, Any]:
        # whose run it is, not only whether the platform has a run of that id: ids are per
        # tenant, so a tenant's run may carry the id of a platform backup run
        if ctx.tenant != PLATFORM_TENANT or store.load(ctx.execution_id, PLATFORM_TENANT) is None:
            raise NonRetryableError(
                f"{BACKUP_TOOL} runs only in the platform's scheduled backup "
                "(`wovyr admin backup schedule`), not in a tenant's workflow",
                type="Forbidden",
            )
        folder = Path(dest)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        at = now()
        target = folder / backup_name(at)
        if target.exists():  # a retry of an attempt at the same instant
            target = folder / f"{target.name}-{secrets.token_hex(2)}"
        report = take_backup(store, home, target, kms=kms(), at=at)
        removed = prune_backups(folder, keep)
        head = report.manifest.audit_head
        return {
            "path": str(report.path),
            "bytes": report.bytes,
            "audit_head_seq": None if head is None else head[0],
            "removed": [p.name for p in removed],
        }

    return run


def register_backup_activity(
    registry: ActivityRegistry,
    store: Store,
    home: Path,
    kms: Callable[[], Kms | None],
    now: Callable[[], datetime],
) -> None:
    """Register `BACKUP_TOOL` in a worker's registry (a store without snapshots: not)."""
    if capabilities(store).snapshots is not None:
        registry.register(BACKUP_TOOL, backup_activity(store, home, kms, now))
