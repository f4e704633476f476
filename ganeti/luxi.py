"""LUXI: the JSON+ETX protocol between clients and the master daemon.

This module holds the codec (no sockets: bytes in, messages out) and the
:class:`Client` (one method per LUXI method, same names as Ganeti).

Framing: each message is one JSON document followed by ``0x03`` (ETX).
Request ``{"method", "args", "version"?}``; response ``{"success",
"result"}``; a failed call's result is ``[ErrorClass, [args]]``.  The
protocol and the methods: doc/protocols/luxi.md.
"""

from __future__ import annotations

from ganeti import constants, errors, serializer

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["ETX", "KNOWN_METHODS", "FrameBuffer", "encode_message",
           "encode_request", "encode_response", "parse_request",
           "parse_response", "Request", "Client", "JOB_NOTCHANGED",
           "IDEMPOTENT_METHODS", "default_master_socket", "METHOD_ARGS", "check_args",
           "WAIT_FOR_EVENTS_LIMIT"]

ETX = b"\x03"

KNOWN_METHODS = frozenset([
    "SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs",
    "WaitForJobChange", "PickupJob", "CancelJob", "ArchiveJob",
    "AutoArchiveJobs", "ChangeJobPriority", "Query", "QueryFields",
    "QueryJobs", "QueryInstances", "QueryNodes", "QueryGroups",
    "QueryNetworks", "QueryExports", "QueryConfigValues",
    "QueryClusterInfo", "QueryTags", "QueryFilters", "ReplaceFilter",
    "DeleteFilter", "SetDrainFlag", "SetWatcherPause", "WaitForEvents", "QueryMetrics",
    "DrainMaster",
])


class Request:
    """A decoded LUXI request (immutable; a plain class to keep imports lean)."""

    __slots__ = ("method", "args", "version")
    method: str
    args: list[Any]
    version: int | None

    def __init__(self, method: str, args: list[Any], version: int | None = None) -> None:
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "version", version)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Request is immutable (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return (self.method, self.args, self.version) == (other.method, other.args, other.version)

    def __hash__(self) -> int:
        return hash((self.method, self.version))

    def __repr__(self) -> str:
        return f"Request(method={self.method!r}, args={self.args!r}, version={self.version!r})"


class FrameBuffer:
    """Splits a byte stream into ETX-terminated JSON messages.

    ``feed`` returns the complete frames (as bytes, without ETX).  A frame
    (complete or still growing) larger than ``max_size`` raises
    :class:`errors.ProtocolError`; the caller should then close the
    connection, as the stream can no longer be trusted.
    """

    def __init__(self, max_size: int = constants.LUXI_MAX_MESSAGE) -> None:
        self._buf = bytearray()
        self._max = max_size

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        start = 0
        while True:
            idx = self._buf.find(ETX, start)
            if idx < 0:
                break
            if idx - start > self._max:
                raise errors.ProtocolError(f"LUXI message larger than {self._max} bytes")
            frames.append(bytes(self._buf[start:idx]))
            start = idx + 1
        del self._buf[:start]
        if len(self._buf) > self._max:
            raise errors.ProtocolError(f"LUXI message larger than {self._max} bytes")
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buf)


# --- argument types -----------------------------------------------------------

_INT_MAX = 2 ** 63 - 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _INT_MAX


def _is_job_id(value: Any) -> bool:
    if isinstance(value, str) and value.isdigit() and value.isascii():
        value = int(value) if len(value) <= 19 else 0
    return _is_int(value) and value > 0


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and abs(value) <= _INT_MAX)


