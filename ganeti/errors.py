"""The one exception tree of the project.

Every error raised on purpose by our code is a :class:`GanetiError`::

    GanetiError
     +-- ProgrammerError          a bug in our code: an API used the wrong way
     +-- SerializationError       data cannot be encoded as JSON, or JSON text decoded
     +-- ConfigurationError       config.data missing, corrupt or inconsistent
     +-- OpPrereqError            an operation cannot start (carries an ECODE_*)
     |    +-- ParameterError      an unknown, wrongly typed or bad parameter
     |    +-- OpCodeError         an opcode dict is malformed or names no opcode
     +-- OpExecError              an operation failed while running
     +-- HooksAbort               a pre-hook refused the operation
     +-- HooksFailure             the hooks could not be run at all
     +-- LockError                locking rules broken or a lock was deleted
     +-- RpcError                 node RPC failed
     |    +-- RpcTransportError   the node could not be reached / timed out
     |    +-- RemoteError         the node ran the call and reported failure
     +-- HypervisorError          the hypervisor refused or failed an action
     +-- StorageError             a disk could not be created/used/removed
     +-- InvalidOS                an OS definition is missing or broken
     +-- JobQueueError            the job queue refused or lost something
     |    +-- JobQueueDrainError  the queue is drained: no new jobs
     |    +-- JobQueueFull        too many jobs in the queue
     |    +-- JobLost             a job id that does not exist (any more)
     |    +-- JobFileCorrupted    a job file on disk cannot be parsed
     |    +-- JobQueueQuorumError a new job did not reach a majority of the candidates (retry)
     +-- HttpError               bytes are not an HTTP/1.1 message we frame (carries a status)
     +-- WebSocketError          bytes break the WebSocket protocol (carries a close code)
     +-- RfbError                a VNC (RFB) handshake broke or was refused
     +-- LuxiError               the LUXI conversation itself failed
     |    +-- ProtocolError       malformed frame, bad JSON, oversized message
     |    +-- LuxiTimeoutError    no answer in time
     |    +-- ConnectionClosedError the peer closed the socket
     |    +-- NoMasterError       no master daemon listens on the socket
     +-- QueryFilterParseError   a query filter (text or list form) is invalid
     +-- ResolverError           a host name cannot be resolved
     +-- CertificateError        a certificate is missing, invalid or expired
     +-- CommandError            an external command could not be run
     +-- RetryTimeout            utils.retry gave up
     +-- TagError                a tag is invalid or the tag limit is hit
     +-- UnitParseError          a size such as "10G" cannot be parsed
 +-- UntrustedFileError      a file to read is a symbolic link or not a regular file
 +-- NotMasterError          this node may not act as master (vote refused, or fenced)
      +-- MasterFailingOverError the master is handing over: submit again shortly

Errors cross LUXI and are stored in job results as ``[ClassName,
[args...]]`` (doc/protocols/luxi.md, "Errors"); :func:`encode_exception`
and :func:`decode_exception` are the only pair that does that.  Node RPC
failures travel as plain text instead (doc/protocols/rpc.md, "Response").  Error codes (``ECODE_*``) are the strings Ganeti clients
already know (``wrong_input``, ``unknown_entity`` ...).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ECODE_RESOLVER", "ECODE_NORES", "ECODE_TEMP_NORES", "ECODE_INVAL",
    "ECODE_STATE", "ECODE_NOENT", "ECODE_EXISTS", "ECODE_NOTUNIQUE",
    "ECODE_FAULT", "ECODE_ENVIRON", "ECODE_ALL",
    "GanetiError", "ProgrammerError", "SerializationError",
    "ConfigurationError", "OpPrereqError", "ParameterError", "OpCodeError",
    "OpExecError", "HooksAbort", "HooksFailure", "LockError", "RpcError",
    "RpcTransportError", "RemoteError", "HypervisorError", "StorageError",
    "InvalidOS", "JobQueueError", "JobQueueDrainError", "JobQueueFull",
    "JobLost", "JobFileCorrupted", "JobQueueQuorumError", "HttpError", "WebSocketError", "RfbError", "LuxiError", "ProtocolError",
    "LuxiTimeoutError", "ConnectionClosedError", "NoMasterError",
    "QueryFilterParseError", "ResolverError", "CertificateError",
    "CommandError", "RetryTimeout", "TagError", "UnitParseError", "UntrustedFileError",
    "NotMasterError", "MasterFailingOverError",
    "encode_exception", "decode_exception", "maybe_raise", "get_error_code",
]

# Error codes, as Ganeti clients (CLI, RAPI users) know them.
ECODE_RESOLVER = "resolver_error"
ECODE_NORES = "insufficient_resources"
ECODE_TEMP_NORES = "temp_insufficient_resources"
ECODE_INVAL = "wrong_input"
ECODE_STATE = "wrong_state"
ECODE_NOENT = "unknown_entity"
ECODE_EXISTS = "already_exists"
ECODE_NOTUNIQUE = "resource_not_unique"
ECODE_FAULT = "internal_error"
ECODE_ENVIRON = "environment_error"
ECODE_ALL = frozenset([
    ECODE_RESOLVER, ECODE_NORES, ECODE_TEMP_NORES, ECODE_INVAL, ECODE_STATE,
    ECODE_NOENT, ECODE_EXISTS, ECODE_NOTUNIQUE, ECODE_FAULT, ECODE_ENVIRON,
])


class GanetiError(Exception):
    """Root of every error we raise on purpose."""


class ProgrammerError(GanetiError):
    """Raised when our own code uses an API wrongly (a bug, never user input)."""


class SerializationError(GanetiError):
    """Raised when data cannot be encoded as strict JSON, or JSON text cannot be decoded."""


class ConfigurationError(GanetiError):
    """Raised when the cluster configuration is missing, corrupt or inconsistent."""


class OpPrereqError(GanetiError):
    """Raised when an operation cannot start; nothing has been changed.

    Arguments are ``(message, error_code)``; the code is one of ``ECODE_*``.
    """

    def __init__(self, msg: str = "", ecode: str = ECODE_INVAL, *args: Any) -> None:
        super().__init__(msg, ecode, *args)

    @property
    def ecode(self) -> str:
        return self.args[1] if len(self.args) > 1 else ECODE_INVAL

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ParameterError(OpPrereqError):
    """Raised for an unknown parameter, a wrong type or a bad value.

    The message always names the parameter.
    """


class OpCodeError(OpPrereqError):
    """Raised when an opcode dict is malformed or names an unknown opcode."""


class OpExecError(GanetiError):
    """Raised when an operation fails while running (changes may be partial)."""


class HooksAbort(GanetiError):
    """Raised when a pre-hook script refused the operation; carries its output."""


class HooksFailure(GanetiError):
    """Raised when hooks could not be run at all (not a refusal)."""


class LockError(GanetiError):
    """Raised when a locking rule is broken or a lock was deleted under a waiter."""


class RpcError(GanetiError):
    """Raised when a node RPC call fails."""


class RpcTransportError(RpcError):
    """Raised when a node could not be reached, refused TLS, or timed out."""


class RemoteError(RpcError):
    """Raised when a node ran the procedure and reported a failure."""


class HypervisorError(GanetiError):
    """Raised when the hypervisor refuses or fails an action."""


class StorageError(GanetiError):
    """Raised when a disk cannot be created, assembled, resized or removed."""


class InvalidOS(GanetiError):
    """Raised when an OS definition is missing, incomplete or broken."""


class JobQueueError(GanetiError):
    """Raised when the job queue refuses a request or cannot store a job."""


class JobQueueDrainError(JobQueueError):
    """Raised when a job is submitted while the queue is drained."""


class JobQueueFull(JobQueueError):
    """Raised when the queue holds too many jobs to accept another."""


class JobLost(JobQueueError):
    """Raised when a job id is not (or no longer) known to the queue."""


class JobFileCorrupted(JobQueueError):
    """Raised when a job file on disk cannot be parsed."""


class JobQueueUnwrittenError(JobQueueError):
    """Raised by a submission whose new job files were handed to the master
    candidates while the master wrote its own copy, and that write failed:
    the job is not acknowledged (the queue finishes it as failed, also on
    the candidates, and never reuses its id; doc/design/replication.md,
    "New jobs: the quorum write")."""


class JobQueueQuorumError(JobQueueError):
    """Raised by a submission whose new job files could not be stored on a
    strict majority of the master candidates: the job is not acknowledged
    (it is marked failed and never runs, its id is never reused) and the
    client may submit it again (doc/protocols/luxi.md, "Errors")."""


class HttpError(GanetiError):
    """Raised by :mod:`ganeti.http.framing` when bytes cannot be framed as HTTP/1.1.

    That is: a malformed request, status or header line; a missing, bad or
    conflicting ``Content-Length``; a head or body over the parser's limits;
    a ``Transfer-Encoding`` (chunked bodies are refused); or a connection
    that ended in the middle of a message.  Arguments are
    ``(message, status)``: ``status`` is the reply a server sends for it
    (400, 413, 431 or 501; 502 when a *response* is malformed).
    """

    def __init__(self, msg: str = "", status: int = 400, *args: Any) -> None:
        super().__init__(msg, status, *args)

    @property
    def status(self) -> int:
        return self.args[1] if len(self.args) > 1 and isinstance(self.args[1], int) else 400

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class WebSocketError(GanetiError):
    """Raised by :mod:`ganeti.http.websocket` when received frames break RFC 6455.

    Arguments are ``(message, code)``: ``code`` is the close code to answer
    with (1002 protocol error, 1007 bad UTF-8, 1009 too big).
    """

    def __init__(self, msg: str = "", code: int = 1002, *args: Any) -> None:
        super().__init__(msg, code, *args)

    @property
    def code(self) -> int:
        """The close code to answer with."""
        return int(self.args[1])

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RfbError(GanetiError):
    """Raised by :mod:`ganeti.http.rfb` when a VNC console's handshake cannot go on:
    the VNC server or the browser broke RFB or VeNCrypt, offered nothing the
    node takes, or refused (a wrong VNC password)."""


class LuxiError(GanetiError):
    """Raised when the LUXI conversation itself fails."""


class ProtocolError(LuxiError):
    """Raised for a malformed or oversized frame, or bad JSON in it."""


class LuxiTimeoutError(LuxiError):
    """Raised when the peer does not answer in time."""


class ConnectionClosedError(LuxiError):
    """Raised when the peer closed the connection."""


class NoMasterError(LuxiError):
    """Raised when no master daemon listens on the LUXI socket."""


class QueryFilterParseError(GanetiError):
    """Raised when a query filter, in text or list form, is invalid."""


class ResolverError(GanetiError):
    """Raised when a host name cannot be resolved."""


class CertificateError(GanetiError):
    """Raised when a certificate is missing, invalid or expired."""


class CommandError(GanetiError):
    """Raised when an external command cannot be started or fails."""


class RetryTimeout(GanetiError):
    """Raised when :func:`ganeti.utils.retry.retry` runs out of time."""


class TagError(GanetiError):
    """Raised when a tag is invalid or an object has too many tags."""


class UnitParseError(GanetiError):
    """Raised when a size such as ``10G`` cannot be parsed."""


class UntrustedFileError(GanetiError):
    """Raised by :func:`ganeti.utils.io.read_regular_file` when the entry to
    read is a symbolic link (never followed), a directory or another
    non-regular file; arguments ``(message, path)``."""


class NotMasterError(GanetiError):
    """Raised when this node may not act as the master: the master vote did
    not confirm it, or a node refused its master epoch as older than one it
    has accepted (doc/design/failover.md)."""


class MasterFailingOverError(NotMasterError):
    """Raised for a submission while the master drains for a planned failover
    (doc/design/failover.md, "Planned failover under load"): retryable, the
    job was not accepted and its id not used."""


def _all_error_classes() -> dict[str, type[GanetiError]]:
    found: dict[str, type[GanetiError]] = {}
    todo: list[type[GanetiError]] = [GanetiError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def encode_exception(err: BaseException) -> list[Any]:
    """Encode an exception as ``[ClassName, [args]]`` for LUXI/RPC/RAPI.

    Foreign exceptions are encoded as ``OpExecError`` with their text, so the
    receiving side never has to know about them.
    """
    if isinstance(err, GanetiError):
        return [type(err).__name__, [_jsonable(a) for a in err.args]]
    return ["OpExecError", [f"{type(err).__name__}: {err}"]]


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def decode_exception(data: Any) -> GanetiError:
    """Turn ``[ClassName, [args]]`` back into an exception instance.

    Unknown class names become a plain :class:`GanetiError` that keeps the
    name in its message; malformed data becomes a :class:`ProtocolError`.
    """
    if (not isinstance(data, (list, tuple)) or len(data) != 2
            or not isinstance(data[0], str)):
        return ProtocolError(f"Malformed encoded error: {data!r}")
    name, args = data
    if not isinstance(args, (list, tuple)):
        args = [args]
    cls = _all_error_classes().get(name)
    if cls is None:
        return GanetiError(f"{name}: " + ", ".join(str(a) for a in args))
    try:
        return cls(*args)
    except TypeError:
        return cls(" ".join(str(a) for a in args))


def maybe_raise(result: Any) -> None:
    """Raise the error encoded in ``result`` if it is an encoded error."""
    if (isinstance(result, (list, tuple)) and len(result) == 2
            and isinstance(result[0], str)
            and result[0] in _all_error_classes()):
        raise decode_exception(result)


def get_error_code(err: BaseException) -> str | None:
    """The ``ECODE_*`` of an error, if it carries one."""
    if isinstance(err, OpPrereqError):
        return err.ecode
    return None
