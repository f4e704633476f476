"""OP_CLUSTER_RENEW_CRYPTO with renew_ssh_keys: the steps sent to the nodes, and failures.

The last tests give every node its own files and run the real node step
(``backend.sshkeys``) behind the fake RPC, to follow which keys each node
holds and accepts across a failed renewal and the one run after it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes import FakeRpc, make_cluster_context, make_config, run_opcode  # noqa: E402
from fakes.fakeconfig import node_name  # noqa: E402

from ganeti import errors, ssh  # noqa: E402
from ganeti.backend.context import NodeContext  # noqa: E402
from ganeti.backend.sshkeys import ssh_key_update  # noqa: E402
from ganeti.cmdlib import cluster_sshkeys  # noqa: E402
from ganeti.opcodes import cluster as ocluster  # noqa: E402
from ganeti.pathutils import Paths  # noqa: E402

N1, N2, N3 = node_name(1), node_name(2), node_name(3)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """3 nodes, node3 offline; the master holds an Ed25519 key; the proof is recorded."""
    cfg = make_config(tmp_path, nodes=3, offline=(3,))
    rpc = FakeRpc(cfg)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    old = ssh.generate_cluster_key(ctx.paths.ssh_key_file, comment="ganeti@c")
    proofs: list[tuple[bytes, list]] = []
    failing: dict[str, str] = {}

    def prove(paths, private, targets):
        proofs.append((private, list(targets)))
        return dict(failing)

    monkeypatch.setattr(cluster_sshkeys, "prove_key", prove)
    return cfg, rpc, ctx, old, proofs, failing


def _op(**kw):
    return ocluster.OpClusterRenewCrypto(new_cluster_certificate=False, renew_ssh_keys=True,
                                         **kw)


def _steps(rpc) -> list[tuple[str, list[str]]]:
    return [(args[0], nodes) for nodes, args in rpc.calls_to("ssh_key_update")]


def _fail_on(rpc, step: str, node: str) -> None:
    def handler(name, args):
        if name == node and args[0] == step:
            raise errors.RpcError(f"{step} broke")
    rpc.set_handler("ssh_key_update", handler)


def test_renewal_adds_proves_then_commits_master_first(setup) -> None:
    cfg, rpc, ctx, old, proofs, _ = setup
    _, messages, _ = run_opcode(ctx, _op(ssh_key_type="ecdsa"))
    assert _steps(rpc) == [("add", [N1, N2]), ("commit", [N1]), ("commit", [N2])]
    (add_nodes, add_args), = rpc.calls_to("ssh_key_update")[:1]
    _, new_public, new_private, retired = add_args
    assert retired == [old, new_public] and new_public.startswith("ecdsa-sha2-nistp384 ")
    assert new_public.endswith(" ganeti@c")
    (private, targets), = proofs
    assert private.decode() == new_private
    assert [t[0] for t in targets] == [N1, N2]
    assert all(args[2] is None for _, args in rpc.calls_to("ssh_key_update")[1:])
    cluster = cfg.get_cluster_info()
    assert (cluster.ssh_key_type, cluster.ssh_key_bits) == ("ecdsa", 384)
    assert any(f"{N3} is offline" in m for m in messages)
    # node3 was skipped: it may still hold the old key; the next renewal removes both
    assert cluster.ssh_retired_keys == [old, new_public]


def test_same_type_keeps_the_clusters_size(setup) -> None:
    cfg, rpc, ctx, *_ = setup
    cluster = cfg.get_cluster_info()
    cluster.ssh_key_type, cluster.ssh_key_bits = "rsa", 1024
    cfg.update(cluster)
    run_opcode(ctx, _op())
    new_public = rpc.calls_to("ssh_key_update")[0][1][1]
    assert ssh.public_key_size(new_public) == ("rsa", 1024)


@pytest.mark.parametrize("step", ["add", "prove"])
def test_failure_before_commit_undoes_and_removes_nothing(setup, step) -> None:
    cfg, rpc, ctx, _, _, failing = setup
    if step == "add":
        _fail_on(rpc, "add", N2)
    else:
        failing[N2] = "the server refused the key"
    with pytest.raises(errors.OpExecError, match=f"{N2}.*old key still works on every node"):
        run_opcode(ctx, _op(ssh_key_type="ed25519"))
    steps = _steps(rpc)
    assert ("undo", [N1, N2]) in steps
    assert not any(s == "commit" for s, _ in steps)
    assert cfg.get_cluster_info().ssh_key_type == "rsa"      # the config's default, unchanged
    assert cfg.get_cluster_info().ssh_retired_keys == []


def test_master_commit_failure_touches_no_other_node(setup) -> None:
    cfg, rpc, ctx, *_ = setup
    _fail_on(rpc, "commit", N1)
    with pytest.raises(errors.OpExecError, match="master could not switch"):
        run_opcode(ctx, _op(ssh_key_type="ed25519"))
    assert _steps(rpc) == [("add", [N1, N2]), ("commit", [N1])]


def test_commit_failure_on_a_node_is_reported(setup) -> None:
    cfg, rpc, ctx, *_ = setup
    _fail_on(rpc, "commit", N2)
    with pytest.raises(errors.OpExecError, match=f"{N2} could not switch"):
        run_opcode(ctx, _op(ssh_key_type="ed25519"))
    assert cfg.get_cluster_info().ssh_key_type == "ed25519"   # the master switched


@pytest.mark.parametrize("kw,match", [
    ({"ssh_key_type": "rsa", "ssh_key_bits": 521}, "rsa with 521 bits"),
    ({"ssh_key_type": "dsa"}, "DSA keys are not supported"),
], ids=["rsa-521", "dsa"])
def test_bad_type_or_size_is_refused_before_any_call(setup, kw, match) -> None:
    _, rpc, ctx, *_ = setup
    with pytest.raises(errors.OpPrereqError, match=match):
        run_opcode(ctx, _op(**kw))
    assert rpc.calls_to("ssh_key_update") == []


# --- every node with its own files: a failed commit, then the renewal again --------------

@pytest.fixture
def cluster_files(tmp_path, monkeypatch):
    """3 online nodes (node1 the master, with the LU's files) all on key pair A.

    ``breaks[(step, node)]`` makes that step fail once on that node, after
    running the given function on the node's context.
    """
    cfg = make_config(tmp_path, nodes=3)
    rpc = FakeRpc(cfg)
    ctx = make_cluster_context(tmp_path, cfg, rpc)
    node_paths = {N1: ctx.paths, N2: Paths(root=str(tmp_path / "n2")),
                  N3: Paths(root=str(tmp_path / "n3"))}
    nodes = {name: NodeContext(paths=p, hostname=name) for name, p in node_paths.items()}
    a_private, a = ssh.generate_key_pair("ed25519", comment="ganeti@c")
    for nctx in nodes.values():
        key = nctx.paths.ssh_key_file
        os.makedirs(os.path.dirname(key), exist_ok=True)
        os.makedirs(os.path.dirname(nctx.paths.authorized_keys_file))
        with open(key, "wb") as fh:
            fh.write(a_private)
        for path, text in ((key + ".pub", a), (nctx.paths.authorized_keys_file, a)):
            with open(path, "w") as fh:
                fh.write(text + "\n")
    breaks: dict[tuple[str, str], Callable[[NodeContext], None]] = {}

    def handler(name, args):
        before = breaks.pop((args[0], name), None)
        if before is not None:
            before(nodes[name])
            raise errors.RpcError(f"{args[0]} broke on {name}")
        try:
            return ssh_key_update(nodes[name], *args)
        except errors.GanetiError as exc:
            raise errors.RpcError(str(exc)) from exc

    rpc.set_handler("ssh_key_update", handler)
    monkeypatch.setattr(cluster_sshkeys, "prove_key", lambda paths, private, targets: {})
    return cfg, ctx, nodes, a, breaks


def _pub_of(nctx) -> str:
    with open(nctx.paths.ssh_key_file + ".pub") as fh:
        return fh.read().strip()


def _accepted(nctx) -> set[bytes]:
    return ssh.read_authorized_keys(nctx.paths.authorized_keys_file)


def _blob(line: str) -> bytes:
    parsed = ssh.parse_public_key_line(line)
    assert parsed
    return parsed[1]


def _switch_then_fail(nctx) -> None:
    """The commit got as far as switching the pair, and no further."""
    key = nctx.paths.ssh_key_file
    os.replace(key + ".new", key)
    os.replace(key + ".new.pub", key + ".pub")


@pytest.mark.parametrize("node,before,match", [
    (N2, lambda nctx: None, f"{N2} could not switch"),
    (N1, _switch_then_fail, "master could not switch"),
], ids=["other-node", "master-after-switching"])
def test_a_rerun_after_a_failed_commit_removes_the_old_key_everywhere(
        cluster_files, node, before, match) -> None:
    cfg, ctx, nodes, a, breaks = cluster_files
    breaks[("commit", node)] = before
    with pytest.raises(errors.OpExecError, match=match):
        run_opcode(ctx, _op())
    b = _pub_of(nodes[N1])
    assert b != a
    assert cfg.get_cluster_info().ssh_retired_keys == [a, b]
    assert _pub_of(nodes[N2]) == a and _blob(a) in _accepted(nodes[N2])   # left behind

    run_opcode(ctx, _op())
    c = _pub_of(nodes[N1])
    assert c not in (a, b)
    for name, nctx in nodes.items():
        assert _pub_of(nctx) == c, name
        assert _accepted(nctx) == {_blob(c)}, name      # neither A nor B is left
    assert cfg.get_cluster_info().ssh_retired_keys == []


def test_a_rerun_after_the_master_failed_before_switching_removes_the_new_key_too(
        cluster_files) -> None:
    # every node accepts B; the master never switched to it; the next renewal (to C)
    # must remove B as well as A everywhere (review of 474585e)
    cfg, ctx, nodes, a, breaks = cluster_files
    breaks[("commit", N1)] = lambda nctx: None
    with pytest.raises(errors.OpExecError, match="master could not switch"):
        run_opcode(ctx, _op())
    assert _pub_of(nodes[N1]) == a
    (b,) = [k for k in cfg.get_cluster_info().ssh_retired_keys if k != a]
    assert all(_blob(b) in _accepted(n) for n in nodes.values())
    run_opcode(ctx, _op())
    c = _pub_of(nodes[N1])
    for name, nctx in nodes.items():
        assert _accepted(nctx) == {_blob(c)}, name
    assert cfg.get_cluster_info().ssh_retired_keys == []


def test_a_new_key_an_undo_left_behind_goes_with_the_next_renewal(cluster_files) -> None:
    cfg, ctx, nodes, a, breaks = cluster_files
    breaks[("add", N3)] = lambda nctx: None            # the add fails on node3 ...
    breaks[("undo", N2)] = lambda nctx: None           # ... and node2 keeps the new key
    with pytest.raises(errors.OpExecError):
        run_opcode(ctx, _op())
    (b,) = [k for k in cfg.get_cluster_info().ssh_retired_keys if k != a]
    assert _blob(b) in _accepted(nodes[N2])
    run_opcode(ctx, _op())
    c = _pub_of(nodes[N1])
    for name, nctx in nodes.items():
        assert _accepted(nctx) == {_blob(c)}, name