#: Argument kind -> (check, what the error says is expected).
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "any": (lambda v: True, "anything"),
    "bool": (lambda v: isinstance(v, bool), "a boolean"),
    "int": (_is_int, "an integer"),
    "number": (_is_number, "a number"),
    "number|null": (lambda v: v is None or _is_number(v), "a number or null"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "str|null": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "job_id": (_is_job_id, "a job id (a positive integer)"),
    "job_ids|null": (lambda v: v is None or (isinstance(v, list) and all(map(_is_job_id, v))),
                     "a list of job ids (positive integers) or null"),
    "int|null": (lambda v: v is None or _is_int(v), "an integer or null"),
    "fields": (_is_str_list, "a list of field names (strings)"),
    "fields|null": (lambda v: v is None or _is_str_list(v), "a list of strings or null"),
    "names|null": (lambda v: v is None or _is_str_list(v), "a list of names (strings) or null"),
    "ops": (lambda v: isinstance(v, list) and all(isinstance(o, dict) for o in v),
            "a list of opcodes (objects)"),
    "jobs": (lambda v: isinstance(v, list) and all(
        isinstance(j, list) and all(isinstance(o, dict) for o in j) for j in v),
             "a list of jobs (lists of opcodes)"),
}

#: Method -> (argument name, kind) per argument; a ``?`` after the name
#: marks an optional trailing argument.  The master checks every request
#: against this table before running it (doc/protocols/luxi.md).
METHOD_ARGS: dict[str, tuple[tuple[str, str], ...]] = {
    "SubmitJob": (("ops", "ops"),),
    "SubmitJobToDrainedQueue": (("ops", "ops"),),
    "SubmitManyJobs": (("jobs", "jobs"),),
    "WaitForJobChange": (("job_id", "job_id"), ("fields", "fields"), ("prev_job_info", "any"),
                         ("prev_log_serial", "int|null"), ("timeout", "number")),
    "PickupJob": (("job_id", "job_id"),),
    "CancelJob": (("job_id", "job_id"), ("kill?", "bool")),
    "ArchiveJob": (("job_id", "job_id"),),
    "AutoArchiveJobs": (("age", "number"), ("timeout", "number")),
    "ChangeJobPriority": (("job_id", "job_id"), ("priority", "int")),
    "QueryJobs": (("job_ids", "job_ids|null"), ("fields", "fields")),
    "Query": (("what", "str"), ("fields", "fields"), ("qfilter", "any")),
    "QueryFields": (("what", "str"), ("fields", "fields|null")),
    "QueryInstances": (("names", "names|null"), ("fields", "fields"), ("use_locking?", "bool")),
    "QueryNodes": (("names", "names|null"), ("fields", "fields"), ("use_locking?", "bool")),
    "QueryNetworks": (("names", "names|null"), ("fields", "fields"), ("use_locking?", "bool")),
    "QueryGroups": (("names", "names|null"), ("fields", "fields"), ("use_locking?", "bool")),
    "QueryExports": (("nodes", "names|null"), ("use_locking?", "bool")),
    "QueryConfigValues": (("fields", "fields"),),
    "QueryClusterInfo": (),
    "QueryTags": (("kind", "str"), ("name", "str|null")),
    "SetDrainFlag": (("flag", "bool"),),
    "SetWatcherPause": (("until", "number|null"),),
    "WaitForEvents": (("last_id", "int|null"), ("event_filter", "any"), ("timeout", "number")),
    "QueryMetrics": (),
    "DrainMaster": (("seconds", "number"),),
}

#: Most events one ``WaitForEvents`` answer carries (the client asks again
#: from the cursor it got for the rest).
WAIT_FOR_EVENTS_LIMIT = 500


def check_args(method: str, args: list[Any]) -> None:
    """Check ``args`` of a request against :data:`METHOD_ARGS`.

    Raises :class:`errors.ParameterError` (``wrong_input``) naming the
    method and the argument for a wrong count or type; a method not in
    the table is not checked here.
    """
    spec = METHOD_ARGS.get(method)
    if spec is None:
        return
    required = sum(1 for name, _ in spec if not name.endswith("?"))
    if not required <= len(args) <= len(spec):
        want = str(required) if required == len(spec) else f"{required} to {len(spec)}"
        raise errors.ParameterError(f"{method} takes {want} argument(s), got {len(args)}",
                                    errors.ECODE_INVAL)
    for (name, kind), value in zip(spec, args):
        check, expected = _KINDS[kind]
        if not check(value):
            shown = serializer.dumps(value)
            if len(shown) > 80:
                shown = shown[:77] + "..."
            raise errors.ParameterError(
                f"{method}: argument '{name.rstrip('?')}' must be {expected}, got {shown}",
                errors.ECODE_INVAL)


