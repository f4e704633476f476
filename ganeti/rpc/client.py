"""Master side of node RPC: parallel fan-out with per-node results.

::

    runner = RpcRunner(ConfigResolver(cfg), HttpsTransport(paths.server_pem))
    results = runner.call_version(["node1", "node2"])
    version = runner.call_version("node1").one("node1", "Cannot get the version")
    for name, res in results.items():
        res.raise_on_failure(f"Cannot get the version of {name}")
        print(res.payload)

* The **resolver** maps node names to ``(name, address, port, offline)``.
  :class:`ConfigResolver` reads a ConfigWriter-like object,
  :class:`StaticResolver` takes a dict (tests, cluster init, node add).
* The **transport** is one method, ``post(address, port, procedure, body,
  timeout) -> bytes`` (see :mod:`ganeti.rpc.transport`).
* Offline nodes are skipped without network traffic.  The other nodes are
  called in parallel by at most :data:`MAX_PARALLEL` threads (a 200-node
  fan-out does not start 200 threads and TLS handshakes at once); the call
  returns when all answered or the timeout passed once per "wave" of
  ``MAX_PARALLEL`` nodes, whichever is first: a dead or hung node costs at
  most the timeout and never hides the other nodes' results.
* The typed ``call_<procedure>(node_or_nodes, *, arg=..., rpc_timeout=None)``
  methods come from :class:`ganeti.rpc.stubs.RpcStubs`, generated from
  :data:`ganeti.rpc.defs.CALLS`, i.e. from the backend's ``@procedure``
  functions (``python -m ganeti.rpc.gen``); they return
  :class:`~ganeti.rpc.results.RpcResults` (``.one(node, what)``).
  :meth:`RpcRunner.call` and :meth:`RpcRunner.call_map` are the untyped
  layer below them, used only inside ``ganeti/rpc/`` and by wire tests.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from ganeti import constants, errors, serializer
from ganeti.rpc import defs
from ganeti.rpc.results import RpcResult, RpcResults
from ganeti.rpc.stubs import Nodes, RpcStubs

__all__ = ["RpcResult", "RpcResults", "RpcRunner", "node_list", "collect_per_node", "probe_version",
           "Resolver",
           "StaticResolver", "ConfigResolver", "NodeSource",
           "default_noded_port", "encode_args", "decode_response", "OFFLINE_MSG", "MAX_PARALLEL",
           "CallObserver"]

logger = logging.getLogger(__name__)

OFFLINE_MSG = "Node is marked offline"
NodeAddress = tuple[str, str, int, bool]
Resolver = Callable[[Sequence[str]], list[NodeAddress]]
#: ``observer(procedure, node_name, seconds, succeeded)``, told of each call to one node
CallObserver = Callable[[str, str, float, bool], None]

#: Most calls of one fan-out in flight at once.
MAX_PARALLEL = 32


def default_noded_port(environ: dict[str, str] | None = None) -> int:
    """``$GANETI_NODED_PORT`` or :data:`constants.DEFAULT_NODED_PORT`."""
    env = os.environ if environ is None else environ
    value = env.get(constants.ENV_NODED_PORT)
    if value:
        try:
            return int(value)
        except ValueError:
            raise errors.ProgrammerError(f"Invalid {constants.ENV_NODED_PORT}={value!r}") from None
    return constants.DEFAULT_NODED_PORT


class StaticResolver:
    """Resolve from a fixed table ``{name: (address, port, offline)}``.

    ``address`` alone (a str) is also accepted; the port then defaults to
    ``default_port``.  Unknown names resolve to themselves (as host names).
    """

    def __init__(self, table: dict[str, Any] | None = None, *,
                 default_port: int | None = None) -> None:
        self.default_port = default_port if default_port is not None else default_noded_port()
        self.table: dict[str, NodeAddress] = {}
        for name, value in (table or {}).items():
            if isinstance(value, str):
                value = (value, self.default_port, False)
            address, port, offline = (tuple(value) + (self.default_port, False))[:3]
            self.table[name] = (name, address, int(port), bool(offline))

    def __call__(self, names: Sequence[str]) -> list[NodeAddress]:
        return [self.table.get(name, (name, name, self.default_port, False)) for name in names]


class NodeSource(Protocol):
    """What :class:`ConfigResolver` reads: the ConfigWriter's node table."""

    def get_all_nodes_info(self) -> Mapping[str, Any]:
        """``{uuid: Node}`` (``name``, ``primary_ip``, ``offline``)."""
        ...


