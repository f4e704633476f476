"""A virtual cluster: N nodes of real daemons on one machine, no root needed.

``tools/vcluster create DIR --nodes N`` lays out (see doc/vcluster.md)::

    DIR/vcluster.json     the cluster's data: nodes, ports, master, cluster name
    DIR/hosts             name resolution (``IP NAME``), used via $GANETI_HOSTS_FILE
    DIR/node1 .. nodeN    one root per node ($GANETI_ROOTDIR)
    DIR/nodeK/env         the node's environment (KEY=VALUE lines)

Node ``k`` is named ``node<k>.vcluster`` with the address ``<base-ip>.<k>``
(default 127.0.1.k); the cluster is ``cluster.vcluster`` (resolving to the
master's address).  Every node runs a node daemon on the cluster's noded
port (one free port picked per cluster, the same on every address) and,
unless ``--no-ssh``, a paramiko SSH server (:mod:`tools.harness.sshserver`)
on the cluster's SSH port; the cluster's ``ndparams`` ``ssh_port`` is set to
it.  The SSH servers run commands with the node's environment, so a remote
``gnt-*`` or ``python3 -m ganeti.bootstrap`` acts on that node's root.

Bootstrapping: the cluster SSH key is generated into node1 before
``gnt-cluster init`` (which keeps an existing key) and authorised on every
node, standing in for the root password a real ``gnt-node add`` would need.
Then ``gnt-cluster init`` runs with node1's environment and ``gnt-node add``
for the other nodes.  Without SSH (``--no-ssh``, used by benchmarks) the
nodes are prepared locally and added with ``gnt-node add --no-node-setup``
semantics (in-process, one LUXI connection).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from ganeti import bootstrap, constants, daemonctl, errors, serializer, ssh
from ganeti.pathutils import Paths
from tools.harness import guestcli as guest_cli
from tools.harness import procscan, tinylinux
from ganeti.opcodes import wire

__all__ = ["VNode", "VCluster", "REPO_ROOT", "create", "load", "node_env", "env_lines",
           "start", "stop", "destroy", "current_master", "isolate", "heal",
           "partition_support", "nft_ruleset", "run_gnt", "pick_free_port", "new_boot_id",
           "run_watcher", "main", "VCLUSTER_MIN_DISK_SIZE"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_FILE = "vcluster.json"
HOSTS_FILE = "hosts"
SSHD_NAME = "vcluster-sshd"
CLUSTER_NAME = "cluster.vcluster"
#: The smallest instance disk (MiB) the virtual cluster's policy allows; Ganeti's
#: default is 1024, too big for test disks on tmpfs.
VCLUSTER_MIN_DISK_SIZE = 1
_TINYOS = os.path.join(REPO_ROOT, "tools", "os", "tinyos")
_TINYLINUX = os.path.join(REPO_ROOT, "tools", "os", "tinylinux")
#: the acceleration of kvm virtual clusters: nested KVM (a test machine that is
#: itself a virtual machine) cannot boot the tinylinux guest, TCG boots it in ~3 s
DEFAULT_KVM_ACCEL = "tcg"

Log = Callable[[str], None]


@dataclass
class VNode:
    """One virtual node."""

    name: str
    ip: str
    root: str


@dataclass
class VCluster:
    """A virtual cluster as recorded in ``DIR/vcluster.json``."""

    directory: str
    cluster_name: str
    noded_port: int
    ssh_port: int | None
    master: str
    hypervisor: str = constants.HT_FAKE
    masterd_args: list[str] = field(default_factory=list)
    nodes: list[VNode] = field(default_factory=list)
    rapi_port: int | None = None
    #: nodes cut off from the others (``isolate``/``heal``)
    isolated: list[str] = field(default_factory=list)
    #: $GANETI_KVM_ACCEL of the node daemons when the hypervisor is kvm
    kvm_accel: str = DEFAULT_KVM_ACCEL

    def node(self, name: str) -> VNode:
        """The node called ``name`` (also accepts ``node3`` for ``node3.vcluster``)."""
        for node in self.nodes:
            if name in (node.name, node.name.split(".")[0]):
                return node
        raise errors.ParameterError(f"No node '{name}' in the virtual cluster"
                                    f" {self.directory}", errors.ECODE_NOENT)

    def paths(self, node: VNode | str) -> Paths:
        """The :class:`Paths` of a node."""
        vnode = self.node(node) if isinstance(node, str) else node
        return Paths(root=vnode.root)

    @property
    def master_node(self) -> VNode:
        """The current master (it follows failovers, see :func:`current_master`)."""
        return current_master(self)

    def save(self) -> None:
        data = asdict(self)
        data.pop("directory")
        with open(os.path.join(self.directory, DATA_FILE + ".tmp"), "w") as fh:
            fh.write(serializer.dumps(data, pretty=True))
        os.replace(os.path.join(self.directory, DATA_FILE + ".tmp"),
                   os.path.join(self.directory, DATA_FILE))


def load(directory: str) -> VCluster:
    """Read ``DIR/vcluster.json``; raises :class:`errors.ConfigurationError`."""
    directory = os.path.abspath(directory)
    try:
        with open(os.path.join(directory, DATA_FILE)) as fh:
            data = serializer.loads(fh.read())
    except (OSError, errors.SerializationError) as exc:
        raise errors.ConfigurationError(f"{directory} is not a virtual cluster: {exc}") from exc
    nodes = [VNode(**n) for n in data.pop("nodes")]
    return VCluster(directory=directory, nodes=nodes, **data)


def current_master(vc: VCluster) -> VNode:
    """The master now: the one that sent the newest master epoch any node accepted.

    Every node keeps the newest epoch it accepted and who sent it
    (``var/lib/ganeti/master_epoch``, doc/design/failover.md); a failover
    raises it.  Before any node has one, the master the most nodes' ssconf
    names; then the one ``create`` made.
    """
    from ganeti import ssconf
    best: tuple[int, str] | None = None
    votes: dict[str, int] = {}
    for node in vc.nodes:
        paths = Paths(root=node.root)
        try:
            with open(os.path.join(paths.data_dir, "master_epoch")) as fh:
                state = serializer.loads(fh.read())
            entry = (int(state.get("epoch") or 0), str(state.get("master") or ""))
            if entry[1] and (best is None or entry[0] > best[0]):
                best = entry
        except (OSError, ValueError, AttributeError, errors.GanetiError):
            pass
        try:
            name = ssconf.SimpleStore(paths).get_master_node()
            votes[name] = votes.get(name, 0) + 1
        except errors.GanetiError:
            pass
    for name in ([best[1]] if best else []) + sorted(votes, key=lambda n: -votes[n]):
        try:
            return vc.node(name)
        except errors.ParameterError:
            continue
    return vc.node(vc.master)


#: the lowest port a virtual cluster uses
PORT_MIN = 20000
_EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def port_range(range_file: str = _EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The ports a virtual cluster picks from: :data:`PORT_MIN` up to just below the
    kernel's ephemeral range (where outgoing connections take their local port),
    so a client socket never holds a daemon's port when it restarts."""
    try:
        with open(range_file, encoding="ascii") as fh:
            low = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return (PORT_MIN, low - 1) if low - 1 > PORT_MIN + 1000 else (PORT_MIN, 60000)


