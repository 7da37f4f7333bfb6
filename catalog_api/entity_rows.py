"""Catalog rows shared by tables, views and generic tables.

Every named entity owns one row of pyiceberg's ``iceberg_tables`` table (Iceberg Java's
``JdbcCatalog`` schema V1), told apart by its ``iceberg_type`` column: ``TABLE`` (written by
pyiceberg's ``SqlCatalog``), ``VIEW`` (as ``JdbcCatalog`` writes views) and ``GENRC`` for
generic tables (the column holds 5 characters; ``SqlCatalog`` and ``JdbcCatalog`` ignore types
they do not know). The table's primary key ``(catalog_name, table_namespace, table_name)``
therefore makes a name unique across the three kinds, atomically, on every database.
"""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import ICEBERG_TABLE_TYPE, IcebergTables, SqlCatalog
from pyiceberg.typedef import Identifier
from sqlalchemy import ColumnElement, bindparam, select
from sqlalchemy.orm import Session

VIEW_TYPE = "VIEW"
GENERIC_TABLE_TYPE = "GENRC"

_KIND_NAMES = {ICEBERG_TABLE_TYPE: "table", VIEW_TYPE: "view", GENERIC_TABLE_TYPE: "generic table"}


def row_filter(catalog: SqlCatalog, identifier: Identifier) -> ColumnElement[bool]:
    """SQL condition selecting the ``iceberg_tables`` row of one identifier, of any type."""
    return (
        (IcebergTables.catalog_name == catalog.name)
        & (IcebergTables.table_namespace == Catalog.namespace_to_string(identifier[:-1]))
        & (IcebergTables.table_name == identifier[-1])
    )


_ROWS = IcebergTables.__table__.c
#: The ``metadata_location`` of one table: a primary-key lookup, built once (building an ORM
#: statement per request costs ~0.4 ms, more than running it). Parameters: ``catalog``,
#: ``namespace`` (parts joined by dots, as ``SqlCatalog`` stores them) and ``name``.
TABLE_LOCATION_QUERY = select(_ROWS.metadata_location).where(
    _ROWS.catalog_name == bindparam("catalog"),
    _ROWS.table_namespace == bindparam("namespace"),
    _ROWS.table_name == bindparam("name"),
    (_ROWS.iceberg_type == ICEBERG_TABLE_TYPE) | _ROWS.iceberg_type.is_(None),
)


def table_location_parameters(catalog: SqlCatalog, identifier: Identifier) -> dict[str, str]:
    """The parameters of :data:`TABLE_LOCATION_QUERY` for one table identifier."""
    return {
        "catalog": catalog.name,
        "namespace": Catalog.namespace_to_string(identifier[:-1]),
        "name": identifier[-1],
    }


def kind_of(catalog: SqlCatalog, identifier: Identifier) -> str | None:
    """Tell what holds a name: ``"table"``, ``"view"``, ``"generic table"`` or None.

    Args:
        catalog: The SQL catalog.
        identifier: Namespace parts followed by the name.

    Returns:
        The kind of the entity named ``identifier``, or None when the name is free.
    """
    stmt = select(IcebergTables.iceberg_type).where(row_filter(catalog, identifier))
    with Session(catalog.engine) as session:
        found = session.execute(stmt).first()
    if found is None:
        return None
    return _KIND_NAMES.get(found[0] or ICEBERG_TABLE_TYPE, "entity")


def names_of_type(catalog: SqlCatalog, namespace: Identifier, iceberg_type: str) -> list[str]:
    """List the names of one type's rows in a namespace, sorted.

    Args:
        catalog: The SQL catalog.
        namespace: Namespace parts.
        iceberg_type: ``VIEW_TYPE`` or ``GENERIC_TABLE_TYPE``.

    Returns:
        The entity names.
    """
    stmt = select(IcebergTables.table_name).where(
        IcebergTables.catalog_name == catalog.name,
        IcebergTables.table_namespace == Catalog.namespace_to_string(namespace),
        IcebergTables.iceberg_type == iceberg_type,
    )
    with Session(catalog.engine) as session:
        return sorted(session.scalars(stmt))


def non_table_entities(catalog: SqlCatalog, namespace: Identifier) -> list[str]:
    """Describe the views and generic tables of a namespace (a namespace holding any is not empty).

    Args:
        catalog: The SQL catalog.
        namespace: Namespace parts.

    Returns:
        Descriptions such as ``"view v1"``, sorted; empty when there are none.
    """
    return [
        f"{_KIND_NAMES[kind]} {name}"
        for kind in (VIEW_TYPE, GENERIC_TABLE_TYPE)
        for name in names_of_type(catalog, namespace, kind)
    ]
