"""What ``corral server`` logs, and how: JSON lines on standard error."""

from __future__ import annotations

import sys
from enum import StrEnum

import structlog


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def configure_logging(level: LogLevel = LogLevel.INFO) -> None:
    """JSON lines on stderr, never with headers (they carry tokens); at ``debug``, also one
    per request and one per controller tick (what it did, how long, how many queries). With
    ``corral server --access-log``, one per request at ``info`` too."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level.value.upper()),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        # One write per line: the controller process writes to the same file as the server.
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
    )
