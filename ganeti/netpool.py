"""The IPv4 address pool of a network (``gnt-network``); pure, no I/O.

A network's pool covers every address of its IPv4 subnet, index 0 being
the network address and the last index the broadcast address.  The
configuration stores it as two strings of ``'0'``/``'1'`` characters, one
character per address (an empty string means "all free"):

``reservations``
    addresses given to instances' NICs;
``ext_reservations``
    external reservations: the network and broadcast addresses, the
    gateway, and the addresses the operator reserved
    (``--add-reserved-ips``).

An address is *free* when neither string reserves it.  Only networks from
/16 (65,536 addresses) to /30 (4 addresses) are accepted.

Errors:

* :class:`~ganeti.errors.ParameterError` (``ECODE_INVAL``) for bad user
  input: a malformed or wrongly sized network, a malformed address, an
  address outside the network, reserving an address that is already
  reserved (of either kind), releasing one that is not reserved of that kind;
* :class:`~ganeti.errors.OpPrereqError` with ``ECODE_NORES`` from
  :meth:`AddressPool.generate_free` when no address is free: the request
  was fine, the network has run out of addresses (freeing some, or using a
  bigger network, helps);
* :class:`~ganeti.errors.ConfigurationError` when a stored string has the
  wrong length or holds characters other than ``'0'`` and ``'1'``.

Internally the two strings are kept as ASCII bytearrays, plus a third one
marking every address as taken (``'X'``) or free (``'.'``), so that the map
is a decode, and the lowest free address is one ``bytearray.find`` from a
remembered lower bound (every address below it is taken).
"""

from __future__ import annotations

import ipaddress

from ganeti import errors

__all__ = ["AddressPool", "MIN_PREFIXLEN", "MAX_PREFIXLEN",
           "check_network", "check_network6", "check_address_in"]

#: the biggest network a pool may cover (/16, 65,536 addresses)
MIN_PREFIXLEN = 16
#: the smallest network a pool may cover (/30, 4 addresses)
MAX_PREFIXLEN = 30

_ZERO = ord("0")
_ONE = ord("1")
_FREE = ord(".")
_TAKEN = ord("X")
#: '0' -> '.' and '1' -> 'X', to build the map of taken addresses
_TO_MAP = bytes.maketrans(b"01", b".X")


def check_network(network: str) -> ipaddress.IPv4Network:
    """Parse an IPv4 network in CIDR notation (``10.0.0.0/24``) for a pool.

    Raises :class:`~ganeti.errors.ParameterError` if it is not an IPv4
    network, has host bits set, or its prefix length is not between /16
    and /30.
    """
    if not isinstance(network, str):
        raise errors.ParameterError(f"Invalid network {network!r}: expected a string such as"
                                    " 10.0.0.0/24", errors.ECODE_INVAL)
    try:
        net = ipaddress.IPv4Network(network)
    except ipaddress.NetmaskValueError as err:
        raise errors.ParameterError(f"Invalid network {network!r}: {err}",
                                    errors.ECODE_INVAL) from err
    except ValueError as err:
        lax: ipaddress.IPv4Network | None = None
        try:
            lax = ipaddress.IPv4Network(network, strict=False)
        except ValueError:
            pass
        if lax is not None:
            raise errors.ParameterError(f"Invalid network {network!r}: host bits are set"
                                        f" (did you mean {lax}?)", errors.ECODE_INVAL) from err
        raise errors.ParameterError(f"Invalid network {network!r}: not an IPv4 network in"
                                    " CIDR notation such as 10.0.0.0/24",
                                    errors.ECODE_INVAL) from err
    if not MIN_PREFIXLEN <= net.prefixlen <= MAX_PREFIXLEN:
        raise errors.ParameterError(
            f"Network {net} is too {'big' if net.prefixlen < MIN_PREFIXLEN else 'small'}:"
            f" its prefix length must be between /{MIN_PREFIXLEN} ({2 ** (32 - MIN_PREFIXLEN)}"
            f" addresses) and /{MAX_PREFIXLEN} ({2 ** (32 - MAX_PREFIXLEN)} addresses)",
            errors.ECODE_INVAL)
    return net


def check_network6(network6: str | None) -> str | None:
    """Parse an optional IPv6 network (any size); its normal form, or None.

    Raises :class:`~ganeti.errors.ParameterError` if it is not an IPv6
    network in CIDR notation, or has host bits set.
    """
    if network6 is None:
        return None
    if not isinstance(network6, str):
        raise errors.ParameterError(f"Invalid IPv6 network {network6!r}: expected a string"
                                    " such as 2001:db8::/64", errors.ECODE_INVAL)
    try:
        return str(ipaddress.IPv6Network(network6))
    except ValueError as err:
        raise errors.ParameterError(f"Invalid IPv6 network {network6!r}: {err}",
                                    errors.ECODE_INVAL) from err


