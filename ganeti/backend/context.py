"""What a backend function knows about the node it runs on.

Every backend function takes a :class:`NodeContext` as its first argument
(named ``ctx``, not part of the RPC row).  The node daemon builds one per
request; tests build one over a temporary root.  Nothing in ``backend``
reads global state or environment variables: all of it comes through here.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from ganeti import constants, errors
from ganeti.pathutils import Paths
from ganeti.rpc import defs
from ganeti.storage.runner import CommandRunner, system_runner

__all__ = ["NodeContext", "HOOKS_SCRIPT_TIMEOUT"]

HOOKS_SCRIPT_TIMEOUT = 600.0


@dataclass
class NodeContext:
    """The node a backend call runs on.

    ``after_response`` collects callbacks the server runs once the answer
    has been sent; ``node_leave_cluster`` queues ``stop_daemon`` there (the
    server sets it to "terminate the node daemon"), ``node_powercycle``
    queues ``restart_daemon`` ("start the node daemon again, same options").
    ``storage_runner`` runs the storage commands (LVM: doc/storage.md);
    tests put a recording runner there.
    """

    paths: Paths
    hostname: str
    noded_port: int = constants.DEFAULT_NODED_PORT
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    hooks_timeout: float = HOOKS_SCRIPT_TIMEOUT
    after_response: list[Callable[[], None]] = field(default_factory=list)
    stop_daemon: Callable[[], None] = lambda: None
    restart_daemon: Callable[[], None] = lambda: None
    storage_runner: CommandRunner = system_runner

    def local_path(self, canonical: str) -> str:
        """This node's path for a canonical (root ``/``) path."""
        return defs.from_canonical(self.paths.root, canonical)

    def canonical(self, path: str) -> str:
        """The canonical form of a path of this node."""
        return defs.to_canonical(self.paths.root, path)

    def inside(self, directory: str, path: str, what: str) -> str:
        """``path`` resolved, refusing anything outside ``directory``.

        Symbolic links are resolved first, so a link cannot lead out.
        Raises :class:`errors.OpExecError`.
        """
        base = os.path.realpath(directory)
        real = os.path.realpath(path)
        if real == base or not real.startswith(base.rstrip(os.sep) + os.sep):
            raise errors.OpExecError(f"Refusing {what} {path!r}: not inside {directory}")
        return real
