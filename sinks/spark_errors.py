"""One line naming what went wrong in Spark, for error messages (never a stack trace)."""

from __future__ import annotations

__all__ = ["spark_error_summary"]


def spark_error_summary(error: BaseException) -> str:
    """The first line of a Spark error's own message.

    PySpark converts the Java exceptions it knows (``AnalysisException``...) into Python
    ones whose message is Spark's; others (Delta's concurrency exceptions, Hadoop's
    ``FileNotFoundException``) arrive as ``Py4JJavaError``, whose message starts with
    ``An error occurred while calling ...``: their Java exception's ``toString`` is used,
    which names its class.

    Args:
        error: An exception raised by a Spark call.

    Returns:
        One line; the exception's type name when it has no message.
    """
    java = getattr(error, "java_exception", None)
    text = str(java.toString()) if java is not None else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
