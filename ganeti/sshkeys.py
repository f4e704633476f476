"""Renewing the cluster SSH key: key types and sizes, ``authorized_keys`` edits, the plan.

Pure: no files, no sockets, no randomness.  ``ganeti.ssh`` makes the keys,
``backend.sshkeys`` applies one step on a node, ``cmdlib.cluster_sshkeys``
drives the steps (doc/design/ssh.md, "Renewing the cluster key").

Key types
    ``ed25519`` (256 bits, the only size), ``rsa`` (1024 to 16384 bits,
    default 2048) and ``ecdsa`` (256, 384 or 521 bits, default 384).
    Upstream's ``dsa`` is refused: OpenSSH no longer accepts DSA keys.

The renewal, in steps
    1. *add*: every online node stages the new key pair beside its current
       one and adds the new public key to its ``authorized_keys``; nothing is
       removed.  A node that fails: every node takes the new key off again
       (*undo*), the old key stays the only one.
    2. *prove*: the master logs in to every online node with the new private
       key.  A node that refuses it: *undo* everywhere, as above.
    3. *commit*, on the master first: the staged pair replaces the node's
       key pair, then the *retired* keys leave ``authorized_keys``: the
       master's old public key and those of earlier renewals that did not
       finish (the cluster config keeps them in ``ssh_retired_keys`` until a
       renewal committed on every node), plus the node's own old key.  If
       the master fails, no other node is touched (they accept both keys).
       A node that fails after the master switched keeps its old pair,
       which the master no longer accepts, until the renewal is run again;
       that run removes the old key everywhere.

Offline nodes are skipped (with a warning): they keep the old key only, and
the retired keys stay recorded until a renewal reaches every node.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ganeti import errors

__all__ = [
    "SSHK_ED25519", "SSHK_RSA", "SSHK_ECDSA", "SSHK_DSA", "KEY_TYPES", "KeyBits",
    "determine_key_bits", "with_key", "without_key", "is_key_line", "same_key",
    "with_retired",
    "Step", "RenewalPlan", "StepOutcome", "plan_renewal", "decide",
]

SSHK_ED25519 = "ed25519"
SSHK_RSA = "rsa"
SSHK_ECDSA = "ecdsa"
#: upstream's, refused here
SSHK_DSA = "dsa"


@dataclass(frozen=True)
class KeyBits:
    """The sizes a key type allows and its default size."""

    default: int
    allowed: tuple[int, ...] = ()
    minimum: int = 0
    maximum: int = 0

    def accepts(self, bits: int) -> bool:
        """True if ``bits`` is a size of this type."""
        if self.allowed:
            return bits in self.allowed
        return self.minimum <= bits <= self.maximum

    def describe(self) -> str:
        """The allowed sizes, for an error message."""
        if self.allowed:
            return " or ".join(str(b) for b in self.allowed)
        return f"{self.minimum} to {self.maximum}"


#: key type -> its sizes
KEY_TYPES: dict[str, KeyBits] = {
    SSHK_ED25519: KeyBits(256, allowed=(256,)),
    SSHK_RSA: KeyBits(2048, minimum=1024, maximum=16384),
    SSHK_ECDSA: KeyBits(384, allowed=(256, 384, 521)),
}


def determine_key_bits(key_type: str, bits: int | None, old_type: str | None,
                       old_bits: int | None) -> int:
    """The size of the new key: ``bits``, else the old size if the type stays, else the default.

    Raises :class:`errors.OpPrereqError` (ECODE_INVAL) for an unknown type,
    ``dsa``, or a size the type does not allow.
    """
    if key_type == SSHK_DSA:
        raise errors.OpPrereqError("DSA keys are not supported (OpenSSH no longer accepts"
                                   f" them); use one of {', '.join(KEY_TYPES)}",
                                   errors.ECODE_INVAL)
    info = KEY_TYPES.get(key_type)
    if info is None:
        raise errors.OpPrereqError(f"Unknown SSH key type {key_type!r}; use one of"
                                   f" {', '.join(KEY_TYPES)}", errors.ECODE_INVAL)
    if bits is None:
        bits = old_bits if old_type == key_type and old_bits is not None else info.default
    if not info.accepts(bits):
        raise errors.OpPrereqError(f"Invalid key type and bit size combination: {key_type}"
                                   f" with {bits} bits ({key_type}: {info.describe()})",
                                   errors.ECODE_INVAL)
    return bits


# --- authorized_keys text ------------------------------------------------------

def _blob_of(line: str) -> str | None:
    """The base64 key field of an ``authorized_keys`` line (options skipped), or None."""
    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return None
    for idx, field in enumerate(fields[:-1]):
        if field.startswith(("ssh-", "ecdsa-sha2-")):
            return fields[idx + 1]
    return None


def with_key(text: str, line: str) -> str:
    """``authorized_keys`` text with the public key ``line`` added (unchanged if present)."""
    blob = _blob_of(line)
    if blob is None:
        raise errors.ParameterError(f"Not an SSH public key line: {line.strip()!r}",
                                    errors.ECODE_INVAL)
    if any(_blob_of(old) == blob for old in text.splitlines()):
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    return text + line.strip() + "\n"


def without_key(text: str, line: str) -> str:
    """``authorized_keys`` text without any line of the public key ``line``.

    Other keys, comments and blank lines are kept as they are.
    """
    blob = _blob_of(line)
    if blob is None:
        raise errors.ParameterError(f"Not an SSH public key line: {line.strip()!r}",
                                    errors.ECODE_INVAL)
    kept = [old for old in text.splitlines(keepends=True) if _blob_of(old) != blob]
    return "".join(kept)


def is_key_line(line: str) -> bool:
    """True if ``line`` is a public key line (of a type ``authorized_keys`` edits know)."""
    return _blob_of(line) is not None


def same_key(a: str, b: str) -> bool:
    """True if the public key lines ``a`` and ``b`` hold the same key (comments aside)."""
    blob = _blob_of(a)
    return blob is not None and blob == _blob_of(b)


def with_retired(retired: Sequence[str], line: str) -> list[str]:
    """The keys waiting to be retired, with the public key ``line`` added (once, at the end)."""
    if _blob_of(line) is None:
        raise errors.ParameterError(f"Not an SSH public key line: {line.strip()!r}",
                                    errors.ECODE_INVAL)
    kept = list(retired)
    return kept if any(same_key(old, line) for old in kept) else [*kept, line.strip()]


# --- the plan ------------------------------------------------------------------

class Step(str, enum.Enum):
    """A step of the renewal; the node procedure's ``step`` argument (except PROVE)."""

    ADD = "add"
    PROVE = "prove"
    COMMIT_MASTER = "commit-master"
    COMMIT = "commit"
    UNDO = "undo"


