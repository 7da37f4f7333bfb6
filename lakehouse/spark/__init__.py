"""Spark for the lakehouse: the Maven-resolved classpath and session construction.

``spark_jars()`` returns the Iceberg, Delta and S3A jars (resolved with Maven once per user
from the package's ``pom.xml``); ``build_spark_session(...)`` starts a session wired to one
Iceberg catalog, with Delta's extensions. Importing this package does not import pyspark.
"""

from lakehouse.spark.jars import maven_coordinates, spark_jars
from lakehouse.spark.session import build_spark_session

__all__ = ["build_spark_session", "maven_coordinates", "spark_jars"]
