"""Tests of ganeti/netpool.py: network checks, stored strings, reservations, allocation."""

from __future__ import annotations

import ipaddress

import pytest

from ganeti import errors
from ganeti.netpool import AddressPool, check_address_in, check_network, check_network6

NET = "192.0.2.0/29"      # 8 addresses: .0 network, .7 broadcast


def _bits(size: int, *indices: int) -> str:
    return "".join("1" if i in indices else "0" for i in range(size))


# --- networks -------------------------------------------------------------------------

@pytest.mark.parametrize("network", ["10.0.0.0/16", "10.0.0.0/24", "10.0.0.0/30"],
                         ids=["/16", "/24", "/30"])
def test_network_sizes_from_16_to_30_are_accepted(network: str) -> None:
    pool = AddressPool(network)
    assert pool.network == ipaddress.IPv4Network(network)
    assert len(pool.map) == pool.network.num_addresses == pool.free_count


@pytest.mark.parametrize("network", ["10.0.0.0/15", "10.0.0.0/8", "10.0.0.0/31",
                                     "10.0.0.0/32", "10.0.0.0"],
                         ids=["/15", "/8", "/31", "/32", "no-prefix"])
def test_network_sizes_outside_16_to_30_are_refused(network: str) -> None:
    with pytest.raises(errors.ParameterError) as exc:
        AddressPool(network)
    assert exc.value.ecode == errors.ECODE_INVAL
    assert "/16" in str(exc.value) and "/30" in str(exc.value)


@pytest.mark.parametrize("network", ["", "garbage", "10.0.0/24", "10.0.0.0/33",
                                     "2001:db8::/64", "10.0.0.256/24"],
                         ids=["empty", "word", "short", "bad-prefix", "ipv6", "bad-octet"])
def test_malformed_networks_are_refused(network: str) -> None:
    with pytest.raises(errors.ParameterError) as exc:
        check_network(network)
    assert exc.value.ecode == errors.ECODE_INVAL
    assert repr(network) in str(exc.value)


def test_network_with_host_bits_is_refused_with_a_suggestion() -> None:
    with pytest.raises(errors.ParameterError, match=r"did you mean 10\.0\.0\.0/24"):
        check_network("10.0.0.5/24")


def test_check_network_returns_the_parsed_network() -> None:
    assert check_network("10.1.0.0/255.255.0.0") == ipaddress.IPv4Network("10.1.0.0/16")


def test_check_network6() -> None:
    assert check_network6(None) is None
    assert check_network6("2001:0db8:0000::/64") == "2001:db8::/64"
    assert check_network6("2001:db8:1:2::/64") == "2001:db8:1:2::/64"
    assert check_network6("::/0") == "::/0"


@pytest.mark.parametrize("network6", ["", "fe80::1::/64", "10.0.0.0/24", "2001:db8::1/64",
                                      "2001:db8::/129"],
                         ids=["empty", "double-colon", "ipv4", "host-bits", "bad-prefix"])
def test_check_network6_refuses_malformed(network6: str) -> None:
    with pytest.raises(errors.ParameterError) as exc:
        check_network6(network6)
    assert exc.value.ecode == errors.ECODE_INVAL


def test_check_address_in() -> None:
    net = ipaddress.IPv4Network(NET)
    assert check_address_in("192.0.2.1", net, "gateway") == "192.0.2.1"
    with pytest.raises(errors.ParameterError, match=r"gateway 192\.0\.2\.8 .*192\.0\.2\.0/29"):
        check_address_in("192.0.2.8", net, "gateway")
    with pytest.raises(errors.ParameterError, match="gateway 'x'"):
        check_address_in("x", net, "gateway")


# --- a new network ----------------------------------------------------------------------

def test_initialize_reserves_network_and_broadcast() -> None:
    pool = AddressPool.initialize(NET)
    assert pool.external_reservations() == ["192.0.2.0", "192.0.2.7"]
    assert pool.ext_reservations_text() == "10000001"
    assert pool.reservations_text() == "00000000"
    assert pool.map == "X......X"
    assert (pool.free_count, pool.reserved_count) == (6, 2)


def test_initialize_reserves_the_gateway() -> None:
    pool = AddressPool.initialize(NET, gateway="192.0.2.1")
    assert pool.external_reservations() == ["192.0.2.0", "192.0.2.1", "192.0.2.7"]
    assert pool.is_reserved("192.0.2.1", external=True)
    assert not pool.is_reserved("192.0.2.1")
    assert pool.generate_free() == "192.0.2.2"


def test_initialize_refuses_a_gateway_outside() -> None:
    with pytest.raises(errors.ParameterError, match=r"192\.0\.2\.9.*192\.0\.2\.0/29") as exc:
        AddressPool.initialize(NET, gateway="192.0.2.9")
    assert exc.value.ecode == errors.ECODE_INVAL


