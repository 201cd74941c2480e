"""A backup that cannot be trusted is refused with a clear error, and the target is left
exactly as it was: a flipped byte, a truncated file, a newer format or schema, a wrong root
key, a wrong passphrase, a non-empty target without --force."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from tests.integration.backup_tools import NOW, backup, installation

from wovyr.cli.main import main
from wovyr.errors import BackupRefused, Conflict, KmsError, WovyrError
from wovyr.platform.backup import (
    BACKUP_TOOL,
    MANIFEST,
    Manifest,
    read_manifest,
    register_backup_activity,
    restore_backup,
    take_backup,
    verify_backup,
)
from wovyr.platform.kms import ROOT_ENV, RootKey, load_kms
from wovyr.platform.secrets import Secrets
from wovyr.server.ui.session import SECRET_FILE, load_secret
from wovyr.store import open_store


def _installation(home: Path) -> str:
    """A small installation under `home` with a secret and a web UI session key; returns
    its root key (hex)."""
    key = installation(home)
    load_secret(home)
    return key


def _backup(home: Path, dest: Path, passphrase: str | None = None) -> None:
    backup(home, dest, passphrase=passphrase)


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` and the SHA-256 of its bytes."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, str]:
    home = tmp_path / "src-home"
    key = _installation(home)
    _backup(home, tmp_path / "bk")
    return tmp_path / "bk", key


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A target home that holds another installation (untouched by every refusal)."""
    home = tmp_path / "target"
    _installation(home)
    return home


def _restore(src: Path, home: Path, key: str, **kw: object) -> None:
    restore_backup(
        src,
        f"sqlite:///{home / 'wovyr.db'}",
        home,
        actor="local:test",
        at=NOW,
        env={ROOT_ENV: key},
        **kw,  # type: ignore[arg-type]
    )


def _refused(
    src: Path, home: Path, key: str, error: type[WovyrError], words: str, **kw: object
) -> None:
    before = _snapshot(home)
    with pytest.raises(error, match=words):
        _restore(src, home, key, force=True, **kw)
    assert _snapshot(home) == before  # the target is untouched
    assert not list(home.parent.rglob(".*restoring*"))


def test_a_flipped_byte_is_refused(source: tuple[Path, str], target: Path) -> None:
    src, key = source
    path = src / "store.sqlite"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    _refused(src, target, key, BackupRefused, "store.sqlite does not match its SHA-256")
    with pytest.raises(BackupRefused, match="damaged"):
        verify_backup(src, env={})


def test_a_truncated_file_is_refused(source: tuple[Path, str], target: Path) -> None:
    src, key = source
    path = src / "store.sqlite"
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - 4096)
    _refused(src, target, key, BackupRefused, "truncated")


def test_a_missing_manifest_or_edited_manifest_is_refused(
    source: tuple[Path, str], target: Path
) -> None:
    src, key = source
    text = (src / MANIFEST).read_text()
    (src / MANIFEST).write_text(text.replace('"schema_version": ', '"schema_version": 1'))
    _refused(src, target, key, BackupRefused, "altered or damaged")
    (src / MANIFEST).unlink()
    _refused(src, target, key, BackupRefused, "no manifest.json")


def _rewrite(src: Path, change: dict[str, object]) -> None:
    """Re-sign the manifest with `change` merged in (what a newer Wovyr would write)."""
    data = json.loads((src / MANIFEST).read_text())
    data.pop("digest")
    for name, value in change.items():
        if isinstance(value, dict):
            data[name] = {**data[name], **value}
        else:
            data[name] = value
    (src / MANIFEST).write_text(Manifest(data).to_json())


def test_a_newer_format_or_schema_is_refused(source: tuple[Path, str], target: Path) -> None:
    src, key = source
    _rewrite(src, {"format_version": 99, "wovyr_version": "9.0.0"})
    _refused(src, target, key, BackupRefused, "format version 99.*Wovyr 9.0.0")
    _rewrite(src, {"format_version": 1, "store": {"schema_version": 9999}})
    _refused(src, target, key, BackupRefused, "schema version 9999 is newer")


def test_a_manifest_naming_another_file_is_refused(source: tuple[Path, str], target: Path) -> None:
    src, key = source
    data = json.loads((src / MANIFEST).read_text())
    data.pop("digest")
    data["files"][0]["name"] = data["files"][0]["file"] = "../../escape"
    (src / MANIFEST).write_text(Manifest(data).to_json())
    _refused(src, target, key, BackupRefused, "unexpected file '../../escape'")


