"""Sinks: apply view deltas to Iceberg v2 and Delta tables, the frontier in the same commit."""
