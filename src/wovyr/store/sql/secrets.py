"""The KMS and secrets tables of both SQL stores (the contract is `wovyr.store.secrets`);
its SQL lives in `secrets.sql`. Scrubbing the data keys' earlier copies is each store's own
(`scrub_data_keys`: SQLite rewrites the table with secure_delete and empties its WAL,
PostgreSQL vacuums)."""

from __future__ import annotations

from wovyr.store.audit import AuditEntry
from wovyr.store.rows import from_row, to_params
from wovyr.store.secrets import SHREDDED, DataKeyRecord, KmsRootRecord, NewSecret, SecretRecord
from wovyr.store.sql import SQLRole, Tx

__all__ = ["SQLSecrets"]


class SQLSecrets(SQLRole):
    def add_data_key(self, record: DataKeyRecord) -> DataKeyRecord:
        q, params = self._queries("secrets"), to_params(record, self._dialect)

        def body(tx: Tx) -> DataKeyRecord:
            tx.run(q["data_key_add"], params)
            return from_row(DataKeyRecord, tx.rows(q["data_key_get"], params)[0], self._dialect)

        added: DataKeyRecord = self._sql_write(body)
        return added

    def data_key(self, tenant: str, version: int | None = None) -> DataKeyRecord | None:
        name = "data_key_latest" if version is None else "data_key_get"
        params = {"tenant": tenant, "version": version}
        return self._role_record("secrets", name, params, DataKeyRecord)

    def list_data_keys(self) -> list[DataKeyRecord]:
        return self._role_records("secrets", "data_key_list", {}, DataKeyRecord)

    def rewrap_data_key(
        self, tenant: str, version: int, old_root_id: str, wrapped: bytes, root_id: str
    ) -> bool:
        sql = self._queries("secrets")["data_key_rewrap"]
        params = {
            "tenant": tenant,
            "version": version,
            "old_root_id": old_root_id,
            "wrapped": wrapped,
            "root_id": root_id,
        }
        return int(self._sql_write(lambda tx: tx.run(sql, params))) == 1

    def shred_data_keys(self, tenant: str, *, audit: AuditEntry | None = None) -> int:
        sql = self._queries("secrets")["data_key_shred"]
        params = {"tenant": tenant, "shredded": SHREDDED, "empty": b""}

        def body(tx: Tx) -> int:
            count = tx.run(sql, params)
            tx.append_audit(audit)
            return count

        return int(self._sql_write(body))

    def put_secret(self, new: NewSecret, *, audit: AuditEntry | None = None) -> SecretRecord:
        sql = self._queries("secrets")["secret_put"]
        params = to_params(new, self._dialect)

        def body(tx: Tx) -> SecretRecord:
            row = tx.rows(sql, params)[0]
            tx.append_audit(audit)
            return from_row(SecretRecord, row, self._dialect)

        record: SecretRecord = self._sql_write(body)
        return record

    def get_secret(self, tenant: str, name: str) -> SecretRecord | None:
        params = {"tenant": tenant, "name": name}
        return self._role_record("secrets", "secret_get", params, SecretRecord)

    def list_secrets(self, tenant: str) -> list[SecretRecord]:
        return self._role_records("secrets", "secret_list", {"tenant": tenant}, SecretRecord)

    def delete_secret(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        sql = self._queries("secrets")["secret_delete"]
        params = {"tenant": tenant, "name": name}

        def body(tx: Tx) -> bool:
            if tx.run(sql, params) != 1:
                return False
            tx.append_audit(audit)
            return True

        return bool(self._sql_write(body))

    def kms_root(self, root_id: str) -> KmsRootRecord | None:
        return self._role_record("secrets", "kms_root_get", {"root_id": root_id}, KmsRootRecord)

    def put_kms_root(self, record: KmsRootRecord, *, audit: AuditEntry | None = None) -> None:
        sql, params = (
            self._queries("secrets")["kms_root_put"],
            to_params(record, self._dialect),
        )

        def body(tx: Tx) -> None:
            tx.run(sql, params)
            tx.append_audit(audit)

        self._sql_write(body)
