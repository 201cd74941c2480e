"""The KMS: root keys from the environment or a development file (0600, warned about at
every load), bad keys refused clearly, envelope encryption bound to tenant, kind, name and
key version, derived keys, and secrets over a memory:// store."""

from __future__ import annotations

import logging
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.errors import InputError, KmsError, NotFound
from wovyr.platform.kms import (
    DEV_KEY_FILE,
    ROOT_ENV,
    Kms,
    RootKey,
    kms_status,
    load_kms,
    parse_root_key,
    record_escrow,
    rotate,
)
from wovyr.platform.secrets import Secrets, shred_tenant
from wovyr.store.secrets import NewSecret
from wovyr.store.sqlite import SQLiteStore

AT = datetime(2030, 1, 1, tzinfo=UTC)
KEY = "ab" * 32


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ab" * 31, "holds 31 bytes; a root key is 32 bytes"),
        ("ab" * 33, "holds 33 bytes"),
        ("", "holds 0 bytes"),
        ("zz" * 32, "is not a hex string"),
    ],
)
def test_a_root_key_of_the_wrong_length_or_not_hex_is_a_clear_error(
    text: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(KmsError) as refused:
        parse_root_key(text, ROOT_ENV)
    assert message in str(refused.value)
    assert ROOT_ENV in str(refused.value)
    if text:
        assert text not in str(refused.value)  # the key is never echoed
        with pytest.raises(KmsError):
            load_kms(tmp_path, {ROOT_ENV: text})
    assert not (tmp_path / DEV_KEY_FILE).exists()  # no silent fallback to a development key


def test_production_mode_from_the_environment(tmp_path: Path) -> None:
    kms = load_kms(tmp_path, {ROOT_ENV: KEY})
    assert kms.mode == "production"
    assert kms.key_id == RootKey(bytes.fromhex(KEY)).key_id
    assert KEY not in repr(kms) and KEY not in repr(kms.root)
    assert not (tmp_path / DEV_KEY_FILE).exists()


def test_the_development_key_is_created_once_0600_and_warned_about_every_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="wovyr.kms"):
        first = load_kms(tmp_path, {})
        second = load_kms(tmp_path, {})
    path = tmp_path / DEV_KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first.mode == "development" and first.key_id == second.key_id
    warnings = [r.getMessage() for r in caplog.records if "ESCROW IT" in r.getMessage()]
    assert len(warnings) == 2
    assert path.read_text().strip() not in "".join(caplog.messages)
    path.write_text("not a key\n")
    with pytest.raises(KmsError, match=r"the KMS key file .* is not a hex string"):
        load_kms(tmp_path, {})


def test_derived_keys_are_stable_per_purpose_and_root() -> None:
    kms = Kms(RootKey(bytes.fromhex(KEY)), "production")
    anchor = kms.derive_key("audit-anchor")
    assert len(anchor) == 32
    assert anchor == Kms(RootKey(bytes.fromhex(KEY)), "production").derive_key("audit-anchor")
    assert anchor != kms.derive_key("something-else")
    assert anchor != Kms(RootKey(bytes.fromhex("cd" * 32)), "production").derive_key("audit-anchor")
    assert anchor != bytes.fromhex(KEY)


def test_sealed_values_are_bound_to_tenant_kind_name_and_key_version() -> None:
    kms = Kms(RootKey(bytes.fromhex(KEY)), "production")
    data_key = bytes(range(32))
    blob = kms.seal(data_key, "t1", "secret", "A", 1, b"value")
    assert kms.open(data_key, "t1", "secret", "A", 1, blob) == b"value"
    assert len(blob) == 1 + 12 + len(b"value") + 16
    assert kms.seal(data_key, "t1", "secret", "A", 1, b"value") != blob  # a fresh nonce
    for other in (("t2", "secret", "A", 1), ("t1", "payload", "A", 1), ("t1", "secret", "B", 1)):
        with pytest.raises(KmsError, match="does not decrypt"):
            kms.open(data_key, *other, blob)
    with pytest.raises(KmsError):
        kms.open(data_key, "t1", "secret", "A", 2, blob)
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(KmsError, match="corrupt"):
        kms.open(data_key, "t1", "secret", "A", 1, flipped)


