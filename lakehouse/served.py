"""The pipeline's routes on the catalog service, in one list (``serve`` and the embedded one).

- :mod:`lakehouse.routes`: ``/lakehouse/v1/views/{view}/changes`` and ``/wait``;
- :mod:`lakehouse.status_page`: ``/status``.
"""

from __future__ import annotations

from fastapi import APIRouter

from lakehouse.config import Config
from lakehouse.routes import views_router
from lakehouse.status_page import status_router

__all__ = ["pipeline_routers"]


def pipeline_routers(config: Config) -> list[APIRouter]:
    """The routes the catalog service serves for the pipeline of ``config``."""
    return [views_router(config), status_router(config)]