@pytest.mark.parametrize("gateway,kind", [("192.0.2.0", "network"), ("192.0.2.7", "broadcast")])
def test_initialize_refuses_network_or_broadcast_as_gateway(gateway: str, kind: str) -> None:
    with pytest.raises(errors.ParameterError, match=f"{kind} address"):
        AddressPool.initialize(NET, gateway=gateway)


def test_initialize_refuses_a_bad_network() -> None:
    with pytest.raises(errors.ParameterError, match="/16"):
        AddressPool.initialize("10.0.0.0/31")


# --- stored strings ---------------------------------------------------------------------

def test_empty_strings_mean_all_free() -> None:
    pool = AddressPool(NET)
    assert pool.map == "........"
    assert pool.free_count == 8 and pool.reserved_count == 0
    assert pool.reservations_text() == pool.ext_reservations_text() == "00000000"
    assert pool.external_reservations() == []


def test_stored_strings_round_trip() -> None:
    pool = AddressPool.initialize(NET, gateway="192.0.2.1")
    pool.reserve("192.0.2.3")
    pool.reserve("192.0.2.5", external=True)
    again = AddressPool(str(pool.network), pool.reservations_text(), pool.ext_reservations_text())
    assert again.reservations_text() == "00010000"
    assert again.ext_reservations_text() == "11000101"
    assert again.map == pool.map == "XX.X.X.X"
    assert again.is_reserved("192.0.2.3") and not again.is_reserved("192.0.2.3", external=True)
    assert again.free_count == 3


def test_round_trip_of_a_16() -> None:
    res = _bits(65536, 5, 300, 65000)
    ext = _bits(65536, 0, 1, 65535)
    pool = AddressPool("10.20.0.0/16", res, ext)
    assert pool.reservations_text() == res and pool.ext_reservations_text() == ext
    assert pool.reserved_count == 6
    assert pool.external_reservations() == ["10.20.0.0", "10.20.0.1", "10.20.255.255"]
    assert pool.is_reserved("10.20.1.44")        # index 300


@pytest.mark.parametrize("res,ext", [("0000000", ""), ("", "000000001"), ("0000002x", ""),
                                     ("", "0000 000"), ("0000000é", ""), ("", "0_000000")],
                         ids=["short", "long", "bad-char", "space", "non-ascii", "underscore"])
def test_malformed_stored_strings_are_refused(res: str, ext: str) -> None:
    with pytest.raises(errors.ConfigurationError) as exc:
        AddressPool(NET, res, ext)
    assert "192.0.2.0/29" in str(exc.value)


def test_overlapping_stored_reservations_stay_taken_until_both_are_released() -> None:
    pool = AddressPool(NET, _bits(8, 3), _bits(8, 3))
    assert pool.reserved_count == 1 and pool.map == "...X...."
    pool.release("192.0.2.3")
    assert pool.map == "...X...." and pool.is_reserved("192.0.2.3", external=True)
    pool.release("192.0.2.3", external=True)
    assert pool.map == "........" and pool.free_count == 8


# --- reserve and release ----------------------------------------------------------------

def test_reserve_and_release_for_an_instance() -> None:
    pool = AddressPool.initialize(NET)
    pool.reserve("192.0.2.4")
    assert pool.is_reserved("192.0.2.4") and not pool.is_reserved("192.0.2.4", external=True)
    assert pool.map == "X...X..X" and pool.reserved_count == 3 and pool.free_count == 5
    assert pool.reservations_text() == "00001000"
    pool.release("192.0.2.4")
    assert not pool.is_reserved("192.0.2.4")
    assert pool.map == "X......X"


def test_reserve_and_release_externally() -> None:
    pool = AddressPool.initialize(NET)
    pool.reserve("192.0.2.2", external=True)
    assert pool.external_reservations() == ["192.0.2.0", "192.0.2.2", "192.0.2.7"]
    pool.release("192.0.2.2", external=True)
    assert pool.external_reservations() == ["192.0.2.0", "192.0.2.7"]


@pytest.mark.parametrize("first,second", [(False, False), (False, True), (True, False),
                                          (True, True)],
                         ids=["inst-inst", "inst-ext", "ext-inst", "ext-ext"])
def test_reserving_a_reserved_address_is_refused(first: bool, second: bool) -> None:
    pool = AddressPool(NET)
    pool.reserve("192.0.2.3", external=first)
    with pytest.raises(errors.ParameterError, match=r"192\.0\.2\.3 is already reserved") as exc:
        pool.reserve("192.0.2.3", external=second)
    assert exc.value.ecode == errors.ECODE_INVAL
    assert pool.reserved_count == 1


def test_releasing_an_unreserved_address_is_refused() -> None:
    pool = AddressPool(NET)
    with pytest.raises(errors.ParameterError, match=r"192\.0\.2\.3 is not reserved") as exc:
        pool.release("192.0.2.3")
    assert exc.value.ecode == errors.ECODE_INVAL