def _parse_ipv4(address: str, what: str) -> ipaddress.IPv4Address:
    if not isinstance(address, str):
        raise errors.ParameterError(f"Invalid {what} {address!r}: expected an IPv4 address",
                                    errors.ECODE_INVAL)
    try:
        return ipaddress.IPv4Address(address)
    except ValueError as err:
        raise errors.ParameterError(f"Invalid {what} {address!r}: not an IPv4 address",
                                    errors.ECODE_INVAL) from err


def check_address_in(address: str, network: ipaddress.IPv4Network, what: str) -> str:
    """Check that ``address`` is an IPv4 address inside ``network``; its normal form.

    ``what`` names the address in messages (``"gateway"``, ``"IP address"``).
    Raises :class:`~ganeti.errors.ParameterError` if it is malformed or
    outside the network (the message names both).
    """
    addr = _parse_ipv4(address, what)
    if addr not in network:
        raise errors.ParameterError(f"The {what} {addr} is not inside network {network}",
                                    errors.ECODE_INVAL)
    return str(addr)


def _load_bits(text: str, size: int, what: str, network: ipaddress.IPv4Network) -> bytearray:
    """A stored ``'0'``/``'1'`` string as a bytearray; ConfigurationError if malformed."""
    if not isinstance(text, str):
        raise errors.ConfigurationError(f"Network {network}: {what} is not a string: {text!r}")
    if not text:
        return bytearray(b"0" * size)
    if len(text) != size:
        raise errors.ConfigurationError(
            f"Network {network}: {what} has {len(text)} characters, expected {size}")
    try:
        bits = bytearray(text, "ascii")
    except UnicodeEncodeError as err:
        raise errors.ConfigurationError(
            f"Network {network}: {what} holds characters other than '0' and '1'") from err
    if bits.translate(None, b"01"):
        raise errors.ConfigurationError(
            f"Network {network}: {what} holds characters other than '0' and '1'")
    return bits


