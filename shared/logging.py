"""structlog, configured once per process: JSON when not on a TTY, readable console otherwise.

Libraries that log through the standard library (aiokafka, pymongo, uvicorn) are rendered by the
same processors, so every line of a service has one format.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from shared import tracing


def configure_logging(service: str, *, level: str = "info", fmt: str = "auto") -> None:
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        # Colours only for a terminal: a file or a pipe would get raw escape codes. Rich's
        # tracebacks only there too: rendering one with its locals took seconds, on the event
        # loop, while a test's gateway in the same loop could not accept a connection.
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(),
            exception_formatter=(
                structlog.dev.RichTracebackFormatter(show_locals=False)
                if sys.stderr.isatty()
                else structlog.dev.plain_traceback
            ),
        )
    )
    shared_processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        tracing.log_fields,
        structlog.stdlib.add_logger_name,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if use_json:
        shared_processors.append(structlog.processors.format_exc_info)
    # Our own lines go straight to the stream through structlog's writer: the standard
    # library's record, handler and formatter cost three times as much per line (65 against
    # 21 us measured), on every handled message. Libraries' lines take the handler below.
    structlog.configure(
        processors=[*shared_processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=NamedWriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared_processors,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.getLevelName(level.upper()))
    # Third-party chatter below WARNING is noise in a service's log.
    for noisy in ("aiokafka", "pymongo", "uvicorn.access", "httpx", "faststream"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)


class NamedWriteLoggerFactory(structlog.WriteLoggerFactory):
    """structlog's writer, named like a standard library logger (``get_logger(__name__)``), so
    ``add_logger_name`` names a line's module as before."""

    def __call__(self, *args: Any) -> structlog.WriteLogger:
        logger = super().__call__(*args)
        logger.name = str(args[0]) if args else ""  # type: ignore[attr-defined]
        return logger


def announce_started(service: str) -> Callable[[], Awaitable[None]]:
    """A start-up hook that logs one line once the service consumes."""

    async def announce() -> None:
        structlog.get_logger(service).info("service.started")

    return announce
