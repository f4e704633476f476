"""``gnt-cluster epo``: emergency power-off of nodes, groups or the whole cluster, and back on.

As Ganeti's (doc/oob.md, "Emergency power-off"): off stops every instance
of the selected nodes (``OP_INSTANCE_SHUTDOWN`` with ``no_remember``, one
job each, so they stay marked up) and then powers the nodes off through
their out-of-band program (``OP_OOB_COMMAND power-off``); ``--on`` powers
them on, waits until each node's daemon port accepts connections again
and starts every instance whose nodes are all back.  Unlike Ganeti's, the
nodes are marked offline in the power-off job (and online again by
``--on`` once they answer): a powered-off master candidate left online
would count against the majority of candidates every new job must be
stored on (doc/design/failover.md).  :func:`plan` (which nodes and instances) is pure;
the rest is the shell that queries, submits and waits.
"""

from __future__ import annotations

import os
import time

from ganeti import cli, constants, errors
from ganeti.client import node_oob
from ganeti.opcodes import wire

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["epo", "plan", "EpoPlan", "NODE_FIELDS", "EPO_ROWS", "PING_INTERVAL",
           "PING_TIMEOUT", "REACHABLE_TIMEOUT"]

#: seconds between two rounds of probes of the nodes coming back; one probe's timeout;
#: how long ``--on`` waits for all of them (Ganeti's: 30 s, 1 s, 15 min; ours probes
#: more often, a probe is one TCP connection)
PING_INTERVAL = 2.0
PING_TIMEOUT = 1.0
REACHABLE_TIMEOUT = 15 * 60.0
#: the node fields :func:`plan` reads, in its order
NODE_FIELDS = ["name", "master", "pinst_list", "sinst_list", "powered", "offline", "pip"]


class EpoPlan:
    """What an EPO does: ``nodes`` to power, ``instances`` -> the nodes each needs
    back before it starts (``--on``), ``messages`` for the operator, or ``error``."""

    def __init__(self) -> None:
        self.nodes: list[str] = []
        self.instances: dict[str, set[str]] = {}
        self.messages: list[str] = []
        self.error: str | None = None
        self.all_nodes: list[str] = []
        #: the nodes of ``nodes`` marked offline now
        self.offline: list[str] = []


def plan(rows: list[list[Any]], *, on: bool, show_all: bool,
         force_master: bool = False) -> EpoPlan:
    """The EPO of the nodes ``rows`` (values of :data:`NODE_FIELDS`; ``powered`` None:
    no out-of-band program).

    As Ganeti's: instances of online nodes are listed (an instance on the
    master needs no node back); the master is skipped for ``on``, and is an
    error for ``off`` unless ``show_all``; a node without out-of-band
    program, or already in the wanted state, is reported and skipped.
    Ours: with ``show_all`` the master is left powered on unless
    ``force_master``; ``on`` also powers on offline nodes recorded
    unpowered (an EPO leaves its nodes so) and lists their instances.
    """
    result = EpoPlan()
    for name, master, pinsts, sinsts, powered, offline, _pip in rows:
        result.all_nodes.append(name)
        if not offline or (on and powered is False):
            for inst in list(pinsts or []) + list(sinsts or []):
                needed = result.instances.setdefault(inst, set())
                if not master:
                    needed.add(name)
        if master and on:
            continue
        if master and not show_all:
            result.error = (f"{name} is the master node, please do a master-failover to another"
                            " node not affected by the EPO or use --all if you intend to"
                            " shutdown the whole cluster")
            return result
        if master and not force_master and powered is not None:
            result.messages.append(f"Node {name} is the master node, it stays powered on"
                                   " (use --force-master to power it off too)")
        elif powered is None:
            result.messages.append(f"Node {name} does not support out-of-band handling, it can"
                                   " not be handled in a fully automated manner")
        elif powered == on:
            result.messages.append(f"Node {name} is already in desired power state, skipping")
        else:
            result.nodes.append(name)
            if offline:
                result.offline.append(name)
    return result