@dataclass(frozen=True)
class RenewalPlan:
    """The nodes of one renewal: ``nodes`` online (master first), ``offline`` skipped."""

    master: str
    nodes: tuple[str, ...]
    offline: tuple[str, ...]

    @property
    def others(self) -> tuple[str, ...]:
        """The online nodes but the master (committed after it)."""
        return tuple(n for n in self.nodes if n != self.master)

    @property
    def reaches_every_node(self) -> bool:
        """True if no node is skipped: a finished renewal may forget the retired keys."""
        return not self.offline


@dataclass(frozen=True)
class StepOutcome:
    """What follows a step: go on, or stop (undoing on ``undo``) with ``message``."""

    proceed: bool
    undo: tuple[str, ...] = ()
    message: str = ""


def plan_renewal(master: str, offline_by_node: Mapping[str, bool]) -> RenewalPlan:
    """The plan for the nodes ``{name: offline}``; the master must be among them and online.

    Raises :class:`errors.OpPrereqError` if the master is missing or offline.
    """
    if offline_by_node.get(master, True):
        raise errors.OpPrereqError(f"The master node {master} is not an online node",
                                   errors.ECODE_STATE)
    online = sorted(n for n, off in offline_by_node.items() if not off and n != master)
    offline = sorted(n for n, off in offline_by_node.items() if off)
    return RenewalPlan(master, (master, *online), tuple(offline))


def _listing(failed: Mapping[str, str]) -> str:
    return "; ".join(f"{name}: {msg}" for name, msg in sorted(failed.items()))


def decide(plan: RenewalPlan, step: Step, failed: Mapping[str, str]) -> StepOutcome:
    """What to do after ``step``, given the nodes where it ``failed`` (``{name: error}``).

    * ADD, PROVE: go on when nothing failed; else undo on every online node
      (also where the step failed: it may have got half-way) and stop;
    * COMMIT_MASTER: go on, or stop without undoing: the master may already
      use the new key, and every other node still accepts both;
    * COMMIT: done, or stop naming the nodes left on the old pair.
    """
    if not failed:
        return StepOutcome(True)
    listing = _listing(failed)
    if step in (Step.ADD, Step.PROVE):
        what = ("Could not install the new SSH key on" if step is Step.ADD
                else "The new SSH key does not work on")
        return StepOutcome(False, plan.nodes,
                           f"{what} {', '.join(sorted(failed))} ({listing}); the new key"
                           " was taken off again and no key was removed: the old key"
                           " still works on every node. Make those nodes reachable and"
                           " run the renewal again")
    if step is Step.COMMIT_MASTER:
        return StepOutcome(False, (),
                           f"The master could not switch to the new SSH key ({listing});"
                           " the other nodes accept both the old and the new key. Run the"
                           " renewal again: it removes the old key from every node")
    if step is Step.COMMIT:
        return StepOutcome(False, (),
                           f"The master uses the new SSH key, but {', '.join(sorted(failed))}"
                           f" could not switch to it ({listing}); they still hold the old key"
                           " pair, which the master no longer accepts. Run the renewal again"
                           " once they are reachable: it removes the old key from every node")
    raise errors.ProgrammerError(f"No decision after step {step!r}")