def test_a_wrong_root_key_is_refused(source: tuple[Path, str], target: Path) -> None:
    src, _ = source
    wrong = RootKey.generate().key.hex()
    _refused(src, target, wrong, KmsError, "not the one the backup's secrets are sealed under")


def test_a_non_empty_target_needs_force(source: tuple[Path, str], target: Path) -> None:
    src, key = source
    before = _snapshot(target)
    with pytest.raises(Conflict, match=r"differs from the backup's|is not empty"):
        _restore(src, target, key)
    assert _snapshot(target) == before
    _restore(src, target, key, force=True)  # replaced, the old database kept aside
    assert (target / "wovyr.db.pre-restore").is_file()
    store = open_store(f"sqlite:///{target / 'wovyr.db'}")
    try:
        kms = load_kms(target, {ROOT_ENV: key}, warn=False)
        assert Secrets(store, kms).resolve_secret("default", "TOKEN") == "token-value"
        head = store.audit_head()
        assert head is not None and head.action == "backup.restore"
    finally:
        store.close()
    # The web UI's session key is the host's: no backup carries it, a restore keeps it.
    assert (target / SECRET_FILE).read_bytes() != (
        src.parent / "src-home" / SECRET_FILE
    ).read_bytes()


def test_encrypted_backup_round_trip_and_refusals(tmp_path: Path) -> None:
    home = tmp_path / "src-home"
    key = _installation(home)
    _backup(home, tmp_path / "enc", passphrase="correct horse")
    files = {p.name for p in (tmp_path / "enc").iterdir()}
    assert files == {MANIFEST, "store.sqlite.enc"}
    raw = (tmp_path / "enc" / "store.sqlite.enc").read_bytes()
    assert b"SQLite format 3" not in raw and b"TOKEN" not in raw
    assert not verify_backup(tmp_path / "enc").decrypted  # checksums only, and it says so
    assert verify_backup(tmp_path / "enc", passphrase="correct horse", env={}).decrypted
    fresh = tmp_path / "fresh"
    with pytest.raises(BackupRefused, match="wrong passphrase"):
        _restore(tmp_path / "enc", fresh, key, passphrase="wrong horse")
    assert _snapshot(fresh) == {}
    with pytest.raises(BackupRefused, match="encrypted: give its passphrase"):
        _restore(tmp_path / "enc", fresh, key)
    _restore(tmp_path / "enc", fresh, key, passphrase="correct horse")
    store = open_store(f"sqlite:///{fresh / 'wovyr.db'}")
    try:
        kms = load_kms(fresh, {ROOT_ENV: key}, warn=False)
        assert Secrets(store, kms).resolve_secret("default", "TOKEN") == "token-value"
    finally:
        store.close()


