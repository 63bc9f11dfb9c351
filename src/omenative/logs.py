"""structlog set-up: JSON lines by default (for log collectors), readable key=value lines on a terminal.

One format end to end: the standard library's records (aiohttp, kubernetes-asyncio, asyncio, warnings) and an
uncaught exception go through the same renderer as our own lines, and a line logged during a reconcile carries
its controller, key and reconcile_id whichever library wrote it.
"""

from __future__ import annotations

import logging
import sys
from types import TracebackType
from typing import Any

import structlog


def configure(level: str = "info", fmt: str = "json") -> None:
    """`fmt` is `json`, `console`, or `auto` (console on a terminal, JSON otherwise)."""
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if fmt == "console" else structlog.processors.JSONRenderer()
    )
    numeric = logging.getLevelNamesMapping()[level.upper()]
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            stamp,
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    ))
    root = logging.getLogger()
    root.handlers = [handler]
    # Libraries' INFO lines (aiohttp's access log among them) would drown ours.
    root.setLevel(max(numeric, logging.WARNING))
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught


def _log_uncaught(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, error, tb)
        return
    structlog.get_logger("omenative").critical("uncaught exception", exc_info=(kind, error, tb))