class ConfigResolver:
    """Resolve node names (or UUIDs) through a ConfigWriter-like object.

    Uses ``cfg.get_all_nodes_info()`` (``{uuid: Node}`` with ``name``,
    ``primary_ip`` and ``offline``).  Names not in the configuration
    resolve to themselves (needed while adding a node).
    """

    def __init__(self, cfg: NodeSource, *, port: int | None = None) -> None:
        self.cfg = cfg
        self.port = port if port is not None else default_noded_port()

    def __call__(self, names: Sequence[str]) -> list[NodeAddress]:
        by_key: dict[str, Any] = {}
        for uuid, node in self.cfg.get_all_nodes_info().items():
            by_key[node.name] = node
            by_key[uuid] = node
        out = []
        for name in names:
            node = by_key.get(name)
            if node is None:
                out.append((name, name, self.port, False))
            else:
                out.append((name, node.primary_ip, self.port, bool(node.offline)))
        return out


def encode_args(call: defs.RpcCall, args: Sequence[Any]) -> bytes:
    """The JSON request body for ``args`` (dataclasses become plain data)."""
    if len(args) != len(call.args):
        raise errors.ProgrammerError(
            f"{call.name} takes {len(call.args)} argument(s) ({', '.join(call.arg_names)}),"
            f" got {len(args)}")
    return serializer.dumps_bytes(list(args))


def decode_response(body: bytes) -> tuple[bool, Any]:
    """Decode a ``[success, payload]`` reply; raises :class:`errors.RpcTransportError`."""
    try:
        data = serializer.loads(body)
    except errors.SerializationError as exc:
        raise errors.RpcTransportError(f"invalid reply: {exc}") from exc
    if (not isinstance(data, list) or len(data) != 2 or not isinstance(data[0], bool)):
        raise errors.RpcTransportError(f"invalid reply (not [success, payload]): {str(data)[:200]}")
    return data[0], data[1]


def probe_version(transport: Any, address: str, port: int, timeout: float) -> Any:
    """The ``version`` answer of the node daemon at ``address:port``, asked once.

    For liveness probes before a node is in any configuration (bootstrap,
    the watcher).  Raises :class:`errors.RpcError` when the daemon does not
    answer within ``timeout`` seconds or refuses.
    """
    runner = RpcRunner(StaticResolver({address: (address, port, False)}, default_port=port),
                       transport, timeouts={defs.CALLS["version"].timeout: timeout})
    result = runner.call_version(address)[address]
    if result.fail_msg is not None:
        raise errors.RpcError(result.fail_msg)
    return result.payload


def node_list(node_or_nodes: Nodes) -> list[str]:
    """The node names a stub was given: one name, or the names of an iterable, once each."""
    if isinstance(node_or_nodes, str):
        return [node_or_nodes]
    return list(dict.fromkeys(node_or_nodes))