class PortReservation:
    """A TCP port held on every address until :meth:`release` (see :func:`reserve_port`)."""

    def __init__(self, port: int, sockets: list[socket.socket]) -> None:
        self.port = port
        self._sockets = sockets

    def release(self) -> None:
        """Close the holding sockets (the daemons that bound the port keep it)."""
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def reserve_port(addresses: Sequence[str], *, attempts: int = 200,
                 rng: random.Random | None = None) -> PortReservation:
    """A random TCP port free on every address, held until released.

    Picking and holding are one step: the port is bound on each address
    without ``SO_REUSEADDR`` (so it fails wherever anything is bound, a
    reservation of another cluster being created included), then the
    sockets get ``SO_REUSEADDR`` and stay bound without listening.  Our
    daemons (which bind with ``SO_REUSEADDR``) can still bind and listen
    on it; every other reservation, and the kernel's choice of a local
    port for outgoing connections, skip it.  So virtual clusters created
    side by side never pick the same port (``Address already in use``).
    """
    rng = rng or random.Random()
    low, high = port_range()
    for _ in range(attempts):
        port = rng.randint(low, high)
        socks: list[socket.socket] = []
        try:
            for address in addresses:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind((address, port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        except OSError:
            for sock in socks:
                sock.close()
            continue
        return PortReservation(port, socks)
    raise errors.GanetiError(f"No free TCP port found on {', '.join(addresses)}")


def pick_free_port(addresses: Sequence[str], *, attempts: int = 200,
                   rng: random.Random | None = None) -> int:
    """A random TCP port free on every address right now (not held: prefer
    :func:`reserve_port` where something else may pick ports meanwhile)."""
    with reserve_port(addresses, attempts=attempts, rng=rng) as reservation:
        return reservation.port


#: variables of the caller's environment that every virtual node's environment keeps
PASSED_ON = ("TZ", "GANETI_TEST_TIME_OFFSET")


def node_env(vc: VCluster, node: VNode) -> dict[str, str]:
    """The environment variables that make tools act as ``node``."""
    bindir = os.path.dirname(sys.executable)
    env = {
        constants.ENV_ROOTDIR: node.root,
        constants.ENV_HOSTNAME: node.name,
        constants.ENV_NODED_PORT: str(vc.noded_port),
        # the RAPI daemon, on the master only, listens on the master's address
        constants.ENV_RAPI_PORT: str(vc.rapi_port or constants.DEFAULT_RAPI_PORT),
        daemonctl.ENV_RAPI_BIND: node.ip,
        bootstrap.ENV_HOSTS_FILE: os.path.join(vc.directory, HOSTS_FILE),
        # node RPC from this node leaves from its own address (partitions)
        constants.ENV_SOURCE_ADDRESS: node.ip,
        "PATH": os.pathsep.join([os.path.join(REPO_ROOT, "scripts"), bindir,
                                 "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONPATH": REPO_ROOT,
    }
    if vc.hypervisor == constants.HT_KVM:
        env[constants.ENV_KVM_ACCEL] = vc.kvm_accel
    if vc.masterd_args:
        env["GANETI_MASTERD_ARGS"] = shlex.join(vc.masterd_args)
    # the nodes share one machine: its time zone, and the calendar tests' shifted
    # clock (test/fakes/fakedate), hold for all of them
    for name in PASSED_ON:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def env_lines(vc: VCluster, node: str | None = None) -> list[str]:
    """``export`` lines that make ``gnt-*`` act on ``node`` (default: the master)."""
    vnode = vc.node(node) if node else vc.master_node
    return [f"export {k}={shlex.quote(v)}" for k, v in node_env(vc, vnode).items()]


def _full_env(vc: VCluster, node: VNode) -> dict[str, str]:
    return {**os.environ, **node_env(vc, node)}


def run_gnt(vc: VCluster, argv: Sequence[str], *, node: str | None = None,
            timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``gnt-<tool> ...`` (``argv[0]`` like ``gnt-node``) as ``node`` (default master)."""
    vnode = vc.node(node) if node else vc.master_node
    script = os.path.join(REPO_ROOT, "scripts", argv[0])
    res = subprocess.run([sys.executable, script, *argv[1:]], env=_full_env(vc, vnode),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise errors.CommandError(f"{' '.join(argv)} failed (exit {res.returncode}):\n"
                                  f"{res.stdout}{res.stderr}")
    return res


# --- per-node pieces -------------------------------------------------------------------

def _install_tinyos(paths: Paths) -> None:
    dest = os.path.join(paths.os_search_path[0], "tinyos")
    if os.path.isdir(_TINYOS) and not os.path.exists(dest):
        shutil.copytree(_TINYOS, dest)
        for name in ("create", "export", "import", "rename", "verify"):
            path = os.path.join(dest, name)
            if os.path.exists(path):
                os.chmod(path, 0o755)


def _install_tinylinux(paths: Paths, guest: tinylinux.Guest) -> None:
    """The tinylinux OS definition with ``guest``'s files (hard links) in its ``guest/``."""
    dest = os.path.join(paths.os_search_path[0], "tinylinux")
    if not os.path.exists(dest):
        shutil.copytree(_TINYLINUX, dest, ignore=shutil.ignore_patterns("guest", "build"))
    tinylinux.install(guest, os.path.join(dest, "guest"))


def _write_env_file(vc: VCluster, node: VNode) -> str:
    path = os.path.join(node.root, "env")
    with open(path, "w") as fh:
        for key, value in node_env(vc, node).items():
            fh.write(f"{key}={value}\n")
    return path


def _sshd_argv(vc: VCluster, node: VNode) -> list[str]:
    paths = Paths(root=node.root)
    return [sys.executable, "-m", "tools.harness.sshserver", "--bind", node.ip,
            "--port", str(vc.ssh_port),
            "--host-key", os.path.join(node.root, "etc", "ssh", "ssh_host_ed25519_key"),
            "--authorized-keys", bootstrap.authorized_keys_file(paths),
            "--env-file", os.path.join(node.root, "env"),
            "--pidfile", paths.pid_file(SSHD_NAME),
            "--log-file", paths.log_file("sshd.log"), "--daemonize"]


def _start_sshds(vc: VCluster, nodes: Sequence[VNode], timeout: float = 30.0) -> None:
    procs = []
    for node in nodes:
        if daemonctl.daemon_pid(Paths(root=node.root), SSHD_NAME) is not None:
            continue
        procs.append((node, subprocess.Popen(
            _sshd_argv(vc, node), env={**os.environ, "PYTHONPATH": REPO_ROOT},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    for node, proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            raise errors.GanetiError(f"SSH server of {node.name} did not start") from exc
        if proc.returncode != 0:
            raise errors.GanetiError(f"SSH server of {node.name} failed to start:"
                                     f" {(err or out).decode(errors='replace')}")


# --- create / start / stop / destroy -------------------------------------------------------

def create(directory: str, nodes: int = 3, *, hypervisor: str = constants.HT_FAKE,
           base_ip: str = "127.0.1", noded_port: int | None = None,
           ssh_port: int | None = None, use_ssh: bool = True, offline_add: bool = False,
           masterd_args: Sequence[str] = (), kvm_accel: str = DEFAULT_KVM_ACCEL,
           log: Log | None = None) -> VCluster:
    """Create and start a virtual cluster of ``nodes`` nodes in ``directory``.

    With the kvm hypervisor every node also gets the ``tinylinux`` OS (its
    guest built first, or found in the cache: :mod:`tools.harness.tinylinux`;
    a failed build is logged and leaves only ``tinyos``), and its node
    daemon runs with ``$GANETI_KVM_ACCEL=kvm_accel``.

    ``offline_add`` (benchmarks only, implies no SSH) writes the extra nodes
    straight into the configuration while the master daemon is stopped, as
    regular nodes, instead of one ``OP_NODE_ADD`` job per node.
    """
    use_ssh = use_ssh and not offline_add
    log = log or (lambda msg: None)
    directory = os.path.abspath(directory)
    if not 1 <= nodes <= 250:
        raise errors.ParameterError(f"Invalid number of nodes {nodes} (1..250)",
                                    errors.ECODE_INVAL)
    if os.path.exists(os.path.join(directory, DATA_FILE)):
        raise errors.ConfigurationError(f"{directory} already holds a virtual cluster;"
                                        " destroy it first")
    os.makedirs(directory, exist_ok=True)
    vnodes = [VNode(name=f"node{k}.vcluster", ip=f"{base_ip}.{k}",
                    root=os.path.join(directory, f"node{k}")) for k in range(1, nodes + 1)]
    addresses = [n.ip for n in vnodes]
    # the ports stay reserved until every daemon listens on them (reserve_port)
    reserved: list[PortReservation] = []
    try:
        noded_port = noded_port or _reserve(addresses, reserved)
        if use_ssh:
            ssh_port = ssh_port or _reserve(addresses, reserved)
        rapi_port = _reserve(addresses, reserved)
        return _create(directory, vnodes, hypervisor=hypervisor, noded_port=noded_port,
                       ssh_port=ssh_port if use_ssh else None, rapi_port=rapi_port,
                       offline_add=offline_add, masterd_args=masterd_args,
                       kvm_accel=kvm_accel, log=log)
    finally:
        for reservation in reserved:
            reservation.release()


def _reserve(addresses: Sequence[str], reserved: list[PortReservation]) -> int:
    """Reserve one more port (distinct from the ones in ``reserved``, which hold theirs)."""
    reservation = reserve_port(addresses)
    reserved.append(reservation)
    return reservation.port


def _create(directory: str, vnodes: list[VNode], *, hypervisor: str, noded_port: int,
            ssh_port: int | None, rapi_port: int, offline_add: bool,
            masterd_args: Sequence[str], kvm_accel: str, log: Log) -> VCluster:
    """:func:`create` once the ports are chosen (and reserved)."""
    use_ssh = ssh_port is not None
    nodes = len(vnodes)
    vc = VCluster(directory=directory, cluster_name=CLUSTER_NAME, noded_port=noded_port,
                  ssh_port=ssh_port if use_ssh else None, master=vnodes[0].name,
                  hypervisor=hypervisor, masterd_args=list(masterd_args), nodes=vnodes,
                  rapi_port=rapi_port, kvm_accel=kvm_accel)
    vc.save()
    with open(os.path.join(directory, HOSTS_FILE), "w") as fh:
        fh.write(f"{vnodes[0].ip} {CLUSTER_NAME}\n")
        for node in vnodes:
            fh.write(f"{node.ip} {node.name} {node.name.split('.')[0]}\n")
    master_paths = vc.paths(vnodes[0])
    guest = None
    if hypervisor == constants.HT_KVM:
        try:
            guest = tinylinux.build(log=log)
        except (errors.GanetiError, OSError) as exc:
            log(f"Not installing the tinylinux OS: {exc}")
    for node in vnodes:
        paths = Paths(root=node.root)
        bootstrap.make_node_dirs(paths)
        _install_tinyos(paths)
        if guest is not None:
            _install_tinylinux(paths, guest)
        _write_env_file(vc, node)
        new_boot_id(node)
    pub = ssh.generate_cluster_key(master_paths.ssh_key_file, comment="ganeti@vcluster")
    for node in vnodes:
        bootstrap.add_authorized_key(Paths(root=node.root), pub)
    if use_ssh:
        log(f"Starting {nodes} SSH servers on port {ssh_port}")
        _start_sshds(vc, vnodes)
    log(f"Initialising {CLUSTER_NAME} on {vnodes[0].name} (noded port {noded_port})")
    # Ganeti's instance policy, except that disks may be small (doc/vcluster.md)
    init = ["gnt-cluster", "init", "--enabled-hypervisors", hypervisor,
            "--specs-disk-size", f"min={VCLUSTER_MIN_DISK_SIZE}"]
    init += (["--node-parameters", f"ssh_port={ssh_port}"] if use_ssh else ["--no-ssh-init"])
    run_gnt(vc, init + [CLUSTER_NAME])
    if use_ssh:
        for node in vnodes[1:]:
            log(f"Adding {node.name}")
            run_gnt(vc, ["gnt-node", "add", node.name])
    elif len(vnodes) > 1:
        log(f"Adding {len(vnodes) - 1} nodes without SSH")
        _add_nodes_locally(vc, vnodes[1:], offline=offline_add)
    return vc


def _add_nodes_locally(vc: VCluster, nodes: Sequence[VNode], *, offline: bool = False) -> None:
    """Prepare nodes without SSH (in parallel), then submit OP_NODE_ADD for each.

    The same as ``gnt-node add --no-node-setup`` after a local join; used by
    ``--no-ssh`` clusters (benchmarks).
    """
    from concurrent.futures import ThreadPoolExecutor

    from ganeti import cli, luxi
    master = vc.paths(vc.master_node)

    def join(node: VNode) -> None:
        payload = bootstrap.join_payload(master, bind=node.ip, port=vc.noded_port)
        bootstrap.prepare_node_join(Paths(root=node.root), payload, env=_full_env(vc, node))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(join, nodes))
    if offline:
        _add_nodes_to_config(vc, nodes)
        return
    cl = luxi.Client(master.master_socket)
    for node in nodes:
        cli.submit_opcode_and_wait(wire.node_add(node_name=node.name, primary_ip=node.ip,
                                                 readd=False), None, cl,
                                   feedback_fn=None)


def _add_nodes_to_config(vc: VCluster, nodes: Sequence[VNode]) -> None:
    """Write ``nodes`` into the master's config with the master daemon stopped."""
    from ganeti import config, objects, ssconf
    master_node = vc.master_node
    master = vc.paths(master_node)
    env = _full_env(vc, master_node)
    daemonctl.stop_daemon(master, constants.MASTERD)
    cfg = config.ConfigWriter(master.config_file)
    with cfg.batch():
        for node in nodes:
            cfg.add_node(objects.Node(name=node.name, primary_ip=node.ip,
                                      secondary_ip=node.ip, master_candidate=False))
    values = ssconf.compute_ssconf_values(cfg.committed().get_config_data())
    for node in [master_node, *nodes]:
        ssconf.write_ssconf_files(Paths(root=node.root), values)
    daemonctl.start_masterd(master, env=env, extra_args=vc.masterd_args)


def new_boot_id(node: VNode) -> str:
    """Give ``node`` a new boot id (as a reboot does); the node daemon reports it."""
    import uuid
    value = str(uuid.uuid4())
    path = Paths(root=node.root).vnode_boot_id_file
    with open(path + ".tmp", "w") as fh:
        fh.write(value + "\n")
    os.replace(path + ".tmp", path)
    return value


def _is_master(vc: VCluster, node: VNode) -> bool:
    return current_master(vc).name == node.name


def start(vc: VCluster, node: str | None = None) -> None:
    """Start the SSH server, node daemon (and master daemon on the master) of nodes.

    A node whose node daemon was not running "boots": it gets a new boot id.
    Every node daemon starts before the master daemon, which asks a majority
    of them to confirm it at start (doc/design/failover.md).
    """
    targets = [vc.node(node)] if node else vc.nodes
    if vc.ssh_port:
        _start_sshds(vc, targets)
    for vnode in targets:
        paths = Paths(root=vnode.root)
        if daemonctl.daemon_pid(paths, constants.NODED) is None and \
                os.path.exists(paths.server_pem):
            new_boot_id(vnode)
            daemonctl.start_noded(paths, vnode.ip, vc.noded_port, env=_full_env(vc, vnode))
    for vnode in targets:
        paths = Paths(root=vnode.root)
        env = _full_env(vc, vnode)
        if _is_master(vc, vnode) and daemonctl.daemon_pid(paths, constants.MASTERD) is None:
            daemonctl.start_masterd(paths, env=env, extra_args=vc.masterd_args)
        if _is_master(vc, vnode) and daemonctl.daemon_pid(paths, constants.RAPI) is None:
            daemonctl.start_rapi(paths, env=env)


def stop(vc: VCluster, node: str | None = None) -> None:
    """Stop the master daemon, node daemon, SSH server (and a metadata daemon a test
    started) of nodes (all by default).

    The nodes stop side by side: first every RAPI and master daemon (so that
    no job sees its nodes go), then every node daemon and SSH server.
    """
    from concurrent.futures import ThreadPoolExecutor

    targets = [vc.node(node)] if node else vc.nodes
    roots = [Paths(root=vnode.root) for vnode in targets]
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(roots)))) as pool:
        for daemons in ((constants.RAPI, constants.MASTERD),
                        (constants.NODED, SSHD_NAME, constants.METAD)):
            jobs = [(paths, daemon) for paths in roots for daemon in daemons]
            list(pool.map(lambda job: daemonctl.stop_daemon(job[0], job[1], timeout=10.0), jobs))


# --- partitions ------------------------------------------------------------------------

def partition_support() -> str | None:
    """Why ``isolate``/``heal`` cannot work here (None: they can)."""
    if os.geteuid() != 0:
        return "partitions need root (nftables rules on loopback)"
    if shutil.which("nft") is None:
        return "partitions need the nft command (nftables; make installs it as root)"
    return None


def _nft_table(vc: VCluster) -> str:
    import hashlib
    return "vcluster_" + hashlib.sha1(vc.directory.encode()).hexdigest()[:12]


def nft_ruleset(vc: VCluster) -> str:
    """The nftables table that cuts the isolated nodes off (see doc/vcluster.md).

    For each isolated node, TCP packets between its address and any other
    address, on the cluster's noded, SSH and RAPI ports (either direction),
    are dropped; traffic of other clusters (other ports) is untouched.
    """
    ports = sorted({p for p in (vc.noded_port, vc.ssh_port, vc.rapi_port) if p})
    pset = "{ " + ", ".join(str(p) for p in ports) + " }"
    lines = [f"table inet {_nft_table(vc)} {{", "  chain out {",
             "    type filter hook output priority 0; policy accept;"]
    for name in vc.isolated:
        ip = vc.node(name).ip
        for a, b in (("saddr", "daddr"), ("daddr", "saddr")):
            for port in ("dport", "sport"):
                lines.append(f"    ip {a} {ip} ip {b} != {ip} tcp {port} {pset} drop"
                             f" comment \"{name}\"")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def _apply_partitions(vc: VCluster) -> None:
    table = _nft_table(vc)
    script = f"table inet {table}\ndelete table inet {table}\n"
    if vc.isolated:
        script += nft_ruleset(vc)
    res = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True,
                         check=False, timeout=30)
    if res.returncode != 0:
        raise errors.CommandError(f"nft failed: {res.stderr.strip()}")


def isolate(vc: VCluster, node: str) -> None:
    """Cut ``node`` off from every other node (both directions); see doc/vcluster.md."""
    why = partition_support()
    if why:
        raise errors.CommandError(f"Cannot isolate {node}: {why}")
    name = vc.node(node).name
    if name not in vc.isolated:
        vc.isolated.append(name)
    _apply_partitions(vc)
    vc.save()


def heal(vc: VCluster, node: str | None = None) -> None:
    """Give ``node`` (default: every isolated node) its connections back."""
    if node is None:
        vc.isolated = []
    else:
        name = vc.node(node).name
        vc.isolated = [n for n in vc.isolated if n != name]
    if partition_support() is None:
        _apply_partitions(vc)
    vc.save()


WATCHER = os.path.join(REPO_ROOT, "daemons", constants.WATCHER)


def run_watcher(vc: VCluster, node: str | None = None, args: Sequence[str] = ("--wait-children",),
                *, timeout: float = 600.0) -> list[tuple[str, int, list[str]]]:
    """One watcher pass on every node (or ``node``), the master last.

    Each runs with its node's environment; returns ``(node, exit status,
    the lines it added to its watcher.log)`` per node.  The master goes last
    so that its queries see the node daemons the other passes brought back.
    """
    targets = [vc.node(node)] if node else sorted(vc.nodes, key=lambda n: _is_master(vc, n))
    results = []
    for vnode in targets:
        log_file = Paths(root=vnode.root).daemon_log_file(constants.WATCHER)
        try:
            offset = os.path.getsize(log_file)
        except OSError:
            offset = 0
        res = subprocess.run([sys.executable, WATCHER, *args], env=_full_env(vc, vnode),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=timeout, check=False)
        try:
            with open(log_file, encoding="utf-8", errors="replace") as fh:
                fh.seek(offset)
                lines = fh.read().splitlines()
        except OSError:
            lines = []
        lines += [f"(stderr) {line}" for line in res.stderr.splitlines()]
        results.append((vnode.name, res.returncode, lines))
    return results


def _stragglers(directory: str) -> list[int]:
    """Pids of our processes whose GANETI_ROOTDIR lies below ``directory``."""
    prefix = f"{constants.ENV_ROOTDIR}={directory.rstrip('/')}/".encode()
    return procscan.pids_whose("environ", lambda environ: any(
        item.startswith(prefix) for item in environ.split(b"\0")))


def destroy(directory: str, *, log: Log | None = None) -> None:
    """Stop everything of the virtual cluster in ``directory`` and remove it."""
    log = log or (lambda msg: None)
    directory = os.path.abspath(directory)
    try:
        vc = load(directory)
        if vc.isolated:
            heal(vc)
        stop(vc)
    except (errors.ConfigurationError, errors.CommandError) as exc:
        log(f"Warning: {exc}")
    for pid in _stragglers(directory):
        log(f"Killing leftover process {pid}")
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5.0
    while _stragglers(directory) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(directory, ignore_errors=True)


# --- command line --------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    """``tools/vcluster create|env|start|stop|isolate|heal|watcher|destroy|list DIR ...``."""
    parser = argparse.ArgumentParser(
        prog="vcluster", description="Run a virtual Ganeti cluster of real daemons on"
        " this machine (see doc/vcluster.md)")
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("create", help="create and start a virtual cluster in DIR")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    p.add_argument("--hypervisor", default=constants.HT_FAKE, help="hypervisor (default fake)")
    p.add_argument("--base-ip", default="127.0.1", help="node k gets BASE_IP.k")
    p.add_argument("--port", type=int, default=None,
                   help="node daemon port (default: a free one)")
    p.add_argument("--ssh-port", type=int, default=None,
                   help="SSH server port (default: a free one)")
    p.add_argument("--no-ssh", action="store_true",
                   help="no SSH servers; nodes are prepared locally")
    p.add_argument("--offline-add", action="store_true",
                   help="benchmarks: write the extra nodes into the config directly"
                        " (implies --no-ssh)")
    p.add_argument("--masterd-arg", action="append", default=[], metavar="ARG",
                   help="extra ganeti-masterd argument (repeatable)")
    p.add_argument("--kvm-accel", choices=("auto", "kvm", "tcg"), default=DEFAULT_KVM_ACCEL,
                   help=f"kvm acceleration of the nodes (default {DEFAULT_KVM_ACCEL};"
                        " see doc/kvm.md)")
    p.add_argument("--guests", action="store_true",
                   help="every node is a qemu guest with its own kernel, disks and address"
                        " (root; doc/vcluster.md, \"Guest clusters\")")
    p.add_argument("--memory", type=int, default=None, metavar="MIB",
                   help="--guests: RAM per guest in MiB (default 640)")
    p.add_argument("--cpus", type=int, default=None, metavar="N",
                   help="--guests: virtual CPUs per guest (default 1: under TCG on a busy host one is faster)")
    p.add_argument("--disks", type=int, default=None, metavar="N",
                   help="--guests: LVM disks per guest (default 1)")
    p.add_argument("--disk-size", type=int, default=None, metavar="GIB",
                   help="--guests: size of each LVM disk in GiB, sparse (default 4)")
    p.add_argument("--vg-name", default=None,
                   help="--guests: the volume group on the LVM disks (default xenvg)")
    p.add_argument("--guest-accel", choices=("auto", "kvm", "tcg"), default="auto",
                   help="--guests: how qemu runs the guests (default auto: KVM where it"
                        " boots the guest kernel, TCG otherwise)")
    p.add_argument("--master-ssh", action="store_true",
                   help="--guests: plain 'gnt-node add' on the master, its SSH setup"
                        " included (default: the host prepares the nodes over SSH, then"
                        " 'gnt-node add --no-node-setup'; faster under TCG)")
    p = sub.add_parser("ssh", help="--guests clusters: run CMD on NODE as root")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("node")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD")
    p = sub.add_parser("env", help="print export lines to act as the master (or NODE)")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("node", nargs="?")
    for name, text in (("start", "start the daemons of all nodes or NODE"),
                       ("stop", "stop the daemons of all nodes or NODE")):
        p = sub.add_parser(name, help=text)
        p.add_argument("directory", metavar="DIR")
        p.add_argument("node", nargs="?")
    p = sub.add_parser("watcher", help="one watcher pass on every node (or NODE), with"
                       " --wait-children; prints what each did")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("node", nargs="?")
    p.add_argument("--watcher-arg", action="append", default=[], metavar="ARG",
                   help="extra ganeti-watcher argument (repeatable)")
    for name, text in (("isolate", "cut NODE off from the other nodes (nftables; root)"),
                       ("heal", "undo isolate for NODE (default: every node)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("directory", metavar="DIR")
        p.add_argument("node", nargs="?" if name == "heal" else None)
    p = sub.add_parser("destroy", help="stop everything and remove DIR")
    p.add_argument("directory", metavar="DIR")
    p = sub.add_parser("list", help="list the nodes of the virtual cluster")
    p.add_argument("directory", metavar="DIR")
    opts = parser.parse_args(argv)

    def log(msg: str) -> None:
        sys.stderr.write(msg + "\n")

    if (opts.action == "create" and opts.guests) or (
            opts.action != "create" and guest_cli.is_guest_cluster(opts.directory)):
        return guest_cli.main(opts, log)
    try:
        if opts.action == "create":
            started = time.monotonic()
            vc = create(opts.directory, opts.nodes, hypervisor=opts.hypervisor,
                        base_ip=opts.base_ip, noded_port=opts.port, ssh_port=opts.ssh_port,
                        use_ssh=not opts.no_ssh, offline_add=opts.offline_add,
                        masterd_args=opts.masterd_arg, kvm_accel=opts.kvm_accel, log=log)
            log(f"Virtual cluster with {len(vc.nodes)} nodes ready in"
                f" {time.monotonic() - started:.1f}s; use it with:")
            log(f"  eval $({sys.argv[0] if argv is None else 'tools/vcluster'} env"
                f" {vc.directory})")
        elif opts.action == "destroy":
            destroy(opts.directory, log=log)
        else:
            vc = load(opts.directory)
            if opts.action == "env":
                print("\n".join(env_lines(vc, opts.node)))
            elif opts.action == "start":
                start(vc, opts.node)
            elif opts.action == "stop":
                stop(vc, opts.node)
            elif opts.action == "isolate":
                isolate(vc, opts.node)
            elif opts.action == "heal":
                heal(vc, opts.node)
            elif opts.action == "watcher":
                failed = 0
                for name, code, lines in run_watcher(vc, opts.node,
                                                     ["--wait-children", *opts.watcher_arg]):
                    print(f"{name}: exit {code}")
                    for line in lines:
                        # "<date> <time>: ganeti-watcher pid=N LEVEL message" -> message
                        print("  " + line.split(" ", 4)[-1] if " pid=" in line else "  " + line)
                    failed += code != 0
                return 1 if failed else 0
            elif opts.action == "ssh":
                raise errors.ParameterError(f"{vc.directory} is not a guest cluster: its nodes"
                                            " share this machine (use env)",
                                            errors.ECODE_INVAL)
            elif opts.action == "list":
                master = current_master(vc).name
                for node in vc.nodes:
                    role = "master" if node.name == master else ""
                    if node.name in vc.isolated:
                        role = (role + " isolated").strip()
                    print(f"{node.name}\t{node.ip}\t{node.root}\t{role}".rstrip())
    except (errors.GanetiError, OSError) as exc:
        log(f"vcluster {opts.action}: {exc}")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
