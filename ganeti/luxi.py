"""LUXI: the JSON+ETX protocol between clients and the master daemon.

This module holds the codec (no sockets: bytes in, messages out) and the
:class:`Client` (one method per LUXI method, same names as Ganeti).

Framing: each message is one JSON document followed by ``0x03`` (ETX).
Request ``{"method", "args", "version"?}``; response ``{"success",
"result"}``; a failed call's result is ``[ErrorClass, [args]]``.  The
protocol and the methods: doc/protocols/luxi.md.
"""

from __future__ import annotations

from ganeti import constants, errors, luxi_table, serializer, wiretypes
from ganeti.utils import unixsock

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ETX", "METHODS", "Method", "OPS", "JOBS", "FrameBuffer", "encode_message",
           "encode_request", "encode_response", "parse_request",
           "parse_response", "Request", "Client", "JOB_NOTCHANGED",
           "IDEMPOTENT_METHODS", "default_master_socket", "check_args",
           "WAIT_FOR_EVENTS_LIMIT", "luxi_method", "LuxiSpec"]

ETX = b"\x03"

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
# Annotations of the one validator of every wire (ganeti.wiretypes).

#: a job's opcodes on the wire: JSON objects (the client sends opcode objects
#: as their dicts; the master validates each opcode when it builds the job)
OPS = list[dict[str, object]]
#: several jobs' opcodes
JOBS = list[OPS]


class Method:
    """One row of the LUXI table: a method, its typed arguments and how to call it.

    Rows are declared by the master's handlers (:func:`luxi_method`) and
    generated into :mod:`ganeti.luxi_table`; this class reads them.
    ``args``: ``(name, type)`` per argument, in wire order; a ``?`` after
    the name marks an optional trailing argument (the master accepts the
    request without it).  ``type`` is an annotation of
    :mod:`ganeti.wiretypes`, whose validator checks it on both ends and
    whose text the generated client method uses.
    ``idempotent``: a client may re-send the call once after the
    connection broke mid-call (reads, and changes with the same effect when
    repeated; never submissions).  ``wait``: the name of the argument that
    says how long the master may take (a long poll): the client's read
    timeout is at least that plus ten seconds.  ``result``: the Python type
    of the answer.  ``client``: the client method's name when it differs,
    and ``defaults``: Python default values of the client's arguments.
    A plain class (no dataclasses: the CLI imports this module).
    """

    __slots__ = ("name", "args", "idempotent", "wait", "result", "doc", "client", "defaults")
    name: str
    args: tuple[tuple[str, Any], ...]
    idempotent: bool
    wait: str | None
    result: str
    doc: str
    client: str
    defaults: dict[str, str]

    def __init__(self, name: str, args: tuple[tuple[str, Any], ...], *, idempotent: bool,
                 result: str, doc: str, wait: str | None = None, client: str | None = None,
                 defaults: dict[str, str] | None = None) -> None:
        self.name = name
        self.args = args
        self.idempotent = idempotent
        self.wait = wait
        self.result = result
        self.doc = doc
        self.client = client or name
        self.defaults = defaults or {}

    def arg_names(self) -> list[str]:
        """The argument names in wire order, without the ``?`` marks."""
        return [name.rstrip("?") for name, _ in self.args]

    def __repr__(self) -> str:
        return f"Method({self.name!r})"


class LuxiSpec:
    """What :func:`luxi_method` adds to a handler: how the method is called.

    The rest of its row comes from the handler itself (its name, its
    parameters, its docstring's first paragraph).
    """

    __slots__ = ("idempotent", "wait", "result", "client", "defaults")

    def __init__(self, idempotent: bool, wait: str | None, result: str | None,
                 client: str | None, defaults: dict[str, str] | None) -> None:
        self.idempotent = idempotent
        self.wait = wait
        self.result = result
        self.client = client
        self.defaults = defaults or {}


def luxi_method(*, idempotent: bool, wait: str | None = None, result: str | None = None,
                client: str | None = None,
                defaults: dict[str, str] | None = None) -> Any:
    """Mark a handler of the master as the LUXI method of its name (returned unchanged).

    A LUXI method is declared once, by its handler in
    ``ganeti/server/luxi_handlers.py`` (doc/design/contracts.md, "Adding a
    LUXI method"): the parameters after ``self`` are the arguments in wire
    order, typed with :mod:`ganeti.wiretypes` annotations (one with a
    default is optional), and the docstring's first paragraph is the
    one-line doc.  Here: ``idempotent``, ``wait``, ``client`` and the
    client's ``defaults`` (Python source text) as in :class:`Method`, and
    ``result``, the client's return type as text (default: the handler's
    return annotation).  ``tools/gen_luxi_client.py`` writes the rows to
    :mod:`ganeti.luxi_table`.
    """
    spec = LuxiSpec(idempotent, wait, result, client, defaults)

    def mark(fn: Any) -> Any:
        fn.__luxi_method__ = spec
        return fn
    return mark


