"""Metrics reports (``POST .../tables/{table}/metrics``) kept in the catalog database.

Reports are stored as sent (JSON) in the table ``lakehouse_metrics_reports``, next to the
catalog's own tables, and read back by the lakehouse extension endpoint
``GET /iceberg/v1/namespaces/{namespace}/tables/{table}/metrics``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyiceberg.typedef import Identifier
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
)

metadata = MetaData()

reports_table = Table(
    "lakehouse_metrics_reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("catalog_name", String(255), nullable=False),
    Column("table_namespace", String(255), nullable=False),
    Column("table_name", String(255), nullable=False),
    Column("report_type", String(32), nullable=False),
    Column("snapshot_id", BigInteger, nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("report", Text, nullable=False),
    Index("ix_lakehouse_metrics_reports_table", "catalog_name", "table_namespace", "table_name"),
)


@dataclass(frozen=True)
class StoredReport:
    """One stored metrics report.

    Attributes:
        id: Increasing id (order of arrival).
        report_type: ``scan-report`` or ``commit-report``.
        received_at: When the server received it (UTC).
        report: The report as the client sent it.
    """

    id: int
    report_type: str
    received_at: datetime
    report: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """Return the wire form: ``id``, ``report-type``, ``received-at`` (ISO 8601), ``report``."""
        return {
            "id": self.id,
            "report-type": self.report_type,
            "received-at": self.received_at.isoformat(),
            "report": self.report,
        }


class MetricsStore:
    """Reads and writes metrics reports; creates its table if absent.

    Args:
        engine: The catalog database engine.
        catalog_name: Catalog name stored with every report.
    """

    def __init__(self, engine: Engine, catalog_name: str) -> None:
        self.engine = engine
        self.catalog_name = catalog_name
        metadata.create_all(engine)

    def _where(self, identifier: Identifier) -> list[Any]:
        cols = reports_table.c
        return [
            cols.catalog_name == self.catalog_name,
            cols.table_namespace == ".".join(identifier[:-1]),
            cols.table_name == identifier[-1],
        ]

    def add(self, identifier: Identifier, report: dict[str, Any]) -> int:
        """Store one report of a table and return its id.

        Args:
            identifier: Namespace parts followed by the table name.
            report: The report, JSON-ready, with its ``report-type``.
        """
        row = {
            "catalog_name": self.catalog_name,
            "table_namespace": ".".join(identifier[:-1]),
            "table_name": identifier[-1],
            "report_type": report["report-type"],
            "snapshot_id": report.get("snapshot-id"),
            "received_at": datetime.now(UTC),
            "report": json.dumps(report),
        }
        with self.engine.begin() as conn:
            key = conn.execute(insert(reports_table).values(**row)).inserted_primary_key
        return int(key[0]) if key else 0

    def list(
        self, identifier: Identifier, after_id: int, limit: int | None,
        report_type: str | None = None,
    ) -> list[StoredReport]:
        """Return a table's reports with an id above ``after_id``, oldest first.

        Args:
            identifier: Namespace parts followed by the table name.
            after_id: Only reports with a larger id (0 for all).
            limit: Most reports returned (None for all).
            report_type: Only reports of this type, when given.
        """
        cols = reports_table.c
        query = select(reports_table).where(*self._where(identifier), cols.id > after_id)
        if report_type:
            query = query.where(cols.report_type == report_type)
        query = query.order_by(cols.id).limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            StoredReport(row["id"], row["report_type"], _utc(row["received_at"]),
                         json.loads(row["report"]))
            for row in rows
        ]


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
