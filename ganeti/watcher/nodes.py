"""What the watcher does on every node: keep the node daemon up, run its hooks.

* :func:`ensure_noded`: the node daemon must run and answer ``version``
  over its HTTPS port; when it does not, a leftover (hung) process is
  stopped (SIGTERM, SIGKILL after a while) and a new one started.
* :func:`ensure_metad`: the instance metadata service must run on a node
  that has instances to serve (metadata entries); it is started when it
  is not running (doc/images.md, "The metadata service").
* :func:`run_hooks`: the executable files in ``etc/ganeti/hooks/watcher/``
  whose names are valid (letters, digits, ``_`` and ``-``) run one after
  the other in name order, each for at most :data:`HOOK_TIMEOUT` seconds;
  their exit status and output go to the watcher log.

See doc/watcher.md.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ganeti import constants, errors
from ganeti.pathutils import Paths
from ganeti.utils import process

__all__ = ["HOOK_TIMEOUT", "NODED_TIMEOUT", "HookResult", "valid_hook_name", "list_hooks",
           "run_hooks", "noded_answers", "ensure_noded", "ensure_metad"]

logger = logging.getLogger(__name__)

#: seconds one watcher hook may run before it is killed
HOOK_TIMEOUT = 60.0
#: seconds the node daemon has to answer ``version``
NODED_TIMEOUT = 10.0
_HOOK_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_MAX_LOGGED_OUTPUT = 4096


@dataclass(frozen=True)
class HookResult:
    """The outcome of one watcher hook."""

    name: str
    ok: bool
    detail: str
    output: str


def valid_hook_name(name: str) -> bool:
    """True for names of letters, digits, ``_`` and ``-`` (as run-parts)."""
    return bool(_HOOK_NAME.match(name))


def list_hooks(directory: str) -> list[str]:
    """The runnable hooks of ``directory`` (paths, in name order); others are logged."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    except OSError as exc:
        logger.warning("Cannot list the watcher hooks in %s: %s", directory, exc)
        return []
    found = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not valid_hook_name(name):
            logger.debug("Skipping watcher hook %s: invalid name", path)
        elif not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
            logger.debug("Skipping watcher hook %s: not an executable file", path)
        else:
            found.append(path)
    return found


def run_hooks(paths: Paths, *, timeout: float = HOOK_TIMEOUT) -> list[HookResult]:
    """Run the watcher hooks of this node; returns one result per hook run."""
    results = []
    for path in list_hooks(paths.watcher_hooks_dir):
        name = os.path.basename(path)
        try:
            res = process.run_command([path], timeout=timeout)
        except errors.CommandError as exc:
            results.append(HookResult(name, False, str(exc), ""))
            logger.warning("Watcher hook %s could not run: %s", name, exc)
            continue
        output = res.output.strip()[:_MAX_LOGGED_OUTPUT]
        result = HookResult(name, not res.failed, res.fail_reason or "ok", output)
        results.append(result)
        if result.ok:
            logger.info("Watcher hook %s succeeded%s", name,
                        f"; output:\n{output}" if output else "")
        else:
            logger.warning("Watcher hook %s failed (%s)%s", name, result.detail,
                           f"; output:\n{output}" if output else "")
    return results


def noded_answers(paths: Paths, address: str, port: int, *,
                  timeout: float = NODED_TIMEOUT) -> bool:
    """True when the node daemon at ``address:port`` answers ``version``."""
    from ganeti.rpc.client import probe_version
    from ganeti.rpc.transport import HttpsTransport
    try:
        probe_version(HttpsTransport(paths.server_pem), address, port, timeout)
    except errors.GanetiError as exc:
        logger.debug("Node daemon at %s:%s does not answer: %s", address, port, exc)
        return False
    return True


def ensure_noded(paths: Paths, address: str, port: int, *,
                 answers: Callable[[], bool] | None = None) -> str | None:
    """Make sure this node's daemon runs and answers; returns what was done (or None).

    Raises :class:`errors.OpExecError` when it cannot be started.
    """
    from ganeti import daemonctl   # only needed when something is wrong
    check = answers or (lambda: noded_answers(paths, address, port))
    pid = daemonctl.daemon_pid(paths, constants.NODED)
    if pid is not None and check():
        return None
    if pid is not None:
        logger.warning("The node daemon (pid %s) does not answer; stopping it", pid)
        daemonctl.stop_daemon(paths, constants.NODED, timeout=10.0)
        what = f"restarted the hung node daemon (old pid {pid})"
    else:
        logger.warning("The node daemon is not running; starting it")
        what = "started the node daemon"
    daemonctl.start_noded(paths, address, port, env=os.environ)
    logger.info("The node daemon is back (pid %s)", daemonctl.daemon_pid(paths, constants.NODED))
    return what


def ensure_metad(paths: Paths, env: Mapping[str, str], *,
                 start: Callable[[], None] | None = None) -> str | None:
    """Start ``ganeti-metad`` when this node has instances for it and it is not running.

    Returns what was done, or None.  A start that fails is a warning
    (returned too): the node's other work goes on, and the next pass tries
    again.  ``start`` replaces the real start (tests).
    """
    from ganeti import daemonctl
    if daemonctl.daemon_pid(paths, constants.METAD) is not None:
        return None
    try:
        entries = [n for n in os.listdir(paths.metadata_dir) if n.endswith(".json")]
    except FileNotFoundError:
        entries = []
    if not entries:
        return None
    logger.warning("The metadata daemon is not running (%d instances to serve); starting it",
                   len(entries))
    try:
        if start is not None:
            start()
        else:
            daemonctl.start_metad(paths, env=env)
    except errors.GanetiError as exc:
        logger.warning("Cannot start the metadata daemon: %s", exc)
        return f"could not start the metadata daemon: {exc}"
    return "started the metadata daemon"