def _row(name: str, args: tuple[tuple[str, Any], ...], idempotent: bool, wait: str | None,
         result: str, client: str | None, defaults: dict[str, str] | None, doc: str) -> Method:
    return Method(name, args, idempotent=idempotent, wait=wait, result=result, doc=doc,
                  client=client, defaults=defaults)


#: The LUXI methods the master serves, one row each, in the order of their
#: handlers.  Generated into :mod:`ganeti.luxi_table` from the
#: :func:`luxi_method` handlers (``tools/gen_luxi_client.py``), so that the
#: client never imports the master.  The master checks every request against
#: its row before running it (doc/protocols/luxi.md); the :class:`Client`
#: methods are generated from it too, and so is the test fake.
METHODS: dict[str, Method] = {row[0]: _row(*row) for row in luxi_table.ROWS}

#: Most events one ``WaitForEvents`` answer carries (the client asks again
#: from the cursor it got for the rest).
WAIT_FOR_EVENTS_LIMIT = 500


def check_args(method: str, args: list[Any]) -> None:
    """Check ``args`` of a request against the method's row of :data:`METHODS`.

    The one argument check of LUXI, on both ends: the master runs it on
    every request, the :class:`Client` before it sends.  Raises
    :class:`errors.ParameterError` (``wrong_input``) naming the method and
    the argument for a wrong count or type; a method not in the table is
    not checked here.
    """
    row = METHODS.get(method)
    if row is None:
        return
    spec = row.args
    required = sum(1 for name, _ in spec if not name.endswith("?"))
    if not required <= len(args) <= len(spec):
        want = str(required) if required == len(spec) else f"{required} to {len(spec)}"
        raise errors.ParameterError(f"{method} takes {want} argument(s), got {len(args)}",
                                    errors.ECODE_INVAL)
    for (name, tp), value in zip(spec, args):
        try:
            wiretypes.check_value(tp, value, name.rstrip("?"), max_items=None)
        except errors.ParameterError as exc:
            raise errors.ParameterError(f"{method}: {exc.args[0]}", errors.ECODE_INVAL) from None


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

