"""A fake RpcRunner: records calls, answers from a per-procedure results builder.

::

    rpc = FakeRpc(cfg)                        # offline nodes resolved from cfg
    rpc.set_result("version", "node2", 1)     # payload for one node
    rpc.set_failure("node_verify", "node3", "connection refused")
    rpc.set_handler("node_info", lambda node, args: {...})   # computed payloads
    res = rpc.call_version(["node1", "node2"])               # RpcResults {name: RpcResult}
    rpc.call_test_delay("node1", duration=1.0).one("node1")  # payload or OpExecError
    rpc.calls_to("upload_file")               # [(node_names, args), ...]
    rpc.per_node(names, lambda r, n: r.call_blockdev_getstatus(n, disks=d[n]))

The typed ``call_<procedure>`` methods are the generated ones the real
runner has (:class:`ganeti.rpc.stubs.RpcStubs`).  Every call is checked
against its row in :data:`ganeti.rpc.defs.CALLS` the way the node daemon
checks it (after a JSON round trip): a wrong argument count or type raises
:class:`errors.ProgrammerError`, so an LU test fails where a real node
would have refused the call.

Offline nodes (``node.offline`` in the config) get an offline RpcResult and
are *not* recorded as calls, like the real runner (no network traffic).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ganeti import constants, errors, serializer
from ganeti.rpc import defs
from ganeti.rpc.client import OFFLINE_MSG, RpcResult, RpcResults, collect_per_node, node_list
from ganeti.rpc.stubs import Nodes, RpcStubs

__all__ = ["FakeRpc", "check_call", "default_payload"]

Handler = Callable[[str, list[Any]], Any]


def default_payload(procedure: str, node: str, args: list[Any]) -> Any:
    """A plausible successful payload for ``procedure`` on ``node``."""
    if procedure == "version":
        return constants.PROTOCOL_VERSION
    if procedure == "node_info":
        return {"name": node, "bootid": f"boot-{node}", "memory_total": 4096,
                "memory_free": 3072, "memory_dom0": 512, "cpu_total": 4, "cpu_nodes": 1,
                "cpu_sockets": 1, "cpu_dom0": 0,
                "storage": [{"type": "file", "name": "x", "storage_size": 10240,
                             "storage_free": 8192}], "hv": []}
    if procedure == "hooks_runner":
        return []
    if procedure == "master_node_name":
        return ""
    return None


def check_call(procedure: str, args: Sequence[Any]) -> list[Any]:
    """``args`` as a list, once the row accepts them as the node would decode them.

    Raises :class:`errors.ProgrammerError` for an unknown procedure or
    arguments the row refuses (count or types, after a JSON round trip).
    """
    row = defs.CALLS.get(procedure)
    if row is None:
        raise errors.ProgrammerError(f"Unknown RPC procedure {procedure!r}")
    decoded = serializer.loads(serializer.dumps_bytes(list(args)))
    why = defs.check_args(row, decoded)
    if why is not None:
        raise errors.ProgrammerError(f"FakeRpc refused the call: {why}")
    return list(args)


class FakeRpc(RpcStubs):
    """Stands in for :class:`ganeti.rpc.client.RpcRunner` in LU tests."""

    def __init__(self, cfg: Any = None) -> None:
        self.cfg = cfg
        self.calls: list[tuple[str, list[str], list[Any]]] = []
        self.offline_skipped: list[tuple[str, str]] = []
        self._results: dict[tuple[str, str], tuple[bool, Any]] = {}
        self._handlers: dict[str, Handler] = {}
        self._extra_online: set[str] = set()
        self._lock = threading.Lock()
        self.timeouts = dict(defs.TIMEOUTS)
        #: ``--rpc-timeout-scale`` as RpcRunner keeps it (callers scale their own timeouts by it)
        self.timeout_scale = 1.0

    # -- builder -----------------------------------------------------------------
    def set_result(self, procedure: str, node: str, payload: Any) -> FakeRpc:
        """Answer ``procedure`` on ``node`` with ``payload``."""
        self._results[(procedure, node)] = (True, payload)
        return self

    def set_failure(self, procedure: str, node: str, msg: str) -> FakeRpc:
        """Make ``procedure`` fail on ``node`` with ``msg``."""
        self._results[(procedure, node)] = (False, msg)
        return self

    def set_handler(self, procedure: str, fn: Handler) -> FakeRpc:
        """Compute payloads with ``fn(node, args)``; raising RpcError makes it fail."""
        self._handlers[procedure] = fn
        return self

    def for_addresses(self, table: dict[str, str]) -> FakeRpc:
        """The runner used for nodes not (yet) reachable via the config (node add)."""
        self._extra_online.update(table)
        return self

    # -- inspection ----------------------------------------------------------------
    def calls_to(self, procedure: str) -> list[tuple[list[str], list[Any]]]:
        """``(node_names, args)`` of every recorded call of ``procedure``."""
        return [(nodes, args) for proc, nodes, args in self.calls if proc == procedure]

    def nodes_called(self, procedure: str) -> set[str]:
        """Every node name that got ``procedure``."""
        return {n for nodes, _ in self.calls_to(procedure) for n in nodes}

    # -- runner interface ------------------------------------------------------------
    def _offline(self, name: str) -> bool:
        if self.cfg is None or name in self._extra_online:
            return False
        node = self.cfg.get_node_info_by_name(name)
        return bool(node is not None and node.offline)

    def _rpc(self, procedure: str, node_or_nodes: Nodes, args: list[Any],
             rpc_timeout: float | None) -> RpcResults:
        return self.call(procedure, node_list(node_or_nodes), args, timeout=rpc_timeout)

    def per_node(self, nodes: Iterable[str], build: Callable[[RpcStubs, str], object]) -> RpcResults:
        """Like RpcRunner.per_node: one procedure, arguments per node."""
        procedure, node_args, timeout = collect_per_node(nodes, build)
        return self.call_map(procedure, node_args, timeout=timeout) if procedure else RpcResults()

    def call(self, procedure: str, node_names: Iterable[str], args: Sequence[Any] = (), *,
             timeout: float | None = None) -> RpcResults:
        """Like RpcRunner.call: ``{node_name: RpcResult}``, after checking ``args``."""
        args = check_call(procedure, args)
        names = list(dict.fromkeys(node_names))
        results: dict[str, RpcResult] = {}
        online = []
        for name in names:
            if self._offline(name):
                results[name] = RpcResult(name, None, OFFLINE_MSG, True, procedure)
                with self._lock:
                    self.offline_skipped.append((procedure, name))
            else:
                online.append(name)
        if online:
            with self._lock:
                self.calls.append((procedure, online, args))
        for name in online:
            results[name] = self._answer(procedure, name, args)
        return RpcResults(procedure, [(name, results[name]) for name in names])

    def call_map(self, procedure: str, node_args: Mapping[str, Sequence[Any]], *,
                 timeout: float | None = None) -> RpcResults:
        """Like RpcRunner.call_map: per-node arguments ``{node_name: args}``."""
        results = RpcResults(procedure)
        for name, args in node_args.items():
            results.update(self.call(procedure, [name], args, timeout=timeout))
        return results

    def _answer(self, procedure: str, name: str, args: list[Any]) -> RpcResult:
        fixed = self._results.get((procedure, name))
        if fixed is not None:
            ok, value = fixed
            return (RpcResult(name, value, None, False, procedure) if ok
                    else RpcResult(name, None, value, False, procedure))
        handler = self._handlers.get(procedure)
        if handler is not None:
            try:
                return RpcResult(name, handler(name, args), None, False, procedure)
            except errors.RpcError as exc:
                return RpcResult(name, None, str(exc), False, procedure)
        return RpcResult(name, default_payload(procedure, name, args), None, False, procedure)
