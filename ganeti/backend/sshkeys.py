"""Node side of a cluster SSH key renewal: ``ssh_key_update``, one step at a time.

The master drives the steps (``cmdlib.cluster_sshkeys``; the order and what
follows a failure are in :mod:`ganeti.sshkeys`).  Here each step changes
this node's files:

* the key pair: ``data_dir/id_cluster`` (0600) and ``id_cluster.pub``; the
  new pair is staged as ``id_cluster.new`` and ``id_cluster.new.pub``;
* ``authorized_keys`` of ``root`` below the node root
  (:attr:`Paths.authorized_keys_file`), which the node's SSH server reads.

Every step can be repeated: a second ``add``, ``commit`` or ``undo`` with the
same keys changes nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ganeti import errors, sshkeys
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, procedure
from ganeti.utils import io as uio

__all__ = ["ssh_key_update"]

_STAGED = ".new"


def _read_text(path: str) -> str:
    try:
        return uio.read_file(path).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _edit_authorized_keys(ctx: NodeContext, add: Sequence[str] = (),
                          remove: Sequence[str] = ()) -> None:
    """Add the key lines ``add`` to the node's ``authorized_keys``, then remove ``remove``."""
    path = ctx.paths.authorized_keys_file
    old = _read_text(path)
    new = old
    for line in add:
        new = sshkeys.with_key(new, line)
    for line in remove:
        new = sshkeys.without_key(new, line)
    if new != old:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        uio.write_file_atomic(path, new, mode=0o600)


def _add(ctx: NodeContext, new_public: str, new_private: str | None) -> None:
    if not new_private:
        raise errors.OpExecError("ssh_key_update add: the new private key is missing")
    key = ctx.paths.ssh_key_file
    uio.write_file_atomic(key + _STAGED, new_private, mode=0o600)
    uio.write_file_atomic(key + _STAGED + ".pub", new_public.strip() + "\n", mode=0o644)
    _edit_authorized_keys(ctx, add=[new_public])


def _commit(ctx: NodeContext, new_public: str, retired_keys: Sequence[str]) -> None:
    key = ctx.paths.ssh_key_file
    before = _read_text(key + ".pub").strip()     # this node's own old key, if it has one
    staged = _read_text(key + _STAGED + ".pub")
    if sshkeys.same_key(staged, new_public):
        os.replace(key + _STAGED, key)     # the private key first: the pair may be
        os.replace(key + _STAGED + ".pub", key + ".pub")   # new/old only, never old/new
    elif not sshkeys.same_key(before, new_public):
        raise errors.OpExecError("No staged SSH key matching the new public key on this"
                                 " node (the add step did not run here)")
    retired = [*retired_keys, before] if sshkeys.is_key_line(before) else list(retired_keys)
    # the new key is authorized before the old ones go (also on a repeated commit)
    _edit_authorized_keys(ctx, add=[new_public],
                          remove=[k for k in retired if not sshkeys.same_key(k, new_public)])


def _undo(ctx: NodeContext, new_public: str) -> None:
    key = ctx.paths.ssh_key_file
    for path in (key + _STAGED, key + _STAGED + ".pub"):
        uio.remove_file(path)
    if sshkeys.same_key(_read_text(key + ".pub"), new_public):
        return          # committed here already: the node uses it, keep it authorized
    _edit_authorized_keys(ctx, remove=[new_public])


@procedure(FAST, fenced=True)
def ssh_key_update(ctx: NodeContext, step: str, new_public: str, new_private: str | None,
                   retired_keys: list) -> None:
    """One step of a cluster SSH key renewal: add (stage the new pair, authorize new_public),
    commit (the staged pair becomes the node's; retired_keys and the node's old key leave
    authorized_keys) or undo (drop the staged pair and new_public). -> None

    Apply one step of a cluster SSH key renewal on this node.

    ``add`` stages ``new_private``/``new_public`` beside the current pair and
    adds ``new_public`` to ``authorized_keys``; ``commit`` makes the staged
    pair the node's key pair, then removes every key of ``retired_keys`` and
    the node's own previous public key from ``authorized_keys`` (never
    ``new_public``); ``undo`` removes the staged pair and ``new_public``
    (unless this node already committed it).  ``add`` and ``undo`` ignore
    ``retired_keys``.  Keys other than these are never touched.  Raises
    :class:`errors.OpExecError` for an unknown step, a commit without a
    matching staged pair, or an I/O error, and :class:`errors.ParameterError`
    for a line that is not a public key.
    """
    for line in (new_public, *retired_keys):
        sshkeys.with_key("", line)      # refuses what is not a public key line
    try:
        if step == sshkeys.Step.ADD.value:
            _add(ctx, new_public, new_private)
        elif step == sshkeys.Step.COMMIT.value:
            _commit(ctx, new_public, retired_keys)
        elif step == sshkeys.Step.UNDO.value:
            _undo(ctx, new_public)
        else:
            raise errors.OpExecError(f"Unknown SSH key update step {step!r}")
    except OSError as exc:
        raise errors.OpExecError(f"SSH key update ({step}) failed: {exc}") from exc
