"""Ganeti 3.0's query2 field names that our resources lack (doc/compat.md, "Query fields").

Upstream's clients ask for fields by upstream's names.  Three kinds of
additions, applied to the ``instance``, ``node``, ``group``, ``cluster``
and ``os`` tables by :func:`extend`:

- *aliases*: an upstream name for a field we have (``be/memory`` is
  ``be/maxmem``, ``cluster_name`` is ``name``), with upstream's title;
- *node parameters* ``ndp/<key>`` of nodes and groups, read from the
  filled ``ndparams`` field;
- fields with one value for every item here (``forthcoming`` is false:
  no forthcoming instances exist; an OS is ``trusted``);
- everything else upstream defines (names, titles and kinds are facts of
  Ganeti 3.0.2) answers with the "unavailable" cell status (3), never an
  unknown-field error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ganeti import constants, query

__all__ = ["ALIASES", "NDP_FIELDS", "CONSTANT", "UNAVAILABLE", "extend"]

_T, _B, _N, _U, _O = (constants.QFT_TEXT, constants.QFT_BOOL, constants.QFT_NUMBER,
                      constants.QFT_UNIT, constants.QFT_OTHER)

#: resource -> {upstream name: (our field, upstream title)}
ALIASES: dict[str, dict[str, tuple[str, str]]] = {
    constants.QR_INSTANCE: {
        "be/memory": ("be/maxmem", "ConfigMaxMem"), "vcpus": ("be/vcpus", "ConfigVCPUs"),
        "sda_size": ("disk.size/0", "Disk/0"), "sdb_size": ("disk.size/1", "Disk/1"),
        "mac": ("nic.mac/0", "NicMAC/0"), "ip": ("nic.ip/0", "NicIP/0"),
        "nic_mode": ("nic.mode/0", "NicMode/0"), "nic_link": ("nic.link/0", "NicLink/0"),
        "nic_network": ("nic.network/0", "NicNetwork/0"),
    },
    constants.QR_CLUSTER: {"cluster_name": ("name", "Name")},
}

#: ``ndp/<key>`` of nodes and groups: key -> (upstream title, kind)
NDP_FIELDS: dict[str, tuple[str, str]] = {
    "cpu_speed": ("ndp/cpu_speed", constants.QFT_FLOAT),
    "exclusive_storage": ("ExclusiveStorage", _B), "oob_program": ("OutOfBandProgram", _O),
    "ovs": ("OpenvSwitch", _B), "ovs_link": ("OpenvSwitchLink", _O),
    "ovs_name": ("OpenvSwitchName", _O), "spindle_count": ("SpindleCount", _N),
    "ssh_port": ("ndp/ssh_port", _N),
}


def _indexed(stem: str, title: str, kind: str, count: int) -> dict[str, tuple[str, str]]:
    return {f"{stem}/{i}": (f"{title}/{i}", kind) for i in range(count)}


def _hv(kind: str, names: str) -> dict[str, tuple[str, str]]:
    titles = {"pae": "PAE", "pci_pass": "pci_pass"}
    return {f"hv/{n}": (titles.get(n, f"hv/{n}"), kind) for n in names.split()}


#: resource -> {upstream name we cannot fill: (upstream title, kind)}
UNAVAILABLE: dict[str, dict[str, tuple[str, str]]] = {
    constants.QR_INSTANCE: {
        **_indexed("disk.name", "DiskName", _T, 16),
        **_indexed("disk.spindles", "DiskSpindles", _N, 16),
        **_indexed("disk.uuid", "DiskUUID", _T, 16),
        **_indexed("nic.bridge", "NicBridge", _T, 8),
        **_indexed("nic.vlan", "NicVLAN", _T, 8),
        "bridge": ("NicBridge/0", _T),
        "nic.vlans": ("NIC_VLANs", _O),
        "pnode.group.uuid": ("PrimaryNodeGroupUUID", _T),
        "snodes.group": ("SecondaryNodesGroups", _O),
        "snodes.group.uuid": ("SecondaryNodesGroupsUUID", _O),
        **_hv(_O, "blockdev_prefix bootloader_args bootloader_path cdrom2_image_path"
                  " cdrom_disk_type cpuid device_model devices disk_aio disk_discard"
                  " drop_capabilities extra_cgroups extra_config floppy_image_path init_script"
                  " kvm_extra kvm_flag migration_caps pci_pass scsi_controller_type soundhw"
                  " spice_bind spice_image_compression spice_jpeg_wan_compression"
                  " spice_password_file spice_streaming_video spice_tls_ciphers"
                  " spice_zlib_glz_wan_compression usb_devices vga vif_script vif_type"),
        **_hv(_N, "cpu_cap cpu_cores cpu_sockets cpu_threads cpu_weight kvm_pci_reservations"
                  " num_ttys spice_ip_version startup_timeout virtio_net_queues"),
        **_hv(_B, "pae spice_playback_compression spice_use_tls spice_use_vdagent use_bootloader"
                  " use_guest_agent use_localtime viridian vnet_hdr"),
    },
    constants.QR_NODE: {"disk_state": ("DiskState", _O), "hv_state": ("HypervisorState", _O)},
    constants.QR_CLUSTER: {"vcs_version": ("VCSVersion", _T),
                           "watcher_pause": ("WatcherPause", constants.QFT_TIMESTAMP)},
}

#: resource -> {upstream name: (title, kind, the value every item has here)}
CONSTANT: dict[str, dict[str, tuple[str, str, Any]]] = {
    # no forthcoming (reserved, not yet created) instances exist in this project
    constants.QR_INSTANCE: {"forthcoming": ("Forthcoming", _B, False)},
    # every OS of ours runs its scripts directly (the node rows say trusted)
    constants.QR_OS: {"trusted": ("Trusted", _B, True)},
}

_DOC = "Ganeti 3.0 field this cluster cannot fill yet (always unavailable)"


def _unavailable(ctx: Any, item: Any) -> Any:
    return query.UNAVAIL


def _constant(value: Any) -> query.Getter:
    def get(ctx: Any, item: Any) -> Any:
        return value
    return get


def _ndp_getter(base: query.FieldDef, key: str) -> query.Getter:
    def get(ctx: Any, item: Any) -> Any:
        value = base.getter(ctx, item)
        if isinstance(value, query.fields.Sentinel):
            return value
        return value.get(key, query.UNAVAIL) if isinstance(value, dict) else query.UNAVAIL
    return get


def extend(what: str, table: query.FieldTable) -> query.FieldTable:
    """``table`` plus Ganeti 3.0's names for ``what`` (ours win on a clash)."""
    added: list[query.FieldDef] = []
    for name, (ours, title) in ALIASES.get(what, {}).items():
        added.append(dataclasses.replace(table[ours], name=name, title=title,
                                         doc=f"{table[ours].doc} (Ganeti 3.0 name of '{ours}')"))
    if what in (constants.QR_NODE, constants.QR_GROUP) and "ndparams" in table:
        base = table["ndparams"]
        for key, (title, kind) in NDP_FIELDS.items():
            added.append(dataclasses.replace(base, name=f"ndp/{key}", title=title, kind=kind,
                                             doc=f"Node parameter '{key}'",
                                             getter=_ndp_getter(base, key)))
    for name, (title, kind, value) in CONSTANT.get(what, {}).items():
        added.append(query.FieldDef(name, title, kind, f"{title} (always {value!r} here)",
                                    _constant(value)))
    for name, (title, kind) in UNAVAILABLE.get(what, {}).items():
        added.append(query.FieldDef(name, title, kind, _DOC, _unavailable))
    return query.make_table([*table.values(), *(f for f in added if f.name not in table)])
