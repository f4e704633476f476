"""Image-based installs and cloud-init seeds, the master's side (doc/images.md).

The image is the OS parameter ``os-image`` (Ganeti 3.0's name, set by
``--os-image`` or ``-O os-image=``), its expected digest the OS parameter
``os-image-checksum`` (``sha256:HEX``).  A file of the master is checked
here (format, size, checksum) before anything is made, then pushed to the
primary node chunk by chunk; a URL is fetched by the node, and checked once
staged there, still before the disks exist.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import TYPE_CHECKING, Any

from ganeti import constants, errors
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib import os_image_store
from ganeti.impexp import cloudinit, imagestore, osimage
from ganeti.objects import Instance
from ganeti.pathutils import Paths

if TYPE_CHECKING:
    from ganeti.cmdlib.base import LogicalUnit

__all__ = ["IMAGE_PARAM", "CHECKSUM_PARAM", "without_image_params", "image_of", "check_local_image",
           "check_store_name", "check_seed_params", "check_cloud_init_source", "stage_image", "push_image",
           "write_image", "build_seed", "drop_staged", "rename_seed", "remove_seed"]

IMAGE_PARAM = osimage.OS_IMAGE_PARAM
CHECKSUM_PARAM = osimage.CHECKSUM_PARAM
PUSH_CHUNK = 4 * 1024 * 1024
MIB = 1024 * 1024


def without_image_params(osparams: dict[str, Any]) -> dict[str, Any]:
    """The OS parameters an OS definition checks: all but the image's own
    (an OS need not declare ``os-image``, as in Ganeti 3.0)."""
    return {k: v for k, v in osparams.items() if k not in (IMAGE_PARAM, CHECKSUM_PARAM)}


def image_of(osparams: dict[str, Any]) -> str | None:
    value = osparams.get(IMAGE_PARAM)
    return str(value) if value else None


def _check_facts(image: str, facts: dict[str, Any], checksum: str | None,
                 disk_mib: int) -> None:
    if facts["format"] is None:
        raise errors.OpPrereqError(f"OS image {image} is neither a qcow2 image nor a raw"
                                   " disk image (no partition table or file system found)",
                                   errors.ECODE_INVAL)
    if checksum is not None and facts["sha256"] != osimage.parse_checksum(checksum):
        raise errors.OpPrereqError(f"OS image {image}: checksum mismatch (expected"
                                   f" {checksum}, got sha256:{facts['sha256']})",
                                   errors.ECODE_INVAL)
    if facts["virtual_size"] > disk_mib * MIB:
        raise errors.OpPrereqError(
            f"OS image {image} ({facts['virtual_size']} bytes) is larger than the first"
            f" disk ({disk_mib} MiB)", errors.ECODE_INVAL)


def check_store_name(image: str | None, paths: Paths) -> None:
    """Refuse an ``os-image`` naming a store image the store does not have
    (also when nothing is installed now: the name is kept for a reinstall)."""
    if image is not None and imagestore.kind_of(image) == "store":
        os_image_store.lookup(paths, image)


def check_cloud_init_source(hvparams: dict[str, Any], osparams: dict[str, Any],
                            nic_ips: list[str | None]) -> None:
    """Refuse ``cloud_init_source=metad`` (the filled kvm ``hvparams``) for an image-based
    instance none of whose NICs has an IP address: ``ganeti-metad`` knows an instance
    only by the address it asks from, so its guest would get no data (doc/images.md,
    "Where the guest reads it")."""
    if hvparams.get("cloud_init_source") != constants.HT_KVM_CLOUD_INIT_METAD:
        return
    if image_of(osparams) is not None and not any(nic_ips):
        raise errors.OpPrereqError(
            "cloud_init_source=metad needs a NIC with an IP address: the metadata service"
            " recognises an instance by the address it asks from", errors.ECODE_INVAL)


def check_seed_params(osparams: dict[str, Any]) -> None:
    """Refuse OS parameters the seed cannot carry (a ``dns_servers`` entry that is no
    IP address; doc/images.md, "cloud-init")."""
    try:
        cloudinit.check_dns_params(osparams)
    except ValueError as exc:
        raise errors.OpPrereqError(f"Invalid OS parameter {exc}", errors.ECODE_INVAL) from None


def _store_facts(entry: dict[str, Any]) -> dict[str, Any]:
    return {"format": entry["format"], "size": entry["size"], "sha256": entry["sha256"],
            "virtual_size": entry["virtual_size"], "what": f"{entry['format']} image"}


def check_local_image(image: str, checksum: str | None, disk_mib: int,
                      paths: Paths | None = None) -> dict[str, Any]:
    """Check a master's image file or store image (``paths``: the master's);
    its facts (:func:`osimage.facts`), or ``{}`` for a URL or a path the
    master does not have (the node's, checked there).  A store image's facts
    are its index entry's (its file is checked on the node when staged)."""
    if checksum is not None:
        osimage.parse_checksum(checksum)
    kind = imagestore.kind_of(image)
    if kind == "url":
        return {}
    if kind == "store":
        if paths is None:
            raise errors.OpPrereqError(f"OS image {image}: no image store here",
                                       errors.ECODE_INVAL)
        facts = _store_facts(os_image_store.lookup(paths, image))
        _check_facts(image, facts, checksum, disk_mib)
        return facts
    if not os.path.isabs(image):
        raise errors.OpPrereqError(f"OS image must be an absolute path or a URL: {image}",
                                   errors.ECODE_INVAL)
    if not os.path.lexists(image):
        return {}       # not the master's: the primary node's file (Ganeti 3.0's meaning)
    digest = hashlib.sha256()
    try:
        with open(image, "rb") as fh:
            header = fh.read(osimage.HEADER_SIZE)
            digest.update(header)
            for block in iter(lambda: fh.read(MIB), b""):
                digest.update(block)
            size = fh.tell()
    except OSError as exc:
        raise errors.OpPrereqError(f"Cannot read OS image {image}: {exc.strerror}",
                                   errors.ECODE_INVAL) from None
    facts = osimage.facts(header, size, digest.hexdigest())
    _check_facts(image, facts, checksum, disk_mib)
    return facts


def push_image(lu: LogicalUnit[Any], node: str, instance_name: str, image: str, path: str,
          feedback_fn: FeedbackFn) -> None:
    """Send the master's file ``path`` to the node's staging file, chunk by chunk."""
    rpc = lu.require_rpc()
    size = os.path.getsize(path)
    feedback_fn(f"* sending OS image {image} ({size} bytes) to {node}")
    with lu.progress_reporter("image", end=size) as rep, open(path, "rb") as fh:
        offset = 0
        while True:
            block = fh.read(PUSH_CHUNK)
            if not block and offset:
                break
            rpc.call_os_image_put_chunk(
                node, instance_name=instance_name, offset=offset,
                data=base64.b64encode(block).decode("ascii"),
            ).one(node, f"Could not send OS image to {node}")
            offset += len(block)
            rep.update(offset)
            if not block:
                break


def _stage_store_image(lu: LogicalUnit[Any], node: str, instance_name: str, name: str,
                       checksum: str | None, disk_mib: int,
                       feedback_fn: FeedbackFn) -> dict[str, Any]:
    """Stage store image ``name`` on ``node``: the node's cached copy when it has
    one with the recorded sha256, else pushed from the store (and then cached).
    The staged file is checked against the recorded sha256 before anything is
    written; nothing is left on the node when this raises."""
    paths = lu.context.paths
    rpc = lu.require_rpc()
    with os_image_store.using(name):
        entry = os_image_store.lookup(paths, name)
        sha = str(entry["sha256"])
        expected = f"sha256:{sha}"
        if checksum is not None and osimage.parse_checksum(checksum) != sha:
            raise errors.OpPrereqError(f"OS image {name}: checksum mismatch (expected"
                                       f" {checksum}, got {expected} from the image store)",
                                       errors.ECODE_INVAL)
        cached = damaged = False
        try:
            cached = bool(rpc.call_os_image_cache_stage(
                node, instance_name=instance_name, sha256=sha).one(
                    node, f"Could not look up the cached OS image on {node}"))
            if cached:
                feedback_fn(f"* OS image {name}: {node} has a copy (sha256:{sha[:12]}),"
                            " not sent")
            else:
                push_image(lu, node, instance_name, name,
                           os_image_store.stored_file(paths, name, entry), feedback_fn)
            facts: dict[str, Any] = rpc.call_os_image_inspect(
                node, instance_name=instance_name).one(node, "Could not inspect the OS image")
            damaged = cached and facts["sha256"] != sha
            _check_facts(name, facts, expected, disk_mib)
            if not cached:
                rpc.call_os_image_cache_keep(node, instance_name=instance_name, sha256=sha).one(
                    node, f"Could not keep the OS image in the cache of {node}")
        except BaseException:
            drop_staged(lu, node, instance_name)
            if damaged:     # a damaged copy: drop it, the next install pushes again
                rpc.call_os_image_cache_remove(node, sha256=sha)
            raise
    feedback_fn(f"* OS image {name}: {facts['what']}, {facts['virtual_size']} bytes,"
                f" sha256:{sha}")
    return facts


def drop_staged(lu: LogicalUnit[Any], node: str, instance_name: str) -> None:
    res = lu.require_rpc().call_os_image_remove(node, instance_name=instance_name).get(node)
    if res is None or res.failed:
        lu.LogWarning(f"Could not remove the staged OS image on {node}:"
                      f" {res.fail_msg if res else 'no answer'}")


def stage_image(lu: LogicalUnit[Any], node: str, instance_name: str, image: str,
                checksum: str | None, disk_mib: int, feedback_fn: FeedbackFn) -> dict[str, Any]:
    """Bring the image to ``node`` and check it there; its facts.

    Nothing is left on the node when this raises.
    """
    if imagestore.kind_of(image) == "store":
        return _stage_store_image(lu, node, instance_name, image, checksum, disk_mib,
                                  feedback_fn)
    rpc = lu.require_rpc()
    try:
        if osimage.is_url(image) or not os.path.lexists(image):
            feedback_fn(f"* fetching OS image {image} on {node}")
            rpc.call_os_image_fetch(node, instance_name=instance_name, url=image,
                                    max_size=disk_mib * MIB + 64 * MIB
                                    ).one(node, f"Could not fetch OS image {image}")
        else:
            push_image(lu, node, instance_name, image, image, feedback_fn)
        facts: dict[str, Any] = rpc.call_os_image_inspect(
            node, instance_name=instance_name).one(node, "Could not inspect the OS image")
        _check_facts(image, facts, checksum, disk_mib)
    except BaseException:
        drop_staged(lu, node, instance_name)
        raise
    feedback_fn(f"* OS image {image}: {facts['what']}, {facts['virtual_size']} bytes,"
                f" sha256:{facts['sha256']}")
    return facts


def write_image(lu: LogicalUnit[Any], node: str, instance_name: str, disk: dict[str, Any],
                facts: dict[str, Any], feedback_fn: FeedbackFn) -> None:
    """Write the staged image onto the first disk (the node removes it afterwards)."""
    feedback_fn(f"* writing the OS image to disk/0 on {node}")
    with lu.progress_reporter("image", end=int(facts["virtual_size"])) as rep:
        lu.require_rpc().call_os_image_write(
            node, instance_name=instance_name, disk=disk, image_format=str(facts["format"]),
        ).one(node, f"Could not write the OS image on {node}")
        rep.update(int(facts["virtual_size"]))


def build_seed(lu: LogicalUnit[Any], node: str, inst: Instance,
               feedback_fn: FeedbackFn) -> None:
    """(Re)build the instance's NoCloud seed on ``node``."""
    cfg = lu.cfg
    networks: dict[str, dict[str, Any]] = {}
    for nic in inst.nics:
        if nic.network:
            net = cfg.get_network(nic.network)
            if net is not None:
                networks[nic.network] = {"network": net.network, "gateway": net.gateway}
    nics = cloudinit.seed_nics([{"mac": n.mac, "ip": n.ip, "network": n.network}
                                for n in inst.nics], networks)
    feedback_fn(f"* building the cloud-init seed of {inst.name} on {node}")
    lu.require_rpc().call_instance_seed_build(
        node, instance_name=inst.name, instance_uuid=inst.uuid,
        nics=[[n.mac, n.address, n.gateway] for n in nics], osparams=dict(inst.osparams),
        osparams_private=dict(inst.osparams_private),
    ).one(node, f"Could not build the cloud-init seed on {node}")


def rename_seed(lu: LogicalUnit[Any], node: str, inst: Instance, old_name: str,
                feedback_fn: FeedbackFn) -> None:
    """The seed of a renamed instance: built under the new name, the old one removed.

    A failure is only a warning (the instance is renamed; a reinstall rebuilds it).
    """
    try:
        build_seed(lu, node, inst, feedback_fn)
        lu.require_rpc().call_instance_seed_remove(node, instance_name=old_name).one(
            node, f"Could not remove the old cloud-init seed on {node}")
    except errors.GanetiError as exc:
        lu.LogWarning(f"Could not rebuild the cloud-init seed of {inst.name}: {exc}")


def modified_seed(lu: LogicalUnit[Any], node: str, inst: Instance,
                  feedback_fn: FeedbackFn) -> None:
    """Rebuild the seed (and the metadata service's entry) after a modify of the OS
    parameters or NICs; a failure is only a warning (the next start rebuilds it)."""
    try:
        build_seed(lu, node, inst, feedback_fn)
    except errors.GanetiError as exc:
        lu.LogWarning(f"Could not rebuild the cloud-init seed of {inst.name}: {exc}")


def remove_seed(lu: LogicalUnit[Any], node: str, instance_name: str) -> None:
    """Remove an instance's seed from ``node``; a failure is only a warning."""
    res = lu.require_rpc().call_instance_seed_remove(
        node, instance_name=instance_name).get(node)
    if res is None or res.failed:
        lu.LogWarning(f"Could not remove the cloud-init seed of {instance_name} on {node}:"
                      f" {res.fail_msg if res else 'no answer'}")
