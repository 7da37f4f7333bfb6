"""Incremental view maintenance: view SQL -> incremental plan -> delta of the view.

The public surface: compile a view with :func:`compile_view`, then compute its
change with :func:`view_delta` or its whole content with :func:`recompute`.
"""

from ivm.compiler import compile_view, referenced_sources
from ivm.errors import IvmError, NotIncrementalError, SqlParseError
from ivm.evaluate import SourceInput, recompute, view_delta
from ivm.explain import explain
from ivm.laws import Law
from ivm.plan import PlanNode, ViewPlan
from ivm.zset import WEIGHT, consolidate, expand, with_weight

__all__ = [
    "WEIGHT",
    "IvmError",
    "Law",
    "NotIncrementalError",
    "PlanNode",
    "SourceInput",
    "SqlParseError",
    "ViewPlan",
    "compile_view",
    "referenced_sources",
    "consolidate",
    "expand",
    "explain",
    "recompute",
    "view_delta",
    "with_weight",
]
