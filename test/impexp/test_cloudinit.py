"""The NoCloud seed documents (ganeti/impexp/cloudinit.py): exact texts."""

from __future__ import annotations

import pytest

from ganeti.impexp import cloudinit
from ganeti.impexp.cloudinit import SeedNic


def test_meta_data():
    assert cloudinit.meta_data("1b2c-uuid", "web1.example.com") == (
        'instance-id: "1b2c-uuid"\nlocal-hostname: "web1.example.com"\n')


def test_network_config_static_and_dhcp():
    text = cloudinit.network_config([
        SeedNic(mac="AA:00:00:11:22:33", address="192.0.2.10/24", gateway="192.0.2.1"),
        SeedNic(mac="aa:00:00:44:55:66"),
        SeedNic(mac="aa:00:00:77:88:99", address="198.51.100.7/32"),
    ])
    assert text == (
        "version: 2\n"
        "ethernets:\n"
        "  nic0:\n"
        "    match:\n"
        '      macaddress: "aa:00:00:11:22:33"\n'
        "    dhcp4: false\n"
        "    addresses:\n"
        '      - "192.0.2.10/24"\n'
        '    gateway4: "192.0.2.1"\n'
        "  nic1:\n"
        "    match:\n"
        '      macaddress: "aa:00:00:44:55:66"\n'
        "    dhcp4: true\n"
        "  nic2:\n"
        "    match:\n"
        '      macaddress: "aa:00:00:77:88:99"\n'
        "    dhcp4: false\n"
        "    addresses:\n"
        '      - "198.51.100.7/32"\n')


def test_network_config_without_nics():
    assert cloudinit.network_config([]) == "version: 2\nethernets: {}\n"


def test_user_data_from_parameters():
    text = cloudinit.user_data({
        "user": "alice",
        "ssh_authorized_keys": "ssh-ed25519 AAAAC3Nz alice@a; ssh-rsa AAAAB3 \"quoted\"",
        "packages": "nginx  curl",
        "other": "ignored"})
    assert text == (
        "#cloud-config\n"
        "system_info:\n"
        "  default_user:\n"
        '    name: "alice"\n'
        "ssh_authorized_keys:\n"
        '  - "ssh-ed25519 AAAAC3Nz alice@a"\n'
        '  - "ssh-rsa AAAAB3 \\"quoted\\""\n'
        "packages:\n"
        '  - "nginx"\n'
        '  - "curl"\n')


def test_user_data_empty_and_private_document():
    assert cloudinit.user_data({}) == "#cloud-config\n"
    doc = "#cloud-config\nruncmd:\n  - [touch, /x]\n"
    assert cloudinit.user_data({"user": "bob"}, doc) == doc


def test_seed_nics_take_the_networks_prefix_and_gateway():
    nics = cloudinit.seed_nics(
        [{"mac": "aa:00:00:00:00:01", "ip": "10.1.2.3", "network": "net-uuid"},
         {"mac": "aa:00:00:00:00:02", "ip": "10.9.9.9", "network": None},
         {"mac": "aa:00:00:00:00:03", "ip": None}],
        {"net-uuid": {"network": "10.1.0.0/16", "gateway": "10.1.0.1"}})
    assert nics == [SeedNic("aa:00:00:00:00:01", "10.1.2.3/16", "10.1.0.1"),
                    SeedNic("aa:00:00:00:00:02", "10.9.9.9/32", None),
                    SeedNic("aa:00:00:00:00:03")]


def test_network_config_gives_static_nics_the_dns_of_the_os_parameters():
    nics = [SeedNic(mac="aa:00:00:11:22:33", address="192.0.2.10/24", gateway="192.0.2.1"),
            SeedNic(mac="aa:00:00:44:55:66")]
    text = cloudinit.network_config(nics, {"dns_servers": "192.0.2.53; 2001:db8::53",
                                           "dns_search": "example.com lab.example.com"})
    assert text == (
        "version: 2\n"
        "ethernets:\n"
        "  nic0:\n"
        "    match:\n"
        '      macaddress: "aa:00:00:11:22:33"\n'
        "    dhcp4: false\n"
        "    addresses:\n"
        '      - "192.0.2.10/24"\n'
        '    gateway4: "192.0.2.1"\n'
        "    nameservers:\n"
        "      addresses:\n"
        '        - "192.0.2.53"\n'
        '        - "2001:db8::53"\n'
        "      search:\n"
        '        - "example.com"\n'
        '        - "lab.example.com"\n'
        "  nic1:\n"
        "    match:\n"
        '      macaddress: "aa:00:00:44:55:66"\n'
        "    dhcp4: true\n")
    # no DNS parameters: no nameservers key
    assert "nameservers" not in cloudinit.network_config(nics, {"user": "debian"})


def test_dns_servers_must_be_addresses():
    cloudinit.check_dns_params({"dns_servers": "192.0.2.53 2001:db8::1"})
    cloudinit.check_dns_params({})
    with pytest.raises(ValueError, match="'ns1.example.com' is not an IP address"):
        cloudinit.check_dns_params({"dns_servers": "192.0.2.53 ns1.example.com"})
