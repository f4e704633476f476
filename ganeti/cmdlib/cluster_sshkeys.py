"""Master side of ``gnt-cluster renew-crypto --new-ssh-keys``: a new cluster key pair.

:func:`renew_ssh_keys` runs the steps of :mod:`ganeti.sshkeys` (add, prove,
commit on the master, commit on the others; undo after a failed add or
proof) through the ``ssh_key_update`` node procedure, and proves the new
key by logging in with it over SSH.  Every node holds the cluster's one key
pair (``gnt-node add`` sends it), so every online node gets the new pair.
Called by ``LUClusterRenewCrypto`` with the node locks held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ganeti import errors, parameters, ssh, sshkeys
from ganeti.aliases import FeedbackFn
from ganeti.pathutils import Paths
from ganeti.utils import io as uio

__all__ = ["SshTarget", "prove_key", "renew_ssh_keys"]

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
              new_private: str | None, old_public: str) -> dict[str, str]:
    """The node procedure for ``step`` on ``nodes``; ``{name: error}`` of those that failed."""
    if not nodes:
        return {}
    node_step = sshkeys.Step.COMMIT if step is sshkeys.Step.COMMIT_MASTER else step
    res = rpc.call_ssh_key_update(list(nodes), step=node_step.value, new_public=new_public,
                                  new_private=new_private, old_public=old_public)
    return {name: str(r.fail_msg) for name, r in res.items() if r.fail_msg}


def renew_ssh_keys(cfg: Any, rpc: Any, paths: Paths, key_type: str, bits: int,
                   feedback_fn: FeedbackFn, warn: Callable[[str], None], *,
                   prove: Callable[[Paths, bytes, Sequence[SshTarget]], dict[str, str]]
                   | None = None) -> None:
    """Replace the cluster SSH key pair on every online node, in two steps.

    The new key is added everywhere and proven to work before the old one
    is removed anywhere; a failure before that takes the new key off again
    and raises :class:`errors.OpExecError` (the old key keeps working on
    every node).  A failure while committing raises too, naming the nodes
    that still accept the old key.  Offline nodes are skipped with a
    warning.  On success, or once the master switched, the cluster's
    ``ssh_key_type``/``ssh_key_bits`` are updated.  ``prove`` replaces
    :func:`prove_key` (tests).
    """
    master_uuid = cfg.get_master_node()
    nodes = cfg.get_all_nodes_info()
    plan = sshkeys.plan_renewal(nodes[master_uuid].name,
                                {n.name: bool(n.offline) for n in nodes.values()})
    for name in plan.offline:
        warn(f"Node {name} is offline: it keeps the old SSH key (re-add it, after putting"
             " the new public key in its authorized_keys, once it is back)")
    try:
        old_public = uio.read_file(paths.ssh_key_file + ".pub").decode("ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.OpExecError(f"Cannot read the current cluster SSH key: {exc}") from exc
    comment = old_public.split()[2] if len(old_public.split()) > 2 else "ganeti-cluster"
    feedback_fn(f"Generating a new {key_type} SSH key ({bits} bits)")
    private, new_public = ssh.generate_key_pair(key_type, bits, comment=comment)
    new_private = private.decode("ascii")

    def step(which: sshkeys.Step, names: Sequence[str]) -> sshkeys.StepOutcome:
        if which is sshkeys.Step.PROVE:
            failed = (prove or prove_key)(paths, private, _ssh_targets(cfg, names))
        else:
            failed = _run_step(rpc, which, names, new_public,
                               new_private if which is sshkeys.Step.ADD else None, old_public)
        outcome = sshkeys.decide(plan, which, failed)
        if not outcome.proceed:
            undo_failed = _run_step(rpc, sshkeys.Step.UNDO, outcome.undo, new_public, None,
                                    old_public)
            for name, msg in sorted(undo_failed.items()):
                warn(f"Could not take the new SSH key off {name} again: {msg}")
            raise errors.OpExecError(outcome.message)
        return outcome

    feedback_fn(f"Adding the new SSH key on {len(plan.nodes)} node(s)")
    step(sshkeys.Step.ADD, plan.nodes)
    feedback_fn("Checking that the new SSH key works on every node")
    step(sshkeys.Step.PROVE, plan.nodes)
    feedback_fn("Switching to the new SSH key and removing the old one")
    step(sshkeys.Step.COMMIT_MASTER, (plan.master,))
    cluster = cfg.get_cluster_info()
    cluster.ssh_key_type, cluster.ssh_key_bits = key_type, bits
    cfg.update(cluster)
    step(sshkeys.Step.COMMIT, plan.others)
    logger.info("Cluster SSH key renewed (%s, %s bits); old key removed from %s", key_type,
                bits, ", ".join(plan.nodes))