def test_secrets_over_a_store() -> None:
    store = SQLiteStore()
    kms = Kms(RootKey(bytes.fromhex(KEY)), "production")
    secrets = Secrets(store, kms)
    info = secrets.set_secret("t1", "API_KEY", "sk-first-1", by="cli", at=AT)
    assert (info.name, info.version) == ("API_KEY", 1)
    assert secrets.set_secret("t1", "API_KEY", "sk-second-2", by="cli", at=AT).version == 2
    assert secrets.resolve_secret("t1", "API_KEY") == "sk-second-2"
    record = store.get_secret("t1", "API_KEY")
    assert record is not None and b"sk-second-2" not in record.ciphertext
    key = store.data_key("t1")
    assert key is not None and key.root_id == kms.key_id
    # another tenant's secret is missing, exactly like one that does not exist
    with pytest.raises(NotFound) as other:
        secrets.resolve_secret("t2", "API_KEY")
    with pytest.raises(NotFound) as missing:
        secrets.resolve_secret("t2", "NOPE")
    assert str(other.value).replace("API_KEY", "X") == str(missing.value).replace("NOPE", "X")
    with pytest.raises(NotFound):
        secrets.secret_info("t2", "API_KEY")
    with pytest.raises(NotFound):
        secrets.delete_secret("t2", "API_KEY", by="cli", at=AT)
    for bad in ("1X", "A-B", "", "x" * 129):
        with pytest.raises(InputError):
            secrets.set_secret("t1", bad, "v", by="cli", at=AT)
    with pytest.raises(InputError):
        secrets.set_secret("t1", "EMPTY", "", by="cli", at=AT)
    # too short to be masked where a step echoes it: refused, and nothing stored
    with pytest.raises(InputError, match="at least 8 characters") as short:
        secrets.set_secret("t1", "PIN", "1234567", by="cli", at=AT)
    assert "1234567" not in str(short.value)
    assert store.get_secret("t1", "PIN") is None
    assert secrets.set_secret("t1", "PIN", "12345678", by="cli", at=AT).version == 1
    # a corrupt ciphertext: a clear error naming the secret, never a value
    store.put_secret(NewSecret("t1", "API_KEY", record.ciphertext[:-3] + b"xyz", 1, AT, "x"))
    with pytest.raises(KmsError, match="secret 'API_KEY' of tenant 't1' does not decrypt"):
        secrets.resolve_secret("t1", "API_KEY")
    # another root key: the data key does not unwrap, and says why
    stranger = Secrets(store, Kms(RootKey(bytes.fromhex("cd" * 32)), "production"))
    store.put_secret(NewSecret("t1", "B", record.ciphertext, 1, AT, "x"))
    with pytest.raises(KmsError, match="wrapped by root key"):
        stranger.resolve_secret("t1", "B")
    # a wrapped data key that was tampered with
    tampered = key.wrapped[:-1] + b"\0"
    assert store.rewrap_data_key("t1", 1, key.root_id, tampered, key.root_id)
    with pytest.raises(KmsError, match="corrupt"):
        Secrets(store, kms).resolve_secret("t1", "B")


def test_status_and_escrow() -> None:
    store = SQLiteStore()
    kms = Kms(RootKey(bytes.fromhex(KEY)), "production")
    Secrets(store, kms).set_secret("t1", "A", "value-of-a", by="cli", at=AT)
    status = kms_status(kms, store)
    assert status.escrowed_at is None and status.data_keys == {kms.key_id: 1}
    assert KEY not in str(status.to_dict())
    record_escrow(kms, store, by="ops", at=AT)
    status = kms_status(kms, store)
    assert (status.escrowed_at, status.escrowed_by) == (AT, "ops")


def test_shredding_a_tenant_makes_its_secrets_unreadable_and_spares_the_others() -> None:
    store = SQLiteStore()
    kms = Kms(RootKey(bytes.fromhex(KEY)), "production")
    secrets = Secrets(store, kms)
    secrets.set_secret("t1", "A", "value-one", by="cli", at=AT)
    secrets.set_secret("t2", "A", "value-two", by="cli", at=AT)
    assert shred_tenant(store, "t1", by="cli", at=AT).destroyed == 1
    for reader in (secrets, Secrets(store, Kms(RootKey(bytes.fromhex(KEY)), "production"))):
        with pytest.raises(KmsError, match="was shredded"):
            reader.resolve_secret("t1", "A")
        assert reader.resolve_secret("t2", "A") == "value-two"
    assert [i.name for i in secrets.list_secrets("t1")] == ["A"]  # the names stay, unreadable
    # a secret set afterwards gets a new data key (version 2) and reads
    secrets.set_secret("t1", "B", "fresh-value", by="cli", at=AT)
    assert secrets.resolve_secret("t1", "B") == "fresh-value"
    with pytest.raises(KmsError, match="was shredded"):
        secrets.resolve_secret("t1", "A")
    # a rotation skips the shredded key and moves the others
    new = RootKey(bytes.fromhex("ef" * 32))
    result = rotate(kms, store, new, at=AT)
    assert result.rewrapped == 2
    assert Secrets(store, Kms(new, "production")).resolve_secret("t1", "B") == "fresh-value"
