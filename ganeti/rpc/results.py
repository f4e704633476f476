"""What a node RPC call answers: one :class:`RpcResult` per node, in :class:`RpcResults`.

Pure data (no I/O).  Every ``call_<procedure>`` stub (``rpc/stubs.py``)
returns an :class:`RpcResults`, a ``{node_name: RpcResult}`` dict in the
order the nodes were given, with :meth:`RpcResults.one` for the common
"one node, payload or fail" case::

    created = rpc.call_blockdev_create(node, disk=d, size=1024, ...).one(node, "Cannot create disk")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ganeti import errors

__all__ = ["RpcResult", "RpcResults"]


@dataclass
class RpcResult:
    """The outcome of one procedure on one node.

    ``fail_msg`` is None on success; otherwise it says why (for transport
    failures it names the node and its address).
    """

    node: str
    payload: Any = None
    fail_msg: str | None = None
    offline: bool = False
    call: str = ""

    @property
    def failed(self) -> bool:
        return self.fail_msg is not None

    def raise_on_failure(self, prefix: str | None = None) -> None:
        """Raise :class:`errors.OpExecError` ``"<prefix>: <fail_msg>"`` if failed."""
        if self.fail_msg is None:
            return
        msg = f"{prefix}: {self.fail_msg}" if prefix else self.fail_msg
        raise errors.OpExecError(msg)

    # Ganeti-compatible spelling
    Raise = raise_on_failure


class RpcResults(dict[str, RpcResult]):
    """``{node_name: RpcResult}`` of one call, in the order the nodes were given."""

    def __init__(self, procedure: str = "", results: Any = ()) -> None:
        super().__init__(results)
        #: the procedure called (for messages)
        self.procedure = procedure

    def one(self, node: str, what: str = "") -> Any:
        """The payload of ``node``'s answer, or raise :class:`errors.OpExecError`.

        The message is ``"<what>: <why>"`` (``what`` says what was being done,
        e.g. ``"Cannot create disk 0"``); without ``what`` it is
        ``"<procedure> failed on node <node>: <why>"``.  A node that was not
        called at all is refused the same way (``no answer``).
        """
        result = self.get(node)
        if result is None:
            raise errors.OpExecError(f"{what or self.procedure}: no answer from node {node}")
        result.raise_on_failure(what or f"{self.procedure} failed on node {node}")
        return result.payload

    def answered(self, nodes: Iterable[str],
                 warn: Callable[[str, str], None]) -> Iterator[tuple[str, Any]]:
        """``(node, payload)`` of each of ``nodes`` that answered, in that order.

        For a node that failed or was not called, ``warn(node, why)`` is
        called instead (``why`` is the failure message, or ``no answer``).
        """
        for node in nodes:
            result = self.get(node)
            if result is None or result.failed:
                warn(node, (result.fail_msg or "failed") if result is not None else "no answer")
                continue
            yield node, result.payload
