"""backend.sshkeys.ssh_key_update: the node's key pair and authorized_keys, step by step."""

from __future__ import annotations

import os

import pytest

from ganeti import errors, ssh
from ganeti.backend.sshkeys import ssh_key_update

MINE = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 admin@laptop"


@pytest.fixture
def node(ctx):
    """A node with the old cluster key pair, authorized next to an admin's key."""
    old_private, old_public = ssh.generate_key_pair("ed25519", comment="ganeti@c")
    new_private, new_public = ssh.generate_key_pair("ecdsa", 256, comment="ganeti@c")
    key = ctx.paths.ssh_key_file
    with open(key, "wb") as fh:
        fh.write(old_private)
    with open(key + ".pub", "w") as fh:
        fh.write(old_public + "\n")
    os.makedirs(os.path.dirname(ctx.paths.authorized_keys_file))
    with open(ctx.paths.authorized_keys_file, "w") as fh:
        fh.write(f"{MINE}\n{old_public}\n")
    return ctx, old_public, new_private.decode(), new_public


def _authorized(ctx) -> set[bytes]:
    return ssh.read_authorized_keys(ctx.paths.authorized_keys_file)


def _blob(line: str) -> bytes:
    parsed = ssh.parse_public_key_line(line)
    assert parsed
    return parsed[1]


def _pub(ctx) -> str:
    with open(ctx.paths.ssh_key_file + ".pub") as fh:
        return fh.read().strip()


def test_add_stages_the_pair_and_authorizes_both(node) -> None:
    ctx, old, new_private, new = node
    ssh_key_update(ctx, "add", new, new_private, [old])
    assert _authorized(ctx) == {_blob(MINE), _blob(old), _blob(new)}
    assert _pub(ctx) == old                       # the node still uses the old pair
    assert os.stat(ctx.paths.ssh_key_file + ".new").st_mode & 0o777 == 0o600
    ssh_key_update(ctx, "add", new, new_private, [old])     # again: nothing more
    with open(ctx.paths.authorized_keys_file) as fh:
        assert fh.read().count(new.split()[1]) == 1


def test_commit_switches_the_pair_then_drops_the_old_key(node) -> None:
    ctx, old, new_private, new = node
    ssh_key_update(ctx, "add", new, new_private, [old])
    ssh_key_update(ctx, "commit", new, None, [old])
    assert _pub(ctx) == new
    assert ssh.load_key(ctx.paths.ssh_key_file).get_name() == "ecdsa-sha2-nistp256"
    assert _authorized(ctx) == {_blob(MINE), _blob(new)}
    assert not os.path.exists(ctx.paths.ssh_key_file + ".new")
    ssh_key_update(ctx, "commit", new, None, [old])         # repeated: fine, same state
    assert _authorized(ctx) == {_blob(MINE), _blob(new)}


def test_commit_without_add_is_refused_and_changes_nothing(node) -> None:
    ctx, old, _, new = node
    with pytest.raises(errors.OpExecError, match="No staged SSH key"):
        ssh_key_update(ctx, "commit", new, None, [old])
    assert _authorized(ctx) == {_blob(MINE), _blob(old)}
    assert _pub(ctx) == old


def test_undo_takes_the_new_key_off(node) -> None:
    ctx, old, new_private, new = node
    ssh_key_update(ctx, "add", new, new_private, [old])
    ssh_key_update(ctx, "undo", new, None, [old])
    assert _authorized(ctx) == {_blob(MINE), _blob(old)}
    assert _pub(ctx) == old
    assert not os.path.exists(ctx.paths.ssh_key_file + ".new.pub")
    ssh_key_update(ctx, "undo", new, None, [old])           # where add never ran: fine


def test_undo_after_commit_keeps_the_key_the_node_uses(node) -> None:
    ctx, old, new_private, new = node
    ssh_key_update(ctx, "add", new, new_private, [old])
    ssh_key_update(ctx, "commit", new, None, [old])
    ssh_key_update(ctx, "undo", new, None, [old])
    assert _blob(new) in _authorized(ctx)


@pytest.mark.parametrize("step,new_private,match", [
    ("add", None, "private key is missing"),
    ("rotate", None, "Unknown SSH key update step"),
], ids=["add-without-private", "unknown-step"])
def test_bad_requests_are_refused(node, step, new_private, match) -> None:
    ctx, old, _, new = node
    with pytest.raises(errors.OpExecError, match=match):
        ssh_key_update(ctx, step, new, new_private, [old])
    assert _authorized(ctx) == {_blob(MINE), _blob(old)}


def test_a_line_that_is_no_key_is_refused(node) -> None:
    ctx, old, new_private, _ = node
    with pytest.raises(errors.ParameterError):
        ssh_key_update(ctx, "add", "not a key", new_private, [old])


def _write_pair(ctx, private: bytes, public: str) -> None:
    key = ctx.paths.ssh_key_file
    with open(key, "wb") as fh:
        fh.write(private)
    with open(key + ".pub", "w") as fh:
        fh.write(public + "\n")


def test_commit_drops_every_retired_key_and_the_nodes_own_old_key(node) -> None:
    # the node was left on an older pair A by a renewal whose commit failed here,
    # while the master went on to old; both must go, and the admin's key stays
    ctx, old, new_private, new = node
    a_private, a = ssh.generate_key_pair("ed25519", comment="ganeti@c")
    _write_pair(ctx, a_private, a)
    with open(ctx.paths.authorized_keys_file, "a") as fh:
        fh.write(a + "\n")
    ssh_key_update(ctx, "add", new, new_private, [old])
    ssh_key_update(ctx, "commit", new, None, [old])      # A not listed: the node's own
    assert _pub(ctx) == new
    assert _authorized(ctx) == {_blob(MINE), _blob(new)}


def test_commit_never_drops_the_new_key_even_if_listed(node) -> None:
    ctx, old, new_private, new = node
    ssh_key_update(ctx, "add", new, new_private, [old])
    ssh_key_update(ctx, "commit", new, None, [old, new])
    assert _authorized(ctx) == {_blob(MINE), _blob(new)}


def test_a_retired_key_that_is_no_key_is_refused(node) -> None:
    ctx, old, new_private, new = node
    with pytest.raises(errors.ParameterError):
        ssh_key_update(ctx, "commit", new, None, [old, "not a key"])
    assert _authorized(ctx) == {_blob(MINE), _blob(old)}
