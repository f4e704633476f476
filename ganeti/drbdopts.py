"""drbdsetup options an operator adds through the disk parameters (pure).

Ganeti's ``drbd`` disk parameters ``net-custom`` and ``disk-custom`` hold
extra options for ``drbdsetup connect`` and ``drbdsetup attach``
(doc/storage.md, "DRBD parameters"), e.g. ``-D
drbd:net-custom="--ping-timeout=100 --ping-int=5"``.  They are checked
when set (the parameter's ``check``), split again when the master sends a
disk to a node, and once more by the node before it runs anything: only
``--name`` or ``--name=value`` words, and none of the options the device
class sets itself (the peers' secret and protocol, the split-brain
policies, the error policy, the resync speed), which would change what
the rest of the code relies on.  A custom option the device class also
sets by default (``--ping-timeout``) replaces the default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["NET_OWNED", "DISK_OWNED", "parse", "problem", "names", "checked"]

#: connect options the device class sets and a custom option may not change
NET_OWNED = frozenset({"protocol", "cram-hmac-alg", "shared-secret", "after-sb-0pri",
                       "after-sb-1pri", "after-sb-2pri", "allow-two-primaries"})
#: attach options the device class sets and a custom option may not change
DISK_OWNED = frozenset({"on-io-error", "resync-rate", "c-plan-ahead", "c-fill-target",
                        "c-delay-target", "c-max-rate", "c-min-rate"})

_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:=([A-Za-z0-9._:/+-]+))?")


def parse(text: str, owned: Iterable[str]) -> list[str]:
    """The options of ``text`` (words separated by white space), in order;
    :class:`ValueError` naming the first word that is no ``--name[=value]``
    or names an option in ``owned``."""
    return checked(text.split(), owned)


def checked(words: Sequence[str], owned: Iterable[str]) -> list[str]:
    """``words`` as options (see :func:`parse`); :class:`ValueError` when one is not."""
    reserved = frozenset(owned)
    options = []
    for word in words:
        match = _OPTION.fullmatch(word) if isinstance(word, str) else None
        if match is None:
            raise ValueError(f"{word!r} is not a drbdsetup option (--name or --name=value)")
        if match.group(1) in reserved:
            raise ValueError(f"--{match.group(1)} is set by Ganeti itself and cannot be"
                             " changed here")
        options.append(word)
    return options


def problem(text: str, owned: Iterable[str]) -> str | None:
    """Why ``text`` is no list of custom options (None: it is)."""
    try:
        parse(text, owned)
    except ValueError as exc:
        return str(exc)
    return None


def names(options: Iterable[str]) -> set[str]:
    """The option names of ``options`` (``--ping-timeout=50`` -> ``ping-timeout``)."""
    return {word[2:].split("=", 1)[0] for word in options}