class _Recorder(RpcStubs):
    """Stubs that only record what they were asked (for :func:`collect_per_node`)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[str], list[Any], float | None]] = []

    def _rpc(self, procedure: str, node_or_nodes: Nodes, args: list[Any],
             rpc_timeout: float | None) -> RpcResults:
        self.seen.append((procedure, node_list(node_or_nodes), args, rpc_timeout))
        return RpcResults(procedure)


def collect_per_node(nodes: Iterable[str], build: Callable[[RpcStubs, str], object]
                     ) -> tuple[str, dict[str, list[Any]], float | None]:
    """``(procedure, {node: args}, rpc_timeout)`` of ``build(stubs, node)`` for each node.

    ``build`` must call exactly one stub, for that node, and the same
    procedure for every node; anything else is a :class:`errors.ProgrammerError`.
    """
    recorder = _Recorder()
    node_args: dict[str, list[Any]] = {}
    for node in dict.fromkeys(nodes):
        before = len(recorder.seen)
        build(recorder, node)
        calls = recorder.seen[before:]
        if len(calls) != 1 or calls[0][1] != [node] or calls[0][0] != recorder.seen[0][0]:
            raise errors.ProgrammerError(
                f"per_node: the builder must call one procedure (always the same) for node {node},"
                f" got {[(c[0], c[1]) for c in calls]}")
        node_args[node] = calls[0][2]
    if not recorder.seen:
        return "", {}, None
    return recorder.seen[0][0], node_args, recorder.seen[0][3]


class RpcRunner(RpcStubs):
    """Calls node procedures on many nodes in parallel.

    ``timeouts`` overrides the seconds of timeout classes (see
    ``rpc.defs.TIMEOUTS``), e.g. ``{"urgent": 0.5}`` in tests.
    ``timeout_scale`` (``--rpc-timeout-scale``) multiplies the classes not
    overridden, and is kept for the callers' own timeouts
    (:func:`rpc.defs.scaled_timeout`).  Thread-safe: one runner serves all
    jobs of the master.

    ``fence`` (the master's runner) returns ``(epoch, master name)``, sent
    with every call (doc/protocols/rpc.md, "Master epoch"); ``on_fenced(node,
    message)`` is called when a node refuses a call for an older epoch.
    """

    def __init__(self, resolver: Resolver, transport: Any = None, *,
                 timeouts: dict[str, float] | None = None,
                 timeout_scale: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 observer: CallObserver | None = None,
                 fence: Callable[[], tuple[int, str]] | None = None,
                 on_fenced: Callable[[str, str], None] | None = None) -> None:
        if transport is None:
            from ganeti import pathutils
            from ganeti.rpc.transport import HttpsTransport
            transport = HttpsTransport(pathutils.get_paths().server_pem)
        self.resolver = resolver
        self.transport = transport
        self.timeouts = {**defs.TIMEOUTS, **(defs.scaled_timeouts(timeout_scale) or {}),
                         **(timeouts or {})}
        #: ``--rpc-timeout-scale``: the callers' own timeouts scale with it too
        self.timeout_scale = timeout_scale
        self.clock = clock
        #: told of every call to one node: (procedure, node, seconds, succeeded)
        self.observer = observer
        self.fence = fence
        self.on_fenced = on_fenced

    def _rpc(self, procedure: str, node_or_nodes: Nodes, args: list[Any],
             rpc_timeout: float | None) -> RpcResults:
        """What every typed stub runs: :meth:`call` with the row-ordered ``args``."""
        return self.call(procedure, node_list(node_or_nodes), args, timeout=rpc_timeout)

    def per_node(self, nodes: Iterable[str], build: Callable[[RpcStubs, str], object]) -> RpcResults:
        """One procedure with different arguments per node, as one fan-out.

        ``build(stubs, node)`` calls one typed stub for ``node``::

            rpc.per_node(names, lambda r, n: r.call_blockdev_getstatus(n, disks=disks[n]))
        """
        procedure, node_args, timeout = collect_per_node(nodes, build)
        if not procedure:
            return RpcResults()
        return self.call_map(procedure, node_args, timeout=timeout)

    def timeout_for(self, procedure: str) -> float:
        """Seconds a call of ``procedure`` may take."""
        return self.timeouts[defs.CALLS[procedure].timeout]

    def call(self, procedure: str, node_names: Iterable[str], args: Sequence[Any] = (), *,
             timeout: float | None = None) -> RpcResults:
        """Run ``procedure(*args)`` on every node; ``{node_name: RpcResult}``.

        Untyped: code outside ``ganeti/rpc/`` calls the typed stubs instead
        (``test/rpc/test_rpc_stubs.py`` checks).
        """
        names = list(dict.fromkeys(node_names))
        return self.call_map(procedure, {name: args for name in names}, timeout=timeout)

    def call_map(self, procedure: str, node_args: Mapping[str, Sequence[Any]], *,
                 timeout: float | None = None) -> RpcResults:
        """Like :meth:`call` with per-node arguments ``{node_name: args}`` (see :meth:`per_node`)."""
        call = defs.CALLS.get(procedure)
        if call is None:
            raise errors.ProgrammerError(f"Unknown RPC procedure {procedure!r}")
        tmo = self.timeout_for(procedure) if timeout is None else timeout
        bodies: dict[int, bytes] = {}
        encoded: dict[str, bytes] = {}
        for name, args in node_args.items():
            key = id(args)
            if key not in bodies:
                bodies[key] = encode_args(call, args)
            encoded[name] = bodies[key]
        results: dict[str, RpcResult] = {}
        todo: list[NodeAddress] = []
        for entry in self.resolver(list(node_args)):
            name, _, _, offline = entry
            if offline and procedure not in defs.OFFLINE_CALLS:
                results[name] = RpcResult(name, None, OFFLINE_MSG, True, procedure)
            else:
                todo.append(entry)
        if len(todo) == 1:
            entry = todo[0]
            results[entry[0]] = self._one(procedure, entry, encoded[entry[0]], tmo)
        elif todo:
            results.update(self._fan_out(procedure, todo, encoded, tmo))
        return RpcResults(procedure, [(name, results[name]) for name in node_args])

    def _one(self, procedure: str, entry: NodeAddress, body: bytes, tmo: float) -> RpcResult:
        if self.observer is None:
            return self._call_one(procedure, entry, body, tmo)
        started = self.clock()
        result = self._call_one(procedure, entry, body, tmo)
        try:
            self.observer(procedure, entry[0], self.clock() - started, result.fail_msg is None)
        except Exception:  # a figure must never fail a call
            logger.exception("RPC observer failed")
        return result

    def _call_one(self, procedure: str, entry: NodeAddress, body: bytes,
                  tmo: float) -> RpcResult:
        name, address, port, _ = entry
        target = procedure + (defs.epoch_query(*self.fence()) if self.fence else "")
        try:
            raw = self.transport.post(address, port, target, body, tmo)
            success, payload = decode_response(raw)
        except errors.RpcTransportError as exc:
            return RpcResult(name, None, f"Error contacting node {name} ({address}:{port}): {exc}",
                             False, procedure)
        except errors.RpcError as exc:
            return RpcResult(name, None, f"Node {name}: {exc}", False, procedure)
        except Exception as exc:  # a broken transport must not kill the fan-out
            logger.exception("RPC %s to %s failed unexpectedly", procedure, name)
            return RpcResult(name, None, f"Error contacting node {name}: {exc}", False, procedure)
        if not success:
            msg = payload if isinstance(payload, str) else serializer.dumps(payload)
            if self.on_fenced is not None and msg.startswith(defs.FENCED_PREFIX):
                try:
                    self.on_fenced(name, msg)
                except Exception:  # never break the fan-out
                    logger.exception("Fencing callback failed")
            return RpcResult(name, None, msg or "Unknown remote failure", False, procedure)
        return RpcResult(name, payload, None, False, procedure)

    def _fan_out(self, procedure: str, todo: list[NodeAddress], encoded: dict[str, bytes],
                 tmo: float) -> dict[str, RpcResult]:
        results: dict[str, RpcResult] = {}
        lock = threading.Lock()
        done = threading.Condition(lock)
        pending = iter(todo)
        over: list[bool] = []           # set once the call returned: take no more nodes

        def worker() -> None:
            while True:
                with lock:
                    entry = None if over else next(pending, None)
                if entry is None:
                    return
                res = self._one(procedure, entry, encoded[entry[0]], tmo)
                with done:
                    results.setdefault(entry[0], res)
                    done.notify_all()

        threads = min(len(todo), MAX_PARALLEL)
        for idx in range(threads):
            threading.Thread(target=worker, daemon=True,
                             name=f"rpc-{procedure}-{idx}").start()
        waves = -(-len(todo) // threads)
        # grace for the workers' own (socket) timeout to fire first
        deadline = self.clock() + waves * tmo + min(1.0, tmo * 0.1)
        with done:
            while len(results) < len(todo):
                remaining = deadline - self.clock()
                if remaining <= 0:
                    break
                done.wait(remaining)
            over.append(True)
            for name, address, port, _ in todo:
                if name not in results:
                    results[name] = RpcResult(
                        name, None,
                        f"Error contacting node {name} ({address}:{port}): timed out after {tmo:g}s",
                        False, procedure)
        return results
