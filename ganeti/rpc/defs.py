"""The node RPC procedures, one declarative row each.

Both sides are generated from :data:`CALLS`: the master's typed
``call_<name>(node_or_nodes, *, <arguments>)`` stubs (``rpc/stubs.py``,
written by ``python -m ganeti.rpc.gen``, inherited by ``RpcRunner``) and the
node daemon's dispatch (``server/noded.py`` -> ``backend.get_function(name)``).
Only procedures listed here are reachable on a node.

Adding a procedure (doc/design/contracts.md, "Adding a node procedure"):

1. a row here: ``_row("node_powercycle", [("hypervisor", str)], FAST, "doc")``;
2. ``python -m ganeti.rpc.gen`` to regenerate ``rpc/stubs.py``;
3. a function ``node_powercycle(ctx, hypervisor)`` in one of the
   ``backend`` domain modules (listed in ``backend.DOMAIN_MODULES``).

``test/rpc/test_rpc_defs.py`` checks that every row has a backend function
whose parameters (after ``ctx``) are exactly the row's argument names;
``test/rpc/test_rpc_stubs.py`` that the committed stubs are fresh.

Timeout policy
--------------
Each row names a timeout *class*; the master waits at most that long for a
node's answer (connect, TLS, request and reply together):

========  =========  ===================================================
class     seconds    use for
========  =========  ===================================================
urgent    60         must answer at once (version, master_node_name)
fast      300        small local reads/writes (file upload, queue update)
normal    900        work that may touch disks or run scripts (hooks)
slow      3600       long local work (node verify on a big node)
4hrs      14400      e.g. disk wipes, exports
1day      86400      e.g. very long imports
========  =========  ===================================================

The numbers in :data:`TIMEOUTS` are defaults; ``RpcRunner(timeouts=...)``
overrides them per class (tests shorten them to fractions of a second).

Argument types
--------------
Arguments are positional on the wire (a JSON list) and named here (the
stubs take them by keyword).  A type is an annotation of the one validator
of every wire, :mod:`ganeti.wiretypes`: here ``str, int, float, bool, list,
dict``, or one of them ``| None``.  ``int`` refuses booleans, ``float``
accepts integers.  :func:`check_args` validates a decoded argument list
against a row with it; both sides use it.

Paths on the wire
-----------------
Node roots differ (a virtual cluster runs many nodes on one machine), so
file names travel in *canonical* form: the path as it would be with root
``/`` (``/var/lib/ganeti/config.data``).  :func:`to_canonical` and
:func:`from_canonical` convert; they are pure string functions.

Master epoch
------------
A master's runner sends ``POST /<procedure>?epoch=N&master=NAME``
(:func:`epoch_query`).  The node daemon checks the epoch before running a
procedure of :data:`FENCED_CALLS` (the ones that change the node's state)
and refuses one older than the newest it has accepted, with a message
starting with :data:`FENCED_PREFIX` (doc/design/failover.md, "Fencing").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ganeti import errors, wiretypes

__all__ = [
    "FENCED_CALLS", "FENCED_PREFIX", "OFFLINE_CALLS", "KEEPALIVE_CALLS", "KEEPALIVE_WRITE_CALLS", "epoch_query", "parse_epoch_query",
    "URGENT", "FAST", "NORMAL", "SLOW", "TMO_4HRS", "TMO_1DAY", "TIMEOUTS",
    "RpcCall", "CALLS", "check_args", "to_canonical", "from_canonical",
]

URGENT = "urgent"
FAST = "fast"
NORMAL = "normal"
SLOW = "slow"
TMO_4HRS = "4hrs"
TMO_1DAY = "1day"
TIMEOUTS: dict[str, float] = {
    URGENT: 60.0, FAST: 300.0, NORMAL: 900.0, SLOW: 3600.0,
    TMO_4HRS: 4 * 3600.0, TMO_1DAY: 86400.0,
}


ArgType = Any  # an annotation of ganeti.wiretypes


@dataclass(frozen=True)
class RpcCall:
    """One node procedure: its name, named typed arguments, timeout class, doc."""

    name: str
    args: tuple[tuple[str, ArgType], ...]
    timeout: str
    doc: str

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(a[0] for a in self.args)


def _row(name: str, args: list[tuple[str, ArgType]], timeout: str, doc: str) -> RpcCall:
    if timeout not in TIMEOUTS:
        raise ValueError(f"Unknown timeout class {timeout!r} for {name}")
    return RpcCall(name, tuple(args), timeout, doc)


_OPT_INT = int | None
_OPT_FLOAT = float | None

_ROWS = [
    # --- node ---
    _row("version", [], URGENT,
         "Protocol version of the node (constants.PROTOCOL_VERSION)."),
    _row("node_info", [("storage_units", list), ("hv_specs", list)], URGENT,
         "Memory, CPU and storage of the node: {name, bootid, memory_*, cpu_*,"
         " storage: [...], hv: [...]}."),
    _row("node_verify", [("checks", dict), ("cluster_name", str)], NORMAL,
         "Run the checks the master asks for ({check: argument}) and return"
         " {check: result}; see backend.node.node_verify for the check names."),
    _row("master_node_name", [], URGENT,
         "The master node name as this node's ssconf says."),
    _row("node_leave_cluster", [("modify_ssh_setup", bool)], NORMAL,
         "Remove the cluster files from the node and stop its node daemon"
         " after answering."),
    _row("node_powercycle", [("hypervisor", str), ("hvparams", dict)], NORMAL,
         "Hard-reset the node through its hypervisor once the answer is sent, then"
         " restart the node daemon; returns a message for the operator."),
    _row("run_oob", [("oob_program", str), ("command", str), ("remote_node", str),
                     ("timeout", int)], NORMAL,
         "Run the out-of-band program (a canonical path) with COMMAND REMOTE_NODE, killed"
         " after TIMEOUT seconds; returns its standard output (the master checks it), fails"
         " with its exit status and output (doc/oob.md)."),
    _row("set_watcher_pause", [("until", _OPT_FLOAT)], FAST,
         "Store the watcher pause-until timestamp on the node (null: not paused)."),
    # --- files ---
    _row("upload_file", [("file_name", str), ("content", str), ("mode", int),
                         ("uid", _OPT_INT), ("gid", _OPT_INT), ("mtime", _OPT_FLOAT)], FAST,
         "Write one allow-listed cluster file (canonical path) atomically."),
    _row("write_ssconf_files", [("values", dict)], FAST,
         "Write ssconf_<key> files ({key: text}) and remove stale ones."),
    # --- the cluster SSH key (doc/design/ssh.md, "Renewing the cluster key") ---
    _row("ssh_key_update", [("step", str), ("new_public", str), ("new_private", str | None),
                            ("retired_keys", list)], FAST,
         "One step of a cluster SSH key renewal: add (stage the new pair, authorize"
         " new_public), commit (the staged pair becomes the node's; retired_keys and the"
         " node's old key leave authorized_keys) or undo (drop the staged pair and"
         " new_public). -> None"),
    # --- job queue ---
    _row("jobqueue_update", [("file_name", str), ("content", str)], FAST,
         "Write a file inside the node's job queue directory."),
    _row("jobqueue_rename", [("rename", list)], FAST,
         "Rename [[old, new], ...] inside the node's job queue directory."),
    _row("jobqueue_sync", [("files", list), ("names", list), ("serial", int)], FAST,
         "Write [[file_name, content], ...] (the rest of the master's unarchived"
         " queue), then archive top-level job files with ids up to serial that are"
         " not in names (all the master's top-level file names) and clear a drain"
         " flag not in names; returns the archived names."),
    _row("jobqueue_purge", [], NORMAL,
         "Remove every job file (and the archive) from the node's queue."),
    _row("jobqueue_set_drain_flag", [("drain_flag", bool)], FAST,
         "Set or clear the queue drain flag on the node."),
    # --- hooks ---
    _row("hooks_runner", [("hpath", str), ("phase", str), ("env", dict)], NORMAL,
         "Run hooks/<hpath>-<phase>.d scripts in order; return"
         " [[script, HKR_*, output], ...]."),
    # --- test ---
    _row("test_delay", [("duration", float)], NORMAL,
         "Sleep for duration seconds (tests and opcode OpTestDelay)."),
    # --- instances (see doc/design/node-rpc-instances.md) ---
    # "instance" = to_data(Instance) with filled hvparams/beparams/osparams and
    # filled NIC nicparams, optionally "disks_info": [to_data(Disk), ...];
    # "disk" = to_data(Disk).  Runtime info: {memory, vcpus, state 0|1, time, hv_state}.
    _row("instance_start", [("instance", dict), ("disks", list), ("startup_paused", bool)],
         NORMAL, "Assemble the disks ([disk dict] in instance order) and start the"
         " instance; refuses a running instance. -> None"),
    _row("instance_shutdown", [("instance", dict), ("timeout", float)], NORMAL,
         "Stop the instance: soft for timeout seconds, then hard; not running is fine."
         " -> None"),
    _row("instance_reboot", [("instance", dict), ("reboot_type", str),
                             ("shutdown_timeout", float)], NORMAL,
         "Reboot soft|hard|full (full: stop, re-assemble instance['disks_info'], start)."
         " -> None"),
    _row("instance_info", [("instance_name", str), ("hypervisor", str), ("hvparams", dict)],
         URGENT, "Runtime info {memory, vcpus, state, time, hv_state} or None if unknown."),
    _row("all_instances_info", [("hypervisor_list", list), ("all_hvparams", dict)], URGENT,
         "{name: {memory, vcpus, state 0 running|1 shutdown, time, hv_state}} of every"
         " instance of the listed hypervisors."),
    _row("instance_list", [("hypervisor_list", list), ("all_hvparams", dict)], URGENT,
         "Sorted names of the instances the listed hypervisors know on the node."),
    _row("instance_console_info", [("instance", dict)], URGENT,
         "Console description {instance, kind, message, host, port, user, command}."),
    _row("instance_migratable", [("instance", dict)], FAST,
         "Raise unless the instance runs here and its disks_info disks exist. -> None"),
    _row("migration_info", [("instance", dict)], FAST,
         "Source: migration data (opaque dict) to pass to accept_instance and"
         " instance_finalize_migration_dst on the target."),
    _row("accept_instance", [("instance", dict), ("info", dict), ("target", str)], NORMAL,
         "Target: assemble the disks, prepare to receive the instance (info from"
         " migration_info, target = this node's address). -> dict for instance_migrate"
         " (e.g. the port) or None"),
    _row("instance_migrate", [("instance", dict), ("target_node", str),
                              ("target_address", str), ("live", bool),
                              ("target_info", dict)], SLOW,
         "Source: send the instance to the target node (target_info: what"
         " accept_instance answered). -> None"),
    _row("instance_finalize_migration_dst", [("instance", dict), ("info", dict),
                                             ("success", bool)], NORMAL,
         "Target: run the received instance (success) or drop it. -> None"),
    _row("instance_finalize_migration_src", [("instance", dict), ("success", bool),
                                             ("live", bool)], NORMAL,
         "Source: forget the instance (success) or resume it. -> None"),
    _row("instance_get_migration_status", [("instance", dict)], FAST,
         "Source: {status setup|active|completed|failed|cancelled|..., info, ram, mbps,"
         " downtime_ms, total_time_ms} (figures when known)."),
    # migration with local disks (doc/kvm.md, "Migration with disks"), between
    # accept_instance and instance_migrate, and before the finalize calls
    _row("instance_mirror_accept", [("instance", dict), ("address", str)], NORMAL,
         "Target: export the incoming instance's disks for writing on address."
         " -> {host, port, exports: [{device, size}]}"),
    _row("instance_mirror_start", [("instance", dict), ("target", dict)], NORMAL,
         "Source: copy every disk to the target's exports (the accept result), at"
         " migration_bandwidth. -> [device]"),
    _row("instance_mirror_status", [("instance", dict)], FAST,
         "Source: {status active|ready|failed, info, disks: [{device, cur, end, ready,"
         " speed}]}."),
    _row("instance_mirror_finish", [("instance", dict), ("success", bool)], NORMAL,
         "Source: complete the disk copies (success; the guest is stopped) or abort them."
         " -> None"),
    _row("instance_mirror_release", [("instance", dict)], FAST,
         "Target: stop exporting the disks (before the guest resumes there). -> None"),
    _row("instance_balloon_memory", [("instance", dict), ("memory", int)], FAST,
         "Set the memory (MiB) of the running instance. -> None"),
    _row("hotplug_supported", [("instance", dict)], FAST,
         "Raise unless devices of the running instance can be hotplugged now. -> None"),
    _row("hotplug_device", [("instance", dict), ("action", str), ("dev_type", str),
                            ("idx", int)], NORMAL,
         "Plug NIC/disk idx (dev_type nic|disk) of the instance in (action add; a disk"
         " is assembled first) or out (remove). -> None"),
    _row("instance_resize_disk", [("instance", dict), ("idx", int)], FAST,
         "Tell the running instance its disk idx (disks_info) grew. -> True if the guest"
         " was told, False if it sees the size at its next start"),
    _row("hypervisor_validate_params", [("hvname", str), ("hvparams", dict)], FAST,
         "Validate filled hvparams on the node; raise if bad. -> None"),
    # --- block devices ---
    _row("blockdev_create", [("disk", dict), ("size", int), ("owner_instance_name", str),
                             ("on_primary", bool), ("info", str), ("excl_stor", bool)], NORMAL,
         "Create the volume (size MiB); drbd: set up and connected, and on the primary"
         " made primary (the initial sync). -> {path (canonical), logical_id, size}"),
    _row("blockdev_remove", [("disk", dict)], NORMAL,
         "Remove the volume; a missing one is fine. -> None"),
    _row("blockdev_assemble", [("disk", dict), ("instance_name", str), ("as_primary", bool),
                               ("idx", int)], NORMAL,
         "Activate the volume as disk idx of the instance (as_primary: the instance runs"
         " here, a drbd side is made primary). -> {path, link, uri}"),
    _row("blockdev_shutdown", [("disk", dict)], NORMAL,
         "Deactivate the volume (data stays). -> None"),
    _row("blockdev_grow", [("disk", dict), ("amount", int), ("dryrun", bool),
                           ("backingstore", bool), ("excl_stor", bool)], NORMAL,
         "Grow the volume by amount MiB (dryrun: only check). -> new size MiB"),
    _row("blockdev_rename", [("devlist", list)], NORMAL,
         "Rename volumes [[disk, new_logical_id], ...]. -> [new_logical_id, ...]"),
    _row("blockdev_setinfo", [("disk", dict), ("info", str)], NORMAL,
         "Label the volume with info (plain: its originstname+ tag; other types keep"
         " nothing). -> None"),
    _row("blockdev_getdimensions", [("disks", list)], FAST,
         "[[size_bytes, spindles] or None (missing), ...] per disk dict."),
    _row("blockdev_getstatus", [("disks", list)], FAST,
         "[[size_bytes, active] or None (missing), ...] per [disk, instance_name, idx];"
         " active: the instance-disks/<instance>:<idx> link points at the volume."),
    _row("blockdev_find", [("disk", dict)], FAST,
         "{dev_path, size, major, minor, sync_percent, estimated_time, is_degraded,"
         " ldisk_status} or None when the volume does not exist; drbd adds"
         " drbd: {cstate, role, peer_role, disk, peer_disk, out_of_sync_kib}."),
    _row("blockdev_getmirrorstatus", [("disks", list)], FAST,
         "Per disk dict: this node's side of the mirror (blockdev_find's fields, drbd"
         " state included) or None (not drbd, or its volumes are missing here)."),
    _row("blockdev_close", [("disks", list)], NORMAL,
         "Make this node's side of the drbd disks secondary. -> None"),
    _row("drbd_disconnect_net", [("disks", list)], NORMAL,
         "Stop replicating the drbd disks (StandAlone; data stays). -> None"),
    _row("drbd_attach_net", [("disks", list), ("multimaster", bool)], NORMAL,
         "Connect the drbd disks to their peers again (multimaster: two primaries"
         " allowed, for a live migration). -> None"),
    _row("drbd_detach_local", [("disks", list)], NORMAL,
         "Let go of this node's volumes under the drbd disks (they run diskless, served"
         " by the peer; replace-disks). -> None"),
    _row("drbd_attach_local", [("disks", list), ("new_metadata", bool)], NORMAL,
         "Attach this node's volumes under the drbd disks (new_metadata: written fresh"
         " first, the peer copies everything over). -> None"),
    _row("drbd_adopt_local", [("disks", list)], NORMAL,
         "Set the drbd disks up over this node's existing data volumes (fresh metadata)"
         " and make this side primary with force: the peer copies everything over from"
         " here (modify -t drbd). -> None"),
    _row("drbd_node_info", [], FAST,
         "{minors: configured DRBD minors, helper: usermode helper or None, version:"
         " /proc/drbd's first line or None}."),
    _row("blockdev_snapshot", [("disk", dict), ("snap_size", int)], NORMAL,
         "Snapshot the volume (snap_size MiB of change room; plain only)."
         " -> logical_id of the snapshot (remove it with blockdev_remove)"),
    _row("blockdev_read_chunk", [("disk", dict), ("offset", int), ("length", int)], NORMAL,
         "Read <= 16 MiB at offset. -> {data base64 ('' if zero), length, zero, size, eof}"),
    _row("blockdev_write_chunk", [("disk", dict), ("offset", int), ("data", str)], NORMAL,
         "Write base64 data at offset (not past the end). -> bytes written"),
    _row("blockdev_wipe", [("disk", dict), ("offset", int), ("size", int)], SLOW,
         "Overwrite size bytes (<= 1 GiB) at offset with zeros, fsync'ed. -> bytes written"),
    _row("blockdev_checksum", [("disk", dict)], SLOW,
         "{sha1, size} of the whole volume (to verify a copy)."),
    _row("blockdev_convert", [("src", dict), ("dst", dict)], TMO_1DAY,
         "Copy the data of disk src into the existing, as large disk dst (both here),"
         " fsync'ed (modify -t between file-based templates). -> bytes copied"),
    _row("storage_list", [("su_name", str), ("su_args", list), ("name", str | None),
                          ("fields", list)], FAST,
         "Storage units of type su_name (file/sharedfile: su_args [directory]), only"
         " name if given: [[value per field], ...] (doc/storage.md)."),
    _row("volume_list", [("units", list)], FAST,
         "Disk files below storage directories [[type, directory], ...] and LVs of"
         " [[lvm-vg, vg], ...] (gnt-node volumes): [[directory or vg, relative name or"
         " lv, size in bytes], ...]."),
    _row("storage_modify", [("su_name", str), ("su_args", list), ("name", str),
                            ("changes", dict)], FAST,
         "Change fields of a storage unit: only an lvm-pv's allocatable (pvchange -x)."
         " -> None"),
    _row("storage_execute", [("su_name", str), ("su_args", list), ("name", str),
                             ("op", str)], NORMAL,
         "Run an operation on a storage unit: only fix-consistency of an lvm-vg"
         " (vgreduce --removemissing). -> None"),
    # --- ExtStorage providers (gnt-storage) ---
    _row("extstorage_diagnose", [], FAST,
         "[[name, path, status, diagnose, parameters [[name, doc], ...]], ...] of the"
         " ExtStorage search path, in search order."),
    # --- OS definitions ---
    _row("os_diagnose", [], FAST,
         "[[name, path, status, diagnose, variants, parameters, api_versions, trusted], ...]"
         " in search order."),
    _row("os_validate", [("required", bool), ("osname", str), ("checks", list),
                         ("osparams", dict), ("osparams_private", dict)], NORMAL,
         "Check the OS (and with checks ['parameters'] its params, osparams_private:"
         " the private and secret ones, scrubbed from the answer and the logs)."
         " -> True, or False when absent and not required"),
    _row("instance_os_add", [("instance", dict), ("reinstall", bool), ("debug", int)], SLOW,
         "Assemble instance['disks_info'] and run the OS create script. -> log path"),
    # --- image-based installs and cloud-init seeds (doc/images.md) ---
    _row("os_image_put_chunk", [("instance_name", str), ("offset", int), ("data", str)], NORMAL,
         "Write base64 data (<= 8 MiB) at offset of the instance's staged OS image (0:"
         " afresh). -> bytes written"),
    _row("os_image_fetch", [("instance_name", str), ("url", str), ("max_size", int)], SLOW,
         "Copy an http(s) OS image, or a file of this node (an absolute path), to the"
         " instance's staging file (at most max_size bytes; removed on failure)."
         " -> bytes fetched"),
    _row("os_image_inspect", [("instance_name", str)], SLOW,
         "{format (raw, qcow2 or None), size, virtual_size, sha256, what} of the staged"
         " OS image."),
    _row("os_image_write", [("instance_name", str), ("disk", dict), ("image_format", str)],
         SLOW, "qemu-img convert the staged OS image onto the disk, then remove it."
         " -> the disk's bytes"),
    _row("os_image_remove", [("instance_name", str)], FAST,
         "Remove the instance's staged OS image, if any. -> None"),
    _row("os_image_cache_stage", [("instance_name", str), ("sha256", str)], NORMAL,
         "Stage the node's cached copy of a store image (by its sha256) as the instance's"
         " OS image. -> True, or False when the node has no such copy"),
    _row("os_image_cache_keep", [("instance_name", str), ("sha256", str)], NORMAL,
         "Keep the instance's staged OS image (already checked) in the node's cache under"
         " its sha256. -> None"),
    _row("os_image_cache_remove", [("sha256", str)], FAST,
         "Remove the node's cached copy of a store image, if any. -> None"),
    _row("instance_seed_build", [("instance_name", str), ("instance_uuid", str),
                                 ("nics", list), ("osparams", dict),
                                 ("osparams_private", dict)], NORMAL,
         "(Re)build the instance's cloud-init NoCloud seed ISO from its NICs ([[mac,"
         " address, gateway], ...]) and OS parameters. -> its path"),
    _row("instance_seed_remove", [("instance_name", str)], FAST,
         "Remove the instance's cloud-init seed ISO, if any. -> None"),
    # --- kvm UEFI NVRAM and TPM state (doc/kvm.md, "UEFI and TPM") ---
    _row("instance_firmware_get", [("instance_uuid", str)], NORMAL,
         "The instance's UEFI NVRAM and TPM state on the node (base64 tar.gz), or None."),
    _row("instance_firmware_put", [("instance_uuid", str), ("data", str)], NORMAL,
         "Replace the instance's UEFI NVRAM and TPM state by data (instance_firmware_get's)."
         " -> None"),
    _row("instance_firmware_remove", [("instance_uuid", str)], FAST,
         "Remove the instance's UEFI NVRAM and TPM state, if any. -> None"),
    _row("instance_run_rename", [("instance", dict), ("old_name", str), ("debug", int)], SLOW,
         "Run the OS rename script (instance['name'] is the new name). -> log path"),
    # --- exports and disk transfers (doc/exports.md) ---
    _row("export_list", [], FAST,
         "Names of the finished exports in the node's export directory (sorted)."),
    _row("export_info", [("path", str)], FAST,
         "The config.ini text of an export (its name, or a canonical path inside the"
         " export directory)."),
    _row("export_remove", [("export", str)], NORMAL,
         "Remove the export directory of that name; refused when there is none. -> None"),
    _row("export_stage", [("instance_name", str), ("create", bool)], NORMAL,
         "Remove <instance>.new (an unfinished export); with create make it afresh."
         " -> canonical path or None"),
    _row("finalize_export", [("instance_name", str), ("config", str)], NORMAL,
         "Write config.ini into <instance>.new and rename it to <instance>, replacing an"
         " older export. -> canonical path"),
    _row("impexp_send", [("source", dict), ("dest", dict), ("host", str), ("port", int)],
         FAST, "Start a sender process streaming source (an instance disk or an export"
         " image) to the node daemon at host:port, where dest says where the data"
         " goes. -> transfer id"),
    _row("impexp_status", [("ids", list)], URGENT,
         "Per transfer id {state starting|running|done|failed, done, total, elapsed,"
         " error, size, sha256} or None."),
    _row("impexp_abort", [("transfer_id", str)], FAST,
         "Stop a running transfer. -> True when it was running"),
    _row("impexp_cleanup", [("transfer_id", str)], FAST,
         "Stop the transfer if needed and remove its state. -> None"),
    # --- moves between clusters (doc/exports.md, "Moves between clusters") ---
    _row("x509_cert_create", [("validity", int)], FAST,
         "Make a transfer key and self-signed certificate valid that many seconds."
         " -> [key name, certificate PEM]"),
    _row("x509_cert_remove", [("name", str)], FAST,
         "Remove a transfer key; refused when there is none. -> None"),
    _row("x509_cert_check", [("name", str)], FAST,
         "Refuse a transfer key that is not here or has expired. -> None"),
    _row("impexp_listen", [("dest", dict), ("host", str), ("key_name", str), ("ca", str),
                           ("magic", str), ("timeout", float)], FAST,
         "Listen on host for the sender of a remote import (TLS with the key key_name,"
         " trusting only the certificate ca; it must name magic) writing into dest."
         " -> {id (a transfer id), port}"),
    # --- master-side throughput (doc/design/replication.md) ---
    _row("jobqueue_update_many", [("files", list)], FAST,
         "Write [[file_name, content], ...] inside the node's job queue directory"
         " (all names checked first; each file atomically, in order)."),
    _row("hooks_list", [], URGENT,
         "Names of the non-empty <hpath>-<phase>.d directories under the node's"
         " hooks directory (sorted)."),
    _row("replicate_state", [("config", list | None), ("ssconf_values", dict | None),
                             ("queue_files", list)], FAST,
         "One replication push to a master candidate: write config ([canonical name,"
         " content] or null), ssconf values (or null) and queue files like"
         " upload_file, write_ssconf_files and jobqueue_update_many. -> hooks_list"),
    # --- master candidate and master roles ---
    _row("node_demote_from_mc", [], FAST,
         "No longer a master candidate: back up config.data (config.data.backup-<time>)"
         " and remove it; refused on the master. -> canonical backup path or None"),
    _row("node_activate_master_ip", [("master_params", dict),
                                     ("use_external_mip_script", bool)], FAST,
         "Run the master IP setup script 'start' ({uuid, name, ip, netmask, netdev,"
         " ip_family}); empty netdev: no-op. -> None"),
    _row("node_deactivate_master_ip", [("master_params", dict),
                                       ("use_external_mip_script", bool)], FAST,
         "Run the master IP setup script 'stop' (same arguments). -> None"),
    # --- master vote and fencing (doc/design/failover.md) ---
    _row("master_vote_info", [], URGENT,
         "What the node believes: {master, candidate, epoch, reserved_job_id,"
         " reserved_serial} and, on a"
         " master candidate, config_serial, job_id (highest, archive included), queue_serial."),
    _row("jobqueue_log", [], URGENT,
         "This node's job log: {ids: [[first, last], ...] of every job file in the queue"
         " and its archive, serial: the queue serial}."),
    _row("jobqueue_fetch", [("job_ids", list)], FAST,
         "[[id, 'queue'|'archive', content], ...] of those job ids held here (at most"
         " about 8 MiB per answer; ask again for the rest)."),
    _row("master_lease", [("master", str), ("epoch", int), ("reserve_job_id", int),
                          ("reserve_serial", int)], URGENT,
         "Confirm the master's lease: accept its epoch (refused if older than one"
         " accepted) and store its job id and config serial reservations."
         " -> {master (ssconf), epoch}"),
    _row("master_claim", [("master", str), ("epoch", int), ("seen", int)], URGENT,
         "Promise the node to a taker of epoch (refused when the node accepted an epoch"
         " newer than seen, or another taker's claim holds); epoch 0 releases the taker's"
         " claim; a claim ends after 60 s or once its epoch is accepted."
         " -> {epoch, claim_epoch, claim_master}"),
    _row("master_drain", [("seconds", float)], URGENT,
         "The master daemon on the node refuses submissions for seconds (0: accepts again)"
         " and flushes its replication. -> {last_job_id, flushed}"),
    # --- node loss recovery (doc/ha.md, "Node loss recovery") ---
    _row("ha_node_reachable", [("node", str), ("address", str), ("timeout", float)], URGENT,
         "Whether this node reaches the node daemon of node (at address; its version asked,"
         " waiting at most timeout seconds). -> {reachable, error}"),
    _row("ha_lease", [("lease", float), ("instances", list)], URGENT,
         "The master's probe and this node's self-fence lease: from now, lease seconds"
         " (0: no lease, released) covering instances ([{name, hypervisor}]: the ones the"
         " master would recover); when it runs out unrenewed the node stops those still"
         " running. -> {lease, fenced}"),
    _row("ha_lease_relay", [("node", str), ("address", str), ("master", str), ("lease", float),
                            ("instances", list), ("timeout", float)], URGENT,
         "Forward the master's ha_lease to node (at address), which the master cannot reach"
         " itself: only for the master whose epoch this node accepted (the request's, fenced)"
         " and its ssconf names, with that epoch, the lease shortened by the time spent here,"
         " waiting at most timeout seconds. -> node's {lease, fenced}"),
    _row("node_stop_master", [("master_params", dict), ("use_external_mip_script", bool)],
         FAST, "Stop ganeti-rapi and the master daemon on the node, then take the master IP"
         " down. -> {masterd: stopped?, rapi: stopped?, ip: error or null}"),
]

#: procedures that change a node's state: the node refuses them when they
#: carry an older master epoch than the newest it accepted
FENCED_CALLS = frozenset([
    "upload_file", "write_ssconf_files", "jobqueue_update", "jobqueue_rename",
    "jobqueue_sync", "jobqueue_purge", "jobqueue_set_drain_flag", "jobqueue_update_many",
    "replicate_state", "node_demote_from_mc", "node_activate_master_ip",
    "node_deactivate_master_ip", "node_stop_master", "master_lease", "node_leave_cluster",
    "set_watcher_pause", "run_oob", "ssh_key_update", "ha_lease", "ha_lease_relay",
])
#: procedures sent to nodes marked offline too (the runner answers every
#: other one for such a node itself): an offline node still counts among
#: the master lease's voters until it is recorded powered off
#: (doc/design/failover.md, "Lease voters")
OFFLINE_CALLS = frozenset(["master_lease"])
#: how a node's refusal of an old epoch starts (the master recognises it)
FENCED_PREFIX = "Fenced:"
#: read-only procedures that may share a kept connection, and so a node
#: daemon child, with earlier requests of this set (doc/protocols/rpc.md,
#: "Kept connections"); every other procedure runs in a fresh child of its own
KEEPALIVE_CALLS = frozenset(["version", "node_info", "all_instances_info", "instance_list"])
#: the job-queue replication writes that may also share a kept connection
#: (doc/protocols/rpc.md, "Kept connections"): fenced per request like on a
#: connection of their own, no after-response work, and the same request
#: sent again at once (its kept connection closed before the reply) changes
#: nothing more, as the master sends a candidate's writes one at a time
KEEPALIVE_WRITE_CALLS = frozenset(["jobqueue_update_many", "jobqueue_rename",
                                   "jobqueue_set_drain_flag"])

CALLS: dict[str, RpcCall] = {row.name: row for row in _ROWS}


def check_args(call: RpcCall, args: Any) -> str | None:
    """Why ``args`` does not fit ``call`` (a readable message), or None if it does."""
    if not isinstance(args, (list, tuple)):
        return f"{call.name}: arguments must be a JSON list, not {type(args).__name__}"
    if len(args) != len(call.args):
        return (f"{call.name}: expected {len(call.args)} argument(s)"
                f" ({', '.join(call.arg_names) or 'none'}), got {len(args)}")
    for (name, tp), value in zip(call.args, args):
        try:
            wiretypes.check_value(tp, value, name, max_items=None)
        except errors.ParameterError as exc:
            return f"{call.name}: {exc.args[0]}"
    return None


def epoch_query(epoch: int, master: str) -> str:
    """The query string a master adds to a procedure name: ``?epoch=N&master=NAME``."""
    from urllib.parse import quote
    return f"?epoch={int(epoch)}&master={quote(master, safe='')}"


def parse_epoch_query(target: str) -> tuple[int, str]:
    """``(epoch, master)`` from a request target (``(0, "")`` without one).

    A malformed epoch counts as 0 (the oldest): it can never pass a fence.
    """
    _, sep, query = target.partition("?")
    if not sep:
        return 0, ""
    from urllib.parse import parse_qs
    fields = parse_qs(query, max_num_fields=4)
    try:
        epoch = int(fields.get("epoch", ["0"])[0])
    except ValueError:
        epoch = 0
    return max(epoch, 0), fields.get("master", [""])[0][:255]


def to_canonical(root: str, path: str) -> str:
    """The canonical (root ``/``) form of ``path`` lying below ``root``.

    ``to_canonical("/tmp/n1", "/tmp/n1/var/lib/ganeti/x")`` ->
    ``"/var/lib/ganeti/x"``.  Raises ``ValueError`` when ``path`` is not
    below ``root``.
    """
    root = os.path.normpath(os.path.abspath(root))
    path = os.path.normpath(os.path.abspath(path))
    if root == os.sep:
        return path
    if path != root and not path.startswith(root + os.sep):
        raise ValueError(f"{path} is not below {root}")
    return os.sep + os.path.relpath(path, root) if path != root else os.sep


def from_canonical(root: str, canonical: str) -> str:
    """The path of canonical ``canonical`` on a node whose root is ``root``.

    The result is normalised; ``..`` cannot climb above ``root``.
    """
    rel = os.path.normpath(os.sep + canonical).lstrip(os.sep)
    return os.path.join(os.path.abspath(root), rel) if rel not in ("", ".") else os.path.abspath(root)