def _query_nodes(cl: Any, opts: Any, args: list[str]) -> list[list[Any]]:
    if opts.groups:
        qfilter = cli.build_query_filter(args, False) if args else None
        groups = cl.Query(constants.QR_GROUP, ["name", "node_list"], qfilter).get("data", [])
        if args and len(groups) < len(set(args)):
            found = {row[0][1] for row in groups}
            raise errors.OpPrereqError(f"Group(s) not found: "
                                       f"{', '.join(a for a in args if a not in found)}",
                                       errors.ECODE_NOENT)
        names = sorted({node for row in groups for node in (row[1][1] or [])})
        if not names:
            return []
    else:
        names = list(args)
    qfilter = cli.build_query_filter(names, False) if names else None
    rows = cl.Query(constants.QR_NODE, NODE_FIELDS, qfilter).get("data", [])
    if names and len(rows) < len(set(names)):
        found = {row[0][1] for row in rows}
        raise errors.OpPrereqError(f"Node(s) not found: "
                                   f"{', '.join(n for n in names if n not in found)}",
                                   errors.ECODE_NOENT)
    return [[value if status == constants.RS_NORMAL else None for status, value in row]
            for row in rows]


def _run_jobs(opts: Any, cl: Any, ops: list[dict[str, Any]], what: str) -> bool:
    """One job per instance opcode, all followed; whether every one succeeded."""
    for op in ops:
        cli.to_stdout(f"Submit {what} of instance {op['instance_name']}")
    data = [[op] for op in ops]
    for job in data:
        cli.set_generic_opcode_opts(job, opts, command=getattr(opts, "command", None))
    failed = 0
    for (ok, value), op in zip(cl.SubmitManyJobs(data), ops):
        if not ok:
            cli.to_stderr(f"Submitting the {what} of {op['instance_name']} failed: {value}")
            failed += 1
            continue
        try:
            cli.poll_job(value, cl, feedback_fn=None)
        except errors.GanetiError as exc:
            cli.to_stderr(f"{op['instance_name']}: {cli.format_job_error(exc)}")
            failed += 1
    return not failed


def _instances(opts: Any, cl: Any, names: list[str], start: bool) -> bool:
    if not names:
        return True
    if start:
        ops = [wire.instance_startup(instance_name=n) for n in names]
        texts = ("startup", "started", "starting")
    else:
        ops = [wire.instance_shutdown(instance_name=n, timeout=opts.shutdown_timeout,
                                      no_remember=True) for n in names]
        texts = ("shutdown", "stopped", "stopping")
    if _run_jobs(opts, cl, ops, texts[0]):
        cli.to_stdout(f"All instances have been {texts[1]} successfully")
        return True
    cli.to_stderr(f"There were errors while {texts[2]} instances")
    return False


def _power(opts: Any, cl: Any, nodes: list[str], on: bool, *,
           mark_offline: list[str] | None = None) -> bool:
    """Power ``nodes`` on or off through OP_OOB_COMMAND, first marking ``mark_offline``
    offline in the same job; whether all of them did."""
    ops = [wire.node_set_params(node_name=node, offline=True, auto_promote=True)
           for node in mark_offline or []]
    ops.append(wire.oob_command(constants.OOB_POWER_ON if on else constants.OOB_POWER_OFF,
                                node_names=nodes, ignore_status=True,
                                timeout=opts.oob_timeout, power_delay=opts.power_delay,
                                force_master=opts.force_master or wire.NOT_SENT))
    result = cli.submit_opcodes_and_wait(ops, opts, cl)[-1]
    ok = True
    for (_, name), (status, _data) in result:
        if status != constants.RS_NORMAL:
            cli.to_stderr(f"There was a problem changing power for {name}, please investigate")
            ok = False
    return ok


def _online(opts: Any, cl: Any, node: str) -> bool:
    """Mark a node that answers again online; whether that worked."""
    try:
        cli.submit_opcode_and_wait(wire.node_set_params(node_name=node, offline=False),
                                   opts, cl, feedback_fn=None)
    except errors.GanetiError as exc:
        cli.to_stderr(f"Node {node} could not be marked online: {cli.format_job_error(exc)}")
        return False
    return True


