"""TPC-H harness: schemas, the 22 queries, data generation and refresh batches."""