def encode_message(obj: Any, *, spliced: bool = False) -> bytes:
    """JSON-encode ``obj`` and append ETX; :class:`errors.SerializationError` if it cannot be.

    ``spliced``: ``obj`` may hold :class:`ganeti.serializer.Encoded` text
    (:func:`ganeti.serializer.dumps_spliced`).
    """
    data = (serializer.dumps_spliced(obj).encode("utf-8") if spliced
            else serializer.dumps_bytes(obj))
    if ETX in data:  # JSON escapes control characters; this is a bug if hit
        raise errors.ProgrammerError("ETX inside an encoded LUXI message")
    return data + ETX


def encode_request(method: str, args: list[Any], version: int | None = None) -> bytes:
    """Frame a request."""
    msg: dict[str, Any] = {"method": method, "args": args}
    if version is not None:
        msg["version"] = version
    return encode_message(msg)


def encode_response(success: bool, result: Any, *, spliced: bool = False) -> bytes:
    """Frame a response; an exception as ``result`` is encoded as an error.

    ``spliced``: ``result`` may hold already encoded JSON
    (:class:`ganeti.serializer.Encoded`), written verbatim.
    """
    if isinstance(result, BaseException):
        result = errors.encode_exception(result)
    return encode_message({"success": success, "result": result}, spliced=spliced)


def parse_request(frame: bytes) -> Request:
    """Decode and check one request frame; raises :class:`errors.ProtocolError`.

    Strings must be valid Unicode (no lone surrogates): a request is input
    from another party, and what it carries is stored and shown later.
    """
    try:
        msg = serializer.loads(frame, valid_unicode=True)
    except errors.SerializationError as exc:
        raise errors.ProtocolError(f"Invalid LUXI request: {exc}") from exc
    if not isinstance(msg, dict):
        raise errors.ProtocolError("Invalid LUXI request: not a JSON object")
    method, args = msg.get("method"), msg.get("args")
    if not isinstance(method, str) or not method:
        raise errors.ProtocolError("Invalid LUXI request: 'method' missing or not a string")
    if not isinstance(args, list):
        raise errors.ProtocolError("Invalid LUXI request: 'args' missing or not a list")
    version = msg.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise errors.ProtocolError("Invalid LUXI request: 'version' must be an integer")
    if version is not None and version != constants.PROTOCOL_VERSION:
        raise errors.ProtocolError(
            f"LUXI version mismatch: client {version}, server {constants.PROTOCOL_VERSION}")
    return Request(method, args, version)


def parse_response(frame: bytes) -> Any:
    """Decode one response frame and return its result, raising its error.

    A failed call raises the decoded exception (or :class:`errors.LuxiError`
    carrying the text when the result is not an encoded error).
    """
    try:
        msg = serializer.loads(frame)
    except errors.SerializationError as exc:
        raise errors.ProtocolError(f"Invalid LUXI response: {exc}") from exc
    return _response_result(msg)


# --- client -----------------------------------------------------------------

JOB_NOTCHANGED = "nochange"

# Methods that may be re-sent after the connection broke mid-call: they
# either only read or have the same effect when repeated.  Submissions are
# never re-sent (the first attempt may have created the job).
IDEMPOTENT_METHODS = KNOWN_METHODS - frozenset([
    "SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs", "PickupJob",
    "ReplaceFilter",
])

_RECV_SIZE = 65536


def _response_result(msg: Any) -> Any:
    if not isinstance(msg, dict) or "success" not in msg or "result" not in msg:
        raise errors.ProtocolError("Invalid LUXI response: missing success/result")
    if msg["success"]:
        return msg["result"]
    result = msg["result"]
    errors.maybe_raise(result)
    raise errors.LuxiError(str(result))


def _socket_module() -> Any:
    # The C module behind ``socket``: the Python wrapper's import (enum
    # conversions, selectors) is a noticeable part of a CLI command's
    # start-up, and the client needs nothing from it.
    try:
        import _socket
        return _socket
    except ImportError:  # pragma: no cover (non-CPython)
        import socket
        return socket


