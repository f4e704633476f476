"""Master side of ``gnt-cluster renew-crypto --new-ssh-keys``: a new cluster key pair.

:func:`renew_ssh_keys` runs the steps of :mod:`ganeti.sshkeys` (add, prove,
commit on the master, commit on the others; undo after a failed add or
proof) through the ``ssh_key_update`` node procedure, and proves the new
key by logging in with it over SSH.  Every node holds the cluster's one key
pair (``gnt-node add`` sends it), so every online node gets the new pair.
``LUClusterRenewCrypto`` calls :func:`check_renewal` in CheckPrereq (so a
missing or bad cluster key, or a bad key type or size, is refused before the
job renews anything else) and :func:`renew_ssh_keys` in Exec, with the node
locks held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ganeti import errors, parameters, ssh, sshkeys
from ganeti.aliases import FeedbackFn
from ganeti.pathutils import Paths
from ganeti.utils import io as uio

__all__ = ["SshTarget", "Renewal", "prove_key", "read_cluster_key", "check_renewal",
           "renew_ssh_keys"]

logger = logging.getLogger(__name__)

#: (node name, address, SSH port)
SshTarget = tuple[str, str, int]
#: how long the proof waits for one node (connect and ``true``)
PROOF_TIMEOUT = 30.0


def prove_key(paths: Paths, private_key: bytes, targets: Sequence[SshTarget], *,
              timeout: float = PROOF_TIMEOUT) -> dict[str, str]:
    """Log in to every target with ``private_key`` and run ``true``; ``{name: error}``.

    Host keys are checked against the cluster's ``known_hosts`` as for every
    other SSH use (trust on first use; a changed host key is an error).
    """
    try:
        key = ssh.load_key_data(private_key)
    except errors.CommandError as exc:
        return {name: str(exc) for name, _, _ in targets}
    runner = ssh.SshRunner("(the new cluster key)", known_hosts_path=paths.known_hosts_file,
                           connect_timeout=min(timeout, 10.0), key=key)
    by_addr = {addr: name for name, addr, _ in targets}
    results = runner.run_many([addr for _, addr, _ in targets], "true",
                              ports={addr: port for _, addr, port in targets}, timeout=timeout)
    failed: dict[str, str] = {}
    for addr, res in results.items():
        if isinstance(res, errors.CommandError):
            failed[by_addr[addr]] = str(res)
        elif res.failed:
            failed[by_addr[addr]] = f"'true' failed: {res.fail_reason or res.exit_code}"
    return failed


def _ssh_targets(cfg: Any, names: Sequence[str]) -> list[SshTarget]:
    cluster = cfg.get_cluster_info()
    out: list[SshTarget] = []
    for node in cfg.get_all_nodes_info().values():
        if node.name in names:
            nd = parameters.fill_ndparams(cluster, cfg.get_nodegroup(node.group), node)
            out.append((node.name, node.primary_ip, int(nd.get("ssh_port") or 22)))
    return sorted(out)


def _run_step(rpc: Any, step: sshkeys.Step, nodes: Sequence[str], new_public: str,
              new_private: str | None, retired_keys: Sequence[str]) -> dict[str, str]:
    """The node procedure for ``step`` on ``nodes``; ``{name: error}`` of those that failed."""
    if not nodes:
        return {}
    node_step = sshkeys.Step.COMMIT if step is sshkeys.Step.COMMIT_MASTER else step
    res = rpc.call_ssh_key_update(list(nodes), step=node_step.value, new_public=new_public,
                                  new_private=new_private, retired_keys=list(retired_keys))
    return {name: str(r.fail_msg) for name, r in res.items() if r.fail_msg}


@dataclass(frozen=True)
class Renewal:
    """A checked renewal: the nodes, the master's current public key, the new key's kind."""

    plan: sshkeys.RenewalPlan
    old_public: str
    key_type: str
    bits: int


def read_cluster_key(paths: Paths) -> str:
    """The master's current cluster public key line (``id_cluster.pub``).

    Raises :class:`errors.OpPrereqError` (ECODE_ENVIRON) if it is missing,
    unreadable or not an SSH public key.
    """
    path = paths.ssh_key_file + ".pub"
    try:
        line = uio.read_file(path).decode("ascii").strip()
        ssh.public_key_size(line)
    except (OSError, UnicodeDecodeError, errors.CommandError) as exc:
        raise errors.OpPrereqError(f"Cannot read the current cluster SSH key {path}: {exc}",
                                   errors.ECODE_ENVIRON) from exc
    if not sshkeys.is_key_line(line):
        raise errors.OpPrereqError(f"The cluster SSH key {path} is of a type the renewal"
                                   " cannot handle", errors.ECODE_ENVIRON)
    return line


def check_renewal(cfg: Any, paths: Paths, key_type: str, bits: int | None) -> Renewal:
    """Check a renewal before anything changes: the master, its key, the new key's type and size.

    ``bits`` None: as :func:`sshkeys.determine_key_bits`.  Raises
    :class:`errors.OpPrereqError`; reads files but changes none.
    """
    cluster = cfg.get_cluster_info()
    bits = sshkeys.determine_key_bits(key_type, bits, cluster.ssh_key_type,
                                      cluster.ssh_key_bits)
    nodes = cfg.get_all_nodes_info()
    plan = sshkeys.plan_renewal(nodes[cfg.get_master_node()].name,
                                {n.name: bool(n.offline) for n in nodes.values()})
    return Renewal(plan, read_cluster_key(paths), key_type, bits)


def _set_retired(cfg: Any, keys: list[str]) -> None:
    cluster = cfg.get_cluster_info()
    if cluster.ssh_retired_keys != keys:
        cluster.ssh_retired_keys = keys
        cfg.update(cluster)


def renew_ssh_keys(cfg: Any, rpc: Any, paths: Paths, renewal: Renewal,
                   feedback_fn: FeedbackFn, warn: Callable[[str], None], *,
                   prove: Callable[[Paths, bytes, Sequence[SshTarget]], dict[str, str]]
                   | None = None) -> None:
    """Replace the cluster SSH key pair on every online node, in two steps.

    ``renewal`` comes from :func:`check_renewal` (in CheckPrereq).  The new
    key is added everywhere and proven to work before any key is removed; a
    failure before that takes the new key off again and raises
    :class:`errors.OpExecError` (the old key keeps working on every node).
    Before any node gets the new key, the old and the new public keys join
    the cluster's ``ssh_retired_keys``; every commit removes all of those
    but the key it switches to, so a renewal run after any failure removes
    the keys an earlier one left behind.
    The list is emptied once a renewal committed on every node (none
    offline).  A failure while committing raises too, naming the nodes left
    on the old pair.  Offline nodes are skipped with a warning.  Once the
    master switched, the cluster's ``ssh_key_type``/``ssh_key_bits`` are
    updated.  ``prove`` replaces :func:`prove_key` (tests).
    """
    plan, old_public = renewal.plan, renewal.old_public
    for name in plan.offline:
        warn(f"Node {name} is offline: it keeps the old SSH key (re-add it, after putting"
             " the new public key in its authorized_keys, once it is back)")
    comment = old_public.split()[2] if len(old_public.split()) > 2 else "ganeti-cluster"
    feedback_fn(f"Generating a new {renewal.key_type} SSH key ({renewal.bits} bits)")
    private, new_public = ssh.generate_key_pair(renewal.key_type, renewal.bits,
                                                comment=comment)
    new_private = private.decode("ascii")
    # both pairs of this run join the keys to retire before any node has the new one: a
    # failure anywhere (a commit that never switched, an undo that did not take the new
    # key off) leaves the next renewal removing them; each commit keeps the key it
    # switches to
    before = list(cfg.get_cluster_info().ssh_retired_keys)
    retired = sshkeys.with_retired(sshkeys.with_retired(before, old_public), new_public)
    _set_retired(cfg, retired)

    def step(which: sshkeys.Step, names: Sequence[str]) -> sshkeys.StepOutcome:
        if which is sshkeys.Step.PROVE:
            failed = (prove or prove_key)(paths, private, _ssh_targets(cfg, names))
        else:
            failed = _run_step(rpc, which, names, new_public,
                               new_private if which is sshkeys.Step.ADD else None, retired)
        outcome = sshkeys.decide(plan, which, failed)
        if not outcome.proceed:
            undo_failed = _run_step(rpc, sshkeys.Step.UNDO, outcome.undo, new_public, None, [])
            for name, msg in sorted(undo_failed.items()):
                warn(f"Could not take the new SSH key off {name} again: {msg}")
            if outcome.undo and not undo_failed:
                _set_retired(cfg, before)      # every node is as before this run
            raise errors.OpExecError(outcome.message)
        return outcome

    feedback_fn(f"Adding the new SSH key on {len(plan.nodes)} node(s)")
    step(sshkeys.Step.ADD, plan.nodes)
    feedback_fn("Checking that the new SSH key works on every node")
    step(sshkeys.Step.PROVE, plan.nodes)
    feedback_fn("Switching to the new SSH key and removing the old one")
    step(sshkeys.Step.COMMIT_MASTER, (plan.master,))
    cluster = cfg.get_cluster_info()
    cluster.ssh_key_type, cluster.ssh_key_bits = renewal.key_type, renewal.bits
    cfg.update(cluster)
    step(sshkeys.Step.COMMIT, plan.others)
    if plan.reaches_every_node:
        _set_retired(cfg, [])
    logger.info("Cluster SSH key renewed (%s, %s bits); %d retired key(s) removed from %s",
                renewal.key_type, renewal.bits, len(retired), ", ".join(plan.nodes))