#: Methods that may be re-sent after the connection broke mid-call (the
#: rows marked ``idempotent``).  Submissions are never re-sent (the first
#: attempt may have created the job).
IDEMPOTENT_METHODS = frozenset(m.name for m in METHODS.values() if m.idempotent)

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

    The LUXI methods are generated from :data:`METHODS`
    (``tools/gen_luxi_client.py``); every one goes through :meth:`call`, so
    a fake client only needs to replace that one method
    (``test/fakes/fakeluxi.py``).  Not thread-safe: use one client per thread.
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
            unixsock.connect(sock, self.address)   # a path of any length
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

        ``timeout`` overrides the read timeout for this call only.  The
        arguments are checked against the method's row of :data:`METHODS`
        first (:func:`check_args`: a wrong one raises
        :class:`errors.ParameterError` and nothing is sent).
        """
        args = list(args)
        check_args(method, args)
        data = encode_request(method, args, self.version)
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

    # --- the LUXI methods, one per row of METHODS ---------------------------
    # --- generated by tools/gen_luxi_client.py from METHODS: do not edit ---
    def SubmitJob(self, ops: list[Any], *, read_timeout: float | None = None) -> int:
        """Submit one job (a list of opcodes); returns its id."""
        return self.call("SubmitJob", [_ops_to_data(ops)], timeout=read_timeout)

    def SubmitJobToDrainedQueue(self, ops: list[Any], *, read_timeout: float | None = None) -> int:
        """Like SubmitJob, ignoring the drain flag."""
        return self.call("SubmitJobToDrainedQueue", [_ops_to_data(ops)], timeout=read_timeout)

    def SubmitManyJobs(self, jobs: list[list[Any]], *,
                       read_timeout: float | None = None) -> list[list[Any]]:
        """Submit several jobs; returns [success, job_id_or_error] per job."""
        return self.call("SubmitManyJobs", [[_ops_to_data(ops) for ops in jobs]],
                         timeout=read_timeout)

    def WaitForJobChangeOnce(self, job_id: int | str, fields: list[str], prev_job_info: Any,
                             prev_log_serial: int | None,
                             timeout: float = constants.LUXI_WFJC_TIMEOUT, *,
                             read_timeout: float | None = None) -> Any:
        """One wait for a job change: "nochange" or [job_info, log_entries]."""
        return self.call("WaitForJobChange", [job_id, fields, prev_job_info, prev_log_serial,
                                              timeout],
                         timeout=(max(self.rw_timeout, timeout + 10) if read_timeout is None
                                  else read_timeout))

    def PickupJob(self, job_id: int | str, *, read_timeout: float | None = None) -> Any:
        """Adopt a job written to the queue by another process."""
        return self.call("PickupJob", [job_id], timeout=read_timeout)

    def ArchiveJob(self, job_id: int | str, *, read_timeout: float | None = None) -> bool:
        """Archive a finished job; returns whether it was archived."""
        return self.call("ArchiveJob", [job_id], timeout=read_timeout)

    def AutoArchiveJobs(self, age: float, timeout: float, *,
                        read_timeout: float | None = None) -> list[int]:
        """Archive jobs older than age seconds (-1: all); returns [archived, left]."""
        return self.call("AutoArchiveJobs", [age, timeout],
                         timeout=(max(self.rw_timeout, timeout + 10) if read_timeout is None
                                  else read_timeout))

    def ChangeJobPriority(self, job_id: int | str, priority: int, *,
                          read_timeout: float | None = None) -> list[Any]:
        """Change a job's priority; returns [success, message]."""
        return self.call("ChangeJobPriority", [job_id, priority], timeout=read_timeout)

    def Query(self, what: str, fields: list[str], qfilter: Any, *,
              read_timeout: float | None = None) -> dict[str, Any]:
        """Query2: {fields: [fielddefs], data: [[[status, value], ...], ...]}."""
        return self.call("Query", [what, fields, qfilter], timeout=read_timeout)

    def QueryFields(self, what: str, fields: list[str] | None, *,
                    read_timeout: float | None = None) -> dict[str, Any]:
        """Field definitions of a resource: {fields: [...]}."""
        return self.call("QueryFields", [what, fields], timeout=read_timeout)

    def QueryInstances(self, names: list[str] | None, fields: list[str], use_locking: bool = False,
                       *, read_timeout: float | None = None) -> list[Any]:
        """Old-style instance query (rows)."""
        return self.call("QueryInstances", [names, fields, use_locking], timeout=read_timeout)

    def QueryNodes(self, names: list[str] | None, fields: list[str], use_locking: bool = False, *,
                   read_timeout: float | None = None) -> list[Any]:
        """Old-style node query (rows)."""
        return self.call("QueryNodes", [names, fields, use_locking], timeout=read_timeout)

    def QueryGroups(self, names: list[str] | None, fields: list[str], use_locking: bool = False, *,
                    read_timeout: float | None = None) -> list[Any]:
        """Old-style node group query (rows)."""
        return self.call("QueryGroups", [names, fields, use_locking], timeout=read_timeout)

    def QueryNetworks(self, names: list[str] | None, fields: list[str], use_locking: bool = False,
                      *, read_timeout: float | None = None) -> list[Any]:
        """Old-style network query (rows)."""
        return self.call("QueryNetworks", [names, fields, use_locking], timeout=read_timeout)

    def QueryExports(self, nodes: list[str] | None, use_locking: bool = False, *,
                     read_timeout: float | None = None) -> dict[str, Any]:
        """Exports per node."""
        return self.call("QueryExports", [nodes, use_locking], timeout=read_timeout)

    def QueryClusterInfo(self, *, read_timeout: float | None = None) -> dict[str, Any]:
        """The cluster information dict."""
        return self.call("QueryClusterInfo", [], timeout=read_timeout)

    def DrainMaster(self, seconds: float, *, read_timeout: float | None = None) -> dict[str, Any]:
        """Refuse submissions for seconds (0: accept again), then flush the replication."""
        return self.call("DrainMaster", [seconds], timeout=read_timeout)

    def Echo(self, text: str, *, read_timeout: float | None = None) -> str:
        """Return text (WConfd echo)."""
        return self.call("Echo", [text], timeout=read_timeout)

    def FlushConfig(self, *, read_timeout: float | None = None) -> int:
        """Write the configuration and replicate it now; returns its serial."""
        return self.call("FlushConfig", [], timeout=read_timeout)

    def CleanupLocks(self, *, read_timeout: float | None = None) -> list[list[str]]:
        """Release locks of ended owner threads; returns [lock, owner] pairs."""
        return self.call("CleanupLocks", [], timeout=read_timeout)

    def ListLocks(self, job_id: int | str, *,
                  read_timeout: float | None = None) -> list[list[str]]:
        """The locks a job holds: [lock, shared|exclusive] pairs."""
        return self.call("ListLocks", [job_id], timeout=read_timeout)

    def ListAllLocks(self, *, read_timeout: float | None = None) -> list[str]:
        """The names of the locks held now."""
        return self.call("ListAllLocks", [], timeout=read_timeout)

    def ListAllLocksOwners(self, *, read_timeout: float | None = None) -> list[list[Any]]:
        """The locks held now: [lock, [[owner, shared|exclusive], ...]]."""
        return self.call("ListAllLocksOwners", [], timeout=read_timeout)

    def WaitForEvents(self, last_id: int | None, event_filter: Any = None,
                      timeout: float = constants.LUXI_WFJC_TIMEOUT, *,
                      read_timeout: float | None = None) -> dict[str, Any]:
        """Events after last_id (None: from now), waiting up to timeout."""
        return self.call("WaitForEvents", [last_id, event_filter, timeout],
                         timeout=(max(self.rw_timeout, timeout + 10) if read_timeout is None
                                  else read_timeout))

    def QueryFilters(self, uuids: list[str] | None, fields: list[str], *,
                     read_timeout: float | None = None) -> list[Any]:
        """Old-style job filter rule query (rows; uuids empty or None: all)."""
        return self.call("QueryFilters", [uuids, fields], timeout=read_timeout)

    def ReplaceFilter(self, uuid: str | None, priority: int, predicates: list, action: Any,
                      reason: list, *, read_timeout: float | None = None) -> str:
        """Add (uuid None) or replace a job filter rule; returns its UUID."""
        return self.call("ReplaceFilter", [uuid, priority, predicates, action, reason],
                         timeout=read_timeout)

    def DeleteFilter(self, uuid: str, *, read_timeout: float | None = None) -> Any:
        """Remove a job filter rule."""
        return self.call("DeleteFilter", [uuid], timeout=read_timeout)

    def QueryMetrics(self, *, read_timeout: float | None = None) -> list[dict[str, Any]]:
        """The master daemon's figures (metric families, see ganeti.metrics)."""
        return self.call("QueryMetrics", [], timeout=read_timeout)

    def CancelJob(self, job_id: int | str, kill: bool = False, *,
                  read_timeout: float | None = None) -> list[Any]:
        """Cancel a queued or waiting job; returns [success, message]."""
        return self.call("CancelJob", [job_id, kill], timeout=read_timeout)

    def QueryJobs(self, job_ids: list[int] | None, fields: list[str], *,
                  read_timeout: float | None = None) -> list[Any]:
        """Rows of job fields; None in place of an unknown job."""
        return self.call("QueryJobs", [job_ids, fields], timeout=read_timeout)

    def SetWatcherPause(self, until: float | None, *, read_timeout: float | None = None) -> Any:
        """Pause the watcher until a timestamp (None: resume)."""
        return self.call("SetWatcherPause", [until], timeout=read_timeout)

    def SetDrainFlag(self, flag: bool, *, read_timeout: float | None = None) -> Any:
        """Set or clear the job queue drain flag."""
        return self.call("SetDrainFlag", [flag], timeout=read_timeout)

    def QueryNodeDrbd(self, node: str, *, read_timeout: float | None = None) -> list[list[Any]]:
        """DRBD minors of a node from the configuration (rows as gnt-node list-drbd)."""
        return self.call("QueryNodeDrbd", [node], timeout=read_timeout)

    def QueryConfigValues(self, fields: list[str], *,
                          read_timeout: float | None = None) -> list[Any]:
        """Cluster configuration values (cluster_name, drain_flag, ...)."""
        return self.call("QueryConfigValues", [fields], timeout=read_timeout)

    def QueryTags(self, kind: str, name: str | None, *,
                  read_timeout: float | None = None) -> list[str]:
        """Tags of one object (kind: cluster, node, instance, nodegroup, network)."""
        return self.call("QueryTags", [kind, name], timeout=read_timeout)
    # --- end of generated methods ---