def default_master_socket() -> str:
    """The master socket below ``$GANETI_ROOTDIR``.

    The same path as ``pathutils.get_paths().master_socket`` (a test checks
    that), computed without importing :mod:`ganeti.pathutils` and its
    dataclasses: every CLI command pays for its imports at start-up.
    """
    import os
    root = os.path.abspath(os.environ.get(constants.ENV_ROOTDIR) or "/")
    return os.path.join(root, "var", "run", "ganeti", "socket", "ganeti-master")


def _ops_to_data(ops: Any) -> list[Any]:
    """Opcode objects or dicts -> a list of opcode dicts."""
    if not isinstance(ops, (list, tuple)):
        raise errors.ProgrammerError(f"Expected a list of opcodes, got {type(ops).__name__}")
    result: list[Any] = []
    for op in ops:
        if isinstance(op, dict):
            result.append(op)
        else:
            from ganeti import opcodes  # lazy: keeps CLI start-up lean
            result.append(opcodes.to_dict(op))
    return result


class Client:
    """A LUXI client: one method per LUXI method, with Ganeti's names.

    One connection is opened on the first call and reused for every later
    call.  A missing socket or a refused connection raises
    :class:`errors.NoMasterError`; no answer within ``rw_timeout`` raises
    :class:`errors.LuxiTimeoutError` (the connection is then dropped); a
    failed call raises the error the master sent back (decoded).  When the
    connection breaks, calls in :data:`IDEMPOTENT_METHODS` are re-sent once
    on a fresh connection; submissions are not.

    Every method goes through :meth:`call`, so a fake client only needs to
    replace that one method.  Not thread-safe: use one client per thread.
    """

    def __init__(self, address: str | None = None, *,
                 connect_timeout: float = constants.LUXI_DEF_CTMO,
                 rw_timeout: float = constants.LUXI_DEF_RWTO,
                 version: int | None = None) -> None:
        if address is None:
            address = default_master_socket()
        self.address = address
        self.connect_timeout = connect_timeout
        self.rw_timeout = rw_timeout
        self.version = version
        self._sock: Any = None
        self._buffer: FrameBuffer | None = None
        self._frames: list[bytes] = []
        self._calls_on_conn = 0

    # --- connection -----------------------------------------------------
    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._buffer = None
        self._frames = []
        self._calls_on_conn = 0

    def _connect(self) -> None:
        sock = _socket_module().socket(_socket_module().AF_UNIX, _socket_module().SOCK_STREAM)
        sock.settimeout(self.connect_timeout)
        try:
            sock.connect(self.address)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            sock.close()
            raise errors.NoMasterError(
                "Cannot communicate with the master daemon. Is it running and listening"
                f" on {self.address}? ({exc.strerror or exc})") from exc
        except TimeoutError as exc:
            sock.close()
            raise errors.LuxiTimeoutError(
                f"Timeout while connecting to the master daemon at {self.address}") from exc
        except OSError as exc:
            sock.close()
            raise errors.NoMasterError(
                f"Cannot communicate with the master daemon at {self.address}: {exc}") from exc
        self._sock = sock
        self._buffer = FrameBuffer()
        self._frames = []
        self._calls_on_conn = 0

    def _peer_closed(self) -> bool:
        """True when the (reused) connection was closed by the master."""
        sock = self._sock
        try:
            sock.setblocking(False)
            try:
                data = sock.recv(1, _socket_module().MSG_PEEK)
            finally:
                sock.settimeout(self.rw_timeout)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return data == b""

    def _exchange(self, data: bytes, read_timeout: float) -> bytes:
        sock, buffer = self._sock, self._buffer
        if sock is None or buffer is None:
            raise errors.ProgrammerError("LUXI exchange without a connection")
        sock.settimeout(self.rw_timeout)
        sock.sendall(data)
        sock.settimeout(read_timeout)
        while not self._frames:
            chunk = sock.recv(_RECV_SIZE)
            if not chunk:
                raise errors.ConnectionClosedError(
                    "The master daemon closed the connection without answering")
            self._frames.extend(buffer.feed(chunk))
        return self._frames.pop(0)

    def call(self, method: str, args: list[Any], *, timeout: float | None = None) -> Any:
        """Send one request and return its result (or raise its error).

        ``timeout`` overrides the read timeout for this call only.
        """
        data = encode_request(method, list(args), self.version)
        read_timeout = self.rw_timeout if timeout is None else timeout
        retry = method in IDEMPOTENT_METHODS
        for attempt in (0, 1):
            if self._sock is not None and self._calls_on_conn and self._peer_closed():
                self.close()  # stale connection: nothing was sent on it yet
            if self._sock is None:
                self._connect()
            try:
                frame = self._exchange(data, read_timeout)
            except TimeoutError as exc:
                self.close()
                raise errors.LuxiTimeoutError(
                    f"No answer from the master daemon to {method} within"
                    f" {read_timeout} seconds") from exc
            except (errors.ConnectionClosedError, BrokenPipeError,
                    ConnectionResetError) as exc:
                self.close()
                if retry and attempt == 0:
                    import logging
                    logging.getLogger(__name__).debug(
                        "LUXI connection broke during %s, retrying once", method)
                    continue
                if isinstance(exc, errors.ConnectionClosedError):
                    raise
                raise errors.ConnectionClosedError(
                    f"Connection to the master daemon broke during {method}: {exc}") from exc
            except errors.ProtocolError:
                self.close()
                raise
            self._calls_on_conn += 1
            return parse_response(frame)
        raise errors.ProgrammerError("unreachable")  # pragma: no cover

    # --- jobs -----------------------------------------------------------
    def SubmitJob(self, ops: list[Any]) -> int:
        """Submit one job (a list of opcodes); returns its id."""
        return self.call("SubmitJob", [_ops_to_data(ops)])

    def SubmitJobToDrainedQueue(self, ops: list[Any]) -> int:
        """Like :meth:`SubmitJob`, ignoring the drain flag."""
        return self.call("SubmitJobToDrainedQueue", [_ops_to_data(ops)])

    def SubmitManyJobs(self, jobs: list[list[Any]]) -> list[list[Any]]:
        """Submit several jobs; returns ``[success, job_id_or_error]`` per job."""
        return self.call("SubmitManyJobs", [[_ops_to_data(ops) for ops in jobs]])

    def WaitForJobChangeOnce(self, job_id: int, fields: list[str], prev_job_info: Any,
                             prev_log_serial: int,
                             timeout: float = constants.LUXI_WFJC_TIMEOUT) -> Any:
        """One ``WaitForJobChange`` call: ``"nochange"`` or ``[job_info, log_entries]``.

        Raises :class:`errors.JobLost` for an unknown job.
        """
        read_timeout = max(self.rw_timeout, timeout + 10)
        return self.call("WaitForJobChange",
                         [job_id, fields, prev_job_info, prev_log_serial, timeout],
                         timeout=read_timeout)

    def WaitForJobChange(self, job_id: int, fields: list[str], prev_job_info: Any,
                         prev_log_serial: int, *, max_wait: float | None = None,
                         clock: Any = None) -> Any:
        """Wait until the job changes, retrying on the server's ``"nochange"``.

        With ``max_wait`` (seconds), give up after that long and return
        ``"nochange"``; without it, wait as long as the job takes.
        """
        if clock is None:
            import time
            clock = time.monotonic
        deadline = None if max_wait is None else clock() + max_wait
        while True:
            timeout: float = constants.LUXI_WFJC_TIMEOUT
            if deadline is not None:
                left = deadline - clock()
                if left <= 0:
                    return JOB_NOTCHANGED
                timeout = min(timeout, left)
            result = self.WaitForJobChangeOnce(job_id, fields, prev_job_info,
                                               prev_log_serial, timeout)
            if result != JOB_NOTCHANGED:
                return result

    def WaitForEvents(self, last_id: int | None, event_filter: Any = None,
                      timeout: float = constants.LUXI_WFJC_TIMEOUT) -> dict[str, Any]:
        """Events after ``last_id`` (None: from now), waiting up to ``timeout``.

        ``event_filter`` is None or ``{"jobs": [ids], "filter": qfilter}``.
        Returns ``{"last_id": cursor, "events": [event dicts]}`` (see
        :func:`ganeti.events.event_to_dict`); ask again from ``last_id``.
        """
        return self.call("WaitForEvents", [last_id, event_filter, timeout],
                         timeout=max(self.rw_timeout, timeout + 10))

    def CancelJob(self, job_id: int, kill: bool = False) -> list[Any]:
        """Cancel a queued/waiting job; returns ``[success, message]``."""
        return self.call("CancelJob", [job_id, kill])

    def ArchiveJob(self, job_id: int) -> bool:
        """Archive a finished job; returns whether it was archived."""
        return self.call("ArchiveJob", [job_id])

    def AutoArchiveJobs(self, age: float, timeout: float) -> list[int]:
        """Archive jobs older than ``age`` seconds (-1: all); ``[archived, left]``."""
        return self.call("AutoArchiveJobs", [age, timeout],
                         timeout=max(self.rw_timeout, timeout + 10))

    def ChangeJobPriority(self, job_id: int, priority: int) -> list[Any]:
        """Change a job's priority; returns ``[success, message]``."""
        return self.call("ChangeJobPriority", [job_id, priority])

    def PickupJob(self, job_id: int) -> Any:
        """Ask the master to adopt a job written to the queue by another process."""
        return self.call("PickupJob", [job_id])

    # --- queries --------------------------------------------------------
    def Query(self, what: str, fields: list[str], qfilter: Any) -> dict[str, Any]:
        """Query2: ``{"fields": [fielddefs], "data": [[[status, value], ...], ...]}``."""
        return self.call("Query", [what, fields, qfilter])

    def QueryFields(self, what: str, fields: list[str] | None) -> dict[str, Any]:
        """Field definitions of a resource: ``{"fields": [fielddefs]}``."""
        return self.call("QueryFields", [what, fields])

    def QueryJobs(self, job_ids: list[int] | None, fields: list[str]) -> list[Any]:
        """Rows of job fields; None in place of an unknown job."""
        return self.call("QueryJobs", [job_ids, fields])

    def QueryInstances(self, names: list[str], fields: list[str], use_locking: bool) -> list[Any]:
        """Old-style instance query (rows)."""
        return self.call("QueryInstances", [names, fields, use_locking])

    def QueryNodes(self, names: list[str], fields: list[str], use_locking: bool) -> list[Any]:
        """Old-style node query (rows)."""
        return self.call("QueryNodes", [names, fields, use_locking])

    def QueryGroups(self, names: list[str], fields: list[str], use_locking: bool) -> list[Any]:
        """Old-style node group query (rows)."""
        return self.call("QueryGroups", [names, fields, use_locking])

    def QueryNetworks(self, names: list[str], fields: list[str], use_locking: bool) -> list[Any]:
        """Old-style network query (rows)."""
        return self.call("QueryNetworks", [names, fields, use_locking])

    def QueryExports(self, nodes: list[str], use_locking: bool) -> dict[str, Any]:
        """Exports per node."""
        return self.call("QueryExports", [nodes, use_locking])

    def QueryConfigValues(self, fields: list[str]) -> list[Any]:
        """Cluster configuration values (cluster_name, drain_flag, ...)."""
        return self.call("QueryConfigValues", [fields])

    def QueryClusterInfo(self) -> dict[str, Any]:
        """The cluster information dict."""
        return self.call("QueryClusterInfo", [])

    def QueryMetrics(self) -> list[dict[str, Any]]:
        """The master daemon's figures (metric families, see ``ganeti.metrics``)."""
        return self.call("QueryMetrics", [])

    def QueryTags(self, kind: str, name: str) -> list[str]:
        """Tags of one object (kind: cluster, node, instance, nodegroup, network)."""
        return self.call("QueryTags", [kind, name])

    # --- queue / watcher flags ------------------------------------------
    def SetDrainFlag(self, flag: bool) -> Any:
        """Set or clear the job queue drain flag."""
        return self.call("SetDrainFlag", [flag])

    def SetWatcherPause(self, until: float | None) -> Any:
        """Pause the watcher until a timestamp (None: resume)."""
        return self.call("SetWatcherPause", [until])
