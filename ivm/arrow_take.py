"""Rows of a chunked Arrow table by index, without joining its chunks first.

pyarrow's ``take`` on a chunked array first concatenates every chunk into one array
(pyarrow 26: taking 6,000 rows of four 1.5M-row chunks costs 5 ms for an int64 column
and 35 ms for a decimal one, against 0.1 ms from a single array). A table read as
several row groups has one chunk per row group, and a tick takes a few rows of each:
this takes them from each chunk (a record batch) instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["take_rows"]


def take_rows(table: pa.Table, indices: np.ndarray) -> pa.Table:
    """``table.take(indices)``, with each row taken from the record batch holding it.

    Args:
        table: Any table.
        indices: 0-based row indexes (int64), in the order wanted; repeats allowed.

    Returns:
        One row per index, in order, with ``table``'s schema.

    Raises:
        IndexError: An index is negative or past the table's last row.
    """
    batches = [batch for batch in table.to_batches() if batch.num_rows]
    if len(batches) <= 1:
        return table.take(pa.array(indices, pa.int64()))
    if len(indices) and (indices.min() < 0 or indices.max() >= table.num_rows):
        raise IndexError(f"row indexes outside 0..{table.num_rows - 1}")
    firsts = np.cumsum([0] + [batch.num_rows for batch in batches])
    batch_of = np.searchsorted(firsts, indices, side="right") - 1
    order = np.argsort(batch_of, kind="stable")  # by batch, the wanted order within each
    starts = np.searchsorted(batch_of[order], np.arange(len(batches)))
    ends = np.append(starts[1:], len(order))
    parts = [batches[b].take(pa.array(indices[order[start:end]] - firsts[b], pa.int64()))
             for b, (start, end) in enumerate(zip(starts, ends, strict=True)) if end > start]
    taken = pa.Table.from_batches(parts, schema=table.schema)
    if np.all(order[1:] > order[:-1]):  # already in the wanted order
        return taken
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return taken.combine_chunks().take(pa.array(inverse, pa.int64()))
