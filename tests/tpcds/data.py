"""TPC-DS data at a small scale factor, and refresh batches of inserts, deletes and updates.

The tables come from DuckDB's ``dsdgen`` (:func:`tests.tpcds.workload.connect`), kept as
Arrow tables with the types of :func:`tests.tpcds.workload.schemas`. A batch changes every
fact table and two dimensions, in the spirit of TPC-DS's data maintenance (TPC-DS 3.2, 5.1):

- each sales, returns and inventory table loses :data:`SHARE` of its rows and gains as
  many copies of other rows, moved to another row's date (new facts on existing keys);
- :data:`SHARE` of the ``item`` rows change price (``i_current_price`` up 1.25) and of the
  ``customer`` rows change birth country (an update: the old row out, the new one in).

Batches are drawn by a seeded generator, so every run sees the same changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm import WEIGHT
from tests.tpcds.workload import connect, schemas

SCALE_FACTOR = 0.01
SEED = 20261127
SHARE = 0.02
"""Share of each changed table's rows a batch deletes (and inserts, or updates)."""

FACTS = {
    "store_sales": "ss_sold_date_sk", "store_returns": "sr_returned_date_sk",
    "catalog_sales": "cs_sold_date_sk", "catalog_returns": "cr_returned_date_sk",
    "web_sales": "ws_sold_date_sk", "web_returns": "wr_returned_date_sk",
    "inventory": "inv_date_sk",
}
"""Fact table -> its date key, which an inserted copy takes from another row."""


@dataclass(frozen=True)
class Version:
    """The tables after a batch, and the batch as Z-sets.

    Attributes:
        tables: Every table (Arrow, typed as the schema says).
        delta: Each changed table's change: its columns plus ``_weight`` (int64).
    """

    tables: dict[str, pa.Table]
    delta: dict[str, pa.Table]


def generate(scale_factor: float = SCALE_FACTOR) -> dict[str, pa.Table]:
    """The 24 tables at ``scale_factor``, typed as :func:`schemas` says."""
    connection = connect(scale_factor)
    tables = {}
    for table, columns in schemas().items():
        rows = connection.execute(f"SELECT * FROM {table}").to_arrow_table()
        tables[table] = rows.cast(pa.schema([(name, _arrow_type(spark_type))
                                             for name, spark_type in columns.items()]))
    return tables


def versions(base: dict[str, pa.Table], count: int = 2, seed: int = SEED
             ) -> Iterator[Version]:
    """``count`` batches applied in turn to ``base``: the version after each."""
    rng = np.random.default_rng(seed)
    tables = dict(base)
    for _ in range(count):
        changes = {table: _moved_facts(tables[table], date, rng) for table, date in FACTS.items()}
        changes["item"] = _updated(tables["item"], "i_current_price", rng,
                                   lambda price: pc.add(price, Decimal("1.25")))
        changes["customer"] = _updated(tables["customer"], "c_birth_country", rng,
                                       lambda country: pc.binary_join_element_wise(
                                           country, pa.scalar(" (moved)"), ""))
        delta = {}
        for table, (deleted, inserted) in changes.items():
            rows = tables[table]
            keep = np.ones(rows.num_rows, bool)
            keep[deleted] = False
            tables[table] = pa.concat_tables([rows.filter(pa.array(keep)), inserted])
            delta[table] = _zset(inserted, rows.take(deleted))
        yield Version(dict(tables), delta)


Change = tuple[np.ndarray, pa.Table]
"""The positions of the rows a batch deletes from a table, and the rows it inserts."""


def _moved_facts(rows: pa.Table, date: str, rng: np.random.Generator) -> Change:
    """A fact table's change: some rows deleted, copies of others at other rows' dates."""
    size = max(1, round(rows.num_rows * SHARE))
    deleted = rng.choice(rows.num_rows, size, replace=False)
    copies = rows.take(rng.choice(rows.num_rows, size, replace=False))
    dates = rows[date].take(rng.choice(rows.num_rows, size))
    return deleted, copies.set_column(copies.schema.get_field_index(date), date, dates)


def _updated(rows: pa.Table, column: str, rng: np.random.Generator,
             change: Callable[[pa.ChunkedArray], pa.ChunkedArray]) -> Change:
    """A dimension's change: some rows' ``column`` changed by ``change`` (old out, new in)."""
    size = max(1, round(rows.num_rows * SHARE))
    updated = rng.choice(rows.num_rows, size, replace=False)
    old = rows.take(updated)
    index = old.schema.get_field_index(column)
    field = old.schema.field(index)
    return updated, old.set_column(index, field, change(old[column]).cast(field.type))


def _zset(inserted: pa.Table, deleted: pa.Table) -> pa.Table:
    weights = np.concatenate([np.ones(inserted.num_rows, np.int64),
                              -np.ones(deleted.num_rows, np.int64)])
    return pa.concat_tables([inserted, deleted]).append_column(WEIGHT, pa.array(weights))


def _arrow_type(spark_type: str) -> pa.DataType:
    if spark_type.startswith("decimal"):
        precision, scale = spark_type[len("decimal("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string(),
            "date": pa.date32(), "double": pa.float64()}[spark_type]
