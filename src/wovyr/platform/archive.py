"""The folder a backup is (`wovyr.platform.backup` takes, verifies and restores them): its
manifest, its files' checksums and their encryption.

`manifest.json` is written last: format version, Wovyr version, schema version, store
kind, creation time, the audit chain's head at the snapshot, the root key ids the data keys
are wrapped by, and each file's size and SHA-256; its own `digest` (SHA-256 of the rest)
catches an edited or damaged manifest. Only the files a backup is made of are named, by
plain name, so a crafted manifest cannot make a restore read or write anywhere else; and a
backup is judged by what it declares before anything is allocated from it (the manifest's
size, key files' sizes, the encryption's parameters, each encrypted chunk's size field).

**Encryption** (a passphrase): every file but the manifest is sealed with AES-256-GCM under
a key derived with scrypt from the passphrase and a random salt (kept in the manifest), in
1 MiB chunks whose nonce is a per-file random prefix and the chunk's number, and whose
associated data binds the file's name, the chunk's number and whether it is the last: a
flipped, dropped, reordered or truncated chunk, or a file swapped for another, does not open.

**Signature** (format 2): the digest catches damage, not forgery (anyone can recompute
it), so the manifest also carries an HMAC-SHA256 of its fields (`signature`): keyed by the
passphrase's key when the backup is encrypted, else by a key derived from the KMS root key
(`signature.key_id` names it). Whoever has neither cannot make a manifest a restore
accepts. A manifest of format 1 (an earlier Wovyr) is not signed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import struct
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from wovyr.errors import BackupRefused
from wovyr.platform.kms import DEV_KEY_FILE
from wovyr.store.backends import BACKENDS

__all__ = [
    "CHUNK",
    "ENC_SUFFIX",
    "FORMAT",
    "FORMAT_VERSION",
    "HOME_FILES",
    "LEGACY_HOME_FILES",
    "MANIFEST",
    "SCRYPT",
    "STORE_FILES",
    "Manifest",
    "check_sound",
    "derive_key",
    "encrypt_file",
    "in_clear",
    "passphrase_signing_key",
    "read_manifest",
    "sha256_file",
    "unlock",
    "wovyr_version",
]

FORMAT = "wovyr-backup"
FORMAT_VERSION = 2  # 2: manifests are signed, no backup carries the web UI's session key
MANIFEST = "manifest.json"
#: Files of WOVYR_HOME an installation needs besides the database and its root key: none.
HOME_FILES: tuple[str, ...] = ()
#: What a backup of format 1 may hold and a restore no longer writes: the web UI's session
#: key (`wovyr.server.ui.session.SECRET_FILE`, checked equal by a test), in clear in every
#: backup, with which whoever read one could sign a session cookie.
LEGACY_HOME_FILES = ("ui-session.key",)
STORE_FILES = {b.kind: b.snapshot_file for b in BACKENDS if b.snapshot_file is not None}
ENC_SUFFIX = ".enc"
_MAGIC = b"WVYRENC1"
CHUNK = 1 << 20
_TAG = 16  # AES-GCM's tag: a sealed chunk is at most CHUNK + _TAG bytes
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
_READ = 1 << 20
#: The most a manifest, a key file in a backup, and scrypt (128 * n * r bytes) may take:
#: a backup is refused by what it declares before anything is allocated from it.
_MAX_MANIFEST = 1 << 20
_MAX_KEY_FILE = 4096
_MAX_SCRYPT_MEMORY = 1 << 28


def wovyr_version() -> str:
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

    @property
    def signed_by(self) -> str | None:
        """`passphrase`, `root-key` or None (not signed)."""
        signature = self.data.get("signature")
        return str(signature["by"]) if isinstance(signature, dict) else None

    @property
    def signing_key_id(self) -> str | None:
        signature = self.data.get("signature")
        return str(signature.get("key_id")) if isinstance(signature, dict) else None

    def signed(self, by: str, key: bytes, key_id: str | None = None) -> Manifest:
        """This manifest with its signature by `key` (`by`: passphrase or root-key)."""
        data = {k: v for k, v in self.data.items() if k != "signature"}
        signature = {"by": by, "hmac": _mac(data, key)}
        if key_id is not None:
            signature["key_id"] = key_id
        return Manifest({**data, "signature": signature})

    def signature_holds(self, key: bytes) -> bool:
        signature = self.data.get("signature")
        if not isinstance(signature, dict) or not isinstance(signature.get("hmac"), str):
            return False
        return hmac.compare_digest(signature["hmac"], _mac(self.data, key))

    def to_json(self) -> str:
        return json.dumps({**self.data, "digest": _digest(self.data)}, indent=2, sort_keys=True)


def _canonical(data: Mapping[str, Any], *leave_out: str) -> bytes:
    body = {k: v for k, v in data.items() if k not in leave_out}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _digest(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(data, "digest")).hexdigest()


def _mac(data: Mapping[str, Any], key: bytes) -> str:
    body = b"wovyr-backup-manifest\n" + _canonical(data, "digest", "signature")
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def passphrase_signing_key(file_key: bytes) -> bytes:
    """The key a manifest is signed with when its files are sealed under `file_key`."""
    return hmac.new(file_key, b"wovyr backup manifest signature", hashlib.sha256).digest()


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
            f"({wovyr_version()}) reads up to {FORMAT_VERSION}",
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
    known = {*STORE_FILES.values(), *HOME_FILES, *LEGACY_HOME_FILES, DEV_KEY_FILE}
    for name, stored, _role in names:
        # Only the files a backup is made of, by plain name: a crafted manifest cannot
        # make a restore read or write anywhere else.
        if name not in known or stored not in (name, name + ENC_SUFFIX):
            raise BackupRefused(f"the manifest of {src} lists an unexpected file {stored!r}")
    for entry in manifest.files:
        size = entry.get("size")
        if not isinstance(size, int) or size < 0:
            raise BackupRefused(f"the manifest of {src} gives {entry['file']!r} no size")
        if entry["name"] not in STORE_FILES.values() and size > _MAX_KEY_FILE + 64:
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
        elif int(params["chunk_bytes"]) != CHUNK:
            problem = f"chunks of {params['chunk_bytes']} bytes (this Wovyr writes {CHUNK})"
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


def derive_key(passphrase: str, params: Mapping[str, Any]) -> bytes:
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
    """The file in chunks of `CHUNK` bytes, each with whether it is the last (an empty
    file is one empty last chunk)."""
    with path.open("rb") as f:
        current = f.read(CHUNK)
        while True:
            following = f.read(CHUNK)
            yield current, not following
            if not following:
                return
            current = following


def encrypt_file(plain: Path, sealed: Path, key: bytes, name: str) -> None:
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
            if size > CHUNK + _TAG or size > left:  # never read what a size field claims
                raise BackupRefused(
                    f"{sealed.name} declares a chunk {index} of {size} bytes, where a chunk is "
                    f"at most {CHUNK + _TAG} and {left} bytes are left: damaged or altered"
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


# --- checking a backup's files ---------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_READ):
            h.update(block)
    return h.hexdigest()


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
        elif sha256_file(path) != entry["sha256"]:
            problems.append(f"{entry['file']} does not match its SHA-256 (damaged or altered)")
    if manifest.store_file not in {str(e["name"]) for e in manifest.files}:
        problems.append(f"the manifest lists no {manifest.store_file}")
    return problems


def unlock(src: Path, manifest: Manifest, passphrase: str | None) -> bytes | None:
    """The key the backup's files are sealed under (None: not encrypted), its manifest's
    signature checked with it. `BackupRefused` for an encrypted backup without a passphrase
    or with a wrong one, and for a passphrase given to a backup that is not encrypted:
    whoever gives one expects a backup only its holder could have made, and anyone can
    make an unencrypted one."""
    encryption = manifest.encryption
    if encryption is None:
        if passphrase:
            raise BackupRefused(
                f"the backup {src} is not encrypted, but a passphrase was given (--passphrase-"
                "file or WOVYR_BACKUP_PASSPHRASE): anyone can make an unencrypted backup, so "
                "it is refused",
                hint="restore it without a passphrase only if you know where it came from",
            )
        return None
    if not passphrase:
        raise BackupRefused(
            "the backup is encrypted: give its passphrase (--passphrase-file or "
            "WOVYR_BACKUP_PASSPHRASE)"
        )
    key = derive_key(passphrase, encryption)
    if manifest.signed_by is None and int(manifest.data["format_version"]) < 2:
        return key  # an earlier Wovyr's: the encryption authenticates every file
    if manifest.signed_by != "passphrase" or not manifest.signature_holds(
        passphrase_signing_key(key)
    ):
        raise BackupRefused(
            f"the manifest of {src} is not signed with this passphrase: a wrong passphrase, "
            "or the manifest was altered"
        )
    return key


@contextlib.contextmanager
def in_clear(src: Path, manifest: Manifest, key: bytes | None) -> Iterator[Path]:
    """A private temporary folder with the backup's files in clear (decrypted with `key`
    from `unlock`, or copied when the backup is not encrypted), under their names; removed
    afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix=".wovyr-restore-"))
    try:
        for entry in manifest.files:
            name, stored = str(entry["name"]), src / str(entry["file"])
            if key is not None:
                _decrypt_file(stored, scratch / name, key, name)
            else:
                shutil.copyfile(stored, scratch / name)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_sound(src: Path) -> Manifest:
    """The manifest of `src` when every file it names is there, of its size and SHA-256."""
    manifest = read_manifest(src)
    problems = _check_files(src, manifest)
    if problems:
        raise BackupRefused(
            f"the backup {src} is damaged: " + "; ".join(problems),
            hint="use another backup; this one cannot be restored",
        )
    return manifest