def _wait_and_start(opts: Any, cl: Any, addresses: dict[str, str],
                    instances: dict[str, set[str]], offline: list[str], *,
                    probe: Callable[[str], bool], clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> bool:
    """Start each instance once its nodes answer (the ``offline`` ones marked online
    first); False when some never did."""
    down, up = set(addresses), set[str]()
    pending = dict(instances)
    ok = True
    deadline = clock() + REACHABLE_TIMEOUT
    while True:
        ready = sorted(inst for inst, needed in pending.items() if needed <= up)
        for inst in ready:
            del pending[inst]
        if ready and not _instances(opts, cl, ready, True):
            ok = False
        if not down:
            return ok
        if clock() >= deadline:
            cli.to_stderr("Time exceeded while waiting for nodes to become reachable again:\n"
                          + "\n".join(f"  - {n}" for n in sorted(down)))
            return False
        for node in sorted(down):
            if probe(addresses[node]):
                cli.to_stdout(f"Node {node} became available")
                down.discard(node)
                if node not in offline or _online(opts, cl, node):
                    up.add(node)
                else:
                    ok = False
        if down:
            sleep(PING_INTERVAL)


def _is_master(rows: list[list[Any]], name: str) -> bool:
    return any(row[0] == name and row[1] for row in rows)


def epo(opts: Any, args: list[str]) -> int:
    """``epo [--on] [--groups|--all] [-f] [--force-master] [ARGS...]``."""
    if opts.groups and opts.show_all:
        cli.to_stderr("Only one of --groups or --all are allowed")
        return cli.EXIT_FAILURE
    if args and opts.show_all:
        cli.to_stderr("Arguments in combination with --all are not allowed")
        return cli.EXIT_FAILURE
    cl = cli.get_client(opts)
    rows = _query_nodes(cl, opts, args)
    todo = plan(rows, on=opts.on, show_all=opts.show_all, force_master=opts.force_master)
    if todo.error:
        cli.to_stderr(todo.error)
        return cli.EXIT_FAILURE
    for message in todo.messages:
        cli.to_stdout(message)
    if not cli.confirm(f"The epo will operate on {len(todo.all_nodes)} node(s):"
                       f" {', '.join(todo.all_nodes)}.", forced=opts.force):
        return cli.EXIT_FAILURE
    if not opts.on:
        if not _instances(opts, cl, sorted(todo.instances), False):
            cli.to_stderr("Please investigate and stop instances manually before continuing")
            return cli.EXIT_FAILURE
        mark = [n for n in todo.nodes if n not in todo.offline and not (
            opts.force_master and _is_master(rows, n))]
        if todo.nodes and not _power(opts, cl, todo.nodes, False, mark_offline=mark):
            return cli.EXIT_FAILURE
        return cli.EXIT_SUCCESS
    if todo.nodes and not _power(opts, cl, todo.nodes, True):
        cli.to_stderr("Not all nodes seem to get back up, investigate and start manually if"
                      " needed")
    port = int(os.environ.get(constants.ENV_NODED_PORT) or constants.DEFAULT_NODED_PORT)
    addresses = {row[0]: row[6] for row in rows}
    cli.to_stdout("Waiting until all nodes are available again")

    def probe(address: str) -> bool:
        from ganeti.utils import net
        return net.connect_error(address, port, PING_TIMEOUT) is None

    if not _wait_and_start(opts, cl, addresses, todo.instances, todo.offline, probe=probe):
        cli.to_stderr("Please investigate and start stopped instances manually")
        return cli.EXIT_FAILURE
    return cli.EXIT_SUCCESS


def _options() -> list[cli.Option]:
    O = cli.Option  # noqa: N806
    return [
        cli.FORCE_OPT,
        O("--on", dest="on", action="store_true", default=False,
          help="Power the nodes on again and start their instances"),
        O("--groups", dest="groups", action="store_true", default=False,
          help="The arguments are node groups, not nodes"),
        O("--all", dest="show_all", action="store_true", default=False,
          help="Operate on the whole cluster"),
        O("--force-master", dest="force_master", action="store_true", default=False,
          help="With --all, power the master node off too (last)"),
        node_oob.OOB_TIMEOUT_OPT,
        O("--shutdown-timeout", dest="shutdown_timeout", type=int,
          default=constants.DEFAULT_SHUTDOWN_TIMEOUT, metavar="SECONDS",
          help="Maximum time (in seconds) to wait for instance shutdown"),
        node_oob.POWER_DELAY_OPT,
    ]


EPO_ROWS: dict[str, cli.Command] = {
    "epo": (epo, [cli.ArgUnknown()], _options(),
            "[--on] [--groups|--all] [--force] [--force-master] [--shutdown-timeout S]"
            " [ARGS...]",
            "Performs an emergency power-off (or, with --on, power-on) of the given nodes,"
            " groups (--groups) or the whole cluster (--all)"),
}
