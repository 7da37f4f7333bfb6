"""TPC-DS through DuckDB's ``tpcds`` extension: its schema, its 99 queries, and its data."""
