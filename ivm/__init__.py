"""Incremental view maintenance: view SQL -> incremental plan -> delta of the view.

The public surface: compile a view with :func:`compile_view`, then compute its
change with :func:`maintain` (or :func:`view_delta`) or its whole content with
:func:`reload` (or :func:`recompute`). :func:`maintain` and :func:`reload` also return
the view's state (an aggregate state, a top-K buffer), which the caller passes to the next
:func:`maintain`.
"""

from ivm.aggregate_state import AggregateState
from ivm.compiler import compile_view, referenced_sources
from ivm.driver_delta import DRIVER_READ_MAX_ROWS, ArrowRead
from ivm.engine_rule import LOCAL_LIMITS, Engine, local_refusal
from ivm.errors import IvmError, NotIncrementalError, SqlParseError
from ivm.evaluate import Maintained, SourceInput, maintain, recompute, reload, view_delta
from ivm.explain import explain
from ivm.key_ranges import KeyValues
from ivm.laws import Law
from ivm.plan import PlanNode, ViewPlan
from ivm.source_columns import used_columns
from ivm.spark_arrow import collect_arrow, to_arrow
from ivm.state_local import DRIVER_DELTA_MAX_ROWS, DRIVER_STATE_MAX_ROWS
from ivm.top_k_state import TopKState
from ivm.zset import WEIGHT, consolidate, expand, with_weight

__all__ = [
    "DRIVER_READ_MAX_ROWS",
    "DRIVER_DELTA_MAX_ROWS",
    "DRIVER_STATE_MAX_ROWS",
    "LOCAL_LIMITS",
    "WEIGHT",
    "AggregateState",
    "Engine",
    "ArrowRead",
    "IvmError",
    "KeyValues",
    "Law",
    "Maintained",
    "NotIncrementalError",
    "PlanNode",
    "SourceInput",
    "SqlParseError",
    "TopKState",
    "ViewPlan",
    "collect_arrow",
    "compile_view",
    "referenced_sources",
    "consolidate",
    "expand",
    "explain",
    "local_refusal",
    "maintain",
    "recompute",
    "reload",
    "to_arrow",
    "used_columns",
    "view_delta",
    "with_weight",
]
