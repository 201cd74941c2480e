"""What the backup tests share: a small SQLite installation with a development root key
and a secret, and a backup of it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from wovyr.engine.engine import Engine
from wovyr.platform.backup import BackupReport, take_backup
from wovyr.platform.kms import load_kms
from wovyr.platform.secrets import Secrets
from wovyr.store import open_store

NOW = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: flow}
activities:
  - id: x
    set: {ok: true}
"""


def installation(home: Path, value: str = "token-value") -> str:
    """An installation under `home`: a definition, an execution, a secret `TOKEN` of
    tenant default holding `value` (audited). Returns its root key (hex)."""
    store = open_store(f"sqlite:///{home / 'wovyr.db'}")
    try:
        engine = Engine(store).acting("local:test")
        engine.apply(FLOW)
        engine.start(name="flow", execution_id="e1")
        kms = load_kms(home, {}, warn=False)
        Secrets(store, kms).set_secret("default", "TOKEN", value, by="t", at=NOW, actor="local:t")
        return kms.root.key.hex()
    finally:
        store.close()


def backup(home: Path, dest: Path, **options: object) -> BackupReport:
    """A backup of the installation under `home` into `dest` (`take_backup` options)."""
    store = open_store(f"sqlite:///{home / 'wovyr.db'}")
    try:
        kms = load_kms(home, {}, warn=False)
        return take_backup(store, home, dest, kms=kms, at=NOW, **options)  # type: ignore[arg-type]
    finally:
        store.close()
