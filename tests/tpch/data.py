"""TPC-H data at a small scale factor, and RF1/RF2-style refresh batches as Z-sets.

The data comes from ``tpchgen-cli`` (Parquet, one file per table). A refresh batch follows
the spec's refresh functions (TPC-H 3.0.1, 2.5): RF1 inserts new orders with their line
items, RF2 deletes old orders with their line items, each ``SF * 1500`` orders (0.1% of the
orders). New orders copy an existing order's content (so every line item still references a
``partsupp`` row) under an order key the generator leaves unused, with a seeded random
customer.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import WEIGHT
from tests.spark_frames import spark_frame
from tests.tpch.schema import SCHEMAS, TABLES

SCALE_FACTOR = 0.01
SEED = 20240104
CHANGED = ("orders", "lineitem")
"""The tables RF1 and RF2 change."""


def generate(folder: Path, scale_factor: float = SCALE_FACTOR) -> Path:
    """Write the eight TPC-H tables as ``folder/<table>.parquet``.

    Raises:
        FileNotFoundError: ``tpchgen-cli`` is not installed (dev dependency).
        subprocess.CalledProcessError: The generator failed.
    """
    binary = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    if not Path(binary).exists():
        raise FileNotFoundError("tpchgen-cli is not installed: pip install 'tpchgen-cli==4.0.0'")
    subprocess.run([binary, "parquet", "-s", str(scale_factor), "-o", str(folder)],
                   check=True, capture_output=True)
    return folder


def read_tables(spark: SparkSession, folder: Path) -> dict[str, DataFrame]:
    """The generated tables as in-memory Spark DataFrames with the types of ``SCHEMAS``."""
    frames = {}
    for table in TABLES:
        raw = spark.read.parquet(str(folder / f"{table}.parquet"))
        columns = [F.col(c).cast(t).alias(c) for c, t in SCHEMAS[table].items()]
        frames[table] = _materialized(raw.select(*columns))
    return frames


@dataclass(frozen=True)
class Batch:
    """One refresh: RF1 then RF2.

    Attributes:
        number: 1, 2, ...
        inserted: ``(source order key, new order key, new customer key)`` per new order.
        deleted: Keys of the orders RF2 deletes (with their line items).
    """

    number: int
    inserted: tuple[tuple[int, int, int], ...]
    deleted: tuple[int, ...]


def plan_batches(folder: Path, count: int = 2, seed: int = SEED) -> list[Batch]:
    """Choose ``count`` deterministic batches over the generated data.

    Order keys the generator uses are ``k`` with ``k % 32 < 8`` (TPC-H 4.2.3, sparse keys);
    batch ``b`` inserts under ``k + 8 * b``, which stays in the unused range for ``b < 4``.
    """
    if not 1 <= count <= 3:
        raise ValueError("between 1 and 3 batches keep new order keys unused")
    original = sorted(pq.read_table(folder / "orders.parquet", columns=["o_orderkey"])
                      .column(0).to_pylist())
    customers = sorted(pq.read_table(folder / "customer.parquet", columns=["c_custkey"])
                       .column(0).to_pylist())
    size = max(1, round(len(original) / 1000))
    rng = random.Random(seed)
    current = set(original)
    batches = []
    for number in range(1, count + 1):
        sources = rng.sample(original, size)
        inserted = tuple((k, k + 8 * number, rng.choice(customers)) for k in sorted(sources))
        assert not current & {new for _, new, _ in inserted}, "new order key already used"
        current |= {new for _, new, _ in inserted}
        deleted = tuple(sorted(rng.sample(sorted(current), size)))
        current -= set(deleted)
        batches.append(Batch(number, inserted, deleted))
    return batches


def apply_batch(
    spark: SparkSession, base: dict[str, DataFrame], current: dict[str, DataFrame], batch: Batch
) -> tuple[dict[str, DataFrame], dict[str, DataFrame]]:
    """Apply ``batch`` to the tables ``current``.

    Args:
        spark: The session.
        base: The generated tables (the content new orders copy).
        current: The tables before the batch.
        batch: What to insert and delete.

    Returns:
        ``(new, delta)``: every table after the batch (cached), and for ``orders`` and
        ``lineitem`` the change as a Z-set (columns plus ``_weight`` bigint).
    """
    mapping = spark_frame(spark,
        list(batch.inserted), "src bigint, new_key bigint, new_cust bigint")
    deleted = list(batch.deleted)
    inserted = {
        "orders": base["orders"].join(mapping, F.col("o_orderkey") == F.col("src"))
        .withColumn("o_orderkey", F.col("new_key")).withColumn("o_custkey", F.col("new_cust")),
        "lineitem": base["lineitem"].join(mapping, F.col("l_orderkey") == F.col("src"))
        .withColumn("l_orderkey", F.col("new_key")),
    }
    key = {"orders": "o_orderkey", "lineitem": "l_orderkey"}
    new, delta = dict(current), {}
    for table in CHANGED:
        columns = list(SCHEMAS[table])
        added = inserted[table].select(*columns)
        gone = current[table].where(F.col(key[table]).isin(deleted))
        kept = current[table].where(~F.col(key[table]).isin(deleted))
        new[table] = _materialized(kept.unionByName(added))
        delta[table] = _materialized(added.withColumn(WEIGHT, F.lit(1).cast("bigint"))
                                     .unionByName(gone.withColumn(WEIGHT, F.lit(-1)
                                                                  .cast("bigint"))))
    return new, delta


def _materialized(frame: DataFrame) -> DataFrame:
    """``frame`` computed once and kept in memory, its lineage cut (later plans stay small)."""
    return frame.coalesce(1).localCheckpoint(eager=True)
