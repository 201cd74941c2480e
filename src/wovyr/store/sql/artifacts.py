"""Artifacts of both SQL stores (the contract is `wovyr.store.artifacts`); its SQL lives in
`artifacts.sql`. The first put of a digest takes its debits (`SQLQuotas._debit`, checked)
and appends its audit record in its own transaction; a put of a stored digest writes
nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from wovyr.store.artifacts import ArtifactRecord, NewArtifact
from wovyr.store.audit import AuditEntry
from wovyr.store.rows import from_row
from wovyr.store.sql import SQLRole, Tx

__all__ = ["SQLArtifacts"]

_END_OF_TIME = datetime(9999, 12, 31, tzinfo=UTC)


class SQLArtifacts(SQLRole):
    # the store's quota ledger (`SQLQuotas._debit`), in the caller's transaction
    _debit: Callable[..., None]

    def put_artifact(
        self, new: NewArtifact, *, audit: AuditEntry | None = None
    ) -> tuple[ArtifactRecord, bool]:
        q, d = self._queries("artifacts"), self._dialect
        params = {
            "tenant": new.tenant,
            "digest": new.digest,
            "media_type": new.media_type,
            "size": new.size,
            "data": new.data,
            "created_at": d.timestamp(new.created_at),
            "created_by": new.created_by,
        }

        def body(tx: Tx) -> tuple[ArtifactRecord, bool]:
            created = tx.run(q["artifact_insert"], params) == 1
            if created:
                self._debit(tx, new.tenant, new.debits)
                tx.append_audit(audit)
            row = tx.rows(q["artifact_get"], params)[0]
            return from_row(ArtifactRecord, row, d), created

        result: tuple[ArtifactRecord, bool] = self._sql_write(body)
        return result

    def get_artifact(self, tenant: str, digest: str) -> ArtifactRecord | None:
        params = {"tenant": tenant, "digest": digest}
        return self._role_record("artifacts", "artifact_get", params, ArtifactRecord)

    def read_artifact(self, tenant: str, digest: str) -> tuple[ArtifactRecord, bytes] | None:
        sql = self._queries("artifacts")["artifact_read"]
        rows = self._sql_read(sql, {"tenant": tenant, "digest": digest})
        if not rows:
            return None
        return from_row(ArtifactRecord, rows[0], self._dialect), bytes(rows[0]["data"])

    def list_artifacts(
        self, tenant: str, *, before: tuple[datetime, str] | None = None, limit: int = 50
    ) -> list[ArtifactRecord]:
        # no cursor: every row is before the end of time ("~" sorts after every digest)
        at, digest = before or (_END_OF_TIME, "~")
        params: dict[str, Any] = {
            "tenant": tenant,
            "before_at": self._dialect.timestamp(at),
            "before_digest": digest,
            "limit": limit,
        }
        return self._role_records("artifacts", "artifact_page", params, ArtifactRecord)
