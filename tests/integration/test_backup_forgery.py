"""A backup the host cannot tell is genuine is never restored over it. The attack: someone
who can put a folder where the host's administrator restores from makes an unencrypted
backup of an installation of their own (their root key in it, their store with their keys
and policies) and waits for `wovyr admin restore --force`. It was restored even when a
passphrase was given, and its root key replaced the host's: their admin key then held a
host whose root key they knew.

Now a passphrase refuses an unencrypted backup; the manifest is signed (by the
passphrase's key or the root key's) and a forged or unsigned one is refused unless
`--allow-unsigned`; a host's root key is never replaced by a backup's; a host that requires
encryption refuses the rest; and `--force` never replaces a store that a server or worker
holds open."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from tests.integration.backup_tools import NOW, installation
from tests.integration.backup_tools import backup as take

from wovyr.cli.main import main
from wovyr.errors import BackupRefused, ConfigError, Conflict, KmsError
from wovyr.platform.backup import (
    MANIFEST,
    Manifest,
    RestoreReport,
    restore_backup,
    verify_backup,
)
from wovyr.platform.kms import DEV_KEY_FILE, ROOT_ENV, load_kms
from wovyr.platform.secrets import Secrets
from wovyr.store import open_store


def backup(home: Path, dest: Path, **options: object) -> Path:
    take(home, dest, **options)
    return dest


def files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """The host: its own installation and development root key."""
    home = tmp_path / "host"
    installation(home, "the host's secret")
    return home


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    """The attacker's backup: an installation of theirs, their root key included."""
    home = tmp_path / "attacker"
    installation(home, "planted-by-mallory")
    return backup(home, tmp_path / "evil-backup", include_root_key=True)


def restore(src: Path, home: Path, **kw: object) -> RestoreReport:
    """Restore `src` into `home` (no root key in the environment unless `env` says)."""
    kw.setdefault("env", {})
    return restore_backup(
        src,
        f"sqlite:///{home / 'wovyr.db'}",
        home,
        actor="local:test",
        at=NOW,
        **kw,  # type: ignore[arg-type]
    )


def test_a_passphrase_refuses_an_unencrypted_backup(host: Path, evil: Path) -> None:
    before = files(host)
    with pytest.raises(BackupRefused, match="not encrypted, but a passphrase was given"):
        restore(evil, host, force=True, passphrase="the host's passphrase")
    assert files(host) == before
    with pytest.raises(BackupRefused, match="not encrypted, but a passphrase was given"):
        verify_backup(evil, passphrase="the host's passphrase", env={})


def test_a_backup_never_replaces_the_hosts_root_key(host: Path, evil: Path) -> None:
    before = files(host)
    with pytest.raises(KmsError, match="a restore never puts a backup's root key in place"):
        restore(evil, host, force=True)
    assert files(host) == before
    # Not even with --allow-unsigned: the host's key stays, and does not open the backup.
    with pytest.raises(KmsError, match="is not the one the backup's secrets are sealed under"):
        restore(evil, host, force=True, allow_unsigned=True)
    assert files(host)[DEV_KEY_FILE] == before[DEV_KEY_FILE]


def test_a_backup_that_brings_its_own_root_key_is_not_proof_of_origin(
    tmp_path: Path, evil: Path
) -> None:
    """On a host without a root key, the backup's would be installed: only when the
    administrator says they know where it came from, since it signs its own manifest."""
    fresh = tmp_path / "fresh"
    with pytest.raises(BackupRefused, match="signed only by the root key it carries itself"):
        restore(evil, fresh)
    assert not (fresh / "wovyr.db").exists() and not (fresh / DEV_KEY_FILE).exists()
    notes = restore(evil, fresh, allow_unsigned=True).notes
    assert any("--allow-unsigned" in n for n in notes), notes
    assert (fresh / DEV_KEY_FILE).read_bytes() == (evil / DEV_KEY_FILE).read_bytes()


def test_a_forged_manifest_is_refused(host: Path, tmp_path: Path) -> None:
    """The digest catches damage, not forgery (anyone recomputes it): the signature by the
    host's root key catches the edit."""
    src = backup(host, tmp_path / "bk")
    data = json.loads((src / MANIFEST).read_text())
    data.pop("digest")
    data["audit_head"] = None  # e.g. to hide a truncated chain
    (src / MANIFEST).write_text(Manifest(data).to_json())
    with pytest.raises(BackupRefused, match="does not match its signature by root key"):
        restore(src, tmp_path / "fresh-home", force=True, env={ROOT_ENV: _host_key(host)})
    with pytest.raises(BackupRefused, match="does not match its signature by root key"):
        verify_backup(src, home=host, env={})


