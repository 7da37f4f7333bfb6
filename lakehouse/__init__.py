"""The lakehouse application: config, Spark, sources, ticks, scheduler and CLI."""