def test_a_flipped_byte_in_an_encrypted_file_does_not_open(tmp_path: Path) -> None:
    """Even with the manifest's checksum recomputed to match (an attacker's edit), the
    authenticated encryption refuses the file."""
    home = tmp_path / "src-home"
    key = _installation(home)
    src = tmp_path / "enc"
    _backup(home, src, passphrase="pw")
    path = src / "store.sqlite.enc"
    data = bytearray(path.read_bytes())
    data[100] ^= 0x80
    path.write_bytes(bytes(data))
    manifest = read_manifest(src).data
    for entry in manifest["files"]:
        if entry["file"] == path.name:
            entry["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    (src / MANIFEST).write_text(Manifest(manifest).to_json())
    # The manifest's signature needs the passphrase: the recomputed checksum breaks it.
    with pytest.raises(BackupRefused, match="not signed with this passphrase"):
        _restore(src, tmp_path / "fresh", key, passphrase="pw")
    # As a manifest of an earlier Wovyr (not signed), the encryption still refuses it.
    _legacy(src)
    with pytest.raises(BackupRefused, match="does not decrypt at chunk 0"):
        _restore(src, tmp_path / "fresh", key, passphrase="pw")
    assert not (tmp_path / "fresh").exists() or _snapshot(tmp_path / "fresh") == {}


def test_cli_backup_verify_restore_and_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "h"
    key = _installation(home)
    monkeypatch.delenv(ROOT_ENV, raising=False)
    bk = tmp_path / "bk"
    assert main(["admin", "backup", str(bk), "--home", str(home), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["store"]["kind"] == "sqlite" and out["root_key"] == "escrow"
    assert main(["admin", "backup", "verify", str(bk), "--home", str(home), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["audit_checked"] is True
    # The development key is not in the backup: a home without it cannot open the secrets.
    code = main(["admin", "restore", str(bk), "--target", str(tmp_path / "new")])
    assert code == 1
    assert "no root key to open the backup's secrets" in capsys.readouterr().err
    assert not (tmp_path / "new" / "wovyr.db").exists()
    monkeypatch.setenv(ROOT_ENV, key)
    assert main(["admin", "restore", str(bk), "--target", str(tmp_path / "new")]) == 0
    assert "restored" in capsys.readouterr().out
    assert main(["admin", "restore", str(bk), "--target", str(tmp_path / "new")]) == 1
    assert "not empty" in capsys.readouterr().err
    monkeypatch.delenv(ROOT_ENV)
    with_key = tmp_path / "bk-key"
    args = ["admin", "backup", str(with_key), "--home", str(home), "--include-root-key"]
    assert main(args) == 0
    assert "holds the KMS root key" in capsys.readouterr().err
    assert (with_key / "kms-root.key").is_file()
    assert os.stat(with_key / "kms-root.key").st_mode & 0o077 == 0


def test_a_memory_store_cannot_be_backed_up_and_dest_must_be_new(tmp_path: Path) -> None:
    from wovyr.activities.base import ActivityRegistry
    from wovyr.errors import ConfigError

    # SQLite underneath, but it ends with its process: no backup, no backup activity
    memory = open_store("memory://")
    try:
        with pytest.raises(ConfigError, match="cannot be backed up"):
            take_backup(memory, tmp_path, tmp_path / "bk", kms=None, at=NOW)
        registry = ActivityRegistry()
        register_backup_activity(registry, memory, tmp_path, lambda: None, lambda: NOW)
        assert BACKUP_TOOL not in registry
    finally:
        memory.close()
    assert not (tmp_path / "bk").exists()
    home = tmp_path / "h"
    _installation(home)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    store = open_store(f"sqlite:///{home / 'wovyr.db'}")
    try:
        with pytest.raises(Conflict, match="not an empty folder"):
            take_backup(store, home, tmp_path / "taken", kms=None, at=NOW)
    finally:
        store.close()
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["x"]
    assert not list(tmp_path.glob(".taken.partial-*"))


def _reseal(src: Path, data: dict[str, object]) -> None:
    """Write `data` as the manifest with its digest recomputed (anyone can)."""
    data.pop("digest", None)
    (src / MANIFEST).write_text(Manifest(data).to_json())


def _legacy(src: Path) -> None:
    """Make the manifest one of format 1, as an earlier Wovyr wrote it: not signed."""
    data = json.loads((src / MANIFEST).read_text())
    data.pop("signature", None)
    data["format_version"] = 1
    _reseal(src, data)


def test_a_crafted_archive_is_refused_by_what_it_declares(tmp_path: Path) -> None:
    """A manifest asking scrypt for 1 TiB made `backup verify` raise MemoryError, and a
    chunk's size field could make it read whatever it claims: each is refused, with a
    clear error, before anything is allocated from it."""
    home = tmp_path / "src-home"
    _installation(home)
    src = tmp_path / "enc"
    _backup(home, src, passphrase="pw")
    original = json.loads((src / MANIFEST).read_text())

    greedy = json.loads(json.dumps(original))
    greedy["encryption"]["n"] = 1 << 30
    _reseal(src, greedy)
    with pytest.raises(BackupRefused, match=r"scrypt n=1073741824, r=8, which needs 1048576 MiB"):
        verify_backup(src, passphrase="pw", env={})
    with pytest.raises(BackupRefused, match="refused before deriving any key"):
        _restore(src, tmp_path / "fresh", "00" * 32, passphrase="pw")

    # A chunk's size field is reached only past the signature (the passphrase's holder),
    # or in a backup of an earlier Wovyr: not signed.
    legacy = json.loads(json.dumps(original))
    legacy.pop("signature")
    legacy["format_version"] = 1
    _reseal(src, json.loads(json.dumps(legacy)))
    path = src / "store.sqlite.enc"
    data = bytearray(path.read_bytes())
    data[12:16] = (0xFFFFFFF0).to_bytes(4, "big")  # the first chunk's size field
    path.write_bytes(bytes(data))
    forged = json.loads(json.dumps(legacy))
    for entry in forged["files"]:
        if entry["file"] == path.name:
            entry["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    _reseal(src, forged)
    with pytest.raises(BackupRefused, match=r"declares a chunk 0 of 4294967280 bytes"):
        verify_backup(src, passphrase="pw", env={})

    (src / MANIFEST).write_bytes(b" " * (2 << 20) + json.dumps(original).encode())
    with pytest.raises(BackupRefused, match="larger than 1048576 bytes"):
        verify_backup(src, env={})
