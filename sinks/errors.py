"""Errors raised by the sinks."""

from __future__ import annotations


class SinkError(Exception):
    """Root of every error raised by :mod:`sinks`; nothing of the failed commit is visible.

    Attributes:
        table: The sink table at fault (Iceberg identifier or Delta URI).
    """

    def __init__(self, message: str, *, table: str):
        self.table = table
        super().__init__(f"sink {table}: {message}")
