"""Logging setup for daemons: one file per daemon, reopened on SIGHUP.

Log file names come from ``constants.DAEMON_LOG_NAMES`` (see
``Paths.daemon_log_file``).  Handlers are :class:`ReopenableFileHandler`:
they notice a file moved away by logrotate (like ``WatchedFileHandler``)
and :meth:`LogHandle.reopen` forces a reopen, which the daemon runner calls
on SIGHUP.  The RAPI access log (:class:`AccessLog`) uses the Common Log
Format::

    127.0.0.1 - jack [10/Oct/2024:13:55:36 +0000] "GET /2/info HTTP/1.1" 200 2326

Every handler carries a :class:`RedactingFilter` when a
:class:`~ganeti.redact.Redactor` is given: a record whose text (message,
arguments, traceback) holds a secret value the daemon knows is rewritten
with the value replaced by the marker before any handler writes it
(doc/protocols/opcodes.md, "Private parameters").
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ganeti import errors
from ganeti.utils import localfile

from ganeti.redact import Redactor

__all__ = ["ReopenableFileHandler", "LogHandle", "setup_logging", "RedactingFilter",
           "format_access_line", "AccessLog"]

_FORMAT = "%(asctime)s: {program} pid=%(process)d %(levelname)s %(message)s"
_DEBUG_FORMAT = ("%(asctime)s: {program} pid=%(process)d %(levelname)s"
                 " %(module)s:%(lineno)s %(message)s")


class ReopenableFileHandler(logging.handlers.WatchedFileHandler):
    """A file handler that can be told to reopen its file (SIGHUP).

    The log file is opened without following a symbolic link
    (:mod:`ganeti.utils.localfile`); a link, directory or FIFO at its path
    is moved aside, and the first line of the new file says so.
    """

    def _open(self) -> Any:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        note = ""
        try:
            fd = localfile.open_local(self.baseFilename, flags, 0o644, what="log file")
        except errors.UntrustedFileError as exc:
            aside = localfile.move_aside(self.baseFilename)
            note = f"{exc}; moved it aside to {aside}\n"
            fd = localfile.open_local(self.baseFilename, flags, 0o644, what="log file")
        stream = os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)
        if note:
            stream.write(note)
        return stream

    def reopen(self) -> None:
        """Close and reopen the log file (e.g. after log rotation)."""
        self.acquire()
        try:
            if self.stream:
                try:
                    self.stream.flush()
                    self.stream.close()
                finally:
                    self.stream = None
            self.stream = self._open()
            self._statstream()
        finally:
            self.release()


class RedactingFilter(logging.Filter):
    """Rewrites a record holding a secret value (never drops one).

    The message is formatted once (``msg % args``) and scrubbed; a
    traceback is formatted and scrubbed into ``exc_text`` (the formatter
    then prints that text instead of formatting the exception again).
    """

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:   # a broken format string: let the handler report it
            return True
        clean = self.redactor.scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.scrub(record.stack_info)
        return True


@dataclass
class LogHandle:
    """The handlers installed by :func:`setup_logging`."""

    logger: logging.Logger
    handlers: list[logging.Handler] = field(default_factory=list)

    def reopen(self) -> None:
        """Reopen every log file (call from the SIGHUP handler)."""
        for handler in self.handlers:
            if isinstance(handler, ReopenableFileHandler):
                handler.reopen()

    def close(self) -> None:
        """Remove and close the handlers."""
        for handler in self.handlers:
            self.logger.removeHandler(handler)
            handler.close()
        self.handlers = []


def setup_logging(logfile: str | None, *, debug: bool = False, stderr: bool = False,
                  program: str = "", logger: logging.Logger | None = None,
                  redactor: Redactor | None = None) -> LogHandle:
    """Send log records of ``logger`` (default: the root logger) to ``logfile``.

    ``debug`` lowers the level to DEBUG and adds module:line; ``stderr``
    also logs to standard error (foreground daemons).  With ``redactor``
    every handler scrubs the secret values it knows (:class:`RedactingFilter`).
    The log directory is created when missing.  Returns a :class:`LogHandle`
    to reopen/close.
    """
    target = logger if logger is not None else logging.getLogger()
    program = program or os.path.basename(sys.argv[0] or "ganeti")
    fmt = (_DEBUG_FORMAT if debug else _FORMAT).format(program=program)
    formatter = logging.Formatter(fmt)
    handle = LogHandle(target)
    level = logging.DEBUG if debug else logging.INFO
    if logfile:
        os.makedirs(os.path.dirname(os.path.abspath(logfile)), exist_ok=True)
        file_handler = ReopenableFileHandler(logfile, encoding="utf-8")
        file_handler.setFormatter(formatter)
        file_handler.setLevel(level)
        handle.handlers.append(file_handler)
    if stderr:
        err_handler = logging.StreamHandler(sys.stderr)
        err_handler.setFormatter(formatter)
        err_handler.setLevel(level)
        handle.handlers.append(err_handler)
    for handler in handle.handlers:
        if redactor is not None:
            handler.addFilter(RedactingFilter(redactor))
        target.addHandler(handler)
    target.setLevel(level)
    return handle


def format_access_line(host: str, user: str | None, request_line: str, status: int,
                       size: int | None, when: float) -> str:
    """One Common Log Format line (pure function; ``when`` is a Unix time)."""
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(when))
    request = request_line.replace("\\", "\\\\").replace('"', '\\"')
    return (f'{host or "-"} - {user or "-"} [{stamp}] "{request}" {status}'
            f' {size if size is not None else "-"}')


class AccessLog:
    """The RAPI access log, in Common Log Format, in its own file."""

    def __init__(self, logfile: str, *, clock: Callable[[], float] = time.time) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(logfile)), exist_ok=True)
        self._clock = clock
        self._handler = ReopenableFileHandler(logfile, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger = logging.getLogger(f"ganeti.access.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self._handler)

    def log(self, host: str, user: str | None, request_line: str, status: int,
            size: int | None) -> None:
        """Append one request to the access log."""
        self._logger.info("%s", format_access_line(host, user, request_line, status, size,
                                                   self._clock()))

    def reopen(self) -> None:
        """Reopen the file (SIGHUP)."""
        self._handler.reopen()

    def close(self) -> None:
        """Close the file."""
        self._logger.removeHandler(self._handler)
        self._handler.close()