class AddressPool:
    """The address pool of one IPv4 network, built from its two stored strings.

    Raises :class:`~ganeti.errors.ParameterError` for a bad network and
    :class:`~ganeti.errors.ConfigurationError` for malformed strings.  An
    address reserved in both strings (possible in a hand-edited
    configuration) stays taken until both reservations are released.
    """

    network: ipaddress.IPv4Network

    def __init__(self, network: str, reservations: str = "", ext_reservations: str = "") -> None:
        self.network = check_network(network)
        self._base = int(self.network.network_address)
        self._size = self.network.num_addresses
        self._res = _load_bits(reservations, self._size, "reservations", self.network)
        self._ext = _load_bits(ext_reservations, self._size, "ext_reservations", self.network)
        taken = int(self._res, 2) | int(self._ext, 2)
        self._used = bytearray(format(taken, f"0{self._size}b"), "ascii").translate(_TO_MAP)
        self._taken = self._used.count(_TAKEN)
        #: every address below this index is taken
        self._hint = 0

    @classmethod
    def initialize(cls, network: str, gateway: str | None = None) -> AddressPool:
        """The pool of a new network: network, broadcast and gateway reserved externally.

        Raises :class:`~ganeti.errors.ParameterError` if the gateway is
        malformed, outside the network, or is its network or broadcast
        address.
        """
        pool = cls(network)
        net = pool.network
        pool.reserve(str(net.network_address), external=True)
        pool.reserve(str(net.broadcast_address), external=True)
        if gateway is not None:
            addr = check_address_in(gateway, net, "gateway")
            if pool.is_reserved(addr, external=True):
                kind = "network" if addr == str(net.network_address) else "broadcast"
                raise errors.ParameterError(f"The gateway {addr} is the {kind} address of"
                                            f" network {net}", errors.ECODE_INVAL)
            pool.reserve(addr, external=True)
        return pool

    def __repr__(self) -> str:
        return f"<AddressPool {self.network} free={self.free_count}/{self._size}>"

    # -- addresses -> indices ------------------------------------------------------

    def _index(self, address: str) -> int:
        """The index of ``address``; ParameterError if malformed or outside."""
        addr = _parse_ipv4(address, "IP address")
        index = int(addr) - self._base
        if not 0 <= index < self._size:
            raise errors.ParameterError(f"IP address {addr} is not inside network {self.network}",
                                        errors.ECODE_INVAL)
        return index

    def _address(self, index: int) -> str:
        return str(ipaddress.IPv4Address(self._base + index))

    @staticmethod
    def _kind(external: bool) -> str:
        return "externally" if external else "for an instance"

    # -- queries -------------------------------------------------------------------

    def contains(self, address: str) -> bool:
        """Whether ``address`` is inside the network (False for an IPv6 address).

        Raises :class:`~ganeti.errors.ParameterError` if it is not an IP address.
        """
        try:
            addr = ipaddress.ip_address(address)
        except ValueError as err:
            raise errors.ParameterError(f"Invalid IP address {address!r}",
                                        errors.ECODE_INVAL) from err
        return addr.version == 4 and addr in self.network

    def is_reserved(self, address: str, *, external: bool = False) -> bool:
        """Whether ``address`` is reserved for an instance (or, with ``external``, externally).

        Raises :class:`~ganeti.errors.ParameterError` if it is malformed or
        outside the network.
        """
        bits = self._ext if external else self._res
        return bits[self._index(address)] == _ONE

    @property
    def free_count(self) -> int:
        """How many addresses are in neither string."""
        return self._size - self._taken

    @property
    def reserved_count(self) -> int:
        """How many addresses are reserved (of either kind)."""
        return self._taken

    @property
    def is_full(self) -> bool:
        """Whether no address is free."""
        return self._taken == self._size

    @property
    def map(self) -> str:
        """One character per address: ``'X'`` reserved (either kind), ``'.'`` free."""
        return self._used.decode("ascii")

    def external_reservations(self) -> list[str]:
        """The externally reserved addresses, in address order."""
        found: list[str] = []
        index = self._ext.find(_ONE)
        while index >= 0:
            found.append(self._address(index))
            index = self._ext.find(_ONE, index + 1)
        return found

    def reservations_text(self) -> str:
        """The ``reservations`` string to store."""
        return self._res.decode("ascii")

    def ext_reservations_text(self) -> str:
        """The ``ext_reservations`` string to store."""
        return self._ext.decode("ascii")

    # -- changes -------------------------------------------------------------------

    def reserve(self, address: str, *, external: bool = False) -> None:
        """Reserve a free ``address`` for an instance (or, with ``external``, externally).

        Raises :class:`~ganeti.errors.ParameterError` if it is malformed,
        outside the network, or already reserved of either kind.
        """
        index = self._index(address)
        if self._used[index] == _TAKEN:
            kind = self._kind(self._ext[index] == _ONE)
            raise errors.ParameterError(
                f"IP address {self._address(index)} is already reserved {kind}"
                f" in network {self.network}", errors.ECODE_INVAL)
        (self._ext if external else self._res)[index] = _ONE
        self._used[index] = _TAKEN
        self._taken += 1

    def release(self, address: str, *, external: bool = False) -> None:
        """Release an address reserved for an instance (or, with ``external``, externally).

        Raises :class:`~ganeti.errors.ParameterError` if it is malformed,
        outside the network, or not reserved of that kind.
        """
        index = self._index(address)
        bits, other = (self._ext, self._res) if external else (self._res, self._ext)
        if bits[index] != _ONE:
            raise errors.ParameterError(
                f"IP address {self._address(index)} is not reserved {self._kind(external)}"
                f" in network {self.network}", errors.ECODE_INVAL)
        bits[index] = _ZERO
        if other[index] != _ONE:
            self._used[index] = _FREE
            self._taken -= 1
            if index < self._hint:
                self._hint = index

    def mark(self, address: str, used: bool) -> None:
        """Set whether ``address`` is reserved for an instance, whatever it was before
        (idempotent; an external reservation of it stays).

        Raises :class:`~ganeti.errors.ParameterError` if it is malformed or
        outside the network.
        """
        index = self._index(address)
        if (self._res[index] == _ONE) == used:
            return
        self._res[index] = _ONE if used else _ZERO
        if self._ext[index] == _ONE:
            return
        self._used[index] = _TAKEN if used else _FREE
        self._taken += 1 if used else -1
        if not used and index < self._hint:
            self._hint = index

    def generate_free(self) -> str:
        """The lowest free address (not reserved by this call).

        Raises :class:`~ganeti.errors.OpPrereqError` with ``ECODE_NORES``
        when the network has no free address.
        """
        index = self._used.find(_FREE, self._hint)
        if index < 0:
            self._hint = self._size
            raise errors.OpPrereqError(f"Network {self.network} has no free IP address",
                                       errors.ECODE_NORES)
        self._hint = index
        return self._address(index)
