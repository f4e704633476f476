"""gnt-cluster renew-crypto --new-ssh-keys on a real 3-node virtual cluster.

The nodes' SSH servers (tools.harness.sshserver) read each node's
authorized_keys at every login, so what the files say is what works.  The
failure tests come first and leave the old key in place; the renewals follow.
"""

from __future__ import annotations

import os

import pytest
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

from ganeti import constants, daemonctl, errors, ssh
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(240)

NODES = ("node1", "node2", "node3")


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcl"), nodes=3,
                        masterd_args=SHORT_RPC_TIMEOUTS) as cluster:
        yield cluster


def _read(path: str) -> str:
    with open(path, encoding="ascii") as fh:
        return fh.read()


def _blob(line: str) -> bytes:
    parsed = ssh.parse_public_key_line(line)
    assert parsed, line
    return parsed[1]


def _state(vc) -> dict[str, tuple[set[bytes], str]]:
    """Per node: the keys its authorized_keys holds, and its cluster public key."""
    return {n: (ssh.read_authorized_keys(vc.paths(n).authorized_keys_file),
                _read(vc.paths(n).ssh_key_file + ".pub").strip()) for n in NODES}


def _login(vc, key_path: str, node: str) -> None:
    """Log in to ``node`` with ``key_path`` and run ``true`` (CommandError if refused)."""
    runner = ssh.SshRunner(key_path, port=vc.cluster.ssh_port, connect_timeout=10)
    res = runner.run(vc.cluster.node(node).ip, "true", timeout=30)
    assert not res.failed, res.stderr


def _renew(vc, *args: str):
    return vc.run("gnt-cluster", "renew-crypto", "--new-ssh-keys", "--no-ssh-key-check",
                  *args)


@pytest.mark.parametrize("down", ["ssh", "noded"])
def test_unreachable_node_fails_the_renewal_and_removes_nothing(vc, down):
    before = _state(vc)
    old = before["node1"][1]
    assert all(keys == {_blob(old)} and pub == old for keys, pub in before.values())
    paths = vc.paths("node3")
    daemon = vcluster.SSHD_NAME if down == "ssh" else constants.NODED
    assert daemonctl.stop_daemon(paths, daemon)
    try:
        res = _renew(vc, "-f")
    finally:
        if down == "ssh":
            vcluster.start(vc.cluster, "node3")
        else:
            node = vc.cluster.node("node3")
            daemonctl.start_noded(paths, node.ip, vc.cluster.noded_port, env=vc.env("node3"))
    assert res.returncode != 0, res.stdout
    out = res.stdout + res.stderr
    assert "node3.vcluster" in out and "old key still works on every node" in out, out
    assert _state(vc) == before           # the new key was taken off again everywhere
    for name in NODES:
        assert not os.path.exists(vc.paths(name).ssh_key_file + ".new")
    vc.ok("gnt-cluster", "command", "true")


def test_renewal_needs_confirmation(vc):
    before = _state(vc)
    res = _renew(vc)
    assert res.returncode == 1 and "--force" in res.stderr
    assert _state(vc) == before


def test_renewal_replaces_the_key_everywhere(vc, tmp_path):
    old_key = str(tmp_path / "old_key")
    with open(old_key, "wb") as fh:
        fh.write(open(vc.paths("node1").ssh_key_file, "rb").read())
    os.chmod(old_key, 0o600)
    old = _state(vc)["node1"][1]
    _login(vc, old_key, "node2")

    res = _renew(vc, "-f", "--ssh-key-type=ecdsa")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("Updating certificates now.")
    assert "All requested certificates and keys have been replaced." in res.stdout
    after = _state(vc)
    new = after["node1"][1]
    assert new.startswith("ecdsa-sha2-nistp384 ") and new != old
    for name, (keys, pub) in after.items():
        assert pub == new, name
        assert keys == {_blob(new)}, name       # the new key, not the old one
    # the cluster's own tools work with the new key; the old key is refused
    out = vc.ok("gnt-cluster", "command", "hostname")
    assert all(f"{name}.vcluster" in out for name in NODES), out
    src = os.path.join(vc.paths("node1").conf_dir, "ssh-renewed.txt")
    with open(src, "w") as fh:
        fh.write("new key\n")
    vc.ok("gnt-cluster", "copyfile", src)
    assert _read(os.path.join(vc.paths("node3").conf_dir, "ssh-renewed.txt")) == "new key\n"
    for name in ("node2", "node3"):
        with pytest.raises(errors.CommandError, match="refused the key"):
            _login(vc, old_key, name)
        _login(vc, vc.paths("node1").ssh_key_file, name)
    assert "ssh_key_type: ecdsa" in vc.ok("gnt-cluster", "info")
    assert vc.run("gnt-cluster", "verify").returncode == 0


def test_key_size_follows_the_type(vc):
    assert _renew(vc, "-f", "--ssh-key-bits=4096").returncode != 0   # not for ecdsa
    res = _renew(vc, "-f", "--ssh-key-type=rsa", "--ssh-key-bits=521")
    assert res.returncode != 0 and "rsa with 521 bits" in res.stdout + res.stderr
    vc.ok("gnt-cluster", "renew-crypto", "--new-ssh-keys", "-f", "--ssh-key-type=rsa",
          "--ssh-key-bits=2048")
    new = _state(vc)["node1"][1]
    assert ssh.public_key_size(new) == ("rsa", 2048)
    assert all(keys == {_blob(new)} for keys, _ in _state(vc).values())
    assert "ssh_key_bits: 2048" in vc.ok("gnt-cluster", "info")


def test_readd_uses_the_new_key(vc):
    vc.ok("gnt-node", "add", "--readd", "node3.vcluster")
    new = _state(vc)["node1"][1]
    assert _state(vc)["node3"] == ({_blob(new)}, new)
    vc.ok("gnt-cluster", "command", "-n", "node3.vcluster", "true")