def _host_key(home: Path) -> str:
    return load_kms(home, {}, warn=False).root.key.hex()


def test_a_genuine_backup_restores_with_the_hosts_key(host: Path, tmp_path: Path) -> None:
    src = backup(host, tmp_path / "bk")
    assert verify_backup(src, home=host, env={}).notes == []
    moved = tmp_path / "moved"
    assert restore(src, moved, env={ROOT_ENV: _host_key(host)}).notes == []
    store = open_store(f"sqlite:///{moved / 'wovyr.db'}")
    try:
        kms = load_kms(moved, {ROOT_ENV: _host_key(host)}, warn=False)
        assert Secrets(store, kms).resolve_secret("default", "TOKEN") == "the host's secret"
    finally:
        store.close()


def test_the_hosts_policy_refuses_unencrypted_backups(host: Path, tmp_path: Path) -> None:
    src = backup(host, tmp_path / "bk")
    with pytest.raises(BackupRefused, match="restores encrypted backups only"):
        restore(src, tmp_path / "t", require_encryption=True, env={ROOT_ENV: _host_key(host)})
    with pytest.raises(ConfigError, match="takes encrypted backups only"):
        backup(host, tmp_path / "bk2", require_encryption=True)
    encrypted = backup(host, tmp_path / "enc", passphrase="pw")
    restore(
        encrypted,
        tmp_path / "t2",
        passphrase="pw",
        require_encryption=True,
        env={ROOT_ENV: _host_key(host)},
    )


def legacy(src: Path, *, session_key: bool = False) -> None:
    """Make `src` a backup of format 1 (an earlier Wovyr): no signature, and, as those
    did, the web UI's session key in it."""
    data = json.loads((src / MANIFEST).read_text())
    data.pop("digest")
    data.pop("signature")
    data["format_version"] = 1
    if session_key:
        body = b"0123456789abcdef" * 4
        (src / "ui-session.key").write_bytes(body)
        data["files"].append(
            {
                "name": "ui-session.key",
                "file": "ui-session.key",
                "role": "home",
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
        )
    (src / MANIFEST).write_text(Manifest(data).to_json())


def test_a_backup_of_an_earlier_wovyr_needs_allow_unsigned_and_keeps_the_session_key_out(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = backup(host, tmp_path / "bk")
    legacy(src, session_key=True)
    monkeypatch.setenv(ROOT_ENV, _host_key(host))
    target = ["--target", str(tmp_path / "t")]
    assert main(["admin", "restore", str(src), *target]) == 1
    err = capsys.readouterr().err
    assert "its manifest is not signed (a backup of an earlier Wovyr" in err
    assert "give --allow-unsigned" in err
    assert main(["admin", "restore", str(src), *target, "--allow-unsigned"]) == 0
    err = capsys.readouterr().err
    assert "restored with --allow-unsigned although its manifest is not signed" in err
    assert "ui-session.key was not restored" in err
    assert not (tmp_path / "t" / "ui-session.key").exists()
    # An encrypted backup of an earlier Wovyr: its files are authenticated, it restores.
    enc = backup(host, tmp_path / "enc", passphrase="pw")
    legacy(enc)
    notes = restore(enc, tmp_path / "t3", passphrase="pw", env={ROOT_ENV: _host_key(host)}).notes
    assert any("authenticated by the encryption" in n for n in notes), notes


def test_force_never_replaces_a_store_in_use(host: Path, tmp_path: Path) -> None:
    src = backup(host, tmp_path / "bk")
    target = tmp_path / "target"
    installation(target, "the target's")
    holder = sqlite3.connect(target / "wovyr.db")  # a server or worker with it open
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("SELECT count(*) FROM executions").fetchone()
    try:
        before = files(target)
        with pytest.raises(Conflict, match=r"is in use: .* is open in another connection"):
            restore(src, target, force=True, env={ROOT_ENV: _host_key(host)})
        assert files(target) == before
    finally:
        holder.close()
    restore(src, target, force=True, env={ROOT_ENV: _host_key(host)})
    assert (target / "wovyr.db.pre-restore").is_file()
