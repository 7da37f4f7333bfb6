"""Spark for the lakehouse: the offline Iceberg classpath and session construction.

``iceberg_spark_jars()`` returns the jars (building the shaded extras jar once per user);
``build_spark_session(...)`` starts a session wired to one Iceberg catalog. Importing this
package does not import pyspark.
"""

from lakehouse.spark.jars import iceberg_spark_jars
from lakehouse.spark.session import build_spark_session

__all__ = ["build_spark_session", "iceberg_spark_jars"]