@pytest.mark.parametrize("reserved_external", [False, True], ids=["inst", "ext"])
def test_releasing_the_other_kind_is_refused(reserved_external: bool) -> None:
    pool = AddressPool(NET)
    pool.reserve("192.0.2.3", external=reserved_external)
    with pytest.raises(errors.ParameterError, match="not reserved"):
        pool.release("192.0.2.3", external=not reserved_external)
    assert pool.is_reserved("192.0.2.3", external=reserved_external)
    assert pool.reserved_count == 1


@pytest.mark.parametrize("call", ["reserve", "release", "is_reserved"])
def test_addresses_outside_the_network_are_refused(call: str) -> None:
    pool = AddressPool(NET)
    with pytest.raises(errors.ParameterError, match=r"192\.0\.2\.8 .*192\.0\.2\.0/29"):
        getattr(pool, call)("192.0.2.8")
    with pytest.raises(errors.ParameterError, match=r"10\.0\.0\.1 .*192\.0\.2\.0/29"):
        getattr(pool, call)("10.0.0.1", external=True)


@pytest.mark.parametrize("address", ["", "192.0.2", "192.0.2.300", "192.0.2.01", "2001:db8::1"])
def test_malformed_addresses_are_refused(address: str) -> None:
    pool = AddressPool(NET)
    with pytest.raises(errors.ParameterError, match="Invalid IP address"):
        pool.reserve(address)


def test_contains() -> None:
    pool = AddressPool(NET)
    assert pool.contains("192.0.2.0") and pool.contains("192.0.2.7")
    assert not pool.contains("192.0.2.8") and not pool.contains("2001:db8::1")
    with pytest.raises(errors.ParameterError):
        pool.contains("nonsense")


# --- allocation -------------------------------------------------------------------------

def test_generate_free_gives_the_lowest_free_address_in_order() -> None:
    pool = AddressPool.initialize(NET, gateway="192.0.2.1")
    got = []
    while not pool.is_full:
        addr = pool.generate_free()
        assert pool.generate_free() == addr           # not reserved by the call
        pool.reserve(addr)
        got.append(addr)
        assert len(got) <= 8
    assert got == ["192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6"]
    assert pool.free_count == 0 and pool.reserved_count == 8 and pool.map == "XXXXXXXX"


def test_generate_free_on_a_full_pool_is_refused() -> None:
    pool = AddressPool("192.0.2.0/30", "0110", "1001")
    assert pool.is_full
    with pytest.raises(errors.OpPrereqError) as exc:
        pool.generate_free()
    assert exc.value.ecode == errors.ECODE_NORES
    assert "192.0.2.0/30" in str(exc.value)


def test_generate_free_sees_released_addresses_below_the_last_one() -> None:
    pool = AddressPool.initialize(NET)
    for _ in range(4):
        pool.reserve(pool.generate_free())
    assert pool.generate_free() == "192.0.2.5"
    pool.release("192.0.2.2")
    assert pool.generate_free() == "192.0.2.2"
    pool.reserve("192.0.2.2")
    pool.release("192.0.2.4")
    assert pool.generate_free() == "192.0.2.4"


def test_generate_free_after_full_and_release() -> None:
    pool = AddressPool("192.0.2.0/30", "0110", "1001")
    with pytest.raises(errors.OpPrereqError):
        pool.generate_free()
    pool.release("192.0.2.2")
    assert not pool.is_full
    assert pool.generate_free() == "192.0.2.2"


def test_generate_free_skips_reservations_of_both_kinds() -> None:
    pool = AddressPool(NET, _bits(8, 0, 2), _bits(8, 1, 3))
    assert pool.generate_free() == "192.0.2.4"


def test_a_nearly_full_16() -> None:
    pool = AddressPool.initialize("10.0.0.0/16")
    for index in range(1, 60001):
        pool.reserve(str(ipaddress.IPv4Address(0x0A000000 + index)))
    assert pool.reserved_count == 60002 and pool.free_count == 65536 - 60002
    assert pool.generate_free() == "10.0.234.97"         # index 60001
    assert pool.map.count(".") == pool.free_count


def test_mark_sets_the_instance_bit_whatever_it_was() -> None:
    pool = AddressPool.initialize("192.0.2.0/29", "192.0.2.1")
    pool.mark("192.0.2.2", True)
    pool.mark("192.0.2.2", True)          # idempotent
    assert pool.is_reserved("192.0.2.2") and pool.free_count == 4
    assert pool.generate_free() == "192.0.2.3"
    pool.mark("192.0.2.1", True)          # the gateway, external: taken once
    assert pool.free_count == 4 and pool.is_reserved("192.0.2.1")
    pool.mark("192.0.2.1", False)
    assert pool.is_reserved("192.0.2.1", external=True) and pool.free_count == 4
    pool.mark("192.0.2.2", False)
    pool.mark("192.0.2.2", False)
    assert not pool.is_reserved("192.0.2.2") and pool.free_count == 5
    assert pool.generate_free() == "192.0.2.2"
    with pytest.raises(errors.ParameterError, match="not inside"):
        pool.mark("198.51.100.1", True)
