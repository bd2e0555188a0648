"""One line for a Java or Python failure: the innermost exception that says what went wrong."""

from __future__ import annotations

import re

_EXCEPTION_LINE = re.compile(
    r"^(?::\s*)?((?:[A-Za-z_][\w$]*\.)*[A-Za-z_][\w$]*(?:Exception|Error)): (.+)"
)


# Exceptions that only wrap the one that says what went wrong.
_WRAPPERS = {"py4j.protocol.Py4JJavaError", "org.apache.spark.SparkException"}


def failure_summary(text: str) -> str:
    """One line for a Java/Python failure text: its innermost informative exception."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    causes = [m for line in lines if (m := _EXCEPTION_LINE.match(line))]
    informative = [m for m in causes if m.group(1) not in _WRAPPERS]
    if informative:
        last = informative[-1]
        return f"{last.group(1).rsplit('.', 1)[-1]}: {last.group(2)}"
    return lines[0] if lines else "unknown error"


def failure_text(exc: BaseException) -> str:
    """The text of a failure: the Java exception's, or the Python one's."""
    java = getattr(exc, "java_exception", None)
    return str(java.toString()) if java is not None else str(exc)


def java_summary(exc: BaseException) -> str:
    """One line for any failure, Java or Python."""
    return failure_summary(failure_text(exc))
