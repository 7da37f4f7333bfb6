"""State of server-side scan plans: plan ids, plan tasks, background planning.

Implements the life cycle of ``planTableScan``, ``fetchPlanningResult``, ``cancelPlanning``
and ``fetchScanTasks`` (REST spec 1.11.0):

- a plan whose files fit in one response is ``completed`` at once, with its
  ``file-scan-tasks``; a larger one is ``completed`` with ``plan-tasks`` (opaque tokens),
  each fetched with ``POST .../tasks``;
- a plan of a large snapshot is ``submitted``: it runs in a background thread and
  ``GET .../plan/{plan-id}`` answers ``submitted`` until it is ``completed`` (or ``failed``);
- ``DELETE .../plan/{plan-id}`` cancels it: later fetches answer ``cancelled`` and its
  plan tasks are gone.

State lives in this process's memory and expires after ``PlanningSettings.result_ttl_s``.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from pyiceberg.catalog.rest.response import ErrorResponseMessage
from pyiceberg.catalog.rest.scan_planning import (
    PlanCancelled,
    PlanCompleted,
    PlanFailed,
    PlanSubmitted,
    ScanTasks,
)
from pyiceberg.typedef import Identifier

from catalog_api.core.config import PlanningSettings
from catalog_api.errors import CatalogError

logger = logging.getLogger(__name__)

PlanResult = PlanCompleted | PlanSubmitted | PlanCancelled | PlanFailed

#: Computes a plan's batches of scan tasks (each batch one response's worth).
PlanComputation = Callable[[], list[ScanTasks]]


class NoSuchPlanIdError(CatalogError):
    """The plan id is unknown for this table, or expired (404)."""

    code = 404
    error_type = "NoSuchPlanIdException"


class NoSuchPlanTaskError(CatalogError):
    """The plan task is unknown for this table, or expired (404)."""

    code = 404
    error_type = "NoSuchPlanTaskException"


@dataclass
class _Plan:
    identifier: Identifier
    created: float
    result: PlanResult
    task_tokens: list[str] = field(default_factory=list)
    future: Future[None] | None = None


@dataclass(frozen=True)
class _PlanTask:
    identifier: Identifier
    plan_id: str
    tasks: ScanTasks


def _failure(exc: BaseException) -> PlanFailed:
    if isinstance(exc, CatalogError):
        code, error_type = exc.code, exc.error_type
    elif isinstance(exc, ValueError | NotImplementedError):
        code, error_type = 400, "BadRequestException"
    else:
        logger.error("Background scan planning failed", exc_info=exc)
        code, error_type = 500, "InternalServerError"
    message = str(exc) or type(exc).__name__
    return PlanFailed(error=ErrorResponseMessage(message=message, type=error_type, code=code))


class ScanPlanRegistry:
    """Plans and plan tasks of one catalog server.

    Args:
        settings: Planning limits (batch size, TTL, background workers).
    """

    def __init__(self, settings: PlanningSettings) -> None:
        self.settings = settings
        self._plans: dict[str, _Plan] = {}
        self._tasks: dict[str, _PlanTask] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(settings.workers, thread_name_prefix="scan-plan")

    def close(self) -> None:
        """Stop the background workers (running plans are abandoned)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def submit(
        self, identifier: Identifier, compute: PlanComputation, run_async: bool
    ) -> PlanResult:
        """Start a plan: compute it now, or in the background when ``run_async``.

        Args:
            identifier: The table.
            compute: Produces the plan's batches of scan tasks.
            run_async: Whether to answer ``submitted`` and plan in a background thread.

        Returns:
            ``completed`` (with ``plan-id``), ``submitted`` (with ``plan-id``) or ``failed``.

        Raises:
            CatalogError: When synchronous planning fails with a client fault.
        """
        plan_id = secrets.token_urlsafe(16)
        self._expire()
        if not run_async:
            with self._lock:
                self._plans[plan_id] = _Plan(identifier, time.monotonic(), PlanSubmitted())
            try:
                self._finish(plan_id, compute())
            except BaseException:
                with self._lock:
                    self._plans.pop(plan_id, None)
                raise
            return self._plans[plan_id].result
        submitted = PlanSubmitted.model_validate({"plan-id": plan_id})
        plan = _Plan(identifier, time.monotonic(), submitted)
        with self._lock:
            self._plans[plan_id] = plan
            plan.future = self._executor.submit(self._run, plan_id, compute)
        return plan.result

    def _run(self, plan_id: str, compute: PlanComputation) -> None:
        try:
            batches = compute()
        except Exception as exc:  # reported to the client as a "failed" status
            with self._lock:
                plan = self._plans.get(plan_id)
                if plan is not None and isinstance(plan.result, PlanSubmitted):
                    plan.result = _failure(exc)
            return
        self._finish(plan_id, batches)

    def _finish(self, plan_id: str, batches: list[ScanTasks]) -> None:
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None or not isinstance(plan.result, PlanSubmitted):
                return  # cancelled or expired meanwhile
            if len(batches) <= 1:
                tasks = batches[0] if batches else ScanTasks()
                plan.result = PlanCompleted.model_validate(
                    {
                        "plan-id": plan_id,
                        "delete-files": tasks.delete_files,
                        "file-scan-tasks": tasks.file_scan_tasks,
                    }
                )
                return
            for batch in batches:
                token = secrets.token_urlsafe(16)
                self._tasks[token] = _PlanTask(plan.identifier, plan_id, batch)
                plan.task_tokens.append(token)
            plan.result = PlanCompleted.model_validate(
                {"plan-id": plan_id, "plan-tasks": list(plan.task_tokens)}
            )

    def _get(self, identifier: Identifier, plan_id: str) -> _Plan:
        plan = self._plans.get(plan_id)
        if plan is None or plan.identifier != tuple(identifier):
            raise NoSuchPlanIdError(f"No plan {plan_id} for table {'.'.join(identifier)}")
        return plan

    def fetch(self, identifier: Identifier, plan_id: str) -> PlanResult:
        """Return a plan's current status (``fetchPlanningResult``).

        Raises:
            NoSuchPlanIdError: If the plan is unknown for this table or expired.
        """
        self._expire()
        with self._lock:
            result = self._get(identifier, plan_id).result
        if isinstance(result, PlanSubmitted):
            return PlanSubmitted()  # the spec's EmptyPlanningResult: status only
        return result

    def cancel(self, identifier: Identifier, plan_id: str) -> None:
        """Cancel a plan and drop its unfetched plan tasks (``cancelPlanning``).

        Raises:
            NoSuchPlanIdError: If the plan is unknown for this table or expired.
        """
        with self._lock:
            plan = self._get(identifier, plan_id)
            if plan.future is not None:
                plan.future.cancel()
            for token in plan.task_tokens:
                self._tasks.pop(token, None)
            plan.task_tokens.clear()
            plan.result = PlanCancelled()

    def fetch_tasks(self, identifier: Identifier, token: str) -> ScanTasks:
        """Return the scan tasks of one plan task (``fetchScanTasks``).

        Raises:
            NoSuchPlanTaskError: If the plan task is unknown for this table, was cancelled
                or expired.
        """
        self._expire()
        with self._lock:
            task = self._tasks.get(token)
        if task is None or task.identifier != tuple(identifier):
            raise NoSuchPlanTaskError(f"No plan task {token!r} for table {'.'.join(identifier)}")
        return task.tasks

    def _expire(self) -> None:
        deadline = time.monotonic() - self.settings.result_ttl_s
        with self._lock:
            for plan_id in [pid for pid, plan in self._plans.items() if plan.created < deadline]:
                plan = self._plans.pop(plan_id)
                if plan.future is not None:
                    plan.future.cancel()
                for token in plan.task_tokens:
                    self._tasks.pop(token, None)
