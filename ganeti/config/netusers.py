"""Which instance NICs hold which network addresses: the writer's index, kept
in step with the networks' pools (doc/networks.md, "NICs on networks").

A network's ``reservations`` string is derived state: an address is
reserved for an instance exactly when a NIC of some instance is on that
network with that address.  The configuration writer changes the pool in
the same mutation (so the same write) as the instance, through
:meth:`NetUsers.replace`; two NICs may hold one address (given with
``--no-conflicts-check``) and the address stays reserved until neither
does.  Pure: no locks, no I/O; the writer holds its lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ganeti import errors
from ganeti.netpool import AddressPool, check_address_in
from ganeti.objects import NIC, Instance, Network

__all__ = ["Holding", "NetUsers", "nic_holdings", "apply_to_pools", "pick_address"]

#: one address of one network: ``(network uuid, address)``
Holding = tuple[str, str]


def nic_holdings(nics: Iterable[NIC]) -> set[Holding]:
    """The ``(network uuid, address)`` pairs the NICs hold."""
    return {(nic.network, nic.ip) for nic in nics if nic.network and nic.ip}


class NetUsers:
    """Per address of a network, the instances whose NICs hold it."""

    def __init__(self, instances: Iterable[Instance]) -> None:
        self._users: dict[Holding, set[str]] = {}
        self._held: dict[str, set[Holding]] = {}
        for inst in instances:
            self.replace(inst.uuid, nic_holdings(inst.nics))

    def users(self, holding: Holding) -> set[str]:
        """The instances holding ``holding`` (empty: none)."""
        return set(self._users.get(holding, ()))

    def held_by(self, inst_uuid: str) -> set[Holding]:
        """What the instance ``inst_uuid`` holds, as last recorded."""
        return set(self._held.get(inst_uuid, ()))

    def replace(self, inst_uuid: str, holdings: set[Holding]) -> dict[Holding, bool]:
        """Record that ``inst_uuid`` now holds ``holdings`` (empty: it is gone).

        Returns the addresses whose state changed: ``True`` now held (by
        anyone), ``False`` now free.
        """
        old = self._held.get(inst_uuid, set())
        changed: dict[Holding, bool] = {}
        for holding in old - holdings:
            users = self._users.get(holding)
            if users is not None:
                users.discard(inst_uuid)
                if not users:
                    del self._users[holding]
                    changed[holding] = False
        for holding in holdings - old:
            users = self._users.setdefault(holding, set())
            if not users:
                changed[holding] = True
            users.add(inst_uuid)
        if holdings:
            self._held[inst_uuid] = set(holdings)
        else:
            self._held.pop(inst_uuid, None)
        return changed


def apply_to_pools(networks: Mapping[str, Network], changed: dict[Holding, bool]) -> list[Network]:
    """Set the pool bits of ``changed`` in the stored ``networks``; the networks changed.

    An address outside its network (possible only in a hand-edited
    configuration) or of an unknown network is skipped: the NIC keeps its
    address, the pool has no place for it.
    """
    by_net: dict[str, list[tuple[str, bool]]] = {}
    for (net_uuid, address), used in changed.items():
        by_net.setdefault(net_uuid, []).append((address, used))
    touched = []
    for net_uuid, marks in sorted(by_net.items()):
        net = networks.get(net_uuid)
        if net is None:
            continue
        pool = AddressPool(net.network, net.reservations, net.ext_reservations)
        moved = False
        for address, used in marks:
            try:
                if not pool.contains(address):
                    continue
            except errors.ParameterError:
                continue
            pool.mark(address, used)
            moved = True
        if moved:
            net.reservations = pool.reservations_text()
            touched.append(net)
    return touched


def pick_address(net: Network, handed_out: set[str], address: str | None, *,
                 check: bool = True) -> str:
    """The address of ``net`` to hand out: the lowest free one (``address`` None),
    or ``address`` itself.

    ``handed_out``: addresses given to logical units still running.  Raises
    :class:`errors.OpPrereqError`: no free address (``ECODE_NORES``), an
    address outside the network (``ECODE_INVAL``), one an instance holds or
    a running job was given (``ECODE_NOTUNIQUE``, always), or, with
    ``check``, one reserved externally (``ECODE_NOTUNIQUE``; Ganeti's
    ``--no-conflicts-check`` allows that one, as Ganeti does).
    """
    pool = AddressPool(net.network, net.reservations, net.ext_reservations)
    try:
        for held in handed_out:
            pool.mark(held, True)
        if address is None:
            return pool.generate_free()
        address = check_address_in(address, pool.network, "IP address")
        if pool.is_reserved(address):
            raise errors.OpPrereqError(f"IP address {address} of network {net.name} is"
                                       " already in use", errors.ECODE_NOTUNIQUE)
        if check and pool.is_reserved(address, external=True):
            raise errors.OpPrereqError(
                f"IP address {address} of network {net.name} is reserved externally (use"
                " --no-conflicts-check to give it anyway)", errors.ECODE_NOTUNIQUE)
        return address
    except errors.ParameterError as exc:
        raise errors.OpPrereqError(f"Network {net.name}: {exc}", errors.ECODE_INVAL) from None
